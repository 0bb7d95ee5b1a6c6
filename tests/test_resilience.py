"""The failure model's closed forms, inputs and report: ddlsim.resilience."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ddlsim.errors import ConfigError
from ddlsim.resilience import Job, ResilienceConfig, analyse
from ddlsim.resilience.config import (
    DEFAULT_NODE_MTBF_S,
    DEFAULT_RESTART_S,
    HOUR_S,
    KOKOLIS_NODE_MTBF_S,
)
from ddlsim.resilience.daly import (
    auto_segments,
    daly_interval_s,
    optimal_interval_s,
    restart_expectation,
    young_interval_s,
)
from ddlsim.resilience.elastic import elastic_expectation
from ddlsim.resilience.state import bytes_per_param, checkpoint_bytes

GiB = 2**30


def job(**kw) -> Job:
    base = {
        "work_s": 36_000.0,
        "nodes": 64,
        "iteration_time_s": 0.3,
        "state_bytes": 2e8,
        "gpu_memory_bytes": 16 * GiB,
        "host_Bps": 12e9,
        "network_Bps": 12.5e9,
    }
    return Job(**{**base, **kw})


def daly_tw(work: float, tau: float, delta: float, restart: float, mtbf: float) -> float:
    """Daly's (2006) expected completion time, W / tau segments of tau + delta."""
    return mtbf * math.exp(restart / mtbf) * math.expm1((tau + delta) / mtbf) * work / tau


# --------------------------------------------------------------------------- inputs


def test_default_node_mtbf_is_llama3_per_node() -> None:
    # 419 interruptions in 54 days of a 2,048-node job; Kokolis: 8 h at 128 nodes
    per_node_hours = DEFAULT_NODE_MTBF_S / HOUR_S
    assert per_node_hours == pytest.approx(54 * 24 * 2048 / 419, rel=1e-12)
    assert round(per_node_hours, 1) == 6334.6
    assert KOKOLIS_NODE_MTBF_S / HOUR_S == 1024


def test_checkpoint_bytes_per_parameter() -> None:
    assert [bytes_per_param(o, "fp32") for o in ("sgd", "momentum", "adam")] == [4, 8, 12]
    # amp keeps fp32 master weights: the same checkpoint
    assert [bytes_per_param(o, "amp") for o in ("sgd", "momentum", "adam")] == [4, 8, 12]
    assert checkpoint_bytes("resnet50", "fp32", "momentum") == 25_557_032 * 8
    assert checkpoint_bytes("vgg16", "amp", "adam") == 138_357_544 * 12


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"node_mtbf_s": 0.0}, "MTBF must be a finite number > 0 s (None: no failures), got 0"),
        ({"node_mtbf_s": -5.0}, "MTBF must be a finite number > 0 s (None: no failures), got -5"),
        ({"node_mtbf_s": math.nan}, "be a finite number > 0 s (None: no failures), got nan"),
        ({"checkpoint_write_Bps": 0.0}, "write bandwidth must be a finite number > 0 B/s, got 0"),
        ({"recovery": "pray"}, "recovery must be one of restart, elastic, got 'pray'"),
        ({"optimizer": "adagrad"}, "optimizer must be one of sgd, momentum, adam, adamw, lamb"),
        ({"interval_s": -1.0}, "checkpoint interval must be a finite number > 0"),
        ({"mc_draws": -1}, "Monte Carlo draws must be an integer"),
        ({"restart_s": math.inf}, "restart time must be a finite number >= 0 s, got inf"),
    ],
)  # fmt: skip
def test_bad_config_is_one_line_naming_the_value(kwargs: dict, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        ResilienceConfig(**kwargs)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_interval_shorter_than_a_checkpoint_write_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"interval 5 s is shorter than one checkpoint write"):
        analyse(job(), ResilienceConfig(interval_s=5.0, checkpoint_time_s=10.0))
    with pytest.raises(ConfigError, match=r"shorter than one commit"):
        analyse(job(), ResilienceConfig(recovery="elastic", interval_s=0.001))


def test_checkpoint_larger_than_gpu_memory_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"checkpoint of 20 GB is larger than one GPU's memory"):
        analyse(job(), ResilienceConfig(checkpoint_bytes=20e9))
    analyse(job(), ResilienceConfig(checkpoint_bytes=17e9))  # 16 GiB = 17.18 GB: fits


def test_elastic_needs_two_nodes() -> None:
    with pytest.raises(ConfigError, match=r"elastic recovery needs at least 2 nodes, got 1"):
        analyse(job(nodes=1, network_Bps=None), ResilienceConfig(recovery="elastic"))


# --------------------------------------------------------------------------- intervals


@given(ratio=st.floats(1e-9, 50.0))
def test_optimal_interval_minimises_dalys_expected_time(ratio: float) -> None:
    mtbf = 1000.0
    delta = ratio * mtbf
    tau = optimal_interval_s(delta, mtbf)
    assert 0 < tau <= mtbf
    x = tau / mtbf  # the root of (1 - x) e^x = e^(-delta/M), to x's own precision
    assert (1 - x) * math.exp(x) == pytest.approx(math.exp(-ratio), rel=1e-9, abs=1e-14)
    grid = tau * np.linspace(0.5, 1.5, 2001)
    tw = np.exp(1 / mtbf) * mtbf * np.expm1((grid + delta) / mtbf) / grid
    best = daly_tw(1.0, tau, delta, 1.0, mtbf)
    assert best <= tw.min() * (1 + 1e-12)


@given(ratio=st.floats(1e-8, 1e-2))
def test_young_and_daly_estimates_approach_the_optimum(ratio: float) -> None:
    mtbf = 3600.0
    delta = ratio * mtbf
    exact = optimal_interval_s(delta, mtbf)
    # Young is first order: off by O(delta / tau) = O(sqrt(delta / M)); Daly one order better
    assert young_interval_s(delta, mtbf) / exact - 1 == pytest.approx(0, abs=2 * math.sqrt(ratio))
    assert daly_interval_s(delta, mtbf) / exact - 1 == pytest.approx(0, abs=2 * ratio)


@settings(max_examples=60, deadline=None)
@given(
    work=st.floats(100.0, 1e7),
    delta=st.floats(0.01, 600.0),
    restart=st.floats(0.0, 3600.0),
    mtbf=st.floats(600.0, 1e7),
)
def test_auto_interval_is_the_minimum_of_the_expected_time(
    work: float, delta: float, restart: float, mtbf: float
) -> None:
    auto = auto_segments(work, delta, restart, 1 / mtbf)
    best = restart_expectation(work, auto, delta, restart, 1 / mtbf).time_s
    tau_star = optimal_interval_s(delta, mtbf)
    grid = np.unique(
        np.concatenate([np.geomspace(delta, work, 400), tau_star * np.linspace(0.5, 2, 301)])
    )
    times = [
        restart_expectation(work, t, delta, restart, 1 / mtbf).time_s for t in grid if t >= delta
    ]
    times.append(restart_expectation(work, None, delta, restart, 1 / mtbf).time_s)
    assert best <= min(times) * (1 + 1e-12)


def test_segmented_time_is_dalys_less_the_last_checkpoint() -> None:
    work, tau, delta, restart, mtbf = 36_000.0, 600.0, 20.0, 300.0, 5_000.0
    ours = restart_expectation(work, tau, delta, restart, 1 / mtbf).time_s
    one_ckpt = daly_tw(tau, tau, delta, restart, mtbf) - daly_tw(tau, tau, 0.0, restart, mtbf)
    assert ours == pytest.approx(daly_tw(work, tau, delta, restart, mtbf) - one_ckpt, rel=1e-12)


# --------------------------------------------------------------------------- expectations


@given(
    work=st.floats(1.0, 1e7),
    interval=st.one_of(st.none(), st.floats(1.0, 1e5)),
    delta=st.floats(0.0, 100.0),
)
def test_no_failures_is_the_failure_free_time_plus_the_checkpoints(
    work: float, interval: float | None, delta: float
) -> None:
    e = restart_expectation(work, interval, delta, 600.0, 0.0)
    # a last segment under 1e-6 of an interval is rounding, not a segment
    m = 1 if interval is None or interval >= work else math.ceil(work / interval - 1e-6)
    assert e.time_s == work + (m - 1) * delta
    assert e.failures == e.lost_s == e.recovery_s == 0


@pytest.mark.parametrize("recovery", ["restart", "elastic"])
def test_no_failures_is_todays_time_to_train_exactly(recovery: str) -> None:
    r = analyse(job(work_s=12_345.678), ResilienceConfig(node_mtbf_s=None, recovery=recovery))
    assert r.expected.time_s == 12_345.678
    assert r.expected.goodput == 1.0
    assert r.costs.interval_s is None


@settings(max_examples=60, deadline=None)
@given(
    work=st.floats(60.0, 1e7),
    delta=st.floats(0.001, 300.0),
    restart=st.floats(0.0, 3600.0),
    mtbf=st.floats(1e4, 1e9),
    n1=st.integers(1, 4096),
    grow=st.integers(1, 4096),
    scaled=st.booleans(),
)
def test_restart_goodput_never_increases_with_nodes(
    work: float, delta: float, restart: float, mtbf: float, n1: int, grow: int, scaled: bool
) -> None:
    """At a fixed node MTBF, more nodes fail more often; with the work shrinking as 1 / N
    (perfect scaling, the most favourable case) as well as with fixed work."""
    goodputs = []
    for n in (n1, n1 + grow):
        w = work / n if scaled else work
        auto = auto_segments(w, delta, restart, n / mtbf)
        goodputs.append(restart_expectation(w, auto, delta, restart, n / mtbf).goodput)
    assert goodputs[1] <= goodputs[0] * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(
    work=st.floats(600.0, 1e7),
    mtbf=st.floats(1e5, 1e8),
    n1=st.integers(8, 2048),
    grow=st.integers(1, 2048),
    replace=st.floats(0.0, 3600.0),
)
def test_elastic_goodput_never_increases_with_nodes(
    work: float, mtbf: float, n1: int, grow: int, replace: float
) -> None:
    """For the same work, from 8 nodes up (none found from 6 up in 20,000 random draws). On
    fewer it can rise: a failed node costs an ``n``-node job ``1 / n`` of its throughput until
    its replacement joins, on ``n - 1`` nodes, so the throughput lost per failure (~``1 / (n -
    1)``) falls faster than the failure rate (~``n``) rises while ``(n - 1)^2`` is below the
    replacement time over the rollback and re-rendezvous (2 -> 3 nodes: up to +0.4%)."""
    goodputs = []
    for n in (n1, n1 + grow):
        r = analyse(
            job(work_s=work, nodes=n),
            ResilienceConfig(node_mtbf_s=mtbf, recovery="elastic", replace_s=replace),
        )
        assume(math.isfinite(r.expected.time_s))
        goodputs.append(r.expected.goodput)
    assert goodputs[1] <= goodputs[0] * (1 + 1e-9)


def test_elastic_goodput_can_rise_with_nodes_when_the_work_scales() -> None:
    """With the work shrinking as 1 / N the failure count stays the same while each failure
    costs less (1 / (n - 1) of the throughput, and the run ends before more replacements are
    due): 8 -> 18 nodes of 28.6 h MTBF, 37 min replacements, raise the goodput. Restart's
    goodput falls in the same case (its restart is a fixed cost of a shorter run)."""
    work, cfg = 36_382.0, {"node_mtbf_s": 102_970.0, "replace_s": 2215.0}
    elastic = [
        analyse(job(work_s=work / n, nodes=n), ResilienceConfig(recovery="elastic", **cfg))
        for n in (8, 18)
    ]
    assert elastic[1].expected.goodput > elastic[0].expected.goodput + 0.002
    restart = [analyse(job(work_s=work / n, nodes=n), ResilienceConfig(**cfg)) for n in (8, 18)]
    assert restart[1].expected.goodput < restart[0].expected.goodput


def test_parts_add_up_and_failures_follow_the_rate() -> None:
    for recovery in ("restart", "elastic"):
        r = analyse(job(), ResilienceConfig(node_mtbf_s=100 * HOUR_S, recovery=recovery))
        e = r.expected
        parts = e.work_s + e.degraded_s + e.checkpoint_s + e.lost_s + e.recovery_s
        assert e.time_s == pytest.approx(parts, rel=1e-12)
        # 64 nodes at 100 h: a failure every 1.56 h of the ~10 h run
        assert e.failures == pytest.approx(e.time_s / (100 * HOUR_S / 64), rel=0.05)
        assert 0 < e.goodput < 1


def test_restart_defaults_resolve_to_the_documented_costs() -> None:
    r = analyse(job(), ResilienceConfig())
    assert r.costs.save_s == pytest.approx(0.2)  # 200 MB at 1 GB/s
    assert r.costs.recover_s == pytest.approx(DEFAULT_RESTART_S + 0.2)  # + the load
    assert r.costs.optimum_s == pytest.approx(optimal_interval_s(0.2, DEFAULT_NODE_MTBF_S / 64))


def test_elastic_trains_on_fewer_nodes_and_beats_restart_here() -> None:
    cfg = {"node_mtbf_s": 1024 * HOUR_S}
    restart = analyse(job(), ResilienceConfig(**cfg))
    elastic = analyse(job(), ResilienceConfig(recovery="elastic", **cfg))
    assert elastic.expected.degraded_s > 0
    assert elastic.nodes_present < 1
    assert restart.nodes_present == 1
    # 1 min re-rendezvous and a ~1 min commit interval vs 10 min restarts and ~20 min intervals
    assert elastic.expected.time_s < restart.expected.time_s


def test_elastic_without_failures_pays_only_its_commits() -> None:
    e = elastic_expectation(1000.0, 8, 0.0, 100.0, 1.0, 60.0, 61.0, 600.0)
    assert e.time_s == 1000.0 + 9 * 1.0


def test_result_json_round_trips() -> None:
    r = analyse(job(), ResilienceConfig(mc_draws=200, seed=3))
    d = json.loads(json.dumps(r.to_dict()))
    assert d["expected"]["time_to_train_s"] == r.expected.time_s
    assert d["monte_carlo"]["draws"] == 200
    assert d["config"]["seed"] == 3
    assert d["checkpoint_bytes"] == 2e8
