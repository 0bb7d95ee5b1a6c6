"""One GPU's compute of a transformer step by term (report, ``--json``, ``inputs``): the terms
add up to the step the simulation runs, each is what it says, and the report shows them."""

from __future__ import annotations

import json

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.cli.report_transformer import compute_lines
from ddlsim.compute.transformer_step import Numerics, block_time, gemm_kind
from ddlsim.compute.transformer_terms import KERNEL_KINDS, TERM_NAMES
from ddlsim.system.catalog import device
from ddlsim.workload.transformers.structure import Gemm, block
from ddlsim.workload.transformers.zoo import get_transformer

BERT = dict(gpu="v100-sxm2", precision="amp", batch=16, seq_len=128, comm="ddp")


def _terms(model: str, gpus: int, **kw: object) -> tuple[dict[str, float], ddlsim.Prediction]:
    p = ddlsim.predict(model, gpus, node_mtbf_hours=0, **kw)
    return p.inputs["transformer"]["compute_terms_s"], p


def test_terms_add_up_to_the_profiled_step() -> None:
    terms, p = _terms("bert-large", 1, **BERT)
    prof = p.setup.workload.profile
    assert set(terms) == set(TERM_NAMES)
    assert all(v >= 0 for v in terms.values())
    assert sum(terms.values()) == pytest.approx(prof.step_time_s, rel=1e-12)
    # BERT-large's GEMMs are the largest term; no checkpointing, no accumulation
    assert terms["gemm"] == max(terms.values())
    assert terms["recompute"] == terms["accumulate"] == 0.0


def test_the_optimizer_term_is_the_shard_the_dag_runs() -> None:
    """Under FSDP a GPU steps the optimizer over its 1/N of the state: the term is the DAG's."""
    kw = dict(gpu="h100", precision="bf16", batch=2, seq_len=2048, comm="fsdp")
    one, _ = _terms("mpt-1b", 1, **kw)
    eight, p = _terms("mpt-1b", 8, **kw)
    assert eight["optimizer"] == pytest.approx(p.setup.dag.nodes["update"]["duration_s"])
    assert eight["optimizer"] == pytest.approx(one["optimizer"] / 8, rel=1e-9)
    assert eight["gemm"] == pytest.approx(one["gemm"], rel=1e-12)


def test_checkpointing_recomputes_the_forward_and_accumulation_adds() -> None:
    base = dict(gpu="a100", precision="bf16", batch=2, seq_len=1024, comm="ddp")
    plain, _ = _terms("gpt2-medium", 1, **base)
    ckpt, _ = _terms("gpt2-medium", 1, activation_checkpointing=True, **base)
    assert ckpt["gemm"] == pytest.approx(plain["gemm"])
    # the recompute is the blocks' forward: a third of their GEMMs (backward = 2 x forward)
    assert plain["gemm"] / 4 < ckpt["recompute"] < plain["gemm"] / 3 + plain["elementwise"]
    accum, _ = _terms("gpt2-medium", 1, grad_accum=4, **base)
    assert accum["gemm"] == pytest.approx(4 * plain["gemm"], rel=1e-9)
    assert accum["accumulate"] > 0 and accum["optimizer"] == pytest.approx(plain["optimizer"])


def test_a_small_eager_step_waits_on_the_host() -> None:
    eager, _ = _terms("gpt2", 1, gpu="h100", precision="bf16", batch=1, seq_len=128, comm="ddp")
    graphs, _ = _terms(
        "gpt2", 1, gpu="h100", precision="bf16", batch=1, seq_len=128, comm="ddp", cuda_graphs=True
    )
    assert eager["host_wait"] > 0.2 * sum(eager.values())
    assert graphs["host_wait"] == 0.0
    assert graphs["gemm"] == pytest.approx(eager["gemm"])


def test_anchoring_scales_the_stages_not_the_shares() -> None:
    """An anchor (``--single-gpu-throughput``) rescales the stages: the terms follow, and the
    numerics (so MFU's peak) stay the per-layer model's."""
    free, _ = _terms("bert-large", 1, **BERT)
    anchored, p = _terms("bert-large", 1, single_gpu_throughput=50.0, **BERT)
    assert sum(anchored.values()) == pytest.approx(p.setup.workload.profile.step_time_s)
    ratio = anchored["gemm"] / free["gemm"]
    assert anchored["attention"] / free["attention"] == pytest.approx(ratio)
    t = p.inputs["transformer"]
    assert t["numerics"]["gemm_precision"] == "fp16"
    # MFU at the fp16 tensor-core peak: 50 sequences of 128 tokens a second on one V100
    flops = 50 * 128 * t["model_flops_per_token"]
    assert t["mfu"] == pytest.approx(flops / device("v100-sxm2").peak_fp16_flops, rel=1e-3)


def test_kinds_of_a_block() -> None:
    """Attention's batched products and score passes are attention; FlashAttention's kernel
    too; the projections and MLP are linear GEMMs; norms and residuals element-wise."""
    assert gemm_kind(Gemm("attn/scores", 128, 128, 64, batch=32)) == "attention"
    assert gemm_kind(Gemm("ffn/up", 4096, 4096, 1024)) == "gemm"
    cfg = get_transformer("bert-large")
    v100 = device("v100-sxm2")
    n = Numerics("fp16", "fp16", fused_softmax=False, autocast=True)
    t = block_time(block(cfg, 8, 128), 8 * 128, v100, n)
    kinds = {k: f + b for k, f, b in t.terms}
    assert set(kinds) == set(KERNEL_KINDS)
    assert sum(kinds.values()) == pytest.approx(t.fwd_s + t.bwd_s)
    h100 = device("h100")
    flash = Numerics("bf16", "bf16", flash=True, causal=True)
    gpt = get_transformer("gpt2")
    tf = block_time(block(gpt, 4, 1024, flash=True), 4096, h100, flash, attention=(4, 12, 1024, 64))
    assert dict((k, f) for k, f, _ in tf.terms)["attention"] > 0


def test_the_report_and_json_show_the_terms(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["predict", "--model", "bert-large", "--gpus", "1", "--gpu", "v100-sxm2"]
    args += ["--precision", "amp", "--batch", "16", "--seq-len", "128", "--node-mtbf-hours", "0"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "compute / GPU" in out and "linear-layer GEMMs" in out and "optimizer step" in out
    assert "recompute" not in out  # no checkpointing: a term of no time is left out
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    terms = doc["inputs"]["transformer"]["compute_terms_s"]
    assert terms["gemm"] > 0 and terms["optimizer"] > 0


def test_compute_lines_shares() -> None:
    lines = compute_lines({"gemm": 0.75, "attention": 0.25, "recompute": 0.0})
    assert "1,000.00 ms" in lines[0]
    assert "75.0 %" in lines[1] and "25.0 %" in lines[2] and len(lines) == 3
    assert compute_lines({}) == []
