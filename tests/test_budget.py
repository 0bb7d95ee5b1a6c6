"""Bounded work (issue 11, item 4): the detailed engine's events and memory are estimated before
it runs and a run over the budget is refused with one line; absurd sweeps and traces likewise.
"""

from __future__ import annotations

import time

import pytest
import simpy

from ddlsim import api
from ddlsim.cli.main import main
from ddlsim.engine import budget
from ddlsim.engine.plan import plan_from_dag
from ddlsim.errors import ConfigError

pytestmark = pytest.mark.usefixtures("no_user_calibration")


def _counted_run(setup) -> int:
    """SimPy events the detailed run of ``setup`` schedules (counted, not estimated)."""
    count = [0]
    original = simpy.Environment.schedule

    def schedule(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)

    simpy.Environment.schedule = schedule
    try:
        setup.simulate(api.sim_options(api.SimulationConfig(engine="detailed")))
    finally:
        simpy.Environment.schedule = original
    return count[0]


@pytest.mark.parametrize(
    "model, gpus, kwargs",
    [
        ("resnet50", 64, {}),
        ("alexnet", 128, {"comm": "ps"}),
        ("inception3", 16, {"comm": "distributed-replicated"}),
        ("vgg16", 16, {"comm": "byteps"}),
        ("resnet50", 64, {"hierarchical": True}),
        ("googlenet", 32, {"comm": "horovod-mpi", "data": "real"}),
    ],
)
def test_the_estimate_counts_what_the_run_does(model, gpus, kwargs):
    setup = api.prepare(api.job(model, gpus, **kwargs))
    plan = plan_from_dag(setup.dag, with_comm=True)
    interferes = (
        api.sim_options(api.SimulationConfig()).sync.interference_fraction(
            setup.cluster, setup.comm
        )
        > 0
    )
    est = budget.estimate_detailed(
        plan, setup.comm, gpus, 5, 1, limit=float("inf"), timeouts_per_segment=1 + interferes
    )
    flows = steps = 0
    for op in plan.ops:
        for step in setup.comm.schedule(op.nbytes, op.op, op.channel).steps:
            steps += 5 * step.repeat
            flows += 5 * step.repeat * step.n_flows
    assert (est.flows, est.steps) == (flows, steps)  # exact: the schedules themselves
    actual = _counted_run(api.prepare(api.job(model, gpus, **kwargs)))
    assert 0.9 * actual <= est.sim_events <= 1.4 * actual  # measured: 0.94-1.29
    assert est.events == est.flows + budget.PROCESS_EVENT_WEIGHT * (est.sim_events + est.steps)


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
    from ddlsim.analysis.sweep import expand_grid

    with pytest.raises(ConfigError, match="10,000 configurations"):
        expand_grid({"gpus": list(range(1, 101)), "batch": list(range(1, 101))}, max_configs=99)


def test_a_trace_too_large_to_open_is_refused_before_simulating(tmp_path, capsys):
    out = tmp_path / "t.json"
    argv = ["timeline", "--engine", "detailed", "--gpus", "16384", "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "more than the 2,000,000 trace viewers open" in err and "--workers" in err
    assert not out.exists()
