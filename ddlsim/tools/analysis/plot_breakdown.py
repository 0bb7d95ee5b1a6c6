"""The ``breakdown`` figure of a sweep: where each configuration's iteration goes.

One stacked bar per configuration, as shares of its iteration (compute, exposed communication,
input stall, coordination; communication hidden behind compute hatched over the compute part,
inside it), so every part stays visible whether the iteration takes 30 ms or 80 s; the
iteration's time is written on its bar. One row of bars per baseline (the panels of
:mod:`ddlsim.tools.analysis.facets`), wrapped onto further rows when it would be wider than
:data:`MAX_WIDTH_IN`; in a row, the bars of one series (network, method, ...) stand together
over the GPU counts, the series named under its group. Labels are measured after a first
layout: group names that would touch turn vertical, GPU counts too narrow for their bars are
thinned, so nothing overprints at 48 configurations or at thousands.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ddlsim.tools.analysis.facets import (
    check_panel_count,
    panels,
    series_key,
    split_dimensions,
    title,
)

#: breakdown parts stacked in a bar: column, legend label, colour
STACK = (
    ("compute_s", "compute", "#4c72b0"),
    ("comm_exposed_s", "communication exposed", "#dd8452"),
    ("input_stall_s", "input pipeline stall", "#937860"),
    ("coordination_s", "coordination / sync wait", "#8c8c8c"),
)
#: horizontal space per bar (inches), the widest figure, one row of bars' height (inches)
BAR_PITCH_IN = 0.2
MAX_WIDTH_IN = 24.0
ROW_HEIGHT_IN = 2.9
#: room on the left of every row (axis labels) and between series (bars)
MARGIN_IN = 1.2
GAP_BARS = 1
#: y axis top, % (room for the iteration time written over a full bar)
Y_TOP = 150
LABEL_FONT = 7


@dataclass
class Group:
    """The bars of one series in one row: its label and its rows sorted by GPU count."""

    label: str
    rows: list[dict[str, Any]]
    start: float = 0.0  # x of its first bar


def _rows_of_bars(rows: list[dict[str, Any]], dims: list[str]) -> list[tuple[str, list[Group]]]:
    """(title, groups) of every row of bars: one per panel, wrapped to :data:`MAX_WIDTH_IN`."""
    panel_dims, series_dims = split_dimensions(dims)
    capacity = int((MAX_WIDTH_IN - MARGIN_IN) / BAR_PITCH_IN)
    out = []
    for panel in panels(rows, panel_dims):
        by_series: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for r in panel.rows:
            by_series.setdefault(series_key(r, series_dims), []).append(r)
        groups = [
            Group("\n".join(key) or "all", sorted(members, key=lambda r: r["gpus"]))
            for key, members in by_series.items()
        ]
        chunks: list[list[Group]] = [[]]
        used = 0
        for g in groups:
            need = len(g.rows) + (GAP_BARS if chunks[-1] else 0)
            if chunks[-1] and used + need > capacity:
                chunks.append([])
                used, need = 0, len(g.rows)
            chunks[-1].append(g)
            used += need
        name = panel.title(panel_dims)
        for i, chunk in enumerate(chunks):
            part = f"{i + 1} of {len(chunks)}" if len(chunks) > 1 else ""
            out.append((f"{name} ({part})" if name and part else name or part, chunk))
    check_panel_count(len(out), [*panel_dims, *series_dims])
    return out


def _place(groups: list[Group]) -> int:
    """Set each group's first bar position; the row's width in bars."""
    x = 0
    for g in groups:
        g.start = x
        x += len(g.rows) + GAP_BARS
    return x - GAP_BARS


def _time_label(seconds: float) -> str:
    ms = 1e3 * seconds
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{seconds:.3g} s"


def breakdown_figure(rows: list[dict[str, Any]], dims: list[str]) -> Any:
    """The figure: one axes per row of bars, one legend, labels that keep apart."""
    from matplotlib.figure import Figure

    bar_rows = _rows_of_bars(rows, dims)
    widths = [_place(groups) for _, groups in bar_rows]
    width_in = min(MAX_WIDTH_IN, max(8.0, MARGIN_IN + BAR_PITCH_IN * (max(widths) + 1)))
    fig = Figure(figsize=(width_in, ROW_HEIGHT_IN * len(bar_rows) + 1.3), layout="constrained")
    axes = fig.subplots(len(bar_rows), 1, squeeze=False)[:, 0]
    series = ", ".join(split_dimensions(dims)[1])
    names = []
    for ax, (name, groups) in zip(axes, bar_rows, strict=True):
        names.append(_draw_row(ax, groups, max(widths)))
        ax.set_title(name, fontsize="medium", loc="left")
        ax.set_ylabel("% of the iteration")
    names[-1].set_xlabel("GPUs" + (f", by {series}" if series else ""))
    fig.suptitle(title(rows, dims, "Where the iteration goes"))
    fig.legend(handles=_legend(), loc="outside lower center", ncols=3, fontsize="small")
    _keep_labels_apart(fig, list(zip(axes, names, strict=True)))
    return fig


_HATCH = {"facecolor": "none", "edgecolor": "white", "hatch": "///", "linewidth": 0}


def _draw_row(ax: Any, groups: list[Group], widest: int) -> Any:
    """The bars of one row, their GPU counts, and the series names under them (the secondary
    axis returned)."""
    x = [g.start + i for g in groups for i in range(len(g.rows))]
    members = [r for g in groups for r in g.rows]
    totals = [sum(r[c] or 0.0 for c, _, _ in STACK) for r in members]
    bottom = [0.0] * len(members)
    for col, _, fill in STACK:
        share = [_pct(r[col], t) for r, t in zip(members, totals, strict=True)]
        ax.bar(x, share, bottom=bottom, color=fill, width=0.8, linewidth=0)
        bottom = [b + s for b, s in zip(bottom, share, strict=True)]
    hidden = [
        _pct(min(r["comm_hidden_s"] or 0.0, r["compute_s"] or 0.0), t)
        for r, t in zip(members, totals, strict=True)
    ]
    ax.bar(x, hidden, width=0.8, **_HATCH)
    for xi, t in zip(x, totals, strict=True):
        ax.text(xi, 102, _time_label(t), rotation=90, ha="center", va="bottom", fontsize=6)
    ax.set_xlim(-0.7, widest - 0.3)
    ax.set_ylim(0, Y_TOP)
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.set_xticks(x, [f"{r['gpus']:g}" for r in members], fontsize=LABEL_FONT)
    ax.grid(True, axis="y", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    names = ax.secondary_xaxis("bottom")
    centres = [g.start + (len(g.rows) - 1) / 2 for g in groups]
    names.set_xticks(centres, [g.label for g in groups], fontsize=LABEL_FONT)
    names.tick_params(length=0)
    names.spines["bottom"].set_visible(False)
    return names


def _pct(part: float | None, total: float) -> float:
    return 100 * (part or 0.0) / total if total > 0 else 0.0


def _legend() -> list[Any]:
    from matplotlib.patches import Patch

    parts = [Patch(color=fill, label=label) for _, label, fill in STACK]
    hidden = {**_HATCH, "facecolor": STACK[0][2]}
    return [*parts, Patch(label="communication hidden (inside compute)", **hidden)]


def _keep_labels_apart(fig: Any, rows: list[tuple[Any, Any]]) -> None:
    """After a first layout: GPU counts that touch turn vertical, and if they still touch are
    thinned to every k-th bar; the series names go below them, on one line and vertical if
    they touch."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()  # the layout, and every text's place, without pixels
    for ax, _ in rows:
        if _touching(ax.get_xticklabels(), renderer):
            ax.tick_params(axis="x", labelrotation=90)
    fig.draw_without_rendering()
    for ax, names in rows:
        labels = ax.get_xticklabels()
        step = 1
        while _touching([t for i, t in enumerate(labels) if i % step == 0], renderer):
            step += 1
        for i, t in enumerate(labels):
            t.set_visible(i % step == 0)
        axis_y = ax.get_window_extent(renderer).y0
        lowest = min((t.get_window_extent(renderer).y0 for t in labels), default=axis_y)
        names.tick_params(pad=(axis_y - lowest) * 72 / fig.dpi + 3)  # below the GPU counts
    fig.draw_without_rendering()
    for _, names in rows:
        if _touching(names.get_xticklabels(), renderer):
            text = [t.get_text().replace("\n", ", ") for t in names.get_xticklabels()]
            names.set_xticks(names.get_xticks(), text, fontsize=LABEL_FONT, rotation=90)


def _touching(texts: list[Any], renderer: Any) -> bool:
    """Whether two neighbouring texts (left to right) overlap or keep less than a third of
    their font size apart (``128256512`` reads as one number)."""
    shown = [t for t in texts if t.get_visible() and t.get_text()]
    if not shown:
        return False
    gap = renderer.points_to_pixels(shown[0].get_fontsize() / 3)
    boxes = sorted((t.get_window_extent(renderer) for t in shown), key=lambda b: b.x0)
    return any(a.x1 + gap > b.x0 for a, b in itertools.pairwise(boxes))
