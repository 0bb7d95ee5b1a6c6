"""Transformer-XL's relative attention and adaptive softmax as the reference code runs them
(structure.py's module docstring): numbers from the op counts, closed forms, bounds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlsim.compute.transformer_ops import memory_op_s
from ddlsim.compute.transformer_step import Numerics, block_time
from ddlsim.system.catalog import device
from ddlsim.workload.transformers.structure import (
    RELATIVE_ATTENTION_PASSES,
    UNIGRAM_COVERAGE,
    block,
    head,
    mfu_params,
    tail_share,
)
from ddlsim.workload.transformers.zoo import get_transformer

TXL = get_transformer("transformer-xl-base")


def test_the_qkv_projection_runs_over_the_memory_and_the_segment() -> None:
    blk = block(TXL, 16, 192)
    qkv = next(g for g in blk.gemms if g.name == "attn/qkv")
    assert (qkv.m, qkv.n, qkv.k) == (16 * (192 + 192), 3 * 512, 512)
    bert = block(get_transformer("bert-base"), 16, 128)
    assert next(g for g in bert.gemms if g.name == "attn/q").m == 16 * 128


def test_the_score_passes_cover_the_scores_of_the_memory_and_segment() -> None:
    b, s = 4, 192
    scores = b * TXL.heads * s * (s + TXL.mem_len)
    passes = {p.name: p for p in block(TXL, b, s).passes}
    for name, _, share in RELATIVE_ATTENTION_PASSES:
        assert passes[f"attn/{name}"].elems == round(share * scores)
        assert passes[f"attn/{name}"].eager
    flash = {p.name for p in block(TXL, b, s, flash=True).passes}
    assert "attn/rel_shift" not in flash and "attn/mem_cat" in flash


def test_xla_folds_the_eager_passes_and_an_fp32_run_casts_nothing() -> None:
    v100 = device("v100-sxm2")
    blk = block(TXL, 16, 192)
    eager = block_time(blk, 16 * 192, v100, Numerics("fp16", "fp16", fused_softmax=False))
    xla = block_time(blk, 16 * 192, v100, Numerics("fp16", "fp16", fused_softmax=True))
    assert xla.fwd_s < eager.fwd_s and xla.bwd_s < eager.bwd_s
    cast_free = [p for p in blk.passes if p.name != "attn/mask_casts"]
    fp32 = Numerics("fp32", "fp32", fused_softmax=False)
    with_casts = block_time(blk, 16 * 192, v100, fp32)
    without = block_time(replace(blk, passes=tuple(cast_free)), 16 * 192, v100, fp32)
    assert with_casts.fwd_s == pytest.approx(without.fwd_s)


def test_a_layout_copy_has_no_backward_and_rel_shift_writes_twice_back() -> None:
    a100 = device("a100")
    rows, cols = 4096, 1024
    assert memory_op_s("layout_copy", rows, cols, a100, "fp16", direction="bwd") == 0.0
    copy = memory_op_s("layout_copy", rows, cols, a100, "fp16")
    back = memory_op_s("rel_shift", rows, cols, a100, "fp16", direction="bwd")
    floor = memory_op_s("layout_copy", 1, 1, a100, "fp16")
    assert back - floor == pytest.approx(1.5 * (copy - floor), rel=1e-6)  # 3 passes vs 2


def test_the_unigram_coverage_is_the_measured_table_between_its_points() -> None:
    assert tail_share(0, 20_000) == pytest.approx(0.9587)
    assert tail_share(20_000, 40_000) == pytest.approx(0.9798 - 0.9587)
    assert tail_share(0, 10**9) == pytest.approx(1.0)
    assert [c for _, c in UNIGRAM_COVERAGE] == sorted(c for _, c in UNIGRAM_COVERAGE)


@given(st.integers(1, 400_000), st.integers(1, 400_000), st.integers(1, 400_000))
def test_tail_shares_are_additive_and_bounded(a: int, b: int, c: int) -> None:
    lo, mid, hi = sorted((a, b, c))
    assert 0.0 <= tail_share(lo, hi) <= 1.0
    assert tail_share(lo, mid) + tail_share(mid, hi) == pytest.approx(tail_share(lo, hi))


def test_the_adaptive_head_runs_each_tail_on_its_share_of_the_tokens() -> None:
    tokens = 32 * 192
    gemms = {g.name: g for g in head(TXL, 32, 192).gemms}
    assert gemms["vocab"].n == 20_000 + 3 and gemms["vocab"].m == tokens
    assert gemms["tail2/vocab"].n == 160_000
    assert gemms["tail2/vocab"].m == round(tokens * tail_share(40_000, 200_000))
    large = {g.name: g for g in head(get_transformer("transformer-xl-large"), 8, 384).gemms}
    assert large["tail1/vocab"].k == 1024 // 4 and large["tail1/proj"].n == 1024 // 4


def test_mfu_counts_the_adaptive_vocabulary_only_where_every_token_uses_it() -> None:
    from ddlsim.workload.transformers.tensors import gradient_tensors

    n = sum(t.n_params for _, t in gradient_tensors(TXL))
    assert mfu_params(TXL, n) < n - 100_000_000  # 137 M of the embedding is a lookup
    bert = get_transformer("bert-large")
    assert mfu_params(bert, 335_000_000) == 335_000_000


def test_a_fused_loss_reads_the_half_precision_logits_once_each_way() -> None:
    """flash-attn's CrossEntropyLoss: forward reads the logits, backward reads them and writes
    their gradient, at bf16 and with no fp32 casts; the unfused loss under autocast moves
    several times the bytes."""
    from ddlsim.compute.transformer_ops import op_bytes
    from ddlsim.compute.transformer_step import pass_s
    from ddlsim.workload.transformers.structure import MemoryPass

    rows, vocab = 16_384, 50_432
    assert op_bytes("cross_entropy_fused", rows, vocab, "bf16") == rows * vocab * 2
    assert op_bytes("cross_entropy_fused", rows, vocab, "bf16", "bwd") == 2 * rows * vocab * 2
    loss = MemoryPass("loss", rows * vocab)
    a100 = device("a100")
    fused = Numerics("bf16", "bf16", autocast=True, fused_loss=True)
    plain = Numerics("bf16", "bf16", autocast=True)
    f = sum(pass_s(loss, rows, a100, fused, gated=False, norm="layernorm"))
    u = sum(pass_s(loss, rows, a100, plain, gated=False, norm="layernorm"))
    assert 4 < u / f < 10


def test_llm_foundry_rows_run_its_fused_loss() -> None:
    from ddlsim.tools.validate.transformer_mapping import LOSS_KERNEL_OF_SOURCE

    assert LOSS_KERNEL_OF_SOURCE["MOSAIC_LLMF_2307"] == "fused"


def test_each_micro_step_after_the_first_adds_its_gradient_in_fp32() -> None:
    """Gradient accumulation: K - 1 micro-steps and K - 1 additions of 12 bytes a parameter
    (read both gradients, write the sum, fp32) at the element-wise kernels' bandwidth."""
    from ddlsim.calibration.transformer import ACCUMULATE_BYTES_PER_PARAM, accumulate_s
    from ddlsim.compute.gemm import default_gemm_model

    v100 = device("v100-sxm2")
    bandwidth = v100.mem_bandwidth_Bps * default_gemm_model().stream_efficiency
    assert accumulate_s(335_000_000, v100) == pytest.approx(
        335_000_000 * ACCUMULATE_BYTES_PER_PARAM / bandwidth
    )
    import ddlsim

    one = ddlsim.predict("bert-large", 1, gpu="v100-sxm2", batch=4, seq_len=128, grad_accum=1)
    four = ddlsim.predict("bert-large", 1, gpu="v100-sxm2", batch=4, seq_len=128, grad_accum=4)
    compute = one.iteration_time_s - one.setup.workload.profile.unattributed_time_s
    extra = four.iteration_time_s - one.iteration_time_s
    n = one.setup.workload.model.n_params
    assert extra == pytest.approx(3 * (compute + accumulate_s(n, v100)), rel=0.02)


def test_the_adaptive_softmax_materialises_its_clusters_not_the_whole_vocabulary() -> None:
    """Memory: Transformer-XL's logits are the head cluster for every token plus each tail
    cluster for its own tokens (far below rows x 267,735); a plain LM head keeps rows x vocab."""
    from ddlsim.workload.transformers.memory import logit_elements
    from ddlsim.workload.transformers.structure import head_cluster_words, tail_share

    txl = get_transformer("transformer-xl-base")
    b, s = 16, 192
    got = logit_elements(txl, b, s)
    tokens = b * s
    assert tokens * head_cluster_words(txl) < got < tokens * (head_cluster_words(txl) + 10_000)
    assert got < 0.15 * tokens * txl.vocab
    # each tail's rows follow the unigram coverage of its ranks
    assert 0 < tail_share(20_000, 40_000) < 0.1
    gpt2 = get_transformer("gpt2")
    assert logit_elements(gpt2, 4, 1024) == 4 * 1024 * gpt2.vocab
