"""The measured-runs CSV schema (``traces/measured/README.md``): read it, write it.

:func:`read_runs` accepts any CSV with the schema's header names: extra columns are ignored,
missing optional columns read as empty cells, and anything malformed (not UTF-8, a broken quote,
a row with the wrong number of fields, a non-numeric count, a duplicate ``run_id``) raises
:class:`~ddlsim.errors.ConfigError` naming the file and the line. :func:`format_rows` writes
rows in the schema's column order (written with :mod:`ddlsim.atomic`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ddlsim.errors import ConfigError

#: the schema's columns, in file order
COLUMNS: tuple[str, ...] = (
    "run_id",
    "source_id",
    "model",
    "gpu",
    "gpus",
    "gpus_per_node",
    "intra_node",
    "inter_node",
    "transport",
    "comm",
    "n_ps",
    "variant",
    "framework",
    "batch_per_gpu",
    "precision",
    "data",
    "images_per_sec",
    "scaling_efficiency",
    "from_figure",
    "note",
)
REQUIRED_COLUMNS = ("run_id", "model", "gpu", "gpus")
VALUE_COLUMNS = ("images_per_sec", "scaling_efficiency")


@dataclass(frozen=True)
class Run:
    """One measured run; an empty cell is ``""`` (text) or ``None`` (numbers)."""

    line: int
    run_id: str
    source_id: str
    model: str
    gpu: str
    gpus: int
    gpus_per_node: int | None
    intra_node: str
    inter_node: str
    transport: str
    comm: str
    n_ps: int | None
    variant: tuple[str, ...]
    framework: str
    batch_per_gpu: int | None
    precision: str
    data: str
    images_per_sec: float | None
    scaling_efficiency: float | None
    from_figure: bool
    note: str

    @property
    def is_single_gpu(self) -> bool:
        """A single-GPU row (``comm`` single or one GPU): a baseline, nothing to scale."""
        return self.comm == "single" or self.gpus == 1

    @property
    def multi_node(self) -> bool:
        """Whether the run spans nodes: more GPUs than per node, or (per-node count unknown)
        a network is named."""
        if self.gpus_per_node is not None:
            return self.gpus > self.gpus_per_node
        return self.gpus > 1 and self.inter_node not in ("", "none")

    @property
    def variant_text(self) -> str:
        """The variant tokens as written in the file (``;``-separated)."""
        return ";".join(self.variant)


class _Cells:
    """Typed access to one CSV record's cells; errors name the file, line and column."""

    def __init__(self, where: str, record: Mapping[str, str | None]) -> None:
        self.where = where
        self.record = record

    def text(self, column: str) -> str:
        return (self.record.get(column) or "").strip()

    def integer(self, column: str, *, required: bool = False) -> int | None:
        cell = self.text(column)
        if not cell:
            if required:
                raise ConfigError(f"{self.where}: column {column!r} is empty")
            return None
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value != int(value):
            raise ConfigError(f"{self.where}: column {column!r} must be an integer, got {cell!r}")
        return int(value)

    def number(self, column: str) -> float | None:
        cell = self.text(column)
        if not cell:
            return None
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(
                f"{self.where}: column {column!r} must be a positive number, got {cell!r}"
            )
        return value


def _decode(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None


def read_runs(path: str | os.PathLike[str]) -> list[Run]:
    """Read a measured-runs CSV; raises :class:`ConfigError` naming the line of any defect."""
    path = Path(path)
    reader = csv.reader(io.StringIO(_decode(path), newline=""), strict=True)
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise ConfigError(f"{path}: empty file (expected a header row)") from None
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ConfigError(
            f"{path}:1: header lacks column(s) {', '.join(missing)} "
            f"(expected the measured-runs schema: {', '.join(COLUMNS)})"
        )
    if not any(c in header for c in VALUE_COLUMNS):
        raise ConfigError(f"{path}:1: header has neither images_per_sec nor scaling_efficiency")
    runs: list[Run] = []
    seen: dict[str, int] = {}
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise ConfigError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from None
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise ConfigError(
                f"{path}:{line}: {len(fields)} field(s), the header has {len(header)}"
            )
        run = _run(_Cells(f"{path}:{line}", dict(zip(header, fields, strict=True))), line)
        if run.run_id in seen:
            raise ConfigError(
                f"{path}:{line}: duplicate run_id {run.run_id!r} (first on line {seen[run.run_id]})"
            )
        seen[run.run_id] = line
        runs.append(run)
    return runs


def _run(cells: _Cells, line: int) -> Run:
    run_id = cells.text("run_id")
    if not run_id:
        raise ConfigError(f"{cells.where}: column 'run_id' is empty")
    gpus = cells.integer("gpus", required=True)
    assert gpus is not None
    return Run(
        line=line,
        run_id=run_id,
        source_id=cells.text("source_id"),
        model=cells.text("model"),
        gpu=cells.text("gpu"),
        gpus=gpus,
        gpus_per_node=cells.integer("gpus_per_node"),
        intra_node=cells.text("intra_node"),
        inter_node=cells.text("inter_node"),
        transport=cells.text("transport"),
        comm=cells.text("comm"),
        n_ps=cells.integer("n_ps"),
        variant=tuple(t.strip() for t in cells.text("variant").split(";") if t.strip()),
        framework=cells.text("framework"),
        batch_per_gpu=cells.integer("batch_per_gpu"),
        precision=cells.text("precision"),
        data=cells.text("data"),
        images_per_sec=cells.number("images_per_sec"),
        scaling_efficiency=cells.number("scaling_efficiency"),
        from_figure=cells.text("from_figure") == "1",
        note=cells.text("note"),
    )


def format_rows(rows: Iterable[Mapping[str, object]]) -> str:
    """The CSV text of ``rows`` (dicts keyed by column; missing keys = empty cells)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise ConfigError(f"not schema columns: {', '.join(sorted(unknown))}")
        writer.writerow(["" if row.get(c) is None else str(row.get(c)) for c in COLUMNS])
    return out.getvalue()
