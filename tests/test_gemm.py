"""The transformer kernel routes: cuBLAS GEMMs, memory-bound passes, FlashAttention, the check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.cli.main import main
from ddlsim.compute import gemm_fit
from ddlsim.compute.gemm import (
    as_measured_s,
    default_gemm_model,
    gemm_parts,
    gemm_time_s,
    model_document,
    unit_peak,
)
from ddlsim.compute.gemm_check import predict, read_transformer_csv, summarise
from ddlsim.compute.kernels import default_model
from ddlsim.compute.transformer_ops import flash_attention_s, memory_op_s, op_bytes
from ddlsim.errors import ConfigError
from ddlsim.system import catalog

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "measured" / "kernels" / "transformer"
MODEL = default_gemm_model()


def test_large_square_gemm_approaches_the_tensor_core_roof():
    a100 = catalog.kernel_device("a100")
    n = 16384
    t = gemm_time_s(n, n, n, a100, "fp16")
    roof = 2.0 * n**3 / (a100.peak_fp16_flops * MODEL.tensor_efficiency)
    assert roof <= t <= 1.03 * roof  # tile overhead, the last wave and the launch: < 3%


def test_large_fp32_gemm_approaches_the_cuda_core_roof():
    v100 = catalog.kernel_device("v100")
    n = 8192
    roof = 2.0 * n**3 / (v100.peak_fp32_flops * MODEL.cuda_efficiency)
    assert roof <= gemm_time_s(n, n, n, v100, "fp32") <= 1.05 * roof


def test_tiny_gemm_is_the_launch_floor():
    t = gemm_time_s(8, 8, 8, catalog.kernel_device("a100"), "fp16")
    assert MODEL.launch_s < t <= 1.25 * MODEL.launch_s


def test_one_tile_more_than_the_sms_costs_a_second_wave():
    v100 = catalog.kernel_device("v100")  # 80 SMs; k = 64: no split-K
    one = gemm_parts(128 * 80, 128, 64, v100, "fp32")
    two = gemm_parts(128 * 81, 128, 64, v100, "fp32")
    assert one.compute_s > one.memory_s and two.compute_s > two.memory_s
    assert two.compute_s / one.compute_s == pytest.approx(2.0, rel=0.01)


def test_batched_gemm_shares_the_waves():
    a100 = catalog.kernel_device("a100")  # attention scores: 64 heads x 8 sequences, d_head 64
    batched = gemm_time_s(512, 512, 64, a100, "fp16", batch=512)
    single = gemm_time_s(512, 512, 64, a100, "fp16")
    assert batched < 512 * single / 10  # one launch, tiles of all products in the same waves


def test_memory_roof_of_a_skinny_gemm():
    a100 = catalog.kernel_device("a100")  # one token through a 4096 x 12288 projection: reads B
    p = gemm_parts(1, 12288, 4096, a100, "fp16")
    bytes_ = 2 * (4096 + 4096 * 12288 + 12288)
    assert p.memory_s == pytest.approx(
        bytes_ / (a100.mem_bandwidth_Bps * default_model().memory_efficiency)
    )
    assert p.total_s >= p.memory_s


@settings(max_examples=40, deadline=None)
@given(
    gpu=st.sampled_from(["v100", "a100", "t4", "p100"]),
    precision=st.sampled_from(["fp32", "fp16"]),
    dims=st.tuples(*[st.integers(1, 6000)] * 3),
    axis=st.integers(0, 2),
    more=st.integers(1, 3000),
)
def test_time_is_monotone_in_m_n_and_k(gpu, precision, dims, axis, more):
    device = catalog.kernel_device(gpu)
    bigger = list(dims)
    bigger[axis] += more
    assert gemm_time_s(*bigger, device, precision) >= gemm_time_s(*dims, device, precision)


@pytest.mark.parametrize(
    ("gpu", "precision", "words"),
    [
        ("v100", "tf32", ["tf32", "v100-sxm2", "volta"]),
        ("t4", "bf16", ["bf16", "t4", "turing"]),
        ("a100", "fp8", ["fp8", "a100", "ampere", "hopper"]),
        ("a100", "int4", ["int4"]),
    ],
)
def test_precisions_a_gpu_cannot_run_are_refused(gpu, precision, words):
    with pytest.raises(ConfigError) as err:
        gemm_time_s(64, 64, 64, catalog.kernel_device(gpu), precision)
    assert all(w in str(err.value) for w in words)


def test_unit_peaks_per_generation_and_precision():
    h100, a100, p100 = (catalog.kernel_device(g) for g in ("h100", "a100", "p100"))
    assert unit_peak(h100, "fp8") == (2 * h100.peak_fp16_flops, True)
    assert unit_peak(a100, "bf16") == (a100.peak_fp16_flops, True)
    assert unit_peak(a100, "tf32") == (a100.peak_tf32_flops, True)
    assert unit_peak(a100, "fp32") == (a100.peak_fp32_flops, False)
    assert unit_peak(p100, "fp16") == (p100.peak_fp32_flops, False)  # fp32 math, CUDA cores


def test_flash_attention_versions_and_refusals():
    """Each version runs where flash-attn runs it (the grid's numbers: tests/test_flash_grid.py)."""
    a100, t4, h100 = (catalog.kernel_device(g) for g in ("a100", "t4", "h100"))
    b, h, s, d = 8, 16, 2048, 128
    fwd = flash_attention_s(b, h, s, d, a100, "bf16")
    fa3 = flash_attention_s(b, h, s, d, h100, "fp16", version=3)
    assert fa3 < fwd / 2.5  # FA3 at 75% of 989 TFLOP/s, FA2 at 73% of 312
    fa2 = flash_attention_s(b, h, s, d, h100, "fp16")  # PyTorch's: FA2, 34% of Hopper's peak
    fa1 = flash_attention_s(b, h, s, d, h100, "fp16", version=1)  # FA1: FA2's Hopper share
    assert fa3 < fa2 < fa1
    flash_attention_s(b, h, s, d, t4, "fp16")  # FlashAttention 1 runs on Turing
    for kwargs, device, words in (
        ({"version": 2}, t4, ["FlashAttention 2", "t4", "turing"]),
        ({}, catalog.kernel_device("v100"), ["FlashAttention", "v100-sxm2"]),
        ({"version": 3}, a100, ["FlashAttention 3", "a100"]),
    ):
        with pytest.raises(ConfigError) as err:
            flash_attention_s(b, h, s, d, device, "fp16", **kwargs)
        assert all(w in str(err.value) for w in words)
    with pytest.raises(ConfigError, match="bf16 on t4"):
        flash_attention_s(b, h, s, d, t4, "bf16")
    with pytest.raises(ConfigError, match="fp8"):
        flash_attention_s(b, h, s, d, a100, "fp8")


def test_memory_bound_passes_count_their_bytes():
    a100 = catalog.kernel_device("a100")
    rows, cols = 4096, 4096
    assert op_bytes("add", rows, cols, "fp16") == 3 * rows * cols * 2
    assert op_bytes("dropout", rows, cols, "fp16") == 2 * rows * cols * 2 + rows * cols
    ln = op_bytes("layernorm", rows, cols, "fp32")
    assert ln == 8 * rows * cols + 8 * cols + 8 * rows  # the files' bytes_hint for NeuSight
    assert op_bytes("softmax", rows, cols, "fp16", fused=False) == 3 * op_bytes(
        "softmax", rows, cols, "fp16"
    )
    assert op_bytes("layernorm", rows, cols, "fp16", "bwd") > 2 * op_bytes(
        "layernorm", rows, cols, "fp16"
    )
    t = memory_op_s("gelu", rows, cols, a100, "fp16")
    stream = 4 * rows * cols / (a100.mem_bandwidth_Bps * MODEL.stream_efficiency)
    assert t == pytest.approx(MODEL.stream_launch_s + stream)
    unfused = memory_op_s("softmax", rows, cols, a100, "fp16", fused=False)
    assert unfused == pytest.approx(3 * memory_op_s("softmax", rows, cols, a100, "fp16"))


def test_timing_methods_are_named_terms():
    assert as_measured_s(1e-5, "kineto_median20") == 1e-5
    assert as_measured_s(1e-5, "event_min5of25") == 1e-5 + MODEL.event_dispatch_s
    assert as_measured_s(1e-7, "host_mean400") == MODEL.issue_interval_s  # issue-bound
    assert as_measured_s(1e-3, "host_mean400") == 1e-3
    with pytest.raises(ConfigError, match="time_stat"):
        as_measured_s(1e-5, "wall_clock")


def _reported(kind: str) -> dict[str, float]:
    return model_document()["check"][kind]


@pytest.mark.parametrize("name", ["gemm.csv", "elementwise.csv"])
def test_check_stays_under_the_reported_figures(name, capsys):
    assert main(["kernels", str(SAMPLE / name), "--json", "--no-held-out"]) == 0
    doc = json.loads(capsys.readouterr().out)
    reported = _reported("fit_mape")
    groups = doc["summary"]["by_gpu_precision_op"]
    assert len(groups) > 10
    for g in groups:
        key = f"{g['gpu']} {g['precision']} {g['op']}"
        assert g["mape"] <= reported[key] + 0.01, key


@pytest.mark.parametrize("name", ["gemm.csv", "elementwise.csv"])
def test_leave_one_gpu_out_stays_under_the_reported_figures(name):
    rows, _, _ = read_transformer_csv(SAMPLE / name)
    held_out, fitted = gemm_fit.leave_one_gpu_out(rows, MODEL)
    reported = _reported("leave_one_gpu_out_mape")
    assert set(fitted) == {r.device.id for r in rows}
    for (gpu, precision, op), s in held_out.items():
        assert s["mape"] <= reported[f"{gpu} {precision} {op}"] + 0.01, (gpu, precision, op)


def test_text_report_names_the_groups_and_the_held_out_column(capsys):
    assert main(["kernels", str(SAMPLE / "gemm.csv"), "--gpu", "a40"]) == 0
    out = capsys.readouterr().out
    assert "a40" in out and "LOGO" in out and "fp16" in out


def test_sample_is_small_and_every_usable_row_is_predicted():
    total = sum(p.stat().st_size for p in SAMPLE.iterdir())
    assert total < 1.6e6
    rows, skipped, n = read_transformer_csv(SAMPLE / "elementwise.csv")
    assert len(rows) == n and not skipped  # the L4 (Ada) is a kernel-catalog GPU
    assert {r.device.arch for r in rows} >= {"pascal", "volta", "turing", "ampere", "ada"}
    results = [predict(r) for r in rows]
    assert {s["op"] for s in summarise(results)} >= {"layernorm", "rmsnorm", "softmax", "gelu"}


def test_kernel_only_gpus_are_not_offered_to_predict():
    for name in ("p4", "a40", "gtx-1080ti", "titan-xp", "l4"):
        gpu = catalog.kernel_device(name)
        assert gpu.sm_count and gpu.sources["peak_fp32_TFLOPS"]
        assert name not in catalog.device_names()
    assert catalog.kernel_device("v100-pcie-32gb").id == "v100-pcie"


def test_autocast_runs_its_fp32_ops_between_two_casts():
    """Under autocast a LayerNorm reads and writes fp32 and pays a cast in and a cast out;
    without autocast it runs at the half width (closed form: the route's own terms)."""
    from ddlsim.compute.transformer_ops import memory_op_s
    from ddlsim.compute.transformer_step import Numerics, pass_s
    from ddlsim.system import catalog
    from ddlsim.workload.transformers.structure import MemoryPass

    dev = catalog.device("v100-sxm2")
    norm = MemoryPass("norm1", 4096 * 1024)
    plain = Numerics("fp16", "fp16")
    cast = Numerics("fp16", "fp16", autocast=True)
    f0, _ = pass_s(norm, 4096, dev, plain, gated=False, norm="layernorm")
    f1, _ = pass_s(norm, 4096, dev, cast, gated=False, norm="layernorm")
    expect = memory_op_s("layernorm", 4096, 1024, dev, "fp32") + 2 * memory_op_s(
        "cast", 4096, 1024, dev, "fp16"
    )
    assert f0 == pytest.approx(memory_op_s("layernorm", 4096, 1024, dev, "fp16"))
    assert f1 == pytest.approx(expect) and f1 > 2 * f0


def test_a_per_tensor_optimizer_passes_over_each_tensor_per_op():
    """TensorFlow's Python AdamW: 17 element-wise ops per variable, 156 bytes a parameter
    (closed form), against the fused step's single pass over the state."""
    from ddlsim.calibration.transformer import PER_TENSOR_OPS, optimizer_step_s
    from ddlsim.compute.gemm import default_gemm_model
    from ddlsim.system import catalog

    dev, m = catalog.device("v100-sxm2"), default_gemm_model()
    n, tensors = 335_000_000, 400
    per = optimizer_step_s(n, tensors, dev, "adamw", True, "per-tensor")
    ops, per_param = PER_TENSOR_OPS["adamw"]
    bandwidth = dev.mem_bandwidth_Bps * m.stream_efficiency
    assert per == pytest.approx(ops * tensors * m.stream_launch_s + n * per_param / bandwidth)
    assert per > 4 * optimizer_step_s(n, tensors, dev, "adamw", True, "fused")
