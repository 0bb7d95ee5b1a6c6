"""The transformer zoo: published definitions, each with its source and a published count.

:data:`TRANSFORMER_NAMES` and :func:`get_transformer` are a registry of their own, apart from
the CNN zoo's ``MODEL_NAMES`` (``predict`` cannot simulate a transformer yet). Each entry's
``source`` names where its sizes come from; :data:`PUBLISHED` gives the parameter count a
source states, which components that figure leaves out, and the source. Counts marked "HF"
are what the Hugging Face ``transformers`` (4.44) or timm implementation of that definition
has, a published figure where the paper's is rounded or miscounted (docs/design.md,
"Transformer zoo").
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ddlsim.errors import UnknownNameError
from ddlsim.workload.transformers.config import (
    AdaptiveSoftmax,
    Generator,
    PatchEmbedding,
    SpeechFrontEnd,
    TransformerConfig,
)

#: shared by the pre-LN causal language models (GPT-2, MPT, Llama)
_CAUSAL_LM = {"norm_placement": "pre", "final_norm": True, "causal": True}


def _cfg(name: str, sizes: tuple[int, int, int, int, int], **kw: object) -> TransformerConfig:
    """``TransformerConfig(name, layers, hidden, heads, ffn, vocab, **kw)``."""
    return TransformerConfig(name, *sizes, **kw)  # type: ignore[arg-type]


_HF_BERT = "Devlin et al. 2019 (NAACL) Table; HF google-bert/{} config.json"


def _bert(name: str, layers: int, hidden: int, heads: int, vocab: int = 30522, **kw: object):
    """A BERT-style post-LN encoder: token types, embedding LayerNorm, MLM head."""
    base = dict(
        max_positions=512,
        token_types=2,
        embedding_norm=True,
        pooler=True,
        head="mlm",
        source=_HF_BERT.format(name if name.endswith("cased") else f"{name}-uncased"),
    )
    base.update(kw)
    return TransformerConfig(name, layers, hidden, heads, 4 * hidden, vocab, **base)


def _gpt2(name: str, layers: int, hidden: int, heads: int) -> TransformerConfig:
    return _cfg(
        name,
        (layers, hidden, heads, 4 * hidden, 50257),
        max_positions=1024,
        fused_qkv=True,
        **_CAUSAL_LM,
        source=f"Radford et al. 2019; HF openai-community/{name} config.json (n_layer, n_embd, "
        "n_head, n_positions 1024, vocab 50257, tied)",
    )


def _mpt(name: str, layers: int, hidden: int, heads: int) -> TransformerConfig:
    return _cfg(
        name,
        (layers, hidden, heads, 4 * hidden, 50368),
        max_positions=2048,
        fused_qkv=True,
        dropout=0.0,
        positions_follow_seq=True,
        **_CAUSAL_LM,
        source=f"llm-foundry scripts/train/yamls/pretrain/{name}.yaml (d_model, n_heads, n_layers, "
        "expansion_ratio 4, vocab 50368, max_seq_len) over MPTConfig defaults (llm-foundry 0.10 "
        "configuration_mpt.py: biases on, learned positions, tied); max_positions follows the "
        "run's max_seq_len (--seq-len)",
    )


def _llama(
    name: str, layers: int, hidden: int, heads: int, ffn: int, vocab: int, kv: int | None, pos: int
) -> TransformerConfig:
    return _cfg(
        name,
        (layers, hidden, heads, ffn, vocab),
        kv_heads=kv,
        ffn_kind="swiglu",
        max_positions=pos,
        position="rope",
        norm="rmsnorm",
        bias=False,
        tie_embeddings=False,
        dropout=0.0,
        **_CAUSAL_LM,
        source="Touvron et al. 2023 / Meta Llama 3 (2024); HF meta-llama config.json "
        "(intermediate_size, num_key_value_heads, vocab_size, untied)",
    )


def _vit(name: str, layers: int, hidden: int, heads: int, patch: int) -> TransformerConfig:
    pe = PatchEmbedding(patch, 224)
    return _cfg(
        name,
        (layers, hidden, heads, 4 * hidden, 0),
        max_positions=pe.tokens,
        norm_placement="pre",
        final_norm=True,
        head="classifier",
        patch=pe,
        dropout=0.0,
        source="Dosovitskiy et al. 2021 Table 1; timm vision_transformer.py (224 px, 1000 classes)",
    )


def _txl(name: str, layers: int, hidden: int, heads: int, ffn: int, tgt: int, **kw: object):
    return _cfg(
        name,
        (layers, hidden, heads, ffn, 267735),
        max_positions=tgt,
        position="relative",
        attn_bias=False,
        fused_qkv=True,
        mem_len=tgt,
        **kw,
    )


_TXL_CUTOFFS = (20000, 40000, 200000)

_DEFINITIONS: dict[str, Callable[[], TransformerConfig]] = {
    "bert-base": partial(_bert, "bert-base", 12, 768, 12),
    "bert-large": partial(_bert, "bert-large", 24, 1024, 16),
    "bert-base-cased": partial(_bert, "bert-base-cased", 12, 768, 12, vocab=28996),
    "bert-large-cased": partial(_bert, "bert-large-cased", 24, 1024, 16, vocab=28996),
    "distilbert-base": partial(
        _bert,
        "distilbert-base",
        6,
        768,
        12,
        token_types=0,
        pooler=False,
        source="Sanh et al. 2019; HF distilbert/distilbert-base-uncased config.json (n_layers 6)",
    ),
    "electra-base": partial(
        _bert,
        "electra-base",
        12,
        768,
        12,
        pooler=False,
        head="discriminator",
        generator=Generator(12, 256, 4, 1024),
        source="Clark et al. 2020 Table 8; HF google/electra-base-discriminator and "
        "-generator config.json (generator hidden 256, 4 heads, ffn 1024; embeddings shared)",
    ),
    "bart-large": lambda: _cfg(
        "bart-large",
        (12, 1024, 16, 4096, 50265),
        max_positions=1024,
        position_offset=2,
        embedding_norm=True,
        decoder_layers=12,
        source="Lewis et al. 2020; HF facebook/bart-large config.json (12+12 layers, learned "
        "positions with offset 2, layernorm_embedding, shared tied embeddings)",
    ),
    "transformer-big": lambda: _cfg(
        "transformer-big",
        (6, 1024, 16, 4096, 37000),
        max_positions=1024,
        position="sinusoidal",
        norm_placement="pre",
        final_norm=True,
        decoder_layers=6,
        source="Vaswani et al. 2017 §5.1/Table 3 (big; shared vocabulary of about 37000 BPE "
        "tokens); fairseq transformer_wmt_en_de_big_t2t (pre-norm, final norms, "
        "share_all_embeddings), the architecture of DeepLearningExamples' Translation/Transformer",
    ),
    "transformer-xl-base": partial(
        _txl,
        "transformer-xl-base",
        16,
        512,
        8,
        2048,
        192,
        adaptive=AdaptiveSoftmax(_TXL_CUTOFFS),
        source="NVIDIA DeepLearningExamples PyTorch/LanguageModeling/Transformer-XL wt103_base "
        "(d_model 512, n_head 8, d_head 64, d_inner 2048, tgt_len = mem_len = 192, div_val 1); "
        "the paper's base is transformer-xl-base-paper",
    ),
    "transformer-xl-base-paper": partial(
        _txl,
        "transformer-xl-base-paper",
        16,
        410,
        10,
        2100,
        150,
        adaptive=AdaptiveSoftmax(_TXL_CUTOFFS),
        source="Dai et al. 2019 Table 1 (WT103 base: 16 layers, d 410, 10 heads of 41, d_inner "
        "2100, tgt_len = mem_len = 150, adaptive softmax div_val 1)",
    ),
    "transformer-xl-large": partial(
        _txl,
        "transformer-xl-large",
        18,
        1024,
        16,
        4096,
        384,
        untie_relative_bias=True,
        adaptive=AdaptiveSoftmax(_TXL_CUTOFFS, div=4, tie_projections=(False, True, True, True)),
        source="Dai et al. 2019 (WT103 large); HF transfo-xl/transfo-xl-wt103 config.json "
        "(div_val 4, tie_projs [F,T,T,T], untie_r); DLE wt103_large tgt_len = mem_len = 384",
    ),
    "wav2vec2-base": lambda: _cfg(
        "wav2vec2-base",
        (12, 768, 12, 3072, 0),
        max_positions=1,
        seq_len=SpeechFrontEnd().frames(250000),
        position="conv",
        embedding_norm=True,
        head="contrastive",
        speech=SpeechFrontEnd(),
        source="Baevski et al. 2020 §4.2 (BASE: 12 blocks, 768, FFN 3072; 8 heads in the paper, "
        "12 in HF facebook/wav2vec2-base config.json); seq_len = frames of fairseq's "
        "max_sample_size 250000",
    ),
    "gpt2": partial(_gpt2, "gpt2", 12, 768, 12),
    "gpt2-medium": partial(_gpt2, "gpt2-medium", 24, 1024, 16),
    "gpt2-large": partial(_gpt2, "gpt2-large", 36, 1280, 20),
    "gpt2-xl": partial(_gpt2, "gpt2-xl", 48, 1600, 25),
    "deberta-v2-xxlarge": lambda: _cfg(
        "deberta-v2-xxlarge",
        (48, 1536, 24, 6144, 128100),
        position="disentangled",
        relative_buckets=256,
        embedding_norm=True,
        deberta_conv_kernel=3,
        head="mlm",
        source="He et al. 2021; HF microsoft/deberta-v2-xxlarge config.json (position_buckets "
        "256, norm_rel_ebd layer_norm, share_att_key, conv_kernel_size 3, "
        "position_biased_input false, type_vocab_size 0)",
    ),
    "mpt-125m": partial(_mpt, "mpt-125m", 12, 768, 12),
    "mpt-350m": partial(_mpt, "mpt-350m", 24, 1024, 16),
    "mpt-760m": partial(_mpt, "mpt-760m", 24, 1536, 12),
    "mpt-1b": partial(_mpt, "mpt-1b", 24, 2048, 16),
    "mpt-3b": partial(_mpt, "mpt-3b", 32, 2560, 20),
    "mpt-7b": partial(_mpt, "mpt-7b", 32, 4096, 32),
    "mpt-13b": partial(_mpt, "mpt-13b", 40, 5120, 40),
    "mpt-30b": partial(_mpt, "mpt-30b", 48, 7168, 64),
    "mpt-70b": partial(_mpt, "mpt-70b", 80, 8192, 64),
    "mpt-7b-released": lambda: _cfg(
        "mpt-7b-released",
        (32, 4096, 32, 16384, 50432),
        max_positions=2048,
        position="alibi",
        bias=False,
        fused_qkv=True,
        dropout=0.0,
        **_CAUSAL_LM,
        source="HF mosaicml/mpt-7b config.json (alibi, no_bias, vocab 50432, tied)",
    ),
    "llama2-7b": partial(_llama, "llama2-7b", 32, 4096, 32, 11008, 32000, None, 4096),
    "llama2-13b": partial(_llama, "llama2-13b", 40, 5120, 40, 13824, 32000, None, 4096),
    "llama2-70b": partial(_llama, "llama2-70b", 80, 8192, 64, 28672, 32000, 8, 4096),
    "llama3-8b": partial(_llama, "llama3-8b", 32, 4096, 32, 14336, 128256, 8, 8192),
    "llama3-70b": partial(_llama, "llama3-70b", 80, 8192, 64, 28672, 128256, 8, 8192),
    "vit-b-16": partial(_vit, "vit-b-16", 12, 768, 12, 16),
    "vit-l-16": partial(_vit, "vit-l-16", 24, 1024, 16, 16),
    "vit-h-14": partial(_vit, "vit-h-14", 32, 1280, 16, 14),
}

TRANSFORMER_NAMES: tuple[str, ...] = tuple(_DEFINITIONS)


def get_transformer(name: str) -> TransformerConfig:
    """The :class:`TransformerConfig` of zoo entry ``name`` (one of :data:`TRANSFORMER_NAMES`;
    aliases resolve through :func:`ddlsim.workload.zoo.aliases.canonical`).

    Raises :class:`~ddlsim.errors.UnknownNameError` for any other name.
    """
    if name not in _DEFINITIONS:
        raise UnknownNameError("transformer", name, TRANSFORMER_NAMES)
    return _DEFINITIONS[name]()
