"""The transformer zoo: stated parameter counts (within 1%), closed forms, per-block structure,
the FLOPs-per-token identity, refused configurations and the model-file reader."""

from __future__ import annotations

import builtins
import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.workload.transformers import (
    TRANSFORMER_NAMES,
    AdaptiveSoftmax,
    PatchEmbedding,
    TransformerConfig,
    get_transformer,
    gradient_tensors,
    param_breakdown,
    params,
)
from ddlsim.workload.transformers.load import load_model_config
from ddlsim.workload.transformers.published import PUBLISHED, UNPUBLISHED
from ddlsim.workload.transformers.structure import (
    backward_tensors,
    block,
    forward_flops_per_token,
    gemm_params,
    head,
    speech_convs,
)

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 0.01


def _compared(name: str) -> int:
    parts = param_breakdown(get_transformer(name))
    return sum(v for k, v in parts.items() if k not in PUBLISHED[name].excludes)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_one_percent_of_the_stated_figure(name):
    stated = PUBLISHED[name]
    ours = _compared(name)
    assert abs(ours - stated.params) / stated.params < TOLERANCE, (ours, stated)


def test_every_entry_has_a_stated_count_or_is_listed_as_nominal():
    assert set(PUBLISHED) | set(UNPUBLISHED) == set(TRANSFORMER_NAMES)
    assert not set(PUBLISHED) & set(UNPUBLISHED)
    assert all(get_transformer(n).source for n in TRANSFORMER_NAMES)


# -- closed forms (independent of the tensor lists) --------------------------------------------
def _encoder_layer(d: int, f: int) -> int:
    """A post-LN block with biases: 4 d x d attention, two FFN matrices, two LayerNorms."""
    return 4 * (d * d + d) + (d * f + f) + (f * d + d) + 4 * d


def test_bert_large_is_the_analytical_formula():
    v, p, d, n_layers = 30522, 512, 1024, 24
    embeddings = v * d + p * d + 2 * d + 2 * d
    backbone = embeddings + n_layers * _encoder_layer(d, 4 * d) + d * d + d
    mlm = d * d + d + 2 * d + v
    parts = param_breakdown(get_transformer("bert-large"))
    assert backbone == 335_141_888 == parts["embedding"] + parts["encoder"] + parts["pooler"]
    assert parts["head"] == mlm


@pytest.mark.parametrize("name", ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"])
def test_gpt2_closed_form(name):
    cfg = get_transformer(name)
    d, n_layers = cfg.hidden, cfg.layers
    assert params(cfg) == 50257 * d + 1024 * d + n_layers * (12 * d * d + 13 * d) + 2 * d


@pytest.mark.parametrize("name", [n for n in TRANSFORMER_NAMES if n.startswith("llama")])
def test_llama_closed_form(name):
    cfg = get_transformer(name)
    d, f, kv = cfg.hidden, cfg.ffn, cfg.n_kv_heads * cfg.head_dim
    layer = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d
    assert params(cfg) == 2 * cfg.vocab * d + cfg.layers * layer + d


def test_mpt_benchmark_definition_has_biases_and_learned_positions():
    cfg = get_transformer("mpt-7b")
    d = cfg.hidden
    assert params(cfg) == 50368 * d + 2048 * d + cfg.layers * (12 * d * d + 13 * d) + 2 * d
    released = get_transformer("mpt-7b-released")  # ALiBi, no biases, vocab 50432
    assert params(released) == 50432 * d + 32 * (12 * d * d + 2 * d) + d == 6_649_286_656


def test_electra_generator_shares_the_embeddings():
    parts = param_breakdown(get_transformer("electra-base"))
    assert parts["embedding"] + parts["generator"] == 33_740_602  # HF ElectraForMaskedLM alone
    assert parts["embedding"] + parts["encoder"] + parts["head"] == 109_483_009


def test_transformer_xl_large_adaptive_parts():
    cfg = get_transformer("transformer-xl-large")
    parts = param_breakdown(cfg)
    widths = (1024, 256, 64, 16)
    sizes = (20000, 20000, 160000, 67735)
    assert parts["embedding"] == sum(s * w + 1024 * w for s, w in zip(sizes, widths, strict=True))
    # output: biases, 3 cluster rows + biases, and the one untied projection (cluster 0)
    assert parts["head"] == 267735 + 3 * 1024 + 3 + 1024 * 1024


def test_wav2vec2_base_front_end():
    parts = param_breakdown(get_transformer("wav2vec2-base"))
    convs = 512 * 10 + 1024 + 4 * 512 * 512 * 3 + 2 * 512 * 512 * 2
    projection = 1024 + 512 * 768 + 768
    pos_conv = 128 + 768 * 48 * 128 + 768
    assert parts["frontend"] == convs + projection + pos_conv + 768  # + masked_spec_embed
    assert parts["embedding"] + parts["frontend"] + parts["encoder"] == 94_371_712  # HF model


@given(
    layers=st.integers(1, 6),
    heads=st.integers(1, 8),
    head_dim=st.integers(1, 32),
    ffn=st.integers(1, 256),
    vocab=st.integers(1, 1000),
    kind=st.sampled_from(["gelu", "swiglu"]),
    pre=st.booleans(),
    bias=st.booleans(),
    decoder=st.integers(0, 2),
)
@settings(max_examples=60, deadline=None)
def test_params_rise_with_layers_and_hidden(
    layers, heads, head_dim, ffn, vocab, kind, pre, bias, decoder
):
    def make(n_layers: int, hidden: int) -> TransformerConfig:
        return TransformerConfig(
            "p", n_layers, hidden, heads, ffn, vocab, ffn_kind=kind, bias=bias,
            norm_placement="pre" if pre else "post", decoder_layers=decoder,
        )  # fmt: skip

    cfg = make(layers, heads * head_dim)
    assert params(make(layers + 1, heads * head_dim)) > params(cfg)
    assert params(make(layers, heads * (head_dim + 1))) > params(cfg)
    assert params(cfg) == sum(param_breakdown(cfg).values())


# -- structure and FLOPs --------------------------------------------------------------------------
def test_bert_block_flops_match_the_per_layer_formula():
    cfg = get_transformer("bert-large")
    b, s, d = 4, 512, cfg.hidden
    assert block(cfg, b, s).flops == 24 * b * s * d * d + 4 * b * s * s * d
    names = [g.name for g in block(cfg, b, s).gemms]
    attention = ["attn/q", "attn/kv", "attn/scores", "attn/context", "attn/out"]
    assert names == [*attention, "ffn/up", "ffn/down"]
    scores = block(cfg, b, s).gemms[2]
    assert (scores.m, scores.n, scores.k, scores.batch) == (s, s, 64, b * 16)


def test_gqa_and_swiglu_gemms():
    cfg = get_transformer("llama3-8b")
    b, s, d, f = 1, 1024, cfg.hidden, cfg.ffn
    gemms = {g.name: g for g in block(cfg, b, s, flash=True).gemms}
    assert gemms["attn/kv"].n == 2 * 8 * 128
    mlp = sum(gemms[n].flops for n in ("ffn/gate", "ffn/up", "ffn/down"))
    assert mlp == 6 * b * s * d * f
    assert head(cfg, b, s).gemms[0].n == 128256


def test_flash_drops_the_score_passes_and_dropout_adds_masks():
    cfg = get_transformer("bert-base")
    eager = {p.name for p in block(cfg, 2, 128).passes}
    flash = {p.name for p in block(cfg, 2, 128, flash=True).passes}
    assert eager - flash == {"attn/softmax", "attn/probs_dropout"}
    mpt = {p.name for p in block(get_transformer("mpt-125m"), 2, 128).passes}
    assert not any("dropout" in n for n in mpt)  # MPT trains without dropout


@pytest.mark.parametrize(
    "name", ["gpt2", "gpt2-xl", "mpt-125m", "mpt-7b", "mpt-70b", "llama2-7b", "llama3-8b"]
)
def test_flops_per_token_identity(name):
    """3 x the per-GEMM forward sum is exactly 6·N_gemm + 12·L·d·s; against 6N it differs
    by 6 x the parameters that are no GEMM weight (positions, biases, norms, and an untied
    input embedding, a gather): under 1.5% for the tied GPT-2 / MPT entries (MPT-125m has
    2048 learned positions, 1.3% of N), up to V·d/N + 0.5% where the embedding is untied."""
    cfg = get_transformer(name)
    s, n_layers, d = cfg.seq, cfg.layers, cfg.hidden
    training = 3 * forward_flops_per_token(cfg)
    assert training == 6 * gemm_params(cfg) + 12 * n_layers * d * s
    identity = 6 * params(cfg) + 12 * n_layers * d * s
    assert identity - training == 6 * (params(cfg) - gemm_params(cfg))
    bound = 0.015 if cfg.tie_embeddings else cfg.vocab * d / params(cfg) + 0.005
    assert abs(training - identity) / identity < bound


def test_wav2vec2_feature_encoder_shapes():
    cfg = get_transformer("wav2vec2-base")
    convs = speech_convs(cfg, 2, 16000)  # one second at 16 kHz: 49 frames of 20 ms
    assert [(g.m, g.n, g.k) for g in convs][:2] == [(2 * 3199, 512, 10), (2 * 1599, 512, 1536)]
    assert convs[-1].m == 2 * 49 == 2 * cfg.speech.frames(16000)
    assert speech_convs(get_transformer("gpt2"), 2, 16000) == ()


def test_gradient_tensors_unique_and_backward_order():
    for name in TRANSFORMER_NAMES:
        cfg = get_transformer(name)
        names = [t.name for _, t in gradient_tensors(cfg)]
        assert len(names) == len(set(names)), name
        order = backward_tensors(cfg)
        assert sum(n for _, n in order) == params(cfg)
    order = backward_tensors(get_transformer("gpt2"))
    assert order[0][0] == "encoder/final_norm/bias"
    assert order[-1] == ("embedding/tokens", 50257 * 768)  # the tied embedding completes last


# -- refused configurations ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"heads": 7}, ["heads 7", "hidden 768"]),
        ({"kv_heads": 5}, ["kv_heads 5"]),
        ({"layers": -1}, ["layers", "-1"]),
        ({"layers": True}, ["layers", "True"]),
        ({"hidden": 76.8}, ["hidden", "76.8"]),
        ({"seq_len": 1024}, ["seq_len 1024", "max_positions 512"]),
        ({"ffn_kind": "gelux"}, ["ffn_kind", "'gelux'"]),
        ({"position": "absolute"}, ["position", "'absolute'"]),
        ({"norm": "batchnorm"}, ["norm", "'batchnorm'"]),
        ({"dropout": 1.5}, ["dropout", "1.5"]),
        ({"vocab": 0}, ["vocab"]),
        ({"name": ""}, ["name"]),
    ],
)
def test_bad_configs_are_refused_naming_the_value(change, words):
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(get_transformer("bert-base"), **change)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_bad_parts_are_refused():
    with pytest.raises(ConfigError, match="image 225 is not divisible by patch 16"):
        PatchEmbedding(16, 225)
    with pytest.raises(ConfigError, match="cutoffs must rise"):
        AdaptiveSoftmax((40000, 20000))
    with pytest.raises(UnknownNameError, match="unknown transformer 'bert-huge'"):
        get_transformer("bert-huge")


# -- a user's model file -------------------------------------------------------------------------
def test_shipped_examples_load():
    plain = load_model_config(REPO / "examples" / "model_config_plain.json")
    assert plain.name == "my-gqa-1.1b" and plain.n_kv_heads == 4
    assert params(plain) == 1_100_048_384  # TinyLlama-1.1B's shape and count
    hf = load_model_config(REPO / "examples" / "model_config_hf_llama2_7b.json")
    assert hf.name == "meta-llama/Llama-2-7b-hf"
    assert params(hf) == params(get_transformer("llama2-7b"))


def _write(tmp_path: Path, doc: dict, name: str = "m.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_hf_gpt2_and_mpt_keys_without_model_type(tmp_path):
    gpt2 = {"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}
    assert params(load_model_config(_write(tmp_path, gpt2))) == 124_439_808
    mpt = {"d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4}
    mpt |= {"max_seq_len": 2048, "vocab_size": 50368}
    assert params(load_model_config(_write(tmp_path, mpt))) == params(get_transformer("mpt-7b"))


def test_plain_base_and_yaml(tmp_path):
    small = load_model_config(_write(tmp_path, {"base": "openai-community/gpt2", "layers": 6}))
    assert small.layers == 6 and small.name == "m"
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"base": "bert-large-uncased", "seq_len": 128}), "utf-8")
    assert load_model_config(path).seq == 128


def test_yaml_without_pyyaml_says_so(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_yaml(name, *args, **kwargs):
        if name == "yaml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    path = tmp_path / "x.yml"
    path.write_text("layers: 2\n", "utf-8")
    with pytest.raises(ConfigError, match="needs PyYAML"):
        load_model_config(path)


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 10, "flux": 1}, ["'flux'"]),
        ({"layers": 2, "hidden": 64, "heads": 0, "ffn": 256, "vocab": 10}, ["heads", "0"]),
        ({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10}, ["missing field ffn"]),
        ({"model_type": "llama", "hidden_size": 64, "num_experts": 8}, ["'num_experts'"]),
        ({"model_type": "t5", "d_model": 512}, ["model_type 't5'"]),
        (
            {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "activation_function": "tanh"},
            ["'tanh'"],
        ),
        ({"base": "bert-hueg"}, ["'bert-hueg'", "nearest"]),
        ({"model_type": "electra", "hidden_size": 256, "embedding_size": 128}, ["embedding_size"]),
        ({"model_type": "llama", "hidden_size": 64, "hidden_act": "relu"}, ["'relu'"]),
    ],
)
def test_model_file_errors_name_the_field(tmp_path, doc, words):
    with pytest.raises(ConfigError) as err:
        load_model_config(_write(tmp_path, doc))
    message = str(err.value)
    assert "\n" not in message and "m.json" in message
    for word in words:
        assert word in message, message


def test_gated_families_take_the_gate_from_the_activation(tmp_path):
    doc = dict(HF_CONFIGS["llama3-8b"], hidden_act="gelu_pytorch_tanh")
    assert load_model_config(_write(tmp_path, doc)).ffn_kind == "geglu"
    vit = dict(HF_CONFIGS["vit-b-16"], qkv_bias=False)
    with pytest.raises(ConfigError, match="qkv_bias false is not supported"):
        load_model_config(_write(tmp_path, vit))


def test_unreadable_and_non_mapping_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{", "utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_model_config(bad)
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_model_config(_write(tmp_path, [1, 2]))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot read"):
        load_model_config(tmp_path / "missing.json")


# -- the measured runs ---------------------------------------------------------------------------
def _mpt_rows():
    with open(REPO / "traces" / "measured" / "runs_transformers.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            mfu = re.search(r"MFU ([\d.]+)", row["note"])
            usable = row["model"].startswith("mpt") and mfu and row["tokens_per_sec"]
            if usable and "fp8" not in row["variant"]:  # fp8 MFU is against another peak
                yield row, float(mfu.group(1)) / 100


def test_llm_foundry_mfu_reproduces_from_our_parameter_counts():
    """The benchmark rows state MFU = T/s x (6N + 12·L·d·s) / (GPUs x peak); with N from the
    zoo definition at max_seq_len = the row's seq_len it reproduces within 0.5%."""
    checked = 0
    for row, mfu in _mpt_rows():
        s = int(row["seq_len"])
        cfg = dataclasses.replace(get_transformer(row["model"]), max_positions=s, seq_len=s)
        flops = 6 * params(cfg) + 12 * cfg.layers * cfg.hidden * s
        peak = 989e12 if row["gpu"] == "h100" else 312e12
        ours = float(row["tokens_per_sec"]) * flops / (int(row["gpus"]) * peak)
        assert ours == pytest.approx(mfu, rel=5e-3), row["run_id"]
        checked += 1
    assert checked > 150


HF_CONFIGS = json.loads((REPO / "tests" / "data" / "hf_configs.json").read_text("utf-8"))


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_hugging_face_config_json_as_published_builds_the_zoo_entry(tmp_path, name):
    """config.json files as the Hub has them (every key, dropouts and labels included)."""
    cfg = load_model_config(_write(tmp_path, HF_CONFIGS[name], "config.json"))
    assert params(cfg) == params(get_transformer(name))
    assert cfg.name == HF_CONFIGS[name].get("_name_or_path", "config")
