"""The content of ``data/track_record.json`` from two passes of ``ddlsim validate``
(:mod:`ddlsim.track_record` reads it; ``python scripts/track_record.py --write``
writes it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddlsim.cluster.catalog import build_cluster
from ddlsim.track_record import ASSUMED_PASS, REGIMES, regime
from ddlsim.validate.core import PREDICTED
from ddlsim.validate.stats import error_stats


def summarise(default_rows: Sequence[Any], assumed_rows: Sequence[Any]) -> dict[str, Any]:
    """The file's content from the two passes' :class:`~ddlsim.validate.core.RowResult` lists."""

    def nodes(run: Any) -> int:  # as predicted: predict's default node size where not stated
        return build_cluster(run.gpu, run.gpus, run.gpus_per_node).n_nodes

    groups: dict[str, list[tuple[Any, bool]]] = {}
    for rows, assumed in ((default_rows, False), (assumed_rows, True)):
        for r in rows:
            if r.status != PREDICTED or r.rel_error is None or r.assumption:
                continue
            key = f"{r.run.comm} | {regime(nodes(r.run))}"
            groups.setdefault(key, []).append((r, assumed))
    table = {}
    for key in sorted(groups):
        members = groups[key]
        stats = error_stats([r for r, _ in members])
        table[key] = {
            "n": stats["n"],
            "n_assumed": sum(assumed for _, assumed in members),
            "mape": round(stats["mape"], 4),
            "median_ape": round(stats["median_ape"], 4),
            "bias": round(stats["mean_rel_error"], 4),
            "worst_run_id": stats["worst_run_id"],
            "worst_rel_error": round(stats["worst_rel_error"], 4),
        }
    return {
        "what": "relative error of ddlsim's prediction (images/s, or the scaling efficiency "
        "for efficiency-only rows) against measured runs, by communication method and node "
        "count; bias > 0: ddlsim predicts faster than measured",
        "source": "ddlsim validate traces/measured/runs.csv",
        "assumed_pass": ASSUMED_PASS,
        "regimes": [label for label, _, _ in REGIMES],
        "by_comm_regime": table,
    }
