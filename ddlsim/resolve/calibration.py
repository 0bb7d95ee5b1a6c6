"""The calibration wing: the compute a job's workload costs on its resolved cluster.

The model and its defaults (a given calibration file's, else resnet50, 64, fp32), the
calibration that times it (:func:`ddlsim.calibration.store.find_profile_and_choice`: the one
precedence rule; or the file the job names, re-timed for another GPU), re-timed for the job's
software stack and TF32 setting (:mod:`ddlsim.calibration.restack`), DALI's GPU work with real
data, and a user's anchor (``single_gpu_throughput``): a :class:`Compute`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ddlsim.calibration import profile as profile_io
from ddlsim.calibration import restack
from ddlsim.calibration import use as calibration_use
from ddlsim.calibration.profile import ModelProfile
from ddlsim.calibration.store import Choice, find_profile_and_choice
from ddlsim.calibration.transformer import Step, transformer_profile
from ddlsim.compute.gemm import check_precision
from ddlsim.compute.stack import Stack
from ddlsim.compute.stack import resolve as resolve_stack
from ddlsim.compute.transformer_ops import flash_version
from ddlsim.compute.transformer_step import Numerics
from ddlsim.config.groups import ExecutionConfig, WorkloadConfig, optimizer_of
from ddlsim.errors import ConfigError
from ddlsim.execution.strategy import Strategy
from ddlsim.system.specs import Cluster, DeviceSpec
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.load import load_model_config
from ddlsim.workload.transformers.memory import Memory, memory
from ddlsim.workload.transformers.spec import transformer_spec
from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES, get_transformer
from ddlsim.workload.workload import Workload
from ddlsim.workload.zoo.aliases import canonical

#: a transformer's micro-batch per GPU where the job states none (a CNN's is 64)
DEFAULT_TRANSFORMER_BATCH = 8


@dataclass(frozen=True)
class Names:
    """The workload's names as resolved: a given calibration file's defaults for what the job
    leaves None (``file``: that file, read), else ddlsim's; ``transformer`` the model's
    definition where it is a transformer (the zoo's or the ``model_config`` file's, at the
    job's sequence length)."""

    model: str
    gpu: str
    batch: int
    precision: str
    file: ModelProfile | None
    transformer: TransformerConfig | None = None


def resolve_names(w: WorkloadConfig, gpu: str | None) -> Names:
    """Model, GPU, batch and precision of the job (:mod:`ddlsim.calibration.use`); a model
    name in any accepted spelling (:func:`ddlsim.workload.zoo.aliases.canonical`)."""
    model = canonical(w.model) if w.model is not None else None
    cfg = None
    if w.model_config is not None:
        if model is not None:
            raise ConfigError("--model-config describes the model: drop --model")
        cfg = load_model_config(w.model_config)
    elif model is not None and model in TRANSFORMER_NAMES:
        cfg = get_transformer(model)
    if cfg is None:
        if w.batch == "max":
            raise ConfigError(
                f"--batch max finds the largest micro-batch that fits a transformer's memory "
                f"model; {model or 'resnet50'} has none: give --batch N"
            )
        if w.seq_len is not None:
            raise ConfigError(f"--seq-len applies to transformer models, not {model or 'resnet50'}")
        file_prof = profile_io.load(w.calibration) if w.calibration is not None else None
        model, gpu, batch, precision = calibration_use.resolve_defaults(
            file_prof, w.calibration, model=model, gpu=gpu, batch=w.batch, precision=w.precision
        )
        return Names(model, gpu, batch, precision, file_prof)
    if w.calibration is not None:
        raise ConfigError(
            "a transformer is timed by ddlsim's per-layer model: --calibration files hold a "
            "CNN's measured layers; drop --calibration"
        )
    if w.seq_len is not None:
        cfg = replace(cfg, seq_len=w.seq_len)  # checked against its positions
    batch = DEFAULT_TRANSFORMER_BATCH if w.batch in (None, "max") else w.batch  # max: fitted
    return Names(cfg.name, gpu or "p100", batch, w.precision or "fp32", None, cfg)


@dataclass(frozen=True)
class Compute:
    """The workload timed: the model with its per-layer calibration (``workload``), the file
    the times were read from (``source``), how the search chose it (``choice``; None for a
    given file) and the software stack they are timed for (``stack``)."""

    workload: Workload
    source: str | None
    choice: Choice | None
    stack: Stack


def resolve_compute(
    w: WorkloadConfig,
    x: ExecutionConfig,
    spec: ModelSpec,
    names: Names,
    cluster: Cluster,
    strategy: Strategy,
) -> Compute:
    """The calibration of ``spec`` on ``cluster``'s GPU for ``strategy``'s batch and
    precision, re-timed for the job's stack, TF32 setting, DALI and anchor."""
    choice = None
    if names.file is not None:
        prof = calibration_use.for_cluster(names.file, w.calibration, cluster)
        source = str(w.calibration)
    else:
        prof, choice = find_profile_and_choice(
            spec, cluster.device, strategy.batch_per_gpu, strategy.precision
        )
        source = prof.path or prof.provenance.get("from_file")
    stack = job_stack(x, cluster.device, strategy.precision, w.tf32)
    tf32_off = not w.tf32 and tf32_applies(cluster.device, strategy.precision)
    prof = restack.for_job(prof, spec, cluster.device, stack, tf32_off)
    if strategy.data == "real" and strategy.input_pipeline == "dali":
        dali_s = restack.dali_gpu_s(cluster.device, strategy.batch_per_gpu, strategy.precision)
        prof = restack.with_dali(prof, dali_s)
    workload = _workload(spec, strategy, prof, w.single_gpu_throughput)
    return Compute(workload, source, choice, stack)


def tf32_applies(device: DeviceSpec, precision: str) -> bool:
    """Whether TF32 is in play: fp32 on a GPU with TF32 tensor cores (Ampere and later)."""
    return precision == "fp32" and device.peak_tf32_flops is not None


def job_stack(x: ExecutionConfig, device: DeviceSpec, precision: str, tf32: bool) -> Stack:
    """The software stack of the execution on ``device`` at ``precision``: the framework's
    defaults for the layout and fusion it leaves None; a combination the library cannot run
    is a :class:`ConfigError` (:func:`ddlsim.compute.stack.resolve`)."""
    return resolve_stack(x.framework, x.layout, x.fusion, device, precision, tf32)


def _workload(
    spec: ModelSpec, strategy: Strategy, prof: ModelProfile, single_ips: float | None
) -> Workload:
    if single_ips is not None:
        prof = prof.scaled((strategy.batch_per_gpu / single_ips) / prof.step_time_s)
        prof = _with_provenance(prof, single_ips)
        profile_io.check(prof, f"the calibration rescaled to {single_ips:g} images/s on 1 GPU")
    return Workload.build(spec, prof)


def _with_provenance(prof: ModelProfile, single_ips: float) -> ModelProfile:
    provenance: dict[str, Any] = {
        "method": "anchored-by-user",
        "single_gpu_images_per_sec": single_ips,
        "base": prof.provenance,
    }
    return replace(prof, provenance=provenance)


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
    if x.attention == "flash":
        if not half:
            raise ConfigError(
                f"FlashAttention runs fp16 / bf16: use --precision amp or bf16, not {precision}"
            )
        flash_version(device)  # refuses a GPU it does not run on
        flash = True
    elif x.attention == "auto":
        runs = device.arch in ("turing", "ampere", "hopper", "blackwell")
        flash = cfg.causal and x.framework == "pytorch" and half and runs
    else:
        flash = False
    return Numerics(
        gemm_precision=gemm,
        pass_precision=passes,
        flash=flash,
        fused_softmax=x.fusion == "xla",
        autocast=precision in ("amp", "bf16") and x.fusion != "xla",
        causal=cfg.causal,
        checkpointing=x.activation_checkpointing,
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
                mixed=strategy.precision != "fp32", optimizer_kernels=kernels)  # fmt: skip
    spec = transformer_spec(cfg, cfg.seq, x.grad_accum > 1)
    need = step_memory(cfg, step.batch, w, x, device, strategy, numerics, spec.n_params)
    if not need.fits:
        raise ConfigError(too_big(cfg, step.batch, device, need, numerics))
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
    n_params: int,
) -> Memory:
    """The memory per GPU of the job's step at micro-batch ``batch``
    (:func:`ddlsim.workload.transformers.memory.memory`)."""
    exchange = "ddp" if strategy.comm == "ddp" else "horovod" if strategy.is_horovod else ""
    return memory(
        cfg, batch, cfg.seq, n_params=n_params, capacity_bytes=device.memory_bytes,
        mixed=strategy.precision != "fp32", optimizer=optimizer_of(w),
        flash=numerics.flash, checkpointing=numerics.checkpointing, exchange=exchange,
        fusion_bytes=strategy.fusion_threshold_bytes,
    )  # fmt: skip


def too_big(
    cfg: TransformerConfig, batch: int, device: DeviceSpec, need: Memory, numerics: Numerics
) -> str:
    """The one line that refuses a step that does not fit: the need by part, the GPU's, and
    what could make it fit (what the job does not do already)."""
    state = need.params_bytes + need.grads_bytes + need.optimizer_bytes
    fixed = state + need.buffers_bytes + need.reserve_bytes
    if fixed > need.capacity_bytes:
        hint = (
            "its weights, gradients, optimizer state and exchange buffers alone do not fit: data "
            "parallelism keeps them whole on every GPU (ZeRO / FSDP shard them: not modelled yet)"
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
