"""Bounded work (issue 11, item 4): the detailed engine's events and memory are estimated before
it runs and a run over the budget is refused with one line; absurd sweeps and traces likewise.
"""

from __future__ import annotations

import time

import pytest

from ddlsim import api
from ddlsim.cli.main import main
from ddlsim.engine import budget
from ddlsim.engine.plan import plan_from_dag
from ddlsim.errors import ConfigError

pytestmark = pytest.mark.usefixtures("no_user_calibration")


@pytest.mark.parametrize(
    "model, gpus, kwargs",
    [
        ("resnet50", 64, {}),
        ("alexnet", 128, {"comm": "ps"}),
        ("inception3", 16, {"comm": "distributed-replicated"}),
        ("vgg16", 16, {"comm": "byteps"}),
        ("resnet50", 64, {"hierarchical": True}),
        ("googlenet", 32, {"comm": "horovod-mpi", "data": "real"}),
        ("resnet50", 16, {"schedule": "bytescheduler"}),
        ("alexnet", 32, {"comm": "ps", "schedule": "bytescheduler"}),
    ],
)
def test_the_estimate_counts_what_the_run_does(model, gpus, kwargs):
    setup = api.prepare(api.job(model, gpus, **kwargs))
    plan = plan_from_dag(setup.dag, with_comm=True)
    horovod = setup.strategy.is_horovod
    est = budget.estimate_detailed(
        plan, setup.comm, gpus, 5, 1, limit=float("inf"), horovod=horovod
    )
    flows = steps = 0
    for op in plan.ops:
        for step in setup.comm.schedule(op.nbytes, op.op, op.channel).steps:
            steps += 5 * step.repeat * (step.n_flows > 0)
            flows += 5 * step.repeat * step.n_flows
    assert (est.flows, est.steps) == (flows, steps)  # exact: the plan's schedules themselves
    run = api.prepare(api.job(model, gpus, **kwargs))
    got = run.simulate(api.sim_options(api.SimulationConfig(engine="detailed"))).work
    assert est.worker_steps == got.worker_steps  # exact: the workers' program
    # Horovod fuses ops pending at the same cycle (fewer, larger collectives than planned)
    assert got.loop_events <= est.loop_events <= 2 * got.loop_events
    assert got.flows <= est.flows <= 2 * got.flows
    assert 0.5 * got.events <= est.events <= 2 * got.events
    weighted = budget.PROCESS_EVENT_WEIGHT * (est.worker_steps + est.loop_events + est.steps)
    weighted += budget.LANE_WEIGHT * gpus * est.worker_steps
    assert est.events == budget.FLOW_WEIGHT * est.flows + weighted


def test_memory_estimate_grows_with_workers_and_operations():
    setup = api.prepare(api.job("resnet50", 8))
    plan = plan_from_dag(setup.dag, with_comm=True)
    small = budget.estimate_detailed(plan, setup.comm, 8, 5, 1, limit=1e30)
    per_worker = budget.WORKER_BYTES + budget.WORKER_OP_ITERATION_BYTES * 5 * len(plan.ops)
    big_setup = api.prepare(api.job("resnet50", 64))
    big = budget.estimate_detailed(
        plan_from_dag(big_setup.dag, with_comm=True), big_setup.comm, 64, 5, 1, limit=1e30
    )
    assert big.memory_bytes - small.memory_bytes >= 56 * per_worker


def test_a_million_gpus_is_refused_at_once_naming_the_limit_and_the_fast_engine(capsys):
    start = time.perf_counter()
    code = main(["predict", "--engine", "detailed", "--gpus", "1000000"])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--max-events 2e+10" in err and "--engine fast" in err and "1,000,000 GPUs" in err
    assert elapsed < 20  # refused up front, not after growing for minutes


def test_max_events_moves_the_limit(capsys):
    argv = ["predict", "--engine", "detailed", "--gpus", "64", "--model", "alexnet"]
    assert main([*argv, "--max-events", "1e6"]) == 2
    assert "more than --max-events 1e+06" in capsys.readouterr().err
    assert main([*argv, "--max-events", "1e12"]) == 0


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "lots"])
def test_max_events_must_be_a_finite_positive_number(value, capsys):
    assert main(["predict", "--engine", "detailed", "--max-events", value]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and (value in err or "finite" in err)


def test_memory_over_the_available_share_is_refused():
    setup = api.prepare(api.job("resnet50", 64))
    plan = plan_from_dag(setup.dag, with_comm=True)
    with pytest.raises(ConfigError, match=r"80% of the .* GiB of memory available"):
        budget.check_detailed(plan, setup.comm, 64, 5, 1, available_bytes=1e6)
    est = budget.check_detailed(plan, setup.comm, 64, 5, 1, available_bytes=1e12)
    assert est.memory_bytes < 0.8e12


def test_the_fast_engine_is_never_budgeted():
    p = api.predict("resnet50", 1_000_000, max_events=1)
    assert p.images_per_sec > 0


def test_an_absurd_sweep_grid_is_refused_before_it_is_expanded(capsys):
    gpus = [str(g) for g in range(1, 101)]
    argv = ["sweep", "--gpus", *gpus, "--batch", *[str(b) for b in range(1, 101)]]
    argv += ["--fusion-threshold-mb", *[str(f) for f in range(1, 21)], "-o", "-"]
    start = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "200,000 configurations" in err and "--max-configs 100,000" in err
    assert time.perf_counter() - start < 5
    from ddlsim.tools.analysis.sweep import expand_grid

    with pytest.raises(ConfigError, match="10,000 configurations"):
        expand_grid({"gpus": list(range(1, 101)), "batch": list(range(1, 101))}, max_configs=99)


def test_a_trace_too_large_to_open_is_refused_before_simulating(tmp_path, capsys):
    out = tmp_path / "t.json"
    argv = ["timeline", "--engine", "detailed", "--gpus", "16384", "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "more than the 2,000,000 trace viewers open" in err and "--workers" in err
    assert not out.exists()
