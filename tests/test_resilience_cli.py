"""The failure model as part of the job: its fields, ``predict`` (report, ``--json``, the
record, ``--from-json``), bad input and the flags without effect, ``timeline --failure``."""

from __future__ import annotations

import json

import pytest

import ddlsim
from ddlsim.api import predict
from ddlsim.config.groups import JobConfig, job
from ddlsim.errors import ConfigError
from ddlsim.resilience import ResilienceConfig, from_prediction, job_from_prediction
from ddlsim.resilience.config import DEFAULT_NODE_MTBF_HOURS, DEFAULT_NODE_MTBF_S, HOUR_S
from ddlsim.resilience.state import checkpoint_bytes

BASE = ("predict", "--model", "resnet50", "--gpu", "v100", "--gpus", "64")


def run_json(cli, *argv: str) -> dict:
    code, out, err = cli(*BASE, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_failures_are_modelled_by_default(cli) -> None:
    doc = run_json(cli)
    r = doc["resilience"]
    assert r["recovery"] == "restart"
    assert r["node_mtbf_s"] == DEFAULT_NODE_MTBF_S
    assert r["nodes"] == 8
    assert r["job_mtbf_s"] == pytest.approx(DEFAULT_NODE_MTBF_S / 8)
    assert r["checkpoint_bytes"] == 25_557_032 * 8  # fp32 weights + momentum
    assert r["failure_free_time_to_train_s"] == doc["time_to_train_s"]
    e = r["expected"]
    assert doc["time_to_train_s"] < e["time_to_train_s"]
    assert e["goodput"] == pytest.approx(doc["time_to_train_s"] / e["time_to_train_s"])
    assert 0.99 < e["goodput"] < 1
    assert r["monte_carlo"] is None
    kwargs = doc["inputs"]["predict_kwargs"]
    assert kwargs["node_mtbf_hours"] == DEFAULT_NODE_MTBF_HOURS
    assert kwargs["recovery"] == "restart" and kwargs["optimizer"] == "auto"  # = momentum
    assert kwargs["checkpoint_interval_min"] is None and kwargs["mc_draws"] == 0


def test_no_failures_is_todays_time_to_train_exactly(cli) -> None:
    default = run_json(cli)
    for word in ("0", "none", "NONE"):
        doc = run_json(cli, "--node-mtbf-hours", word)
        assert doc["resilience"] is None
        assert doc["inputs"]["predict_kwargs"]["node_mtbf_hours"] == 0
        assert doc["time_to_train_s"] == default["time_to_train_s"]
    p = predict("resnet50", 64, gpu="v100", node_mtbf_hours=0)
    assert p.resilience is None
    assert p.time_to_train_s == 90 * 1_281_167 / p.images_per_sec
    code, out, _ = cli(*BASE, "--node-mtbf-hours", "0")
    assert code == 0
    assert "  with failures: not modelled (--node-mtbf-hours 0)\n" in out


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
    sized = run_json(cli, "--checkpoint-GB", "2", "--checkpoint-write-GBps", "4")["resilience"]
    assert sized["checkpoint_bytes"] == 2e9
    assert sized["save_s"] == pytest.approx(0.5)
    assert run_json(cli, "--checkpoint-interval-min", "auto")["resilience"]["interval_auto"]


def test_cli_equals_the_api(cli) -> None:
    doc = run_json(cli, "--node-mtbf-hours", "500", "--checkpoint-write-GBps", "2")
    pred = predict("resnet50", 64, gpu="v100", node_mtbf_hours=500, checkpoint_write_GBps=2)
    assert doc["resilience"] == json.loads(json.dumps(pred.to_dict()["resilience"]))
    alone = from_prediction(
        pred, ResilienceConfig(node_mtbf_s=500 * HOUR_S, checkpoint_write_Bps=2e9)
    )
    assert pred.resilience == alone
    j = job_from_prediction(pred)
    assert j.nodes == 8
    assert j.work_s == pred.time_to_train_s
    assert j.gpu_memory_bytes == 16 * 2**30


def test_the_job_converts_its_fields_to_the_model_s_si_units() -> None:
    j = job(
        "vgg16", 64, optimizer="sgd", checkpoint_GB=3, node_mtbf_hours=2, checkpoint_write_GBps=5,
        checkpoint_time_s=7, recovery="elastic", checkpoint_interval_min=4, restart_min=6,
        rendezvous_s=8, replace_min=9, mc_draws=10, mc_seed=11,
    )  # fmt: skip
    assert j.workload.optimizer == "sgd" and j.system.node_mtbf_hours == 2
    assert j.execution.recovery == "elastic" and j.simulation.mc_draws == 10
    assert j.resilience() == ResilienceConfig(
        node_mtbf_s=7200, recovery="elastic", optimizer="sgd", checkpoint_write_Bps=5e9,
        checkpoint_time_s=7, checkpoint_bytes=3e9, interval_s=240, restart_s=360,
        rendezvous_s=8, replace_s=540, mc_draws=10, seed=11,
    )  # fmt: skip
    assert job(node_mtbf_hours=0).resilience() is None
    assert JobConfig().resilience() == ResilienceConfig()  # the job's defaults are the model's


def test_a_cpu_worker_commits_within_its_memory() -> None:
    p = ddlsim.predict(
        "alexnet", 4, gpu="epyc-zen4-core", comm="horovod-gloo", gpus_per_node=1,
        recovery="elastic",
    )  # fmt: skip
    assert p.inputs["host_bandwidth_GBps"] is None
    state = checkpoint_bytes("alexnet", "fp32", "momentum")
    assert p.resilience.costs.save_s == pytest.approx(state / (46e9 / 2))  # read + write


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--node-mtbf-hours", "-3"), "node MTBF must be 0 (no failures) or a number of hours"),
        (("--node-mtbf-hours", "nan"), "argument --node-mtbf-hours: expected hours or none, got"),
        (("--node-mtbf-hours", "1e-9"), "in 0.001..1e+09, got 1e-09"),
        (("--checkpoint-write-GBps", "0"), "--checkpoint-write-GBps: must be a number > 0"),
        (
            ("--checkpoint-time-s", "120", "--checkpoint-interval-min", "1"),
            "checkpoint interval 60 s is shorter than one checkpoint write (120 s)",
        ),
        (
            ("--checkpoint-interval-min", "0.001", "--checkpoint-time-s", "0.01"),
            "checkpoint interval 0.06 s is shorter than one iteration",
        ),
        (("--checkpoint-interval-min", "never"), "expected minutes or auto, got 'never'"),
        (("--checkpoint-GB", "20"), "checkpoint of 20 GB is larger than one GPU's memory (16 GiB)"),
        (("--mc-draws", "-1"), "Monte Carlo draws must be an integer in 0..10,000,000, got -1"),
        (("--restart-min", "1e12"), "restart time must be at most 100 years"),
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


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"node_mtbf_hours": float("inf")}, "node MTBF must be 0 (no failures) or a number"),
        ({"checkpoint_write_GBps": 0}, "checkpoint write bandwidth must be a number in"),
        (
            {"optimizer": "adagrad"},
            "optimizer must be one of auto, sgd, momentum, adam, adamw, lamb",
        ),
        ({"recovery": "pray"}, "recovery must be one of restart, elastic, got 'pray'"),
        ({"rendezvous_s": -1}, "re-rendezvous time must be a finite number >= 0 s, got -1"),
        ({"mc_seed": -2}, "Monte Carlo seed must be a non-negative integer, got -2"),
    ],
)
def test_the_job_refuses_bad_failure_inputs(kwargs: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        job("resnet50", 8, **kwargs)


def test_from_json_re_runs_the_failure_model(cli, tmp_path) -> None:
    code, out, _ = cli(*BASE, "--node-mtbf-hours", "300", "--recovery", "elastic", "--json")
    path = tmp_path / "r.json"
    path.write_text(out, encoding="utf-8")
    code, again, err = cli("predict", "--from-json", str(path), "--json")
    assert code == 0, err
    assert json.loads(again)["resilience"] == json.loads(out)["resilience"]
    code, _, err = cli("predict", "--from-json", str(path), "--mc-draws", "10")
    assert code == 2 and "drop --mc-draws" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--rendezvous-s", "30"), "--rendezvous-s has no effect with --node-mtbf-hours 6334.63, "
         "--recovery restart (it applies to --recovery elastic with failures)"),
        (("--recovery", "elastic", "--restart-min", "3"), "--restart-min has no effect with"),
        (("--mc-seed", "3"), "--mc-seed has no effect with --node-mtbf-hours 6334.63, "
         "--mc-draws 0"),
        (("--node-mtbf-hours", "none", "--mc-draws", "9"), "--mc-draws has no effect with "
         "--node-mtbf-hours 0"),
        (("--node-mtbf-hours", "0", "--recovery", "elastic"), "--recovery has no effect with"),
        (("--checkpoint-GB", "1", "--optimizer", "adam"), "--optimizer has no effect with"),
    ],
)  # fmt: skip
def test_a_flag_without_effect_warns_once(cli, argv: tuple[str, ...], words: str) -> None:
    code, _, err = cli(*BASE, *argv)
    assert code == 0
    assert err.count(words) == 1
    assert err.startswith("ddlsim: warning: ")


def test_timeline_failure_writes_the_course_of_a_failure(cli, tmp_path) -> None:
    path = tmp_path / "run.json"
    base = ("timeline", "--model", "resnet50", "--gpu", "v100", "--gpus", "64")
    code, _, err = cli(*base, "--node-mtbf-hours", "100", "--failure", "-o", str(path))
    assert code == 0, err
    assert "one restart run of 8 node(s)" in err
    trace = json.loads(path.read_text(encoding="utf-8"))
    meta = trace["metadata"]
    assert meta["failures"] >= 1 and meta["generator"] == "ddlsim timeline --failure"
    assert meta["inputs"]["predict_kwargs"]["node_mtbf_hours"] == 100
    assert {"train", "checkpoint", "lost work", "restart"} <= {
        e["name"] for e in trace["traceEvents"]
    }
    code, out, err = cli("predict", "--from-json", str(path), "--json")  # the trace re-runs
    assert code == 0, err
    assert json.loads(out)["resilience"] == meta["resilience"]
    elastic = tmp_path / "elastic.json"
    code, _, err = cli(
        *base, "--recovery", "elastic", "--failure", "--workers", "0", "-o", str(elastic)
    )
    assert code == 0 and "--workers has no effect with --failure" in err
    assert "node 0 away" in {e["name"] for e in json.loads(elastic.read_text())["traceEvents"]}


def test_timeline_failure_needs_failures(cli, tmp_path) -> None:
    path = tmp_path / "run.json"
    code, out, err = cli(
        "timeline", "--model", "resnet50", "--gpus", "16", "--node-mtbf-hours", "0",
        "--failure", "-o", str(path),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert "a failure timeline needs failures" in err and err.count("\n") == 1
    assert not path.exists()


@pytest.mark.parametrize("recovery", ["restart", "elastic"])
def test_a_job_that_never_completes_is_reported_not_a_traceback(cli, recovery: str) -> None:
    argv = ("--gpus", "16384", "--node-mtbf-hours", "0.001", "--recovery", recovery)
    doc = run_json(cli, *argv)
    assert doc["resilience"]["expected"]["time_to_train_s"] is None  # infinite
    assert doc["resilience"]["expected"]["goodput"] == 0
    code, out, _ = cli(*BASE, *argv)
    assert code == 0
    assert "never: the job practically never completes" in out


def test_a_failure_timeline_too_large_to_open_is_refused_before_tracing(cli, tmp_path) -> None:
    path = tmp_path / "run.json"
    code, out, err = cli(
        "timeline", "--model", "resnet50", "--gpus", "16", "--epochs", "1e5",
        "--node-mtbf-hours", "1", "--failure", "-o", str(path),
    )  # fmt: skip
    assert code == 2 and out == "" and not path.exists()
    assert "the failure timeline would hold ~3,1" in err and "more than the 2,000,000" in err


def test_the_iteration_timeline_warns_about_failure_flags(cli, tmp_path) -> None:
    path = tmp_path / "it.json"
    code, _, err = cli(
        "timeline", "--model", "alexnet", "--gpus", "8", "--recovery", "elastic", "-o", str(path)
    )
    assert code == 0 and path.exists()
    assert err.count("--recovery has no effect without --failure") == 1
