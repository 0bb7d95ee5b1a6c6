"""Horovod mechanics per release: defaults, negotiation cost, cycle ticks, tensor fusion."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlsim.errors import ConfigError
from ddlsim.execution.horovod import (
    CACHE,
    CONTROL_RECV_S,
    CONTROL_SEND_S,
    GATHER,
    PER_MESSAGE,
    SHM_CONTROL_LATENCY_S,
    fusion_plan,
    horovod_release,
    negotiation_model,
    next_tick_s,
    tree_rounds_s,
)
from ddlsim.units import MiB


@pytest.mark.parametrize(
    "version,threshold_mib,cycle_ms,after_work,scheme",
    [
        ("0.9.10", 64, 5, True, PER_MESSAGE),  # mpi_ops.cc: 64 MiB, sleep_for(5 ms), MPI_Probe
        ("0.12", 64, 5, True, PER_MESSAGE),
        ("0.13.11", 64, 5, False, GATHER),  # operations.cc: cycle_time_ms = 5, MPI_Gatherv
        ("0.16.4", 64, 5, False, CACHE),  # response cache, capacity 1024
        ("0.20.0", 64, 5, False, CACHE),
        ("0.21.0", 128, 1, False, CACHE),  # SetTensorFusionThresholdBytes(128 MiB), 1 ms
        ("0.28.1", 128, 1, False, CACHE),
    ],
)
def test_release_defaults_follow_the_sources(version, threshold_mib, cycle_ms, after_work, scheme):
    r = horovod_release(version)
    assert r.fusion_threshold_bytes == threshold_mib * MiB
    assert r.cycle_time_s == pytest.approx(cycle_ms * 1e-3)
    assert r.sleep_after_work is after_work and r.negotiation == scheme


@pytest.mark.parametrize("bad", ["1.0", "0.8", "latest", "", "0.x"])
def test_unknown_release_is_refused(bad):
    with pytest.raises(ConfigError, match="Horovod version"):
        horovod_release(bad)


def test_negotiation_is_free_on_one_rank():
    for scheme in (PER_MESSAGE, GATHER, CACHE):
        assert negotiation_model(scheme, 1, 1, 3e-6)(100, 10) == 0.0


def test_cached_negotiation_is_one_tree_collective():
    # 256 ranks, 8 per node: 3 rounds in shared memory, 5 over the network
    cost = negotiation_model(CACHE, 256, 8, 3e-6)
    assert cost(200, 20) == pytest.approx(3 * SHM_CONTROL_LATENCY_S + 5 * 3e-6)
    assert cost(0, 0) == cost(500, 50)  # independent of how many tensors are ready
    assert tree_rounds_s(257, 8, 3e-6) == pytest.approx(3 * SHM_CONTROL_LATENCY_S + 6 * 3e-6)


def test_per_message_negotiation_grows_linearly_with_ranks_and_tensors():
    # Horovod <= 0.12: rank 0 receives (N-1)(k+1) requests and sends (N-1)(r+1) responses
    for transport in ("rdma", "tcp"):
        cost = negotiation_model(PER_MESSAGE, 512, 4, 3e-6, transport)
        per_rank = 11 * CONTROL_RECV_S[transport] + 3 * CONTROL_SEND_S[transport]
        assert cost(10, 2) == pytest.approx(3e-6 + 511 * per_rank)
    small, large = (negotiation_model(PER_MESSAGE, n, 4, 3e-6) for n in (64, 4096))
    assert large(10, 2) / small(10, 2) == pytest.approx(4095 / 63, rel=0.02)


def test_gather_negotiation_without_cache_grows_with_requests():
    cost = negotiation_model(GATHER, 128, 8, 3e-6)
    assert cost(0, 0) == pytest.approx(4 * tree_rounds_s(128, 8, 3e-6))
    assert cost(100, 5) - cost(0, 5) == pytest.approx(127 * 100 * CONTROL_RECV_S["rdma"])


def test_next_tick_lies_on_the_cycle_grid():
    assert next_tick_s(0.0, 1e-3) == 0.0
    assert math.isclose(next_tick_s(0.0015, 1e-3), 0.002)
    assert math.isclose(next_tick_s(0.002, 1e-3), 0.002)
    assert next_tick_s(0.0015, 0.0) == 0.0015


def test_items_ready_in_one_cycle_are_fused_up_to_the_threshold():
    ready = [0.0001, 0.0002, 0.0003, 0.0021]
    sizes = [10 * MiB, 10 * MiB, 10 * MiB, 1 * MiB]
    assert fusion_plan(ready, sizes, 64 * MiB, 1e-3) == [[0, 1, 2], [3]]
    assert fusion_plan(ready, sizes, 25 * MiB, 1e-3) == [[0, 1], [2], [3]]


def test_threshold_zero_disables_fusion():
    assert fusion_plan([0.0, 0.0, 0.0], [1, 2, 3], 0, 1e-3) == [[0], [1], [2]]


def test_a_tensor_larger_than_the_threshold_goes_alone():
    assert fusion_plan([0.0, 0.0, 0.0], [1, 100, 1], 10, 1e-3) == [[0], [1], [2]]


@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=40).map(sorted),
    st.integers(0, 64 * MiB),
    st.sampled_from([0.0, 1e-3, 5e-3]),
    st.data(),
)
def test_fusion_plan_partitions_items_in_order_within_the_threshold(ready, threshold, cycle, data):
    """Each item appears once, in order; a multi-item buffer never exceeds the threshold."""
    sizes = data.draw(st.lists(st.integers(1, 32 * MiB), min_size=len(ready), max_size=len(ready)))
    groups = fusion_plan(ready, sizes, threshold, cycle)
    assert [i for g in groups for i in g] == list(range(len(ready)))
    for g in groups:
        if len(g) > 1:
            assert sum(sizes[i] for i in g) <= threshold
