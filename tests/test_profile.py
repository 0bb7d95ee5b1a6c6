"""Calibration files: round trip, validation, atomic writes."""

import json

import pytest

from ddlsim.calibration.profile import (
    SCHEMA_VERSION,
    LayerTiming,
    ModelProfile,
    from_dict,
    load,
    save,
)
from ddlsim.errors import CalibrationError


def _profile(step_s: float = 0.5) -> ModelProfile:
    layers = (LayerTiming("conv0", 0.1, 0.2, 400), LayerTiming("fc", 0.05, 0.1, 40))
    return ModelProfile("toy", "p100-sxm2", 32, "fp32", layers, 0.05, step_s, {"method": "test"})


def test_round_trip(tmp_path):
    path = save(_profile(), tmp_path / "a" / "b32-fp32.json")
    back = load(path)
    assert back == _profile()
    assert back.path == str(path)
    assert back.provenance == {"method": "test"}


def test_normalized_profile_adds_up_to_the_step_time():
    prof = _profile(step_s=1.0).normalized()
    assert prof.sum_layers_s + prof.unattributed_time_s == pytest.approx(1.0, rel=1e-12)
    assert prof.images_per_sec == pytest.approx(32.0)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(schema_version=99), "schema version 99"),
        (lambda d: d.update(format="other"), "not a ddlsim calibration"),
        (lambda d: d.update(step_time_s=-1), "step_time_s must be in 1e-06..1e[+]06 s"),
        (lambda d: d.update(layers=[]), "no layer rows"),
        (lambda d: d["layers"][0].__setitem__(1, float("nan")), "a layer time must be in 0"),
        (lambda d: d.pop("model"), "malformed"),
        (lambda d: d.update(layers=[["x", 1]]), "malformed"),
    ],
)
def test_bad_documents_are_rejected_with_the_reason(mutate, message):
    doc = _profile().to_dict()
    mutate(doc)
    with pytest.raises(CalibrationError, match=message):
        from_dict(doc, "f.json")


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(CalibrationError, match="not found"):
        load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "ddlsim-calibration", ')
    with pytest.raises(CalibrationError, match="invalid JSON"):
        load(bad)


def test_save_never_overwrites_another_schema_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "x.json"
    target.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(CalibrationError, match="refusing to overwrite"):
        save(_profile(), target)
    assert json.loads(target.read_text()) == {"schema_version": SCHEMA_VERSION + 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_save_replaces_a_same_schema_file(tmp_path):
    target = tmp_path / "x.json"
    save(_profile(0.5), target)
    save(_profile(0.7), target)
    assert load(target).step_time_s == 0.7


def test_binary_and_deeply_nested_files_are_corrupt_not_crashes(tmp_path):
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(CalibrationError, match="not UTF-8"):
        load(binary)
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CalibrationError, match="invalid JSON"):
        load(nested)


def test_a_boolean_schema_version_is_not_version_1():
    doc = _profile().to_dict()
    doc["schema_version"] = True
    with pytest.raises(CalibrationError, match="schema version True"):
        from_dict(doc, "f.json")
