"""Which calibration a prediction uses (issue 11, items 6 and 7): one device rule for every file,
reported; ``--calibration FILE`` alone takes the file's model, batch, precision and device.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import ddlsim
from ddlsim.calibration import profile as profile_io
from ddlsim.calibration.transfer import transfer_device
from ddlsim.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
K80_ALEXNET = REPO / "calibration" / "k80" / "alexnet" / "b32-fp32.json"
P100_RESNET = REPO / "calibration" / "p100-sxm2" / "resnet50" / "b64-fp32.json"


pytestmark = pytest.mark.usefixtures("no_user_calibration")


def test_the_file_alone_sets_model_batch_precision_and_gpu(cli):
    code, out, err = cli("predict", "--gpus", "8", "--calibration", str(K80_ALEXNET))
    assert code == 0, err
    assert out.startswith("ddlsim prediction: alexnet on 8 x k80 ")
    assert "batch          32 per GPU, fp32" in out
    assert "as calibrated for k80" in out
    p = ddlsim.predict(gpus=1, calibration=str(K80_ALEXNET))
    prof = profile_io.load(K80_ALEXNET)
    assert p.single_gpu_images_per_sec == pytest.approx(prof.images_per_sec, rel=1e-9)


@pytest.mark.parametrize(
    "flag, value, file_value",
    [
        ("--batch", "64", "32"),
        ("--model", "resnet50", "'alexnet'"),
        ("--precision", "amp", "'fp32'"),
    ],
)
def test_a_conflicting_flag_names_the_files_value(flag, value, file_value, cli):
    argv = ["predict", "--calibration", str(K80_ALEXNET), "--gpu", "v100", flag, value]
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"which is for {flag[2:]} {file_value}" in err and str(K80_ALEXNET) in err


def test_an_agreeing_flag_is_fine_and_model_aliases_agree(cli):
    argv = ["predict", "--calibration", str(K80_ALEXNET), "--model", "alexnet", "--batch", "32"]
    assert cli(*argv)[0] == 0


def test_a_file_for_another_catalog_gpu_is_re_timed_and_the_report_says_so(cli):
    code, out, _ = cli("predict", "--calibration", str(K80_ALEXNET), "--gpu", "v100")
    assert code == 0
    assert "re-timed from k80 to v100-sxm2 by per-layer roofline ratios" in out
    p = ddlsim.predict(gpu="v100", calibration=str(K80_ALEXNET))
    moved = transfer_device(profile_io.load(K80_ALEXNET), "v100")
    assert p.single_gpu_images_per_sec == pytest.approx(moved.images_per_sec, rel=1e-9)
    assert p.inputs["calibration"]["method"] == "roofline-device-transfer"
    assert p.inputs["calibration_source"]["path"] == str(K80_ALEXNET)


def test_the_rule_is_the_same_for_searched_and_given_files():
    """The shipped P100 file, found by the search or given, is 'as calibrated'."""
    found = ddlsim.predict("resnet50", 8)
    given = ddlsim.predict(gpus=8, calibration=str(P100_RESNET))
    rule = "as calibrated for p100-sxm2"
    assert found.inputs["calibration"]["device_rule"] == rule
    assert given.inputs["calibration"]["device_rule"] == rule
    assert found.images_per_sec == pytest.approx(given.images_per_sec, rel=1e-12)


@pytest.mark.parametrize("device", ["cpu", "geforce-rtx-4090"])
@pytest.mark.parametrize("gpu", [None, "p100", "k80"])
def test_a_file_for_a_device_the_catalog_does_not_know_is_refused_everywhere(device, gpu, tmp_path):
    prof = dataclasses.replace(profile_io.load(P100_RESNET), device=device)
    path = profile_io.save(prof, tmp_path / "uncatalogued.json")
    kwargs = {} if gpu is None else {"gpu": gpu}
    with pytest.raises(ConfigError, match="--catalog-id GPU") as err:
        ddlsim.predict(gpus=8, calibration=str(path), **kwargs)
    assert f"is for device {device!r}, which is not in the device catalog" in str(err.value)


def test_the_rule_holds_for_timeline_and_sweep(tmp_path, cli):
    from ddlsim.tools.analysis.sweep import evaluate

    argv = ["timeline", "--calibration", str(K80_ALEXNET), "--gpu", "v100", "-o", "-"]
    code, out, _ = cli(*argv)
    assert code == 0 and "re-timed from k80 to v100-sxm2" in out
    row = evaluate({"gpus": 8, "gpu": "v100", "calibration": str(K80_ALEXNET)})
    direct = ddlsim.predict(gpus=8, gpu="v100", calibration=str(K80_ALEXNET))
    assert row["status"] == "ok" and row["images_per_sec"] == direct.images_per_sec
