"""``ddlsim validate --plot``: predicted vs measured, and scaling curves per configuration family.

The figure (PNG, matplotlib's Agg canvas, no display needed) has two parts:

- a log-log scatter of predicted against measured images/s, coloured by comm method, with the
  y = x line and a +-10% band (rows validated on the efficiency have no measured images/s and
  are left out);
- one small panel per *family*: rows sharing a baseline, a comm method and a variant, i.e. the
  same configuration at different GPU counts. Each panel shows measured (solid) and predicted
  (dashed) images/s against GPUs (linear axes), from the baseline at 1 GPU, and linear
  scaling (grey, dotted).

matplotlib is an optional dependency (the ``plot`` extra), imported only here.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence

from ddlsim.atomic import atomic_write
from ddlsim.execution.strategy import COMM_METHODS
from ddlsim.extras import require
from ddlsim.tools.analysis.plot import figure_format
from ddlsim.tools.validate.core import PREDICTED, RowResult
from ddlsim.tools.validate.mapping import METRIC_IPS

MAX_FAMILY_PANELS = 60
PANEL_COLUMNS = 6


def _matplotlib():
    require("matplotlib", "plot", "--plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return Figure, FigureCanvasAgg


def families(results: Sequence[RowResult]) -> dict[tuple[str, str, str], list[RowResult]]:
    """Predicted images/s rows grouped by (baseline run id, comm, variant), sorted by GPUs."""
    out: dict[tuple[str, str, str], list[RowResult]] = defaultdict(list)
    for row in results:
        if row.status == PREDICTED and row.baseline and row.run.images_per_sec is not None:
            out[(row.baseline.run_id, row.run.comm, row.run.variant_text)].append(row)
    for rows in out.values():
        rows.sort(key=lambda r: (r.run.gpus, r.run.transport))
    return dict(out)


def _colours() -> dict[str, str]:
    palette = [f"C{i}" for i in range(10)]
    return {m: palette[i % 10] for i, m in enumerate(COMM_METHODS)}


def plot_validation(
    results: Sequence[RowResult], path: str | os.PathLike[str], title: str = ""
) -> None:
    """Draw the validation figure into ``path`` (PNG), written atomically."""
    Figure, FigureCanvasAgg = _matplotlib()
    fams = sorted(families(results).items(), key=lambda kv: (-len(kv[1]), kv[0]))
    shown = fams[:MAX_FAMILY_PANELS]
    n_rows = math.ceil(len(shown) / PANEL_COLUMNS)
    height_in = 8.0 + 2.7 * n_rows
    fig = Figure(figsize=(3.2 * PANEL_COLUMNS, height_in))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(
        3 + n_rows,
        PANEL_COLUMNS,
        height_ratios=[2.6] * 3 + [2.7] * n_rows,
        left=0.04,
        right=0.99,
        bottom=0.4 / height_in,
        top=1 - 1.0 / height_in,
        hspace=0.75,
        wspace=0.3,
    )
    _scatter(fig.add_subplot(grid[0:3, 1:5]), results)
    for i, (key, rows) in enumerate(shown):
        _family_panel(fig.add_subplot(grid[3 + i // PANEL_COLUMNS, i % PANEL_COLUMNS]), key, rows)
    note = (
        f" (largest {MAX_FAMILY_PANELS} of {len(fams)} families)" if len(fams) > len(shown) else ""
    )
    fig.suptitle(
        f"ddlsim validate{': ' + title if title else ''}{note}", fontsize=13, y=1 - 0.2 / height_in
    )
    fmt = figure_format(path)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=72))


def _scatter(ax, results: Sequence[RowResult]) -> None:
    colours = _colours()
    rows = [r for r in results if r.status == PREDICTED and r.metric == METRIC_IPS]
    by_comm: dict[str, list[RowResult]] = defaultdict(list)
    for row in rows:
        by_comm[row.run.comm].append(row)
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
    ax.set_ylabel("predicted images/s (anchored to the 1-GPU baseline)")
    ax.set_title(f"predicted vs measured, {len(rows)} rows")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)


def _family_panel(ax, key: tuple[str, str, str], rows: list[RowResult]) -> None:
    baseline_id, comm, variant = key
    base = rows[0].baseline
    assert base is not None and base.images_per_sec is not None
    gpus = [1] + [r.run.gpus for r in rows]
    measured = [base.images_per_sec] + [r.measured or math.nan for r in rows]
    predicted = [base.images_per_sec] + [r.predicted or math.nan for r in rows]
    colour = _colours().get(comm, "k")
    ax.plot(gpus, [base.images_per_sec * g for g in gpus], color="0.7", lw=1, ls=":")
    ax.plot(gpus, measured, "o-", color=colour, ms=3, lw=1.2, label="measured")
    ax.plot(gpus, predicted, "s--", color="k", ms=3, lw=1, label="predicted")
    ax.set_xlim(0, max(gpus) * 1.05)
    ax.set_ylim(0, max(base.images_per_sec * max(gpus), *measured, *predicted) * 1.05)
    run = rows[0].run
    batch = run.batch_per_gpu if run.batch_per_gpu is not None else base.batch_per_gpu
    ax.set_title(
        f"{run.model} {run.gpu} b{batch} {run.data or ''}\n{comm} {variant} [{baseline_id}]",
        fontsize=7,
    )
    ax.tick_params(labelsize=6)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")
