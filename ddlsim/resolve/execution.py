"""The execution wing: a job's execution settings resolved into a strategy and a
communication model on a resolved cluster.

:func:`resolve_strategy` gives the :class:`~ddlsim.execution.strategy.Strategy` (the Horovod
release's fusion threshold and cycle unless the job sets them, DDP's bucket caps, the resolved
batch and precision); :func:`resolve_comm` the :class:`~ddlsim.comm.base.CommModel` of its
method on the cluster (:func:`ddlsim.comm.make_comm_model`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ddlsim.comm import SHARDED_METHODS, make_comm_model
from ddlsim.comm.base import CommModel
from ddlsim.config.groups import ExecutionConfig, WorkloadConfig, optimizer_of
from ddlsim.errors import ConfigError
from ddlsim.execution.horovod import horovod_release
from ddlsim.execution.offload import host_step_Bps, host_step_bytes_per_param
from ddlsim.execution.sharded import Sharding
from ddlsim.execution.strategy import Strategy
from ddlsim.system.hosts import default_host_cpu
from ddlsim.system.specs import Cluster
from ddlsim.units import MiB


def resolve_strategy(
    x: ExecutionConfig, cluster: Cluster, w: WorkloadConfig, *, batch: int, precision: str
) -> Strategy:
    """The execution's :class:`Strategy` for the resolved batch and precision of workload
    ``w`` (its data, and its optimizer: the one a CPU offload steps on the host); the Horovod
    release gives the fusion threshold and cycle time unless ``x`` sets them."""
    data, optimizer = w.data, optimizer_of(w)
    release = horovod_release(x.horovod_version)
    fusion_bytes = release.fusion_threshold_bytes
    if x.fusion_threshold_mb is not None:
        fusion_bytes = round(x.fusion_threshold_mb * MiB)
    cycle_s = release.cycle_time_s if x.cycle_time_ms is None else x.cycle_time_ms / 1e3
    return Strategy(
        comm=x.comm,
        batch_per_gpu=batch,
        precision=precision,
        data=data,
        input_pipeline=x.input_pipeline,
        ps_placement=x.ps_placement,
        hierarchical=x.hierarchical,
        algorithm=x.algorithm,
        nccl_version=x.nccl_version,
        nccl_protocol=x.nccl_protocol,
        mpi=x.mpi,
        horovod_version=x.horovod_version,
        response_cache=x.response_cache,
        fp16_allreduce=x.fp16_allreduce,
        n_ps=x.n_ps,
        ps_colocated=x.ps_colocated,
        # a CPU worker's own cores move and sum the gradients (Gloo / MPI on the host), so its
        # communication cannot hide behind backprop: it follows the backward pass
        wait_free_backprop=cluster.device.kind != "cpu",
        # TensorFlow's XLA auto-clustering compiles the backward into clusters around the
        # exchange's ops, which XLA cannot compile (Horovod's HorovodAllreduce unless
        # HOROVOD_ENABLE_XLA_OPS, off by default; docs/design.md): the gradients leave the
        # compiled backward together at its end, so no exchange overlaps it
        compiled_backward=x.fusion == "xla" and x.framework == "tensorflow",
        fusion_threshold_bytes=fusion_bytes,
        cycle_time_s=cycle_s,
        schedule=x.schedule,
        partition_bytes=round(x.partition_mb * MiB),
        **_ddp_caps(x.bucket_cap_mb),
        **_sharded(x, cluster, precision, optimizer),
    )


def _sharded(
    x: ExecutionConfig, cluster: Cluster, precision: str, optimizer: str
) -> dict[str, object]:
    """A sharded method's :class:`Sharding` and the micro-steps its DAG unrolls (none for
    the other methods). Dtypes: FSDP's mixed-precision policy (Composer's presets; ``auto``:
    DEFAULT under amp / bf16, FULL at fp32); DeepSpeed communicates in the model's dtype."""
    if x.comm not in SHARDED_METHODS:
        if x.offload != "none":
            raise ConfigError(
                f"--offload {x.offload} with --comm {x.comm}: CPU offload is FSDP's and "
                "DeepSpeed ZeRO's (--comm fsdp|zero1|zero2|zero3)"
            )
        return {}
    half = precision != "fp32"
    policy = x.fsdp_precision
    if policy == "auto":
        policy = "default" if half else "full"
    if policy != "full" and not half:
        raise ConfigError(
            f"--fsdp-precision {policy} gathers half-precision parameters: it needs --precision "
            "amp or bf16, not fp32"
        )
    sharding = x.sharding if x.comm == "fsdp" else "full_shard"
    shards = cluster.n_gpus
    if sharding == "hybrid_shard":
        if cluster.local_gpus < 2:
            raise ConfigError(
                "--sharding hybrid_shard shards inside a node: it needs more than one GPU per "
                f"node, not {cluster.local_gpus}"
            )
        if cluster.n_nodes == 1:  # one node: a full shard over its GPUs
            sharding = "full_shard"
        shards = cluster.local_gpus
    zero = x.comm != "fsdp"
    overlap = x.comm == "zero3" if x.overlap_comm == "auto" else x.overlap_comm == "on"
    sh = Sharding(
        method=x.comm,
        shards=shards,
        sharding=sharding,
        unit_blocks=1 if zero else x.fsdp_unit_blocks,  # ZeRO-3 gathers module by module
        backward_prefetch="pre" if zero else x.backward_prefetch,
        forward_prefetch=x.forward_prefetch,
        limit_all_gathers=x.limit_all_gathers,
        param_bytes=2 if (half and (zero or policy != "full")) else 4,
        reduce_bytes=2 if (half and (zero or policy == "pure")) else 4,
        overlap_comm=overlap or not zero,
        reduce_bucket_elements=x.reduce_bucket_size,
        allgather_bucket_elements=x.allgather_bucket_size,
        pin_memory=x.pin_memory or not zero,  # FSDP pins its offloaded shards
        contiguous_gradients=x.contiguous_gradients,
        copy_Bps=_copy_Bps(cluster) if x.comm in ("zero1", "zero2") else 0.0,
        **_offload(x.offload, x.comm, cluster, precision, optimizer),
    )
    return {"sharding": sh, "micro_steps": x.grad_accum if sh.per_micro_step else 1}


def _copy_Bps(cluster: Cluster) -> float:
    """The DRAM rate ZeRO-1/2's gradient copies stream at: the element-wise kernels' (imported
    here: only a sharded transformer job needs the transformer compute model)."""
    from ddlsim.compute.transformer_ops import stream_Bps

    return stream_Bps(cluster.device) if cluster.device.mem_bandwidth_Bps else 0.0


def _offload(
    offload: str, method: str, cluster: Cluster, precision: str, optimizer: str
) -> dict[str, object]:
    """A CPU offload's host step: its DRAM bytes per parameter and the rate one rank streams
    them at on the node's host (:mod:`ddlsim.execution.offload`; the host CPU by the GPU's
    host link, :func:`ddlsim.system.hosts.default_host_cpu`)."""
    if offload == "none":
        return {}
    host = default_host_cpu(cluster.device)
    if host.node_mem_Bps is None:
        raise ConfigError(
            f"--offload {offload}: the host of {cluster.device.id} ({host.name}) has no DRAM "
            "bandwidth in the host catalog"
        )
    rate = host_step_Bps(method, host.node_mem_Bps, host.core_mem_Bps, cluster.local_gpus)
    return {
        "offload": offload,
        "host_step_bytes": host_step_bytes_per_param(method, optimizer, precision),
        "host_step_Bps": rate,
    }


def _ddp_caps(bucket_cap_mb: float | None) -> dict[str, int]:
    """DDP's (first, other) bucket caps: PyTorch's defaults, or the given cap for both."""
    if bucket_cap_mb is None:
        return {}
    cap = max(1, round(bucket_cap_mb * MiB))
    return {"bucket_cap_bytes": cap, "first_bucket_bytes": cap}


def resolve_comm(
    strategy: Strategy, cluster: Cluster, tensor_bytes: Sequence[int] = ()
) -> CommModel:
    """The communication model of ``strategy``'s method on ``cluster`` (``tensor_bytes``: the
    gradient tensors, which a parameter server places on its shards)."""
    return make_comm_model(
        strategy.comm,
        cluster,
        hierarchical=strategy.hierarchical,
        algorithm=strategy.algorithm,
        nccl_version=strategy.nccl_version,
        nccl_protocol=strategy.nccl_protocol,
        mpi=strategy.mpi,
        n_ps=strategy.n_ps,
        ps_colocated=strategy.ps_colocated,
        ps_placement=strategy.ps_placement,
        tensor_bytes=tensor_bytes,
    )
