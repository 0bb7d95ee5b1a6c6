"""``ddlsim validate --plot``: predicted vs measured, and scaling curves per configuration family.

The figure (PNG, matplotlib's Agg canvas, no display needed) has two parts:

- a log-log scatter of predicted against measured images/s, coloured by comm method, with the
  y = x line and a +-10% band (rows validated on the efficiency have no measured images/s and
  are left out);
- beside it, a panel for each of the :data:`TOP_FAMILIES` worst *families* (the largest mean
  absolute error): rows sharing a baseline, a comm method, a variant and a network, i.e. the
  same configuration at different GPU counts. Each panel shows measured (solid) and predicted
  (dashed) images/s against GPUs (linear axes), from the baseline at 1 GPU, and linear
  scaling (grey, dotted); rows at one GPU count (a family measured several times) are points.
  With ``--absolute`` no row has a baseline: the figure is the scatter alone.

matplotlib is an optional dependency (the ``plot`` extra), imported only here.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ddlsim.atomic import atomic_write
from ddlsim.execution.strategy import COMM_METHODS
from ddlsim.extras import require
from ddlsim.tools.analysis.plot import figure_format
from ddlsim.tools.validate.core import PREDICTED, RowResult, network_label
from ddlsim.tools.validate.mapping import METRIC_IPS

#: families drawn: the worst (largest mean |error|), so the panels stay readable
TOP_FAMILIES = 12
PANEL_COLUMNS = 3
#: the figure's resolution: 100 dpi with 9-10 pt text is legible at the figure's own size
DPI = 100


def _matplotlib():
    require("matplotlib", "plot", "--plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return Figure, FigureCanvasAgg


def families(results: Sequence[RowResult]) -> dict[tuple[str, ...], list[RowResult]]:
    """Predicted images/s rows grouped by (baseline run id, comm, variant, network), sorted by
    GPUs: one network per family, so a family's line runs once through the GPU counts."""
    out: dict[tuple[str, ...], list[RowResult]] = defaultdict(list)
    for row in results:
        if row.status == PREDICTED and row.baseline and row.run.images_per_sec is not None:
            run = row.run
            out[(row.baseline.run_id, run.comm, run.variant_text, network_label(run))].append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r.run.gpus)
    return dict(out)


def worst_families(
    results: Sequence[RowResult], n: int = TOP_FAMILIES
) -> tuple[list[tuple[tuple[str, ...], list[RowResult]]], int]:
    """The ``n`` families of the largest mean absolute error (ties: more rows first), and how
    many families there are."""

    def mean_error(rows: list[RowResult]) -> float:
        return sum(abs(r.rel_error or 0.0) for r in rows) / len(rows)

    fams = sorted(families(results).items(), key=lambda kv: (-mean_error(kv[1]), -len(kv[1])))
    return fams[:n], len(fams)


#: what a row's ``comm`` may say besides a method: a 1-GPU row, a method ddlsim does not model,
#: nothing
OTHER_COMMS = ("single", "other", "(comm not stated)")


def _colours() -> dict[str, str]:
    """One colour per method and per :data:`OTHER_COMMS` value, none shared (matplotlib's 20
    ``tab20`` colours; more values than that would cycle)."""
    from matplotlib import colormaps

    palette = colormaps["tab20"].colors
    keys = (*COMM_METHODS, *OTHER_COMMS)
    return {m: palette[(2 * i) % 20 + (2 * i) // 20 % 2] for i, m in enumerate(keys)}


def plot_validation(
    results: Sequence[RowResult], path: str | os.PathLike[str], title: str = ""
) -> None:
    """Draw :func:`validation_figure` into ``path``, written atomically."""
    fig = validation_figure(results, title)
    fmt = figure_format(path)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=DPI))


def validation_figure(results: Sequence[RowResult], title: str = "") -> Any:
    """The validation figure: the scatter, and beside it the :data:`TOP_FAMILIES` worst
    families (none where no row has a baseline: ``--absolute``)."""
    Figure, FigureCanvasAgg = _matplotlib()
    shown, total = worst_families(results)
    n_rows = math.ceil(len(shown) / PANEL_COLUMNS)
    width = 7.5 + (3.8 * PANEL_COLUMNS if shown else 0.0)
    fig = Figure(figsize=(width, max(7.5, 2.6 * n_rows + 1.0)), layout="constrained")
    FigureCanvasAgg(fig)
    if shown:
        left, right = fig.subfigures(1, 2, width_ratios=[7.5, 3.8 * PANEL_COLUMNS])
        _scatter(left.add_subplot(), results)
        axes = right.subplots(n_rows, PANEL_COLUMNS, squeeze=False)
        for ax, (key, rows) in zip(axes.flat, shown, strict=False):
            _family_panel(ax, key, rows)
        for ax in list(axes.flat)[len(shown) :]:
            ax.remove()
        right.suptitle(
            f"the {len(shown)} worst of {total} configuration families (largest mean |error|): "
            "measured (solid), predicted (dashed), linear (dotted)",
            fontsize=10,
        )
        right.supxlabel("GPUs", fontsize=10)
        right.supylabel("images/s", fontsize=10)
    else:
        _scatter(fig.add_subplot(), results)
    fig.suptitle(f"ddlsim validate{': ' + title if title else ''}", fontsize=12)
    return fig


def _scatter(ax, results: Sequence[RowResult]) -> None:
    colours = _colours()
    rows = [r for r in results if r.status == PREDICTED and r.metric == METRIC_IPS]
    by_comm: dict[str, list[RowResult]] = defaultdict(list)
    for row in rows:
        by_comm[row.run.comm or "(comm not stated)"].append(row)
    values = [v for r in rows for v in (r.measured or 1.0, r.predicted or 1.0)] or [1.0, 10.0]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    line = [lo, hi]
    ax.fill_between(line, [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.85", label="+-10%")
    ax.plot(line, line, color="0.3", lw=1, label="y = x")
    for comm, group in sorted(by_comm.items()):
        ax.scatter(
            [r.measured for r in group],
            [r.predicted for r in group],
            s=18,
            color=colours.get(comm, "k"),
            label=f"{comm} ({len(group)})",
            alpha=0.8,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured images/s")
    how = (
        "anchored to the 1-GPU baseline"
        if any(r.anchored for r in rows)
        else "no anchor: ddlsim's own compute"
    )
    ax.set_ylabel(f"predicted images/s ({how})")
    ax.set_title(f"predicted vs measured, {len(rows)} rows", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)


def _family_panel(ax, key: tuple[str, ...], rows: list[RowResult]) -> None:
    from matplotlib.ticker import MaxNLocator

    _, comm, variant, network = key
    base = rows[0].baseline
    assert base is not None and base.images_per_sec is not None
    gpus = [1] + [r.run.gpus for r in rows]
    measured = [base.images_per_sec] + [r.measured or math.nan for r in rows]
    predicted = [base.images_per_sec] + [r.predicted or math.nan for r in rows]
    joined = "-" if len(set(gpus)) == len(gpus) else ""  # rows at one GPU count: points only
    colour = _colours().get(comm, "k")
    linear = sorted(set(gpus))
    ax.plot(linear, [base.images_per_sec * g for g in linear], color="0.7", lw=1, ls=":")
    ax.plot(gpus, measured, f"o{joined}", color=colour, ms=4, lw=1.4)
    ax.plot(gpus, predicted, f"s-{joined}" if joined else "s", color="k", ms=4, lw=1)
    ax.set_xlim(0, max(gpus) * 1.05)
    ax.set_ylim(0, max(base.images_per_sec * max(gpus), *measured, *predicted) * 1.05)
    run = rows[0].run
    batch = run.batch_per_gpu if run.batch_per_gpu is not None else base.batch_per_gpu
    error = 100 * sum(abs(r.rel_error or 0.0) for r in rows) / len(rows)
    ax.set_title(
        f"{run.model} {run.gpu} b{batch}, {network}\n"
        f"{' '.join(filter(None, (comm, variant)))}: {error:.0f}% off",
        fontsize=9,
    )
    ax.tick_params(labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # GPU counts: no 0.5 GPU ticks
    ax.grid(True, which="both", alpha=0.3)
