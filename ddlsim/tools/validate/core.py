"""Predict every row of a measured-runs file and compare; one bad row never stops the run.

Every row comes back as a :class:`RowResult`: ``predicted`` with the relative error of the
validated metric (``(predicted - measured) / measured``), or ``skipped`` with a short ``code``
and a reason. A row the reader rejected (:class:`~ddlsim.tools.validate.runs.RowDefect`) is a
skipped
result without a :class:`Run`; a :class:`~ddlsim.errors.DdlsimError` raised while predicting a
row becomes that row's reason (``predict-error``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddlsim.errors import DdlsimError
from ddlsim.tools.validate.baseline import BaselineIndex
from ddlsim.tools.validate.mapping import METRIC_IPS, ValidateOptions, plan_row, with_assumed_cells
from ddlsim.tools.validate.runs import RowDefect, Run, RunsFile
from ddlsim.tools.validate.transformer_mapping import plan_transformer_row

PREDICTED = "predicted"
SKIPPED = "skipped"
PREDICT_ERROR = "predict-error"
#: ``--absolute``: a row the calibration used is anchored to (not a prediction of it)
ANCHOR_ROW = "anchor-row"
#: what validation keeps of one prediction: (images/s, scaling efficiency, the run ids its
#: calibration is anchored to), or the message of the error it raised
Outcome = tuple[float, float, frozenset[str]] | str
#: ``progress(done, total, elapsed_s)``
Progress = Callable[[int, int, float], None]


@dataclass(frozen=True)
class RowResult:
    """The outcome of one row. Errors are fractions (-0.05 = predicted 5% low).

    ``run`` is ``None`` only for a row the reader rejected (``defect``); ``column`` and
    ``value`` name the cell at fault where one is; ``anchored``: compute scaled to the
    baseline's throughput; ``assumption``: the catalog assumption the prediction rests on.
    """

    run: Run | None
    status: str
    code: str = ""
    reason: str | None = None
    metric: str | None = None
    baseline: Run | None = None
    predicted_images_per_sec: float | None = None
    predicted_scaling_efficiency: float | None = None
    rel_error: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    anchored: bool = False
    assumption: str | None = None
    column: str | None = None
    value: str | None = None
    defect: RowDefect | None = None
    #: how much of the release stack its method uses the row states (``stack_cells``)
    stack: str = ""

    @classmethod
    def rejected(cls, defect: RowDefect) -> RowResult:
        """The skipped result of a row the reader rejected."""
        return cls(
            None,
            SKIPPED,
            defect.code,
            defect.reason,
            column=defect.column,
            value=defect.value,
            defect=defect,
        )

    @property
    def run_id(self) -> str:
        """The row's ``run_id`` (``""`` where a rejected row has none)."""
        return self.run.run_id if self.run else (self.defect.run_id if self.defect else "")

    @property
    def line(self) -> int | None:
        """The row's line in the file."""
        return self.run.line if self.run else (self.defect.line if self.defect else None)

    @property
    def source_id(self) -> str:
        """The row's ``source_id`` cell."""
        return self.run.source_id if self.run else (self.defect.source_id if self.defect else "")

    @property
    def measured(self) -> float | None:
        """The measured value of the validated metric."""
        if self.run is None:
            return None
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
        if run is None:
            return None
        if run.scaling_efficiency is not None:
            return run.scaling_efficiency
        if base is None or run.images_per_sec is None or not base.images_per_sec:
            return None
        return run.images_per_sec / (run.gpus * base.images_per_sec)

    def to_json(self) -> dict[str, Any]:
        """The row of ``ddlsim validate --json`` (the first seven keys are a contract)."""
        run, base = self.run, self.baseline
        return {
            "run_id": self.run_id or None,
            "status": self.status,
            "reason": self.reason,
            "predicted_images_per_sec": self.predicted_images_per_sec,
            "measured_images_per_sec": run.images_per_sec if run else None,
            "rel_error": self.rel_error,
            "baseline_run_id": base.run_id if base else None,
            "skip_code": self.code or None,
            "line": self.line,
            "column": self.column,
            "value": self.value,
            "metric": self.metric,
            "anchored": self.anchored if self.status == PREDICTED else None,
            "assumption": self.assumption,
            "source_id": self.source_id or None,
            "model": run.model if run else None,
            "gpu": run.gpu if run else None,
            "gpus": run.gpus if run else None,
            "comm": run.comm if run else None,
            "network": network_label(run) if run else None,
            "baseline_images_per_sec": base.images_per_sec if base else None,
            "predicted_scaling_efficiency": self.predicted_scaling_efficiency,
            "measured_scaling_efficiency": self.measured_scaling_efficiency,
            "notes": list(self.notes),
            "stack": self.stack or None,
        }


def anchor_run_ids(provenance: dict[str, Any]) -> set[str]:
    """Run ids of measured runs a calibration's provenance names as its anchor (at any depth:
    a re-timed or transferred file keeps its base's)."""
    ids: set[str] = set()
    while isinstance(provenance, dict):
        anchor = provenance.get("anchor")
        if isinstance(anchor, dict):
            ids.update(str(r) for r in anchor.get("run_ids", ()))
        provenance = provenance.get("base")
    return ids


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
    progress: Progress | None = None,
) -> list[RowResult]:
    """Predict each row of ``runs`` (baselines are looked up in all of ``runs``).

    ``only`` restricts which rows are validated; the others are not returned. Rows that
    predict the same configuration (the same keyword arguments of :func:`ddlsim.predict`)
    share one prediction. ``progress(done, total, elapsed_s)`` is called after each row.
    """
    opts = options or ValidateOptions()
    index = BaselineIndex(with_assumed_cells(run, opts) for run in runs)
    selected: Sequence[Run] = runs if only is None else [r for r in runs if only(r)]
    memo: dict[str, Outcome] = {}
    results = []
    start = time.perf_counter()
    for done, run in enumerate(selected, 1):
        results.append(validate_row(run, index, opts, memo))
        if progress:
            progress(done, len(selected), time.perf_counter() - start)
    return results


def validate_file(
    table: RunsFile,
    options: ValidateOptions | None = None,
    *,
    sources: Collection[str] | None = None,
    progress: Progress | None = None,
) -> list[RowResult]:
    """Every row of a leniently read file in file order: the rows the reader rejected as
    skipped results, the others predicted. ``sources`` keeps the rows of those source ids
    (baselines are still looked up in every valid row); ``progress`` as
    :func:`validate_runs`."""
    only = None if sources is None else (lambda r: r.source_id in sources)
    results = validate_runs(table.runs, options, only=only, progress=progress)
    results += [
        RowResult.rejected(d) for d in table.defects if sources is None or d.source_id in sources
    ]
    return sorted(results, key=lambda r: r.line or 0)


def predict_outcome(kwargs: dict[str, Any], memo: dict[str, Outcome] | None = None) -> Outcome:
    """What validation reads of ``predict(**kwargs)``: images/s, the scaling efficiency and the
    run ids the calibration is anchored to, or the one-line message of its
    :class:`DdlsimError`; looked up in (and added to) ``memo`` by the complete keyword
    arguments."""
    from ddlsim.api import predict

    key = json.dumps(kwargs, sort_keys=True, default=repr)
    if memo is not None and key in memo:
        return memo[key]
    try:
        pred = predict(**kwargs)
    except DdlsimError as exc:
        outcome: Outcome = " ".join(str(exc).split())
    else:
        anchors = frozenset(anchor_run_ids(pred.inputs["calibration"]["provenance"]))
        outcome = (float(pred.images_per_sec), float(pred.scaling_efficiency), anchors)
    if memo is not None:
        memo[key] = outcome
    return outcome


def validate_row(
    run: Run,
    index: BaselineIndex,
    options: ValidateOptions,
    memo: dict[str, Outcome] | None = None,
) -> RowResult:
    """Predict one row; a :class:`DdlsimError` becomes the skip reason. ``memo``: predictions
    already made in this run (:func:`predict_outcome`)."""
    plan = (plan_row if run.schema == "cnn" else plan_transformer_row)(run, index, options)
    if plan.kwargs is None:
        return RowResult(
            run,
            SKIPPED,
            plan.code,
            plan.reason,
            baseline=plan.baseline,
            column=plan.column,
            value=plan.value,
        )
    outcome = predict_outcome(plan.kwargs, memo)
    if isinstance(outcome, str):
        return RowResult(
            run,
            SKIPPED,
            PREDICT_ERROR,
            outcome,
            plan.metric,
            plan.baseline,
            notes=plan.notes,
            assumption=plan.assumption,
        )
    ips, eff, anchors = outcome
    if options.absolute and run.run_id in anchors:
        return RowResult(
            run,
            SKIPPED,
            ANCHOR_ROW,
            "the shipped calibration is anchored to this run: it reproduces it by construction, "
            "so it is no test of the compute model",
            plan.metric,
            notes=plan.notes,
        )
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
        anchored=plan.anchored,
        assumption=plan.assumption,
        stack=plan.stack,
    )
