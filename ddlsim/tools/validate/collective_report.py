"""Summary and text report of ``ddlsim validate`` on a measured-collectives file.

MAPE per setup, per size band (< 64 KiB, 64 KiB - 16 MiB, > 16 MiB) and per setup and band,
with the same statistics as the measured-runs report (:func:`ddlsim.tools.validate.stats`
conventions: fractions; bias = mean signed error, positive = ddlsim predicts a longer time).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ddlsim.tools.validate.collectives import BANDS, PREDICTED, CollectiveResult


def stats(results: Sequence[CollectiveResult]) -> dict[str, Any]:
    """n, MAPE, median and 90th percentile of the absolute error, bias, worst row."""
    rows = [r for r in results if r.status == PREDICTED and r.rel_error is not None]
    if not rows:
        return {"n": 0, "mape": None, "median_ape": None, "p90_ape": None, "bias": None}
    err = np.array([r.rel_error for r in rows], dtype=float)
    return {
        "n": len(rows),
        "mape": float(np.abs(err).mean()),
        "median_ape": float(np.median(np.abs(err))),
        "p90_ape": float(np.percentile(np.abs(err), 90)),
        "bias": float(err.mean()),
    }


def summarise(results: Sequence[CollectiveResult]) -> dict[str, Any]:
    """The ``summary`` object: overall, by setup, by band, by setup and band, skips."""
    predicted = [r for r in results if r.status == PREDICTED]
    by_setup: dict[str, list[CollectiveResult]] = defaultdict(list)
    by_band: dict[str, list[CollectiveResult]] = defaultdict(list)
    cell: dict[tuple[str, str], list[CollectiveResult]] = defaultdict(list)
    for r in predicted:
        band = r.band or ""
        by_setup[r.row.setup_id].append(r)
        by_band[band].append(r)
        cell[(r.row.setup_id, band)].append(r)
    skipped: dict[str, dict[str, Any]] = {}
    for r in results:
        if r.status != PREDICTED:
            entry = skipped.setdefault(r.row.setup_id, {"rows": 0, "reasons": Counter()})
            entry["rows"] += 1
            entry["reasons"][f"[{r.code}] {r.reason}"] += 1
    return {
        "n_rows": len(results),
        "n_predicted": len(predicted),
        "n_skipped": len(results) - len(predicted),
        "overall": stats(predicted),
        "by_setup": {k: stats(v) for k, v in sorted(by_setup.items())},
        "by_band": {name: stats(by_band[name]) for name, _, _ in BANDS if name in by_band},
        "by_setup_band": {
            setup: {
                band: stats(cell[(setup, band)]) for band, _, _ in BANDS if (setup, band) in cell
            }
            for setup in sorted(by_setup)
        },
        "skipped_setups": {
            k: {"rows": v["rows"], "reasons": dict(v["reasons"])}
            for k, v in sorted(skipped.items())
        },
    }


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def _line(label: str, st: dict[str, Any], indent: int = 0) -> str:
    return (
        f"{' ' * indent}{label:<{34 - indent}}{st['n']:>4}{_pct(st['mape']):>8}"
        f"{_pct(st['median_ape']):>8}{_pct(st['bias'], True):>9}"
    )


def format_report(path: str, results: Sequence[CollectiveResult], summary: dict[str, Any]) -> str:
    """The text report: every predicted row, MAPE per setup and band, skipped setups."""
    out = [
        f"ddlsim validate (collectives): {path}",
        f"{summary['n_rows']} rows: {summary['n_predicted']} predicted, "
        f"{summary['n_skipped']} skipped",
        "model: horovod-nccl as predict builds it (catalog cluster, the row's NCCL version);",
        "error = predicted / measured time - 1; basis: time, busbw (time implied by the bus "
        "bandwidth), plateau (no size: compared at 1 GiB)",
        "",
        f"{'setup':<34}{'size (B)':>12}{'measured us':>13}{'predicted us':>14}{'error':>9}"
        f"  {'basis':<8}ran",
    ]
    for r in results:
        if r.status != PREDICTED:
            continue
        ran = "/".join(v for v in (r.label.get("algorithm"), r.label.get("protocol")) if v)
        out.append(
            f"{r.row.setup_id:<34}{r.size_bytes:>12.0f}{r.measured_s * 1e6:>13.1f}"
            f"{r.predicted_s * 1e6:>14.1f}{_pct(r.rel_error, True):>9}  {r.basis:<8}{ran}"
        )
    out += ["", f"{'group':<34}{'n':>4}{'MAPE':>8}{'median':>8}{'bias':>9}"]
    out.append(_line("all predicted rows", summary["overall"]))
    out.append("by size band")
    out += [_line(band, st, 2) for band, st in summary["by_band"].items()]
    out.append("by setup (and band)")
    for setup, st in summary["by_setup"].items():
        out.append(_line(setup, st, 2))
        out += [_line(band, b, 4) for band, b in summary["by_setup_band"][setup].items()]
    if summary["skipped_setups"]:
        out += ["", "skipped rows, by setup"]
        for setup, entry in summary["skipped_setups"].items():
            for reason, count in entry["reasons"].items():
                out.append(f"  {setup} ({count}): {reason}")
    return "\n".join(out) + "\n"
