"""ddlsim calibrate with TensorFlow: Keras models equal to the zoo, a real CPU profiling pass
(shared by the tests through one module-scoped fixture), predict consuming its file, and the
error paths that need TensorFlow (GPU absent, missing install, Ctrl-C)."""

import contextlib
import io
import json
import subprocess
import sys
import time

import pytest

tf = pytest.importorskip("tensorflow", reason="needs the calibrate extra (TensorFlow)")

from ddlsim.calibration import profile as profile_io  # noqa: E402
from ddlsim.cli.main import main  # noqa: E402
from ddlsim.tools.calibrate import run as run_mod  # noqa: E402
from ddlsim.workload.zoo import MODEL_NAMES, get_model  # noqa: E402

MODEL, BATCH = "mobilenet", 4  # small: ~5 s for the pass on 2 cores


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """One real profiling pass on the CPU through the CLI, recorded under the p100 id so that
    predict --gpu p100 can use it; returns (file, profile, stdout, stderr, seconds)."""
    out = tmp_path_factory.mktemp("calibration")
    argv = ["calibrate", "--device", "cpu", "--model", MODEL, "--batch", str(BATCH)]
    argv += ["--catalog-id", "p100", "--output", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    seconds = time.perf_counter() - t0
    assert code == 0, stderr.getvalue()
    path = out / "p100-sxm2" / MODEL / f"b{BATCH}-fp32.json"
    return path, profile_io.load(path), stdout.getvalue(), stderr.getvalue(), seconds


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_keras_model_gradients_match_the_zoo(name):
    from ddlsim.tools.calibrate.keras_models import build_keras_model

    model = build_keras_model(name, initializer="zeros")
    spec = get_model(name)
    ours = model.gradient_tensors()
    assert sorted((t.name, t.shape, t.nbytes) for t in ours) == sorted(
        (t.name, t.shape, t.nbytes()) for t in spec.tensors
    )
    assert sum(t.nbytes for t in ours) == spec.grad_bytes()
    for layer in spec.layers:  # each zoo layer owns exactly its own tensors
        owned = sorted(t.name for t in ours if t.layer == layer.name)
        assert owned == sorted(t.name for t in layer.tensors)


def test_pass_rows_positive_and_explain_the_step(profiled):
    path, prof, _, _, _ = profiled
    spec = get_model(MODEL)
    assert [la.name for la in prof.layers] == [la.name for la in spec.layers]
    for la in prof.layers:
        assert la.fwd_time_s > 0 and la.bwd_time_s > 0, la
    assert prof.step_time_s > 0 and prof.unattributed_time_s >= 0
    ratio = prof.sum_layers_s / prof.step_time_s
    assert 0.85 <= ratio <= 1.15
    doc = json.loads(path.read_text())
    assert doc["sum_layers_over_step"] == pytest.approx(ratio)
    assert 0.85 <= doc["provenance"]["accounted_over_step"] <= 1.15


def test_pass_gradient_bytes_equal_the_model(profiled):
    _, prof, _, _, _ = profiled
    spec = get_model(MODEL)
    assert sum(la.grad_bytes for la in prof.layers) == spec.grad_bytes()
    for la, layer in zip(prof.layers, spec.layers, strict=True):
        assert la.grad_bytes == layer.grad_bytes()


def test_file_records_device_tensorflow_and_method(profiled):
    path, _, out, err, _ = profiled
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == profile_io.SCHEMA_VERSION
    assert (doc["model"], doc["batch_per_gpu"], doc["precision"]) == (MODEL, BATCH, "fp32")
    dev = doc["device"]
    assert dev["catalog_id"] == "p100-sxm2" and dev["kind"] == "cpu"
    assert dev["tf_device"] == "/device:CPU:0" and dev["reported_name"]
    prov = doc["provenance"]
    assert prov["method"] == "tf-profiler" and prov["tensorflow"] == tf.__version__
    assert prov["catalog_id_override"] == "p100-sxm2"
    assert prov["host"] and prov["created"] and prov["traced_steps"] == 5
    assert prov["inter_op_threads"] == 1
    assert any(k.startswith("sgd/") for k in prov["top_unattributed_s"])  # the optimizer
    assert "step ms" in out and "images/s" in out and "sum/step" in out and str(path) in out
    assert "1/1 done" in err and "elapsed" in err and "remaining" in err
    assert not list(path.parent.glob(".*.tmp"))


def test_predict_consumes_the_profiled_file(profiled, capsys, monkeypatch):
    import ddlsim

    path, prof, _, _, _ = profiled
    argv = ["predict", "--model", MODEL, "--batch", str(BATCH), "--gpu", "p100"]
    assert main([*argv, "--calibration", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"calibration    tf-profiler: {path}" in out
    # the user calibration directory takes precedence over the shipped files
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(path.parents[2]))
    p = ddlsim.predict(MODEL, 1, gpu="p100", batch=BATCH)
    assert p.inputs["calibration"]["file"] == str(path)
    assert p.single_gpu_images_per_sec == pytest.approx(prof.images_per_sec, rel=1e-6)


def test_predict_applies_the_device_rule_to_a_profiled_file(profiled, tmp_path):
    """A file recorded under 'cpu' (not a catalog device) is refused, naming --catalog-id; the
    same profile recorded under a catalog GPU is re-timed for another GPU, and says so."""
    import dataclasses

    import ddlsim
    from ddlsim.errors import ConfigError

    _, prof, _, _, _ = profiled
    cpu_file = profile_io.save(dataclasses.replace(prof, device="cpu"), tmp_path / "cpu.json")
    with pytest.raises(ConfigError, match="--catalog-id"):
        ddlsim.predict(MODEL, 8, gpu="v100", batch=BATCH, calibration=str(cpu_file))
    k80_file = profile_io.save(dataclasses.replace(prof, device="k80"), tmp_path / "k80.json")
    p = ddlsim.predict(MODEL, 8, gpu="v100", calibration=str(k80_file))
    rule = p.inputs["calibration"]["device_rule"]
    assert rule == "re-timed from k80 to v100-sxm2 by per-layer roofline ratios"
    assert p.inputs["gpu"] == "v100-sxm2"
    assert p.single_gpu_images_per_sec > prof.images_per_sec  # a V100 outruns a K80


def test_gpu_absent_fails_before_writing(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    argv = ["calibrate", "--gpu", "p100", "--model", MODEL, "--output", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ddlsim: error: no p100-sxm2 GPU" in err
    assert "it sees: CPU:0 (" in err and "ddlsim calibrate --device cpu" in err
    assert list(out.iterdir()) == []


def test_amp_on_the_cpu_is_refused(tmp_path, capsys):
    argv = ["calibrate", "--device", "cpu", "--precision", "amp", "--output", str(tmp_path)]
    assert main(argv) == 2
    assert "on the CPU use fp32" in capsys.readouterr().err


def test_tensorflow_missing_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    argv = ["calibrate", "--device", "cpu", "--output", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[calibrate]'" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_mid_pass_exits_130_and_writes_nothing(tmp_path, capsys, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "read_trace", interrupted)
    argv = ["calibrate", "--device", "cpu", "--model", MODEL, "--batch", "1"]
    argv += ["--steps", "1", "--warmup-steps", "1", "--output", str(tmp_path)]
    assert main(argv) == 130
    assert "ddlsim: interrupted" in capsys.readouterr().err
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    tf.profiler.experimental.start(str(tmp_path / "trace"))  # the profiler was stopped
    tf.profiler.experimental.stop()


def test_ctrl_c_while_writing_leaves_no_partial_file(profiled, tmp_path, capsys, monkeypatch):
    _, prof, _, _, _ = profiled
    result = run_mod.PassResult(prof, None, 0.0)
    monkeypatch.setattr("ddlsim.tools.calibrate.driver.profile_pass", lambda *a, **k: result)

    def interrupted_sync(fd: int) -> None:  # the bytes are written, not yet in place
        raise KeyboardInterrupt

    monkeypatch.setattr("ddlsim.atomic.os.fsync", interrupted_sync)
    argv = ["calibrate", "--device", "cpu", "--model", MODEL, "--batch", str(BATCH)]
    assert main([*argv, "--output", str(tmp_path)]) == 130
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file, no empty folder


def test_anchor_and_transfer_after_a_pass(profiled, tmp_path, capsys, monkeypatch):
    _, prof, _, _, _ = profiled
    result = run_mod.PassResult(prof, None, 0.0)
    monkeypatch.setattr("ddlsim.tools.calibrate.driver.profile_pass", lambda *a, **k: result)
    argv = ["calibrate", "--device", "cpu", "--model", MODEL, "--batch", str(BATCH)]
    argv += ["--catalog-id", "p100", "--anchor-throughput", "40", "--transfer-to", "v100"]
    assert main([*argv, "--output", str(tmp_path)]) == 0
    anchored = profile_io.load(tmp_path / f"p100-sxm2/{MODEL}/b{BATCH}-fp32.json")
    assert anchored.images_per_sec == pytest.approx(40.0)
    assert anchored.provenance["method"] == "throughput-anchored"
    assert anchored.provenance["base"]["method"] == "tf-profiler"
    moved = profile_io.load(tmp_path / f"v100-sxm2/{MODEL}/b{BATCH}-fp32.json")
    assert moved.provenance["method"] == "roofline-device-transfer"
    assert "roofline-device-transfer" in capsys.readouterr().out


def test_predict_never_imports_tensorflow():
    code = (
        "import sys; from ddlsim.cli.main import main; "
        "assert main(['predict', '--model', 'alexnet']) == 0; "
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.slow
def test_resnet50_cpu_pass(tmp_path, capsys):
    """ResNet-50 at batch 16 on the CPU (about a minute on 2 cores); prints its figures."""
    argv = ["calibrate", "--device", "cpu", "--model", "resnet50", "--batch", "16"]
    t0 = time.perf_counter()
    assert main([*argv, "--output", str(tmp_path)]) == 0
    seconds = time.perf_counter() - t0
    prof = profile_io.load(tmp_path / "cpu/resnet50/b16-fp32.json")
    ratio = prof.sum_layers_s / prof.step_time_s
    with capsys.disabled():
        print(
            f"\nresnet50 b16 cpu: pass {seconds:.1f} s, step {prof.step_time_s * 1e3:.1f} ms, "
            f"{prof.images_per_sec:.2f} images/s, sum/step {ratio:.3f}, accounted "
            f"{prof.provenance['accounted_over_step']:.3f}"
        )
    assert all(la.fwd_time_s > 0 and la.bwd_time_s > 0 for la in prof.layers)
    assert 0.85 <= ratio <= 1.15
    assert sum(la.grad_bytes for la in prof.layers) == get_model("resnet50").grad_bytes()


def test_keras_grouped_conv_and_squeeze_excitation_compute_the_zoo_layers():
    """A grouped convolution equals its groups convolved apart and concatenated; swish is
    ``y·sigmoid(y)``; squeeze-excitation scales each channel by the gate of its mean."""
    import numpy as np

    from ddlsim.tools.calibrate import keras_layers as kl

    x = tf.random.stateless_normal((2, 6, 6, 8), seed=(1, 2))
    conv = kl.ZooConv(
        8, (3, 3), 1, "SAME", biases=False, bn_name=None, bn_scale=False, activation="swish",
        groups=4, name="g",
    )  # fmt: skip
    conv.build((None, 6, 6, 8))
    kernel = conv.conv.kernel
    assert tuple(kernel.shape) == (3, 3, 2, 8)
    parts = [
        tf.nn.conv2d(x[..., 2 * g : 2 * g + 2], kernel[..., 2 * g : 2 * g + 2], 1, "SAME")
        for g in range(4)
    ]
    ref = tf.concat(parts, axis=-1)
    np.testing.assert_allclose(conv(x), ref * tf.sigmoid(ref), rtol=1e-5, atol=1e-5)
    se = kl.ZooSqueezeExcite(8, 2, "relu", name="se")
    se.build((None, 6, 6, 8))
    w1, b1 = se.squeeze.weights_, se.squeeze.biases
    w2, b2 = se.excite.weights_, se.excite.biases
    gate = tf.sigmoid(tf.nn.relu(tf.reduce_mean(x, axis=(1, 2)) @ w1 + b1) @ w2 + b2)
    np.testing.assert_allclose(se(x), x * gate[:, None, None, :], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["se-resnext101-32x4d", "efficientnet-b0"])
def test_grouped_se_and_swish_models_cpu_pass(name, tmp_path, capsys):
    """A real pass of a model with grouped convolutions and squeeze-excitation (SE-ResNeXt,
    ~40 s on 2 cores) and one with depthwise convolutions, SE and swish (EfficientNet-B0)."""
    argv = ["calibrate", "--device", "cpu", "--model", name, "--batch", "2"]
    assert main([*argv, "--output", str(tmp_path)]) == 0
    prof = profile_io.load(tmp_path / f"cpu/{name}/b2-fp32.json")
    ratio = prof.sum_layers_s / prof.step_time_s
    with capsys.disabled():
        print(f"\n{name} b2 cpu: step {prof.step_time_s * 1e3:.1f} ms, sum/step {ratio:.3f}")
    assert [la.name for la in prof.layers] == [la.name for la in get_model(name).layers]
    assert all(la.fwd_time_s > 0 and la.bwd_time_s >= 0 for la in prof.layers)
    # a residual sum without activation passes its gradient through: no backward op in TF
    assert all(la.bwd_time_s > 0 for la in prof.layers if la.grad_bytes)
    assert 0.85 <= ratio <= 1.15
    assert 0.85 <= prof.provenance["accounted_over_step"] <= 1.15
    assert sum(la.grad_bytes for la in prof.layers) == get_model(name).grad_bytes()
