"""The failure model's Monte Carlo against its closed forms and its per-node reference."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ddlsim.errors import ConfigError
from ddlsim.resilience import Job, ResilienceConfig, analyse
from ddlsim.resilience.analysis import simulate
from ddlsim.resilience.daly import (
    Expectation,
    auto_segments,
    restart_expectation,
)
from ddlsim.resilience.elastic import away_s
from ddlsim.resilience.montecarlo import check_events, run_elastic, run_restart
from ddlsim.resilience.timeline import failure_timeline
from ddlsim.resilience.trace import trace_elastic, trace_restart

DRAWS = 4000
MAX_DRAWS = 100_000


def draws_for(e: Expectation) -> int:
    """Enough runs for the Monte Carlo mean's relative standard error to be about 0.5% (so that
    3% is 6 of them): the runs' spread is about sqrt(failures) x twice a failure's cost. Rare,
    costly failures (a 100 s run, a 30 min restart) need more runs than :data:`MAX_DRAWS`; such
    inputs are skipped: there the Monte Carlo, not the closed form, is what is uncertain."""
    if e.failures == 0:
        return DRAWS
    cost = (e.lost_s + e.recovery_s + e.degraded_s) / e.failures
    spread = 2 * cost * math.sqrt(e.failures)
    need = math.ceil((spread / (0.005 * e.time_s)) ** 2)
    assume(need <= MAX_DRAWS)
    return max(DRAWS, need)


@settings(max_examples=100, deadline=None)
@given(
    work=st.floats(100.0, 1e6),
    nodes=st.integers(1, 4096),
    mtbf=st.floats(1e4, 1e8),
    delta=st.floats(0.01, 300.0),
    restart=st.floats(0.0, 3600.0),
    auto=st.booleans(),
    interval=st.floats(60.0, 1e5),
    seed=st.integers(0, 2**32 - 1),
)
def test_restart_monte_carlo_mean_agrees_with_the_closed_form(
    work: float,
    nodes: int,
    mtbf: float,
    delta: float,
    restart: float,
    auto: bool,
    interval: float,
    seed: int,
) -> None:
    """Daly's model is exact for exponential failures: within 3% (in fact within the Monte
    Carlo's own noise) wherever the Monte Carlo can be precise: runs not dominated by failures
    (<= 50 per run, a segment and a restart each completing at least 1 / e of the time; beyond,
    the attempts' count is so spread that no affordable number of draws pins the mean down)
    and rare costly failures left out (:func:`draws_for`)."""
    rate = nodes / mtbf
    tau = auto_segments(work, delta, restart, rate) if auto else max(interval, delta)
    e = restart_expectation(work, tau, delta, restart, rate)
    length = (work if tau is None else min(tau, work)) + delta
    assume(e.failures <= 50 and rate * restart <= 1 and rate * length <= 1)
    n = draws_for(e)
    draws = run_restart(work, tau, delta, restart, nodes, mtbf, n, seed)
    d = draws.summary()
    assert d["mean_s"] == pytest.approx(e.time_s, rel=0.03)
    if e.failures * n >= 50:  # enough failures drawn for the standard errors to mean much
        assert d["mean_s"] == pytest.approx(e.time_s, abs=5 * d["sem_s"])
        sem = draws.failures.std(ddof=1) / math.sqrt(n)
        assert d["failures_mean"] == pytest.approx(e.failures, abs=5 * sem)


@settings(max_examples=100, deadline=None)
@given(
    work=st.floats(100.0, 1e6),
    nodes=st.integers(4, 4096),
    mtbf=st.floats(1e4, 1e8),
    state=st.floats(1e6, 1e10),
    rendezvous=st.floats(1.0, 300.0),
    replace=st.floats(0.0, 3600.0),
    auto=st.booleans(),
    interval=st.floats(1.0, 1e5),
    seed=st.integers(0, 2**32 - 1),
)
def test_elastic_monte_carlo_mean_agrees_with_the_closed_form(
    work: float,
    nodes: int,
    mtbf: float,
    state: float,
    rendezvous: float,
    replace: float,
    auto: bool,
    interval: float,
    seed: int,
) -> None:
    """The elastic closed form is first order in how often failures overlap: it holds within
    3% where stalls and commit segments are rarely hit (job failure rate x (re-rendezvous +
    admission) <= 0.1, x a segment <= 0.1; the auto interval keeps the latter about
    sqrt(2 x commit / job MTBF)), a node is away a small share of its MTBF (<= 10%), at least 4
    nodes share the work and a run sees at most 50 failures."""
    job = Job(work, nodes, 0.1, state, 16 * 2**30, 1e9, 1e9)  # commit and broadcast: state/1e9
    cfg = ResilienceConfig(
        node_mtbf_s=mtbf,
        recovery="elastic",
        rendezvous_s=rendezvous,
        replace_s=replace,
        interval_s=None if auto else max(interval, state / 1e9),
    )
    r = analyse(job, cfg)
    c, e = r.costs, r.expected
    tau = math.inf if c.interval_s is None else c.interval_s
    away = away_s(min(tau, work), c.save_s, c.recover_s, c.replace_s)
    rate = nodes / mtbf
    assume(rate * (c.recover_s + c.admit_s) <= 0.1 and away / mtbf <= 0.1)
    assume(rate * (min(tau, work) + c.save_s) <= 0.1)
    assume(e.failures <= 50)
    d = simulate(job, c, draws_for(e), seed).summary()
    assert d["mean_s"] == pytest.approx(e.time_s, rel=0.03)


def _agree(reference: list[float], draws: np.ndarray) -> None:
    """Means equal within 4.5 standard errors of their difference."""
    se = math.hypot(
        statistics.stdev(reference) / math.sqrt(len(reference)),
        draws.std(ddof=1) / math.sqrt(draws.size),
    )
    assert statistics.mean(reference) == pytest.approx(draws.mean(), abs=4.5 * se)


def test_restart_monte_carlo_is_the_per_node_reference() -> None:
    """Drawing the job's next failure as Exp(n / M) is drawing each node's clock."""
    args = (20_000.0, 1500.0, 50.0, 900.0, 4, 20_000.0)
    reference = [trace_restart(*args, seed)[-1].time_s for seed in range(2500)]
    _agree(reference, run_restart(*args, 20_000, 1).time_s)


def test_elastic_monte_carlo_is_the_per_node_reference() -> None:
    args = (20_000.0, 4, 20_000.0, 300.0, 5.0, 60.0, 120.0, 1500.0)
    reference = [trace_elastic(*args, seed)[-1].time_s for seed in range(2500)]
    _agree(reference, run_elastic(*args, 20_000, 1).time_s)


def test_trace_records_failures_and_resumes() -> None:
    events = trace_restart(20_000.0, 1500.0, 50.0, 900.0, 4, 20_000.0, 3)
    kinds = {e.what for e in events}
    assert kinds <= {"save", "failure", "resume", "end"}
    assert events[-1].what == "end"
    assert events[-1].saved_work_s == 20_000.0
    times = [e.time_s for e in events]
    assert times == sorted(times)
    for e in events:  # work is saved in whole segments of 1,500 s
        assert e.saved_work_s % 1500.0 == 0 or e.saved_work_s == 20_000.0


def test_monte_carlo_is_seeded() -> None:
    args = (10_000.0, 600.0, 10.0, 600.0, 64, 1e6)
    a = run_restart(*args, 500, 7).time_s
    assert np.array_equal(a, run_restart(*args, 500, 7).time_s)
    assert not np.array_equal(a, run_restart(*args, 500, 8).time_s)


def test_summary_is_ordered_and_never_below_the_failure_free_time() -> None:
    job = Job(36_000.0, 64, 0.3, 2e8, 16 * 2**30, 12e9, 12.5e9)
    for recovery in ("restart", "elastic"):
        cfg = ResilienceConfig(node_mtbf_s=200 * 3600.0, recovery=recovery, mc_draws=3000)
        mc = analyse(job, cfg).monte_carlo
        assert mc is not None
        assert 36_000.0 <= mc["p10_s"] <= mc["p50_s"] <= mc["p90_s"]
        assert mc["draws"] == 3000


def test_no_monte_carlo_without_failures() -> None:
    job = Job(36_000.0, 64, 0.3, 2e8, 16 * 2**30, 12e9, 12.5e9)
    assert analyse(job, ResilienceConfig(node_mtbf_s=None, mc_draws=100)).monte_carlo is None


def test_a_job_that_never_completes_is_refused() -> None:
    check_events(1e5)
    with pytest.raises(ConfigError, match=r"expected failures per run 1e\+06 exceed"):
        check_events(1e6)
    with pytest.raises(ConfigError, match="exceed"):
        check_events(math.inf)


def _job_spans(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 1]


@pytest.mark.parametrize("recovery", ["restart", "elastic"])
def test_failure_timeline_tiles_the_run(recovery: str) -> None:
    job = Job(20_000.0, 16, 0.3, 2e9, 16 * 2**30, 12e9, 12.5e9)
    cfg = ResilienceConfig(node_mtbf_s=1e7, recovery=recovery, interval_s=1000.0)
    trace = failure_timeline(analyse(job, cfg), seed=1, fail_at_s=4500.0)
    spans = _job_spans(trace)
    end = trace["metadata"]["time_to_train_s"] * 1e6
    assert spans[0]["ts"] == 0
    for a, b in itertools.pairwise(spans):  # back to back, no gap, no overlap
        assert b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=1e-3)
    assert spans[-1]["ts"] + spans[-1]["dur"] == pytest.approx(end, abs=1e-3)
    names = [s["name"] for s in spans]
    lost = spans[names.index("lost work")]
    # the failure at 4,500 s: four segments of 1,000 s and their saves, then 500 s lost
    save_s = 2.0 if recovery == "restart" else 2e9 / 12e9
    assert lost["ts"] / 1e6 == pytest.approx(4 * (1000 + save_s))
    assert (lost["ts"] + lost["dur"]) / 1e6 == pytest.approx(4500.0)
    fails = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert fails[0]["name"] == "node 0 fails" and fails[0]["ts"] == 4500.0 * 1e6
    if recovery == "restart":
        assert names[names.index("lost work") + 1] == "restart"
        trained = sum(s["dur"] for s in spans if s["name"] == "train") / 1e6
        assert trained == pytest.approx(20_000.0)  # all the work, once
    else:
        assert "re-rendezvous" in names and "admission" in names
        away = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 3]
        assert away[0]["name"] == "node 0 away"
        assert away[0]["ts"] == 4500.0 * 1e6


def test_failure_timeline_needs_failures_within_the_run() -> None:
    job = Job(1000.0, 16, 0.3, 2e8, 16 * 2**30, 12e9, 12.5e9)
    with pytest.raises(ConfigError, match="needs failures"):
        failure_timeline(analyse(job, ResilienceConfig(node_mtbf_s=None)))
    with pytest.raises(ConfigError, match=r"within the failure-free run \(0..1000 s\), got 2000"):
        failure_timeline(analyse(job, ResilienceConfig()), fail_at_s=2000.0)
