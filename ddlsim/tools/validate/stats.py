"""Error statistics of a validation: overall and by source, method, GPU and network.

Every figure is a fraction (0.05 = 5%): ``mape`` (mean absolute relative error), ``median_ape``,
``p90_ape`` (90th percentile of the absolute error, linear interpolation), ``mean_rel_error``
(signed: positive = ddlsim over-predicts), and the worst row with its signed error. Rows whose
metric is the scaling efficiency count with the error of the efficiency; with the compute
anchored to the baseline the two errors are the same quantity (predicted / measured speed-up).

The headline (``overall`` and the groupings) covers the predicted rows that rest on no catalog
assumption; rows predicted under one (a network whose bandwidth the source does not state) are
summarised on their own under ``catalog_assumption``, never mixed into the headline.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddlsim.config.groups import SystemConfig
from ddlsim.config.track_record import regime
from ddlsim.resolve.system import resolve_system
from ddlsim.tools.validate.core import PREDICTED, RowResult, network_label
from ddlsim.tools.validate.runs import Run

#: summary groupings: JSON key -> row attribute
GROUPS: dict[str, Callable[[RowResult], str]] = {
    "by_source": lambda r: r.source_id or "(none)",
    "by_comm": lambda r: r.run.comm,
    "by_gpu": lambda r: r.run.gpu,
    "by_network": lambda r: network_label(r.run),
    "by_metric": lambda r: r.metric or "",
    "by_compute": lambda r: "anchored" if r.anchored else "not anchored",
    "by_stack": lambda r: r.stack or "(not labelled)",
}
#: the grouping of ``validate --absolute``: what sets one GPU's speed
STACK_GROUP = "by_gpu_precision_framework"
#: the groupings of a transformer file (``traces/measured/README_transformers.md``): the
#: scaling error by method and node count, and (``--absolute``) the 1-GPU rows' own error
METHOD_NODES_GROUP = "by_method_nodes"
SINGLE_STACK_GROUP = "single_gpu_by_gpu_precision_framework"


def run_nodes(run: Run) -> int:
    """The nodes a row runs on, as predicted: predict's default node size where not stated."""
    if run.gpus_per_node:
        return -(-run.gpus // run.gpus_per_node)
    system = SystemConfig(gpus=run.gpus, gpu=run.gpu, gpus_per_node=run.gpus_per_node)
    return resolve_system(system, run.gpu).n_nodes


def method_nodes_label(r: RowResult) -> str:
    """``ddp | 2-8 nodes``: the row's method and node-count regime."""
    return f"{r.run.comm} | {regime(run_nodes(r.run))}"


def stack_label(r: RowResult) -> str:
    """``a100 fp32/tf32 pytorch``: the GPU, the numerics (TF32 where the row says so) and the
    framework of a row."""
    run = r.run
    numerics = "".join(f"/{t}" for t in ("tf32", "bf16", "fp8") if t in run.variant)
    return f"{run.gpu} {run.precision or '?'}{numerics} {run.framework or '?'}"


def error_stats(results: Sequence[RowResult]) -> dict[str, Any]:
    """Statistics of the predicted rows among ``results`` (``n`` = 0: figures are None)."""
    rows = [r for r in results if r.status == PREDICTED and r.rel_error is not None]
    if not rows:
        return {
            "n": 0,
            "mape": None,
            "median_ape": None,
            "p90_ape": None,
            "mean_rel_error": None,
            "worst_run_id": None,
            "worst_rel_error": None,
        }
    errors = np.array([r.rel_error for r in rows], dtype=float)
    ape = np.abs(errors)
    worst = int(np.argmax(ape))
    return {
        "n": len(rows),
        "mape": float(ape.mean()),
        "median_ape": float(np.median(ape)),
        "p90_ape": float(np.percentile(ape, 90)),
        "mean_rel_error": float(errors.mean()),
        "worst_run_id": rows[worst].run.run_id,
        "worst_rel_error": float(errors[worst]),
    }


def grouped(rows: Sequence[RowResult], label: Callable[[RowResult], str]) -> dict[str, Any]:
    """:func:`error_stats` of ``rows`` grouped by ``label``, groups sorted by name."""
    groups: dict[str, list[RowResult]] = defaultdict(list)
    for row in rows:
        groups[label(row)].append(row)
    return {name: error_stats(groups[name]) for name in sorted(groups)}


def summarise(results: Sequence[RowResult], *, absolute: bool = False) -> dict[str, Any]:
    """The ``summary`` object of ``ddlsim validate --json`` (``absolute``: with the grouping
    by GPU, precision and framework, :data:`STACK_GROUP`)."""
    predicted = [r for r in results if r.status == PREDICTED]
    headline = [r for r in predicted if r.assumption is None]
    assumed = [r for r in predicted if r.assumption is not None]
    summary: dict[str, Any] = {
        "n_rows": len(results),
        "n_predicted": len(predicted),
        "n_skipped": len(results) - len(predicted),
        "n_under_catalog_assumption": len(assumed),
        "n_not_anchored": sum(1 for r in predicted if not r.anchored),
        "skipped_by_code": dict(Counter(r.code for r in results if r.status != PREDICTED)),
        "overall": error_stats(headline),
    }
    for key, label in GROUPS.items():
        summary[key] = grouped(headline, label)
    if not any(r.stack for r in headline):  # a file whose rows carry no stack label
        del summary["by_stack"]
    if absolute:
        summary["absolute"] = True
        summary[STACK_GROUP] = grouped(headline, stack_label)
    if any(r.run is not None and r.run.schema != "cnn" for r in results):
        summary[METHOD_NODES_GROUP] = grouped(headline, method_nodes_label)
        if absolute:
            single = [r for r in headline if r.run.gpus == 1]
            summary[SINGLE_STACK_GROUP] = grouped(single, stack_label)
    summary["catalog_assumption"] = {
        "overall": error_stats(assumed),
        "by_network": grouped(assumed, GROUPS["by_network"]),
        "assumptions": sorted({r.assumption for r in assumed if r.assumption}),
    }
    return summary


def worst_rows(results: Sequence[RowResult], n: int = 10) -> list[RowResult]:
    """The ``n`` predicted rows with the largest absolute error, largest first."""
    rows = [r for r in results if r.status == PREDICTED and r.rel_error is not None]
    return sorted(rows, key=lambda r: abs(r.rel_error or 0.0), reverse=True)[:n]
