"""The content of ``data/track_record.json`` from two passes of ``ddlsim validate``
(:mod:`ddlsim.config.track_record` reads it; ``python scripts/track_record.py --write``
writes it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddlsim.config.track_record import ASSUMED_PASS, REGIMES, regime
from ddlsim.tools.validate.core import PREDICTED
from ddlsim.tools.validate.stats import error_stats, run_nodes


def _entry(rows: Sequence[Any]) -> dict[str, Any]:
    stats = error_stats(rows)
    return {
        "n": stats["n"],
        "mape": round(stats["mape"], 4),
        "median_ape": round(stats["median_ape"], 4),
        "bias": round(stats["mean_rel_error"], 4),
        "worst_run_id": stats["worst_run_id"],
        "worst_rel_error": round(stats["worst_rel_error"], 4),
    }


def _precision(run: Any) -> str:
    """The row's precision as predict names it (a transformer row's ``amp`` + ``bf16`` variant
    is ``bf16``, + ``fp8`` is ``fp8``)."""
    if getattr(run, "schema", "") != "transformers":
        return run.precision
    from ddlsim.tools.validate.transformer_mapping import numerics_kwargs

    return numerics_kwargs(run)[0].get("precision", run.precision)


def _framework(run: Any) -> str:
    from ddlsim.tools.validate.transformer_mapping import FRAMEWORK_NAMES

    return FRAMEWORK_NAMES.get(run.framework, run.framework) or "not stated"


def summarise_absolute(rows: Sequence[Any], by_framework: bool = False) -> dict[str, Any]:
    """The 1-GPU rows of a ``validate --absolute`` pass by ``"<gpu> | <precision>"`` (with
    ``by_framework``: ``"<gpu> | <precision> | <framework>"``)."""
    groups: dict[str, list[Any]] = {}
    for r in rows:
        if r.status != PREDICTED or r.rel_error is None or r.run.gpus != 1:
            continue
        key = f"{r.run.gpu} | {_precision(r.run)}"
        if by_framework:
            key += f" | {_framework(r.run)}"
        groups.setdefault(key, []).append(r)
    return {key: _entry(groups[key]) for key in sorted(groups)}


def _by_comm_regime(passes: Sequence[tuple[Sequence[Any], bool]]) -> dict[str, Any]:
    """The predicted rows of ``(rows, assumed)`` passes by ``"<comm> | <regime>"``, with how
    many came from an assumed pass (rows under a catalog assumption left out)."""
    groups: dict[str, list[tuple[Any, bool]]] = {}
    for rows, assumed in passes:
        for r in rows:
            if r.status != PREDICTED or r.rel_error is None or r.assumption:
                continue
            key = f"{r.run.comm} | {regime(run_nodes(r.run))}"
            groups.setdefault(key, []).append((r, assumed))
    return {
        key: {
            **_entry([r for r, _ in groups[key]]),
            "n_assumed": sum(assumed for _, assumed in groups[key]),
        }
        for key in sorted(groups)
    }


def summarise_transformers(default_rows: Sequence[Any], absolute_rows: Sequence[Any]) -> dict:
    """The transformer families (traces/measured/runs_transformers.csv): by method and node
    count from the anchored pass, the sharded methods (validated without an anchor) from the
    ``--absolute`` pass, and the 1-GPU compute by GPU, precision (and framework)."""
    from ddlsim.comm import SHARDED_METHODS

    anchored = [r for r in default_rows if r.run is None or r.run.comm not in SHARDED_METHODS]
    sharded = [r for r in absolute_rows if r.run is not None and r.run.comm in SHARDED_METHODS]
    return {
        "source": "ddlsim validate traces/measured/runs_transformers.csv (anchored; the "
        "sharded methods and the 1-GPU compute with --absolute)",
        "by_comm_regime": _by_comm_regime(((anchored, False), (sharded, False))),
        "absolute_by_gpu_precision": summarise_absolute(absolute_rows),
        "absolute_by_gpu_precision_framework": summarise_absolute(absolute_rows, True),
    }


def summarise(
    default_rows: Sequence[Any],
    assumed_rows: Sequence[Any],
    absolute_rows: Sequence[Any] = (),
    transformers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The file's content from the passes' :class:`~ddlsim.tools.validate.core.RowResult` lists:
    the default (anchored) pass, the large-N rows under their era's configuration, and an
    ``--absolute`` pass whose 1-GPU rows give the compute's own error per GPU and precision."""

    table = _by_comm_regime(((default_rows, False), (assumed_rows, True)))
    return {
        "what": "relative error of ddlsim's prediction (images/s, or the scaling efficiency "
        "for efficiency-only rows) against measured runs, by communication method and node "
        "count; bias > 0: ddlsim predicts faster than measured",
        "source": "ddlsim validate traces/measured/runs.csv and runs_modern.csv",
        "assumed_pass": ASSUMED_PASS,
        "regimes": [label for label, _, _ in REGIMES],
        "by_comm_regime": table,
        "absolute_what": "1-GPU rows predicted from the shipped compute calibration with no "
        "per-row anchor (ddlsim validate --absolute), by GPU and precision, and by GPU, "
        "precision and framework (each row's stack from its framework and variant); "
        "calibrations anchored to a measured run of the same configuration reproduce it by "
        "construction and are left out",
        "absolute_by_gpu_precision": summarise_absolute(absolute_rows),
        "absolute_by_gpu_precision_framework": summarise_absolute(absolute_rows, True),
        **({"transformers": transformers} if transformers else {}),
    }
