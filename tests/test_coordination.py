"""Horovod's coordinator per release in the engine, and the synchronisation terms' shares."""

from __future__ import annotations

import itertools

import pytest

import ddlsim
from ddlsim.engine.plan import plan_from_dag
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION

#: 2017 Horovod over TCP at 256 ranks: rank 0 handles every tensor's message (15 us each)
SLOW_NEGOTIATION = dict(
    gpu="p100-pcie",
    gpus_per_node=4,
    inter_node="25gbe",
    transport="tcp",
    horovod_version="0.12",
    nccl_version="2.1",
)


def launched(p: ddlsim.Prediction) -> list[dict]:
    return p.comm_ops


def test_buffers_pending_at_a_long_cycle_are_fused_again() -> None:
    setup = ddlsim.prepare(ddlsim.job("resnet101", 256, **SLOW_NEGOTIATION))
    planned = plan_from_dag(setup.dag).ops
    p = ddlsim.predict("resnet101", 256, **SLOW_NEGOTIATION)
    ops = launched(p)
    assert len(ops) < len(planned)  # negotiations longer than the cycle: several per launch
    assert sum(op["nbytes"] for op in ops) == sum(op.nbytes for op in planned)
    limit = setup.strategy.fusion_threshold_bytes
    planned_max = max(op.nbytes for op in planned)
    assert all(op["nbytes"] <= max(limit, planned_max) for op in ops)


def test_fusion_off_launches_every_planned_op_alone() -> None:
    kwargs = dict(SLOW_NEGOTIATION, fusion_threshold_mb=0)
    setup = ddlsim.prepare(ddlsim.job("resnet101", 256, **kwargs))
    p = ddlsim.predict("resnet101", 256, **kwargs)
    assert len(launched(p)) == len(plan_from_dag(setup.dag).ops)


def test_horovod_before_0_13_sleeps_after_each_cycle_s_work() -> None:
    p = ddlsim.predict("resnet101", 256, **SLOW_NEGOTIATION)
    cycles = sorted((s.start_s, s.end_s) for s in p.sim.spans if s.stream == "coordinator")
    assert len(cycles) > 2
    for (_, end), (start, _) in itertools.pairwise(cycles):
        assert start - end >= 5e-3 - 1e-9  # the fixed 5 ms sleep after the work


def negotiation_s(p: ddlsim.Prediction) -> float:
    """Mean duration of the coordinator's negotiation rounds (s)."""
    rounds = [s.end_s - s.start_s for s in p.sim.spans if s.stream == "coordinator"]
    return sum(rounds) / len(rounds)


def test_each_release_negotiates_as_it_did() -> None:
    """At 512 ranks over TCP: per-tensor messages (<= 0.12) >> gather (0.13-0.15, or the cache
    turned off) > one bit-vector allreduce (the response cache, 0.16+)."""
    base = dict(gpu="p100-pcie", gpus_per_node=4, inter_node="25gbe", transport="tcp")
    versions = ("0.12", "0.15", "0.16")
    run = {v: ddlsim.predict("resnet101", 512, horovod_version=v, **base) for v in versions}
    no_cache = ddlsim.predict(
        "resnet101", 512, horovod_version="0.16", response_cache=False, **base
    )
    assert [run[v].inputs["negotiation"] for v in versions] == ["per-message", "gather", "cache"]
    assert no_cache.inputs["negotiation"] == "gather"
    per_message, gather, cache = (negotiation_s(run[v]) for v in versions)
    assert per_message > 10 * gather and gather > 3 * cache > 0
    assert negotiation_s(no_cache) == pytest.approx(gather, rel=0.2)


def test_host_contention_only_where_gpus_share_a_node() -> None:
    shared = ddlsim.predict("resnet50", 16, gpus_per_node=8)
    alone = ddlsim.predict("resnet50", 16, gpus_per_node=1, inter_node="ib-edr")
    nominal = shared.breakdown["compute_s"] - shared.breakdown["contention_s"]
    nominal -= shared.breakdown["interference_s"]
    assert shared.breakdown["contention_s"] == pytest.approx(
        DEFAULT_HOST_CONTENTION * nominal / (1 + 0), rel=0.02
    )
    assert alone.breakdown["contention_s"] == 0.0
    assert ddlsim.predict("resnet50", 1).breakdown["contention_s"] == 0.0


def test_interference_is_the_sms_nccl_holds_while_it_overlaps_compute() -> None:
    p = ddlsim.predict("resnet50", 64)  # DGX-1: 4 channels on 56 SMs
    f = 4 / 56
    b = p.breakdown
    assert 0 < b["interference_s"] <= b["comm_hidden_s"] * f / (1 - f) * 1.05
    assert ddlsim.predict("resnet50", 64, interference=False).breakdown["interference_s"] == 0.0
    assert ddlsim.predict("resnet50", 64, comm="ps").breakdown["interference_s"] == 0.0
