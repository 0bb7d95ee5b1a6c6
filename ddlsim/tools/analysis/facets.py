"""How a sweep's figures are laid out: panels per baseline, series styles, one legend.

A sweep varies some inputs besides the GPU count (:func:`series_dimensions`). Those that change
what one GPU does -- the model, GPU type, batch, sequence length, precision, TF32 and data
(:data:`PANEL_DIMS`) -- change the 1-GPU baseline, so each of their combinations gets a panel of
its own, with its own ideal-linear line (scaling: one per baseline, not one per series) and its
own y scale. The others (network, method, Horovod / NCCL knobs, ...) are series inside a panel,
told apart by attribute rather than by combination (:func:`series_styles`): colour for the input
with the most values, line style and marker for the next two, so one legend of a few entries
explains every line of every panel.

Nothing here draws; :mod:`ddlsim.tools.analysis.plot` maps the indices to matplotlib's styles.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.tools.analysis.sweep import _COLUMN_OF, INPUT_COLUMNS

#: inputs that change what one GPU does (its images/s: the ideal line's slope): one panel each
PANEL_DIMS = ("model", "gpu", "batch_per_gpu", "seq_len", "precision", "tf32", "data")
#: constant inputs shown in a figure's title, with how to print them
_TITLE = (
    ("model", "{}"),
    ("gpu", "{}"),
    ("batch_per_gpu", "batch {:g}/GPU"),
    ("seq_len", "seq {:g}"),
    ("precision", "{}"),
)
#: most panels (or rows of bars) one figure holds: 20 rows of 3 panels, about 70 inches tall
MAX_PANELS = 60
#: line styles and markers told apart at a glance (more values go into the colour key)
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def fmt(value: Any) -> str:
    """A cell as a label: ``64`` for 64.0, names as they are."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def series_dimensions(rows: list[dict[str, Any]]) -> list[str]:
    """Input columns that vary among configurations with the same GPU count.

    Only inputs the sweep's grid varies count (:func:`varied_inputs`): a resolved column the
    grid leaves at its default (the transport, which follows the network, the method and the
    node count) is no dimension. Columns that only follow the GPU count (the resolved node
    size, the fabric of a single node) are not dimensions, nor is one determined by the
    dimensions before it.
    """
    varied = varied_inputs(rows)
    dims: list[str] = []
    for col in (c for c in INPUT_COLUMNS if c != "gpus" and c in rows[0]):
        if (varied is None or col in varied) and not _determined(rows, dims, col):
            dims.append(col)
    return dims


def varied_inputs(rows: list[dict[str, Any]]) -> set[str] | None:
    """The row columns of the :func:`ddlsim.predict` keywords whose requested values differ
    between rows (read from each row's ``config``, the complete keywords); None where a row
    has no readable ``config`` (a hand-made file: every input column may then be one)."""
    seen: dict[str, set[str]] = {}
    for row in rows:
        try:
            config = json.loads(row.get("config") or "")
        except (TypeError, ValueError):
            return None
        if not isinstance(config, dict):
            return None
        for key, value in config.items():
            seen.setdefault(key, set()).add(json.dumps(value, sort_keys=True))
    return {_COLUMN_OF.get(k, k) for k, values in seen.items() if len(values) > 1}


def _determined(rows: list[dict[str, Any]], dims: list[str], col: str) -> bool:
    seen: dict[tuple, Any] = {}
    for r in rows:
        key = (r["gpus"], *(r.get(d) for d in dims))
        if seen.setdefault(key, r.get(col)) != r.get(col):
            return False
    return True


@dataclass
class Panel:
    """The configurations of one baseline: ``values`` of the panel dimensions, in order."""

    values: tuple[str, ...]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def title(self, dims: Sequence[str]) -> str:
        """``alexnet`` or ``resnet50, batch 32``: the panel's own values."""
        return ", ".join(_value_label(d, v) for d, v in zip(dims, self.values, strict=True))


def _value_label(dim: str, value: str) -> str:
    if dim == "batch_per_gpu":
        return f"batch {value}"
    if dim == "seq_len":
        return f"seq {value}"
    if dim == "tf32":
        return "TF32" if value == "True" else "TF32 off"
    if dim == "data":
        return f"{value} data"
    return value


def split_dimensions(dims: Sequence[str]) -> tuple[list[str], list[str]]:
    """(panel dimensions, series dimensions) of the varying inputs ``dims``."""
    return [d for d in dims if d in PANEL_DIMS], [d for d in dims if d not in PANEL_DIMS]


def panels(rows: list[dict[str, Any]], dims: Sequence[str]) -> list[Panel]:
    """The rows grouped by their values of ``dims``, in the order the sweep lists them; more
    than :data:`MAX_PANELS` of them is a :class:`ConfigError` (no figure shows them all)."""
    out: dict[tuple[str, ...], Panel] = {}
    for r in rows:
        key = tuple(fmt(r.get(d)) for d in dims)
        out.setdefault(key, Panel(key)).rows.append(r)
    check_panel_count(len(out), dims)
    return list(out.values())


def check_panel_count(count: int, dims: Sequence[str]) -> None:
    """Refuse a figure of more than :data:`MAX_PANELS` panels, naming what makes them."""
    if count > MAX_PANELS:
        what = ", ".join(dims) or "configurations"
        raise ConfigError(
            f"the sweep has {count} panels' worth ({what}), more than the {MAX_PANELS} one "
            "figure holds readably; plot a part of the sweep file (fewer rows)"
        )


def series_key(row: dict[str, Any], dims: Sequence[str]) -> tuple[str, ...]:
    """The row's values of the series dimensions."""
    return tuple(fmt(row.get(d)) for d in dims)


@dataclass(frozen=True)
class Styles:
    """Which series dimension each visual attribute shows, and the value -> index maps.

    ``colour_dims`` share the colour (a combination of their values per colour);
    ``style_dim`` and ``marker_dim`` are shown by line style and marker (None: unused)."""

    dims: tuple[str, ...]
    colour_dims: tuple[str, ...]
    style_dim: str | None
    marker_dim: str | None
    colours: dict[tuple[str, ...], int]
    styles: dict[str, int]
    markers: dict[str, int]

    def of(self, key: tuple[str, ...]) -> tuple[int, int, int]:
        """(colour, line style, marker) indices of the series with values ``key``."""
        value = dict(zip(self.dims, key, strict=True))
        colour = self.colours.get(tuple(value[d] for d in self.colour_dims), 0)
        style = self.styles[value[self.style_dim]] if self.style_dim else 0
        marker = self.markers[value[self.marker_dim]] if self.marker_dim else 0
        return colour, style, marker

    def colour_label(self, colour_key: tuple[str, ...]) -> str:
        """``inter_node=10gbe`` (``all configurations`` when nothing varies)."""
        pairs = [f"{d}={v}" for d, v in zip(self.colour_dims, colour_key, strict=True)]
        return ", ".join(pairs) or "all configurations"


def series_styles(rows: list[dict[str, Any]], dims: Sequence[str]) -> Styles:
    """Colour for the series dimension with the most values, line style for the next (at most
    :data:`LINE_STYLES` values), marker for the one after (at most :data:`MARKERS`); any other
    dimension joins the colour key."""
    values = {d: list(dict.fromkeys(fmt(r.get(d)) for r in rows)) for d in dims}
    by_count = sorted(dims, key=lambda d: -len(values[d]))
    colour_dims = by_count[:1]
    style_dim = marker_dim = None
    for d in by_count[1:]:
        if style_dim is None and len(values[d]) <= len(LINE_STYLES):
            style_dim = d
        elif marker_dim is None and len(values[d]) <= len(MARKERS):
            marker_dim = d
        else:
            colour_dims.append(d)
    colour_dims = [d for d in dims if d in colour_dims]  # the sweep's order
    colour_keys = dict.fromkeys(tuple(fmt(r.get(d)) for d in colour_dims) for r in rows)
    return Styles(
        dims=tuple(dims),
        colour_dims=tuple(colour_dims),
        style_dim=style_dim,
        marker_dim=marker_dim,
        colours={k: i for i, k in enumerate(colour_keys)},
        styles={v: i for i, v in enumerate(values[style_dim])} if style_dim else {},
        markers={v: i for i, v in enumerate(values[marker_dim])} if marker_dim else {},
    )


def title(rows: list[dict[str, Any]], dims: list[str], what: str) -> str:
    """``what: p100-sxm2, batch 64/GPU, fp32``: the inputs every configuration shares."""
    parts = [
        form.format(rows[0][c])
        for c, form in _TITLE
        if c in rows[0] and c not in dims and rows[0][c] is not None
    ]
    return f"{what}: {', '.join(parts)}" if parts else what
