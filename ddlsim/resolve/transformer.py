"""The calibration wing for a transformer: its compute timed by the per-layer model, and the
memory its step needs.

A transformer has no calibration file: its stages are timed on the GEMM and memory kernel
routes (:mod:`ddlsim.calibration.transformer`) for the numerics the job resolves to
(:func:`transformer_numerics`), and its memory per GPU decides whether the job can run
(:func:`step_memory`, :func:`too_big`). Imported only when a job is a transformer, so that a
CNN's predict does not load the transformer compute model.
"""

from __future__ import annotations

from dataclasses import replace

from ddlsim.calibration.transformer import Step, transformer_profile
from ddlsim.compute.dispatch import dispatch_of
from ddlsim.compute.gemm import check_precision
from ddlsim.compute.stack import Stack
from ddlsim.compute.transformer_ops import flash_version
from ddlsim.compute.transformer_step import Numerics
from ddlsim.config.groups import ExecutionConfig, WorkloadConfig, optimizer_of
from ddlsim.errors import ConfigError
from ddlsim.execution.offload import host_state_bytes_per_param
from ddlsim.execution.sharded import Sharding, units_of
from ddlsim.execution.strategy import Strategy
from ddlsim.resolve.calibration import Compute, Names, _with_provenance
from ddlsim.system.hosts import default_host_cpu
from ddlsim.system.specs import Cluster, DeviceSpec
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.memory import Memory, ShardedState, memory
from ddlsim.workload.transformers.spec import transformer_spec
from ddlsim.workload.workload import Workload


def transformer_numerics(
    cfg: TransformerConfig, x: ExecutionConfig, device: DeviceSpec, precision: str, tf32: bool
) -> Numerics:
    """How a transformer's kernels run for the job: GEMM and pass precisions, the attention
    kernel (``auto``: flash for causal decoders in PyTorch at fp16 / bf16 where the GPU runs
    it), a fused softmax (XLA), activation checkpointing. A combination the GPU cannot run
    (bf16 before Ampere, fp8 before Hopper, FlashAttention 2 on Volta) is a ConfigError."""
    if precision == "fp32":
        gemm = "tf32" if tf32 and device.peak_tf32_flops is not None else "fp32"
        passes = "fp32"
    else:
        gemm = {"amp": "fp16", "bf16": "bf16", "fp8": "fp8"}[precision]
        passes = "bf16" if precision == "fp8" else gemm
    check_precision(device, gemm)
    half = passes in ("fp16", "bf16")
    version = None if x.flash_version == "auto" else int(x.flash_version)
    if x.attention == "flash":
        if not half:
            raise ConfigError(
                f"FlashAttention runs fp16 / bf16: use --precision amp or bf16, not {precision}"
            )
        flash_version(device, version)  # refuses a GPU it does not run on
        flash = True
    elif x.attention == "auto":
        runs = device.arch in ("turing", "ampere", "hopper", "blackwell")
        flash = cfg.causal and x.framework == "pytorch" and half and runs
        if flash and version is not None:
            flash_version(device, version)
    else:
        flash = False
    return Numerics(
        gemm_precision=gemm,
        pass_precision=passes,
        flash=flash,
        flash_version=version,
        fused_softmax=x.fusion == "xla",
        autocast=precision in ("amp", "bf16") and x.fusion != "xla",
        causal=cfg.causal,
        checkpointing=x.activation_checkpointing,
        fused_loss=x.loss_kernel == "fused" and half,
    )


def resolve_transformer_compute(
    w: WorkloadConfig, x: ExecutionConfig, names: Names, cluster: Cluster, strategy: Strategy
) -> tuple[Compute, Memory]:
    """The transformer of ``names`` timed on ``cluster``'s GPU by the per-layer model, and
    the memory its step needs per GPU; a step that does not fit is a ConfigError naming the
    need and the capacity."""
    cfg = names.transformer
    assert cfg is not None
    device = cluster.device
    numerics = transformer_numerics(cfg, x, device, strategy.precision, w.tf32)
    optimizer = optimizer_of(w)
    kernels = x.optimizer_kernels
    if kernels == "auto":  # TensorFlow's Python optimizers: an op per term per variable
        kernels = "per-tensor" if x.framework == "tensorflow" else "fused"
    step = Step(strategy.batch_per_gpu, cfg.seq, x.grad_accum, numerics, optimizer,
                mixed=strategy.precision != "fp32", optimizer_kernels=kernels,
                dispatch=dispatch_of(x.framework, x.fusion, x.cuda_graphs))  # fmt: skip
    # a sharded method's DAG unrolls its micro-steps; the others fold K - 1 into one stage
    spec = transformer_spec(cfg, cfg.seq, x.grad_accum > 1 and strategy.micro_steps == 1)
    need = step_memory(cfg, step.batch, w, x, device, strategy, numerics, spec,
                       cluster.local_gpus)  # fmt: skip
    if not need.fits:
        raise ConfigError(too_big(cfg, step.batch, device, need, numerics))
    if not need.host_fits:
        raise ConfigError(
            f"--offload {x.offload}: {cfg.name}'s offloaded state needs "
            f"{need.host_bytes / 1e9:.0f} GB of host memory per node, the node has "
            f"{(need.host_capacity_bytes or 0) / 1e9:.0f} GB: shard it over more nodes"
        )
    prof = transformer_profile(cfg, spec, device, step, strategy.precision)
    if w.single_gpu_throughput is not None:  # the step's samples at the anchor's rate
        samples = strategy.batch_per_gpu * x.grad_accum
        prof = prof.scaled((samples / w.single_gpu_throughput) / prof.step_time_s)
        prof = _with_provenance(prof, w.single_gpu_throughput)
    workload = Workload.build(spec, prof)
    stack = Stack(x.framework, "nhwc", x.fusion or "none")
    return Compute(workload, None, None, stack), need


def step_memory(
    cfg: TransformerConfig,
    batch: int,
    w: WorkloadConfig,
    x: ExecutionConfig,
    device: DeviceSpec,
    strategy: Strategy,
    numerics: Numerics,
    spec: ModelSpec,
    ranks_per_node: int = 1,
) -> Memory:
    """The memory per GPU of the job's step at micro-batch ``batch``
    (:func:`ddlsim.workload.transformers.memory.memory`); with a CPU offload, the host memory
    the node's ``ranks_per_node`` ranks need (each its shard) and the node's DRAM (the host
    catalog's reference server, :func:`ddlsim.system.hosts.default_host_cpu`)."""
    exchange = "ddp" if strategy.comm == "ddp" else "horovod" if strategy.is_horovod else ""
    need = memory(
        cfg, batch, cfg.seq, n_params=spec.n_params, capacity_bytes=device.memory_bytes,
        mixed=strategy.precision != "fp32", optimizer=optimizer_of(w),
        flash=numerics.flash, checkpointing=numerics.checkpointing, exchange=exchange,
        fusion_bytes=strategy.fusion_threshold_bytes,
        sharded=sharded_memory(strategy, spec),
    )  # fmt: skip
    sh = strategy.sharding
    if sh is None or sh.offload == "none":
        return need
    # each rank's shard of the offloaded state, times the node's ranks
    per_param = host_state_bytes_per_param(sh.method, sh.offload, optimizer_of(w),
                                           strategy.precision)  # fmt: skip
    host_bytes = spec.n_params / sh.shards * per_param * ranks_per_node
    return replace(need, host_bytes=host_bytes,
                   host_capacity_bytes=default_host_cpu(device).node_dram_bytes)  # fmt: skip


#: ZeRO stage of each sharded method and FSDP strategy (:class:`ShardedState`)
_STAGES = {"zero1": 1, "zero2": 2, "zero3": 3, "full_shard": 3, "hybrid_shard": 3,
           "shard_grad_op": "shard_grad_op", "no_shard": 0}  # fmt: skip


def sharded_memory(strategy: Strategy, spec: ModelSpec) -> ShardedState | None:
    """How ``strategy``'s sharded method splits ``spec``'s state (None: not sharded): its
    stage, its shards, its largest unit and its root unit, the units in flight (the one
    computing, and up to two gathered ahead: FSDP's limit_all_gathers), DeepSpeed's
    gradient buffers (:func:`zero_buffer_bytes`)."""
    sh = strategy.sharding
    if sh is None:
        return None
    stage = _STAGES[sh.method if sh.method.startswith("zero") else sh.sharding]
    buffer_bytes = zero_buffer_bytes(sh, spec.n_params)
    unit_params, root_params = 0, 0
    if sh.method in ("fsdp", "zero3"):
        groups = units_of(spec, sh.unit_blocks)
        params = [sum(spec.layers[i].grad_bytes("fp32") // 4 for i in g) for g in groups]
        root_params, unit_params = params[0], max(params[1:])
    return ShardedState(stage, sh.shards, unit_params, root_params, sh.param_bytes, 3,
                        buffer_bytes, sh.offload)  # fmt: skip


def zero_buffer_bytes(sh: Sharding, n_params: int) -> float:
    """DeepSpeed's gradient buffer per GPU (0 for FSDP): ZeRO-1/2 with ``contiguous_gradients``
    allocate ``reduce_bucket_size`` elements, twice with ``overlap_comm``
    (``stage_1_and_2.py``'s ``ipg_buffer``), and without it flatten one bucket at a time
    (``buffered_reduce_fallback``: at most the model's gradients while a bucket reduces);
    ZeRO-3 keeps one flat ``reduce_bucket_size`` buffer with contiguous gradients
    (``stage3.py``'s ``__ipg_bucket_flat_buffer``) and none without. DeepSpeed allocates the
    contiguous buffers at their configured size whatever the model's (``torch.empty``)."""
    if sh.method == "fsdp":
        return 0.0
    if not sh.contiguous_gradients:
        flat = min(sh.reduce_bucket_elements, n_params) * sh.param_bytes
        return float(flat) if sh.method in ("zero1", "zero2") else 0.0
    buckets = 2 if sh.method in ("zero1", "zero2") and sh.overlap_comm else 1
    return float(buckets * sh.reduce_bucket_elements * sh.param_bytes)


def too_big(
    cfg: TransformerConfig, batch: int, device: DeviceSpec, need: Memory, numerics: Numerics
) -> str:
    """The one line that refuses a step that does not fit: the need by part, the GPU's, and
    what could make it fit (what the job does not do already)."""
    state = need.params_bytes + need.grads_bytes + need.optimizer_bytes
    fixed = state + need.buffers_bytes + need.reserve_bytes
    if fixed > need.capacity_bytes:
        stage = need.sharded_stage
        whole = need.params_bytes + need.buffers_bytes + need.reserve_bytes  # never sharded
        whole += need.grads_bytes if stage == 1 else 0
        hint = (
            "its weights, gradients, optimizer state and exchange buffers alone do not fit: "
            + (
                f"ZeRO-{stage} keeps the half-precision parameters whole on every GPU "
                "(--comm zero3 or fsdp shard them too)"
                if stage in (1, 2) and whole > need.capacity_bytes
                else "shard them over more GPUs (a larger --gpus, or --gpus min)"
            )
            + ("" if need.host_bytes else "; or move them to the host (--offload)")
            if stage is not None
            else "its weights, gradients, optimizer state and exchange buffers alone do not fit: "
            "data parallelism keeps them whole on every GPU (--comm fsdp or zero1 / zero2 / "
            "zero3 shard them)"
        )
    else:
        tries = ["a smaller --batch"] if batch > 1 else []
        tries += [] if numerics.checkpointing else ["--activation-checkpointing"]
        tries += [] if numerics.flash else ["--attention flash"]
        tries = tries or ["a shorter --seq-len"]
        hint = "try " + (", ".join(tries[:-1]) + " or " if len(tries) > 1 else "") + tries[-1]
    return (
        f"{cfg.name} at micro-batch {batch} x {cfg.seq} tokens does not fit one {device.id}: it "
        f"needs {need.total_bytes / 1e9:.1f} GB per GPU (activations "
        f"{need.activations_bytes / 1e9:.1f}, weights, gradients and optimizer "
        f"{state / 1e9:.1f}), the GPU has {need.capacity_bytes / 1e9:.1f} GB; {hint}"
    )
