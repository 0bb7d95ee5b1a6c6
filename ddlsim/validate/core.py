"""Predict every row of a measured-runs file and compare; one bad row never stops the run.

Every row comes back as a :class:`RowResult`: ``predicted`` with the relative error of the
validated metric (``(predicted - measured) / measured``), or ``skipped`` with a reason. A
:class:`~ddlsim.errors.DdlsimError` raised while predicting a row becomes that row's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddlsim.errors import DdlsimError
from ddlsim.validate.baseline import BaselineIndex
from ddlsim.validate.mapping import METRIC_IPS, ValidateOptions, plan_row
from ddlsim.validate.runs import Run

PREDICTED = "predicted"
SKIPPED = "skipped"


@dataclass(frozen=True)
class RowResult:
    """The outcome of one row. Errors are fractions (-0.05 = predicted 5% low)."""

    run: Run
    status: str
    code: str = ""
    reason: str | None = None
    metric: str | None = None
    baseline: Run | None = None
    predicted_images_per_sec: float | None = None
    predicted_scaling_efficiency: float | None = None
    rel_error: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def measured(self) -> float | None:
        """The measured value of the validated metric."""
        if self.metric == METRIC_IPS:
            return self.run.images_per_sec
        return self.run.scaling_efficiency

    @property
    def predicted(self) -> float | None:
        """The predicted value of the validated metric."""
        if self.metric == METRIC_IPS:
            return self.predicted_images_per_sec
        return self.predicted_scaling_efficiency

    @property
    def measured_scaling_efficiency(self) -> float | None:
        """Stated efficiency, else measured images/s over ``gpus`` x the baseline's."""
        run, base = self.run, self.baseline
        if run.scaling_efficiency is not None:
            return run.scaling_efficiency
        if base is None or run.images_per_sec is None or not base.images_per_sec:
            return None
        return run.images_per_sec / (run.gpus * base.images_per_sec)

    def to_json(self) -> dict[str, Any]:
        """The row of ``ddlsim validate --json`` (the first seven keys are a contract)."""
        run, base = self.run, self.baseline
        return {
            "run_id": run.run_id,
            "status": self.status,
            "reason": self.reason,
            "predicted_images_per_sec": self.predicted_images_per_sec,
            "measured_images_per_sec": run.images_per_sec,
            "rel_error": self.rel_error,
            "baseline_run_id": base.run_id if base else None,
            "skip_code": self.code or None,
            "metric": self.metric,
            "source_id": run.source_id,
            "model": run.model,
            "gpu": run.gpu,
            "gpus": run.gpus,
            "comm": run.comm,
            "network": network_label(run),
            "baseline_images_per_sec": base.images_per_sec if base else None,
            "predicted_scaling_efficiency": self.predicted_scaling_efficiency,
            "measured_scaling_efficiency": self.measured_scaling_efficiency,
            "notes": list(self.notes),
        }


def network_label(run: Run) -> str:
    """The row's network for grouping: ``none`` single-node, else ``<inter_node> <transport>``."""
    if not run.multi_node:
        return "none"
    net = run.inter_node or "(not stated)"
    return f"{net} {run.transport}" if run.transport else net


def validate_runs(
    runs: Sequence[Run],
    options: ValidateOptions | None = None,
    *,
    only: Callable[[Run], bool] | None = None,
) -> list[RowResult]:
    """Predict each row of ``runs`` (baselines are looked up in all of ``runs``).

    ``only`` restricts which rows are validated; the others are not returned.
    """
    opts = options or ValidateOptions()
    index = BaselineIndex(runs)
    selected: Iterable[Run] = runs if only is None else filter(only, runs)
    return [validate_row(run, index, opts) for run in selected]


def validate_row(run: Run, index: BaselineIndex, options: ValidateOptions) -> RowResult:
    """Predict one row; a :class:`DdlsimError` becomes the skip reason."""
    from ddlsim.api import predict

    plan = plan_row(run, index, options)
    if plan.kwargs is None:
        return RowResult(run, SKIPPED, plan.code, plan.reason, baseline=plan.baseline)
    try:
        pred = predict(**plan.kwargs)
    except DdlsimError as exc:
        message = " ".join(str(exc).split())
        return RowResult(
            run, SKIPPED, "predict-error", message, plan.metric, plan.baseline, notes=plan.notes
        )
    ips, eff = float(pred.images_per_sec), float(pred.scaling_efficiency)
    if plan.metric == METRIC_IPS:
        predicted, measured = ips, run.images_per_sec
    else:
        predicted, measured = eff, run.scaling_efficiency
    assert measured is not None  # plan_row picks a metric the row states
    return RowResult(
        run,
        PREDICTED,
        metric=plan.metric,
        baseline=plan.baseline,
        predicted_images_per_sec=ips,
        predicted_scaling_efficiency=eff,
        rel_error=predicted / measured - 1.0,
        notes=plan.notes,
    )
