"""Figures of a sweep file (:mod:`ddlsim.tools.analysis.sweep` schema): scaling, efficiency,
breakdown.

Every figure has one panel per baseline -- each combination of the inputs that change what one
GPU does (model, GPU, batch, precision, ...; :mod:`ddlsim.tools.analysis.facets`) -- and one legend:

- ``scaling``: images/s against GPUs on log axes; per panel one ideal-linear line (the panel's
  1-GPU rate x GPUs) under one line per series, the series told apart by colour, line style and
  marker, each standing for one input (network, method, ...);
- ``efficiency``: scaling efficiency (% of linear) against GPUs, the same panels and series;
- ``goodput``: the failure model's goodput (failure-free time / expected time with failures,
  %) against GPUs, under a line at 100 % (no failures);
- ``time-to-train``: how much longer the expected time-to-train with failures is than the
  failure-free one (%), against GPUs (0: a broad pale line);
- ``breakdown``: :mod:`ddlsim.tools.analysis.plot_breakdown`, one stacked bar per configuration.

``goodput`` and ``time-to-train`` draw the configurations with failures (a sweep's rows with
``node_mtbf_hours`` 0 have no failure columns).

Only rows with ``status`` ``ok`` (or no status column) are drawn. Labels never overprint: a
figure is laid out so that tick labels, titles and legend entries keep apart at 48
configurations and at thousands (more ticks than fit are thinned). matplotlib is imported
lazily (the ``plot`` extra) and used without pyplot, so no GUI backend is touched.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ddlsim.atomic import atomic_write, check_output
from ddlsim.errors import ConfigError
from ddlsim.extras import require
from ddlsim.tools.analysis.facets import (
    LINE_STYLES,
    MARKERS,
    Styles,
    fmt,
    panels,
    series_dimensions,
    series_key,
    series_styles,
    split_dimensions,
    title,
)
from ddlsim.tools.analysis.sweep import read_rows

__all__ = [
    "FORMATS",
    "KINDS",
    "colour",
    "figure",
    "figure_format",
    "fmt",
    "gpu_ticks",
    "plot_sweep",
    "series_dimensions",
    "title",
]

KINDS = ("scaling", "efficiency", "goodput", "time-to-train", "breakdown")
#: the kinds drawn from the failure model's columns
FAILURE_KINDS = ("goodput", "time-to-train")
FORMATS = {".png": "png", ".svg": "svg"}
REQUIRED = {
    "scaling": ("gpus", "images_per_sec", "single_gpu_images_per_sec"),
    "efficiency": ("gpus", "scaling_efficiency"),
    "goodput": ("gpus", "goodput"),
    "time-to-train": ("gpus", "expected_time_to_train_s", "time_to_train_s"),
    "breakdown": (
        "gpus",
        "compute_s",
        "comm_hidden_s",
        "comm_exposed_s",
        "input_stall_s",
        "coordination_s",
    ),
}
#: one panel's size (inches) and the most panels side by side
PANEL_IN = (4.6, 3.4)
MAX_COLUMNS = 3
#: most GPU counts labelled on an x axis (more are thinned, the first and last kept)
MAX_X_TICKS = 8
#: the ideal-linear line: broad and pale, under the series, unlike any series' style
IDEAL = {"color": "0.55", "linewidth": 3.0, "alpha": 0.45, "solid_capstyle": "butt", "zorder": 1}


def plot_sweep(sweep_path: str | os.PathLike[str], out_path: str, kind: str = "scaling") -> None:
    """Draw ``kind`` from the sweep file and write it to ``out_path`` (.png or .svg)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown plot kind {kind!r}; valid: {', '.join(KINDS)}")
    fmt_name = figure_format(out_path)
    check_output(out_path, suffixes=FORMATS, what="figure")
    rows = read_rows(sweep_path)
    header = set(rows[0]) if rows else set()
    if not rows:
        raise ConfigError(f"sweep file {sweep_path} has no configurations")
    required = REQUIRED[kind]
    missing = [c for c in required if c not in header]
    if missing:
        raise ConfigError(
            f"sweep file {sweep_path} lacks column(s) {', '.join(missing)} needed by --kind {kind}"
        )
    ok = [r for r in rows if (r.get("status") or "ok") == "ok"]
    done = [r for r in ok if all(r.get(c) is not None for c in required)]
    if not done:
        why = "succeeded"
        if ok and kind in FAILURE_KINDS:
            why = "models failures (node_mtbf_hours 0 in every successful one)"
        raise ConfigError(
            f"sweep file {sweep_path}: none of its {len(rows)} configuration(s) {why}"
        )
    ok = done
    fig = figure(kind, ok)
    atomic_write(out_path, lambda tmp: fig.savefig(tmp, format=fmt_name, dpi=150))


def figure_format(path: str | os.PathLike[str]) -> str:
    """matplotlib's format name for the figure file ``path`` (by its extension)."""
    fmt_name = FORMATS.get(Path(path).suffix.lower())
    if fmt_name is None:
        raise ConfigError(
            f"cannot tell the figure format of {os.fspath(path)!r}: use a name ending in "
            f"{' or '.join(FORMATS)}"
        )
    return fmt_name


def figure(kind: str, rows: list[dict[str, Any]]) -> Any:
    """The matplotlib Figure of ``kind`` for the (successful) sweep ``rows``."""
    require("matplotlib", "plot", "ddlsim plot")
    dims = series_dimensions(rows)
    if kind == "breakdown":
        from ddlsim.tools.analysis.plot_breakdown import breakdown_figure

        return breakdown_figure(rows, dims)
    return _lines_figure(kind, rows, dims)


def colour(index: int, count: int) -> Any:
    """The ``index``-th of ``count`` distinct colours (tab10, tab20, then a sampled map)."""
    from matplotlib import colormaps

    if count <= 10:
        return colormaps["tab10"](index)
    if count <= 20:
        return colormaps["tab20"](index)
    return colormaps["turbo"](0.05 + 0.9 * index / (count - 1))


def gpu_ticks(values: list[float], limit: int = MAX_X_TICKS) -> list[float]:
    """At most about ``limit`` of the GPU counts: every k-th, and the last."""
    if len(values) <= limit:
        return values
    step = math.ceil((len(values) - 1) / (limit - 1))
    return sorted({*values[::step], values[-1]})


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, MAX_COLUMNS)
    return math.ceil(n / cols), cols


def _lines_figure(kind: str, rows: list[dict[str, Any]], dims: list[str]) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    panel_dims, series_dims = split_dimensions(dims)
    groups = panels(rows, panel_dims)
    styles = series_styles(rows, series_dims)
    nrows, ncols = _grid(len(groups))
    legend_rows = 1 + (len(_legend_handles(styles, kind)) - 1) // 3
    size = (max(7.5, ncols * PANEL_IN[0]), nrows * PANEL_IN[1] + 0.9 + 0.22 * legend_rows)
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    gpus_all = sorted({r["gpus"] for r in rows})
    for ax, panel in zip(axes.flat, groups, strict=False):
        _draw_panel(ax, kind, panel.rows, series_dims, styles)
        name = panel.title(panel_dims)
        if kind == "scaling":
            rates = sorted({_sig(r["single_gpu_images_per_sec"]) for r in panel.rows})
            one = f"1 GPU: {_rate(rates[0])} images/s" if len(rates) == 1 else ""
            name = ", ".join(p for p in (name, one) if p)
        ax.set_title(name, fontsize="medium")
        ticks = gpu_ticks(sorted({r["gpus"] for r in panel.rows}) or gpus_all)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{g:g}" for g in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("GPUs")
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(groups) :]:
        ax.remove()
    fig.suptitle(title(rows, dims, _WHAT[kind]))
    handles = _legend_handles(styles, kind)
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)))
    return fig


#: each line kind's figure title, y column, scale and axis label
_WHAT = {
    "scaling": "Scaling",
    "efficiency": "Scaling efficiency",
    "goodput": "Goodput with failures",
    "time-to-train": "Expected time-to-train with failures, % over the failure-free time",
}
_Y = {
    "scaling": ("images_per_sec", 1.0),
    "efficiency": ("scaling_efficiency", 100.0),
    "goodput": ("goodput", 100.0),
    "time-to-train": ("expected_time_to_train_s", 1.0),
}
#: the reference line of each kind, in the legend
_REFERENCE = {
    "scaling": "ideal linear (the panel's 1-GPU rate x GPUs)",
    "efficiency": "linear scaling",
    "goodput": "no failures",
    "time-to-train": "failure-free time-to-train",
}


def _rate(images_per_sec: float) -> str:
    """``1,464`` or ``21.7``: whole images/s from 100 up, three figures below."""
    return f"{images_per_sec:,.0f}" if images_per_sec >= 100 else f"{images_per_sec:.3g}"


def _sig(value: float) -> float:
    """Four significant figures: rates equal up to the simulation's noise are one baseline."""
    return float(f"{value:.4g}")


def _draw_panel(ax: Any, kind: str, rows: list[dict[str, Any]], dims: list[str], styles: Styles):
    by_series: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        by_series.setdefault(series_key(r, dims), []).append(r)
    n = len(by_series)
    for k, (key, members) in enumerate(by_series.items()):
        members.sort(key=lambda r: r["gpus"])
        c, s, m = styles.of(key)
        wider = (n - 1 - k) / max(1, n - 1)  # the first drawn widest: a later equal one shows it
        ax.plot(
            [r["gpus"] for r in members],
            [_y(kind, r) for r in members],
            color=colour(c, len(styles.colours)),
            linestyle=LINE_STYLES[s],
            marker=MARKERS[m],
            markersize=4 + 3 * wider,
            linewidth=1.4 + 1.6 * wider,
            zorder=3,
        )
    gpus = sorted({r["gpus"] for r in rows})
    values = [_y(kind, r) for r in rows]
    if kind == "scaling":
        for rate in sorted({_sig(r["single_gpu_images_per_sec"]) for r in rows}):
            ax.plot(gpus, [rate * g for g in gpus], **IDEAL)
        _log_y(ax, "images/s")
    elif kind == "efficiency":
        ax.axhline(100, **{**IDEAL, "linewidth": 2.0})
        ax.set_ylim(0, max(105.0, max(values) + 5))
        ax.set_ylabel("% of linear")
    elif kind == "time-to-train":  # from 0 (no failures) to a little above the highest
        ax.axhline(0.0, **{**IDEAL, "linewidth": 2.0})
        top = max(0.01, 1.15 * max(values))
        ax.set_ylim(-0.03 * top, top)
        ax.set_ylabel("% longer than failure-free")
    else:  # goodput: from a round number below the lowest, so that a few % stay visible
        ax.axhline(100, **{**IDEAL, "linewidth": 2.0})
        low = min(values)
        ax.set_ylim(max(0.0, 5 * math.floor((low - 1) / 5)), 100.5)
        ax.set_ylabel("goodput, %")


def _y(kind: str, row: dict[str, Any]) -> float:
    """A row's value on the y axis of ``kind``: time-to-train as the % the expected time with
    failures exceeds the failure-free one (the times differ by a fraction of a % where a log
    axis of both would show one line)."""
    if kind == "time-to-train":
        return 100 * (row["expected_time_to_train_s"] / row["time_to_train_s"] - 1)
    y_col, scale = _Y[kind]
    return scale * row[y_col]


def _log_y(ax: Any, label: str) -> None:
    """A log y axis labelled at 1, 2 and 5 of each decade."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_ylabel(label)


def _legend_handles(styles: Styles, kind: str) -> list[Any]:
    from matplotlib.lines import Line2D

    handles = [
        Line2D(
            [], [], color=colour(i, len(styles.colours)), linewidth=2, label=styles.colour_label(k)
        )
        for k, i in styles.colours.items()
    ]
    if styles.style_dim:
        handles += [
            Line2D([], [], color="black", linestyle=LINE_STYLES[i], label=f"{styles.style_dim}={v}")
            for v, i in styles.styles.items()
        ]
    if styles.marker_dim:
        handles += [
            Line2D(
                [],
                [],
                color="black",
                linestyle="",
                marker=MARKERS[i],
                label=f"{styles.marker_dim}={v}",
            )
            for v, i in styles.markers.items()
        ]
    return [*handles, Line2D([], [], **{**IDEAL, "zorder": 0}, label=_REFERENCE[kind])]
