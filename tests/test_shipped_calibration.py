"""The calibrations shipped with ddlsim: complete, valid, reproducible, honest provenance."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ddlsim.calibration.profile import load
from ddlsim.calibration.store import calibration_path, find_profile, shipped_dir
from ddlsim.compute.kernels import model_document, step_library
from ddlsim.system import catalog
from ddlsim.workload.workload import Workload
from ddlsim.workload.zoo import MODEL_NAMES, get_model

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("generate", ROOT / "calibration" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_catalog_gpu_and_model_has_batch_32_64_128_fp32():
    gen = _generator()
    for device in gen.canonical_devices():
        for model in MODEL_NAMES:
            for batch in (32, 64, 128):
                assert calibration_path(shipped_dir(), model, device, batch, "fp32").is_file()


def test_every_shipped_file_loads_and_matches_its_model():
    # generated (roofline) files of the catalog GPUs; a CPU worker's file is a measured
    # profile (tests/test_hvdlocal.py checks it)
    gpus = set(_generator().canonical_devices())
    files = sorted(p for p in shipped_dir().rglob("*.json") if p.parent.parent.name in gpus)
    assert len(files) > 500
    for path in files[::7]:  # a spread sample keeps this fast; the generator writes them all alike
        prof = load(path)
        Workload.build(get_model(prof.model), prof)
        method = prof.provenance["method"]
        assert method in ("roofline-anchored", "per-layer-model")
        # no factor from other configurations' throughput: an anchor of this very one, or none
        assert (prof.provenance["anchor"] is None) == (method == "per-layer-model")
        assert "correction" not in prof.provenance
        fit = prof.provenance["per_layer_model"]["conv_and_fc"]
        files = {f["file"] for f in fit["fitted_on"]["files"].values()}
        assert "traces/measured/kernels/deepbench_conv_fp32.csv" in files
        assert fit["coefficients"] == {
            k: v["value"] for k, v in model_document()["coefficients"].items()
        }
        device = catalog.device(prof.device)
        assert fit["library"]["id"] == step_library(device)
        assert set(fit["kernels"]) <= {"cuda_core", "tensor_core"}
        # layer times are written to 6 significant digits: up to 5e-6 relative each
        total = prof.sum_layers_s + prof.unattributed_time_s
        assert total == pytest.approx(prof.step_time_s, rel=5e-6)


def test_anchored_files_reproduce_the_measured_throughput_they_cite():
    prof = find_profile(get_model("resnet50"), catalog.device("p100-sxm2"), 64, "fp32")
    assert prof.provenance["method"] == "roofline-anchored"
    assert "TFBENCH2017-0002" in prof.provenance["anchor"]["run_ids"]
    assert prof.images_per_sec == pytest.approx(219.0, rel=1e-4)


def test_the_per_layer_model_files_are_the_model_s_own_step():
    """Without an anchor the step is the per-layer model's: no factor (V100 amp once carried a
    0.80 fitted on two DLPERF rows; A100 / H100 inherited it)."""
    from ddlsim.calibration.anchored import roofline_profile

    for gpu, precision in (("v100-sxm2", "amp"), ("a100", "amp"), ("h100", "fp32"), ("a10", "amp")):
        dev = catalog.device(gpu)
        prof = find_profile(get_model("resnet50"), dev, 128, precision)
        assert prof.provenance["method"] == "per-layer-model"
        own = roofline_profile(get_model("resnet50"), dev, 128, precision)
        assert prof.step_time_s == pytest.approx(own.step_time_s, rel=1e-5)


def test_new_catalog_gpus_ship_the_same_configurations_as_the_a100():
    for gpu in ("a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie", "a10"):
        for model in MODEL_NAMES:
            for batch in (32, 64, 128):
                for precision in ("fp32", "amp"):
                    assert calibration_path(shipped_dir(), model, gpu, batch, precision).is_file()


def test_regenerating_reproduces_the_shipped_files(tmp_path):
    gen = _generator()
    gen.main(tmp_path)
    for rel in (
        "k80/resnet50/b64-fp32.json",
        "v100-sxm2/resnet50_v1.5/b224-amp.json",
        "v100-sxm2/se-resnext101-32x4d/b64-amp.json",
        "a100/resnet50/b128-amp.json",
        "h100-pcie/resnet50/b64-fp32.json",
    ):
        fresh = json.loads((tmp_path / rel).read_text())
        shipped = json.loads((shipped_dir() / rel).read_text())
        assert fresh == shipped


def test_a_batch_without_a_file_is_transferred_by_roofline_and_says_so():
    prof = find_profile(get_model("resnet50"), catalog.device("p100-sxm2"), 48, "fp32")
    assert prof.batch_per_gpu == 48
    assert prof.provenance["method"] == "roofline-batch-transfer"
    assert prof.provenance["from_batch"] in (32, 64)
    p64 = find_profile(get_model("resnet50"), catalog.device("p100-sxm2"), 64, "fp32")
    p32 = find_profile(get_model("resnet50"), catalog.device("p100-sxm2"), 32, "fp32")
    assert p32.step_time_s < prof.step_time_s < p64.step_time_s
