"""The failure model in sweeps and figures: its keywords as grid keys, its results as columns,
``ddlsim plot --kind goodput`` and ``--kind time-to-train``; goodput against N end to end."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

import ddlsim
from ddlsim.errors import ConfigError
from ddlsim.tools.analysis.grid import normalise_grid
from ddlsim.tools.analysis.sweep import (
    COLUMNS,
    FAILURE_INPUT_COLUMNS,
    RESILIENCE_COLUMNS,
    read_rows,
    run_grid,
    write_rows,
)

GRID = {
    "model": ["resnet50"],
    "gpu": ["v100"],
    "gpus": [64, 1024],
    "node_mtbf_hours": [0.0, 1024],
    "recovery": ["restart", "elastic"],
}


pytestmark = pytest.mark.usefixtures("no_user_calibration")


@pytest.fixture(scope="module")
def sweep_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "failures.csv"
    write_rows(run_grid(GRID), path)
    return path


def test_rows_hold_the_failure_model_as_predict_gives_it(sweep_csv: Path) -> None:
    with open(sweep_csv, encoding="utf-8", newline="") as fh:
        assert tuple(csv.DictReader(fh).fieldnames or ()) == COLUMNS
    rows = read_rows(sweep_csv)
    assert [r["status"] for r in rows] == ["ok"] * 8
    for r in rows:
        p = ddlsim.predict(
            "resnet50", int(r["gpus"]), gpu="v100", node_mtbf_hours=r["node_mtbf_hours"],
            recovery=r["recovery"],
        )  # fmt: skip
        assert r["time_to_train_s"] == pytest.approx(p.time_to_train_s, rel=1e-12)
        if r["node_mtbf_hours"] == 0:
            assert p.resilience is None
            assert all(r[c] is None for c in RESILIENCE_COLUMNS)
            continue
        e = p.resilience.expected
        assert r["expected_time_to_train_s"] == pytest.approx(e.time_s, rel=1e-12)
        assert r["goodput"] == pytest.approx(e.goodput, rel=1e-12)
        assert r["expected_failures"] == pytest.approx(e.failures, rel=1e-12)
        parts = ("checkpoint_s", "lost_s", "recovery_s", "degraded_s")
        extra = sum(r[c] for c in parts)
        assert r["time_to_train_s"] + extra == pytest.approx(r["expected_time_to_train_s"])
        assert (r["degraded_s"] > 0) == (r["recovery"] == "elastic")
        interval = p.resilience.costs.interval_s
        assert r["checkpoint_interval_s"] == (None if interval is None else pytest.approx(interval))
    assert {c for c in FAILURE_INPUT_COLUMNS if rows[0][c] is not None} == {
        "optimizer", "node_mtbf_hours", "checkpoint_write_GBps", "recovery", "rendezvous_s",
        "replace_min",
    }  # fmt: skip


def test_failure_keywords_are_grid_keys_checked_before_running() -> None:
    grid = normalise_grid(
        {"node-mtbf-hours": [0, "none", 1024], "checkpoint_interval_min": ["auto", 5],
         "recovery": "Elastic", "optimizer": ["adam"], "mc_draws": [0, 10]}
    )  # fmt: skip
    assert grid["node_mtbf_hours"] == [0, 0.0, 1024]
    assert grid["checkpoint_interval_min"] == [None, 5]
    assert grid["recovery"] == ["elastic"] and grid["optimizer"] == ["adam"]
    for raw, words in (
        ({"node_mtbf_hours": -1}, "sweep node_mtbf_hours: node MTBF must be 0 (no failures)"),
        ({"mc_draws": 1.5}, "Monte Carlo draws must be an integer in 0..10,000,000, got 1.5"),
        ({"checkpoint_GB": "x"}, "sweep checkpoint_GB: checkpoint size must be a number"),
        ({"recovery": "pray"}, "unknown recovery 'pray'"),
        ({"restart_min": math.nan}, "restart time must be a finite number >= 0 min, got nan"),
    ):
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            normalise_grid(raw)


def test_sweep_flags_take_the_failure_keywords(cli, tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    code, _, err = cli(
        "sweep", "--model", "alexnet", "--gpus", "16", "--node-mtbf-hours", "none", "500",
        "--checkpoint-interval-min", "auto", "2", "--serial", "--quiet", "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    rows = read_rows(out)
    assert [(r["node_mtbf_hours"], r["checkpoint_interval_min"]) for r in rows] == [
        (0.0, None), (0.0, 2.0), (500.0, None), (500.0, 2.0),
    ]  # fmt: skip
    assert rows[3]["checkpoint_interval_s"] == 120.0
    assert "--checkpoint-interval-min has no effect" not in err  # it applies to some rows


@pytest.mark.parametrize("kind", ["goodput", "time-to-train"])
def test_plot_draws_the_failure_columns(cli, sweep_csv: Path, tmp_path: Path, kind: str) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"{kind}.png"
    code, _, err = cli("plot", str(sweep_csv), "--kind", kind, "-o", str(out))
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_plot_of_a_sweep_without_failures_says_so(cli, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    sweep = tmp_path / "none.csv"
    write_rows(run_grid({"model": ["alexnet"], "gpus": [1, 8], "node_mtbf_hours": [0]}), sweep)
    out = tmp_path / "g.png"
    code, _, err = cli("plot", str(sweep), "--kind", "goodput", "-o", str(out))
    assert code == 2 and not out.exists()
    assert "none of its 2 configuration(s) models failures (node_mtbf_hours 0" in err


def test_goodput_never_increases_with_the_gpu_count_end_to_end() -> None:
    """Restart, fixed node MTBF: predictions from 8 to 16,384 GPUs (the work shrinks with the
    throughput) lose goodput at every step."""
    for mtbf in (1024, 6335):
        goodput = [
            ddlsim.predict(
                "resnet50", n, gpu="v100", node_mtbf_hours=mtbf
            ).resilience.expected.goodput
            for n in (8, 64, 512, 2048, 8192, 16384)
        ]
        assert goodput == sorted(goodput, reverse=True)
        assert goodput[-1] < goodput[0] < 1
