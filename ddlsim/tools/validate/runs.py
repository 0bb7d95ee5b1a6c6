"""The measured-runs CSV schema (``traces/measured/README.md``): read it, write it.

Two readers share one parser. :func:`load_runs` is lenient about rows: a data row it cannot
turn into a :class:`Run` (the wrong number of fields, an empty or duplicate ``run_id``, an empty
required cell, a count or value that is not a positive finite number or lies outside its
physical range, a cell longer than Python's csv limit) becomes a
:class:`RowDefect` naming the line, the column and the cell, and the other rows are read.
:func:`read_runs` is strict: the first such row raises :class:`~ddlsim.errors.ConfigError`
(``FILE:LINE: reason``); it is for files ddlsim writes or a caller wants whole.

Both refuse the whole *file* (ConfigError) when it is unreadable, not UTF-8, has broken CSV
quoting, is empty, or its header lacks a required column, names a column twice, or has neither
value column. Extra columns are ignored and missing optional columns read as empty cells;
:data:`OPTIONAL_COLUMNS` (``nics_per_node``; the software stack: ``nccl_version``,
``horovod_version``, ``framework_version``, ``mpi``; the cloud ``instance``) are read by name
after the schema's, as text (:mod:`~ddlsim.tools.validate.stack_cells` checks the stack's).
:func:`format_rows` writes rows in the schema's column order (written with
:mod:`ddlsim.atomic`).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddlsim.calibration.profile import MAX_RUN_IMAGES_PER_SEC, MIN_IMAGES_PER_SEC
from ddlsim.errors import ConfigError, shown
from ddlsim.inputs import RUNS_CSV_MAX_BYTES, csv_rows, read_text
from ddlsim.system.catalog_files import MAX_GPUS, MAX_GPUS_PER_NODE, MAX_NICS_PER_NODE
from ddlsim.tools.validate.options import MAX_BATCH_PER_GPU

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
#: columns a file may add after the schema's (read by name; written only when a row has one)
#: the software-stack columns (empty = not stated), kept as written; validate parses them
STACK_COLUMNS: tuple[str, ...] = ("nccl_version", "horovod_version", "framework_version", "mpi")
OPTIONAL_COLUMNS: tuple[str, ...] = ("nics_per_node", *STACK_COLUMNS, "instance")
REQUIRED_COLUMNS = ("run_id", "model", "gpu", "gpus")
VALUE_COLUMNS = ("images_per_sec", "scaling_efficiency")
#: the value columns of the transformer schema (``traces/measured/README_transformers.md``)
TRANSFORMER_VALUE_COLUMNS = ("samples_per_sec", "tokens_per_sec")

#: skip codes of rows the lenient reader rejects
BAD_FIELDS = "bad-fields"
NO_RUN_ID = "no-run-id"
DUPLICATE_RUN_ID = "duplicate-run-id"
MISSING_VALUE = "missing-value"
BAD_NUMBER = "bad-number"
NOT_POSITIVE = "not-positive"
OUT_OF_RANGE = "out-of-range"
DEFECT_CODES = (
    BAD_FIELDS,
    NO_RUN_ID,
    DUPLICATE_RUN_ID,
    MISSING_VALUE,
    BAD_NUMBER,
    NOT_POSITIVE,
    OUT_OF_RANGE,
)
#: the range of a stated scaling efficiency: above 0.1% (slower still is a broken run), at most
#: 2 (caches make scaling superlinear by tens of percent at most; 2.5 is a typing error or a
#: percentage)
MIN_SCALING_EFFICIENCY = 1e-3
MAX_SCALING_EFFICIENCY = 2.0


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
    nics_per_node: int | None
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
    #: the transformer schema's (``traces/measured/README_transformers.md``) cells; a CNN
    #: row leaves them empty. ``images_per_sec`` holds its samples/s: the stated one, else
    #: the stated ``tokens_per_sec`` over ``seq_len``
    schema: str = "cnn"
    task: str = ""
    seq_len: int | None = None
    tokens_per_sec: float | None = None
    #: the stack the run used, as the file states it (:data:`STACK_COLUMNS`; "" = not stated)
    nccl_version: str = ""
    horovod_version: str = ""
    framework_version: str = ""
    mpi: str = ""
    #: the cloud instance type the run used (``p2.8xlarge``; "" = not stated)
    instance: str = ""

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

    @property
    def baseline_variant(self) -> tuple[str, ...] | None:
        """The variant a transformer row's baseline must share (its tokens but
        ``grad-accum-N``: one GPU communicates nothing); ``None`` for a CNN row (variant only
        ranks its candidates, :mod:`~ddlsim.tools.validate.baseline`)."""
        if self.schema == "cnn":
            return None
        return tuple(t for t in self.variant if not t.startswith("grad-accum-"))


@dataclass(frozen=True)
class RowDefect:
    """A data row that is not a valid :class:`Run`: ``code`` (one of :data:`DEFECT_CODES`),
    ``reason`` naming the ``column`` and its cell ``value`` where one is at fault."""

    line: int
    code: str
    reason: str
    run_id: str = ""
    source_id: str = ""
    column: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class RunsFile:
    """A measured-runs file as :func:`load_runs` read it: valid rows and rejected rows."""

    path: Path
    runs: list[Run]
    defects: list[RowDefect]

    @property
    def sources(self) -> list[str]:
        """The non-empty ``source_id`` values of every row, rejected ones included, sorted."""
        ids = {r.source_id for r in self.runs} | {d.source_id for d in self.defects}
        return sorted(ids - {""})


class _RowError(Exception):
    """A row defect found while parsing one record (internal: becomes a RowDefect)."""

    def __init__(self, code: str, reason: str, column: str | None = None, value: str = "") -> None:
        super().__init__(reason)
        self.code, self.reason, self.column, self.value = code, reason, column, value


class _Cells:
    """Typed access to one CSV record's cells; errors name the column and the cell."""

    def __init__(self, record: Mapping[str, str | None]) -> None:
        self.record = record

    def text(self, column: str) -> str:
        return (self.record.get(column) or "").strip()

    def required(self, column: str) -> str:
        cell = self.text(column)
        if not cell:
            raise _RowError(MISSING_VALUE, f"column {column!r} is empty (required)", column)
        return cell

    def integer(self, column: str, high: int, *, required: bool = False) -> int | None:
        cell = self.required(column) if required else self.text(column)
        if not cell:
            return None
        value = _float(cell)
        if not math.isfinite(value) or value != int(value):
            raise _RowError(
                BAD_NUMBER, f"column {column!r} must be an integer, got {shown(cell)}", column, cell
            )
        if value < 1:
            raise _RowError(
                NOT_POSITIVE,
                f"column {column!r} must be a positive integer, got {shown(cell)}",
                column,
                cell,
            )
        self._in_range(column, cell, value, 1, high, f"{high:,}")
        return int(value)

    def number(self, column: str, low: float, high: float) -> float | None:
        cell = self.text(column)
        if not cell:
            return None
        value = _float(cell)
        if not math.isfinite(value):
            raise _RowError(
                BAD_NUMBER,
                f"column {column!r} must be a finite number, got {shown(cell)}",
                column,
                cell,
            )
        if value <= 0:
            raise _RowError(
                NOT_POSITIVE,
                f"column {column!r} must be a positive number, got {shown(cell)}",
                column,
                cell,
            )
        self._in_range(column, cell, value, low, high, f"{high:g}")
        return value

    @staticmethod
    def _in_range(column: str, cell: str, value: float, low: float, high: float, top: str) -> None:
        if not low <= value <= high:
            raise _RowError(
                OUT_OF_RANGE,
                f"column {column!r} must be in {low:g}..{top}, got {shown(cell)}",
                column,
                cell,
            )


def _float(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.nan


def _decode(path: Path, what: str = "runs file") -> str:
    """The text of a measured-runs or measured-collectives CSV (:mod:`ddlsim.inputs`)."""
    return read_text(path, what, RUNS_CSV_MAX_BYTES)


def _header(path: Path, reader) -> list[str]:
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise ConfigError(f"{path}: empty file (expected a header row)") from None
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ConfigError(
            f"{path}:1: header lacks required column(s) {', '.join(missing)} "
            f"(expected the measured-runs schema: {', '.join(COLUMNS)})"
        )
    twice = sorted(c for c, n in Counter(header).items() if c and n > 1)
    if twice:
        raise ConfigError(f"{path}:1: header names column(s) {', '.join(twice)} more than once")
    if not any(c in header for c in (*VALUE_COLUMNS, *TRANSFORMER_VALUE_COLUMNS)):
        raise ConfigError(
            f"{path}:1: header has neither images_per_sec nor scaling_efficiency (nor the "
            "transformer schema's samples_per_sec or tokens_per_sec)"
        )
    return header


def load_runs(path: str | os.PathLike[str]) -> RunsFile:
    """Read a measured-runs CSV leniently: bad rows become :class:`RowDefect` entries.

    File-level defects raise :class:`ConfigError` (module docstring). A header with
    ``samples_per_sec`` or ``tokens_per_sec`` and no ``images_per_sec`` is the transformer
    schema's (:mod:`~ddlsim.tools.validate.transformer_runs`, :func:`transformer_run`).
    """
    path = Path(path)
    reader = csv.reader(io.StringIO(_decode(path), newline=""), strict=True)
    header = _header(path, reader)
    build = transformer_run if is_transformer_header(header) else _run
    table = RunsFile(path, [], [])
    seen: dict[str, int] = {}
    try:
        for fields, skip in csv_rows(reader):
            _add_row(table, seen, header, fields or [], skip, reader.line_num, build)
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from None
    return table


def _add_row(
    table: RunsFile,
    seen: dict[str, int],
    header: list[str],
    fields: list[str],
    skip: str,
    line: int,
    build: Callable[[_Cells, int], Run],
) -> None:
    """Add one data row to ``table``: a :class:`Run` (made by ``build``), or a
    :class:`RowDefect` with the reason (``skip``: why the CSV reader could not split it);
    ``seen``: run_id -> its line."""
    if skip:
        table.defects.append(RowDefect(line, BAD_FIELDS, skip))
        return
    if not any(f.strip() for f in fields):
        return
    record = dict(zip(header, fields, strict=False))
    run_id = (record.get("run_id") or "").strip()
    source_id = (record.get("source_id") or "").strip()
    try:
        if len(fields) != len(header):
            raise _RowError(BAD_FIELDS, f"{len(fields)} field(s), the header has {len(header)}")
        if not run_id:
            raise _RowError(NO_RUN_ID, "column 'run_id' is empty", "run_id")
        if run_id in seen:
            raise _RowError(
                DUPLICATE_RUN_ID,
                f"column 'run_id' repeats {run_id!r} (duplicate run_id, first on line "
                f"{seen[run_id]})",
                "run_id",
                run_id,
            )
        run = build(_Cells(record), line)
    except _RowError as err:
        table.defects.append(
            RowDefect(line, err.code, err.reason, run_id, source_id, err.column, err.value)
        )
        return
    seen[run_id] = line
    table.runs.append(run)


def read_runs(path: str | os.PathLike[str]) -> list[Run]:
    """Read a measured-runs CSV strictly: any defect raises :class:`ConfigError`
    ``FILE:LINE: reason`` (the first one in the file)."""
    table = load_runs(path)
    if table.defects:
        first = table.defects[0]
        raise ConfigError(f"{table.path}:{first.line}: {first.reason}")
    return table.runs


def shared_cells(cells: _Cells) -> dict[str, Any]:
    """The cells the CNN and transformer schemas share, typed as :class:`Run` holds them."""
    return {
        "run_id": cells.text("run_id"),
        "source_id": cells.text("source_id"),
        "model": cells.required("model"),
        "gpus_per_node": cells.integer("gpus_per_node", MAX_GPUS_PER_NODE),
        "intra_node": cells.text("intra_node"),
        "inter_node": cells.text("inter_node"),
        "transport": cells.text("transport"),
        "comm": cells.text("comm"),
        "variant": tuple(t.strip() for t in cells.text("variant").split(";") if t.strip()),
        "framework": cells.text("framework"),
        "batch_per_gpu": cells.integer("batch_per_gpu", MAX_BATCH_PER_GPU),
        "precision": cells.text("precision"),
        "data": cells.text("data"),
        "from_figure": cells.text("from_figure") == "1",
        "note": cells.text("note"),
        **{column: cells.text(column) for column in (*STACK_COLUMNS, "instance")},
    }


def _run(cells: _Cells, line: int) -> Run:
    gpus = cells.integer("gpus", MAX_GPUS, required=True)
    assert gpus is not None
    cells.required("model")  # its defect comes before the gpu's
    gpu = cells.required("gpu")
    shared = shared_cells(cells)
    return Run(
        line=line,
        gpu=gpu,
        gpus=gpus,
        nics_per_node=cells.integer("nics_per_node", MAX_NICS_PER_NODE),
        n_ps=cells.integer("n_ps", MAX_GPUS),
        images_per_sec=cells.number("images_per_sec", MIN_IMAGES_PER_SEC, MAX_RUN_IMAGES_PER_SEC),
        scaling_efficiency=cells.number(
            "scaling_efficiency", MIN_SCALING_EFFICIENCY, MAX_SCALING_EFFICIENCY
        ),
        **shared,
    )


TRANSFORMERS = "transformers"
#: the longest sequence a row may state (tokens; a million: far beyond the zoo's positions)
MAX_SEQ_LEN = 1 << 20
#: a run's tokens/s: up to the samples/s bound times a thousand-token sequence
MAX_TOKENS_PER_SEC = MAX_RUN_IMAGES_PER_SEC * 1000


def _rounds_to(value: float, cell: str) -> bool:
    """Whether ``value`` rounds or truncates to the number written in ``cell`` at its stated
    digits (llm-foundry's table truncates: "2" samples/s beside its 96,203 tokens/s of
    32,768-token sequences, 2.94)."""
    text = cell.strip().replace(",", "")
    decimals = len(text.split(".")[1].rstrip("0")) if "." in text else 0
    try:  # a whole number written as "2.0" was a table's integer
        written, step = float(text), 10.0**-decimals
    except ValueError:
        return False
    return abs(value - written) <= 0.5 * step or written <= value < written + step


def is_transformer_header(header: Sequence[str]) -> bool:
    """Whether a measured-runs header is the transformer schema's."""
    values = {"samples_per_sec", "tokens_per_sec"}
    return "images_per_sec" not in header and bool(values & set(header))


def transformer_run(cells: _Cells, line: int) -> Run:
    """One row of the transformer schema as a :class:`Run`
    (:mod:`~ddlsim.tools.validate.transformer_runs`)."""
    gpus = cells.integer("gpus", MAX_GPUS, required=True)
    assert gpus is not None
    seq_len = cells.integer("seq_len", MAX_SEQ_LEN)
    samples = cells.number("samples_per_sec", MIN_IMAGES_PER_SEC, MAX_RUN_IMAGES_PER_SEC)
    tokens = cells.number("tokens_per_sec", MIN_IMAGES_PER_SEC, MAX_TOKENS_PER_SEC)
    if tokens is not None and seq_len is not None:
        from_tokens = tokens / seq_len
        if samples is None or _rounds_to(from_tokens, cells.text("samples_per_sec")):
            samples = from_tokens  # the same rate, with the tokens cell's more digits
    return Run(
        line=line,
        gpu=cells.text("gpu"),
        gpus=gpus,
        nics_per_node=None,
        n_ps=None,
        images_per_sec=samples,
        scaling_efficiency=None,
        **shared_cells(cells),
        schema=TRANSFORMERS,
        task=cells.text("task"),
        seq_len=seq_len,
        tokens_per_sec=tokens,
    )


def format_rows(rows: Iterable[Mapping[str, object]]) -> str:
    """The CSV text of ``rows`` (dicts keyed by column; missing keys = empty cells): the
    schema's columns, then the optional ones that some row fills."""
    rows = [dict(row) for row in rows]
    for row in rows:
        unknown = set(row) - set(COLUMNS) - set(OPTIONAL_COLUMNS)
        if unknown:
            raise ConfigError(f"not schema columns: {', '.join(sorted(unknown))}")
    extra = [c for c in OPTIONAL_COLUMNS if any(row.get(c) is not None for row in rows)]
    columns = [*COLUMNS, *extra]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else str(row.get(c)) for c in columns])
    return out.getvalue()
