"""Figures of a sweep file (:mod:`ddlsim.analysis.sweep` schema): scaling, efficiency, breakdown.

- ``scaling``: images/s against GPUs on log axes, the ideal-linear line (1-GPU rate × GPUs)
  dashed, one line per combination of the other parameters that vary;
- ``efficiency``: scaling efficiency (% of linear) against GPUs;
- ``breakdown``: one stacked bar per configuration, ms per iteration: compute, exposed
  communication, input stall, coordination; communication hidden behind compute is hatched
  over the compute part (it is inside it, not added).

Only rows with ``status`` ``ok`` (or no status column) are drawn. matplotlib is imported lazily
(the ``plot`` extra) and used without pyplot, so no GUI backend is touched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ddlsim.analysis.sweep import INPUT_COLUMNS, read_rows
from ddlsim.atomic import atomic_write, check_output
from ddlsim.errors import ConfigError
from ddlsim.extras import require

KINDS = ("scaling", "efficiency", "breakdown")
FORMATS = {".png": "png", ".svg": "svg"}
REQUIRED = {
    "scaling": ("gpus", "images_per_sec", "single_gpu_images_per_sec"),
    "efficiency": ("gpus", "scaling_efficiency"),
    "breakdown": (
        "gpus",
        "compute_s",
        "comm_hidden_s",
        "comm_exposed_s",
        "input_stall_s",
        "coordination_s",
    ),
}
#: breakdown parts stacked in a bar: column, legend label, colour
STACK = (
    ("compute_s", "compute", "#4c72b0"),
    ("comm_exposed_s", "communication exposed", "#dd8452"),
    ("input_stall_s", "input pipeline stall", "#937860"),
    ("coordination_s", "coordination / sync wait", "#8c8c8c"),
)
#: widest breakdown figure (inches); more bars than fit get vertical labels
MAX_FIGURE_WIDTH_IN = 36.0
#: constant inputs shown in the title, with how to print them
_TITLE = (("model", "{}"), ("gpu", "{}"), ("batch_per_gpu", "batch {:g}/GPU"), ("precision", "{}"))


def plot_sweep(sweep_path: str | os.PathLike[str], out_path: str, kind: str = "scaling") -> None:
    """Draw ``kind`` from the sweep file and write it to ``out_path`` (.png or .svg)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown plot kind {kind!r}; valid: {', '.join(KINDS)}")
    fmt = figure_format(out_path)
    check_output(out_path, suffixes=FORMATS, what="figure")
    rows = read_rows(sweep_path)
    header = set(rows[0]) if rows else set()
    if not rows:
        raise ConfigError(f"sweep file {sweep_path} has no configurations")
    missing = [c for c in REQUIRED[kind] if c not in header]
    if missing:
        raise ConfigError(
            f"sweep file {sweep_path} lacks column(s) {', '.join(missing)} needed by --kind {kind}"
        )
    ok = [r for r in rows if (r.get("status") or "ok") == "ok"]
    ok = [r for r in ok if all(r.get(c) is not None for c in REQUIRED[kind])]
    if not ok:
        raise ConfigError(
            f"sweep file {sweep_path}: none of its {len(rows)} configuration(s) succeeded"
        )
    fig = _figure(kind, ok)
    atomic_write(out_path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=150))


def figure_format(path: str | os.PathLike[str]) -> str:
    """matplotlib's format name for the figure file ``path`` (by its extension)."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(
            f"cannot tell the figure format of {os.fspath(path)!r}: use a name ending in "
            f"{' or '.join(FORMATS)}"
        )
    return fmt


def series_dimensions(rows: list[dict[str, Any]]) -> list[str]:
    """Input columns that vary among configurations with the same GPU count (the legend).

    Columns that only follow the GPU count (the resolved node size, the fabric of a single node)
    are not dimensions, nor is one determined by the dimensions before it.
    """
    dims: list[str] = []
    for col in (c for c in INPUT_COLUMNS if c != "gpus" and c in rows[0]):
        if _determined(rows, dims, col):
            continue
        dims.append(col)
    return dims


def _determined(rows: list[dict[str, Any]], dims: list[str], col: str) -> bool:
    seen: dict[tuple, Any] = {}
    for r in rows:
        key = (r["gpus"], *(r.get(d) for d in dims))
        if seen.setdefault(key, r.get(col)) != r.get(col):
            return False
    return True


def _label(row: dict[str, Any], dims: list[str]) -> str:
    return ", ".join(f"{d}={_fmt(row.get(d))}" for d in dims) or "all configurations"


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _gpus(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


def _title(rows: list[dict[str, Any]], dims: list[str], what: str) -> str:
    parts = [
        fmt.format(rows[0][c])
        for c, fmt in _TITLE
        if c in rows[0] and c not in dims and rows[0][c] is not None
    ]
    return f"{what}: {', '.join(parts)}" if parts else what


def _figure(kind: str, rows: list[dict[str, Any]]) -> Any:
    require("matplotlib", "plot", "ddlsim plot")
    from matplotlib.figure import Figure

    dims = series_dimensions(rows)
    if kind == "breakdown":
        return _breakdown(Figure, rows, dims)
    fig = Figure(figsize=(7.5, 5), layout="constrained")
    ax = fig.add_subplot()
    series: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        series.setdefault(tuple(_fmt(r.get(d)) for d in dims), []).append(r)
    gpus_all = sorted({r["gpus"] for r in rows})
    for i, members in enumerate(series.values()):
        members.sort(key=lambda r: r["gpus"])
        x = [r["gpus"] for r in members]
        y_col, scale = ("images_per_sec", 1.0) if kind == "scaling" else ("scaling_efficiency", 100)
        y = [scale * r[y_col] for r in members]
        ax.plot(x, y, "o-", color=f"C{i % 10}", label=_label(members[0], dims))
    if kind == "scaling":
        rates = sorted({round(r["single_gpu_images_per_sec"], 6) for r in rows})
        for j, rate in enumerate(rates):
            label = f"ideal linear ({rate:,.1f} images/s × GPUs)"
            ax.plot(
                gpus_all,
                [rate * g for g in gpus_all],
                linestyle=(0, (4, 3 + j)),
                color="black",
                linewidth=1,
                zorder=3,
                label=label,
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks(gpus_all, [f"{g:g}" for g in gpus_all])
    ax.set_xlabel("GPUs")
    if kind == "scaling":
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_ylabel("throughput (images/s)")
        ax.set_title(_title(rows, dims, "Scaling"))
    else:
        ax.axhline(100, color="black", linewidth=0.8, linestyle=":", label="linear scaling")
        top = max(105.0, max(100 * r["scaling_efficiency"] for r in rows) + 5)
        ax.set_ylim(0, top)
        ax.set_ylabel("scaling efficiency (% of linear)")
        ax.set_title(_title(rows, dims, "Scaling efficiency"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def _breakdown(Figure: Any, rows: list[dict[str, Any]], dims: list[str]) -> Any:
    rows = sorted(rows, key=lambda r: (*(_fmt(r.get(d)) for d in dims), r["gpus"]))
    n = len(rows)
    names = ["\n".join([_gpus(r["gpus"]), *(_fmt(r.get(d)) for d in dims)]) for r in rows]
    per_bar_in = max(0.6, 0.075 * max(len(line) for name in names for line in name.split("\n")))
    rotate = n * per_bar_in > MAX_FIGURE_WIDTH_IN - 4
    width_in = min(MAX_FIGURE_WIDTH_IN, max(9.0, (0.25 if rotate else per_bar_in) * n + 4))
    fig = Figure(figsize=(width_in, 5.5), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(n))
    bottom = [0.0] * n
    for col, label, color in STACK:
        height = [1e3 * (r[col] or 0.0) for r in rows]
        ax.bar(x, height, bottom=bottom, color=color, label=label, width=0.7)
        bottom = [b + h for b, h in zip(bottom, height, strict=True)]
    hidden = [1e3 * min(r["comm_hidden_s"] or 0.0, r["compute_s"] or 0.0) for r in rows]
    hatch = {"facecolor": "none", "edgecolor": "white", "hatch": "///", "linewidth": 0}
    ax.bar(x, hidden, width=0.7, **hatch)
    from matplotlib.patches import Patch

    proxy = Patch(
        label="communication hidden\n(overlapped, inside compute)",
        **{**hatch, "facecolor": STACK[0][2]},
    )
    ax.set_xticks(x, names, fontsize="small", rotation=90 if rotate else 0)
    ax.set_xlabel("configuration" + (f" (GPUs; {', '.join(dims)})" if dims else " (GPUs)"))
    ax.set_ylabel("time per iteration (ms)")
    fig.suptitle(_title(rows, dims, "Where the iteration goes"))
    ax.grid(True, axis="y", alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(
        handles=[*handles, proxy], fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0)
    )
    return fig
