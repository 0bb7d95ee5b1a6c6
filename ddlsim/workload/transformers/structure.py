"""Per-block structure of a transformer for a per-layer compute model: GEMMs and memory passes.

For micro-batch ``b`` (sequences) and sequence length ``s``, one block is a list of
:class:`Gemm` (``m`` x ``n`` x ``k``, ``batch`` of them; FLOPs = 2·m·n·k·batch) and of
element-wise :class:`MemoryPass` (forward, unfused: each reads and writes whole tensors).
A linear layer over ``b·s`` tokens is ``m = b·s``, ``k`` = inputs, ``n`` = outputs; the two
attention GEMMs are batched over ``b·heads``: scores ``s x t x d_head`` and context
``s x d_head x t``, with ``t`` keys (``s``, plus Transformer-XL's memory, or the source length
of cross-attention, taken equal to ``s``). Forward only: backward is twice each GEMM (data and
weight gradient) and about twice each pass's bytes (transformer-facts §4.1-4.2).

What is not here: the adaptive softmax's tail clusters (they run on the tokens that fall in
them, a data-dependent share; only the head cluster is a GEMM here), and the causal mask's
skipped tiles (every count uses the full ``s²``, as MFU formulas do).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.workload.layers import GradTensor
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.tensors import block_tensors, gradient_tensors

MASK_BYTES_PER_ELEM = 1  # a dropout mask: one byte per element


@dataclass(frozen=True)
class Gemm:
    """``batch`` independent ``m x k`` by ``k x n`` matrix products."""

    name: str
    m: int
    n: int
    k: int
    batch: int = 1

    @property
    def flops(self) -> int:
        """Forward FLOPs (a multiply-add is 2)."""
        return 2 * self.m * self.n * self.k * self.batch


@dataclass(frozen=True)
class MemoryPass:
    """An element-wise pass over ``elems`` elements reading ``reads`` and writing ``writes``
    tensors of that size (plus a one-byte mask per element for dropout)."""

    name: str
    elems: int
    reads: int = 1
    writes: int = 1
    mask: bool = False

    def nbytes(self, bytes_per_elem: int) -> int:
        """DRAM bytes moved at ``bytes_per_elem`` (2 for fp16/bf16, 4 for fp32)."""
        extra = MASK_BYTES_PER_ELEM if self.mask else 0
        return self.elems * ((self.reads + self.writes) * bytes_per_elem + extra)


@dataclass(frozen=True)
class Block:
    """One block (or the embedding / head stage): GEMMs, memory passes and its tensors."""

    name: str
    gemms: tuple[Gemm, ...]
    passes: tuple[MemoryPass, ...]
    tensors: tuple[GradTensor, ...] = ()

    @property
    def flops(self) -> int:
        """Forward GEMM FLOPs."""
        return sum(g.flops for g in self.gemms)


def _attention_gemms(cfg: TransformerConfig, p: str, b: int, s: int, t: int) -> list[Gemm]:
    d, a, kv, dh = cfg.hidden, cfg.heads, cfg.n_kv_heads, cfg.head_dim
    cross = p == "cross"
    if cfg.fused_qkv and not cross:
        out = [Gemm(f"{p}/qkv", b * s, (a + 2 * kv) * dh, d)]
    elif cross:  # queries from the decoder, keys and values from the encoder output
        out = [Gemm(f"{p}/q", b * s, a * dh, d), Gemm(f"{p}/kv", b * t, 2 * a * dh, d)]
    else:
        out = [Gemm(f"{p}/q", b * s, a * dh, d), Gemm(f"{p}/kv", b * s, 2 * kv * dh, d)]
    out.append(Gemm(f"{p}/scores", s, t, dh, b * a))
    if cfg.position == "relative" and not cross:  # Transformer-XL: Q·Rᵀ over the same keys
        out += [Gemm(f"{p}/r", t, a * dh, d), Gemm(f"{p}/pos_scores", s, t, dh, b * a)]
    if cfg.position == "disentangled" and not cross:  # DeBERTa: c2p and p2c, shared keys
        span = 2 * cfg.relative_buckets
        out += [Gemm(f"{p}/rel_qk", span, 2 * a * dh, d)]
        out += [Gemm(f"{p}/c2p", s, span, dh, b * a), Gemm(f"{p}/p2c", s, span, dh, b * a)]
    out += [Gemm(f"{p}/context", s, dh, t, b * a), Gemm(f"{p}/out", b * s, d, a * dh)]
    return out


def _attention_passes(cfg: TransformerConfig, p: str, b: int, s: int, t: int, flash: bool):
    a, dh, kv = cfg.heads, cfg.head_dim, cfg.n_kv_heads
    out = []
    if cfg.position == "rope" and p == "attn":
        out.append(MemoryPass(f"{p}/rope", b * s * (a + kv) * dh))
    if not flash:  # scale + mask + softmax, fused, on the materialised scores
        out.append(MemoryPass(f"{p}/softmax", b * a * s * t))
        if cfg.dropout:
            out.append(MemoryPass(f"{p}/probs_dropout", b * a * s * t, mask=True))
    return out


def block(
    cfg: TransformerConfig, b: int, s: int, *, decoder: bool = False, flash: bool = False
) -> Block:
    """One encoder block (``decoder``: a decoder block with cross-attention) for ``b`` x ``s``
    tokens; ``flash`` = FlashAttention, which never writes the ``b·heads·s·t`` scores."""
    d, f = cfg.hidden, cfg.ffn
    t = s + cfg.mem_len
    subs = ["attn", "cross"] if decoder else ["attn"]
    gemms: list[Gemm] = []
    passes: list[MemoryPass] = []
    for p in subs:
        gemms += _attention_gemms(cfg, p, b, s, s if p == "cross" else t)
        passes += _attention_passes(cfg, p, b, s, s if p == "cross" else t, flash)
    up = [Gemm("ffn/gate", b * s, f, d)] if cfg.gated else []
    gemms += [*up, Gemm("ffn/up", b * s, f, d), Gemm("ffn/down", b * s, d, f)]
    act = "bias_act" if cfg.bias else "act"
    passes.append(MemoryPass(f"ffn/{act}", b * s * f, reads=2 if cfg.gated else 1))
    for i in range(len(subs) + 1):
        passes.append(MemoryPass(f"norm{i + 1}", b * s * d))
        passes.append(MemoryPass(f"residual{i + 1}", b * s * d, reads=2))
        if cfg.dropout:
            passes.append(MemoryPass(f"dropout{i + 1}", b * s * d, mask=True))
    name = "decoder_block" if decoder else "block"
    tensors = block_tensors(cfg, name, cross=decoder)
    return Block(name, tuple(gemms), tuple(passes), tuple(tensors))


def embedding(cfg: TransformerConfig, b: int, s: int) -> Block:
    """The embedding stage: the token gather (a patch GEMM for ViT), position and type adds."""
    d = cfg.hidden
    gemms, passes = [], []
    if cfg.patch is not None:
        p = cfg.patch
        patches = (p.image // p.patch) ** 2
        gemms.append(Gemm("patch", b * patches, d, p.patch * p.patch * p.channels))
    else:
        passes.append(MemoryPass("gather", b * s * d))  # rows read, output written
    if cfg.position in ("learned", "sinusoidal") or cfg.token_types:
        passes.append(MemoryPass("position_add", b * s * d, reads=2))
    if cfg.embedding_norm:
        passes.append(MemoryPass("norm", b * s * d))
    return Block("embedding", tuple(gemms), tuple(passes))


def head(cfg: TransformerConfig, b: int, s: int) -> Block:
    """The output stage: the vocabulary GEMM (LM / MLM heads) and the loss softmax pass."""
    d, tokens = cfg.hidden, b * s
    if cfg.head in ("lm", "mlm"):
        n = cfg.vocab
        if cfg.adaptive is not None:  # head cluster only (see the module doc)
            n = cfg.adaptive.cutoffs[0] + len(cfg.adaptive.cutoffs)
        pre = [Gemm("transform", tokens, d, d)] if cfg.head == "mlm" else []
        return Block("head", (*pre, Gemm("vocab", tokens, n, d)), (MemoryPass("loss", tokens * n),))
    if cfg.head == "classifier":
        assert cfg.patch is not None
        return Block("head", (Gemm("classifier", b, cfg.patch.classes, d),), ())
    if cfg.head == "discriminator":
        gemms = (Gemm("dense", tokens, d, d), Gemm("logit", tokens, 1, d))
        return Block("head", gemms, ())
    return Block("head", (), ())


def speech_convs(cfg: TransformerConfig, b: int, samples: int) -> tuple[Gemm, ...]:
    """wav2vec2's feature encoder for ``b`` clips of ``samples`` audio samples, one implicit
    GEMM per convolution (``m`` = b x output frames, ``n`` = output channels, ``k`` = input
    channels x kernel): the shapes ddlsim's convolution model takes. Empty without one."""
    if cfg.speech is None:
        return ()
    out, length, c_in = [], samples, 1
    for i, conv in enumerate(cfg.speech.convs):
        length = (length - conv.kernel) // conv.stride + 1
        out.append(Gemm(f"conv{i}", b * max(length, 0), conv.channels, c_in * conv.kernel))
        c_in = conv.channels
    return tuple(out)


def forward_flops(
    cfg: TransformerConfig, b: int = 1, s: int | None = None, *, flash: bool = False
) -> int:
    """Forward GEMM FLOPs of the whole model for ``b`` sequences of length ``s`` (default
    ``cfg.seq``): embedding, every block, the head. Element-wise FLOPs are not counted (they
    are memory-bound passes); ELECTRA's generator and wav2vec2's convolutions are not counted.
    """
    s = cfg.seq if s is None else s
    total = embedding(cfg, b, s).flops + head(cfg, b, s).flops
    total += cfg.layers * block(cfg, b, s, flash=flash).flops
    total += cfg.decoder_layers * block(cfg, b, s, decoder=True, flash=flash).flops
    return total


def forward_flops_per_token(cfg: TransformerConfig, s: int | None = None) -> float:
    """Forward GEMM FLOPs per token at sequence length ``s`` (default ``cfg.seq``)."""
    s = cfg.seq if s is None else s
    return forward_flops(cfg, 1, s) / s


def gemm_params(cfg: TransformerConfig) -> int:
    """Parameters that are GEMM weights: every 2-d ``*/weight`` of a linear layer in the blocks
    and heads, plus the vocabulary matrix where the LM head uses it (tied or not)."""
    n = 0
    for component, t in gradient_tensors(cfg):
        if component in ("encoder", "decoder", "head") and len(t.shape) == 2:
            n += t.n_params if t.name.endswith("/weight") else 0
    if cfg.head in ("lm", "mlm") and cfg.tie_embeddings and cfg.adaptive is None:
        n += cfg.vocab * cfg.hidden
    return n


def backward_tensors(cfg: TransformerConfig) -> tuple[tuple[str, int], ...]:
    """``(name, numel)`` of every gradient tensor in the order backward completes them (the
    reverse of forward; a tied embedding, used first, completes last)."""
    return tuple((t.name, t.n_params) for _, t in reversed(gradient_tensors(cfg)))
