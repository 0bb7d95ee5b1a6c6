"""``ddlsim validate --absolute``: ddlsim's own compute checked against measured runs, 1-GPU rows
included, beside the anchored (scaling) score; and the track record predict quotes from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ddlsim
from ddlsim.config.track_record import format_absolute_line, lookup_absolute
from ddlsim.tools.validate.core import ANCHOR_ROW, PREDICTED, anchor_run_ids, validate_runs
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import load_runs

RUNS = Path(__file__).parent / "data" / "validate_runs_small.csv"


@pytest.fixture(autouse=True)
def _shipped_only(no_user_calibration):
    return None


def _by_id(options: ValidateOptions):
    return {r.run.run_id: r for r in validate_runs(load_runs(RUNS).runs, options)}


def test_absolute_predicts_the_one_gpu_rows_without_any_anchor():
    default, absolute = _by_id(ValidateOptions()), _by_id(ValidateOptions(absolute=True))
    assert default["T-0001"].code == "baseline-row"
    row = absolute["T-0001"]
    assert row.status == PREDICTED and not row.anchored and row.baseline is None
    p = ddlsim.predict("resnet50", 1, gpu="p100-sxm2", batch=64, comm="ps")
    assert row.predicted_images_per_sec == pytest.approx(p.images_per_sec)
    assert any("--absolute" in n for n in row.notes)
    multi = absolute["T-0002"]
    assert multi.status == PREDICTED and not multi.anchored


def test_a_row_the_calibration_is_anchored_to_is_not_counted_as_a_prediction():
    p = ddlsim.predict("resnet50", 1, gpu="p100-sxm2", batch=64)
    ids = anchor_run_ids(p.inputs["calibration"]["provenance"])
    assert ids  # the shipped P100 ResNet-50 file is anchored to a measured run
    runs = load_runs(Path("traces/measured/runs.csv")).runs
    anchors = [r for r in runs if r.run_id in ids]
    (row,) = validate_runs(runs, ValidateOptions(absolute=True), only=lambda r: r in anchors[:1])
    assert row.code == ANCHOR_ROW


def test_the_cli_prints_absolute_beside_anchored(cli):
    code, out, _ = cli("validate", str(RUNS), "--absolute")
    assert code == 0
    assert "compute NOT anchored" in out
    assert "absolute (ddlsim's own compute) vs anchored (scaling only)" in out
    assert "p100-sxm2 fp32 tensorflow" in out
    code, out, _ = cli("validate", str(RUNS), "--absolute", "--json")
    doc = json.loads(out)
    assert doc["summary"]["absolute"] is True
    assert "p100-sxm2 fp32 tensorflow" in doc["summary"]["by_gpu_precision_framework"]
    assert all(r["anchored"] is False for r in doc["rows"] if r["status"] == PREDICTED)


def test_predict_quotes_the_compute_error_its_figure_rests_on(cli):
    code, out, _ = cli("predict", "--gpus", "64")
    assert code == 0
    assert "scaling        horovod-nccl" in out and "(anchored to measured 1-GPU runs)" in out
    assert "1-GPU compute  p100-sxm2 fp32 tensorflow" in out
    none = lookup_absolute("a10", "fp32", "tensorflow")  # no TensorFlow run: A10's others
    assert none["framework"] is None and none["n"] >= 1
    own = lookup_absolute("h100", "amp", "pytorch")  # runs_modern.csv's H100 rows
    assert own["framework"] == "pytorch" and own["n"] >= 3
    assert format_absolute_line(own).startswith("h100 amp pytorch: ")
    none = lookup_absolute("p40", "fp32")
    assert none["n"] == 0 and "unchecked" in format_absolute_line(none)
