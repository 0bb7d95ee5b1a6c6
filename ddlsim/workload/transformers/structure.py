"""Per-block structure of a transformer for a per-layer compute model: GEMMs and memory passes.

For micro-batch ``b`` (sequences) and sequence length ``s``, one block is a list of
:class:`Gemm` (``m`` x ``n`` x ``k``, ``batch`` of them; FLOPs = 2·m·n·k·batch) and of
element-wise :class:`MemoryPass` (forward, unfused: each reads and writes whole tensors).
A linear layer over ``b·s`` tokens is ``m = b·s``, ``k`` = inputs, ``n`` = outputs; the two
attention GEMMs are batched over ``b·heads``: scores ``s x t x d_head`` and context
``s x d_head x t``, with ``t`` keys (``s``, plus Transformer-XL's memory, or the source length
of cross-attention, taken equal to ``s``). Forward only: backward is twice each GEMM (data and
weight gradient) and about twice each pass's bytes (transformer-facts §4.1-4.2).

Transformer-XL's relative attention is the reference implementation's op sequence
(Dai et al.'s code, ported as Hugging Face ``transformers`` 4.30
``models/transfo_xl/modeling_transfo_xl.py``, ``RelPartialLearnableMultiHeadAttn.forward``):
the QKV projection runs over the memory and the segment (``qkv_net(cat([mems, w]))``, ``b·t``
rows), the scores live in an ``(i, j, b, n)`` layout that ``einsum`` and ``softmax`` copy to
and from (:data:`RELATIVE_ATTENTION_PASSES`), ``_rel_shift`` pads and copies the positional
scores, and the mask runs in fp32 between two casts. The adaptive softmax's tail clusters run
on the tokens whose target falls in them (``ProjectedAdaptiveLogSoftmax``:
``hidden.index_select`` then the cluster's logits): their share is the corpus's unigram mass
beyond each cutoff (:func:`tail_share`).

What is not here: the causal mask's skipped tiles (every count uses the full ``s²``, as MFU
formulas do).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ddlsim.workload.layers import GradTensor
from ddlsim.workload.transformers.config import SEQUENCE_LABELS, TransformerConfig
from ddlsim.workload.transformers.tensors import (
    adaptive_clusters,
    block_tensors,
    gradient_tensors,
)

MASK_BYTES_PER_ELEM = 1  # a dropout mask: one byte per element
#: the share of running English text covered by its most frequent words, at these ranks:
#: (rank, share). Measured with wordfreq 3.1.1's English "large" list (Wikipedia, subtitles,
#: news, books, web text; case-folded, punctuation dropped), cumulative frequency of the top
#: ``rank`` words over all; between ranks the share is interpolated in log rank. A cased
#: vocabulary with punctuation tokens (WikiText-103's) covers a little less with the same
#: count, so the tails here are a lower bound.
UNIGRAM_COVERAGE = (
    (1_000, 0.7113), (2_000, 0.7862), (5_000, 0.8735), (10_000, 0.924), (20_000, 0.9587),
    (40_000, 0.9798), (100_000, 0.9934), (200_000, 0.9981), (300_000, 0.9998),
)  # fmt: skip
#: Transformer-XL's eager ops over the ``b·heads·s·t`` scores besides the GEMMs and the scale,
#: mask, softmax and dropout every unfused attention has, in the reference code's order:
#: (pass name, memory op, fraction of the scores' elements). ``_rel_shift`` concatenates a
#: zero column and copies (its backward writes a zero gradient of the padded shape and copies
#: the slice in); ``AC + BD`` adds the two score tensors (its backward passes the gradient to
#: both by reference); the mask runs on ``attn_score.float()`` and casts back (two casts each
#: way under half precision); ``softmax`` makes its permuted input contiguous; the context
#: ``einsum`` copies the probabilities to its batched layout; and the backward of each score
#: ``einsum`` reshapes its permuted gradient (a copy) before the batched GEMMs.
RELATIVE_ATTENTION_PASSES = (
    ("rel_shift", "rel_shift", 1.0),
    ("score_add", "add_by_reference", 1.0),
    ("mask_casts", "cast", 2.0),
    ("softmax_layout", "layout_copy", 1.0),
    ("probs_layout", "layout_copy", 1.0),
    ("score_grad_layout", "grad_layout_copy", 2.0),
)


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
    #: the memory route's op (:data:`ddlsim.compute.transformer_ops.PASSES`); empty: told by
    #: the name
    op: str = ""
    #: an eager framework's op that a fusing compiler (XLA) folds into its neighbours
    eager: bool = False

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
    if cfg.fused_qkv and not cross:  # Transformer-XL: over the memory and the segment
        rows = b * t if cfg.position == "relative" else b * s
        out = [Gemm(f"{p}/qkv", rows, (a + 2 * kv) * dh, d)]
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
    if cfg.position == "relative" and p == "attn":
        out += _relative_passes(cfg, b, s, t, flash)
    return out


def _relative_passes(cfg: TransformerConfig, b: int, s: int, t: int, flash: bool):
    """Transformer-XL's extra passes (module docstring): the memory's concatenation, the two
    query biases, the heads' layout copies for ``einsum`` and, without FlashAttention, the
    score ops of :data:`RELATIVE_ATTENTION_PASSES`."""
    d, a, dh = cfg.hidden, cfg.heads, cfg.head_dim
    out = [
        MemoryPass("attn/mem_cat", b * t * d, op="layout_copy"),
        MemoryPass("attn/query_bias", 2 * b * s * a * dh, op="addu"),
        MemoryPass("attn/head_layout", b * (2 * s + 2 * t) * a * dh, op="layout_copy", eager=True),
    ]
    if not flash:
        scores = b * a * s * t
        for name, op, share in RELATIVE_ATTENTION_PASSES:
            out.append(MemoryPass(f"attn/{name}", round(share * scores), op=op, eager=True))
    return out


def tail_share(rank_from: int, rank_to: int) -> float:
    """The share of running text whose words rank in ``[rank_from, rank_to)`` by frequency
    (:data:`UNIGRAM_COVERAGE`)."""
    return max(0.0, _coverage(rank_to) - _coverage(rank_from))


def _coverage(rank: int) -> float:
    if rank <= 0:
        return 0.0
    points = UNIGRAM_COVERAGE
    if rank <= points[0][0]:
        return points[0][1] * math.log1p(rank) / math.log1p(points[0][0])
    for (r0, c0), (r1, c1) in itertools.pairwise(points):
        if rank <= r1:
            w = math.log(rank / r0) / math.log(r1 / r0)
            return c0 + w * (c1 - c0)
    return 1.0


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


def head_rows(cfg: TransformerConfig, b: int, s: int) -> int:
    """Rows the LM / MLM head computes logits for: every token, or ``ceil(head_share x s)``
    positions of each sequence (BERT pre-training's gathered masked positions)."""
    return b * s if cfg.head_share >= 1 else b * math.ceil(cfg.head_share * s)


def head(cfg: TransformerConfig, b: int, s: int) -> Block:
    """The output stage: the vocabulary GEMM (LM / MLM heads) and the loss softmax pass, or a
    task's small head (span logits per token, a sequence classifier)."""
    d, tokens = cfg.hidden, b * s
    if cfg.head in ("lm", "mlm"):
        if cfg.adaptive is not None:
            return _adaptive_head(cfg, tokens)
        n, rows = cfg.vocab, head_rows(cfg, b, s)
        pre: list[Gemm] = [Gemm("transform", rows, d, d)] if cfg.head == "mlm" else []
        passes = [MemoryPass("loss", rows * n)]
        if rows < tokens:  # the masked positions' hidden states gathered first
            passes.insert(0, MemoryPass("gather", rows * d))
        return Block("head", (*pre, Gemm("vocab", rows, n, d)), tuple(passes))
    if cfg.head == "span":
        return Block("head", (Gemm("span", tokens, 2, d),), (MemoryPass("loss", tokens * 2),))
    if cfg.head == "sequence":
        return Block("head", (Gemm("classifier", b, SEQUENCE_LABELS, d),), ())
    if cfg.head == "classifier":
        assert cfg.patch is not None
        return Block("head", (Gemm("classifier", b, cfg.patch.classes, d),), ())
    if cfg.head == "discriminator":
        gemms = (Gemm("dense", tokens, d, d), Gemm("logit", tokens, 1, d))
        return Block("head", gemms, ())
    return Block("head", (), ())


def _adaptive_head(cfg: TransformerConfig, tokens: int) -> Block:
    """The adaptive softmax: the head cluster (the frequent words and one logit per tail
    cluster) for every token; each tail cluster's projection and logits for the tokens whose
    target falls in it (:func:`tail_share` of them), with its log-softmax."""
    d, n_head = cfg.hidden, head_cluster_words(cfg)
    gemms = [Gemm("vocab", tokens, n_head, d)]
    passes = [MemoryPass("loss", tokens * n_head)]
    clusters = adaptive_clusters(cfg)
    first = clusters[0][0]  # the rank where the tail clusters start
    for i, (size, width) in enumerate(clusters[1:], start=1):
        rows = round(tokens * tail_share(first, first + size))
        first += size
        if rows == 0:
            continue
        if width != d:
            gemms.append(Gemm(f"tail{i}/proj", rows, width, d))
        gemms.append(Gemm(f"tail{i}/vocab", rows, size, width))
        passes.append(MemoryPass(f"tail{i}/loss", rows * size))
    return Block("head", tuple(gemms), tuple(passes))


def head_cluster_words(cfg: TransformerConfig) -> int:
    """Logits of an adaptive softmax's head cluster: its frequent words and one per tail
    cluster."""
    assert cfg.adaptive is not None
    return cfg.adaptive.cutoffs[0] + len(cfg.adaptive.cutoffs)


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


def mfu_params(cfg: TransformerConfig, n_params: int) -> int:
    """The ``N`` of the MFU convention: all ``n_params``, except that an adaptive softmax's
    vocabulary counts only where every token multiplies it (its head cluster, the GEMM
    weights' share of :func:`gemm_params`): Transformer-XL's 137 M-parameter embedding of
    its 192 M is a lookup and a head of 20,003 words, not ``6 x 137 M`` FLOPs a token."""
    if cfg.adaptive is None:
        return n_params
    return gemm_params(cfg) + head_cluster_words(cfg) * cfg.hidden


def backward_tensors(cfg: TransformerConfig) -> tuple[tuple[str, int], ...]:
    """``(name, numel)`` of every gradient tensor in the order backward completes them (the
    reverse of forward; a tied embedding, used first, completes last)."""
    return tuple((t.name, t.n_params) for _, t in reversed(gradient_tensors(cfg)))
