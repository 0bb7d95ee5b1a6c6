"""``ddlsim validate`` never refuses a file for one row; file-level defects; validate options.

Every test damages one row of a small good file (a baseline, an images/s row, an
efficiency-only row, and the row to damage) and checks that the damaged row is skipped with
the column and the cell named while the good rows are predicted exactly as in the clean file.
Expected numbers come from :func:`ddlsim.predict` with the same inputs, so a change in the
physical models does not break these tests; only the validation logic does.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddlsim
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.tools.validate.core import PREDICTED, SKIPPED, validate_file
from ddlsim.tools.validate.mapping import ValidateOptions
from ddlsim.tools.validate.runs import COLUMNS, DEFECT_CODES, REQUIRED_COLUMNS, load_runs, read_runs
from ddlsim.tools.validate.stats import error_stats, summarise

BASE = {
    "source_id": "G",
    "model": "resnet50",
    "gpu": "p100-sxm2",
    "intra_node": "nvlink-p100",
    "framework": "tensorflow",
    "batch_per_gpu": "64",
    "precision": "fp32",
    "data": "synthetic",
    "from_figure": "0",
    "note": "DGX-1, lab G",
}
GOOD = [
    {"run_id": "G-0001", "gpus": "1", "gpus_per_node": "1", "inter_node": "none", "comm": "ps",
     "images_per_sec": "219"},
    {"run_id": "G-0002", "gpus": "8", "gpus_per_node": "8", "inter_node": "none", "comm": "ps",
     "variant": "ps-vars-on-cpu", "images_per_sec": "1700"},
    {"run_id": "G-0003", "gpus": "16", "gpus_per_node": "8", "inter_node": "25gbe",
     "transport": "tcp", "comm": "horovod-nccl", "scaling_efficiency": "0.9"},
    {"run_id": "G-0004", "gpus": "16", "gpus_per_node": "8", "inter_node": "25gbe",
     "transport": "tcp", "comm": "horovod-nccl", "images_per_sec": "3000"},
]  # fmt: skip
DAMAGED = "G-0004"  # the row each test damages (line 5)


def csv_text(rows: list[dict[str, str]], columns: tuple[str, ...] = COLUMNS) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([{**BASE, **row}.get(c, "") for c in columns])
    return out.getvalue()


def write(tmp_path: Path, text: str, name: str = "runs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def damaged(column: str, value: str) -> list[dict[str, str]]:
    return [*GOOD[:3], {**GOOD[3], column: value}]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def by_id(results):
    return {r.run_id: r for r in results}


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory):
    path = write(tmp_path_factory.mktemp("clean"), csv_text(GOOD))
    return by_id(validate_file(load_runs(path)))


def expected_prediction(
    model: str = "resnet50", gpus: int = 16, **overrides: object
) -> ddlsim.Prediction:
    """:func:`ddlsim.predict` with the G file's cluster (16 GPUs on 25GbE unless overridden),
    as validate maps a row of it."""
    kwargs: dict[str, object] = {
        "gpu": "p100-sxm2",
        "gpus_per_node": 8,
        "intra_node": "nvlink-p100",
        "inter_node": "25gbe",
        "transport": "tcp",
        "comm": "horovod-nccl",
        "batch": 64,
        "precision": "fp32",
        "data": "synthetic",
        "single_gpu_throughput": 219.0,
    }
    return ddlsim.predict(model, gpus, **{**kwargs, **overrides})


def assert_good_rows_unchanged(results, clean) -> None:
    for rid in ("G-0002", "G-0003"):
        assert results[rid].status == PREDICTED
        assert results[rid].predicted_images_per_sec == clean[rid].predicted_images_per_sec
        assert results[rid].rel_error == clean[rid].rel_error


# --------------------------------------------------------------------------- bad cells and rows

BAD_CELLS = [
    ("gpus", "", "missing-value"),
    ("gpus", "eight", "bad-number"),
    ("gpus", "nan", "bad-number"),
    ("gpus", "inf", "bad-number"),
    ("gpus", "16.5", "bad-number"),
    ("gpus", "0", "not-positive"),
    ("gpus", "-16", "not-positive"),
    ("gpus_per_node", "eight", "bad-number"),
    ("gpus_per_node", "0", "not-positive"),
    ("n_ps", "-1", "not-positive"),
    ("batch_per_gpu", "sixty-four", "bad-number"),
    ("batch_per_gpu", "NaN", "bad-number"),
    ("batch_per_gpu", "0", "not-positive"),
    ("batch_per_gpu", "-64", "not-positive"),
    ("images_per_sec", "fast", "bad-number"),
    ("images_per_sec", "nan", "bad-number"),
    ("images_per_sec", "-inf", "bad-number"),
    ("images_per_sec", "0", "not-positive"),
    ("images_per_sec", "-3000", "not-positive"),
    ("scaling_efficiency", "0", "not-positive"),
    ("scaling_efficiency", "-0.9", "not-positive"),
    ("scaling_efficiency", "inf", "bad-number"),
    ("model", "", "missing-value"),
    ("gpu", "", "missing-value"),
    ("model", "resnet9000", "unknown-name"),
    ("gpu", "tpu-v9", "unknown-name"),
    ("intra_node", "warp-drive", "unknown-name"),
    ("inter_node", "carrier-pigeon", "unknown-name"),
    ("transport", "udp", "unknown-name"),
    ("comm", "mpi-magic", "unknown-name"),
    ("precision", "fp64", "unknown-name"),
    ("data", "imaginary", "unknown-name"),
    ("run_id", "", "no-run-id"),
    ("run_id", "G-0002", "duplicate-run-id"),
]


@pytest.mark.parametrize(("column", "value", "code"), BAD_CELLS)
def test_a_bad_cell_skips_its_row_only(tmp_path: Path, clean, column, value, code) -> None:
    results = validate_file(load_runs(write(tmp_path, csv_text(damaged(column, value)))))
    assert len(results) == 4 and [r.line for r in results] == [2, 3, 4, 5]
    bad = results[3]
    assert bad.status == SKIPPED and bad.code == code and bad.line == 5
    assert f"'{column}'" in (bad.reason or "")
    if value:
        assert repr(value) in (bad.reason or "")
        assert (bad.column, bad.value) == (column, value)
    assert_good_rows_unchanged(by_id(results[:3]), clean)


def test_a_row_with_the_wrong_number_of_fields(tmp_path: Path, clean) -> None:
    text = csv_text(GOOD[:3]) + "G-0004,G,resnet50,p100-sxm2,16\n"
    results = validate_file(load_runs(write(tmp_path, text)))
    bad = results[3]
    assert (bad.code, bad.line, bad.run_id, bad.source_id) == ("bad-fields", 5, "G-0004", "G")
    assert "5 field(s), the header has 20" in (bad.reason or "")
    assert_good_rows_unchanged(by_id(results[:3]), clean)


def test_cli_reports_bad_rows_in_text_and_json(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, csv_text(damaged("gpus", "eight")))
    code, out, err = run_cli(capsys, "validate", str(path))
    assert code == 0 and err == ""
    assert "[bad-number] line 5 G-0004: column 'gpus' must be an integer, got 'eight'" in out
    assert "4 rows: 2 predicted" in out
    code, out, _ = run_cli(capsys, "validate", str(path), "--json")
    assert code == 0
    doc = json.loads(out)
    row = doc["rows"][3]
    assert row["run_id"] == "G-0004" and row["status"] == "skipped"
    assert (row["skip_code"], row["line"], row["column"], row["value"]) == (
        "bad-number",
        5,
        "gpus",
        "eight",
    )
    assert row["gpus"] is None and row["source_id"] == "G"
    assert doc["summary"]["skipped_by_code"] == {"baseline-row": 1, "bad-number": 1}


def test_a_row_without_run_id_is_listed_by_line(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, csv_text(damaged("run_id", "")))
    code, out, _ = run_cli(capsys, "validate", str(path))
    assert code == 0 and "[no-run-id] line 5 (no run_id): column 'run_id' is empty" in out
    code, out, _ = run_cli(capsys, "validate", str(path), "--json")
    assert json.loads(out)["rows"][3]["run_id"] is None


def test_strict_reader_still_refuses_the_first_bad_row(tmp_path: Path) -> None:
    path = write(tmp_path, csv_text(damaged("images_per_sec", "nan")))
    with pytest.raises(ConfigError, match=r"runs\.csv:5: column 'images_per_sec' must be"):
        read_runs(path)
    assert [r.run_id for r in read_runs(write(tmp_path, csv_text(GOOD), "ok.csv"))] == [
        "G-0001",
        "G-0002",
        "G-0003",
        "G-0004",
    ]


NUMERIC = ("gpus", "gpus_per_node", "n_ps", "batch_per_gpu", "images_per_sec")
JUNK = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "0", "-0", "0.0", "-1", "1e-400", "1.5e400", "?"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet="0123456789.-+eEnaif x", max_size=8),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(column=st.sampled_from(NUMERIC), cell=JUNK)
def test_random_numeric_cells_never_refuse_the_file(tmp_path: Path, column: str, cell: str) -> None:
    table = load_runs(write(tmp_path, csv_text(damaged(column, cell))))
    assert [r.run_id for r in table.runs[:3]] == ["G-0001", "G-0002", "G-0003"]
    if table.defects:
        (defect,) = table.defects
        assert defect.code in DEFECT_CODES and defect.line == 5
        assert defect.column == column and f"'{column}'" in defect.reason
        if cell.strip():
            assert repr(cell.strip()) in defect.reason
        else:
            assert column == "gpus" and defect.code == "missing-value"
    else:  # accepted: then it is a positive finite number (an integer for counts)
        value = getattr(table.runs[3], column)
        assert (value is None and not cell.strip()) or value > 0
        if column != "images_per_sec" and value is not None:
            assert isinstance(value, int)


# --------------------------------------------------------------------------- file-level defects


@pytest.mark.parametrize("column", REQUIRED_COLUMNS)
def test_missing_required_column_is_one_error_line(tmp_path: Path, capsys, column: str) -> None:
    columns = tuple(c for c in COLUMNS if c != column)
    path = write(tmp_path, csv_text(GOOD, columns))
    code, out, err = run_cli(capsys, "validate", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("ddlsim: error: ") and f"lacks required column(s) {column}" in err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty file"),
        (csv_text(GOOD).encode() + b'G-0009,G,"resnet50\n', "malformed CSV"),
        (csv_text(GOOD).encode() + b"G-0009,G,r\xe9snet50\n", "not UTF-8"),
        (b"run_id,model,gpu,gpus,gpus,images_per_sec\n", "more than once"),
        (b"run_id,model,gpu,gpus\n", "neither images_per_sec nor scaling_efficiency"),
    ],
)
def test_file_level_defects_are_one_error_line(tmp_path: Path, capsys, content, words) -> None:
    path = tmp_path / "runs.csv"
    path.write_bytes(content)
    code, out, err = run_cli(capsys, "validate", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err


def test_unknown_source_is_an_error_listing_the_sources(tmp_path: Path, capsys) -> None:
    rows = [*GOOD, {**GOOD[1], "run_id": "H-0001", "source_id": "H"}]
    path = write(tmp_path, csv_text(rows))
    code, out, err = run_cli(capsys, "validate", str(path), "--source", "G", "--source", "NOPE")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--source NOPE" in err and "sources present: G, H" in err
    code, out, _ = run_cli(capsys, "validate", str(path), "--source", "H", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)["rows"]] == ["H-0001"]


# --------------------------------------------------------------------------- catalog assumptions


def test_rows_under_a_catalog_assumption_are_kept_out_of_the_headline(
    tmp_path: Path, capsys
) -> None:
    rows = [*GOOD, {**GOOD[3], "run_id": "G-0005", "inter_node": "ib", "transport": "rdma"}]
    path = write(tmp_path, csv_text(rows))
    results = by_id(validate_file(load_runs(path)))
    ib = results["G-0005"]
    assert ib.status == PREDICTED and "'ib'" in (ib.assumption or "")
    summary = summarise(list(results.values()))
    plain = [r for r in results.values() if r.status == PREDICTED and not r.assumption]
    assert summary["overall"] == error_stats(plain)
    assert summary["overall"]["n"] == 3 and summary["n_predicted"] == 4
    assert summary["catalog_assumption"]["overall"] == error_stats([ib])
    assert "ib rdma" not in summary["by_network"]
    assert all(ib.run_id != s["worst_run_id"] for s in summary["by_source"].values())
    code, out, _ = run_cli(capsys, "validate", str(path))
    assert code == 0
    assert "5 rows: 4 predicted (1 under a catalog assumption), 1 skipped" in out
    assert re.search(r"^rows without assumption +3 ", out, re.MULTILINE)
    assert "under a catalog assumption (not in the rows above)" in out
    assert "assumption: inter_node 'ib': bandwidth not stated by the source" in out
    assert "[catalog assumption]" in out
    code, out, _ = run_cli(capsys, "validate", str(path), "--json")
    row = json.loads(out)["rows"][4]
    assert row["assumption"] and "56 Gb/s" in row["assumption"]


def test_allow_assumed_bandwidth_is_gone(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, csv_text(GOOD))
    code, _, err = run_cli(capsys, "validate", str(path), "--allow-assumed-bandwidth")
    assert code == 2 and "unrecognized arguments" in err


# --------------------------------------------------------------------------- no baseline


def test_efficiency_row_without_baseline_uses_the_shipped_calibration(tmp_path: Path) -> None:
    rows = [{**r, "model": "vgg16"} if r["run_id"] in ("G-0003", "G-0004") else r for r in GOOD]
    results = by_id(validate_file(load_runs(write(tmp_path, csv_text(rows)))))
    eff = results["G-0003"]
    assert eff.status == PREDICTED and not eff.anchored and eff.baseline is None
    assert "compute not anchored: no single-GPU baseline in the file" in "; ".join(eff.notes)
    expected = expected_prediction("vgg16", single_gpu_throughput=None)
    assert eff.predicted_scaling_efficiency == expected.scaling_efficiency
    assert eff.rel_error == pytest.approx(expected.scaling_efficiency / 0.9 - 1, rel=1e-12)
    assert eff.to_json()["anchored"] is False
    ips = results["G-0004"]  # images/s and no baseline: still skipped
    assert ips.status == SKIPPED and ips.code == "no-baseline"
    assert summarise(list(results.values()))["by_compute"]["not anchored"]["n"] == 1


# --------------------------------------------------------------------------- options


def plan_kwargs(tmp_path: Path, options: ValidateOptions, rows=GOOD):
    from ddlsim.tools.validate.baseline import BaselineIndex
    from ddlsim.tools.validate.mapping import plan_row

    runs = read_runs(write(tmp_path, csv_text(rows), "plan.csv"))
    index = BaselineIndex(runs)
    return {r.run_id: plan_row(r, index, options) for r in runs}


def test_options_reach_predict(tmp_path: Path) -> None:
    options = ValidateOptions(
        nccl_version="2.0",
        horovod_version="0.9",
        host_contention=0.0,
        interference=False,
        rank_sigma=0.0,
        fusion_threshold_mb=32.0,
        cycle_time_ms=2.0,
    )
    kwargs = plan_kwargs(tmp_path, options)["G-0004"].kwargs
    assert kwargs is not None
    assert {k: kwargs[k] for k in ("nccl_version", "horovod_version", "host_contention")} == {
        "nccl_version": "2.0",
        "horovod_version": "0.9",
        "host_contention": 0.0,
    }
    assert kwargs["interference"] is False and kwargs["rank_sigma"] == 0.0
    assert (kwargs["fusion_threshold_mb"], kwargs["cycle_time_ms"]) == (32.0, 2.0)
    default = plan_kwargs(tmp_path, ValidateOptions())["G-0004"].kwargs
    assert default is not None and "nccl_version" not in default and default["interference"]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("nccl_version", "2.0"),
        ("horovod_version", "0.9"),
        ("host_contention", 0.0),
        ("interference", False),
    ],
)
def test_each_option_changes_the_prediction_as_predict_does(
    tmp_path: Path, option: str, value: object
) -> None:
    # 32 GPUs on 25 GbE over TCP: the exchange is long enough that each option moves the
    # iteration across Horovod's 1 ms cycles (on InfiniBand the NCCL version only changes
    # hidden communication, and the iteration can stay in the same cycle)
    row = {**GOOD[3], "gpus": "32"}
    path = write(tmp_path, csv_text([*GOOD[:3], row]))
    base = by_id(validate_file(load_runs(path)))["G-0004"]
    got = by_id(validate_file(load_runs(path), ValidateOptions(**{option: value})))["G-0004"]
    expected = expected_prediction(gpus=32, **{option: value})
    assert got.predicted_images_per_sec == expected.images_per_sec
    assert got.predicted_images_per_sec != base.predicted_images_per_sec


def test_assume_batch_fills_rows_whose_baseline_states_none(tmp_path: Path) -> None:
    rows = [{**r, "batch_per_gpu": ""} for r in GOOD]
    plain = by_id(validate_file(load_runs(write(tmp_path, csv_text(rows)))))
    assert plain["G-0002"].code == "no-batch"
    assert "neither by the row nor its single-GPU baseline" in (plain["G-0002"].reason or "")
    results = by_id(
        validate_file(load_runs(tmp_path / "runs.csv"), ValidateOptions(assume_batch=32))
    )
    row = results["G-0002"]
    assert row.status == PREDICTED and row.baseline is not None
    assert row.baseline.run_id == "G-0001"
    assert "batch_per_gpu not stated: 32 assumed (--assume-batch)" in row.notes
    expected = expected_prediction(
        gpus=8, inter_node="none", transport=None, comm="ps", ps_placement="cpu", batch=32
    )
    assert row.predicted_images_per_sec == expected.images_per_sec


def test_assume_batch_keys_the_baseline_and_yields_to_the_baselines_batch(tmp_path: Path) -> None:
    rows = [GOOD[0], {**GOOD[1], "batch_per_gpu": ""}]
    path = write(tmp_path, csv_text(rows))
    other = by_id(validate_file(load_runs(path), ValidateOptions(assume_batch=32)))["G-0002"]
    assert other.code == "no-baseline"  # no baseline at batch 32
    same = by_id(validate_file(load_runs(path), ValidateOptions(assume_batch=64)))["G-0002"]
    assert same.status == PREDICTED and same.baseline is not None
    both = ValidateOptions(assume_batch=32, assume_baseline_batch=True)
    row = by_id(validate_file(load_runs(path), both))["G-0002"]
    assert row.status == PREDICTED and "the baseline's 64 assumed" in "; ".join(row.notes)


def test_assume_precision_fills_the_precision(tmp_path: Path) -> None:
    rows = [{**r, "precision": ""} for r in GOOD]
    path = write(tmp_path, csv_text(rows))
    assert by_id(validate_file(load_runs(path)))["G-0002"].code == "no-precision"
    row = by_id(validate_file(load_runs(path), ValidateOptions(assume_precision="fp32")))["G-0002"]
    assert row.status == PREDICTED
    assert "precision not stated: fp32 assumed (--assume-precision)" in row.notes


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--nccl-version", "9.9", "NCCL version"),
        ("--nccl-version", "latest", "NCCL version"),
        ("--horovod-version", "1.0", "Horovod version"),
        ("--host-contention", "-0.1", "host contention"),
        ("--host-contention", "nan", "finite number"),
        ("--rank-sigma", "-1", "sigma"),
        ("--fusion-threshold-mb", "-5", "fusion threshold"),
        ("--cycle-time-ms", "1e9", "cycle time"),
        ("--assume-batch", "0", "positive integer"),
        ("--assume-batch", "8.5", "integer"),
        ("--assume-precision", "fp64", "invalid choice"),
    ],
)
def test_bad_option_values_are_one_error_line(
    tmp_path: Path, capsys, flag: str, value: str, words: str
) -> None:
    path = write(tmp_path, csv_text(GOOD))
    code, out, err = run_cli(capsys, "validate", str(path), f"{flag}={value}")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("ddlsim: error: ") and words in err


def test_new_options_on_the_command_line(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, csv_text(GOOD))
    argv = ["validate", str(path), "--json", "--nccl-version", "2.0", "--horovod-version", "0.9"]
    code, out, _ = run_cli(capsys, *argv, "--host-contention", "0", "--no-interference")
    assert code == 0
    row = json.loads(out)["rows"][3]
    got = ValidateOptions(
        nccl_version="2.0", horovod_version="0.9", host_contention=0.0, interference=False
    )
    want = by_id(validate_file(load_runs(path), got))["G-0004"]
    assert row["predicted_images_per_sec"] == want.predicted_images_per_sec
