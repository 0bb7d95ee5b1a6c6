"""Tensor cores in the per-layer kernel model (ddlsim.compute.kernels / kernel_routes):
closed forms, alignment, the memory roof at fp16, layouts, the library's split-K, and the fit
against the measured V100 fp16 kernels."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.compute import kernel_routes, kernels
from ddlsim.compute.kernel_check import predict_rows, read_kernel_csv, summarise
from ddlsim.compute.kernels import PASSES, ConvShape, conv_pass_s, conv_routes_s, default_model
from ddlsim.errors import ConfigError
from ddlsim.system import catalog

ROOT = Path(__file__).resolve().parents[1]
FP16 = ROOT / "traces" / "measured" / "kernels" / "deepbench_conv_v100_fp16.csv"
TILE_MACS = 2.0 * 128 * 128  # FLOPs of one reduction step of a 128 x 128 tile


def _mem_Bps(dev) -> float:
    return dev.mem_bandwidth_Bps * default_model().memory_efficiency


def test_large_fp16_gemm_runs_full_waves_on_the_tensor_cores():
    """1568 x 8 tiles of 128 x 128 on 80 SMs: 157 waves of 1024 + overhead tensor-core steps
    at the tensor-core peak (splitting the reduction would only add waves)."""
    v100, m = catalog.device("v100"), default_model()
    shape = ConvShape(64, 56, 56, 1024, 1024, 1, 1)
    per_sm = v100.peak_fp16_flops / v100.sm_count
    wave_s = TILE_MACS * (1024 + m.tc_tile_overhead_steps) / (per_sm * m.tc_fwd_efficiency)
    assert conv_pass_s(shape, "fwd", v100, "amp") == pytest.approx(
        157 * wave_s + m.cudnn7_call_overhead_s
    )


def test_the_data_gradient_does_not_split_and_the_forward_does():
    """cuDNN 7.6's tensor-core kernels split the reduction of a forward pass, not of a data
    gradient: 16 tiles of a 7x7x512 -> 512 1x1 data gradient run one unsplit wave."""
    v100, m = catalog.device("v100"), default_model()
    shape = ConvShape(8, 7, 7, 512, 512, 1, 1)
    per_sm = v100.peak_fp16_flops / v100.sm_count
    one_wave = TILE_MACS * (512 + m.tc_tile_overhead_steps) / (per_sm * m.tc_bwd_data_efficiency)
    routes = conv_routes_s(shape, "bwd_data", v100, "amp")
    assert routes["tensor"] == pytest.approx(one_wave + m.cudnn7_call_overhead_s)
    gpu = kernels._gpu(v100, "amp")
    args = (gpu, gpu.tensor_flops, m.tc_fwd_efficiency, m.tc_tile_overhead_steps)
    args = (*args, m.memory_efficiency, 392, 512, 512)
    widths = kernel_routes.TC_TILE_COLS
    split = kernel_routes.gemm_s(*args, split=True, widths=widths)
    assert split < kernel_routes.gemm_s(*args, split=False, widths=widths)
    assert conv_routes_s(shape, "fwd", v100, "amp")["tensor"] == pytest.approx(
        split + m.cudnn7_call_overhead_s
    )


def test_fp16_layers_sit_on_the_memory_roof():
    """A 1x1 64 -> 64 convolution of 112x112 images at fp16 moves 2 bytes per element of x, y
    and w once: DeepBench's V100 took 71 us for 16 images; the model is the roof plus the call."""
    v100, m = catalog.device("v100"), default_model()
    shape = ConvShape(16, 112, 112, 64, 64, 1, 1)
    elems = 2 * 16 * 64 * 112 * 112 + 64 * 64
    expected = 2 * elems / _mem_Bps(v100) + m.cudnn7_call_overhead_s
    assert conv_pass_s(shape, "fwd", v100, "amp") == pytest.approx(expected)
    assert 1e3 * expected == pytest.approx(0.071, rel=0.15)  # measured: 0.071 ms


def test_unaligned_channels_are_padded_or_run_on_the_cuda_cores():
    """3 input channels at fp16: the tensor-core route converts x and w to 8 padded channels
    (read 3, write 8 per pixel and tap) and then costs what 8 channels cost; the CUDA-core
    route stays a candidate and the faster one is taken."""
    v100 = catalog.device("v100")
    three = ConvShape(16, 56, 56, 3, 64, 3, 3, 1, 1)
    eight = replace(three, in_c=8)
    r3, r8 = (conv_routes_s(s, "fwd", v100, "amp") for s in (three, eight))
    convert = 2 * (16 * 56 * 56 * (3 + 8) + 9 * 64 * (3 + 8)) / _mem_Bps(v100)
    assert r3["tensor"] == pytest.approx(r8["tensor"] + convert)
    assert conv_pass_s(three, "fwd", v100, "amp") == min(r3.values())
    # TF32 loads 4-byte elements: 4 channels are aligned there, not at fp16
    assert kernel_routes.conversion_bytes(replace(three, in_c=4), "fwd", ("nchw",), "nchw", 4) == 0
    assert kernel_routes.conversion_bytes(replace(three, in_c=4), "fwd", ("nchw",), "nchw", 8) > 0


def test_layout_conversions_are_memory_traffic():
    """cuDNN 6's CUDA-core kernels read NCHW: NHWC tensors are converted first (x and the 3x3
    filter read and written once) and the output back after; cuDNN 7.6's tensor-core kernels
    read both layouts (cuDNN 8's NHWC only: tests/test_stack.py)."""
    p100, v100 = catalog.device("p100"), catalog.device("v100")
    shape = ConvShape(16, 28, 28, 256, 256, 3, 3, 1, 1)
    nchw, nhwc = (conv_pass_s(shape, "fwd", p100, layout=lay) for lay in ("nchw", "nhwc"))
    # x and the filter transposed before the pass, the output y after it
    moved = 16 * 28 * 28 * 2 * 256 + 9 * 256 * 2 * 256 + 2 * 16 * 28 * 28 * 256
    assert nhwc - nchw == pytest.approx(4 * moved / _mem_Bps(p100))
    tc = [
        conv_routes_s(shape, "fwd", v100, "amp", layout=lay)["tensor"] for lay in ("nchw", "nhwc")
    ]
    assert tc[0] == tc[1]
    # a fully connected layer has one pixel: both layouts are the same bytes
    fc = ConvShape(64, 1, 1, 2048, 1000, 1, 1)
    assert conv_pass_s(fc, "fwd", p100, layout="nhwc") == conv_pass_s(fc, "fwd", p100)


@pytest.mark.parametrize(
    "gpu, precision, tf32, families",
    [
        ("p100", "fp32", True, {"cuda"}),
        ("p100", "amp", True, {"cuda"}),  # packed fp16, no tensor cores
        ("v100", "fp32", True, {"cuda"}),  # Volta has no TF32
        ("v100", "amp", True, {"cuda", "tensor"}),
        ("a100", "fp32", True, {"cuda", "tensor"}),
        ("a100", "fp32", False, {"cuda"}),
        ("h100-pcie", "amp", True, {"cuda", "tensor"}),
        ("a10", "fp32", True, {"cuda", "tensor"}),
    ],
)
def test_tensor_cores_only_where_the_gpu_has_them(gpu, precision, tf32, families):
    shape = ConvShape(8, 14, 14, 64, 64, 3, 3, 1, 1)
    dev = catalog.device(gpu)
    assert set(conv_routes_s(shape, "fwd", dev, precision, tf32=tf32)) == families
    prov = kernels.provenance(dev if tf32 else kernels.without_tf32(dev), precision)
    expected = {"cuda_core"} | ({"tensor_core"} if "tensor" in families else set())
    assert set(prov["kernels"]) == expected
    assert prov["library"]["id"] == kernels.default_library(dev)
    if "tensor" in families:
        assert prov["library"]["library"] == "cuDNN 7.6.2"
        assert prov["kernels"]["tensor_core"]["coefficients_from"].endswith("v100_fp16.csv")


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 64),
    hw=st.sampled_from([7, 14, 28, 56]),
    c=st.sampled_from([3, 16, 64, 256, 1024]),
    k=st.sampled_from([16, 64, 512]),
    f=st.sampled_from([1, 3, 5]),
    pass_=st.sampled_from(PASSES),
    gpu=st.sampled_from([("v100", "amp"), ("a100", "fp32"), ("h100", "amp")]),
)
def test_more_images_never_take_less_time_on_tensor_cores(n, hw, c, k, f, pass_, gpu):
    dev, precision = catalog.device(gpu[0]), gpu[1]
    small = ConvShape(n, hw, hw, c, k, f, f, f // 2, f // 2)
    big = replace(small, batch=2 * n)
    t_big = conv_pass_s(big, pass_, dev, precision)
    assert t_big >= conv_pass_s(small, pass_, dev, precision) * (1 - 1e-12)
    faster = replace(dev, peak_fp16_flops=2 * dev.peak_fp16_flops, mem_bandwidth_Bps=2e13)
    faster = replace(faster, peak_tf32_flops=faster.peak_tf32_flops and 2 * dev.peak_tf32_flops)
    assert conv_pass_s(big, pass_, faster, precision) <= t_big


def test_the_libraries_the_model_file_describes_are_the_code_s():
    doc = kernels.model_document()
    for key, lib in kernel_routes.LIBRARIES.items():
        entry = doc["libraries"][key]
        assert (entry["library"], entry["tensor_cores"]) == (lib.name, lib.tensor_cores)
        assert (entry["split_k"], entry["call_overhead"]) == (list(lib.split_k), lib.call_overhead)
        assert lib.call_overhead in doc["coefficients"]
    for family, units in (("cuda_core", "cuda"), ("tensor_core", "tensor")):
        native = doc["kernel_units"][family]["native_layouts"]
        assert native == list(kernel_routes.NATIVE_LAYOUTS[units])
    tc = doc["kernel_units"]["tensor_core"]
    assert tc["tile_widths"] == list(kernel_routes.TC_TILE_COLS)
    assert tc["channel_alignment_bytes"] == kernel_routes.TC_ALIGN_BYTES
    assert tc["k_slice_bytes"] == kernel_routes.TC_K_SLICE_BYTES


def test_the_library_is_an_input():
    """cuDNN 7.6 is the default from Volta on; cuDNN 6 on a V100 has no tensor-core kernels and
    no forward split-K, and pays its own call cost."""
    v100, p100 = catalog.device("v100"), catalog.device("p100")
    assert (kernels.default_library(v100), kernels.default_library(p100)) == (
        "cudnn-7.6",
        "cudnn-6.0",
    )
    shape = ConvShape(8, 14, 14, 64, 64, 3, 3, 1, 1)
    assert set(conv_routes_s(shape, "fwd", v100, "amp", library="cudnn-6.0")) == {"cuda"}
    m, few_tiles = default_model(), ConvShape(8, 7, 7, 512, 512, 1, 1)  # 392 x 512: 16 tiles
    v6, v7 = (
        conv_routes_s(few_tiles, "fwd", v100, library=lib)["cuda"]
        for lib in ("cudnn-6.0", "cudnn-7.6")
    )
    assert v7 - m.cudnn7_call_overhead_s < v6 - m.call_overhead_s  # cuDNN 7 splits the forward
    with pytest.raises(ConfigError, match="unknown library 'cudnn-9'"):
        conv_pass_s(shape, "fwd", v100, library="cudnn-9")


@pytest.fixture(scope="module")
def v100_summary():
    rows, skipped, n = read_kernel_csv(FP16)
    assert n == 94 and len(rows) == 94 and len(skipped) == 10
    assert {r.math for r in rows} == {"fp16"} and {r.device.id for r in rows} == {"v100-sxm2"}
    return summarise(predict_rows(rows))


def _cell(summary, pass_, shapes):
    return next(s for s in summary if (s["pass"], s["shapes"]) == (pass_, shapes))


def test_v100_fp16_kernels_are_predicted_within_their_targets(v100_summary):
    """Fitted on this file: forward and data gradient within 20% on every shape, unbiased;
    the weight gradient's all-shape MAPE carries the rows cuDNN 7.6 ran on kernels no route of
    the model describes (1-channel and 3-channel inputs, a padded 1x1, 7x7x512 -> 512 1x1):
    docs/design.md."""
    for pass_ in ("fwd", "bwd_data"):
        assert _cell(v100_summary, pass_, "all")["mape"] <= 0.20
    assert _cell(v100_summary, "bwd_filter", "all")["mape"] <= 0.27
    assert _cell(v100_summary, "bwd_filter", "vision")["mape"] <= 0.22
    for pass_ in PASSES:
        assert 0.9 <= _cell(v100_summary, pass_, "vision")["median_ratio"] <= 1.1
