"""Horovod mechanics: cycle ticks, negotiation cost, tensor fusion."""

import math

from hypothesis import given
from hypothesis import strategies as st

from ddlsim.horovod import fusion_plan, negotiation_time_s, next_tick_s
from ddlsim.units import MiB


def test_negotiation_is_free_on_one_rank_and_logarithmic_in_ranks():
    assert negotiation_time_s(1, 50e-6) == 0.0
    assert negotiation_time_s(2, 50e-6) == 2 * 50e-6
    assert math.isclose(negotiation_time_s(256, 50e-6), 16 * 50e-6)
    assert math.isclose(negotiation_time_s(257, 50e-6), 18 * 50e-6)


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
