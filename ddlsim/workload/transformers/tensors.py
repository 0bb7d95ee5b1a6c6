"""Trainable tensors of a :class:`TransformerConfig`, per component, in forward order.

One list is the single source of every count: :func:`gradient_tensors` gives each trainable
tensor once (a tied tensor where it is first used, the input embedding), tagged with its
component; :func:`param_breakdown` and :func:`params` sum it. A parameter is a trainable
tensor element: buffers (BART's ``final_logits_bias``, sinusoidal tables, ALiBi slopes, rotary
frequencies) are not parameters. Components: ``embedding`` (token, position, token-type,
patch and embedding norm), ``frontend`` (wav2vec2's feature encoder and convolutional
positions), ``encoder`` / ``decoder`` (their blocks and final norm), ``generator`` (ELECTRA),
``pooler`` and ``head`` (vocabulary projection, MLM transform, classifier, quantizer).
"""

from __future__ import annotations

from ddlsim.workload.layers import GradTensor
from ddlsim.workload.transformers.config import SEQUENCE_LABELS, TransformerConfig

COMPONENTS = ("embedding", "frontend", "encoder", "decoder", "generator", "pooler", "head")

Tagged = tuple[str, GradTensor]


def linear(name: str, n_in: int, n_out: int, bias: bool) -> list[GradTensor]:
    """The weight (``n_out`` x ``n_in``, PyTorch's layout) and optional bias of a linear layer."""
    out = [GradTensor(f"{name}/weight", (n_out, n_in))]
    if bias:
        out.append(GradTensor(f"{name}/bias", (n_out,)))
    return out


def norm(cfg: TransformerConfig, name: str, width: int) -> list[GradTensor]:
    """A LayerNorm (weight, and bias where ``cfg.bias``) or an RMSNorm (weight only)."""
    out = [GradTensor(f"{name}/weight", (width,))]
    if cfg.norm == "layernorm" and cfg.bias:
        out.append(GradTensor(f"{name}/bias", (width,)))
    return out


def _attention(
    cfg: TransformerConfig, name: str, d: int, heads: int, kv: int, *, relative: bool
) -> list[GradTensor]:
    dh, bias = d // heads, cfg.has_attn_bias
    if cfg.fused_qkv:
        out = linear(f"{name}/qkv", d, (heads + 2 * kv) * dh, bias)
    else:
        out = [
            *linear(f"{name}/q", d, heads * dh, bias),
            *linear(f"{name}/k", d, kv * dh, bias),
            *linear(f"{name}/v", d, kv * dh, bias),
        ]
    if relative:  # Transformer-XL: the projection of the relative position encodings
        out += linear(f"{name}/r", d, heads * dh, False)
        if cfg.untie_relative_bias:
            out += [GradTensor(f"{name}/r_w_bias", (heads, dh))]
            out += [GradTensor(f"{name}/r_r_bias", (heads, dh))]
    return [*out, *linear(f"{name}/out", heads * dh, d, bias)]


def _ffn(cfg: TransformerConfig, name: str, d: int, f: int) -> list[GradTensor]:
    out = linear(f"{name}/up", d, f, cfg.bias)
    if cfg.gated:
        out = [*linear(f"{name}/gate", d, f, cfg.bias), *out]
    return [*out, *linear(f"{name}/down", f, d, cfg.bias)]


def block_tensors(
    cfg: TransformerConfig,
    name: str,
    *,
    cross: bool = False,
    sizes: tuple[int, int, int, int] | None = None,
) -> list[GradTensor]:
    """Tensors of one block in forward order: self-attention, cross-attention (a decoder
    block), FFN and their norms (before or after each, as ``cfg.norm_placement`` says).

    ``sizes`` = ``(hidden, heads, kv_heads, ffn)`` overrides the model's (ELECTRA's generator).
    """
    d, heads, kv, f = sizes or (cfg.hidden, cfg.heads, cfg.n_kv_heads, cfg.ffn)
    subs = [_attention(cfg, f"{name}/attn", d, heads, kv, relative=cfg.position == "relative")]
    if cross:
        subs.append(_attention(cfg, f"{name}/cross", d, heads, heads, relative=False))
    subs.append(_ffn(cfg, f"{name}/ffn", d, f))
    out: list[GradTensor] = []
    for i, sub in enumerate(subs):
        n = norm(cfg, f"{name}/norm{i + 1}", d)
        out += [*n, *sub] if cfg.norm_placement == "pre" else [*sub, *n]
    return out


def adaptive_clusters(cfg: TransformerConfig) -> list[tuple[int, int]]:
    """(words, embedding width) of each adaptive cluster, the frequent words' first."""
    assert cfg.adaptive is not None
    edges = [0, *cfg.adaptive.cutoffs, cfg.vocab]
    div = cfg.adaptive.div
    return [(edges[i + 1] - edges[i], cfg.hidden // div**i) for i in range(len(edges) - 1)]


def _token_embedding(cfg: TransformerConfig) -> list[GradTensor]:
    if cfg.adaptive is None or cfg.adaptive.div == 1:
        return [GradTensor("embedding/tokens", (cfg.vocab, cfg.hidden))]
    out = []
    for i, (tokens, width) in enumerate(adaptive_clusters(cfg)):
        out.append(GradTensor(f"embedding/tokens{i}", (tokens, width)))
        out.append(GradTensor(f"embedding/proj{i}", (cfg.hidden, width)))
    return out


def _positions(cfg: TransformerConfig, name: str) -> list[GradTensor]:
    if cfg.position != "learned":
        return []
    return [GradTensor(f"{name}/positions", (cfg.max_positions + cfg.position_offset, cfg.hidden))]


def _embedding(cfg: TransformerConfig) -> list[GradTensor]:
    out: list[GradTensor] = []
    if cfg.patch is not None:
        p = cfg.patch
        out += [GradTensor("embedding/patch/weight", (cfg.hidden, p.channels, p.patch, p.patch))]
        out += [GradTensor("embedding/patch/bias", (cfg.hidden,))]
        if p.cls_token:
            out.append(GradTensor("embedding/cls", (1, 1, cfg.hidden)))
    if cfg.vocab:
        out += _token_embedding(cfg)
    out += _positions(cfg, "embedding")
    if cfg.token_types:
        out.append(GradTensor("embedding/token_types", (cfg.token_types, cfg.hidden)))
    if cfg.position == "disentangled":  # DeBERTa-v2: shared relative embeddings, normed
        out.append(GradTensor("embedding/relative", (2 * cfg.relative_buckets, cfg.hidden)))
        out += norm(cfg, "embedding/relative_norm", cfg.hidden)
    if cfg.embedding_norm:
        out += norm(cfg, "embedding/norm", cfg.hidden)
    return out


def _frontend(cfg: TransformerConfig) -> list[GradTensor]:
    sp = cfg.speech
    assert sp is not None
    out: list[GradTensor] = []
    c_in = 1
    for i, conv in enumerate(sp.convs):
        out.append(GradTensor(f"frontend/conv{i}/weight", (conv.channels, c_in, conv.kernel)))
        if sp.conv_bias:
            out.append(GradTensor(f"frontend/conv{i}/bias", (conv.channels,)))
        if sp.conv_norm == "layer" or i == 0:
            out += [GradTensor(f"frontend/conv{i}/norm/weight", (conv.channels,))]
            out += [GradTensor(f"frontend/conv{i}/norm/bias", (conv.channels,))]
        c_in = conv.channels
    out += [GradTensor("frontend/projection/norm/weight", (c_in,))]
    out += [GradTensor("frontend/projection/norm/bias", (c_in,))]
    out += linear("frontend/projection", c_in, cfg.hidden, True)
    out += [GradTensor("frontend/mask_embedding", (cfg.hidden,))]
    d, g, k = cfg.hidden, sp.pos_conv_groups, sp.pos_conv_kernel
    out += [GradTensor("frontend/pos_conv/weight_g", (1, 1, k))]  # weight norm over dim 2
    out += [GradTensor("frontend/pos_conv/weight_v", (d, d // g, k))]
    return [*out, GradTensor("frontend/pos_conv/bias", (d,))]


def _stack(cfg: TransformerConfig, component: str) -> list[GradTensor]:
    decoder = component == "decoder"
    count = cfg.decoder_layers if decoder else cfg.layers
    out: list[GradTensor] = []
    if decoder:
        if not cfg.tie_embeddings:
            out.append(GradTensor("decoder/tokens", (cfg.vocab, cfg.hidden)))
        out += _positions(cfg, "decoder")
        if cfg.embedding_norm:
            out += norm(cfg, "decoder/embedding_norm", cfg.hidden)
    elif cfg.position == "relative" and not cfg.untie_relative_bias:
        out += [GradTensor("encoder/r_w_bias", (cfg.heads, cfg.head_dim))]
        out += [GradTensor("encoder/r_r_bias", (cfg.heads, cfg.head_dim))]
    for i in range(count):
        out += block_tensors(cfg, f"{component}/layer{i}", cross=decoder)
        if i == 0 and cfg.deberta_conv_kernel and not decoder:
            d, k = cfg.hidden, cfg.deberta_conv_kernel
            out += [
                GradTensor("encoder/conv/weight", (d, d, k)),
                GradTensor("encoder/conv/bias", (d,)),
            ]
            out += norm(cfg, "encoder/conv/norm", d)
    if cfg.final_norm:
        out += norm(cfg, f"{component}/final_norm", cfg.hidden)
    return out


def _generator(cfg: TransformerConfig) -> list[GradTensor]:
    g = cfg.generator
    assert g is not None
    e = cfg.hidden  # the shared embedding width
    out = linear("generator/embedding_projection", e, g.hidden, cfg.bias) if g.hidden != e else []
    sizes = (g.hidden, g.heads, g.heads, g.ffn)
    for i in range(g.layers):
        out += block_tensors(cfg, f"generator/layer{i}", sizes=sizes)
    out += linear("generator/head/dense", g.hidden, e, cfg.bias)
    out += norm(cfg, "generator/head/norm", e)
    return [*out, GradTensor("generator/head/output_bias", (cfg.vocab,))]


def _lm_head(cfg: TransformerConfig) -> list[GradTensor]:
    if cfg.adaptive is None:
        return [] if cfg.tie_embeddings else linear("head/output", cfg.hidden, cfg.vocab, False)
    ad, n_clusters = cfg.adaptive, len(cfg.adaptive.cutoffs)
    out = [GradTensor("head/cluster/weight", (n_clusters, cfg.hidden))]
    out += [GradTensor("head/cluster/bias", (n_clusters,))]
    for i, (tokens, width) in enumerate(adaptive_clusters(cfg)):
        if not cfg.tie_embeddings:
            out.append(GradTensor(f"head/output{i}/weight", (tokens, width)))
        out.append(GradTensor(f"head/output{i}/bias", (tokens,)))
        tied = ad.tie_projections[i] if ad.tie_projections else False
        if ad.div > 1 and not tied:
            out.append(GradTensor(f"head/proj{i}", (cfg.hidden, width)))
    return out


def _head(cfg: TransformerConfig) -> list[GradTensor]:
    d = cfg.hidden
    if cfg.head == "lm":
        return _lm_head(cfg)
    if cfg.head == "mlm":
        out = [*linear("head/transform", d, d, cfg.bias), *norm(cfg, "head/norm", d)]
        if not cfg.tie_embeddings:
            out.append(GradTensor("head/decoder/weight", (cfg.vocab, d)))
        return [*out, GradTensor("head/decoder/bias", (cfg.vocab,))]
    if cfg.head == "discriminator":
        return [*linear("head/dense", d, d, cfg.bias), *linear("head/logit", d, 1, cfg.bias)]
    if cfg.head == "classifier":
        assert cfg.patch is not None
        return linear("head/classifier", d, cfg.patch.classes, True)
    if cfg.head == "span":
        return linear("head/qa_outputs", d, 2, True)
    if cfg.head == "sequence":
        return linear("head/classifier", d, SEQUENCE_LABELS, True)
    if cfg.head == "contrastive":
        sp = cfg.speech
        assert sp is not None
        entries = sp.codevector_groups * sp.codevectors_per_group
        out = [
            GradTensor("head/codevectors", (1, entries, sp.codevector_dim // sp.codevector_groups))
        ]
        out += linear("head/quantizer_projection", sp.convs[-1].channels, entries, True)
        out += linear("head/project_q", sp.codevector_dim, sp.final_dim, True)
        return [*out, *linear("head/project_hidden", d, sp.final_dim, True)]
    return []


def gradient_tensors(cfg: TransformerConfig) -> tuple[Tagged, ...]:
    """``(component, tensor)`` for every trainable tensor, in forward order (reverse it for
    the order in which backward completes gradients: a tied embedding completes last)."""
    parts: list[tuple[str, list[GradTensor]]] = [("embedding", _embedding(cfg))]
    if cfg.speech is not None:
        parts.append(("frontend", _frontend(cfg)))
    if cfg.generator is not None:
        parts.append(("generator", _generator(cfg)))
    parts.append(("encoder", _stack(cfg, "encoder")))
    if cfg.encoder_decoder:
        parts.append(("decoder", _stack(cfg, "decoder")))
    if cfg.pooler:
        parts.append(("pooler", linear("pooler", cfg.hidden, cfg.hidden, True)))
    parts.append(("head", _head(cfg)))
    return tuple((component, t) for component, ts in parts for t in ts)


def param_breakdown(cfg: TransformerConfig) -> dict[str, int]:
    """Parameters per component (every key of :data:`COMPONENTS`, 0 where absent)."""
    out = dict.fromkeys(COMPONENTS, 0)
    for component, tensor in gradient_tensors(cfg):
        out[component] += tensor.n_params
    return out


def params(cfg: TransformerConfig) -> int:
    """Total trainable parameters."""
    return sum(t.n_params for _, t in gradient_tensors(cfg))
