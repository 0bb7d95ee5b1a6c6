"""Parameter sweeps: the cartesian product of :func:`ddlsim.predict` keywords, one row each.

A row is flat (one CSV line): the configuration's resolved inputs (:data:`INPUT_COLUMNS`, the
failure model's among them), then the results (:data:`RESULT_COLUMNS`, seconds and images/s -- a
transformer's sequences/s; ``time_to_train_s`` the failure-free one), a transformer's
(:data:`TRANSFORMER_COLUMNS`: tokens/s, MFU, memory per GPU; empty for a CNN, as is its input
``seq_len``), then the failure model's (:data:`RESILIENCE_COLUMNS`: expected failures, the
checkpoint interval used, the expected seconds of checkpoints, lost work, recovery and training
on fewer nodes, the goodput and the expected time-to-train with failures; empty where
``node_mtbf_hours`` is 0), then ``status`` (``ok`` or ``error``) and ``error`` (the one-line
message of a configuration that failed; the inputs of a failed row are the requested values,
since nothing could be resolved), then what re-runs the row (:data:`RECORD_COLUMNS`,
:mod:`ddlsim.config.record`): the rank variability, the calibration file and its SHA-256, the
ddlsim version and ``config``, the complete keyword arguments of :func:`ddlsim.predict` as JSON
(``ddlsim.predict(**reproduce.decode(json.loads(config)))``).

``ddlsim plot`` reads this schema. :func:`evaluate` is a pure top-level function of one
configuration, so that a distributed runner can map it over a grid; :func:`run_grid` is the
serial runner.
"""

from __future__ import annotations

import csv
import gc
import io
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ddlsim.atomic import atomic_write, atomic_write_text
from ddlsim.compute.transformer_terms import TERM_NAMES
from ddlsim.errors import ConfigError, DdlsimError, shown
from ddlsim.extras import require
from ddlsim.inputs import SWEEP_MAX_BYTES, check_input, read_text
from ddlsim.system.catalog_files import MAX_GPUS
from ddlsim.workload.ttt import MAX_DATASET_IMAGES

#: the failure model's inputs (:mod:`ddlsim.config.groups`), as the job's keywords name them
FAILURE_INPUT_COLUMNS = (
    "optimizer",
    "checkpoint_GB",
    "node_mtbf_hours",
    "checkpoint_write_GBps",
    "checkpoint_time_s",
    "recovery",
    "checkpoint_interval_min",
    "restart_min",
    "rendezvous_s",
    "replace_min",
)
#: a transformer's step as the job sets it (empty for a CNN): what it is trained for, micro-steps
#: per optimizer step, recomputation, the attention and loss kernels; a sharded method's
#: sharding and offload (empty for the others)
TRANSFORMER_INPUT_COLUMNS = (
    "task",
    "grad_accum",
    "activation_checkpointing",
    "attention",
    "loss_kernel",
    "sharding",
    "offload",
)
#: resolved inputs, flattened, in column order
INPUT_COLUMNS = (
    "model",
    "gpu",
    "gpus",
    "gpus_per_node",
    "intra_node",
    "inter_node",
    "transport",
    "nics_per_node",
    "comm",
    "schedule",
    "n_ps",
    "batch_per_gpu",
    "seq_len",
    *TRANSFORMER_INPUT_COLUMNS,
    "precision",
    "data",
    "fusion_threshold_mb",
    "cycle_time_ms",
    "hierarchical",
    "algorithm",
    "nccl_version",
    "nccl_protocol",
    "horovod_version",
    "fp16_allreduce",
    "tf32",
    "framework",
    "layout",
    "fusion",
    "engine",
    "epochs",
    "dataset_images",
    "train_tokens",
    *FAILURE_INPUT_COLUMNS,
)
BREAKDOWN_COLUMNS = (
    "compute_s",
    "comm_hidden_s",
    "comm_exposed_s",
    "input_stall_s",
    "coordination_s",
)
RESULT_COLUMNS = (
    "images_per_sec",
    "iteration_time_s",
    "scaling_efficiency",
    "single_gpu_images_per_sec",
    "time_to_train_s",
    *BREAKDOWN_COLUMNS,
)
#: one GPU's compute of a transformer's optimizer step by term, seconds (the report's
#: ``compute / GPU`` lines: :mod:`ddlsim.compute.transformer_terms`)
COMPUTE_TERM_COLUMNS = tuple(f"compute_{name}_s" for name in TERM_NAMES)
#: a transformer's results (empty for a CNN): tokens/s over all GPUs, the model FLOPs
#: utilisation (0..1), the memory its step needs per GPU, in GB (1e9 bytes), and its compute
#: by term
TRANSFORMER_COLUMNS = ("tokens_per_sec", "mfu", "memory_total_GB", *COMPUTE_TERM_COLUMNS)
#: the failure model's results (:class:`ddlsim.resilience.ResilienceResult`), seconds
RESILIENCE_COLUMNS = (
    "expected_failures",
    "checkpoint_interval_s",
    "checkpoint_s",
    "lost_s",
    "recovery_s",
    "degraded_s",
    "goodput",
    "expected_time_to_train_s",
)
STATUS_COLUMNS = ("status", "error")
RECORD_COLUMNS = (
    "rank_sigma",
    "calibration_file",
    "calibration_sha256",
    "ddlsim_version",
    "config",
)
COLUMNS = (
    *INPUT_COLUMNS,
    *RESULT_COLUMNS,
    *TRANSFORMER_COLUMNS,
    *RESILIENCE_COLUMNS,
    *STATUS_COLUMNS,
    *RECORD_COLUMNS,
)

#: most configurations a grid may have unless raised (``ddlsim sweep --max-configs``)
MAX_CONFIGS = 100_000
#: the most ``--max-configs`` may raise it to: the rows are held until the file is written
#: (measured: ~11 KB per row, so ~11 GB at this bound), and a million fast-engine
#: configurations take about 100 minutes on 2 cores; a larger study is several sweeps
MAX_CONFIGS_LIMIT = 1_000_000

#: row column -> the predict() keyword that sets it, where the names differ
_KWARG_OF = {"batch_per_gpu": "batch"}
#: predict() keyword -> row column, where the names differ
_COLUMN_OF = {"batch": "batch_per_gpu"}


def evaluate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Predict one configuration (keywords of :func:`ddlsim.predict`) as one sweep row.

    Never raises for a bad configuration: a :class:`DdlsimError` becomes ``status="error"``
    with the message in ``error`` and empty results.
    """
    from ddlsim.api import predict
    from ddlsim.config.record import complete_kwargs, encode
    from ddlsim.version import __version__

    config = dict(config)
    try:
        p = predict(**config)
    except DdlsimError as exc:
        row = dict.fromkeys(COLUMNS)
        for key, value in {**_defaults(), **config}.items():
            column = _COLUMN_OF.get(key, key)
            if column in row and value != "max":  # --batch max: the config says it
                row[column] = value
        row["status"], row["error"] = "error", " ".join(str(exc).split())
        row["ddlsim_version"] = __version__
        try:
            row["config"] = json.dumps(encode(complete_kwargs(config)))
        except DdlsimError:  # a keyword predict does not know: the error says which
            row["config"] = None
        return row
    i = p.inputs
    row = {c: i.get(c) for c in INPUT_COLUMNS}
    row.update(gpus=i["n_gpus"], fp16_allreduce=i["grad_dtype"] == "fp16")
    row.update(i.get("stack") or {})  # framework, layout, fusion as resolved
    row.update(
        images_per_sec=p.images_per_sec,
        iteration_time_s=p.iteration_time_s,
        scaling_efficiency=p.scaling_efficiency,
        single_gpu_images_per_sec=p.single_gpu_images_per_sec,
        time_to_train_s=p.time_to_train_s,
    )
    row.update({k: float(p.breakdown[k]) for k in BREAKDOWN_COLUMNS})
    row.update(transformer_columns(i.get("transformer")))
    row.update(transformer_inputs(i))
    row.update({c: i["predict_kwargs"].get(c) for c in FAILURE_INPUT_COLUMNS})
    row.update(resilience_columns(p.resilience))
    row.update(status="ok", error="")
    source = i.get("calibration_source") or {}
    row.update(
        rank_sigma=i.get("rank_sigma"),
        calibration_file=source.get("path"),
        calibration_sha256=source.get("sha256"),
        ddlsim_version=i.get("ddlsim_version"),
        config=json.dumps(i["predict_kwargs"]),
    )
    return row


def transformer_columns(t: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sequence length and :data:`TRANSFORMER_COLUMNS` of a prediction's
    ``inputs["transformer"]`` (all None for a CNN)."""
    if not t:
        return dict.fromkeys(("seq_len", *TRANSFORMER_COLUMNS))
    terms = t.get("compute_terms_s") or {}
    return {
        "seq_len": t["seq_len"],
        "tokens_per_sec": t["tokens_per_sec"],
        "mfu": t["mfu"],
        "memory_total_GB": t["memory"]["total_GB"],
        **{
            column: terms.get(name)
            for column, name in zip(COMPUTE_TERM_COLUMNS, TERM_NAMES, strict=True)
        },
    }


def transformer_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`TRANSFORMER_INPUT_COLUMNS` of a prediction's inputs, as its job set them (all
    None for a CNN; ``sharding`` and ``offload`` only for a sharded method)."""
    from ddlsim.comm import SHARDED_METHODS

    row = dict.fromkeys(TRANSFORMER_INPUT_COLUMNS)
    if not inputs.get("transformer"):
        return row
    kwargs = inputs["predict_kwargs"]
    sharded = inputs.get("comm") in SHARDED_METHODS
    for column in TRANSFORMER_INPUT_COLUMNS:
        if column not in ("sharding", "offload") or sharded:
            row[column] = kwargs.get(column)
    return row


def resilience_columns(result: Any) -> dict[str, float | None]:
    """The :data:`RESILIENCE_COLUMNS` of a :class:`ddlsim.resilience.ResilienceResult` (all
    None without one: no failures); an infinite expectation is None (an empty cell)."""
    if result is None:
        return dict.fromkeys(RESILIENCE_COLUMNS)
    e = result.to_dict()["expected"]
    return {
        "expected_failures": e["failures"],
        "checkpoint_interval_s": result.costs.interval_s,
        "checkpoint_s": e["checkpoint_s"],
        "lost_s": e["lost_s"],
        "recovery_s": e["recovery_s"],
        "degraded_s": e["degraded_s"],
        "goodput": e["goodput"],
        "expected_time_to_train_s": e["time_to_train_s"],
    }


def _defaults() -> dict[str, Any]:
    """Default keyword values of :func:`ddlsim.predict` and :func:`ddlsim.prepare`, with the
    values model, gpu, batch and precision take without a calibration file."""
    from ddlsim.calibration.use import DEFAULTS
    from ddlsim.config.record import keyword_defaults

    return {**keyword_defaults(), **DEFAULTS}


def grid_size(grid: Mapping[str, Iterable[Any]]) -> int:
    """Number of configurations of ``grid`` (the product of its value counts)."""
    return math.prod(len(_options(v)) for v in grid.values())


def check_grid_size(grid: Mapping[str, Iterable[Any]], max_configs: int = MAX_CONFIGS) -> None:
    """Refuse a grid of more than ``max_configs`` configurations, before expanding it."""
    n = grid_size(grid)
    if n > max_configs:
        counts = " x ".join(f"{len(_options(v))} {k}" for k, v in grid.items())
        raise ConfigError(
            f"the grid has {n:,} configurations ({counts}), more than --max-configs "
            f"{max_configs:,} (1,000 fast-engine configurations take about 6 s on 2 cores); "
            "narrow the grid or raise --max-configs"
        )


def _options(raw: Any) -> list[Any]:
    return [raw] if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable) else list(raw)


def expand_grid(
    grid: Mapping[str, Iterable[Any]], *, max_configs: int = MAX_CONFIGS
) -> Iterator[dict[str, Any]]:
    """Every combination of ``grid``'s values (keys: :func:`ddlsim.predict` keywords), one at a
    time in product order: the grid is checked (its keys, an empty list, more than
    ``max_configs`` configurations counted by multiplying the list lengths) when this is
    called, before any configuration is built, and the configurations are then made as they
    are consumed, never held together."""
    if not grid:
        raise ConfigError("empty sweep grid: give at least one parameter")
    keys = list(grid)
    valid = set(_defaults()) | {"model", "gpus"}
    unknown = sorted(k for k in keys if k not in valid)
    if unknown:
        raise ConfigError(
            f"unknown sweep parameter(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}"
        )
    values = []
    for key in keys:
        options = _options(grid[key])
        if not options:
            raise ConfigError(f"sweep parameter {key!r} has no values")
        values.append(options)
    check_grid_size(dict(zip(keys, values, strict=True)), max_configs)
    return (dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values))


def run_grid(grid: Mapping[str, Iterable[Any]]) -> list[dict[str, Any]]:
    """Evaluate every configuration of ``grid`` serially, in product order (one row each)."""
    return [evaluate(config) for config in expand_grid(grid)]


def settle_heap() -> None:
    """In a process that exists to run a sweep (the ``ddlsim sweep`` command, the workers of
    its local cluster), before the configurations: collect what is garbage now and exempt what
    is left (the modules and data loaded so far, which live as long as the process) from the
    garbage collector's later passes (:func:`gc.freeze`), which otherwise scan all of it again
    and again while the sweep allocates: 6% of a serial sweep, 11% in a Dask worker, whose
    process also holds Dask. Once per process; what the sweep itself makes is collected as
    usual. Not for a long-lived process of the user's (what is frozen is never collected)."""
    global _SETTLED
    if not _SETTLED:
        gc.collect()
        gc.freeze()
        _SETTLED = True


_SETTLED = False


def rows_to_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """The CSV text of ``rows`` (header :data:`COLUMNS`; None as an empty cell)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS})
    return out.getvalue()


def write_rows(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write ``rows`` as CSV to ``path`` atomically (``-``: standard output)."""
    atomic_write_text(path, rows_to_csv(rows))


def parquet_modules() -> Any:
    """pandas, after checking that pyarrow is there too (Parquet files need both)."""
    pd = require("pandas", "sweep", "Parquet files")
    require("pyarrow", "sweep", "Parquet files")
    return pd


def write_parquet(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write ``rows`` as Parquet to ``path`` atomically (columns :data:`COLUMNS`)."""
    pd = parquet_modules()
    frame = pd.DataFrame([dict(r) for r in rows], columns=list(COLUMNS))
    atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


#: columns parsed as numbers when a sweep file is read back, with the values ddlsim writes
#: there: counts (whole numbers >= 1), positive quantities, and quantities >= 0; every value
#: finite. A file with another value in one of them (a hand-edited -4 GPUs, an inf) is refused.
COUNT_COLUMNS = frozenset(
    {"gpus", "gpus_per_node", "nics_per_node", "n_ps", "batch_per_gpu", "dataset_images"}
    | {"seq_len"}
)
POSITIVE_COLUMNS = frozenset(
    {"epochs", "images_per_sec", "iteration_time_s", "single_gpu_images_per_sec"}
    | {"time_to_train_s", "expected_time_to_train_s", "checkpoint_interval_s"}
    | {"checkpoint_GB", "checkpoint_write_GBps", "checkpoint_time_s", "checkpoint_interval_min"}
    | {"tokens_per_sec", "memory_total_GB"}
)
NON_NEGATIVE_COLUMNS = frozenset(
    {"fusion_threshold_mb", "cycle_time_ms", "scaling_efficiency", *BREAKDOWN_COLUMNS, "mfu"}
    | set(COMPUTE_TERM_COLUMNS)
    | {"node_mtbf_hours", "restart_min", "rendezvous_s", "replace_min"}
    | {"expected_failures", "checkpoint_s", "lost_s", "recovery_s", "degraded_s", "goodput"}
)
NUMERIC_COLUMNS = COUNT_COLUMNS | POSITIVE_COLUMNS | NON_NEGATIVE_COLUMNS


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a sweep file back (CSV, or Parquet by its ``.parquet`` extension): numeric columns
    as floats, empty cells as None.

    Any columns are accepted (callers check the ones they need); an unreadable or empty file or
    a non-numeric value in a numeric column raises :class:`ConfigError`.
    """
    if os.fspath(path).lower().endswith(".parquet"):
        return _read_parquet(path)
    text = read_text(path, "sweep file", SWEEP_MAX_BYTES)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames
        raw = list(reader)
    except csv.Error as exc:  # a sweep file is ddlsim's own: any bad row refuses it
        raise ConfigError(
            f"sweep file {path}, line {reader.line_num}: malformed CSV: {exc}"
        ) from None
    if not header:
        raise ConfigError(f"sweep file {path} is empty (no header line)")
    return _typed_rows(path, raw, start=2)


def _typed_rows(
    path: str | os.PathLike[str], records: list[dict[Any, Any]], start: int
) -> list[dict[str, Any]]:
    """Text cells -> values: numeric columns as floats, empty cells as None (``start``: the
    number of the first record, a line for CSV, a row index for Parquet)."""
    where = "line" if start else "row"
    rows = []
    for line, record in enumerate(records, start=start):
        row: dict[str, Any] = {}
        for key, text in record.items():
            if key is None:
                raise ConfigError(f"sweep file {path}, line {line}: more cells than columns")
            text = (text or "").strip()
            if not text:
                row[key] = None
            elif key in NUMERIC_COLUMNS:
                row[key] = _number(text, key, f"sweep file {path}, {where} {line}")
            else:
                row[key] = text
        rows.append(row)
    return rows


def _number(text: str, column: str, where: str) -> float:
    """The value of a numeric cell, checked against what its column holds."""
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: column {column} is not a number: {shown(text)}") from None
    if column in COUNT_COLUMNS:
        top = MAX_GPUS if column == "gpus" else MAX_DATASET_IMAGES
        ok = math.isfinite(value) and 1 <= value <= top and value.is_integer()
        holds = f"a whole number in 1..{top:,}"
    elif column in POSITIVE_COLUMNS:
        ok, holds = math.isfinite(value) and value > 0, "a finite number > 0"
    else:
        ok, holds = math.isfinite(value) and value >= 0, "a finite number >= 0"
    if not ok:
        raise ConfigError(f"{where}: column {column} must be {holds}, got {shown(text)}")
    return value


def _read_parquet(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Parquet rows as :func:`read_rows` returns CSV rows (the same cell values)."""
    pd = parquet_modules()
    check_input(path, "sweep file", SWEEP_MAX_BYTES)
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise ConfigError(f"cannot read sweep file {path}: no such file") from None
    except Exception as exc:  # pyarrow raises many error types for a file it cannot read
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(f"cannot read sweep file {path} as Parquet: {reason}") from None
    if frame.columns.empty:
        raise ConfigError(f"sweep file {path} is empty (no columns)")
    text = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return _typed_rows(path, [{str(k): _cell(v) for k, v in r.items()} for r in text], start=0)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return "" if value != value else str(value)
    return str(value)
