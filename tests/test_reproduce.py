"""Every result re-runs from its own JSON (issue 11, item 8): ``predict --from-json`` gives the
byte-identical output, the record covers every keyword of predict and prepare, and a changed
calibration file is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddlsim
from ddlsim.cli.main import build_parser, main
from ddlsim.config import record as reproduce
from ddlsim.config.groups import JobConfig

REPO = Path(__file__).resolve().parents[1]
K80_ALEXNET = REPO / "calibration" / "k80" / "alexnet" / "b32-fp32.json"


pytestmark = pytest.mark.usefixtures("no_user_calibration")


CONFIGS = {
    "defaults": [],
    "detailed-stragglers-jitter-seed": [
        *("--model", "alexnet", "--gpus", "16", "--engine", "detailed"),
        *("--stragglers", "3:1.2,9:1.05", "--jitter", "0.05", "--seed", "7"),
    ],
    "ps-real-data": [
        *("--model", "googlenet", "--gpus", "32", "--comm", "ps", "--n-ps", "4"),
        *("--data", "real", "--host-input-rate", "4000", "--rank-sigma", "0.03"),
    ],
    "horovod-knobs": [
        *("--gpus", "64", "--gpu", "v100", "--precision", "amp", "--fusion-threshold-mb", "64"),
        *("--cycle-time-ms", "5", "--hierarchical", "--fp16-allreduce", "--epochs", "30"),
    ],
    "calibration-file-retimed": ["--calibration", str(K80_ALEXNET), "--gpu", "v100", "--gpus", "8"],
    "single-gpu-throughput": ["--model", "vgg16", "--gpus", "8", "--single-gpu-throughput", "150"],
}


@pytest.mark.parametrize("argv", CONFIGS.values(), ids=CONFIGS)
def test_from_json_re_runs_byte_identical(argv, tmp_path, cli):
    code, first, err = cli("predict", *argv, "--json")
    assert code == 0, err
    result = tmp_path / "result.json"
    result.write_text(first, encoding="utf-8")
    code, again, err = cli("predict", "--from-json", str(result), "--json")
    assert code == 0 and err == ""
    assert again == first  # byte for byte
    code, text, _ = cli("predict", "--from-json", str(result))
    assert code == 0 and text == cli("predict", *argv)[1]


def test_the_record_holds_every_field_of_the_job(cli):
    _, out, _ = cli("predict", "--json")
    inputs = json.loads(out)["inputs"]
    job = JobConfig()
    keywords = {
        f.name
        for group in dataclasses.fields(job)
        for f in dataclasses.fields(getattr(job, group.name))
    }
    assert set(inputs["predict_kwargs"]) == keywords
    assert inputs["ddlsim_version"] == ddlsim.__version__
    source = inputs["calibration_source"]
    assert source["path"] == inputs["calibration"]["file"]
    assert source["sha256"] == reproduce.file_sha256(source["path"])
    # values left to the defaults are recorded as used, not as None
    kwargs = inputs["predict_kwargs"]
    assert (kwargs["model"], kwargs["gpu"], kwargs["batch"], kwargs["precision"]) == (
        "resnet50",
        "p100-sxm2",
        64,
        "fp32",
    )
    assert kwargs["seed"] == 0 and kwargs["engine"] == "fast"


def test_the_readme_states_the_true_default_seed():
    parser = build_parser()
    predict = next(a for a in parser._actions if a.dest == "command").choices["predict"]
    default_seed = predict.get_default("seed")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `--seed"))
    assert f"| {default_seed} |" in row.replace("`", ""), row


def test_a_changed_calibration_file_is_refused(tmp_path, cli):
    cal = tmp_path / "cal.json"
    shutil.copy(K80_ALEXNET, cal)
    _, out, _ = cli("predict", "--calibration", str(cal), "--json")
    result = tmp_path / "result.json"
    result.write_text(out)
    doc = json.loads(cal.read_text())
    doc["step_time_s"] *= 1.01
    cal.write_text(json.dumps(doc))
    code, out, err = cli("predict", "--from-json", str(result))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"calibration file {cal} changed since" in err and "sha256" in err
    cal.unlink()
    code, _, err = cli("predict", "--from-json", str(result))
    assert code == 2 and "no longer exists" in err


def test_a_new_file_found_by_the_search_is_refused(tmp_path, monkeypatch, cli):
    _, out, _ = cli("predict", "--model", "alexnet", "--gpu", "k80", "--json")
    result = tmp_path / "result.json"
    result.write_text(out)
    user = tmp_path / "user"
    target = user / "k80" / "alexnet" / "b64-fp32.json"
    target.parent.mkdir(parents=True)
    shutil.copy(REPO / "calibration" / "k80" / "alexnet" / "b64-fp32.json", target)
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(user))
    code, _, err = cli("predict", "--from-json", str(result))
    assert code == 2 and "the re-run found" in err and str(target) in err


@pytest.mark.parametrize(
    "content, text",
    [
        ("not json", "invalid JSON"),
        ('{"images_per_sec": 1}', "records no predict_kwargs"),
        ("[1, 2]", "records no predict_kwargs"),
    ],
)
def test_a_file_that_is_not_a_result_is_refused(content, text, tmp_path, cli):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = cli("predict", "--from-json", str(bad))
    assert code == 2 and text in err and err.count("\n") == 1


def test_from_json_takes_no_other_configuration_flag(tmp_path, cli):
    _, out, _ = cli("predict", "--json")
    result = tmp_path / "r.json"
    result.write_text(out)
    code, _, err = cli("predict", "--from-json", str(result), "--gpus", "4")
    assert code == 2 and "drop --gpus" in err


def test_another_version_warns_and_runs(tmp_path, cli):
    _, out, _ = cli("predict", "--json")
    doc = json.loads(out)
    doc["inputs"]["ddlsim_version"] = "0.0.1"
    result = tmp_path / "old.json"
    result.write_text(json.dumps(doc))
    code, _, err = cli("predict", "--from-json", str(result))
    assert code == 0 and "written by ddlsim 0.0.1" in err


def test_a_timeline_re_runs_as_a_prediction(tmp_path, capsys, cli):
    trace = tmp_path / "t.json"
    argv = ["--model", "alexnet", "--gpus", "16", "--inter-node", "25gbe"]
    assert main(["timeline", *argv, "-o", str(trace)]) == 0
    capsys.readouterr()
    code, out, _ = cli("predict", "--from-json", str(trace), "--json")
    assert code == 0
    direct = ddlsim.predict(model="alexnet", gpus=16, inter_node="25gbe")
    assert json.loads(out)["images_per_sec"] == direct.images_per_sec


def test_a_sweep_row_re_runs_from_its_config_column():
    from ddlsim.tools.analysis.sweep import evaluate

    row = evaluate({"model": "googlenet", "gpus": 16, "comm": "ps", "n_ps": 2})
    kwargs = reproduce.decode(json.loads(row["config"]))
    assert ddlsim.predict(**kwargs).images_per_sec == row["images_per_sec"]
    assert row["calibration_sha256"] == reproduce.file_sha256(row["calibration_file"])
    failed = evaluate({"model": "googlenet", "gpus": 12})
    assert failed["status"] == "error" and json.loads(failed["config"])["gpus"] == 12


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        | st.dictionaries(st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(json_values)
def test_encode_decode_round_trip_through_json(value):
    encoded = reproduce.encode(value)
    assert reproduce.decode(json.loads(json.dumps(encoded, allow_nan=False))) == value


_RESULT: dict = {}


def _result_doc() -> dict:
    if not _RESULT:
        _RESULT.update(ddlsim.predict("alexnet", 8).to_dict())
        _RESULT.pop("comm_ops")
    return json.loads(json.dumps(_RESULT))


edits = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=st.sampled_from([*sorted(reproduce.keyword_defaults()), "model", "gpus", "colour"]),
    value=edits,
)
def test_a_hand_edited_record_is_one_error_line_or_a_result(key, value, tmp_path_factory):
    doc = _result_doc()
    doc["inputs"]["predict_kwargs"][key] = value
    path = tmp_path_factory.mktemp("edited") / "r.json"
    path.write_text(json.dumps(doc))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["predict", "--from-json", str(path)])
    lines = err.getvalue().splitlines()
    assert code in (0, 2) and "Traceback" not in err.getvalue()
    if code == 2:
        assert len([x for x in lines if "error" in x]) == 1
