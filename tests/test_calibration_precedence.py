"""Which calibration file predict uses when the user has their own (issue 23, item 1).

The rule (:mod:`ddlsim.calibration.store`): ``--calibration FILE`` always; otherwise a file that
rests on a measurement of the GPU beats an estimate (re-timed from another GPU, or corrected by
other GPUs' runs), and between two of the same standing the user's file wins, shadowing the
shipped one. The report, ``--json``, ``calibrate``'s notes and ``ddlsim calibrations`` say
which file was used and what it shadows or passes over.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddlsim.calibration.store import shipped_dir

K80 = shipped_dir() / "k80" / "resnet50" / "b64-fp32.json"
V100 = shipped_dir() / "v100-sxm2" / "resnet50" / "b64-fp32.json"
A100 = shipped_dir() / "a100" / "resnet50" / "b64-fp32.json"


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "usercal"
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(folder))
    return folder


def _json(cli, *argv: str) -> dict:
    code, out, err = cli("predict", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def test_the_readme_transfer_no_longer_changes_a_measured_gpus_prediction(cli, user_dir):
    before = _json(cli, "--gpu", "v100", "--model", "resnet50", "--gpus", "8")
    assert "user" not in before["inputs"]["calibration"]  # no user file: the key is absent
    code, out, _ = cli("calibrate", "--calibration", str(K80), "--transfer-to", "v100")
    mine = user_dir / "v100-sxm2" / "resnet50" / "b64-fp32.json"
    assert code == 0 and mine.is_file()
    assert f"predict keeps using the shipped {V100}, not {mine}" in out
    after = _json(cli, "--gpu", "v100", "--model", "resnet50", "--gpus", "8")
    assert after["images_per_sec"] == before["images_per_sec"]
    user = after["inputs"]["calibration"]["user"]
    assert user["file"] == str(mine) and user["used"] is False
    assert user["passed_over_for"] == str(V100)
    assert "re-timed from k80" in user["reason"] and "per-layer model" in user["reason"]
    code, text, _ = cli("predict", "--gpu", "v100", "--model", "resnet50", "--gpus", "8")
    assert f"not your {mine}: yours is an estimate (re-timed from k80" in text
    assert "'ddlsim calibrations' lists your files" in text
    # asked for by name, the transferred file is used
    given = _json(cli, "--gpu", "v100", "--gpus", "8", "--calibration", str(mine))
    assert given["images_per_sec"] < 0.6 * before["images_per_sec"]
    assert "user" not in given["inputs"]["calibration"]


def test_a_measured_user_file_shadows_the_shipped_one_and_says_so(cli, user_dir):
    argv = ["calibrate", "--calibration", str(V100), "--anchor-throughput", "300"]
    code, out, _ = cli(*argv)
    mine = user_dir / "v100-sxm2" / "resnet50" / "b64-fp32.json"
    assert code == 0 and f"predict now uses {mine} in place of the shipped {V100}" in out
    doc = _json(cli, "--gpu", "v100", "--model", "resnet50")
    assert doc["single_gpu_images_per_sec"] == pytest.approx(300, rel=1e-6)
    user = doc["inputs"]["calibration"]["user"]
    assert user["used"] is True and user["shadows"] == str(V100)
    assert doc["inputs"]["calibration"]["file"] == str(mine)
    code, text, _ = cli("predict", "--gpu", "v100", "--model", "resnet50")
    assert f"your own file, shadowing the shipped {V100}" in text


def test_between_two_estimates_the_users_file_wins(cli, user_dir):
    """The shipped A100 file is ddlsim's per-layer model of the A100 (no anchor); a user's file
    of the same standing (here: the model's own step, edited) wins and shadows it, while a
    transfer from another GPU stands below it and is passed over."""
    assert cli("calibrate", "--calibration", str(K80), "--transfer-to", "a100")[0] == 0
    doc = _json(cli, "--gpu", "a100", "--model", "resnet50")
    user = doc["inputs"]["calibration"]["user"]
    assert user["used"] is False and user["passed_over_for"] == str(A100)
    mine = json.loads(A100.read_text())
    mine["provenance"]["note"] = "the same model, this user's copy"
    (user_dir / "a100" / "resnet50" / A100.name).write_text(json.dumps(mine))
    doc = _json(cli, "--gpu", "a100", "--model", "resnet50")
    user = doc["inputs"]["calibration"]["user"]
    assert user["used"] is True and user["shadows"] == str(A100)
    assert "estimate, as is the shipped one" in user["reason"]


def test_a_user_file_of_a_configuration_nothing_ships_is_just_used(cli, user_dir, tmp_path):
    src = json.loads(V100.read_text())
    src["batch_per_gpu"] = 48
    folder = user_dir / "v100-sxm2" / "resnet50"
    folder.mkdir(parents=True)
    (folder / "b48-fp32.json").write_text(json.dumps(src))
    doc = _json(cli, "--gpu", "v100", "--batch", "48")
    user = doc["inputs"]["calibration"]["user"]
    assert user["used"] is True and user["shadows"] is None


def test_calibrations_lists_the_users_files_and_what_each_does(cli, user_dir):
    code, out, _ = cli("calibrations")
    assert code == 0 and out.startswith("no calibration files of yours in")
    cli("calibrate", "--calibration", str(K80), "--transfer-to", "v100", "--transfer-to", "a100")
    broken = user_dir / "p100-sxm2" / "alexnet" / "b64-fp32.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    code, out, _ = cli("calibrations", "--json")
    doc = json.loads(out)
    status = {Path(f["file"]).parent.parent.name: f["status"] for f in doc["files"]}
    assert status == {"a100": "passed over", "v100-sxm2": "passed over", "p100-sxm2": "unreadable"}
    mine = json.loads(A100.read_text())
    (user_dir / "a100" / "resnet50" / A100.name).write_text(json.dumps(mine))
    code, text, _ = cli("calibrations")
    assert "passed over for" in text and "used, shadowing" in text and "unreadable" in text
    assert "delete a file to stop using it" in text


def test_the_rule_is_one_function_of_the_two_files(tmp_path):
    from ddlsim.calibration.store import choose, estimate_kind

    def file(gpu: str, provenance: dict) -> Path:
        path = tmp_path / gpu / "resnet50" / f"b64-fp32-{len(list(tmp_path.rglob('*')))}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"provenance": provenance}))
        return path

    transfer = file("v100-sxm2", {"method": "roofline-device-transfer", "from_device": "k80"})
    own = file(
        "v100-sxm2", {"method": "roofline-corrected", "correction": {"scope": "v100-sxm2/fp32"}}
    )
    pooled = file("v100-sxm2", {"method": "roofline-corrected", "correction": {"scope": "*/fp32"}})
    modelled = file("v100-sxm2", {"method": "per-layer-model", "anchor": None})
    profiled = file("v100-sxm2", {"method": "torch-profiler"})
    assert estimate_kind(transfer) == "re-timed from k80 by roofline ratios"
    assert estimate_kind(pooled) == "a roofline corrected by other GPUs' runs"
    assert estimate_kind(own) is None and estimate_kind(profiled) is None
    assert choose(transfer, own).passed_over and choose(transfer, own).used == own
    assert choose(transfer, modelled).used == modelled  # a transfer stands below the model
    assert choose(transfer, pooled).used == pooled
    assert choose(pooled, modelled).used == pooled  # two models of this GPU: the user's
    assert choose(transfer, transfer).used == transfer
    assert choose(profiled, own).used == profiled  # two measurements: the user's
    assert choose(profiled, own).shadows == own
    assert choose(None, own).used == own and choose(None, None) is None


def test_a_cpu_file_is_listed_as_not_usable_and_calibrate_says_how_to_use_it(cli, user_dir):
    """Issue 33, 14: a calibration of device 'cpu' (the catalog has no such device) is not
    "used": predict refuses it; calibrate's note says so and how to record it under a catalog
    device."""
    cpu = Path(__file__).parent / "data" / "calibration_torch_cpu_alexnet_b8-fp32.json"
    code, out, err = cli("calibrate", "--calibration", str(cpu), "--anchor-throughput", "100")
    mine = user_dir / "cpu" / "alexnet" / "b8-fp32.json"
    assert code == 0 and mine.is_file(), err
    notes = [line for line in out.splitlines() if line.startswith("note: predict cannot use")]
    assert len(notes) == 1 and str(mine) in notes[0] and "--catalog-id" in notes[0]
    code, out, _ = cli("calibrations")
    assert code == 0 and "used" not in out.split(str(mine))[1].splitlines()[1]
    assert "not usable by predict: device 'cpu' is not in the device catalog" in out
    code, _, err = cli("predict", "--model", "alexnet", "--gpu", "cpu", "--batch", "8")
    assert code == 2  # what calibrations says: predict does not use it
    code, out, _ = cli("calibrations", "--json")
    (entry,) = json.loads(out)["files"]
    assert entry["status"] == "not usable by predict" and "--catalog-id" in entry["reason"]
