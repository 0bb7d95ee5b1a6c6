"""Benchmark logs + command-line facts -> rows of the measured-runs schema.

What a log states wins over a flag, and a flag that contradicts the log is an error (the wrong
file or the wrong flag). Fields a log cannot state come from flags; without a flag they stay
empty (unknown), except where the schema fixes the value: ``precision`` fp32 (the default of
both benchmarks), ``framework`` tensorflow, ``from_figure`` 0, ``inter_node`` none and
``gpus_per_node`` = ``gpus`` for a single-process, single-node run, ``transport`` only on
multi-node rows. Names are checked against ddlsim's vocabularies (zoo, catalogs, methods).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.execution.strategy import COMM_METHODS, DATA_KINDS, PRECISIONS
from ddlsim.inputs import LOG_MAX_BYTES, read_text
from ddlsim.system import catalog
from ddlsim.system.specs import TRANSPORTS
from ddlsim.tools.traces.logs import LogFacts, parse_log
from ddlsim.workload.zoo import MODEL_NAMES

SCHEMA_COMMS = ("single", *COMM_METHODS, "other")
FRAMEWORKS = ("tensorflow", "pytorch", "mxnet", "oneflow", "paddle")
MAX_NOTE_CHARS = 199


@dataclass(frozen=True)
class ImportFlags:
    """Facts given on the command line (``None``: not given)."""

    source_id: str = "IMPORTED"
    model: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    gpus_per_node: int | None = None
    intra_node: str | None = None
    inter_node: str | None = None
    transport: str | None = None
    comm: str | None = None
    batch: int | None = None
    precision: str | None = None
    data: str | None = None
    framework: str | None = None


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_MODEL_ALIASES = {_squash(m): m for m in MODEL_NAMES} | {
    "inceptionv3": "inception3",
    "inceptionv4": "inception4",
    "resnet50v1": "resnet50",
    "mobilenetv1": "mobilenet",
}


def zoo_model(name: str) -> str:
    """The zoo name of a model as a log spells it (``ResNet50``, ``InceptionV3``, ...)."""
    key = _squash(name)
    if key not in _MODEL_ALIASES:
        raise UnknownNameError("model", name, MODEL_NAMES)
    return _MODEL_ALIASES[key]


def _choice(what: str, value: str | None, valid: Sequence[str]) -> str | None:
    if value is None:
        return None
    if value not in valid:
        raise UnknownNameError(what, value, valid)
    return value


def _merge(label: str, what: str, flag_name: str, stated: object, flag: object) -> object:
    if stated is not None and flag is not None and stated != flag:
        raise ConfigError(f"{label}: the log states {what} {stated}, but {flag_name} is {flag}")
    return stated if stated is not None else flag


def _check_counts(label: str, gpus: object, per_node: object, batch: object) -> None:
    """Counts are positive, and GPUs fill whole nodes when both are known."""
    for what, value in (("gpus", gpus), ("gpus_per_node", per_node), ("batch_per_gpu", batch)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(f"{label}: {what} must be a positive integer, got {value!r}")
    whole = not (isinstance(gpus, int) and isinstance(per_node, int)) or gpus <= per_node
    if not whole and gpus % per_node:
        raise ConfigError(f"{label}: {gpus} GPUs do not fill nodes of {per_node} (--gpus-per-node)")


def build_row(facts: LogFacts, flags: ImportFlags, label: str, run_id: str) -> dict[str, object]:
    """One schema row from a parsed log and the flags."""
    model = _merge(
        label,
        "model",
        "--model",
        zoo_model(facts.model) if facts.model else None,
        zoo_model(flags.model) if flags.model else None,
    )
    gpu = catalog.device(flags.gpu).id if flags.gpu else None
    if gpu is not None and catalog.device(gpu).kind != facts.device_kind:
        raise ConfigError(
            f"{label}: the benchmark ran on {facts.device_kind.upper()}s, but --gpu {gpu} is "
            f"a {catalog.device(gpu).kind.upper()} device"
        )
    gpus = _merge(label, "gpus", "--gpus", facts.gpus, flags.gpus)
    batch = _merge(label, "batch per GPU", "--batch", facts.batch_per_gpu, flags.batch)
    data = _merge(label, "data", "--data", facts.data, _choice("data", flags.data, DATA_KINDS))
    comm = _choice("comm", flags.comm, SCHEMA_COMMS)
    if comm is not None and facts.comms and comm not in facts.comms:
        raise ConfigError(
            f"{label}: the log's method allows comm {' or '.join(facts.comms)}, "
            f"but --comm is {comm}"
        )
    if comm is None and len(facts.comms) == 1:
        comm = facts.comms[0]
    per_node = flags.gpus_per_node
    if facts.single_node and gpus is not None:
        what = "one process on one node, i.e. GPUs per node"
        per_node = _merge(label, what, "--gpus-per-node", gpus, per_node)
    if per_node is None and gpus == 1:
        per_node = 1
    _check_counts(label, gpus, per_node, batch)
    multi = per_node is not None and gpus is not None and gpus > per_node
    inter = catalog.network(flags.inter_node).id if flags.inter_node else None
    if inter is None and per_node is not None and not multi:
        inter = "none"
    transport = _choice("transport", flags.transport, TRANSPORTS) if multi else None
    note = f"imported from {Path(label).name} ({facts.kind}): {facts.detail}"
    return {
        "run_id": run_id,
        "source_id": flags.source_id,
        "model": model,
        "gpu": gpu,
        "gpus": gpus,
        "gpus_per_node": per_node,
        "intra_node": catalog.intra_link(flags.intra_node).id if flags.intra_node else None,
        "inter_node": inter,
        "transport": transport,
        "comm": comm,
        "framework": _choice("framework", flags.framework, FRAMEWORKS) or "tensorflow",
        "batch_per_gpu": batch,
        "precision": _choice("precision", flags.precision, PRECISIONS) or "fp32",
        "data": data,
        "images_per_sec": round(facts.images_per_sec, 2),
        "from_figure": 0,
        "note": note[:MAX_NOTE_CHARS],
    }


def import_logs(paths: Sequence[str], flags: ImportFlags) -> list[dict[str, object]]:
    """One row per log file, numbered ``<source_id>-0001`` on in the order given."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", flags.source_id):
        raise ConfigError(
            f"--source-id must be letters, digits, '_', '.' or '-', got {flags.source_id!r}"
        )
    rows = []
    for i, path in enumerate(paths, start=1):
        text = read_text(path, "training log", LOG_MAX_BYTES, lenient=True)
        facts = parse_log(text, path)
        rows.append(build_row(facts, flags, path, f"{flags.source_id}-{i:04d}"))
    return rows
