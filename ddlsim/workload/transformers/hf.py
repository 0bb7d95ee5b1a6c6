"""A Hugging Face ``config.json``, as published, made into :class:`TransformerConfig` fields.

Families (``model_type``): bert, roberta, distilbert, electra (the discriminator alone), gpt2,
mpt, llama, mistral, bart, vit, wav2vec2, deberta-v2 and transfo-xl. A file without
``model_type`` is GPT-2 if it has ``n_layer``/``n_embd``, MPT if it has ``d_model`` and
``expansion_ratio``. The size keys of each family are read (``num_hidden_layers``,
``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``, ``intermediate_size``,
``vocab_size``, ``max_position_embeddings``, ``hidden_act``; GPT-2's ``n_layer``/``n_embd``/
``n_head``/``n_positions``/``n_inner``; MPT's ``d_model``/``n_layers``/``n_heads``/
``expansion_ratio``/``max_seq_len``/``no_bias``/``attn_config``; ...) and the rest of the
architecture comes from the family. Keys that cannot change the tensors (dropouts,
initialisation, epsilons, token ids, labels, generation and runtime settings) are ignored;
any other key is refused by name rather than silently ignored, since it might change the
model.
"""

from __future__ import annotations

import re
from typing import Any

from ddlsim.errors import ConfigError, shown
from ddlsim.workload.transformers.config import (
    AdaptiveSoftmax,
    ConvLayer,
    PatchEmbedding,
    SpeechFrontEnd,
)

#: key -> field, for every family (a family's own keys are read by its function)
_SIZES = {
    "num_hidden_layers": "layers",
    "n_layer": "layers",
    "n_layers": "layers",
    "hidden_size": "hidden",
    "n_embd": "hidden",
    "d_model": "hidden",
    "dim": "hidden",
    "num_attention_heads": "heads",
    "n_head": "heads",
    "n_heads": "heads",
    "num_key_value_heads": "kv_heads",
    "intermediate_size": "ffn",
    "n_inner": "ffn",
    "hidden_dim": "ffn",
    "d_inner": "ffn",
    "vocab_size": "vocab",
    "max_position_embeddings": "max_positions",
    "n_positions": "max_positions",
    "max_seq_len": "max_positions",
    "type_vocab_size": "token_types",
    "tie_word_embeddings": "tie_embeddings",
}
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "quick_gelu": "gelu"}
_ACTIVATIONS |= {"gelu_pytorch_tanh": "gelu", "relu": "relu", "silu": "swiglu", "swish": "swiglu"}
_LLAMA = {
    "ffn_kind": "swiglu",
    "position": "rope",
    "norm": "rmsnorm",
    "norm_placement": "pre",
    "bias": False,
    "final_norm": True,
    "tie_embeddings": False,
    "causal": True,
    "dropout": 0.0,
}
_CAUSAL = {"norm_placement": "pre", "final_norm": True, "fused_qkv": True, "causal": True}
_BERT = {"embedding_norm": True, "pooler": True, "head": "mlm"}
_FAMILIES: dict[str, dict[str, Any]] = {
    "bert": _BERT,
    "roberta": _BERT,
    "distilbert": {"embedding_norm": True, "head": "mlm"},
    "electra": {"embedding_norm": True, "head": "discriminator"},
    "gpt2": _CAUSAL,
    "mpt": {**_CAUSAL, "dropout": 0.0},
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "bart": {"position_offset": 2, "embedding_norm": True},
    "vit": {"norm_placement": "pre", "final_norm": True, "head": "classifier", "vocab": 0},
    "wav2vec2": {"position": "conv", "vocab": 0, "head": "contrastive"},
    "deberta-v2": {"embedding_norm": True, "head": "mlm"},
    "transfo-xl": {"position": "relative", "attn_bias": False, "fused_qkv": True},
}
#: keys that cannot change the tensors: ignored
_IGNORED = re.compile(
    r".*(dropout|_prob|_pdrop|init|eps|epsilon|token_id|_ids?$|label|dtype|version|cache|"
    r"scale|range|_std|sample|mask|loss|ctc|layerdrop|return_|output_|output$|torchscript|"
    r"freeze|negatives|dropatt|predict_special|tie_weights_|pruned|problem|task|prefix|finetuning|decoder_start|forced_|beam|length|repetition|"
    r"bad_words|diversity|temperature|top_|no_repeat|chunk|tokenizer|xla|gradient|"
    r"classifier|summary|pretraining_tp|rope_|sliding|window|clamp|same_length|attn_type|"
    r"sample_softmax|adaptive$|proj_init|auto_map|architectures|model_type|name_or_path|"
    r"is_|use_|add_|apply_|spec_|tdnn|xvector|adapter|num_adapter|feat_quantizer|"
    r"contrastive|diversity|codevector_dim$|norm_type|low_precision|fc_type|verbose|"
    r"logit|emb_pdrop|embedding_fraction|alibi_bias_max|attn_impl|attn_uses_sequence_id|"
    r"prefix_lm|qk_ln|clip_qkv|softmax_scale|attn_clip|qk_gn|sliding_window_size|"
    r"sequence_id|pooler_|position_embedding_type|do_stable_layer_norm$|"
    r"feat_extract_activation|conv_act|share_att_key|pos_att_type|norm_rel_ebd|"
    r"max_relative_positions|relative_attention|hidden_act|activation_function|activation$).*"
)
_FAMILY_KEYS = {
    "gpt2": {"activation_function", "n_ctx", "n_special"},
    "distilbert": {"sinusoidal_pos_embds"},
    "electra": {"embedding_size"},
    "mpt": {"expansion_ratio", "no_bias", "attn_config", "learned_pos_emb", "ffn_config"},
    "llama": {"attention_bias", "mlp_bias", "head_dim"},
    "bart": {"encoder_layers", "decoder_layers", "encoder_attention_heads", "encoder_ffn_dim"}
    | {"normalize_before", "add_final_layer_norm", "normalize_embedding", "extra_pos_embeddings"}
    | {"static_position_embeddings"},
    "vit": {"image_size", "patch_size", "num_channels", "encoder_stride", "qkv_bias"},
    "deberta-v2": {"position_buckets", "conv_kernel_size", "position_biased_input"},
    "transfo-xl": {"d_head", "d_embed", "cutoffs", "div_val", "tie_projs", "untie_r", "pre_lnorm"}
    | {"proj_share_all_but_first"},  # the legacy spelling of tie_projs, which wins
    "transfo-xl+": {"mem_len", "tgt_len", "ext_len", "n_token"},
}
_BART_SAME = ("decoder_attention_heads", "decoder_ffn_dim")
_W2V_KEYS = (
    "conv_dim",
    "conv_kernel",
    "conv_stride",
    "conv_bias",
    "feat_extract_norm",
    "num_conv_pos_embeddings",
    "num_conv_pos_embedding_groups",
    "num_codevector_groups",
    "num_codevectors_per_group",
    "proj_codevector_dim",
    "num_feat_extract_layers",
    "codevector_dim",
)


def is_hf_config(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` is a Hugging Face ``config.json`` rather than the plain form."""
    return "model_type" in doc or "n_embd" in doc or ("d_model" in doc and "expansion_ratio" in doc)


def _family(doc: dict[str, Any]) -> str:
    family = doc.get("model_type")
    if family is None:
        family = "gpt2" if "n_embd" in doc else "mpt"
    if family not in _FAMILIES:
        raise ConfigError(
            f"unsupported model_type {shown(family)}; supported: {', '.join(sorted(_FAMILIES))}"
        )
    return family


def _check_keys(doc: dict[str, Any], family: str) -> None:
    known = set(_SIZES) | _FAMILY_KEYS.get(family, set()) | set(_BART_SAME) | set(_W2V_KEYS)
    known |= _FAMILY_KEYS["transfo-xl+"] | {"id2label"}
    for key in doc:
        if key not in known and not _IGNORED.fullmatch(key):
            raise ConfigError(
                f"unknown field {shown(key)} for model_type {family!r} (it might change the "
                "model, so it is not ignored)"
            )


def hf_fields(doc: dict[str, Any], default_name: str = "custom") -> dict[str, Any]:
    """:class:`TransformerConfig` keyword arguments from a Hugging Face ``config.json``
    (named by its ``_name_or_path``, else ``default_name``)."""
    family = _family(doc)
    _check_keys(doc, family)
    name = doc.get("_name_or_path") or default_name  # the Hub id where the file names it
    fields: dict[str, Any] = {"name": name, **_FAMILIES[family]}
    for key, value in doc.items():
        if key in _SIZES and value is not None:
            fields[_SIZES[key]] = value
    act = doc.get("hidden_act", doc.get("activation_function", doc.get("activation")))
    if act is not None:
        fields["ffn_kind"] = _ffn_kind(act, gated=family in _GATED)
    _SPECIAL.get(family, _none)(doc, fields)
    if "ffn" not in fields and "hidden" in fields:
        fields["ffn"] = 4 * fields["hidden"]
    return fields


_GATED = ("llama", "mistral")


def _ffn_kind(act: object, *, gated: bool) -> str:
    """The FFN kind of activation ``act`` in a gated (Llama-like) or a plain MLP."""
    kind = _ACTIVATIONS.get(act) if isinstance(act, str) else None
    if kind is None or (kind == "relu" and gated):
        raise ConfigError(f"unsupported hidden_act {shown(act)}")
    if gated:
        return "swiglu" if kind == "swiglu" else "geglu"
    if kind == "swiglu":
        raise ConfigError(f"hidden_act {act!r} without a gated MLP is not supported")
    return kind


def _none(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    """No family-specific keys."""


def _mpt(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    fields["ffn"] = int(doc.get("expansion_ratio", 4) * fields["hidden"])
    fields.setdefault("vocab", 50368)
    fields.setdefault("max_positions", 2048)
    fields["bias"] = not doc.get("no_bias", False)
    attn = doc.get("attn_config") or {}
    if not isinstance(attn, dict):
        raise ConfigError(f"attn_config must be a mapping, got {shown(attn)}")
    if attn.get("alibi"):
        fields["position"] = "alibi"
    elif attn.get("rope"):
        fields["position"] = "rope"
    elif doc.get("learned_pos_emb", True) is False:
        raise ConfigError("an MPT without learned positions, ALiBi or RoPE has no positions")
    if attn.get("kv_n_heads") is not None:
        fields["kv_heads"] = attn["kv_n_heads"]


def _llama(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    if doc.get("attention_bias"):
        fields["attn_bias"] = True
    if doc.get("mlp_bias"):
        raise ConfigError("mlp_bias true is not supported")
    if doc.get("head_dim") not in (None, fields.get("hidden", 0) // fields.get("heads", 1)):
        raise ConfigError(f"head_dim {doc['head_dim']} other than hidden / heads is not supported")


def _bart(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    for key in _BART_SAME:
        enc = key.replace("decoder", "encoder")
        if key in doc and doc[key] != doc.get(enc):
            raise ConfigError(f"{key} {doc[key]} differs from {enc} {doc.get(enc)}: not supported")
    fields["layers"] = doc.get("encoder_layers", 12)
    fields["decoder_layers"] = doc.get("decoder_layers", 12)
    fields["heads"] = doc.get("encoder_attention_heads", 16)
    fields["ffn"] = doc.get("encoder_ffn_dim", 4 * fields["hidden"])
    fields["position_offset"] = doc.get("extra_pos_embeddings", 2)
    fields["embedding_norm"] = doc.get("normalize_embedding", True)
    if doc.get("static_position_embeddings", False):
        fields["position"], fields["position_offset"] = "sinusoidal", 0
    fields["norm_placement"] = "pre" if doc.get("normalize_before", False) else "post"
    fields["final_norm"] = bool(doc.get("add_final_layer_norm", False))


def _vit(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    labels = doc.get("id2label")
    classes = len(labels) if isinstance(labels, dict) and len(labels) > 2 else 1000
    patch = PatchEmbedding(
        doc.get("patch_size", 16), doc.get("image_size", 224), doc.get("num_channels", 3), classes
    )
    fields["patch"] = patch
    fields["max_positions"] = fields["seq_len"] = patch.tokens
    if not doc.get("qkv_bias", True):  # q, k, v without biases but the output with one
        raise ConfigError("qkv_bias false is not supported")


def _wav2vec2(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    lists = [doc.get(k, []) for k in ("conv_dim", "conv_kernel", "conv_stride")]
    if len({len(x) for x in lists}) != 1:
        raise ConfigError(f"conv_dim, conv_kernel and conv_stride differ in length: {shown(lists)}")
    convs = zip(*lists, strict=True)
    kw: dict[str, Any] = {"convs": tuple(ConvLayer(*c) for c in convs) or SpeechFrontEnd().convs}
    pairs = {
        "conv_bias": "conv_bias",
        "num_conv_pos_embeddings": "pos_conv_kernel",
        "num_conv_pos_embedding_groups": "pos_conv_groups",
        "num_codevector_groups": "codevector_groups",
        "num_codevectors_per_group": "codevectors_per_group",
        "codevector_dim": "codevector_dim",
        "proj_codevector_dim": "final_dim",
    }
    kw |= {field: doc[key] for key, field in pairs.items() if key in doc}
    if "feat_extract_norm" in doc:
        kw["conv_norm"] = doc["feat_extract_norm"]
    fields["speech"] = SpeechFrontEnd(**kw)
    fields["vocab"] = 0  # vocab_size is the CTC head's, added by fine-tuning only
    fields["max_positions"] = 1
    fields["seq_len"] = fields["speech"].frames(250000)
    stable = bool(doc.get("do_stable_layer_norm", False))  # the large models: pre-LN
    fields["norm_placement"] = "pre" if stable else "post"
    fields["final_norm"], fields["embedding_norm"] = stable, not stable


def _deberta(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    if doc.get("position_biased_input", True) and doc.get("relative_attention", False):
        raise ConfigError("DeBERTa with both absolute and relative positions is not supported")
    if doc.get("relative_attention", False):
        buckets = doc.get("position_buckets", -1)
        if buckets <= 0:
            buckets = doc.get("max_relative_positions", -1)
        if buckets <= 0:
            buckets = fields.get("max_positions", 512)
        fields["position"], fields["relative_buckets"] = "disentangled", buckets
    fields["deberta_conv_kernel"] = doc.get("conv_kernel_size", 0)
    fields.setdefault("token_types", 0)


def _transfo_xl(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    d, heads = fields.get("hidden", 1024), fields.get("heads", 16)
    if doc.get("d_head", d // heads) * heads != d or doc.get("d_embed", d) != d:
        raise ConfigError("Transformer-XL with d_head * n_head or d_embed other than d_model")
    fields.setdefault("vocab", doc.get("n_token", 267735))
    ties = doc.get("tie_projs", [False, True, True, True])
    cutoffs = doc.get("cutoffs", [20000, 40000, 200000])
    fields["adaptive"] = AdaptiveSoftmax(tuple(cutoffs), doc.get("div_val", 4), tuple(ties))
    fields["untie_relative_bias"] = doc.get("untie_r", True)
    tgt = doc.get("tgt_len", 128)
    fields["max_positions"] = fields["seq_len"] = tgt
    fields["mem_len"] = doc.get("mem_len", 1600)
    fields["norm_placement"] = "pre" if doc.get("pre_lnorm", False) else "post"


def _gpt2(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    if doc.get("n_special", 0):
        raise ConfigError(f"n_special {doc['n_special']} (extra embeddings) is not supported")


def _electra(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    if doc.get("embedding_size", fields.get("hidden")) != fields.get("hidden"):
        raise ConfigError(
            f"embedding_size {doc['embedding_size']} other than hidden_size is not supported"
        )


def _distilbert(doc: dict[str, Any], fields: dict[str, Any]) -> None:
    if doc.get("sinusoidal_pos_embds", False):
        fields["position"] = "sinusoidal"


_SPECIAL = {
    "gpt2": _gpt2,
    "distilbert": _distilbert,
    "electra": _electra,
    "mpt": _mpt,
    "llama": _llama,
    "mistral": _llama,
    "bart": _bart,
    "vit": _vit,
    "wav2vec2": _wav2vec2,
    "deberta-v2": _deberta,
    "transfo-xl": _transfo_xl,
}
