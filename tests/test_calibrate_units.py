"""ddlsim calibrate without TensorFlow: device matching, trace attribution, progress, anchoring,
transfer, log parsing, and the errors raised before TensorFlow is imported."""

import io
import json
import math
from pathlib import Path

import pytest

from ddlsim.calibration import profile as profile_io
from ddlsim.calibration.store import calibration_path, shipped_dir
from ddlsim.calibration.transfer import anchor_throughput, transfer_device
from ddlsim.cli.main import main
from ddlsim.compute.roofline import layer_time_s
from ddlsim.errors import CalibrationError, ConfigError, UnknownNameError
from ddlsim.system.catalog import device
from ddlsim.tools.calibrate.devices import (
    LocalDevice,
    catalog_match,
    parse_device_flag,
    resolve_target,
    slug,
)
from ddlsim.tools.calibrate.logs import check_log, read_log
from ddlsim.tools.calibrate.profiler import LayerMatcher, OpEvent, StepWindow, _top_level, attribute
from ddlsim.tools.calibrate.progress import Progress, SummaryRow, format_duration, format_table
from ddlsim.workload.zoo import get_model

DATA = Path(__file__).parent / "data"
CPU = LocalDevice("/device:CPU:0", "cpu", 0, "AMD EPYC")


def shipped(gpu="p100-sxm2", model="resnet50", batch=64):
    return calibration_path(shipped_dir(), model, gpu, batch, "fp32")


# -- devices ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("Tesla P100-SXM2-16GB", "p100-sxm2"),
        ("Tesla P100-PCIE-16GB", "p100-pcie"),
        ("Tesla K80", "k80"),
        ("Tesla P40", "p40"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2"),
        ("Tesla V100-PCIE-16GB", "v100-pcie"),
        ("Tesla V100-SXM3-32GB", "v100-sxm3"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA GeForce RTX 3090", None),
        ("Tesla V100S-PCIE-32GB", None),
    ],
)
def test_catalog_match(reported, expected):
    assert catalog_match(reported) == expected


def test_resolve_target_cpu_and_gpu_ids():
    rtx = LocalDevice("/device:GPU:0", "gpu", 0, "NVIDIA GeForce RTX 3090")
    p100 = LocalDevice("/device:GPU:1", "gpu", 1, "Tesla P100-SXM2-16GB")
    assert resolve_target([CPU], device="cpu").catalog_id == "cpu"
    assert resolve_target([CPU, rtx], device="gpu:0").catalog_id == "nvidia-geforce-rtx-3090"
    t = resolve_target([CPU, rtx, p100], gpu="p100")
    assert (t.device, t.catalog_id, t.catalog_id_overridden) == (p100, "p100-sxm2", False)
    t = resolve_target([CPU], device="cpu", catalog_id="v100")
    assert (t.catalog_id, t.catalog_id_overridden) == ("v100-sxm2", True)
    assert slug("  Tesla K80 ") == "tesla-k80"


def test_gpu_absent_names_what_tensorflow_sees():
    k80 = LocalDevice("/device:GPU:0", "gpu", 0, "Tesla K80")
    with pytest.raises(ConfigError) as err:
        resolve_target([CPU, k80], gpu="p100")
    msg = str(err.value)
    assert "no p100-sxm2 GPU" in msg and "CPU:0 (AMD EPYC), GPU:0 (Tesla K80)" in msg
    assert "--gpu k80" in msg and "--device gpu:0" in msg
    with pytest.raises(ConfigError, match=r"CPU-only build.*--device cpu"):
        resolve_target([CPU], gpu="v100", cuda_build=False)
    with pytest.raises(ConfigError, match="sees no device gpu:2"):
        resolve_target([CPU, k80], device="gpu:2")


@pytest.mark.parametrize("bad", ["tpu", "gpu:x", "cpu:0:1", ""])
def test_device_flag_rejected(bad):
    with pytest.raises(ConfigError, match="--device must be cpu or gpu:N"):
        parse_device_flag(bad)


def test_unknown_gpu_lists_valid_names():
    with pytest.raises(UnknownNameError, match=r"valid: .*p100"):
        resolve_target([CPU], gpu="p1000")


# -- profiler attribution -----------------------------------------------------------------------
def test_layer_matcher_scopes_suffixes_and_backward():
    m = LayerMatcher(["conv0", "resnet_v10/conv1", "resnet_v10/add0", "loss"], "ddlsim_r")
    assert m.match("ddlsim_r_1/conv0/conv2d/convolution") == ("conv0", False)
    assert m.match("gradient_tape/ddlsim_r/resnet_v10_1/conv1_2/x/Conv2DBackpropFilter") == (
        "resnet_v10/conv1",
        True,
    )
    assert m.match("ddlsim_r/resnet_v10/add0/add") == ("resnet_v10/add0", False)
    assert m.match("ddlsim_r/resnet_v10/Reshape") == (None, False)  # scope, not a layer
    assert m.match("sgd/Mul_3") == (None, False)
    assert m.match("ddlsim_r/conv10/x") == (None, False)  # conv10 is not conv1 or conv0
    assert m.match("other/conv0/x") == (None, False)  # outside the model


def test_attribute_sums_per_step_and_keeps_the_rest_unattributed():
    ms = 10**9  # ps
    windows = [StepWindow(0, 0, 10 * ms), StepWindow(1, 10 * ms, 20 * ms)]
    events = [
        OpEvent("m/conv0/conv2d/convolution", "Conv2D", 1 * ms, 2 * ms),
        OpEvent("gradient_tape/m/conv0/conv2d/convolution/bp", "Conv2DBackpropFilter", 4 * ms, ms),
        OpEvent("sgd/Mul", "Mul", 6 * ms, ms),
        OpEvent("m/conv0/conv2d/convolution", "Conv2D", 11 * ms, 4 * ms),
        OpEvent("m/conv0/late", "Mul", 25 * ms, ms),  # outside every step: ignored
    ]
    att = attribute(windows, events, ["conv0", "loss"], "m")
    assert att.fwd_s["conv0"] == pytest.approx(3e-3)  # (2 + 4) ms / 2 steps
    assert att.bwd_s["conv0"] == pytest.approx(0.5e-3)
    assert att.fwd_s["loss"] == att.bwd_s["loss"] == 0
    assert att.unattributed_s == pytest.approx(0.5e-3)
    assert att.step_time_s == pytest.approx(10e-3)
    assert att.top_unattributed == [("sgd/Mul", pytest.approx(0.5e-3))]
    with pytest.raises(CalibrationError, match="no 'train' step events"):
        attribute([], events, ["conv0"], "m")


def test_nested_events_on_one_thread_count_once():
    outer = OpEvent("a/x", "Foo", 0, 100)
    inner = OpEvent("a/y", "Bar", 10, 20)
    after = OpEvent("a/z", "Baz", 100, 5)
    assert _top_level([inner, after, outer]) == [outer, after]


# -- progress ------------------------------------------------------------------------------------
def test_progress_lines_show_elapsed_and_remaining():
    now = [0.0]
    stream = io.StringIO()
    p = Progress([1, 3], stream, clock=lambda: now[0])
    p.show("alexnet b32 fp32")
    now[0] = 10.0
    p.advance()
    p.show("vgg16 b32 fp32")
    now[0] = 40.0
    p.advance()
    p.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("calibrate [------------------------] 0/2 alexnet b32 fp32")
    assert "remaining ?" in lines[0]
    assert "1/2 vgg16 b32 fp32  elapsed 0:10  remaining ~0:30" in lines[1]
    assert "2/2 done  elapsed 0:40  remaining 0:00" in lines[2]
    assert format_duration(3723) == "1:02:03"


def test_summary_table_columns():
    row = SummaryRow("resnet50", 64, "fp32", "p100-sxm2", "tf-profiler", 0.25, 0.98, "/x.json")
    text = format_table([row])
    head, line = text.splitlines()[:2]
    for col in ("model", "batch", "step ms", "images/s", "sum/step"):
        assert col in head
    assert "250.00" in line and "256.0" in line and "0.980" in line
    assert "wrote /x.json" in text


# -- anchoring, transfer, logs ---------------------------------------------------------------------
def test_anchor_rescales_to_throughput_and_says_so():
    base = profile_io.load(shipped())
    anchored = anchor_throughput(base, 250.0, "--anchor-throughput")
    assert anchored.images_per_sec == pytest.approx(250.0)
    ratio = anchored.layers[3].bwd_time_s / base.layers[3].bwd_time_s
    assert ratio == pytest.approx(anchored.step_time_s / base.step_time_s)
    prov = anchored.provenance
    assert prov["method"] == "throughput-anchored" and prov["images_per_sec"] == 250.0
    assert prov["base"]["method"] == base.provenance["method"]
    with pytest.raises(ConfigError, match="anchor throughput"):
        anchor_throughput(base, 0.0, "x")


def test_transfer_uses_per_layer_roofline_ratios():
    base = profile_io.load(shipped())
    moved = transfer_device(base, "v100")
    spec, p100, v100 = get_model("resnet50"), device("p100"), device("v100")
    for layer, a, b in zip(spec.layers, base.layers, moved.layers, strict=True):
        f0, b0 = layer_time_s(layer, p100, 64, "fp32")
        f1, b1 = layer_time_s(layer, v100, 64, "fp32")
        assert b.fwd_time_s == pytest.approx(a.fwd_time_s * f1 / f0)
        assert b.bwd_time_s == pytest.approx(a.bwd_time_s * b1 / b0)
        assert b.grad_bytes == a.grad_bytes
    assert moved.device == "v100-sxm2" and moved.step_time_s < base.step_time_s
    assert moved.provenance["method"] == "roofline-device-transfer"
    assert moved.provenance["from_device"] == "p100-sxm2"
    cpu = profile_io.from_dict({**base.to_dict(), "device": {"catalog_id": "cpu"}})
    with pytest.raises(CalibrationError, match="not a catalog GPU"):
        transfer_device(cpu, "v100")


def test_logs_tf_cnn_benchmarks_and_horovod():
    tf_cnn = read_log(DATA / "calibrate_tf_cnn_benchmarks.log")
    assert (tf_cnn.images_per_sec, tf_cnn.model, tf_cnn.batch, tf_cnn.n_gpus) == (
        219.03,
        "resnet50",
        64,
        1,
    )
    assert "line 25: total images/sec: 219.03" in tf_cnn.source
    hvd = read_log(DATA / "calibrate_horovod_synthetic.log")
    assert (hvd.images_per_sec, hvd.model, hvd.batch, hvd.n_gpus) == (211.7, "ResNet50", 64, 1)
    check_log(hvd, "resnet50", 64)
    with pytest.raises(ConfigError, match="not 'vgg16'"):
        check_log(hvd, "vgg16", 64)
    with pytest.raises(ConfigError, match="not 32"):
        check_log(hvd, "resnet50", 32)


def test_log_errors(tmp_path):
    multi = tmp_path / "multi.log"
    multi.write_text("Number of GPUs: 8\nImg/sec per GPU: 200.0 +-1.0\n")
    with pytest.raises(ConfigError, match="8-GPU run"):
        check_log(read_log(multi), "resnet50", 64)
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    with pytest.raises(ConfigError, match="total images/sec: X"):
        read_log(empty)
    with pytest.raises(ConfigError, match="cannot read log"):
        read_log(tmp_path / "missing.log")


# -- CLI: file mode (no TensorFlow) and errors before TensorFlow ------------------------------
def test_cli_from_log_and_transfer_from_a_file(tmp_path, capsys):
    log = DATA / "calibrate_tf_cnn_benchmarks.log"
    argv = ["calibrate", "--calibration", str(shipped()), "--from-log", str(log)]
    assert main([*argv, "--transfer-to", "k80", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    anchored = profile_io.load(tmp_path / "p100-sxm2/resnet50/b64-fp32.json")
    assert anchored.images_per_sec == pytest.approx(219.03)
    assert "total images/sec: 219.03" in anchored.provenance["anchor_source"]
    k80 = profile_io.load(tmp_path / "k80/resnet50/b64-fp32.json")
    assert k80.provenance["method"] == "roofline-device-transfer"
    assert k80.provenance["base"]["method"] == "throughput-anchored"
    assert "throughput-anchored" in out and "roofline-device-transfer" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu", "p1000"], "unknown gpu 'p1000'; valid:"),
        (["--device", "cpu", "--model", "nope"], "unknown model 'nope'"),
        (["--device", "cpu", "--batch", "0"], "--batch must be in 1..4096"),
        (["--device", "cpu", "--precision", "fp8"], "unknown precision 'fp8'"),
        (["--device", "cpu", "--steps", "0"], "--steps"),
        (["--gpu", "p100", "--device", "cpu"], "either --gpu NAME or --device"),
        ([], "say what to profile"),
        (["--device", "cpu", "--anchor-throughput", "100"], "exactly one --model"),
        (["--device", "cpu", "--transfer-to", "x100"], "unknown gpu 'x100'"),
        (["--calibration", "f.json", "--model", "alexnet"], "no --gpu, --device, --model"),
        (["--calibration", "f.json"], "needs --anchor-throughput"),
        (["--device", "tpu"], "--device must be cpu or gpu:N"),
    ],
)
def test_cli_bad_input_one_line_exit_2(argv, message, tmp_path, capsys):
    assert main(["calibrate", *argv, "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddlsim: error: ") and err.count("\n") == 1
    assert message in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_cli_refuses_to_overwrite_a_corrupt_file(tmp_path, capsys):
    dest = tmp_path / "k80/resnet50/b64-fp32.json"
    dest.parent.mkdir(parents=True)
    dest.write_text("{not json")
    argv = ["calibrate", "--calibration", str(shipped()), "--transfer-to", "k80"]
    assert main([*argv, "--output", str(tmp_path)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert dest.read_text() == "{not json"
    dest.write_text(json.dumps({"format": "ddlsim-calibration", "schema_version": 2}))
    assert main([*argv, "--output", str(tmp_path)]) == 2
    assert "schema-1" in capsys.readouterr().err
    assert sorted(p.name for p in dest.parent.iterdir()) == ["b64-fp32.json"]


def test_cli_unwritable_output(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["calibrate", "--calibration", str(shipped()), "--transfer-to", "k80"]
    assert main([*argv, "--output", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert "argument --output" in err and f"{blocker} is not a directory" in err


def test_transfer_round_trip_is_consistent():
    base = profile_io.load(shipped())
    back = transfer_device(transfer_device(base, "v100"), "p100")
    assert back.step_time_s == pytest.approx(base.step_time_s)
    assert math.isclose(back.sum_layers_s, base.sum_layers_s, rel_tol=1e-9)


def test_cli_log_checked_before_profiling(tmp_path, capsys):
    log = DATA / "calibrate_tf_cnn_benchmarks.log"
    argv = ["calibrate", "--device", "cpu", "--model", "vgg16", "--batch", "64"]
    assert main([*argv, "--from-log", str(log), "--output", str(tmp_path)]) == 2
    assert "the log is for model 'resnet50', not 'vgg16'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_ratio_warning_names_the_unattributed_time():
    from ddlsim.tools.calibrate.run import _warnings

    base = profile_io.load(shipped())
    assert _warnings(base) == []
    heavy = profile_io.from_dict({**base.to_dict(), "step_time_s": 2 * base.step_time_s})
    (warning,) = _warnings(heavy)
    assert "resnet50 batch 64: sum of per-layer times / step time = 0.49" in warning
    assert "outside 0.85-1.15" in warning and "unattributed" in warning
