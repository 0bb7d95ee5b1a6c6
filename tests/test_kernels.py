"""The per-layer kernel model (ddlsim.compute.kernels) and ``ddlsim kernels`` against measured
cuDNN convolutions (traces/measured/kernels/)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.cli.main import main
from ddlsim.compute import kernel_routes, kernels
from ddlsim.compute.kernel_check import (
    predict_rows,
    read_kernel_csv,
    summarise,
    summarise_by_filter,
)
from ddlsim.compute.kernels import PASSES, ConvShape, conv_pass_s, default_model
from ddlsim.compute.passes import passes as elementwise_passes
from ddlsim.compute.roofline import DEFAULT_PARAMS, conv_shape, layer_time_s, memory_Bps
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.workload.zoo import get_model

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "traces" / "measured" / "kernels" / "deepbench_conv_fp32.csv"
KERNELS_FP16 = ROOT / "traces" / "measured" / "kernels" / "deepbench_conv_v100_fp16.csv"
HEADER = (
    "gpu,in_w,in_h,in_c,batch,out_k,filter_h,filter_w,pad_h,pad_w,stride_h,stride_w,"
    "fwd_ms,bwd_data_ms,bwd_filter_ms"
)
ROW_KEYS = [
    "gpu", "in_w", "in_h", "in_c", "batch", "out_k", "filter_h", "filter_w", "pad_h", "pad_w",
    "stride_h", "stride_w", "pass", "measured_ms", "predicted_ms", "rel_error", "math",
]  # fmt: skip


def run_cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- the shape -------------------------------------------------------------------------------
def test_conv_shape_output_size_and_flops():
    s = ConvShape(16, 224, 224, 3, 64, 7, 7, 3, 3, 2, 2)
    assert (s.out_h, s.out_w) == (112, 112)
    assert s.flops == 2 * 16 * 64 * 112 * 112 * 3 * 49


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch": 0}, "batch must be an integer >= 1"),
        ({"pad_h": -1}, "pad_h must be an integer >= 0"),
        ({"stride_w": 1.5}, "stride_w must be an integer"),
        ({"filter_h": 9}, "does not fit"),
    ],
)
def test_conv_shape_refuses_bad_values(kwargs, match):
    base = {"batch": 8, "in_h": 7, "in_w": 7, "in_c": 4, "out_k": 4, "filter_h": 3, "filter_w": 3}
    with pytest.raises(ConfigError, match=match):
        ConvShape(**{**base, **kwargs})


# -- closed forms and bounds -------------------------------------------------------------------
def test_large_gemm_runs_full_waves_at_the_fitted_efficiency():
    """A 1x1 convolution whose GEMM is 1568 x 8 tiles of 128 x 128 on 56 SMs: exactly 224 waves
    of one tile per SM, each 1024 + overhead steps of 128 x 128 multiply-adds."""
    p100, m = catalog.device("p100"), default_model()
    shape = ConvShape(64, 56, 56, 1024, 1024, 1, 1)
    per_sm = p100.peak_fp32_flops / p100.sm_count
    wave_s = 2 * 128 * 128 * (1024 + m.tile_overhead_steps) / (per_sm * m.fwd_efficiency)
    assert conv_pass_s(shape, "fwd", p100) == pytest.approx(224 * wave_s + m.call_overhead_s)


def test_a_tiny_convolution_costs_one_wave_and_the_call():
    p100, m = catalog.device("p100"), default_model()
    shape = ConvShape(1, 4, 4, 8, 8, 1, 1)
    per_sm = p100.peak_fp32_flops / p100.sm_count
    one_wave = 2 * 128 * 128 * (8 + m.tile_overhead_steps) / (per_sm * m.fwd_efficiency)
    assert conv_pass_s(shape, "fwd", p100) == pytest.approx(one_wave + m.call_overhead_s)


def test_never_faster_than_the_memory_roof_or_the_call():
    p100, m = catalog.device("p100"), default_model()
    shape = ConvShape(32, 224, 224, 3, 8, 1, 1)
    nbytes = 4 * (32 * 3 * 224 * 224 + 32 * 8 * 224 * 224 + 8 * 3)
    for pass_ in PASSES:
        t = conv_pass_s(shape, pass_, p100)
        assert t >= nbytes / (p100.mem_bandwidth_Bps * m.memory_efficiency) + m.call_overhead_s


def test_winograd_is_used_for_3x3_stride_1_only_in_fp32():
    """fp32 3x3 stride 1 beats its direct GEMM by far (F(4x4,3x3) saves 4x the multiplies)."""
    p100, m = catalog.device("p100"), default_model()
    s1 = ConvShape(32, 28, 28, 256, 256, 3, 3, 1, 1)
    gpu = kernels._gpu(p100, "fp32")
    args = (gpu, gpu.cuda_flops, m.fwd_efficiency, m.tile_overhead_steps, m.memory_efficiency)
    direct = kernel_routes.gemm_s(*args, 32 * 28 * 28, 256, 256 * 9)
    assert conv_pass_s(s1, "fwd", p100) < 0.6 * direct


def test_fp32_runs_on_tf32_tensor_cores_where_the_gpu_has_them():
    """A100/H100 fp32 GEMMs run at the TF32 peak with the tensor-core coefficients (the
    frameworks' default); tf32=False is the CUDA-core fp32 of NVIDIA_TF32_OVERRIDE=0; a P100
    has no TF32."""
    model = default_model()
    big = ConvShape(64, 56, 56, 256, 256, 1, 1)  # 1x1: GEMM only, compute bound
    for gpu in ("a100", "h100"):
        dev = catalog.device(gpu)
        on, off = (conv_pass_s(big, "fwd", dev, tf32=flag) for flag in (True, False))
        strict = kernels._gpu(kernels.without_tf32(dev), "fp32")
        assert not strict.tensor_flops
        assert off == pytest.approx(kernels._conv_s(big, "fwd", strict, model, "nchw"))
        # the TF32 route: at most the tensor-core rate, and well above CUDA-core fp32
        assert on >= big.flops / (dev.peak_tf32_flops * model.tc_fwd_efficiency)
        assert on < off / 2
    p100 = catalog.device("p100")
    assert conv_pass_s(big, "fwd", p100, tf32=True) == conv_pass_s(big, "fwd", p100, tf32=False)


def test_winograd_stays_on_the_cuda_cores_under_tf32():
    """A 3x3 stride-1 convolution takes the faster of TF32 GEMM and CUDA-core Winograd."""
    a100 = catalog.device("a100")
    s1 = ConvShape(32, 28, 28, 256, 256, 3, 3, 1, 1)
    on, off = (conv_pass_s(s1, "fwd", a100, tf32=flag) for flag in (True, False))
    assert on <= off  # Winograd at fp32 is still one of the routes
    gpu = kernels._gpu(a100, "fp32")
    assert gpu.tensor_flops == a100.peak_tf32_flops
    assert gpu.winograd_flops == a100.peak_fp32_flops
    # amp: the CUDA-core routes (Winograd included) compute in fp32 on fp16 data
    assert kernels._gpu(a100, "amp").winograd_flops == a100.peak_fp32_flops


def test_strided_data_gradient_visits_every_input_pixel():
    """A 1x1 stride-2 data gradient by zero-insertion costs the stride-1 one (same input, same
    channels), unless the col2im route over the output pixels is cheaper."""
    p100 = catalog.device("p100")
    s1 = conv_pass_s(ConvShape(16, 56, 56, 256, 512, 1, 1), "bwd_data", p100)
    s2 = conv_pass_s(ConvShape(16, 56, 56, 256, 512, 1, 1, 0, 0, 2, 2), "bwd_data", p100)
    assert s2 <= s1 + 1e-12
    assert s2 > conv_pass_s(ConvShape(16, 56, 56, 256, 512, 1, 1, 0, 0, 2, 2), "fwd", p100)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 64),
    hw=st.sampled_from([7, 14, 28, 56]),
    c=st.sampled_from([3, 64, 256, 1024]),
    k=st.sampled_from([16, 64, 512]),
    f=st.sampled_from([1, 3, 5]),
    pass_=st.sampled_from(PASSES),
)
def test_more_images_never_take_less_time(n, hw, c, k, f, pass_):
    p100 = catalog.device("p100")
    small = ConvShape(n, hw, hw, c, k, f, f, f // 2, f // 2)
    big = replace(small, batch=2 * n)
    assert conv_pass_s(big, pass_, p100) >= conv_pass_s(small, pass_, p100) * (1 - 1e-12)


def test_a_faster_gpu_of_the_same_shape_is_not_slower():
    p100 = catalog.device("p100")
    fast = replace(p100, peak_fp32_flops=2 * p100.peak_fp32_flops, mem_bandwidth_Bps=2e12)
    shape = ConvShape(32, 28, 28, 256, 256, 3, 3, 1, 1)
    for pass_ in PASSES:
        assert conv_pass_s(shape, pass_, fast) < conv_pass_s(shape, pass_, p100)


def test_amp_needs_a_fast_fp16_path_and_cpus_have_no_kernel_model():
    shape = ConvShape(8, 14, 14, 64, 64, 3, 3, 1, 1)
    with pytest.raises(ConfigError, match="no fast fp16 path"):
        conv_pass_s(shape, "fwd", catalog.device("k80"), "amp")
    with pytest.raises(ConfigError, match="unknown layout 'chwn'"):
        conv_pass_s(shape, "fwd", catalog.device("v100"), "amp", layout="chwn")
    with pytest.raises(ConfigError, match="unknown precision 'fp8'"):
        conv_pass_s(shape, "fwd", catalog.device("v100"), "fp8")
    with pytest.raises(ConfigError, match="no SM count"):
        conv_pass_s(shape, "fwd", catalog.device("epyc-zen4-core"))
    assert conv_pass_s(shape, "fwd", catalog.device("v100"), "amp") < conv_pass_s(
        shape, "fwd", catalog.device("v100")
    )


# -- the per-layer model uses it -----------------------------------------------------------------
def test_roofline_times_conv_layers_with_the_kernel_model():
    model, p100 = get_model("resnet50"), catalog.device("p100")
    first, later = model.layers[0], model.layers[2]
    assert conv_shape(first, 64) == ConvShape(64, 224, 224, 3, 64, 7, 7, 3, 3, 2, 2)
    for layer, passes in ((first, ("bwd_filter",)), (later, ("bwd_data", "bwd_filter"))):
        shape = conv_shape(layer, 64)
        fwd, bwd = layer_time_s(layer, p100, 64)
        f_k = conv_pass_s(shape, "fwd", p100)
        b_k = sum(conv_pass_s(shape, p, p100) for p in passes)
        # + batch norm and ReLU: passes over the output at the memory roof (TensorFlow's
        # default stack at fp32: unfused, 3 + 2 forward, 5 + 3 backward), 2 kernels forward
        pf, pb = elementwise_passes(layer, "none")
        assert (pf, pb) == ((5, 8) if layer.activation == "relu" else (3, 5))
        out_s = 64 * layer.output_elems * 4 / memory_Bps(p100)
        assert memory_Bps(p100) == p100.mem_bandwidth_Bps * default_model().memory_efficiency
        launch_s = 2 * DEFAULT_PARAMS.kernel_overhead_s
        assert fwd == pytest.approx(f_k + pf * out_s + launch_s)
        assert bwd == pytest.approx(b_k + pb * out_s + 2 * launch_s)


def test_every_zoo_conv_maps_to_a_shape_of_its_own_output_size():
    for name in ("inception3", "inception4", "resnet50_v1.5", "alexnet", "googlenet"):
        for layer in get_model(name).layers:
            if layer.kind.value == "conv":
                s = conv_shape(layer, 1)
                assert (s.out_h, s.out_w, s.out_k) == layer.output_shape


# -- against the measured kernels ------------------------------------------------------------------
@pytest.fixture(scope="module")
def deepbench():
    rows, skipped, n = read_kernel_csv(KERNELS)
    return rows, skipped, n, summarise(predict_rows(rows))


def _cell(summary, gpu, pass_, shapes):
    return next(s for s in summary if (s["gpu"], s["pass"], s["shapes"]) == (gpu, pass_, shapes))


def test_p100_fit_meets_its_target_on_vision_shapes(deepbench):
    *_, summary = deepbench
    for pass_ in PASSES:
        cell = _cell(summary, "p100", pass_, "vision")
        assert cell["n"] == 74 and cell["mape"] <= 0.20
        assert 0.9 <= cell["median_ratio"] <= 1.1  # unbiased on the GPU it was fitted on


def test_shipped_check_table_is_what_the_model_gives(deepbench):
    """kernel_model.json records the fit's MAPE per GPU and pass of both kernel files (the
    fp16 file's GPU as "v100 fp16"); the code reproduces it."""
    *_, summary = deepbench
    fp16_rows, _, _ = read_kernel_csv(KERNELS_FP16)
    summary = summary + summarise(predict_rows(fp16_rows))
    check = kernels.model_document()["check"]["fit_mape"]
    assert set(check) == {"p100", "titanx-pascal", "m40", "titanx-maxwell", "v100 fp16"}
    for label, cells in check.items():
        gpu, _, math_ = label.partition(" ")
        for key, mape in cells.items():
            pass_, _, vision = key.partition(" ")
            cell = next(
                s for s in summary
                if (s["gpu"], s["math"], s["pass"], s["shapes"])
                == (gpu, math_ or "fp32", pass_, "vision" if vision else "all")
            )  # fmt: skip
            assert cell["mape"] == pytest.approx(mape, abs=6e-5)


def test_the_file_reads_whole_and_skips_only_empty_cells(deepbench):
    rows, skipped, n, _ = deepbench
    assert n == 376 and len(rows) == 376
    assert len(skipped) == 29 and all(s.reason.endswith("is empty") for s in skipped)
    assert {r.device.id for r in rows} == {"p100-sxm2", "titanx-pascal", "m40", "titanx-maxwell"}


def test_every_coefficient_says_what_it_stands_for():
    doc = kernels.model_document()
    assert set(doc["coefficients"]) == set(default_model().as_dict())
    for entry in doc["coefficients"].values():
        assert isinstance(entry["fitted"], bool) and len(entry["meaning"]) > 40
    files = doc["fitted_on"]["files"]
    assert "p100" in files["cuda_core"]["gpu"] and "v100" in files["tensor_core"]["gpu"]
    for family, library in (("cuda_core", "cudnn-6.0"), ("tensor_core", "cudnn-7.6")):
        assert (ROOT / files[family]["file"]).is_file()
        assert files[family]["library"].startswith(doc["libraries"][library]["library"])


# -- the command ---------------------------------------------------------------------------------
def test_kernels_json_rows_and_summary(capsys):
    code, out, err = run_cli(["kernels", str(KERNELS), "--gpu", "m40", "--json"], capsys)
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert {r["gpu"] for r in doc["rows"]} == {"m40"}
    assert len(doc["rows"]) == 94 * 3 - 10
    for row in doc["rows"][:5]:
        assert list(row) == ROW_KEYS
        assert row["rel_error"] == pytest.approx(
            (row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
        )
    summary = doc["summary"]
    assert {s["gpu"] for s in summary["by_gpu_pass"]} == {"m40"}
    by_filter = summary["by_gpu_pass_filter"]
    assert {s["gpu"] for s in by_filter} == {"m40"}
    assert {s["filter"] for s in by_filter} == {"1x1", "3x3", "5x5", "7x7"}
    assert len(summary["skipped"]) == 10
    assert summary["model"]["coefficients"]["fwd_efficiency"] == default_model().fwd_efficiency


def test_kernels_text_report(capsys):
    code, out, _ = run_cli(["kernels", str(KERNELS), "--gpu", "p100-sxm2"], capsys)
    assert code == 0
    assert "p100            bwd_filter vision    74" in out
    # every pass, then 8 summary lines, then 3 of the per-filter table
    assert out.count("\np100 ") == 94 * 3 + 8 + 3
    assert "by filter size, vision shapes" in out


def test_by_filter_breakdown_partitions_the_vision_shapes(deepbench):
    rows, *_, summary = deepbench
    results = predict_rows(rows)
    by_filter = summarise_by_filter(results)
    for gpu in ("p100", "m40"):
        for pass_ in PASSES:
            cells = [c for c in by_filter if (c["gpu"], c["pass"]) == (gpu, pass_)]
            vision = _cell(summary, gpu, pass_, "vision")
            assert sum(c["n"] for c in cells) == vision["n"]
            weighted = sum(c["n"] * c["mape"] for c in cells) / vision["n"]
            assert weighted == pytest.approx(vision["mape"])
    p100_1x1 = next(
        c for c in by_filter if (c["gpu"], c["pass"], c["filter"]) == ("p100", "fwd", "1x1")
    )
    assert p100_1x1["n"] == 45


def test_bad_rows_are_skipped_with_a_reason(tmp_path, capsys):
    path = tmp_path / "k.csv"
    path.write_text(
        HEADER + "\n"
        "p100,14,14,256,8,256,3,3,1,1,1,1,0.168,0.166,0.186\n"
        "rtx9090,14,14,256,8,256,3,3,1,1,1,1,0.1,0.1,0.1\n"
        "p100,14,14,two,8,256,3,3,1,1,1,1,0.1,0.1,0.1\n"
        "p100,14,14,256,8,256,31,31,1,1,1,1,0.1,0.1,0.1\n"
        "p100,14,14,256,8,256,3,3,1,1,1,1,-1,,abc\n"
        "epyc-zen4-core,14,14,256,8,256,3,3,1,1,1,1,1,1,1\n"
    )
    code, out, _ = run_cli(["kernels", str(path), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert len(doc["rows"]) == 3
    reasons = {(s["line"], s["pass"]): s["reason"] for s in doc["summary"]["skipped"]}
    assert "unknown GPU 'rtx9090'" in reasons[(3, None)]
    assert "in_c 'two' is not an integer" in reasons[(4, None)]
    assert "does not fit" in reasons[(5, None)]
    assert reasons[(6, "fwd")] == "fwd_ms '-1' is not a positive number"
    assert reasons[(6, "bwd_data")] == "bwd_data_ms is empty"
    assert reasons[(6, "bwd_filter")] == "bwd_filter_ms 'abc' is not a positive number"
    assert "not a GPU" in reasons[(7, None)]


def test_the_math_column_picks_the_arithmetic(tmp_path, capsys):
    """fp32 (TF32 off) / tf32 / fp16 rows are predicted in their arithmetic; a GPU that cannot
    run that arithmetic (fp16 on a K80; tensor-core math on a GPU without tensor cores, TF32 on
    a V100), or an unknown value, skips the row with the reason: never timed on another path."""
    path = tmp_path / "k.csv"
    shape = "14,14,256,8,256,1,1,0,0,1,1,0.1,0.1,0.1"
    path.write_text(
        HEADER + ",math\n"
        f"a100,{shape},fp32\n"
        f"a100,{shape},tf32\n"
        f"a100,{shape},fp16\n"
        f"p100,{shape},tf32\n"
        f"p40,{shape},fp16\n"
        f"a100,{shape},bf17\n"
        f"a100,{shape},\n"
        f"k80,{shape},fp16\n"
        f"p100,{shape},fp16\n"
        f"v100,{shape},tf32\n"
        f"titanx-maxwell,{shape},fp16\n"
    )
    code, out, _ = run_cli(["kernels", str(path), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    fwd = {(r["gpu"], r["math"]): r["predicted_ms"] for r in doc["rows"] if r["pass"] == "fwd"}
    a100 = catalog.device("a100")
    s = ConvShape(8, 14, 14, 256, 256, 1, 1)
    assert fwd[("a100", "fp32")] == pytest.approx(1e3 * conv_pass_s(s, "fwd", a100, tf32=False))
    assert fwd[("a100", "tf32")] == pytest.approx(1e3 * conv_pass_s(s, "fwd", a100))
    assert fwd[("a100", "fp16")] == pytest.approx(1e3 * conv_pass_s(s, "fwd", a100, "amp"))
    assert len(doc["rows"]) == 4 * 3  # the empty cell is fp32
    reasons = {s["line"]: s["reason"] for s in doc["summary"]["skipped"]}
    assert reasons == {
        5: "p100-sxm2 has no TF32 tensor cores",
        6: "p40 has no fast fp16 path",
        7: "math 'bf17' is not one of fp32, tf32, fp16",
        9: "k80 has no fast fp16 path",
        10: "p100-sxm2 has no tensor cores, which math fp16 runs on",
        11: "v100-sxm2 has no TF32 tensor cores",
        12: "titanx-maxwell has no fast fp16 path",
    }
    maths = {(s["gpu"], s["math"]) for s in doc["summary"]["by_gpu_pass"]}
    assert maths == {("a100", "fp32"), ("a100", "tf32"), ("a100", "fp16")}


@pytest.mark.parametrize(
    "content, argv_extra, message",
    [
        (
            HEADER.replace(",bwd_filter_ms", "") + "\np100,1,1,1,1,1,1,1,0,0,1,1,1,1\n",
            [],
            "missing column(s) bwd_filter_ms",
        ),
        ("", [], "missing column(s) gpu"),
        (HEADER + "\nnope,7,7,8,1,8,1,1,0,0,1,1,1,1,1\n", [], "no usable row"),
        (HEADER + "\np100,7,7,8,1,8,1,1,0,0,1,1,1,1,1\n", ["--gpu", "m40"], "no usable row of GPU"),
        (HEADER + "\np100,7,7,8,1,8,1,1,0,0,1,1,1,1,1\n", ["--gpu", "rtx"], "unknown gpu 'rtx'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, argv_extra, message):
    path = tmp_path / "k.csv"
    path.write_text(content)
    code, out, err = run_cli(["kernels", str(path), *argv_extra], capsys)
    assert code == 2 and out == ""
    assert err.startswith("ddlsim: error: ") and err.count("\n") == 1 and message in err


def test_missing_file_is_one_line(tmp_path, capsys):
    code, out, err = run_cli(["kernels", str(tmp_path / "none.csv")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "cannot read kernel file" in err and "not found" in err


def test_plot_is_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "k.png"
    code, _, _ = run_cli(["kernels", str(KERNELS), "--gpu", "p100", "--plot", str(png)], capsys)
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
