"""A transformer's compute on a GPU: ddlsim's per-layer model, as a calibration in memory.

There is no profiling pass of a transformer to read: its calibration is the per-layer kernel
model's (:mod:`ddlsim.compute.transformer_step`) for the job's micro-batch, sequence length,
numerics and attention kernel, stage by stage (:mod:`ddlsim.workload.transformers.spec`).
The optimizer step, which no stage owns, is the profile's unattributed time: a pass over the
parameters' optimizer state at the DRAM roof (:func:`optimizer_step_s`). With gradient
accumulation the ``micro_steps`` stage carries the ``K - 1`` micro-steps before the last and
the ``K - 1`` additions of a micro-step's gradient into the accumulated one
(:data:`ACCUMULATE_BYTES_PER_PARAM`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ddlsim.calibration.profile import LayerTiming, ModelProfile
from ddlsim.compute.dispatch import host_floor_s
from ddlsim.compute.gemm import default_gemm_model
from ddlsim.compute.transformer_ops import flash_version, stream_Bps
from ddlsim.compute.transformer_step import BlockTime, Numerics, block_time
from ddlsim.compute.transformer_terms import TERM_NAMES
from ddlsim.errors import ConfigError
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.spec import MICRO_STEPS
from ddlsim.workload.transformers.structure import block, embedding, head, speech_convs

#: DRAM bytes an optimizer step moves per parameter (reads + writes), mixed precision with
#: fp32 master weights: the gradient (fp16 read), the fp32 master (read, written), the state
#: (SGD with momentum: one fp32 buffer; Adam / AdamW / LAMB: two, read and written) and the
#: fp16 copy (written). fp32 training reads the fp32 gradient and writes no copy. PyTorch's
#: fused and foreach optimizers (``torch/optim/adam.py``) read and write each tensor once.
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2, "lamb": 2}
#: LAMB reads the update again for its per-layer trust ratio (two norms per tensor)
LAMB_EXTRA_READS = 2
#: DRAM bytes per parameter of adding one micro-step's gradient into the accumulated one:
#: PyTorch's AccumulateGrad (``param.grad += new``) and TensorFlow's ``assign_add`` into an
#: accumulator read both and write the sum, in fp32 (autocast and TF's AMP rewrite keep the
#: variables, so their gradients, in fp32)
ACCUMULATE_BYTES_PER_PARAM = 12.0


def accumulate_s(n_params: int, device: DeviceSpec) -> float:
    """Seconds of one gradient accumulation over ``n_params`` parameters (at the DRAM roof)."""
    return n_params * ACCUMULATE_BYTES_PER_PARAM / stream_Bps(device)


def optimizer_bytes_per_param(optimizer: str, mixed: bool) -> float:
    """DRAM bytes per parameter of one optimizer step (see :data:`OPTIMIZER_STATES`)."""
    if optimizer not in OPTIMIZER_STATES:
        raise ConfigError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZER_STATES)}")
    states = OPTIMIZER_STATES[optimizer]
    moved = (2.0 if mixed else 4.0) + 8.0 + 8.0 * states + (2.0 if mixed else 0.0)
    if optimizer == "lamb":
        moved += 4.0 * LAMB_EXTRA_READS
    return moved


#: an optimizer written as one element-wise op per term, per variable, as TensorFlow's Python
#: optimizers of the BERT era are (google-research/bert ``optimization.py``
#: AdamWeightDecayOptimizer: next_m = b1·m + (1-b1)·g, 3 ops; next_v = b2·v + (1-b2)·g², 4; the
#: update m / (sqrt(v) + eps), 3; weight decay, 2; times the learning rate, 1; the new weight, 1;
#: three assigns), each op reading its operands and writing its result in fp32: (ops, bytes per
#: parameter). LAMB adds its two norms, their ratio and the scaling (NVIDIA's TF LAMB).
PER_TENSOR_OPS = {
    "adam": (17, 156.0),
    "adamw": (17, 156.0),
    "lamb": (23, 180.0),
    "momentum": (6, 52.0),
    "sgd": (3, 24.0),
}
OPTIMIZER_KERNELS = ("fused", "per-tensor")


def optimizer_step_s(
    n_params: int,
    n_tensors: int,
    device: DeviceSpec,
    optimizer: str,
    mixed: bool,
    kernels: str = "fused",
    dispatch: str = "graph-executor",
) -> float:
    """Seconds of one optimizer step over ``n_params`` parameters in ``n_tensors`` tensors.
    ``fused`` (PyTorch's foreach / fused optimizers, apex's FusedAdam and FusedLAMB): its state
    read and written once at the DRAM roof, one multi-tensor launch per 64 tensors; ``per-tensor``
    (:data:`PER_TENSOR_OPS`): every op a pass over each tensor, a launch each. Under PyTorch's
    ``eager`` dispatch each launch is an op the Python thread dispatches, under TensorFlow's
    ``graph-executor`` an op the executor runs: the step takes at least their host time
    (:mod:`ddlsim.compute.dispatch`)."""
    m = default_gemm_model()
    bandwidth = stream_Bps(device, m)
    if kernels == "per-tensor":
        ops, per_param = PER_TENSOR_OPS[optimizer]
        launches = ops * n_tensors
        gpu_s = launches * m.stream_launch_s + n_params * per_param / bandwidth
    else:
        moved = n_params * optimizer_bytes_per_param(optimizer, mixed)
        launches = -(-n_tensors // 64)
        gpu_s = launches * m.stream_launch_s + moved / bandwidth
    return max(gpu_s, host_floor_s(dispatch, launches, model=m))


@dataclass(frozen=True)
class Step:
    """What a transformer step is: micro-batch, sequence length, micro-steps per optimizer
    step, the numerics, the optimizer."""

    batch: int
    seq: int
    grad_accum: int
    numerics: Numerics
    optimizer: str = "adam"
    mixed: bool = True
    optimizer_kernels: str = "fused"
    #: how the kernels are dispatched (:data:`~ddlsim.compute.dispatch.DISPATCHES`; eager:
    #: each stage at least its ops' host time)
    dispatch: str = "graph-executor"


def _stages(cfg: TransformerConfig, step: Step, device: DeviceSpec) -> dict[str, BlockTime]:
    """Forward and backward time of each kind of stage: its kernels (and the ops the host
    dispatches)."""
    b, s, n = step.batch, step.seq, step.numerics
    tokens = b * s
    shape = (b, cfg.heads, s, cfg.head_dim)
    kw = {"gated": cfg.gated, "norm": cfg.norm}
    emb = embedding(cfg, b, s)
    out = {
        "embedding": block_time(emb, tokens, device, n, **kw),
        "head": block_time(head(cfg, b, s), tokens, device, n, **kw),
        "encoder": block_time(block(cfg, b, s, flash=n.flash), tokens, device, n,
                              attention=shape, **kw),
    }  # fmt: skip
    convs = speech_convs(cfg, b, s * 320) if cfg.speech is not None else ()
    if convs:  # wav2vec2's feature encoder (20 ms frames of 16 kHz audio): its GEMMs
        from ddlsim.compute.transformer_step import gemm_s

        extra = [gemm_s(g, device, n.gemm_precision) for g in convs]
        e = out["embedding"]
        conv_f, conv_b = sum(f for f, _ in extra), sum(b_ for _, b_ in extra)
        out["embedding"] = replace(
            e,
            fwd_s=e.fwd_s + conv_f,
            bwd_s=e.bwd_s + conv_b,
            fwd_ops=e.fwd_ops + len(convs),
            bwd_ops=e.bwd_ops + len(convs),
            bwd_extra_kernels=e.bwd_extra_kernels + len(convs),
            terms=tuple(
                (k, f + conv_f, b_ + conv_b) if k == "gemm" else (k, f, b_) for k, f, b_ in e.terms
            ),
        )
    if cfg.decoder_layers:
        dec = block(cfg, b, s, decoder=True, flash=n.flash)
        out["decoder"] = block_time(dec, tokens, device, n, attention=shape, **kw)
    return out


def transformer_profile(
    cfg: TransformerConfig, spec: ModelSpec, device: DeviceSpec, step: Step, precision: str
) -> ModelProfile:
    """The calibration ``spec`` (:func:`~ddlsim.workload.transformers.spec.transformer_spec`)
    of ``cfg`` gets on ``device`` for ``step``: per stage, the per-layer model's times."""
    kernels = _stages(cfg, step, device)
    # each stage at least its ops' host time (PyTorch eager, TensorFlow's executor)
    stages = {name: t.floored(step.dispatch) for name, t in kernels.items()}
    rows: list[LayerTiming] = []
    stage_of_layers: list[str] = []
    kernels_s = 0.0
    for layer in spec.layers:
        if layer.name == MICRO_STEPS:
            continue
        kind = layer.name.split("/")[0]
        t = stages[kind]
        rows.append(LayerTiming(layer.name, t.fwd_s, t.bwd_s, layer.grad_bytes("fp32")))
        stage_of_layers.append(kind)
        kernels_s += kernels[kind].fwd_s + kernels[kind].bwd_s
    one_step_s = sum(r.fwd_time_s + r.bwd_time_s for r in rows)
    micro_steps, adds_s = 1, 0.0
    if spec.layers[0].name == MICRO_STEPS:
        # each micro-step but the first adds its gradient into the accumulated one
        add_s = accumulate_s(spec.n_params, device)
        micro_steps, adds_s = step.grad_accum, (step.grad_accum - 1) * add_s
        accum_s = (step.grad_accum - 1) * (one_step_s + add_s)
        rows.insert(0, LayerTiming(MICRO_STEPS, accum_s, 0.0, 0))
    opt_s = optimizer_step_s(
        spec.n_params, len(spec.tensors), device, step.optimizer, step.mixed,
        step.optimizer_kernels, step.dispatch,
    )  # fmt: skip
    sum_s = sum(r.fwd_time_s + r.bwd_time_s for r in rows)
    n = step.numerics
    terms = compute_terms(stage_of_layers, kernels, stages, micro_steps, adds_s, opt_s)
    provenance = {
        "method": "per-layer-model",
        "model": "transformer stages on the GEMM and memory routes (ddlsim.compute.gemm, "
        "ddlsim.compute.transformer_ops)",
        "numerics": {
            "gemm_precision": n.gemm_precision,
            "pass_precision": n.pass_precision,
            "flash_attention": n.flash,
            "flash_version": flash_version(device, n.flash_version) if n.flash else None,
            "fused_softmax": n.fused_softmax,
            "fused_loss": n.fused_loss,
            "activation_checkpointing": n.checkpointing,
            "dispatch": step.dispatch,
            # the share of the forward and backward the GPU waits on the host's dispatch
            "host_bound_fraction": round(1.0 - kernels_s / one_step_s, 4) if one_step_s else 0.0,
        },
        "seq_len": step.seq,
        "grad_accum": step.grad_accum,
        "optimizer": step.optimizer,
        "optimizer_kernels": step.optimizer_kernels,
        "compute_terms_s": terms,
    }
    return ModelProfile(
        model=cfg.name,
        device=device.id,
        batch_per_gpu=step.batch,
        precision=precision,
        layers=tuple(rows),
        unattributed_time_s=opt_s,
        step_time_s=sum_s + opt_s,
        provenance=provenance,
    )


def compute_terms(
    stage_of_layers: list[str],
    kernels: dict[str, BlockTime],
    stages: dict[str, BlockTime],
    micro_steps: int,
    accumulate_total_s: float,
    optimizer_s: float,
) -> dict[str, float]:
    """Seconds of one GPU's optimizer step by term
    (:data:`~ddlsim.compute.transformer_terms.TERM_NAMES`): the kernels by kind
    (:data:`~ddlsim.compute.transformer_terms.KERNEL_KINDS`), activation checkpointing's
    second forward, the time a stage waits on the host's dispatch beyond its kernels, the
    gradient additions of accumulation and the optimizer step. ``stage_of_layers`` names each
    layer's stage; each is run ``micro_steps`` times. They add up to the profile's step."""
    out = dict.fromkeys(TERM_NAMES, 0.0)
    for name in stage_of_layers:
        k, floored = kernels[name], stages[name]
        for kind, f, b in k.terms:
            out[kind] += micro_steps * (f + b)
        out["recompute"] += micro_steps * k.recompute_s
        wait = (floored.fwd_s - k.fwd_s) + (floored.bwd_s - k.bwd_s)  # 0 where not floored
        out["host_wait"] += micro_steps * wait
    out["accumulate"] = accumulate_total_s
    out["optimizer"] = optimizer_s
    return out
