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
readable) and :meth:`JobConfig.kwargs` flattens them back. The four group classes are made
from the knob table (:mod:`ddlsim.config.knobs`): their fields, defaults and checks are its rows,
in its order, and each group checks its values when it is made
(:class:`~ddlsim.errors.ConfigError` naming the value). The names of models, GPUs and links
are checked where they are resolved against the zoo and the catalogs (which know aliases).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddlsim.config.knobs import (  # noqa: F401  (the limits' former home: kept importable)
    MAX_CYCLE_TIME_MS,
    MAX_FUSION_THRESHOLD_MB,
    MAX_JITTER_SIGMA,
    MAX_SLOWDOWN,
    MIN_CYCLE_TIME_MS,
    Knob,
    in_group,
)
from ddlsim.errors import ConfigError
from ddlsim.resilience.config import HOUR_S, MINUTE_S, ResilienceConfig


def _post_init(knobs: tuple[Knob, ...]) -> Callable[[Any], None]:
    def check(self: Any) -> None:
        for knob in knobs:
            knob.validate(getattr(self, knob.name))

    return check


def _group(class_name: str, group: str, doc: str) -> type:
    """The frozen dataclass of ``group``: one field per knob of the table, checked when made."""
    knobs = in_group(group)
    cls = dataclasses.make_dataclass(
        class_name,
        [(k.name, k.annotation, field(default=k.default)) for k in knobs],
        frozen=True,
        namespace={"__post_init__": _post_init(knobs), "__doc__": doc},
    )
    cls.__module__ = __name__
    return cls


if TYPE_CHECKING:  # the classes are made from the table; to a type checker they are Any
    WorkloadConfig = SystemConfig = ExecutionConfig = SimulationConfig = Any
else:
    WorkloadConfig = _group(
        "WorkloadConfig",
        "workload",
        """What is trained. ``model``, ``batch`` and ``precision`` left at None take the
    ``calibration`` file's values, else resnet50, 64 and fp32
    (:mod:`ddlsim.calibration.use`). ``tf32`` False runs fp32 on a GPU with TF32
    tensor cores as true fp32 (``NVIDIA_TF32_OVERRIDE=0``). ``single_gpu_throughput`` (images/s)
    rescales the compute so that one GPU runs at that rate. ``epochs`` passes over
    ``dataset_images`` images give the time to train. ``optimizer`` (sgd, momentum, adam)
    says what a checkpoint holds besides the weights; ``checkpoint_GB`` replaces the size
    computed from the model (:mod:`ddlsim.resilience.state`).""",
    )
    SystemConfig = _group(
        "SystemConfig",
        "system",
        """What it runs on: ``gpus`` GPUs of type ``gpu`` (None: the calibration file's, else
    p100), ``gpus_per_node`` per node, the ``intra_node`` fabric and ``inter_node`` network
    (None: the GPU's usual server, InfiniBand EDR between nodes), the ``transport`` (None: the
    network's usual one, or what NCCL picks), ``nics_per_node`` NICs per node (multi-rail:
    their bandwidth adds up) and ``host_input_images_per_s``, what one node's host CPUs decode
    per second with real data (None: the estimate of :mod:`ddlsim.execution.input_pipeline`).
    ``network_calibration`` is a file of ``ddlsim calibrate network``: its fitted link terms
    replace the catalog's on the network (and fabric) it measured
    (:func:`ddlsim.calibration.network.apply`). ``node_mtbf_hours`` is each node's mean time
    between failures (default: Llama 3's, :mod:`ddlsim.resilience.config`; 0: no failures),
    ``checkpoint_write_GBps`` a node's checkpoint write (and read) bandwidth and
    ``checkpoint_time_s`` a measured checkpoint write, in place of size / bandwidth.""",
    )
    ExecutionConfig = _group(
        "ExecutionConfig",
        "execution",
        """How the framework trains: the gradient-exchange ``comm`` method; parameter servers
    (``n_ps`` tasks, None: the method's default; ``ps_colocated`` on the worker nodes;
    ``ps_placement`` of the variables, cpu or gpu); who decodes real data (``input_pipeline``:
    the host or NVIDIA DALI on the GPUs; for the host, the ``preprocessing`` each image costs and
    the decode ``input_workers`` per process); Horovod's release (its negotiation and the defaults
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
    a layout or fusion left None is the framework's default).""",
    )
    SimulationConfig = _group(
        "SimulationConfig",
        "simulation",
        """How ddlsim simulates the job: ``engine`` fast (one representative worker) or detailed
    (every GPU a process); the synchronisation terms of :mod:`ddlsim.engine.sync`
    (``rank_sigma``: each rank's per-iteration speed variability, charged as waiting for the
    slowest rank; ``host_contention``: compute slowdown of GPUs sharing a node;
    ``interference``: communication kernels holding SMs); detailed engine: ``stragglers``
    (rank -> compute-time multiplier), seeded log-normal compute ``jitter_sigma``, ``seed``,
    and ``max_events``, the budget a run is refused over (:mod:`ddlsim.engine.budget`).
    ``mc_draws`` > 0 adds a Monte Carlo of that many whole training runs with failures, seeded
    by ``mc_seed`` (:mod:`ddlsim.resilience.montecarlo`).""",
    )


def optimizer_of(w: Any) -> str:
    """The workload's optimizer: ``auto`` is momentum SGD for the CNN zoo, AdamW for a
    transformer (the zoo's, in any spelling, or a ``model_config`` file's)."""
    if w.optimizer != "auto":
        return w.optimizer
    from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES
    from ddlsim.workload.zoo.aliases import canonical

    transformer = w.model_config is not None
    if w.model is not None and not transformer:
        transformer = canonical(w.model) in TRANSFORMER_NAMES
    return "adamw" if transformer else "momentum"


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

    def resilience(self, optimizer: str | None = None) -> ResilienceConfig | None:
        """The failure model's inputs in SI units (None when ``node_mtbf_hours`` is 0: no
        failures); ``optimizer`` the one the job resolved to (its ``auto``)."""
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
            optimizer=optimizer or optimizer_of(w),
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
