"""``ddlsim predict`` with the failure model's flags: the report section, ``--json``, bad input."""

from __future__ import annotations

import json

import pytest

from ddlsim.api import predict
from ddlsim.resilience import ResilienceConfig, from_prediction, job_from_prediction
from ddlsim.resilience.config import DEFAULT_NODE_MTBF_S, HOUR_S

BASE = ("predict", "--model", "resnet50", "--gpu", "v100", "--gpus", "64")


def run_json(cli, *argv: str) -> dict:
    code, out, err = cli(*BASE, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_default_predict_has_no_failure_section(cli) -> None:
    assert "resilience" not in run_json(cli)
    code, out, _ = cli(*BASE)
    assert code == 0
    assert "with failures" not in out


def test_failures_flag_adds_the_json_field_with_the_defaults(cli) -> None:
    doc = run_json(cli, "--failures")
    r = doc["resilience"]
    assert r["recovery"] == "restart"
    assert r["node_mtbf_s"] == DEFAULT_NODE_MTBF_S
    assert r["nodes"] == 8
    assert r["job_mtbf_s"] == pytest.approx(DEFAULT_NODE_MTBF_S / 8)
    assert r["checkpoint_bytes"] == 25_557_032 * 8  # fp32 weights + momentum
    assert r["failure_free_time_to_train_s"] == doc["time_to_train_s"]
    e = r["expected"]
    assert doc["time_to_train_s"] < e["time_to_train_s"]
    assert 0.99 < e["goodput"] < 1
    assert r["monte_carlo"] is None


def test_no_failures_is_todays_time_to_train_exactly(cli) -> None:
    doc = run_json(cli, "--node-mtbf-hours", "none", "--mc-draws", "100")
    e = doc["resilience"]["expected"]
    assert e["time_to_train_s"] == doc["time_to_train_s"]
    assert e["goodput"] == 1.0
    assert e["failures"] == 0
    assert run_json(cli, "--node-mtbf-hours", "0")["resilience"]["node_mtbf_s"] is None


def test_flags_reach_the_model(cli) -> None:
    doc = run_json(
        cli,
        "--node-mtbf-hours", "1024", "--recovery", "elastic", "--optimizer", "adam",
        "--rendezvous-s", "30", "--replace-min", "5", "--mc-draws", "500", "--mc-seed", "4",
    )  # fmt: skip
    r = doc["resilience"]
    assert r["node_mtbf_s"] == 1024 * HOUR_S
    assert r["recovery"] == "elastic"
    assert r["checkpoint_bytes"] == 25_557_032 * 12
    assert r["recover_s"] == 30
    assert r["replace_s"] == 300
    assert r["monte_carlo"]["draws"] == 500
    assert r["config"]["seed"] == 4
    assert r["nodes_present"] < 1
    restart = run_json(
        cli, "--checkpoint-time-s", "30", "--restart-min", "2", "--checkpoint-interval-min", "20"
    )["resilience"]
    assert restart["save_s"] == 30
    assert restart["recover_s"] == 120
    assert restart["interval_s"] == 1200
    assert restart["interval_auto"] is False


def test_cli_equals_the_api(cli) -> None:
    doc = run_json(cli, "--node-mtbf-hours", "500", "--checkpoint-write-GBps", "2")
    pred = predict("resnet50", 64, gpu="v100")
    cfg = ResilienceConfig(node_mtbf_s=500 * HOUR_S, checkpoint_write_Bps=2e9)
    assert doc["resilience"]["expected"] == from_prediction(pred, cfg).to_dict()["expected"]
    job = job_from_prediction(pred)
    assert job.nodes == 8
    assert job.work_s == pred.time_to_train_s
    assert job.gpu_memory_bytes == 16 * 2**30


def test_text_report_section(cli) -> None:
    code, out, _ = cli(*BASE, "--node-mtbf-hours", "1024", "--mc-draws", "300")
    assert code == 0
    assert "with failures: restart from the last checkpoint" in out
    assert "node MTBF          1,024 h (Kokolis et al. 2024); 8 nodes: job MTBF 5.3 days" in out
    assert "0.204 GB (fp32 weights + momentum), written in 204.5 ms at 1 GB/s" in out
    for words in ("goodput", "writing checkpoints", "restarting", "Monte Carlo", "p10 / p50"):
        assert words in out
    code, out, _ = cli(*BASE, "--recovery", "elastic")
    assert "with failures: elastic (Horovod Elastic" in out
    assert "training on fewer nodes" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--node-mtbf-hours", "-3"), "argument --node-mtbf-hours: a node MTBF must be a finite"),
        (("--node-mtbf-hours", "nan"), "a node MTBF must be a finite number of hours > 0"),
        (("--checkpoint-write-GBps", "0"), "--checkpoint-write-GBps: must be a number > 0"),
        (
            ("--checkpoint-time-s", "120", "--checkpoint-interval-min", "1"),
            "checkpoint interval 60 s is shorter than one checkpoint write (120 s)",
        ),
        (("--checkpoint-GB", "20"), "checkpoint of 20 GB is larger than one GPU's memory (16 GiB)"),
        (("--mc-draws", "-1"), "argument --mc-draws: must be an integer >= 0, got -1"),
        (("--recovery", "elastic", "--gpus", "8"), "elastic recovery needs at least 2 nodes"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(cli, argv: tuple[str, ...], words: str) -> None:
    code, out, err = cli(*BASE, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("ddlsim: error: ")
    assert words in err
    assert err.count("\n") == 1


def test_from_json_takes_the_failure_flags(cli, tmp_path) -> None:
    code, out, _ = cli(*BASE, "--json")
    path = tmp_path / "r.json"
    path.write_text(out, encoding="utf-8")
    code, again, err = cli("predict", "--from-json", str(path), "--failures", "--json")
    assert code == 0, err
    assert (
        json.loads(again)["resilience"]["failure_free_time_to_train_s"]
        == json.loads(out)["time_to_train_s"]
    )


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--rendezvous-s", "30"), "--rendezvous-s has no effect with --recovery restart"),
        (("--recovery", "elastic", "--restart-min", "3"), "--restart-min has no effect with"),
        (("--mc-seed", "3", "--failures"), "--mc-seed has no effect without --mc-draws"),
        (("--node-mtbf-hours", "none", "--mc-draws", "9"), "--mc-draws has no effect without"),
    ],
)
def test_a_flag_without_effect_warns_once(cli, argv: tuple[str, ...], words: str) -> None:
    code, _, err = cli(*BASE, *argv)
    assert code == 0
    assert err.count(words) == 1
    assert err.startswith("ddlsim: warning: ")


def test_failure_timeline_file(cli, tmp_path) -> None:
    path = tmp_path / "run.json"
    code, _, err = cli(*BASE, "--node-mtbf-hours", "100", "--failure-timeline", str(path))
    assert code == 0, err
    trace = json.loads(path.read_text(encoding="utf-8"))
    assert trace["metadata"]["failures"] >= 1
    assert {"train", "checkpoint", "lost work", "restart"} <= {
        e["name"] for e in trace["traceEvents"]
    }
    code, out, err = cli(*BASE, "--failure-timeline", str(tmp_path / "run.csv"))
    assert code == 2 and out == "" and "--failure-timeline" in err
    assert not (tmp_path / "run.csv").exists()
