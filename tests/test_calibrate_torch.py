"""``ddlsim calibrate --framework torch``: PyTorch models equal to the zoo, the trace attribution,
a real CPU profiling pass, the committed CPU-measured file used by predict, and the error paths
(PyTorch missing, a CUDA device that is not there)."""

import contextlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddlsim.calibration import profile as profile_io
from ddlsim.cli.main import main
from ddlsim.tools.calibrate.torch_profiler import (
    BACKWARD_EVENT,
    LAYER_EVENT_PREFIX,
    STEP_EVENT,
    Event,
    attribute,
)
from ddlsim.workload.zoo import MODEL_NAMES, get_model

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "tests" / "data" / "calibration_torch_cpu_alexnet_b8-fp32.json"
#: the same kind of CPU measurement recorded under a catalog GPU (``--catalog-id h100``)
MEASURED_AS_H100 = ROOT / "tests" / "data" / "calibration_torch_cpu_as_h100_alexnet_b8-fp32.json"
MODEL, BATCH = "alexnet", 2
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="needs the torch extra (PyTorch)"
)


# -- attribution of a trace (no PyTorch needed) -------------------------------------------------
def _trace(gpu_us: float = 0.0) -> list[Event]:
    """Two layers and an optimizer update in one step, backward on another thread (as on a
    GPU); each op launched kernels of ``gpu_us`` microseconds."""
    return [
        Event(1, STEP_EVENT, 1, 0, 1000),
        Event(2, LAYER_EVENT_PREFIX + "conv0", 1, 10, 110, parent=1),
        Event(3, "aten::conv2d", 1, 12, 100, parent=2, seq=7, device_us=gpu_us),
        Event(4, LAYER_EVENT_PREFIX + "loss", 1, 120, 150, parent=1),
        Event(5, "aten::cross_entropy_loss", 1, 121, 149, parent=4, seq=8, device_us=gpu_us),
        Event(6, BACKWARD_EVENT + "NllLossBackward0", 2, 200, 230, seq=8, fwd_thread=1),
        Event(7, BACKWARD_EVENT + "ConvolutionBackward0", 2, 240, 440, seq=7, fwd_thread=1),
        Event(8, "aten::convolution_backward", 2, 241, 439, parent=7, device_us=2 * gpu_us),
        Event(9, BACKWARD_EVENT + "torch::autograd::AccumulateGrad", 2, 450, 460),
        Event(10, "Optimizer.step#SGD.step", 1, 500, 700, parent=1, device_us=gpu_us),
    ]


def test_cpu_attribution_is_wall_time_by_layer_and_direction():
    att = attribute(_trace(), ["conv0", "loss"], gpu=False)
    assert att.fwd_s == pytest.approx({"conv0": 100e-6, "loss": 30e-6})
    assert att.bwd_s == pytest.approx({"conv0": 200e-6, "loss": 30e-6})
    assert att.unattributed_s == pytest.approx(210e-6)  # optimizer 200 + AccumulateGrad 10
    assert dict(att.top_unattributed) == pytest.approx(
        {"Optimizer.step#SGD.step": 200e-6, "AccumulateGrad": 10e-6}
    )
    assert att.step_times_s == pytest.approx([1000e-6])


def test_gpu_attribution_is_kernel_time_of_the_subtree():
    att = attribute(_trace(gpu_us=50), ["conv0", "loss"], gpu=True)
    assert att.fwd_s == pytest.approx({"conv0": 50e-6, "loss": 50e-6})
    assert att.bwd_s == pytest.approx({"conv0": 100e-6, "loss": 0.0})
    assert att.unattributed_s == pytest.approx(50e-6)


def test_no_step_event_is_a_calibration_error():
    from ddlsim.errors import CalibrationError

    with pytest.raises(CalibrationError, match="no 'ddlsim::step' step events"):
        attribute(_trace()[1:], ["conv0", "loss"], gpu=False)


# -- the committed CPU-measured file -------------------------------------------------------------
def test_committed_file_is_an_honest_cpu_measurement():
    prof = profile_io.load(MEASURED)
    assert prof.device == "cpu" and prof.device_info["kind"] == "cpu"
    prov = prof.provenance
    assert prov["method"] == "torch-profiler" and prov["framework"] == "pytorch"
    assert prov["torch"].startswith("2.13.0") and prov["cuda"] is None
    assert 0.85 <= prov["sum_layers_over_step"] <= 1.15
    assert prov["sum_layers_over_step"] == pytest.approx(prof.sum_layers_s / prof.step_time_s, 1e-3)


def test_predict_uses_the_measured_file_on_an_h100(capsys):
    """A measured file recorded under a catalog GPU is used as measured, like a shipped one
    (here a CPU measurement recorded with --catalog-id h100: the real device stays in it)."""
    import ddlsim

    prof = profile_io.load(MEASURED_AS_H100)
    assert prof.device == "h100" and prof.device_info["kind"] == "cpu"
    assert prof.provenance["framework"] == "pytorch"
    argv = ["predict", "--model", "alexnet", "--batch", "8", "--gpu", "h100"]
    assert main([*argv, "--gpus", "16", "--calibration", str(MEASURED_AS_H100), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["gpu"] == "h100"
    assert doc["single_gpu_images_per_sec"] == pytest.approx(prof.images_per_sec, rel=1e-6)
    p = ddlsim.predict("alexnet", 1, gpu="h100", batch=8, calibration=str(MEASURED_AS_H100))
    assert p.images_per_sec == pytest.approx(prof.images_per_sec, rel=1e-6)


def test_a_cpu_file_is_refused_on_a_gpu_with_the_command_that_records_it(capsys):
    argv = ["predict", "--model", "alexnet", "--batch", "8", "--gpu", "h100"]
    assert main([*argv, "--calibration", str(MEASURED)]) == 2
    assert "--catalog-id" in capsys.readouterr().err


# -- with PyTorch ----------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_torch_model_is_the_zoo_tensor_for_tensor(name):
    import torch

    from ddlsim.tools.calibrate.torch_layers import torch_shape
    from ddlsim.tools.calibrate.torch_models import build_torch_model

    model = build_torch_model(name, device="meta")
    spec = get_model(name)
    ours = model.gradient_tensors()
    assert [(t.name, t.nbytes) for t in ours] == [(t.name, t.nbytes()) for t in spec.tensors]
    for layer in spec.layers:
        owned = [t for t in ours if t.layer == layer.name]
        assert [t.name for t in owned] == [t.name for t in layer.tensors]
        for i, (t, zoo) in enumerate(zip(owned, layer.tensors, strict=True)):
            assert t.shape == torch_shape(zoo, layer.kind, is_kernel=i == 0)
    shapes = {}
    for module in model.layers_:
        module.register_forward_hook(
            lambda m, args, out: shapes.__setitem__(m.zoo_name, tuple(out.shape))
        )
    h, w, c = spec.input_shape
    model(torch.empty(2, c, h, w, device="meta"), torch.zeros(2, dtype=torch.long, device="meta"))
    for layer in spec.layers:  # every activation has the zoo's shape (NCHW)
        out = layer.output_shape
        expected = (2, out[2], out[0], out[1]) if len(out) == 3 else (2, *out)
        assert shapes[layer.name] == (() if layer.kind.value == "loss" else expected)


@needs_torch
def test_same_padding_matches_tensorflow():
    from ddlsim.tools.calibrate.torch_layers import same_padding

    assert same_padding(224, 7, 2, "SAME") == (2, 3)  # one more after, as TensorFlow pads
    assert same_padding(56, 3, 1, "SAME") == (1, 1)
    assert same_padding(35, 3, 2, "VALID") == (0, 0)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """One real PyTorch profiling pass on the CPU through the CLI."""
    out = tmp_path_factory.mktemp("torch-calibration")
    argv = ["calibrate", "--framework", "torch", "--device", "cpu", "--model", MODEL]
    argv += ["--batch", str(BATCH), "--steps", "2", "--warmup-steps", "1", "--output", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    assert code == 0, stderr.getvalue()
    path = out / "cpu" / MODEL / f"b{BATCH}-fp32.json"
    return path, profile_io.load(path), stdout.getvalue()


@needs_torch
def test_pass_times_every_layer_and_explains_the_step(profiled):
    import torch

    path, prof, stdout = profiled
    spec = get_model(MODEL)
    assert [la.name for la in prof.layers] == [la.name for la in spec.layers]
    for la in prof.layers:
        assert la.fwd_time_s > 0 and la.bwd_time_s > 0
    assert [la.grad_bytes for la in prof.layers] == [la.grad_bytes() for la in spec.layers]
    prov = prof.provenance
    assert prov["framework"] == "pytorch" and prov["method"] == "torch-profiler"
    assert prov["torch"] == torch.__version__ and prov["device_name"]
    # PyTorch's defaults: TF32 convolutions on, TF32 matrix products off (Ampere and later)
    assert prov["tf32"] == {"cudnn_convolutions": True, "matmul": False}
    assert 0.9 <= prov["accounted_over_step"] <= 1.1  # layers + unattributed = the step
    assert "Optimizer.step#SGD.step" in prov["top_unattributed_s"]
    assert "torch-profiler" in stdout and str(path) in stdout


@needs_torch
def test_cuda_device_absent_names_what_torch_sees(tmp_path, capsys):
    out = tmp_path
    for flag in (["--gpu", "h100"], ["--device", "gpu:0"]):
        argv = ["calibrate", "--framework", "torch", *flag, "--model", MODEL, "--output", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ddlsim: error: ")
        assert "PyTorch" in err and "it sees: CPU:0 (" in err
        assert list(out.iterdir()) == []


@needs_torch
def test_amp_on_the_cpu_is_refused(tmp_path, capsys):
    argv = ["calibrate", "--framework", "torch", "--device", "cpu", "--precision", "amp"]
    assert main([*argv, "--output", str(tmp_path)]) == 2
    assert "on the CPU use fp32" in capsys.readouterr().err


def test_torch_missing_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    argv = ["calibrate", "--framework", "torch", "--device", "cpu"]
    assert main([*argv, "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -e '.[torch]'" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_predict_never_imports_torch():
    code = (
        "import sys; from ddlsim.cli.main import main; "
        "assert main(['predict', '--model', 'alexnet']) == 0; "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@needs_torch
def test_torch_grouped_conv_and_squeeze_excitation_compute_the_zoo_layers():
    """The modules of a grouped convolution + swish and of squeeze-excitation, against the
    same arithmetic written out with PyTorch's functions."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    from ddlsim.tools.calibrate import torch_layers as tl
    from ddlsim.workload.zoo.builder import NetBuilder

    b = NetBuilder((6, 6, 8))
    b.conv(8, 1, 1)
    b.conv(8, 3, 3, groups=4, bias=False, batch_norm=False, activation="swish")
    b.squeeze_excitation(2, activation="relu")
    _, grouped, se = b.build("t", 0, "", "").layers
    conv = tl.ZooConv(grouped, "cpu", (6, 6), 1, "SAME", "swish")
    assert conv.groups == 4 and tuple(conv.kernel.shape) == (8, 2, 3, 3)
    x = torch.randn(2, 8, 6, 6, generator=torch.Generator().manual_seed(0))
    parts = [
        F.conv2d(x[:, 2 * g : 2 * g + 2], conv.kernel[2 * g : 2 * g + 2], padding=1)
        for g in range(4)
    ]
    ref = torch.cat(parts, dim=1)
    torch.testing.assert_close(conv(x), ref * torch.sigmoid(ref))
    module = tl.ZooSqueezeExcite(se, "cpu", "relu")
    w1, b1, w2, b2 = module.zoo_tensors.values()
    gate = torch.sigmoid(F.relu(x.mean(dim=(2, 3)) @ w1 + b1) @ w2 + b2)
    torch.testing.assert_close(module(x), x * gate[:, :, None, None])


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("name", ["efficientnet-b0", "se-resnext101-32x4d"])
def test_grouped_se_and_swish_models_cpu_pass(name, tmp_path):
    """A real pass of EfficientNet-B0 (depthwise, squeeze-excitation, swish; 5-30 s on 2 shared
    cores) and of SE-ResNeXt (grouped convolutions; 15-80 s)."""
    argv = ["calibrate", "--framework", "torch", "--device", "cpu", "--model", name]
    argv += ["--batch", "2", "--steps", "2", "--warmup-steps", "1", "--output", str(tmp_path)]
    assert main(argv) == 0
    prof = profile_io.load(tmp_path / "cpu" / name / "b2-fp32.json")
    spec = get_model(name)
    assert [la.name for la in prof.layers] == [la.name for la in spec.layers]
    assert all(la.fwd_time_s > 0 and la.bwd_time_s > 0 for la in prof.layers)
    assert [la.grad_bytes for la in prof.layers] == [la.grad_bytes() for la in spec.layers]
    assert 0.9 <= prof.provenance["accounted_over_step"] <= 1.1
