"""Horovod's coordination mechanics: cycle ticks, negotiation cost and tensor fusion.

Mirrors Horovod 0.28.1 (``horovod/common/operations.cc``, ``controller.cc``): a background
thread wakes every ``HOROVOD_CYCLE_TIME``; the ranks agree which tensors are ready everywhere
(with the response cache, a bit-vector allreduce: ~2·log2(N) control-message latencies); ready
tensors are packed in order into fusion buffers of at most ``HOROVOD_FUSION_THRESHOLD`` bytes,
one collective per buffer, all on one stream. A tensor larger than the threshold goes alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def negotiation_time_s(n_ranks: int, control_latency_s: float) -> float:
    """Seconds one negotiation round costs with the response cache on (0 for one rank)."""
    if n_ranks <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(n_ranks)) * control_latency_s


def next_tick_s(now_s: float, cycle_time_s: float) -> float:
    """First cycle boundary at or after ``now_s`` (ticks at multiples of the cycle time)."""
    if cycle_time_s <= 0:
        return now_s
    return math.ceil(now_s / cycle_time_s - 1e-9) * cycle_time_s


def fusion_plan(
    ready_s: Sequence[float],
    nbytes: Sequence[int],
    threshold_bytes: int,
    cycle_time_s: float,
) -> list[list[int]]:
    """Group gradient items into fusion buffers as Horovod would.

    ``ready_s[i]`` is when item ``i`` (a layer's gradient tensors) becomes ready and
    ``nbytes[i]`` its size; items must be listed in readiness order. Items ready by the same
    cycle tick are packed in order into buffers of at most ``threshold_bytes``; a threshold of 0
    disables fusion. Returns the groups as lists of item indices.
    """
    groups: list[list[int]] = []
    i, n = 0, len(ready_s)
    while i < n:
        tick = next_tick_s(ready_s[i], cycle_time_s)
        batch = [i]
        i += 1
        while i < n and ready_s[i] <= tick + 1e-12:
            batch.append(i)
            i += 1
        current: list[int] = []
        current_bytes = 0
        for item in batch:
            if current and (threshold_bytes == 0 or current_bytes + nbytes[item] > threshold_bytes):
                groups.append(current)
                current, current_bytes = [], 0
            current.append(item)
            current_bytes += nbytes[item]
        groups.append(current)
    return groups
