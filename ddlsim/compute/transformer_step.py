"""A transformer block's forward and backward time on a GPU: the kernel routes, summed.

One block (:class:`~ddlsim.workload.transformers.structure.Block`) is its GEMMs and its
element-wise passes. Each GEMM runs on the GEMM route (:func:`ddlsim.compute.gemm.gemm_time_s`:
tiles in waves over the SMs, split-K, the memory roof, a per-call floor); its backward is two
GEMMs, the data gradient ``dA = dC . B^T`` (``m x k``, reducing over ``n``) and the weight
gradient ``dB = A^T . dC`` (``k x n``, reducing over ``m``). Each pass runs on the memory route
(:func:`ddlsim.compute.transformer_ops.memory_op_s`: bytes over the sustained DRAM bandwidth
plus a floor per kernel), forward and backward with their read/write counts. With
FlashAttention the two batched attention GEMMs, the softmax over the scores and its dropout
are one fused kernel (:func:`ddlsim.compute.transformer_ops.flash_attention_s`, its backward
recomputing the scores). Activation checkpointing runs the forward again in the backward.

Numerics: ``gemm_precision`` is what the GEMMs run at (fp32, tf32, fp16, bf16, fp8);
``pass_precision`` the activations' width in the memory passes (fp32 for fp32 / TF32 training,
fp16 or bf16 under mixed precision, bf16 beside fp8 GEMMs as Transformer Engine keeps them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ddlsim.compute.dispatch import EXTRA_BACKWARD_KERNELS, host_floor_s
from ddlsim.compute.gemm import gemm_time_s
from ddlsim.compute.transformer_ops import flash_attention_s, memory_op_s, op_kernels
from ddlsim.compute.transformer_terms import KERNEL_KINDS
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.transformers.structure import Block, Gemm, MemoryPass

#: the batched attention GEMMs FlashAttention replaces (scores, context; Transformer-XL's
#: positional scores run beside them in its kernels: kept as GEMMs)
FLASH_GEMMS = ("attn/scores", "attn/context")
#: ops autocast keeps in fp32 (PyTorch's autocast fp32 list: layer_norm, softmax,
#: cross-entropy). TensorFlow's AMP rewrite (``auto_mixed_precision_lists.h``) denies ``Mean``
#: and ``Sum`` (LayerNorm's moments) and puts ``Softmax`` on its infer list: it runs in the
#: precision of its input, which in the Transformer-XL graphs is the fp32 of the mask (its 1e30
#: fill does not fit fp16), so the same list holds there; a TF softmax on fp16 scores would not
#: be cast (not modelled: no non-XLA TF row has one)
FP32_UNDER_AUTOCAST = ("layernorm", "rmsnorm", "softmax")
#: passes FlashAttention makes part of its kernel
FLASH_PASSES = ("attn/softmax", "attn/probs_dropout")
#: the passes over attention's scores (the unfused softmax and its dropout, Transformer-XL's
#: score copies): the last part of the pass name
SCORE_PASSES = frozenset(
    {"softmax", "probs_dropout", "rel_shift", "score_add", "mask_casts", "softmax_layout",
     "probs_layout", "score_grad_layout"}
)  # fmt: skip


def gemm_kind(g: Gemm) -> str:
    """A GEMM's kind (:data:`KERNEL_KINDS`): attention's products are the batched ones (one
    per sequence and head), every other GEMM is a linear layer."""
    return "attention" if g.batch > 1 else "gemm"


def pass_kind(p: MemoryPass) -> str:
    """A memory pass's kind (:data:`KERNEL_KINDS`): attention's score passes, else
    element-wise."""
    prefix, _, last = p.name.rpartition("/")
    return "attention" if prefix in ("attn", "cross") and last in SCORE_PASSES else "elementwise"


@dataclass(frozen=True)
class Numerics:
    """How a block's kernels run: GEMM and pass precisions, FlashAttention (and its version,
    None = the newest the GPU runs), a fused softmax (a compiler's fusion, XLA: scale, mask and
    softmax one kernel, and the eager-only passes of the structure folded away; else each op
    apart), causal attention, and activation checkpointing."""

    gemm_precision: str
    pass_precision: str
    flash: bool = False
    flash_version: int | None = None
    fused_softmax: bool = True
    causal: bool = False
    checkpointing: bool = False
    #: mixed precision by autocast (TF's AMP graph rewrite, torch.autocast, apex O1): the ops on
    #: its fp32 list run in fp32 between a cast in and a cast out
    autocast: bool = False
    #: the loss over the logits as one fused kernel each way on the half-precision logits
    #: (``cross_entropy_fused``; fp32 math in registers, no casts)
    fused_loss: bool = False


@dataclass(frozen=True)
class BlockTime:
    """Seconds of one block's forward and backward (the backward with its recompute), the
    forward GEMM FLOPs it does, and what the host dispatches (:mod:`ddlsim.compute.dispatch`):
    the forward's ops, the backward's ops (autograd nodes, and the recompute's forward ops),
    the backward's kernels beyond a node's first, and the autocast casts each way (nodes of
    their own in TensorFlow's AMP graph; inside the op's dispatch in PyTorch)."""

    fwd_s: float
    bwd_s: float
    fwd_flops: float
    fwd_ops: int = 0
    bwd_ops: int = 0
    bwd_extra_kernels: int = 0
    casts: int = 0
    #: the kernels' seconds by kind (:data:`KERNEL_KINDS`): ``(kind, forward, backward)``, the
    #: backward without the recompute
    terms: tuple[tuple[str, float, float], ...] = ()
    #: the backward's second forward (activation checkpointing), part of ``bwd_s``
    recompute_s: float = 0.0

    def floored(self, dispatch: str) -> BlockTime:
        """The stage under ``dispatch`` (:data:`~ddlsim.compute.dispatch.DISPATCHES`): each
        direction at least its host time (:func:`~ddlsim.compute.dispatch.host_floor_s`)."""
        fwd = host_floor_s(dispatch, self.fwd_ops, casts=self.casts)
        bwd = host_floor_s(dispatch, self.bwd_ops, self.bwd_extra_kernels, self.casts)
        return replace(self, fwd_s=max(self.fwd_s, fwd), bwd_s=max(self.bwd_s, bwd))


def _pass_op(p: MemoryPass, gated: bool, norm: str, fused_loss: bool = False) -> str:
    """The memory route's op for a pass of the block structure (the loss as one fused kernel
    each way with ``fused_loss``)."""
    if p.op:
        return p.op
    name = p.name.rsplit("/", 1)[-1]
    if name.startswith("norm"):
        return norm
    if name.startswith("residual") or name == "position_add":
        return "add"
    if name.startswith("dropout") or name == "probs_dropout":
        return "dropout"
    if name == "loss" and fused_loss:
        return "cross_entropy_fused"
    if name in ("softmax", "loss"):
        return "softmax"
    if name in ("bias_act", "act"):
        return "silu_and_mul" if gated else "gelu"
    if name == "rope":
        return "rope"
    if name == "gather":
        return "embedding"
    return "add"


def gemm_s(g: Gemm, device: DeviceSpec, precision: str) -> tuple[float, float]:
    """(forward, backward) seconds of ``g``: the product, then its data and weight gradients."""
    fwd = gemm_time_s(g.m, g.n, g.k, device, precision, batch=g.batch)
    dgrad = gemm_time_s(g.m, g.k, g.n, device, precision, batch=g.batch)
    wgrad = gemm_time_s(g.k, g.n, g.m, device, precision, batch=g.batch)
    return fwd, dgrad + wgrad


def pass_s(
    p: MemoryPass, tokens: int, device: DeviceSpec, numerics: Numerics, *, gated: bool, norm: str
) -> tuple[float, float]:
    """(forward, backward) seconds of pass ``p`` over ``tokens`` rows."""
    op = _pass_op(p, gated, norm, numerics.fused_loss)
    cols = max(1, p.elems // tokens)
    if op == "silu_and_mul":
        cols *= 2  # the op's input is gate and up side by side
    fused = numerics.fused_softmax or op != "softmax"
    kw = {"fused": fused}
    precision = numerics.pass_precision
    if op == "cast" and precision == "fp32":  # nothing to cast from
        return 0.0, 0.0
    casts = 0.0
    if numerics.autocast and op in FP32_UNDER_AUTOCAST:  # fp32 op between two casts
        half = precision
        precision = "fp32"
        up = memory_op_s("cast", tokens, cols, device, half, direction="fwd")
        casts = 2 * up  # in: 2-byte read, 4-byte write; out: the reverse (one pass each way)
    fwd = memory_op_s(op, tokens, cols, device, precision, direction="fwd", **kw) + casts
    bwd = memory_op_s(op, tokens, cols, device, precision, direction="bwd", **kw) + casts
    return fwd, bwd


def block_time(
    blk: Block,
    tokens: int,
    device: DeviceSpec,
    numerics: Numerics,
    *,
    attention: tuple[int, int, int, int] | None = None,
    gated: bool = False,
    norm: str = "layernorm",
) -> BlockTime:
    """Forward and backward seconds of ``blk`` over ``tokens`` (= micro-batch x sequence)
    rows. ``attention`` = (sequences, heads, sequence length, head dim) for FlashAttention."""
    flash = numerics.flash and attention is not None
    terms = {kind: [0.0, 0.0] for kind in KERNEL_KINDS}
    ops = extra = casts = 0  # forward ops (= backward nodes); extra backward kernels; casts
    cast_in_out = numerics.autocast and numerics.pass_precision != "fp32"
    for g in blk.gemms:
        if flash and g.name in FLASH_GEMMS:
            continue
        f, b = gemm_s(g, device, numerics.gemm_precision)
        _add(terms, gemm_kind(g), f, b)
        ops, extra = ops + 1, extra + 1  # backward: data and weight gradients
    for p in blk.passes:
        if (flash and p.name in FLASH_PASSES) or (p.eager and numerics.fused_softmax):
            continue
        f, b = pass_s(p, tokens, device, numerics, gated=gated, norm=norm)
        if f == b == 0.0:  # no op (a cast with nothing to cast from)
            continue
        _add(terms, pass_kind(p), f, b)
        op = _pass_op(p, gated, norm, numerics.fused_loss)
        ops += op_kernels(op, numerics.fused_softmax or op != "softmax")
        extra += EXTRA_BACKWARD_KERNELS.get(op, 0)
        casts += 2 if cast_in_out and op in FP32_UNDER_AUTOCAST else 0
    if flash:
        ops += 1
        assert attention is not None
        seqs, heads, seq, head_dim = attention
        kw = {"causal": numerics.causal, "version": numerics.flash_version}
        precision = "bf16" if numerics.gemm_precision == "fp8" else numerics.gemm_precision
        f = flash_attention_s(seqs, heads, seq, head_dim, device, precision, **kw)
        b = flash_attention_s(seqs, heads, seq, head_dim, device, precision, direction="bwd", **kw)
        _add(terms, "attention", f, b)
    fwd = sum(f for f, _ in terms.values())
    bwd = sum(b for _, b in terms.values())
    bwd_ops, recompute = ops, 0.0
    if numerics.checkpointing:
        recompute = fwd  # the block's forward runs again before its backward
        bwd += recompute
        bwd_ops += ops
    kinds = tuple((k, f, b) for k, (f, b) in terms.items())
    return BlockTime(fwd, bwd, float(blk.flops), ops, bwd_ops, extra, casts, kinds, recompute)


def _add(terms: dict[str, list[float]], kind: str, fwd_s: float, bwd_s: float) -> None:
    terms[kind][0] += fwd_s
    terms[kind][1] += bwd_s
