"""What one prediction is asked: a job = workload x system x execution (+ simulation settings).

After Calculon's split of application, system and execution, a configuration is made of three
things, each a frozen dataclass whose field names are the keywords of :func:`ddlsim.predict`,
the ``predict_kwargs`` of a recorded result and (with ``-`` for ``_``) the command-line flags:

- :class:`WorkloadConfig` -- what is trained: the model, the batch per GPU, the numerics, the
  data, the compute calibration, the length of the run and the optimizer (what a checkpoint
  holds);
- :class:`SystemConfig` -- what it runs on: the GPUs, how many per node, the links inside a
  node and between nodes, the NICs and the hosts that decode the input, how often a node fails
  and how fast a checkpoint is written;
- :class:`ExecutionConfig` -- how the framework trains on it: the gradient-exchange method,
  the parameter servers, Horovod's and NCCL's releases and knobs, who decodes the input, and
  how it recovers from a failure (restart or elastic, the checkpoint interval);
- :class:`SimulationConfig` -- how ddlsim simulates it: the engine, the synchronisation terms
  (:mod:`ddlsim.engine.sync`), stragglers and jitter, the seed and the detailed engine's
  budget, and the failure model's Monte Carlo.

The failure model's fields are :mod:`ddlsim.resilience`'s inputs in the units their names
say; :meth:`JobConfig.resilience` converts them to its SI configuration.

:class:`JobConfig` holds the four. :meth:`JobConfig.from_kwargs` sorts flat keywords into their
groups (every field name is unique across the groups, so a flat record stays unambiguous and
readable) and :meth:`JobConfig.kwargs` flattens them back. Each group checks its own values
when it is made (:class:`~ddlsim.errors.ConfigError` naming the value); names (models, GPUs,
links, methods) are checked where they are resolved against the catalogs.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddlsim.calibration.profile import MIN_IMAGES_PER_SEC, check_images_per_sec
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION
from ddlsim.compute.stack import DEFAULT_FRAMEWORK, check_stack_names
from ddlsim.engine.budget import DEFAULT_MAX_EVENTS, check_max_events
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION, DEFAULT_RANK_SIGMA, SyncTerms
from ddlsim.errors import ConfigError, shown
from ddlsim.execution.horovod import DEFAULT_HOROVOD_VERSION
from ddlsim.execution.schedules import DEFAULT_PARTITION_BYTES
from ddlsim.resilience.config import (
    DEFAULT_CHECKPOINT_WRITE_GBPS,
    DEFAULT_NODE_MTBF_HOURS,
    DEFAULT_RENDEZVOUS_S,
    DEFAULT_REPLACE_MIN,
    HOUR_S,
    MAX_CHECKPOINT_WRITE_GBPS,
    MAX_MC_DRAWS,
    MIN_CHECKPOINT_GB,
    MIN_CHECKPOINT_WRITE_GBPS,
    MINUTE_S,
    OPTIMIZERS,
    RECOVERIES,
    ResilienceConfig,
    check_choice,
    check_count,
    check_duration,
    check_node_mtbf_hours,
    check_range,
)
from ddlsim.units import MiB
from ddlsim.workload.ttt import DEFAULT_EPOCHS, IMAGENET_1K_TRAIN_IMAGES, validate_ttt_inputs

#: largest accepted log-normal sigma of the detailed engine's compute jitter (beyond it one
#: iteration's compute varies by orders of magnitude and the results become meaningless)
MAX_JITTER_SIGMA = 1.0
#: largest accepted straggler slowdown (compute-time multiplier of one rank)
MAX_SLOWDOWN = 100.0
#: largest accepted fusion threshold, MiB
MAX_FUSION_THRESHOLD_MB = 65536
#: accepted Horovod cycle times, ms, besides 0 (no cycle): from a microsecond (below it the
#: cycle count of one iteration overflows what a float counts exactly) to ten seconds
MIN_CYCLE_TIME_MS = 1e-3
MAX_CYCLE_TIME_MS = 10_000


def _finite_in(value: Any, low: float, high: float) -> bool:
    """``value`` is a real number (not a bool), finite, in [low, high]."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return ok and math.isfinite(value) and low <= value <= high


@dataclass(frozen=True)
class WorkloadConfig:
    """What is trained. ``model``, ``batch`` and ``precision`` left at None take the
    ``calibration`` file's values, else resnet50, 64 and fp32
    (:mod:`ddlsim.calibration.use`). ``tf32`` False runs fp32 on a GPU with TF32
    tensor cores as true fp32 (``NVIDIA_TF32_OVERRIDE=0``). ``single_gpu_throughput`` (images/s)
    rescales the compute so that one GPU runs at that rate. ``epochs`` passes over
    ``dataset_images`` images give the time to train. ``optimizer`` (sgd, momentum, adam)
    says what a checkpoint holds besides the weights; ``checkpoint_GB`` replaces the size
    computed from the model (:mod:`ddlsim.resilience.state`)."""

    model: str | None = None
    batch: int | None = None
    precision: str | None = None
    tf32: bool = True
    data: str = "synthetic"
    calibration: str | None = None
    single_gpu_throughput: float | None = None
    epochs: float = DEFAULT_EPOCHS
    dataset_images: int = IMAGENET_1K_TRAIN_IMAGES
    optimizer: str = "momentum"
    checkpoint_GB: float | None = None

    def __post_init__(self) -> None:
        validate_ttt_inputs(self.epochs, self.dataset_images)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.checkpoint_GB is not None:
            check_range("checkpoint size", self.checkpoint_GB, MIN_CHECKPOINT_GB, 1e9, "GB")
        if self.single_gpu_throughput is not None:
            check_images_per_sec(self.single_gpu_throughput, "single-GPU throughput")


@dataclass(frozen=True)
class SystemConfig:
    """What it runs on: ``gpus`` GPUs of type ``gpu`` (None: the calibration file's, else
    p100), ``gpus_per_node`` per node, the ``intra_node`` fabric and ``inter_node`` network
    (None: the GPU's usual server, InfiniBand EDR between nodes), the ``transport`` (None: the
    network's usual one, or what NCCL picks), ``nics_per_node`` NICs per node (multi-rail:
    their bandwidth adds up) and ``host_input_images_per_s``, what one node's host CPUs decode
    per second with real data (None: the server's hardware threads x 100).
    ``network_calibration`` is a file of ``ddlsim calibrate network``: its fitted link terms
    replace the catalog's on the network (and fabric) it measured
    (:func:`ddlsim.calibration.network.apply`). ``node_mtbf_hours`` is each node's mean time
    between failures (default: Llama 3's, :mod:`ddlsim.resilience.config`; 0: no failures),
    ``checkpoint_write_GBps`` a node's checkpoint write (and read) bandwidth and
    ``checkpoint_time_s`` a measured checkpoint write, in place of size / bandwidth."""

    gpus: int = 1
    gpu: str | None = None
    gpus_per_node: int | None = None
    intra_node: str | None = None
    inter_node: str | None = None
    transport: str | None = None
    nics_per_node: int = 1
    host_input_images_per_s: float | None = None
    network_calibration: str | None = None
    node_mtbf_hours: float = DEFAULT_NODE_MTBF_HOURS
    checkpoint_write_GBps: float = DEFAULT_CHECKPOINT_WRITE_GBPS
    checkpoint_time_s: float | None = None

    def __post_init__(self) -> None:
        check_node_mtbf_hours(self.node_mtbf_hours)
        check_range(
            "checkpoint write bandwidth",
            self.checkpoint_write_GBps,
            MIN_CHECKPOINT_WRITE_GBPS,
            MAX_CHECKPOINT_WRITE_GBPS,
            "GB/s",
        )
        if self.checkpoint_time_s is not None:
            check_duration("checkpoint write time", self.checkpoint_time_s, "s", 1.0)
        rate = self.host_input_images_per_s
        if rate is not None:
            ok = isinstance(rate, numbers.Real) and not isinstance(rate, bool)
            if not ok or not math.isfinite(rate) or not MIN_IMAGES_PER_SEC <= rate <= 1e9:
                raise ConfigError(
                    f"host input rate must be a number of images/s in {MIN_IMAGES_PER_SEC:g}..1e9,"
                    f" got {shown(rate)}"
                )


@dataclass(frozen=True)
class ExecutionConfig:
    """How the framework trains: the gradient-exchange ``comm`` method; parameter servers
    (``n_ps`` tasks, None: the method's default; ``ps_colocated`` on the worker nodes;
    ``ps_placement`` of the variables, cpu or gpu); who decodes real data (``input_pipeline``:
    the host or NVIDIA DALI on the GPUs); Horovod's release (its negotiation and the defaults
    of ``fusion_threshold_mb`` = ``HOROVOD_FUSION_THRESHOLD`` and ``cycle_time_ms`` =
    ``HOROVOD_CYCLE_TIME``), ``response_cache``, ``hierarchical`` allreduce and fp16 gradient
    compression; NCCL's release and ``NCCL_ALGO`` / ``NCCL_PROTO`` (``auto``: what that
    release picks per call). ``schedule`` groups the gradients into operations and says when
    each may start (:mod:`ddlsim.execution.schedules`: auto, horovod, bsp, wfbp, mg-wfbp,
    bytescheduler, ddp); ``partition_mb`` is the size of ByteScheduler's partitions (MiB);
    ``bucket_cap_mb`` PyTorch DDP's bucket cap (MiB; None: PyTorch's default, 25 MiB after a
    first bucket of 1 MiB; a given cap applies to the first bucket too, as in PyTorch).
    After a node fails the job ``recovery`` is ``restart`` from the last checkpoint (a
    relaunch of ``restart_min``, None: 10 minutes assumed plus the checkpoint's load) or
    ``elastic`` (Horovod Elastic: a re-rendezvous of ``rendezvous_s``, the failed node replaced
    after ``replace_min``); ``checkpoint_interval_min`` is the training between checkpoints
    (elastic: commits), None = auto, the minimum of the expected time-to-train.
    ``framework`` (tensorflow, pytorch, mxnet), ``layout`` (nchw, nhwc) and ``fusion`` (none,
    bn-act, xla) are the software stack the compute is timed for (:mod:`ddlsim.compute.stack`;
    a layout or fusion left None is the framework's default)."""

    comm: str = "horovod-nccl"
    schedule: str = "auto"
    partition_mb: float = DEFAULT_PARTITION_BYTES / MiB
    bucket_cap_mb: float | None = None
    n_ps: int | None = None
    ps_colocated: bool = True
    ps_placement: str = "cpu"
    input_pipeline: str = "host"
    horovod_version: str = DEFAULT_HOROVOD_VERSION
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    response_cache: bool = True
    hierarchical: bool = False
    fp16_allreduce: bool = False
    nccl_version: str = DEFAULT_NCCL_VERSION
    algorithm: str = "auto"
    nccl_protocol: str = "auto"
    recovery: str = "restart"
    checkpoint_interval_min: float | None = None
    restart_min: float | None = None
    rendezvous_s: float = DEFAULT_RENDEZVOUS_S
    replace_min: float = DEFAULT_REPLACE_MIN
    framework: str = DEFAULT_FRAMEWORK
    layout: str | None = None
    fusion: str | None = None

    def __post_init__(self) -> None:
        check_stack_names(self.framework, self.layout, self.fusion)
        check_choice("recovery", self.recovery, RECOVERIES)
        for what, value, unit, unit_s, zero in (
            ("checkpoint interval", self.checkpoint_interval_min, "min", MINUTE_S, False),
            ("restart time", self.restart_min, "min", MINUTE_S, True),
            ("re-rendezvous time", self.rendezvous_s, "s", 1.0, True),
            ("node replacement time", self.replace_min, "min", MINUTE_S, True),
        ):
            if value is not None:
                check_duration(what, value, unit, unit_s, zero=zero)
        part = self.partition_mb
        if isinstance(part, bool) or not isinstance(part, numbers.Real) or not 1e-3 <= part <= 1024:
            raise ConfigError(f"partition size must be in 0.001..1024 MiB, got {part!r}")
        cap = self.bucket_cap_mb
        if cap is not None and (
            isinstance(cap, bool)
            or not isinstance(cap, numbers.Real)
            or not math.isfinite(cap)
            or not 1 / MiB <= cap <= MAX_FUSION_THRESHOLD_MB
        ):
            raise ConfigError(
                f"DDP bucket cap must be a number in 1 byte .. {MAX_FUSION_THRESHOLD_MB} MiB, "
                f"got {cap!r}"
            )
        mb = self.fusion_threshold_mb
        if mb is not None and not _finite_in(mb, 0, MAX_FUSION_THRESHOLD_MB):
            raise ConfigError(
                f"fusion threshold must be in 0..{MAX_FUSION_THRESHOLD_MB} MiB, got {shown(mb)}"
            )
        ms = self.cycle_time_ms
        if ms is not None and not (ms == 0 or _finite_in(ms, MIN_CYCLE_TIME_MS, MAX_CYCLE_TIME_MS)):
            raise ConfigError(
                f"cycle time must be 0 or in {MIN_CYCLE_TIME_MS:g}..{MAX_CYCLE_TIME_MS:g} ms, "
                f"got {shown(ms)}"
            )


@dataclass(frozen=True)
class SimulationConfig:
    """How ddlsim simulates the job: ``engine`` fast (one representative worker) or detailed
    (every GPU a process); the synchronisation terms of :mod:`ddlsim.engine.sync`
    (``rank_sigma``: each rank's per-iteration speed variability, charged as waiting for the
    slowest rank; ``host_contention``: compute slowdown of GPUs sharing a node;
    ``interference``: communication kernels holding SMs); detailed engine: ``stragglers``
    (rank -> compute-time multiplier), seeded log-normal compute ``jitter_sigma``, ``seed``,
    and ``max_events``, the budget a run is refused over (:mod:`ddlsim.engine.budget`).
    ``mc_draws`` > 0 adds a Monte Carlo of that many whole training runs with failures, seeded
    by ``mc_seed`` (:mod:`ddlsim.resilience.montecarlo`)."""

    engine: str = "fast"
    stragglers: Mapping[int, float] | None = None
    jitter_sigma: float = 0.0
    rank_sigma: float = DEFAULT_RANK_SIGMA
    host_contention: float = DEFAULT_HOST_CONTENTION
    interference: bool = True
    seed: int = 0
    max_events: float = DEFAULT_MAX_EVENTS
    mc_draws: int = 0
    mc_seed: int = 0

    def __post_init__(self) -> None:
        for what, seed in (("seed", self.seed), ("Monte Carlo seed", self.mc_seed)):
            if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
                raise ConfigError(f"{what} must be a non-negative integer, got {seed!r}")
        check_count("Monte Carlo draws", self.mc_draws, MAX_MC_DRAWS)
        if not 0 <= self.jitter_sigma <= MAX_JITTER_SIGMA:
            raise ConfigError(
                f"jitter sigma must be in 0..{MAX_JITTER_SIGMA:g}, got {self.jitter_sigma:g}"
            )
        _check_stragglers(self.stragglers or {})
        SyncTerms(self.rank_sigma, self.host_contention, bool(self.interference))
        check_max_events(self.max_events)


def _check_stragglers(stragglers: Mapping[int, float]) -> None:
    """Ranks are non-negative integers; slowdowns finite and in (0, MAX_SLOWDOWN]."""
    for rank, factor in stragglers.items():
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
            raise ConfigError(f"straggler rank must be a non-negative integer, got {rank!r}")
        ok = isinstance(factor, numbers.Real) and not isinstance(factor, bool)
        if not ok or not math.isfinite(factor) or not 0 < factor <= MAX_SLOWDOWN:
            shown = f"{factor:g}" if ok else repr(factor)
            raise ConfigError(
                f"bad straggler {rank}:{shown}: a slowdown (compute-time multiplier) must be a "
                f"finite number in (0, {MAX_SLOWDOWN:g}]"
            )


#: the groups of a job, in the order a flat record lists their fields
GROUPS: dict[str, type] = {
    "workload": WorkloadConfig,
    "system": SystemConfig,
    "execution": ExecutionConfig,
    "simulation": SimulationConfig,
}
#: every keyword of :func:`ddlsim.predict` -> the group that holds it
GROUP_OF: dict[str, str] = {
    f.name: group for group, cls in GROUPS.items() for f in dataclasses.fields(cls)
}


@dataclass(frozen=True)
class JobConfig:
    """One configuration: workload x system x execution, simulated as ``simulation`` says."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    system: SystemConfig = field(default_factory=SystemConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> JobConfig:
        """The job of flat keywords (those of :func:`ddlsim.predict`); an unknown keyword is a
        :class:`ConfigError` naming it."""
        unknown = sorted(set(kwargs) - set(GROUP_OF))
        if unknown:
            raise ConfigError(f"unknown predict keyword(s): {', '.join(unknown)}")
        parts: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
        for name, value in kwargs.items():
            parts[GROUP_OF[name]][name] = value
        return cls(**{group: GROUPS[group](**parts[group]) for group in GROUPS})

    def kwargs(self) -> dict[str, Any]:
        """Flat keywords, every field in group order (the inverse of :meth:`from_kwargs`)."""
        return {
            f.name: getattr(getattr(self, group), f.name)
            for group, cls in GROUPS.items()
            for f in dataclasses.fields(cls)
        }

    def replace(self, **kwargs: Any) -> JobConfig:
        """A copy with some flat keywords changed (checked again)."""
        return JobConfig.from_kwargs(**{**self.kwargs(), **kwargs})

    def resilience(self) -> ResilienceConfig | None:
        """The failure model's inputs in SI units (None when ``node_mtbf_hours`` is 0: no
        failures)."""
        w, s, e, sim = self.workload, self.system, self.execution, self.simulation
        if not s.node_mtbf_hours:
            return None
        minutes = {
            k: None if v is None else v * MINUTE_S
            for k, v in (
                ("interval_s", e.checkpoint_interval_min),
                ("restart_s", e.restart_min),
                ("replace_s", e.replace_min),
            )
        }
        return ResilienceConfig(
            node_mtbf_s=s.node_mtbf_hours * HOUR_S,
            recovery=e.recovery,
            optimizer=w.optimizer,
            checkpoint_write_Bps=s.checkpoint_write_GBps * 1e9,
            checkpoint_time_s=s.checkpoint_time_s,
            checkpoint_bytes=None if w.checkpoint_GB is None else w.checkpoint_GB * 1e9,
            rendezvous_s=e.rendezvous_s,
            mc_draws=sim.mc_draws,
            seed=sim.mc_seed,
            **minutes,
        )


def defaults() -> dict[str, Any]:
    """The default of every keyword of :func:`ddlsim.predict`, in group order."""
    return JobConfig().kwargs()


def job(model: str | None = None, gpus: int = 1, **settings: Any) -> JobConfig:
    """The job of flat keywords, as :func:`ddlsim.predict` takes them:
    ``ddlsim.prepare(ddlsim.job("resnet50", 64, inter_node="25gbe"))``."""
    return JobConfig.from_kwargs(model=model, gpus=gpus, **settings)
