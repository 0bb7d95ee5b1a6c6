"""Text report of ``ddlsim validate``: per-row table, error summary, skipped rows with reasons."""

from __future__ import annotations

import textwrap
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ddlsim.tools.validate.core import PREDICTED, RowResult, network_label
from ddlsim.tools.validate.mapping import METRIC_IPS
from ddlsim.tools.validate.stats import worst_rows

_GROUP_TITLES = {
    "by_source": "by source",
    "by_comm": "by comm method",
    "by_gpu": "by GPU",
    "by_network": "by network",
    "by_metric": "by validated metric",
    "by_compute": "by compute calibration",
    "by_stack": "by release stack (NCCL, Horovod) the method uses",
    "by_gpu_precision_framework": "by GPU, precision and framework",
    "by_method_nodes": "by comm method and node count",
    "single_gpu_by_gpu_precision_framework": "1-GPU rows by GPU, precision and framework",
}


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value * 100:+.1f}%" if signed else f"{value * 100:.1f}%"


def _value(row: RowResult, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if row.metric == METRIC_IPS else f"eff {value:.3f}"


def format_rows(results: Sequence[RowResult]) -> list[str]:
    """One line per predicted row: measured, predicted, error and baseline (a column widens to
    its longest cell, e.g. ``transformer-xl-large``)."""
    rows = [row for row in results if row.status == PREDICTED and row.run is not None]
    id_w = max([24, *(len(row.run.run_id) for row in rows)]) + 1
    model_w = max([13, *(len(row.run.model) for row in rows)]) + 1
    comm_w = max([22, *(len(row.run.comm) for row in rows)]) + 1
    lines = [
        f"{'run_id':<{id_w}}{'model':<{model_w}}{'comm':<{comm_w}}{'gpus':>5}  {'network':<12}"
        f"{'measured':>11}{'predicted':>11}{'error':>9}  baseline"
    ]
    for row in rows:
        run = row.run
        base = row.baseline.run_id if row.baseline else "not anchored"
        flag = "  [catalog assumption]" if row.assumption else ""
        lines.append(
            f"{run.run_id:<{id_w}}{run.model:<{model_w}}{run.comm:<{comm_w}}{run.gpus:>5}  "
            f"{network_label(run):<12}{_value(row, row.measured):>11}"
            f"{_value(row, row.predicted):>11}{_pct(row.rel_error, True):>9}  {base}{flag}"
        )
    return lines


def _stats_line(label: str, stats: dict[str, Any], indent: int) -> str:
    worst = f"{_pct(stats['worst_rel_error'], True)} {stats['worst_run_id']}" if stats["n"] else "-"
    return (
        f"{' ' * indent}{label:<{28 - indent}}{stats['n']:>5}{_pct(stats['mape']):>8}"
        f"{_pct(stats['median_ape']):>8}{_pct(stats['p90_ape']):>8}"
        f"{_pct(stats['mean_rel_error'], True):>9}  {worst}"
    )


def format_summary(summary: dict[str, Any]) -> list[str]:
    """The error table: the headline (rows without a catalog assumption) and its groupings,
    then the rows predicted under a catalog assumption on their own."""
    assumed = summary["catalog_assumption"]
    headline = "rows without assumption" if assumed["overall"]["n"] else "all predicted rows"
    lines = [
        f"{'group':<28}{'n':>5}{'MAPE':>8}{'median':>8}{'p90':>8}{'bias':>9}  worst",
        _stats_line(headline, summary["overall"], 0),
    ]
    for key, title in _GROUP_TITLES.items():
        if key not in summary:
            continue
        lines.append(title)
        lines.extend(_stats_line(name, st, 2) for name, st in summary[key].items())
    if assumed["overall"]["n"]:
        lines.append("under a catalog assumption (not in the rows above)")
        lines.append(_stats_line("all such rows", assumed["overall"], 2))
        lines.extend(_stats_line(name, st, 4) for name, st in assumed["by_network"].items())
        lines.extend(f"  assumption: {text}" for text in assumed["assumptions"])
    return lines


def format_skipped(results: Sequence[RowResult]) -> list[str]:
    """Skipped rows: a bad cell or row one line each (line, run id, reason), the others
    grouped by reason with every run id listed."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    lines = []
    for row in results:
        if row.status == PREDICTED:
            continue
        if row.defect is not None or row.column is not None:
            lines.append(
                f"  [{row.code}] line {row.line} {row.run_id or '(no run_id)'}: {row.reason}"
            )
        else:
            groups[(row.code, row.reason or "")].append(row.run_id)
    for (code, reason), ids in groups.items():
        lines.append(f"  [{code}] {reason} ({len(ids)}):")
        lines.extend(
            textwrap.wrap(" ".join(ids), 96, initial_indent="    ", subsequent_indent="    ")
        )
    return lines


def format_report(
    path: str, results: Sequence[RowResult], summary: dict[str, Any], n_worst: int = 10
) -> str:
    """The whole text report."""
    n_pred = summary["n_predicted"]
    n_assumed = summary["n_under_catalog_assumption"]
    n_loose = summary["n_not_anchored"]
    parts = [f"{n_assumed} under a catalog assumption"] if n_assumed else []
    parts += [f"{n_loose} not anchored"] if n_loose else []
    detail = f" ({', '.join(parts)})" if parts else ""
    out = [
        f"ddlsim validate: {path}",
        f"{summary['n_rows']} rows: {n_pred} predicted{detail}, {summary['n_skipped']} skipped",
        "compute NOT anchored: every row, 1-GPU rows included, from ddlsim's own per-layer "
        "model (--absolute)"
        if summary.get("absolute")
        else "compute anchored to each row's single-GPU baseline; efficiency-only rows without "
        "one: shipped calibration",
        "error = predicted / measured - 1 (images/s; 'eff' rows: scaling efficiency)",
        "",
    ]
    if n_pred:
        out += [*format_rows(results), "", "summary (absolute errors; bias = mean signed error)"]
        out += format_summary(summary)
        out += ["", f"worst {min(n_worst, n_pred)} rows"]
        for row in worst_rows(results, n_worst):
            assert row.run is not None  # a predicted row has one
            said = [*row.notes, *([f"assumption: {row.assumption}"] if row.assumption else [])]
            notes = f"  [{'; '.join(said)}]" if said else ""
            out.append(
                f"  {row.run.run_id:<25}{_pct(row.rel_error, True):>9}  {row.run.model} "
                f"{row.run.gpu} x{row.run.gpus} {row.run.comm} {network_label(row.run)}{notes}"
            )
    if summary["n_skipped"]:
        out += ["", f"skipped rows ({summary['n_skipped']})", *format_skipped(results)]
    return "\n".join(out) + "\n"


def format_side_by_side(summary: dict[str, Any]) -> str:
    """``validate --absolute``: per GPU, precision and framework, the absolute error of
    ddlsim's own compute beside the anchored (scaling) error of the same rows' group."""
    absolute = summary.get("by_gpu_precision_framework", {})
    anchored = summary.get("anchored_by_gpu_precision_framework", {})
    lines = [
        "",
        "absolute (ddlsim's own compute) vs anchored (scaling only), by GPU, precision and "
        "framework",
        f"{'group':<34}{'n abs':>6}{'MAPE':>8}{'bias':>9}  {'n anch':>6}{'MAPE':>8}{'bias':>9}",
    ]
    for name in sorted({*absolute, *anchored}):
        a, b = absolute.get(name), anchored.get(name)
        cells = []
        for st in (a, b):
            if st and st["n"]:
                cells.append(
                    f"{st['n']:>6}{_pct(st['mape']):>8}{_pct(st['mean_rel_error'], True):>9}"
                )
            else:
                cells.append(f"{0:>6}{'-':>8}{'-':>9}")
        lines.append(f"{name:<34}{cells[0]}  {cells[1]}")
    return "\n".join(lines) + "\n"
