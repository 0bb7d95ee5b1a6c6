"""Reading a measured single-GPU throughput from a benchmark log (``--from-log FILE``).

Two formats are recognised:

* tf_cnn_benchmarks: ``total images/sec: 219.03`` (with ``Model:``, ``64 per device`` and
  ``Devices: ['/gpu:0']`` in its header);
* Horovod's synthetic benchmarks (``tensorflow2_synthetic_benchmark.py`` and the PyTorch one):
  ``Img/sec per GPU: 219.0 +-1.2`` (with ``Model:``, ``Batch size:`` and ``Number of GPUs:``).

The last throughput line counts. Where the header names a model, a batch size or a device count,
it must agree with the calibration being anchored (same model, same batch, one GPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ddlsim.errors import ConfigError
from ddlsim.inputs import LOG_MAX_BYTES, read_text

_THROUGHPUT = (
    re.compile(r"total images/sec:\s*(?P<v>[0-9]+(?:\.[0-9]+)?)", re.IGNORECASE),
    re.compile(r"^\s*Img/sec per GPU:\s*(?P<v>[0-9]+(?:\.[0-9]+)?)"),
)
_MODEL = re.compile(r"^\s*Model:\s*(?P<v>\S+)")
_BATCH = (
    re.compile(r"^\s*(?:Batch size:\s*)?(?P<v>\d+)\s+per device"),
    re.compile(r"^\s*Batch size:\s*(?P<v>\d+)\s*$"),
)
_GPUS = re.compile(r"^\s*Number of GPUs:\s*(?P<v>\d+)")
_DEVICES = re.compile(r"^\s*Devices:\s*\[(?P<v>.*)\]")


@dataclass(frozen=True)
class LogThroughput:
    """A throughput read from a log, and what its header says."""

    images_per_sec: float
    source: str  # "FILE line N: <the line>"
    model: str | None
    batch: int | None
    n_gpus: int | None


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower())


def read_log(path: str | Path) -> LogThroughput:
    """The last single-GPU throughput line of ``path`` and the header facts around it."""
    p = Path(path)
    lines = read_text(p, "log", LOG_MAX_BYTES, lenient=True).splitlines()
    found: tuple[float, str] | None = None
    model = batch = n_gpus = None
    for i, line in enumerate(lines, 1):
        for pattern in _THROUGHPUT:
            if m := pattern.search(line):
                found = (float(m["v"]), f"{p} line {i}: {line.strip()}")
        if (m := _MODEL.match(line)) and model is None:
            model = m["v"]
        for pattern in _BATCH:
            if m := pattern.match(line):
                batch = int(m["v"])
        if m := _GPUS.match(line):
            n_gpus = int(m["v"])
        if m := _DEVICES.match(line):
            n_gpus = len([d for d in m["v"].split(",") if d.strip()])
    if found is None:
        raise ConfigError(
            f"no throughput in {p}: expected a tf_cnn_benchmarks 'total images/sec: X' or a "
            "Horovod benchmark 'Img/sec per GPU: X' line"
        )
    return LogThroughput(found[0], found[1], model, batch, n_gpus)


def check_log(log: LogThroughput, model: str, batch: int) -> None:
    """Refuse a log of another model, another batch size, or more than one GPU."""
    if log.n_gpus is not None and log.n_gpus != 1:
        raise ConfigError(f"{log.source}: a {log.n_gpus}-GPU run; anchoring needs a 1-GPU log")
    if log.model is not None and _norm(log.model) != _norm(model):
        raise ConfigError(f"{log.source}: the log is for model {log.model!r}, not {model!r}")
    if log.batch is not None and log.batch != batch:
        raise ConfigError(f"{log.source}: the log is for batch {log.batch}, not {batch}")
