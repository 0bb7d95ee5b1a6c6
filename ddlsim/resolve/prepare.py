"""``prepare(job)``: a :class:`~ddlsim.config.groups.JobConfig` resolved into something to
simulate, by one resolver per wing.

- the calibration wing (:mod:`ddlsim.resolve.calibration`): the workload's names and defaults,
  then its compute timed on the resolved cluster;
- the system wing (:mod:`ddlsim.resolve.system`): the cluster;
- the execution wing (:mod:`ddlsim.resolve.execution`): the strategy and the communication
  model;

then the DAG of one worker's iteration. The result, a :class:`Setup`, is what the engines run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ddlsim.calibration.store import Choice
from ddlsim.comm import NCCL_METHODS, PYTORCH_METHODS, SHARDED_METHODS
from ddlsim.comm.base import CommModel
from ddlsim.compute.stack import Stack
from ddlsim.config.groups import (
    ExecutionConfig,
    JobConfig,
    SystemConfig,
    WorkloadConfig,
    optimizer_of,
)
from ddlsim.config.knob import BATCH_MAX, GPUS_MIN
from ddlsim.engine.simulate import SimOptions, SimResult, simulate
from ddlsim.errors import ConfigError
from ddlsim.execution import input_pipeline as ip
from ddlsim.execution.dag import DiGraph, build_dag
from ddlsim.execution.horovod import Coordination
from ddlsim.execution.strategy import Strategy
from ddlsim.resolve.calibration import (  # noqa: F401  (tf32_applies, job_stack: imported from here)
    Compute,
    Names,
    job_stack,
    resolve_compute,
    resolve_names,
    tf32_applies,
)
from ddlsim.resolve.execution import resolve_comm, resolve_strategy
from ddlsim.resolve.system import instance_system, resolve_system
from ddlsim.system.specs import Cluster
from ddlsim.workload.workload import Workload
from ddlsim.workload.zoo import get_model

if TYPE_CHECKING:  # annotations: the transformer modules load only for a transformer job
    from ddlsim.workload.transformers.config import TransformerConfig
    from ddlsim.workload.transformers.memory import Memory


@dataclass(frozen=True)
class Setup:
    """Everything resolved for one configuration, ready to simulate."""

    workload: Workload
    cluster: Cluster
    strategy: Strategy
    comm: CommModel
    dag: DiGraph
    input_time_s: float
    #: the calibration file the compute times were read from (given, found, or derived from)
    calibration_source: str | None = None
    #: how the search chose that file over the user's or the shipped one (None: given with
    #: ``--calibration``; :mod:`ddlsim.calibration.store`)
    calibration_choice: Choice | None = None
    #: the software stack the compute is timed for (:mod:`ddlsim.compute.stack`)
    stack: Stack | None = None
    #: a transformer's definition (None for a CNN) and the memory its step needs per GPU
    transformer: TransformerConfig | None = None
    memory: Memory | None = None
    #: the optimizer the job runs (``auto`` resolved)
    optimizer: str = "momentum"

    def simulate(self, options: SimOptions | None = None) -> SimResult:
        """Run the engine on this configuration."""
        return simulate(
            self.dag, self.cluster, self.comm, options=options, coordination=self.coordination()
        )

    def coordination(self) -> Coordination:
        """Horovod's coordinator for this strategy (:class:`Coordination`)."""
        return self.strategy.coordination()


def prepare(job: JobConfig) -> Setup:
    """Resolve names, find the calibration, build the cluster, DAG and communication model of
    ``job``'s workload, system and execution (its simulation settings are the engine's:
    :meth:`Setup.simulate`)."""
    return _prepare(job.workload, job.system, job.execution)


def _prepare(w: WorkloadConfig, s: SystemConfig, x: ExecutionConfig) -> Setup:
    s = instance_system(s)
    if x.comm in PYTORCH_METHODS:  # DDP, FSDP and DeepSpeed run in PyTorch: its stack
        x = replace(x, framework="pytorch")
    names = resolve_names(w, s.gpu)
    transformer = names.transformer is not None
    if not transformer:
        _cnn_only(names, x)
    if s.gpus == GPUS_MIN:
        s = replace(s, gpus=_fewest_gpus(w, s, x, names))
    cluster = resolve_system(s, names.gpu, nccl=x.comm in NCCL_METHODS)
    strategy = resolve_strategy(x, cluster, w, batch=names.batch, precision=names.precision)
    if strategy.precision == "amp" and cluster.device.peak_fp16_flops is None:
        raise ConfigError(
            f"GPU {cluster.device.id!r} has no fast fp16 path; mixed precision (amp) is not "
            "modelled for it: use --precision fp32"
        )
    need = None
    if transformer:
        names, strategy, compute, need = _transformer(w, x, names, cluster, strategy)
    else:
        compute = resolve_compute(w, x, get_model(names.model), names, cluster, strategy)
    workload = compute.workload
    comm_model = resolve_comm(strategy, cluster, workload.tensor_bytes(strategy.grad_dtype))
    input_s = 0.0
    if strategy.host_decodes_input:
        input_s = host_input_s(cluster, strategy, workload, comm_model, s, x)
    dag = build_dag(
        workload,
        strategy,
        input_time_s=input_s,
        n_ps=comm_model.n_channels(),
        op_time_s=lambda nbytes: comm_model.time_s(nbytes, "allreduce", 0),
    )
    return Setup(
        workload, cluster, strategy, comm_model, dag, input_s, compute.source, compute.choice,
        compute.stack, names.transformer, need, optimizer_of(w),
    )  # fmt: skip


def _transformer(
    w: WorkloadConfig, x: ExecutionConfig, names: Names, cluster: Cluster, strategy: Strategy
) -> tuple[Names, Strategy, Compute, Memory]:
    """A transformer's names and strategy (its micro-batch the largest that fits, with
    ``--batch max``), its compute and its memory (:mod:`ddlsim.resolve.transformer`, imported
    here: a CNN's predict does not load the transformer compute model)."""
    from ddlsim.resolve.fit import max_batch
    from ddlsim.resolve.transformer import resolve_transformer_compute

    if w.batch == BATCH_MAX:
        names = replace(names, batch=max_batch(w, x, names, cluster, strategy))
        strategy = resolve_strategy(x, cluster, w, batch=names.batch, precision=names.precision)
    compute, need = resolve_transformer_compute(w, x, names, cluster, strategy)
    return names, strategy, compute, need


def _fewest_gpus(w: WorkloadConfig, s: SystemConfig, x: ExecutionConfig, names: Names) -> int:
    """``--gpus min`` (:func:`ddlsim.resolve.fit.fewest_gpus`; one search at a time)."""
    from ddlsim.resolve.fit import fewest_gpus

    if w.batch == BATCH_MAX:
        raise ConfigError("--gpus min and --batch max: give one of them a number")
    return fewest_gpus(w, s, x, names, nccl=x.comm in NCCL_METHODS)


def _cnn_only(names: Names, x: ExecutionConfig) -> None:
    """Refuse what is modelled for transformers only, on a CNN."""
    if names.precision in ("bf16", "fp8"):
        raise ConfigError(
            f"precision {names.precision} is modelled for transformers; {names.model} runs "
            "fp32 or amp"
        )
    if x.grad_accum > 1:
        raise ConfigError(f"--grad-accum is modelled for transformers, not {names.model}")
    if x.comm in SHARDED_METHODS:
        raise ConfigError(
            f"--comm {x.comm} shards a transformer's blocks (its units); {names.model} is a CNN: "
            "use ddp, horovod-nccl or another data-parallel method"
        )


def host_input_s(
    cluster: Cluster,
    strategy: Strategy,
    workload: Workload,
    comm: CommModel,
    s: SystemConfig,
    x: ExecutionConfig,
) -> float:
    """Seconds one node's host needs per batch of real data
    (:mod:`ddlsim.execution.input_pipeline`): the given rate (``--host-input-rate``), else the
    images' decode on the host's cores (at most the processes' workers), the exchange's host
    work competing for the same cores."""
    images = strategy.batch_per_gpu * cluster.local_gpus
    if s.host_input_images_per_s is not None:
        return images / float(s.host_input_images_per_s)
    threads = cluster.device.host_cpu_threads
    if threads < 1:
        raise ConfigError(
            f"device {cluster.device.id!r} states no host CPU threads; pass the host input rate"
        )
    kind = ip.preprocessing_kind(x.preprocessing, workload.model.name)
    thread_s = ip.thread_seconds_per_image(kind, ip.image_pixels(workload.model.input_shape))
    processes = ip.processes_per_node(strategy.comm, cluster.local_gpus)
    decode = ip.decode_threads(threads, processes, x.input_workers)
    decode_s = ip.host_batch_s(images, thread_s, decode)
    k = ip.host_comm_threads(
        strategy.comm, cluster.transport, cluster.n_nodes > 1, cluster.local_gpus
    )
    comm_s = _exchange_s(comm, workload.model.grad_bytes(strategy.grad_dtype)) if k else 0.0
    return max(decode_s, ip.host_batch_s(images, thread_s, threads, k, comm_s))


def _exchange_s(comm: CommModel, nbytes: float) -> float:
    """Closed-form seconds of one iteration's exchange of ``nbytes`` of gradients: every
    operation the method performs, its shards (channels) side by side."""
    share = nbytes / comm.n_channels()
    return sum(comm.time_s(share, op, 0) for op in comm.ops)
