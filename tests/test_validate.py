"""``ddlsim validate``: baselines, the row -> predict mapping, skipped rows, errors, JSON, plot.

Expected numbers are built by calling :func:`ddlsim.predict` with the baseline anchor, so a
change in the physical models does not break these tests; only the mapping does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.tools.validate.baseline import BaselineIndex, platform, stated_speedup
from ddlsim.tools.validate.core import PREDICTED, SKIPPED, validate_runs
from ddlsim.tools.validate.mapping import ValidateOptions, plan_row
from ddlsim.tools.validate.runs import COLUMNS, read_runs
from ddlsim.tools.validate.stats import error_stats, summarise

ROOT = Path(__file__).resolve().parents[1]
RUNS_CSV = ROOT / "traces" / "measured" / "runs.csv"
JSON_ROW_KEYS = (
    "run_id",
    "status",
    "reason",
    "predicted_images_per_sec",
    "measured_images_per_sec",
    "rel_error",
    "baseline_run_id",
)

HEADER = ",".join(COLUMNS)
# a hand-made file: a baseline (T-0001), an images/s row, an efficiency-only row, and one row
# for each reason to skip
SMALL_CSV = ROOT / "tests" / "data" / "validate_runs_small.csv"
BASELINE_LINE = SMALL_CSV.read_text(encoding="utf-8").splitlines()[1]


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def write_csv(tmp_path: Path, body: str, header: str = HEADER, name: str = "runs.csv") -> Path:
    path = tmp_path / name
    path.write_text(header + "\n" + body, encoding="utf-8")
    return path


@pytest.fixture
def small_csv() -> Path:
    return SMALL_CSV


def by_id(results):
    return {r.run.run_id: r for r in results}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- known answers


def test_images_row_equals_predict_with_the_baseline_anchor(small_csv: Path) -> None:
    row = by_id(validate_runs(read_runs(small_csv)))["T-0002"]
    expected = ddlsim.predict(
        "resnet50",
        8,
        gpu="p100-sxm2",
        gpus_per_node=8,
        intra_node="nvlink-p100",
        inter_node="none",
        comm="ps",
        batch=64,
        precision="fp32",
        data="synthetic",
        single_gpu_throughput=219.0,
    )
    assert row.status == PREDICTED
    assert row.baseline is not None and row.baseline.run_id == "T-0001"
    assert row.predicted_images_per_sec == expected.images_per_sec
    assert row.rel_error == expected.images_per_sec / 1700 - 1
    assert row.notes == ()  # ps-vars-on-cpu maps onto ps_placement="cpu"
    assert row.measured_scaling_efficiency == pytest.approx(1700 / (8 * 219))


def test_efficiency_only_row_is_validated_on_the_efficiency(small_csv: Path) -> None:
    row = by_id(validate_runs(read_runs(small_csv)))["T-0003"]
    expected = ddlsim.predict(
        "resnet50",
        16,
        gpu="p100-sxm2",
        gpus_per_node=8,
        intra_node="nvlink-p100",
        inter_node="25gbe",
        transport="tcp",
        comm="horovod-nccl",
        batch=64,
        single_gpu_throughput=219.0,
    )
    assert row.status == PREDICTED and row.metric == "scaling_efficiency"
    assert row.predicted_scaling_efficiency == expected.scaling_efficiency
    assert row.rel_error == pytest.approx(expected.scaling_efficiency / 0.9 - 1, rel=1e-12)
    assert row.to_json()["measured_images_per_sec"] is None


def test_skipped_rows_carry_their_reasons(small_csv: Path) -> None:
    results = by_id(validate_runs(read_runs(small_csv)))
    codes = {rid: r.code for rid, r in results.items() if r.status == SKIPPED}
    assert codes == {
        "T-0001": "baseline-row",
        "T-0004": "comm-not-modelled",
        "T-0005": "comm-not-stated",
        "T-0006": "no-batch",
        "T-0007": "no-precision",
        "T-0008": "no-baseline",
        "T-0010": "predict-error",
        "T-0011": "no-value",
        "T-0012": "network-unknown",
    }
    assert "'other'" in (results["T-0004"].reason or "")
    assert "not a multiple" in (results["T-0010"].reason or "")  # predict's own message
    assert all(r.reason for r in results.values() if r.status == SKIPPED)


def test_network_of_unstated_bandwidth_is_predicted_under_the_catalog_assumption(
    small_csv: Path,
) -> None:
    row = by_id(validate_runs(read_runs(small_csv)))["T-0009"]  # inter_node ib
    assert row.status == PREDICTED and row.anchored
    assert row.assumption is not None and "'ib'" in row.assumption
    assert "56 Gb/s" in row.assumption  # the catalog's FDR figure
    assert row.to_json()["assumption"] == row.assumption
    ok = by_id(validate_runs(read_runs(small_csv)))["T-0002"]
    assert ok.assumption is None and ok.to_json()["assumption"] is None


def test_assume_baseline_batch_fills_the_batch(small_csv: Path) -> None:
    opts = ValidateOptions(assume_baseline_batch=True)
    results = by_id(validate_runs(read_runs(small_csv), opts))
    assert results["T-0006"].status == PREDICTED
    assert "the baseline's 64 assumed" in results["T-0006"].notes[0]


def test_unknown_name_is_a_skip_reason_not_a_crash(tmp_path: Path) -> None:
    body = (
        BASELINE_LINE
        + "\nT-0002,T,resnet50,p100-sxm2,8,8,warp-drive,none,,ps,,,tensorflow,64,fp32,"
        "synthetic,1700,,0,x\n"
    )
    row = by_id(validate_runs(read_runs(write_csv(tmp_path, body))))["T-0002"]
    assert row.status == SKIPPED and row.code == "unknown-name"
    assert (row.column, row.value) == ("intra_node", "warp-drive")
    assert "'intra_node'" in (row.reason or "") and "'warp-drive'" in (row.reason or "")
    assert "nvlink-p100" in (row.reason or "")  # the valid names are listed


def test_variant_tokens_map_onto_predict_options(tmp_path: Path) -> None:
    body = (
        "\n".join(
            f"V-{i}1,V,resnet50,v100-sxm2,1,1,nvlink-v100,none,,{comm},,{variant},tensorflow,"
            f"128,fp32,real,300,,0,x\n"
            f"V-{i}2,V,resnet50,v100-sxm2,8,8,nvlink-v100,none,,{comm},,{variant},tensorflow,"
            f"128,fp32,real,2200,,0,x"
            for i, (comm, variant) in enumerate(
                [("horovod-nccl", "ngc-dle;dali"), ("ps", "ps-vars-on-gpu")]
            )
        )
        + "\n"
    )
    header = ",".join(COLUMNS) + "\n"
    path = tmp_path / "v.csv"
    path.write_text(header + body)
    index = BaselineIndex(read_runs(path))
    rows = {r.run_id: r for r in read_runs(path)}
    dali = plan_row(rows["V-02"], index, ValidateOptions())
    assert dali.kwargs is not None and dali.kwargs["input_pipeline"] == "dali"
    assert dali.notes == (
        "nccl_version not stated: 2.14 assumed (predict's default)",
        "horovod_version not stated: 0.28.1 assumed (predict's default)",
        "variant not mapped: ngc-dle",
    )
    gpu_vars = plan_row(rows["V-12"], index, ValidateOptions())
    assert gpu_vars.kwargs is not None and gpu_vars.kwargs["ps_placement"] == "gpu"
    assert "input_pipeline" not in gpu_vars.kwargs and gpu_vars.notes == ()


# --------------------------------------------------------------------------- baselines


def test_stated_speedup_and_platform_pick_the_baseline(tmp_path: Path) -> None:
    body = (
        "S-0001,S,vgg16,p100-pcie,1,1,,none,,single,,,tensorflow,64,fp32,,134.4,,0,table A\n"
        "S-0002,S,vgg16,p100-pcie,1,1,,none,,single,,,tensorflow,64,fp32,,149.6,,0,table B\n"
        "S-0003,S,vgg16,p100-pcie,16,4,,25gbe,tcp,ps,,,tensorflow,64,fp32,,74.7,,0,"
        '"row; speedup 0.6x"\n'
        "S-0004,S,vgg16,p100-pcie,16,4,,25gbe,tcp,ps,,,tensorflow,64,fp32,,1100,,0,"
        '"table B, run 2"\n'
        "S-0005,S,vgg16,p100-pcie,16,4,,25gbe,tcp,ps,,,tensorflow,64,fp32,,1100,,0,other\n"
    )
    runs = read_runs(write_csv(tmp_path, body.replace("134.4,,0,table A", "130.9,,0,table A")))
    index = BaselineIndex(runs)
    s3, s4, s5 = runs[2], runs[3], runs[4]
    assert index.choose(s3).run.run_id == "S-0001"  # 74.7 / 130.9 = 0.57 -> "0.6"
    assert index.choose(s4).run.run_id == "S-0002"  # same platform "table B"
    ambiguous = index.choose(s5)
    assert ambiguous.run is None and ambiguous.code == "ambiguous-baseline"
    assert "S-0001" in ambiguous.reason and "S-0002" in ambiguous.reason


def test_speedup_and_platform_parsing() -> None:
    assert stated_speedup("README row; speedup 10.0x; batch not stated") == (10.0, 0.05 + 1e-9)
    assert stated_speedup("table; speedup 3.84") == pytest.approx((3.84, 0.005))
    assert stated_speedup("no speed-up here") is None
    assert platform("AWS p2.8xlarge, EFS; table main") == "aws p2.8xlarge"


# --------------------------------------------------------------------------- the file


def test_extra_columns_ignored_and_optional_columns_tolerated(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path,
        "A-1,resnet50,p100-sxm2,1,ps,64,fp32,219,x\nA-2,resnet50,p100-sxm2,8,ps,64,fp32,1700,y\n"
        "A-3,resnet50,p100-sxm2,8,ps,,fp32,1700,z\n",
        header="run_id,model,gpu,gpus,comm,batch_per_gpu,precision,images_per_sec,my_column",
    )
    runs = read_runs(path)
    assert [r.run_id for r in runs] == ["A-1", "A-2", "A-3"]
    results = by_id(validate_runs(runs))
    assert results["A-2"].status == PREDICTED
    assert "data not stated: synthetic assumed" in results["A-2"].notes
    assert results["A-3"].code == "no-batch"


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ("T-1,T,resnet50,p100-sxm2,1\n", 2, "field(s)"),
        (BASELINE_LINE + "\nT-9,T,resnet50,p100-sxm2,eight" + "," * 15 + "\n", 3, "integer"),
        (BASELINE_LINE + '\nT-9,T,"resnet50,p100\n', 3, "malformed CSV"),
        (BASELINE_LINE + "\n" + BASELINE_LINE + "\n", 3, "duplicate run_id"),
        ("T-1,T,resnet50,p100,1,1,,none,,ps,,,tf,64,fp32,,-5,,0,x\n", 2, "positive number"),
    ],
)
def test_malformed_file_names_the_line(tmp_path: Path, body: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        read_runs(write_csv(tmp_path, body))
    assert f"runs.csv:{line}:" in str(exc.value) and words in str(exc.value)


def test_header_without_required_columns(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lacks required column"):
        read_runs(write_csv(tmp_path, "1,2\n", header="model,gpu"))


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    code, out, err = run_cli(capsys, "validate", str(tmp_path / "missing.csv"))
    assert code == 2 and out == ""
    assert err.startswith("ddlsim: error: cannot read") and err.count("\n") == 1
    bad = write_csv(tmp_path, BASELINE_LINE + '\nT-9,T,"resnet50,p100\n')
    code, _, err = run_cli(capsys, "validate", str(bad))
    assert code == 2 and "runs.csv:3:" in err and "malformed CSV" in err
    assert err.count("\n") == 1


# --------------------------------------------------------------------------- outputs


def test_json_schema(small_csv: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, "validate", str(small_csv), "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"rows", "summary"}
    assert [r["run_id"] for r in doc["rows"]] == [f"T-{i:04d}" for i in range(1, 13)]
    for row in doc["rows"]:
        assert list(row)[: len(JSON_ROW_KEYS)] == list(JSON_ROW_KEYS)
        assert row["status"] in ("predicted", "skipped")
        assert (row["reason"] is None) == (row["status"] == "predicted")
    summary = doc["summary"]
    assert summary["n_predicted"] == 3 and summary["n_skipped"] == 9
    for key in ("overall", "by_source", "by_comm", "by_gpu", "by_network", "by_compute"):
        assert key in summary
    assert set(summary["overall"]) >= {"n", "mape", "median_ape", "p90_ape", "worst_run_id"}
    # T-0009 (ib: bandwidth assumed) is predicted but kept out of the headline
    assert summary["overall"]["n"] == 2 and summary["n_under_catalog_assumption"] == 1
    assert summary["catalog_assumption"]["overall"]["worst_run_id"] == "T-0009"
    assert list(summary["catalog_assumption"]["by_network"]) == ["ib rdma"]
    assert all("ib" not in net for net in summary["by_network"])


def test_text_report(small_csv: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, "validate", str(small_csv))
    assert code == 0
    assert "T-0002" in out and "by comm method" in out and "skipped rows (9)" in out
    assert "[no-baseline]" in out


def test_stats_figures() -> None:
    class R:
        def __init__(self, rid: str, err: float) -> None:
            self.status, self.rel_error, self.run = PREDICTED, err, type("X", (), {"run_id": rid})

    stats = error_stats([R("a", 0.1), R("b", -0.3), R("c", 0.2)])  # type: ignore[list-item]
    assert stats["mape"] == pytest.approx(0.2)
    assert stats["median_ape"] == pytest.approx(0.2)
    assert stats["worst_run_id"] == "b" and stats["worst_rel_error"] == -0.3
    assert error_stats([])["n"] == 0


def test_plot_is_a_png(small_csv: Path, tmp_path: Path, capsys) -> None:
    png = tmp_path / "out.png"
    code, _, err = run_cli(capsys, "validate", str(small_csv), "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib(small_csv: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run_cli(capsys, "validate", str(small_csv), "--plot", str(tmp_path / "x.png"))
    assert code == 2 and "pip install -e '.[plot]'" in err


# --------------------------------------------------------------------------- the shipped file


@pytest.fixture(scope="module")
def shipped_results():
    runs = read_runs(RUNS_CSV)
    return runs, validate_runs(runs)


def test_every_shipped_row_is_reported(shipped_results) -> None:
    runs, results = shipped_results
    assert [r.run.run_id for r in results] == [r.run_id for r in runs]
    assert all(r.reason for r in results if r.status == SKIPPED)
    assert not [r.run.run_id for r in results if r.code == "predict-error"]
    summary = summarise(results)
    assert summary["n_predicted"] >= 150
    assert summary["overall"]["mape"] is not None


def test_shipped_baselines_follow_the_stated_speedups(shipped_results) -> None:
    _, results = shipped_results
    got = {r.run.run_id: r.baseline.run_id for r in results if r.baseline}
    assert got["DLPERF2020-0012"] == "DLPERF2020-0011"  # speedup 3.64 vs 1198.55 img/s
    assert got["DLPERF2020-0020"] == "DLPERF2020-0019"  # same key, speedup 3.66 vs 1202.23
    assert got["TFBENCH2017-0087"] == "TFBENCH2017-0072"  # GCE, not AWS (platform)
    assert got["TFBENCH2017-0143"] == "TFBENCH2017-0128"  # AWS p2.8xlarge
