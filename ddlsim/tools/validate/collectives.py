"""Measured collectives (``traces/measured/collectives/README.md``) against ddlsim's model.

``ddlsim validate FILE`` takes a file of this schema (one row per setup and message size:
``setup_id``, ``collective``, ``nccl_version``, ``gpu``, ``gpus_total``, ``nodes``,
``gpus_per_node``, ``intra_node``, ``network``, ``transport``, ``nics_per_node``,
``size_bytes``, ``time_us``, ``algbw_GBps``, ``busbw_GBps``, ``note``) and predicts every row
with the communication model ``predict`` uses, from the same resolvers: the cluster from the
system wing (:func:`ddlsim.resolve.system.resolve_system`, NCCL's transport), the model from
the execution wing (:func:`ddlsim.resolve.execution.resolve_comm`: ``horovod-nccl``, the row's
NCCL version and, where the note forces them, ``NCCL_ALGO`` and ``NCCL_PROTO``).

The cells are prose as sources write them; :mod:`ddlsim.tools.netcal.names` maps what they
determine onto the catalog and every other setup is skipped with the reason. The measured time
of a row is ``time_us``; where a source gives only a bus bandwidth it is the time that
bandwidth implies for the row's size (``busbw`` basis); a row without a size states a large-
message plateau and is compared at 1 GiB (``plateau`` basis). Rows marked ``anomalous`` (bug or
misconfiguration threads) are excluded.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION, PROTOCOLS, NcclVersion
from ddlsim.errors import ConfigError, DdlsimError
from ddlsim.inputs import csv_rows
from ddlsim.system import catalog
from ddlsim.tools.netcal import names
from ddlsim.tools.validate.runs import _decode
from ddlsim.units import GiB, KiB, MiB

COLUMNS = (
    "setup_id",
    "collective",
    "nccl_version",
    "gpu",
    "gpus_total",
    "nodes",
    "gpus_per_node",
    "intra_node",
    "network",
    "transport",
    "nics_per_node",
    "size_bytes",
    "time_us",
    "algbw_GBps",
    "busbw_GBps",
    "note",
)
REQUIRED = ("setup_id", "collective", "gpu", "size_bytes", "time_us", "busbw_GBps")
#: nccl-tests' collective -> the communication model's operation (CommModel.time_s(nbytes, op));
#: a row whose operation the model's ``ops`` lack is skipped with the reason
OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter"}
#: collectives ddlsim validates (the rest are skipped)
MODELLED = tuple(OPS)
#: where a row gives no size: the large-message plateau is compared at this size
PLATEAU_BYTES = GiB
#: size bands of the summary: (name, low inclusive, high exclusive)
BANDS = (
    ("< 64 KiB", 0, 64 * KiB),
    ("64 KiB - 16 MiB", 64 * KiB, 16 * MiB + 1),
    ("> 16 MiB", 16 * MiB + 1, math.inf),
)
PREDICTED = "predicted"
SKIPPED = "skipped"


@dataclass(frozen=True)
class CollectiveRow:
    """One measured row; empty cells are ``""`` (text) or ``None`` (numbers)."""

    line: int
    cells: dict[str, str]
    size_bytes: int | None
    time_us: float | None
    busbw_GBps: float | None
    gpus_total: int | None
    nodes: int | None
    gpus_per_node: int | None
    nics_per_node: int | None
    #: why the CSV reader could not read the row (it is skipped with this reason)
    defect: str = ""

    def __getattr__(self, name: str) -> str:
        if name in COLUMNS:
            return self.cells.get(name, "")
        raise AttributeError(name)


@dataclass(frozen=True)
class Setup:
    """The catalog configuration of a setup's rows, or why there is none (``reason``)."""

    kwargs: dict[str, Any] | None
    reason: str = ""
    code: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CollectiveResult:
    """A row predicted (``rel_error`` = predicted / measured time - 1) or skipped."""

    row: CollectiveRow
    status: str
    code: str = ""
    reason: str = ""
    basis: str = ""
    size_bytes: float | None = None
    measured_s: float | None = None
    predicted_s: float | None = None
    label: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def rel_error(self) -> float | None:
        """Predicted / measured time - 1 (None for a skipped row)."""
        if self.predicted_s is None or not self.measured_s:
            return None
        return self.predicted_s / self.measured_s - 1.0

    @property
    def band(self) -> str | None:
        """The size band of the row (module :data:`BANDS`)."""
        if self.size_bytes is None:
            return None
        return next(name for name, low, high in BANDS if low <= self.size_bytes < high)

    def to_json(self) -> dict[str, Any]:
        """One row of ``ddlsim validate --json`` on a collectives file."""
        return {
            "setup_id": self.row.setup_id,
            "line": self.row.line,
            "status": self.status,
            "skip_code": self.code or None,
            "reason": self.reason or None,
            "basis": self.basis or None,
            "size_bytes": self.size_bytes,
            "band": self.band,
            "measured_us": None if self.measured_s is None else self.measured_s * 1e6,
            "predicted_us": None if self.predicted_s is None else self.predicted_s * 1e6,
            "rel_error": self.rel_error,
            **self.label,
            "notes": list(self.notes),
        }


def is_collectives_header(header: Sequence[str]) -> bool:
    """Whether a CSV header is the measured-collectives schema's."""
    return {"setup_id", "size_bytes", "collective"} <= {h.strip() for h in header}


def read_collectives(path: str | Path) -> list[CollectiveRow]:
    """The rows of a measured-collectives CSV. A file without the required columns, with
    broken quoting or not UTF-8 is refused (ConfigError); a bad number in a row is kept as
    ``None`` and the row skipped later with the reason."""
    path = Path(path)
    reader = csv.reader(io.StringIO(_decode(path, "collectives file"), newline=""), strict=True)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ConfigError(f"{path}: empty file (expected a header row)") from None
    except csv.Error as exc:
        raise ConfigError(f"{path}:1: malformed CSV: {exc}") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ConfigError(f"{path}:1: header lacks column(s) {', '.join(missing)}")
    rows = []
    try:
        for fields, skip in csv_rows(reader):
            if skip:
                rows.append(CollectiveRow(reader.line_num, {}, *[None] * 7, defect=skip))
                continue
            if not any(f.strip() for f in fields):
                continue
            cells = {k: v.strip() for k, v in zip(header, fields, strict=False)}
            rows.append(
                CollectiveRow(
                    line=reader.line_num,
                    cells=cells,
                    size_bytes=_int(cells.get("size_bytes", "")),
                    time_us=_pos(cells.get("time_us", "")),
                    busbw_GBps=_pos(cells.get("busbw_GBps", "")),
                    gpus_total=_int(cells.get("gpus_total", "")),
                    nodes=_int(cells.get("nodes", "")),
                    gpus_per_node=_int(cells.get("gpus_per_node", "")),
                    nics_per_node=_leading_int(cells.get("nics_per_node", "")),
                )
            )
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from None
    return rows


def _pos(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _leading_int(cell: str) -> int | None:
    """The count a cell starts with (``8 (assumed)`` -> 8; the note says what is assumed)."""
    match = re.match(r"\s*(\d+)\b", cell)
    return _int(match[1]) if match else None


def _int(cell: str) -> int | None:
    value = _pos(cell)
    return int(value) if value is not None and value == int(value) else None


def forced_algorithm(note: str) -> str:
    """The NCCL algorithm a row's note says was forced (``NCCL_ALGO=Tree``, ``ring forced``,
    ``NCCL_TREE_THRESHOLD=0``: 2.4's way of forcing rings); ``auto`` otherwise."""
    algo = re.search(r"NCCL_ALGO=(\w+)", note)
    if algo:
        return algo[1].lower()
    if "NCCL_TREE_THRESHOLD=0" in note or re.search(r"\bring forced\b", note):
        return "ring"
    return "auto"


def forced_protocol(note: str) -> str:
    """The one NCCL protocol a row's note says was forced (``NCCL_PROTO=Simple``: the run's
    own environment, e.g. Google's GPUDirect-TCPX configuration files that the A3 High rows
    quote); ``auto`` where the note forces none or a list of several (NCCL then still chooses
    among those, which one model protocol cannot say)."""
    proto = re.search(r"NCCL_PROTO=([\w,^]+)", note)
    if proto is None:
        return "auto"
    return PROTOCOL_NAMES.get(proto[1].lower(), "auto")


#: ``NCCL_PROTO`` values (NCCL parses them case-insensitively) -> the model's protocol names
PROTOCOL_NAMES = {p.lower(): p for p in PROTOCOLS}


def map_setup(row: CollectiveRow) -> Setup:
    """The cluster's and the model's settings (:func:`comm_model`) for a row's hardware, or
    why the row's hardware has no catalog configuration."""
    gpu = names.gpu_name(row.gpu, row.intra_node)
    if gpu.name is None:
        return Setup(None, gpu.reason, "unknown-gpu")
    n, per, nodes = row.gpus_total, row.gpus_per_node, row.nodes
    if n is None or per is None or nodes is None or n != per * nodes:
        return Setup(None, "GPUs, nodes or GPUs per node not stated (or inconsistent)", "topology")
    intra = names.intra_name(row.intra_node, gpu.name) if per > 1 else names.Mapped("none")
    if intra.name is None:
        return Setup(None, intra.reason, "unknown-intra")
    notes: list[str] = []
    inter, transport = "none", None
    nics = row.nics_per_node
    if nodes > 1:
        net = names.network_name(row.network)
        if net.name in (None, "none"):
            return Setup(None, net.reason or f"network {row.network!r}", "unknown-network")
        tr = names.transport_name(row.transport)
        if tr.name is None:
            return Setup(None, tr.reason, "unknown-transport")
        inter, transport = net.name, tr.name
        if inter == UNSTATED_IB:
            inter, reference_nics, note = _reference_infiniband(gpu.name)
            if note:
                notes.append(note)
                if row.nics_per_node is None:
                    nics = reference_nics
    version = names.nccl_version_text(row.nccl_version)
    if version is None:
        arch = catalog.device(gpu.name).arch
        if arch not in ("ampere", "hopper", "blackwell"):
            return Setup(None, f"NCCL version not stated ({gpu.name}, {arch})", "no-nccl-version")
        version = UNSTATED_NCCL.get(arch, DEFAULT_NCCL_VERSION)
        notes.append(
            f"NCCL version not stated: {version} ({arch} GPUs need a 2020 or later NCCL, "
            + ("2.7+; any 2.5+ is costed alike)" if arch == "ampere" else
               "and the rows are 2023-2026: NVLS's releases; any 2.19+ is costed alike)")
        )  # fmt: skip
    kwargs = {
        "gpu": gpu.name,
        "n_gpus": n,
        "gpus_per_node": per,
        "intra_node": intra.name,
        "inter_node": inter,
        "transport": transport,
        "nics_per_node": nics or 1,
        "nccl_version": str(NcclVersion.parse(version)),
        "algorithm": forced_algorithm(row.note),
        "nccl_protocol": forced_protocol(row.note),
    }
    if nodes > 1 and nics is None:
        notes.append("nics_per_node not stated: 1 assumed")
    return Setup(kwargs, notes=tuple(notes))


#: an unstated NCCL on a GPU of this architecture: 2.19 (nvidia-nccl-cu12 2.19.3, uploaded
#: 2023-10-24), the first release with every NVLS path (:mod:`ddlsim.comm.nccl_nvls`). The
#: Hopper / Blackwell rows that state a date are from 2023-10 to 2026-05, and 2.19 to 2.29
#: are costed alike; older architectures keep the default. (No release is a hard floor for
#: Blackwell: the nvidia-nccl-cu12 wheels 2.16.5 to 2.26.2 all carry sm_50-sm_90 SASS and
#: compute_90 PTX, which the driver compiles for sm_100.)
UNSTATED_NCCL = {"hopper": "2.19", "blackwell": "2.19"}
#: the catalog's InfiniBand of unstated generation (FDR: the 2015-2018 papers' clusters)
UNSTATED_IB = "ib"


def _reference_infiniband(gpu: str) -> tuple[str, int | None, str]:
    """InfiniBand of unstated generation on ``gpu``: the generation and NIC count of the GPU's
    reference server where that is InfiniBand (an H100 cluster's InfiniBand is NDR, not the
    FDR of 2016), with a note; else the catalog's ``ib`` and no note."""
    network = catalog.reference_network(gpu)
    if network is None or not network[0].startswith("ib-"):
        return UNSTATED_IB, None, ""
    name, nics = network
    note = (
        f"InfiniBand generation not stated: {name} of {gpu}'s reference server "
        f"({nics} per node where the row states no count)"
    )
    return name, nics, note


def comm_model(setup: dict[str, Any], network_calibration: Any = None) -> Any:
    """The NCCL model predict would build for this setup, by the system and execution wings'
    resolvers as ``prepare`` uses them: the sharded methods' (:mod:`ddlsim.comm.sharded`),
    whose all-reduce is horovod-nccl's and which also costs all-gather and reduce-scatter."""
    from ddlsim.config.groups import SystemConfig
    from ddlsim.execution.strategy import Strategy
    from ddlsim.resolve.execution import resolve_comm
    from ddlsim.resolve.system import resolve_system

    system = SystemConfig(
        gpus=setup["n_gpus"],
        gpu=setup["gpu"],
        gpus_per_node=setup["gpus_per_node"],
        intra_node=setup["intra_node"],
        inter_node=setup["inter_node"],
        transport=setup["transport"],
        nics_per_node=setup["nics_per_node"],
    )
    cluster = resolve_system(system, setup["gpu"], nccl=True, network=network_calibration)
    strategy = Strategy(
        comm="fsdp",
        nccl_version=setup["nccl_version"],
        algorithm=setup["algorithm"],
        nccl_protocol=setup.get("nccl_protocol", "auto"),
    )
    return resolve_comm(strategy, cluster)


def bus_factor(collective: str, n_ranks: int) -> float:
    """nccl-tests' bus bandwidth / algorithm bandwidth for ``collective`` over ``n_ranks``."""
    if collective == "all_reduce":
        return 2 * (n_ranks - 1) / n_ranks
    return (n_ranks - 1) / n_ranks


def validate_collectives(
    rows: Sequence[CollectiveRow], network_calibration: Any = None
) -> list[CollectiveResult]:
    """Predict every row (module docstring); skipped rows carry a code and the reason."""
    setups: dict[str, Setup] = {}
    models: dict[str, Any] = {}
    out = []
    for row in rows:
        if row.defect:
            out.append(CollectiveResult(row, SKIPPED, "malformed", row.defect))
            continue
        if "anomalous" in row.note.lower():
            out.append(CollectiveResult(row, SKIPPED, "anomalous", "marked anomalous in note"))
            continue
        if row.collective not in MODELLED:
            reason = f"collective {row.collective!r} is not validated ({', '.join(MODELLED)})"
            out.append(CollectiveResult(row, SKIPPED, "collective", reason))
            continue
        setup = setups.setdefault(row.setup_id, map_setup(row))
        if setup.kwargs is None:
            out.append(CollectiveResult(row, SKIPPED, setup.code, setup.reason))
            continue
        try:
            if row.setup_id not in models:
                models[row.setup_id] = comm_model(setup.kwargs, network_calibration)
            model = models[row.setup_id]
            if OPS[row.collective] not in model.ops:
                reason = (
                    f"{model.name} costs {', '.join(model.ops)}, not {OPS[row.collective]} "
                    f"({row.collective}) yet"
                )
                out.append(CollectiveResult(row, SKIPPED, "op-not-modelled", reason))
                continue
            out.append(_predict(row, setup, model))
        except DdlsimError as exc:
            out.append(CollectiveResult(row, SKIPPED, "predict-error", " ".join(str(exc).split())))
    return out


def _predict(row: CollectiveRow, setup: Setup, model: Any) -> CollectiveResult:
    assert setup.kwargs is not None
    n = setup.kwargs["n_gpus"]
    factor = bus_factor(row.collective, n)
    size: float | None = row.size_bytes
    if row.time_us is not None and size is not None:
        basis, measured = "time", row.time_us * 1e-6
    elif row.busbw_GBps is not None:
        basis = "busbw" if size is not None else "plateau"
        size = size if size is not None else PLATEAU_BYTES
        measured = size * factor / (row.busbw_GBps * 1e9)
    else:
        return CollectiveResult(row, SKIPPED, "no-value", "neither time_us nor busbw_GBps")
    op = OPS[row.collective]
    predicted = model.time_s(size, op)
    notes = setup.notes
    if basis == "plateau":
        notes = (*notes, "no size stated: the plateau bus bandwidth compared at 1 GiB")
    return CollectiveResult(
        row, PREDICTED, basis=basis, size_bytes=size, measured_s=measured,
        predicted_s=predicted, label=model.label(size, op), notes=notes,
    )  # fmt: skip
