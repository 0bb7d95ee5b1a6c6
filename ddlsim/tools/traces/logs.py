"""Parse benchmark output logs: what a run's log states about the run.

Two formats:

- Horovod's synthetic benchmarks (``examples/tensorflow2/tensorflow2_synthetic_benchmark.py``;
  the PyTorch one prints the same lines), rank 0 only::

      Model: ResNet50
      Batch size: 32
      Number of GPUs: 16
      Running warmup...
      Running benchmark...
      Iter #0: 289.3 img/sec per GPU
      ...
      Img/sec per GPU: 290.1 +-2.3
      Total img/sec on 16 GPU(s): 4641.6 +-36.8

  ``Batch size`` is per GPU; the data are synthetic by construction. Run on CPUs, the
  benchmarks say ``CPU`` where they say ``GPU`` (one worker per process, ``device_kind`` cpu),
  and Horovod's CPU operations exchange the gradients (Gloo or MPI).

- tf_cnn_benchmarks (``benchmark_cnn.py``): the header (``Model:``, ``Dataset:``,
  ``Batch size: N global`` / ``M per device``, ``Num GPUs:`` in old releases, ``Devices:``,
  ``Data format:``, ``Optimizer:``, ``Variables:``, ``Sync:`` when distributed, ``Horovod on:``),
  then ``Done warm up``, the ``Step  Img/sec  total_loss`` table and ``total images/sec: X``.
  ``total images/sec`` is the throughput of *one worker process* (its devices' batch over the
  step time), so the run's total is that figure times the number of workers, which is
  global batch / (per-device batch x devices of one worker).

Lines tagged by ``mpirun --tag-output`` (``[1,0]<stdout>:``) or ``horovodrun``
(``[0]<stdout>:``) are untagged, and lines of ranks other than 0 are dropped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ddlsim.calibration.profile import MAX_RUN_IMAGES_PER_SEC, MIN_IMAGES_PER_SEC
from ddlsim.errors import ConfigError, shown

HOROVOD_SYNTHETIC = "horovod synthetic benchmark"
TF_CNN_BENCHMARKS = "tf_cnn_benchmarks"

_TAG = re.compile(r"^\[(?:\d+,)?(\d+)\]<std(?:out|err)>:")
# variable_update -> comm values it is compatible with (empty default: the log does not decide)
_TF_COMM: dict[str, tuple[str, ...]] = {
    "parameter_server": ("ps",),
    "replicated": ("replicated-nccl", "replicated-cpu"),
    "distributed_replicated": ("distributed-replicated",),
    "horovod": ("horovod-nccl", "horovod-mpi"),
    "independent": ("other",),
    "distributed_all_reduce": ("other",),
    "collective_all_reduce": ("other",),
}
_HOROVOD_COMMS = ("horovod-nccl", "horovod-mpi")
_HOROVOD_CPU_COMMS = ("horovod-gloo", "horovod-mpi")


@dataclass(frozen=True)
class LogFacts:
    """What one log states; ``None`` = not stated. ``comms``: compatible comm values."""

    kind: str
    model: str | None
    gpus: int | None
    batch_per_gpu: int | None
    images_per_sec: float
    data: str | None
    comms: tuple[str, ...]
    single_node: bool
    detail: str
    device_kind: str = "gpu"  # "cpu": a Horovod synthetic benchmark run on CPU workers


def _lines(text: str) -> list[str]:
    out = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        tag = _TAG.match(line)
        if tag:
            if tag.group(1) != "0":
                continue
            line = line[tag.end() :]
        out.append(line)
    return out


def _find(pattern: str, lines: list[str], label: str, *, last: bool = False) -> re.Match | None:
    regex = re.compile(pattern)
    found = [m for m in (regex.match(line) for line in lines) if m]
    if not found:
        return None
    if len({m.group(0).strip() for m in found}) > 1 and not last:
        raise ConfigError(f"{label}: several different {pattern!r} lines (several runs?)")
    return found[-1]


def _throughput(pattern: str, start: str, lines: list[str], label: str, value: int = 1) -> re.Match:
    """The throughput line (``pattern``) of a log whose result line begins with ``start``;
    :class:`ConfigError` quoting that line when its figure is not a number in the physical
    range of a run's throughput (``nan``, ``-1``, ``0``, ``1e999``)."""
    found = _find(pattern, lines, label)
    try:
        figure = float(found.group(value)) if found else math.nan
    except ValueError:  # "1.2.3"
        figure = math.nan
    if found is None or not MIN_IMAGES_PER_SEC <= figure <= MAX_RUN_IMAGES_PER_SEC:
        line = found.group(0) if found else next(x for x in lines if x.startswith(start))
        raise ConfigError(
            f"{label}: no usable throughput in {shown(line.strip())}: it must be a number of "
            f"images/s in {MIN_IMAGES_PER_SEC:g}..{MAX_RUN_IMAGES_PER_SEC:g}"
        )
    return found


def parse_log(text: str, label: str) -> LogFacts:
    """Parse one log (``label`` names it in errors); raises :class:`ConfigError` if the text
    is neither format or lacks the throughput line."""
    lines = _lines(text)
    horovod = any(line.startswith("Total img/sec on ") for line in lines)
    tf_cnn = any(line.startswith("total images/sec:") for line in lines)
    if horovod and tf_cnn:
        raise ConfigError(f"{label}: both a Horovod and a tf_cnn_benchmarks result; one run each")
    if horovod:
        return _parse_horovod(lines, label)
    if tf_cnn:
        return _parse_tf_cnn(lines, label)
    raise ConfigError(
        f"{label}: not a Horovod synthetic benchmark or tf_cnn_benchmarks log "
        "(no 'Total img/sec on N GPU(s)' or 'total images/sec' line)"
    )


def _parse_horovod(lines: list[str], label: str) -> LogFacts:
    pattern = r"Total img/sec on (\d+) (GPU|CPU)\(s\):\s*([0-9.]+)\s*\+-\s*([0-9.]+)"
    total = _throughput(pattern, "Total img/sec on ", lines, label, value=3)
    device = total.group(2)
    gpus = int(total.group(1))
    number = _find(rf"Number of {device}s:\s*(\d+)\s*$", lines, label)
    if number and int(number.group(1)) != gpus:
        raise ConfigError(f"{label}: 'Number of {device}s: {number.group(1)}' but total on {gpus}")
    model = _find(r"Model:\s*(\S+)\s*$", lines, label)
    batch = _find(r"Batch size:\s*(\d+)\s*$", lines, label)
    per_gpu = _find(rf"Img/sec per {device}:\s*([0-9.]+)\s*\+-\s*([0-9.]+)", lines, label)
    detail = f"Total img/sec on {gpus} {device}(s): {total.group(3)} +-{total.group(4)}"
    if per_gpu:
        detail += f"; per {device} {per_gpu.group(1)} +-{per_gpu.group(2)}"
    return LogFacts(
        kind=HOROVOD_SYNTHETIC,
        model=model.group(1) if model else None,
        gpus=gpus,
        batch_per_gpu=int(batch.group(1)) if batch else None,
        images_per_sec=float(total.group(3)),
        data="synthetic",
        comms=_HOROVOD_COMMS if device == "GPU" else _HOROVOD_CPU_COMMS,
        single_node=gpus == 1,
        detail=detail,
        device_kind=device.lower(),
    )


def _parse_tf_cnn(lines: list[str], label: str) -> LogFacts:
    total = _throughput(r"total images/sec:\s*([0-9.]+)\s*$", "total images/sec:", lines, label)
    model = _find(r"Model:\s+(\S+)\s*$", lines, label)
    dataset = _find(r"Dataset:\s+(\S+)(\s+\(synthetic\))?\s*$", lines, label)
    global_batch = _find(r"Batch size:\s+(\d+)\s+global\s*$", lines, label)
    per_device = _find(r"\s+(\d+)\s+per device\s*$", lines, label)
    num_gpus = _find(r"Num GPUs:\s+(\d+)\s*$", lines, label)
    devices = _find(r"Devices:\s+\[(.*)\]\s*$", lines, label)
    variables = _find(r"Variables:\s+(\S+)\s*$", lines, label)
    hvd_device = _find(r"Horovod on:\s+(\S+)\s*$", lines, label)
    distributed = _find(r"Sync:\s+", lines, label) is not None
    update = variables.group(1) if variables else None
    if update is not None and update not in _TF_COMM:
        raise ConfigError(f"{label}: unknown variable_update {update!r}")
    comms = _TF_COMM.get(update or "", ())
    if update == "horovod" and hvd_device:
        comms = ("horovod-mpi",) if hvd_device.group(1).lower() == "cpu" else ("horovod-nccl",)
    if devices:
        n_local = len([d for d in devices.group(1).split(",") if d.strip()])
    elif update == "horovod":
        n_local = 1
    else:
        n_local = int(num_gpus.group(1)) if num_gpus else 1
    workers = 1
    gpus = int(num_gpus.group(1)) if num_gpus else None
    batch = int(per_device.group(1)) if per_device else None
    if global_batch and batch:
        total_devices, rest = divmod(int(global_batch.group(1)), batch)
        workers, rest_w = divmod(total_devices, n_local)
        if rest or rest_w or workers < 1:
            raise ConfigError(
                f"{label}: global batch {global_batch.group(1)} is not a multiple of "
                f"{batch} per device x {n_local} device(s) per worker"
            )
        gpus = total_devices
    per_worker = float(total.group(1))
    detail = f"total images/sec: {total.group(1)}"
    if workers > 1:
        detail = f"{workers} workers x {detail} (per worker)"
    return LogFacts(
        kind=TF_CNN_BENCHMARKS,
        model=model.group(1) if model else None,
        gpus=gpus,
        batch_per_gpu=batch,
        images_per_sec=per_worker * workers,
        data=None if dataset is None else ("synthetic" if dataset.group(2) else "real"),
        comms=comms,
        single_node=workers == 1 and not distributed and update not in ("horovod", None),
        detail=detail,
    )
