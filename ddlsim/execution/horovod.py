"""Horovod's coordination mechanics, per release: cycle, negotiation cost and tensor fusion.

A background thread on every rank runs a loop: wait for the next cycle, agree with the other
ranks which tensors are ready everywhere, pack them into fusion buffers, launch one collective
per buffer on one stream. How the ranks agree changed three times (read from the sdists of each
release, ``pip download --no-binary :all: --no-deps horovod==X``; docs/design.md cites lines):

============  ==========  =======  =========================================================
release       threshold   cycle    negotiation per cycle
============  ==========  =======  =========================================================
0.9 - 0.12    64 MiB      5 ms     every rank sends rank 0 one MPI message per ready tensor
                          (sleep   and a DONE; rank 0 receives them one by one (MPI_Probe,
                          after    MPI_Recv), then sends every fused response and a DONE to
                          work)    each rank: ``(N-1)(k + r + 2)`` messages through rank 0
0.13 - 0.15   64 MiB      5 ms     MPI_Gather(v) of the request lists to rank 0, MPI_Bcast of
                                   the responses: 4 tree collectives, rank 0 parses
                                   ``(N-1) k`` requests
0.16 - 0.20   64 MiB      5 ms     response cache (default 1024 entries): once every tensor
                                   is cached, one bit-vector MPI_Allreduce per cycle
0.21 -        128 MiB     1 ms     as 0.16
============  ==========  =======  =========================================================

(``k`` tensors ready this cycle, ``r`` fused responses, N ranks.) From 0.13 the loop sleeps
until ``HOROVOD_CYCLE_TIME`` after the previous cycle *started*; before, it slept a fixed 5 ms
after each cycle's work, so a cycle lasts 5 ms plus its negotiation.

Ready tensors are packed in order into buffers of at most ``HOROVOD_FUSION_THRESHOLD`` bytes;
a tensor larger than the threshold goes alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ddlsim.errors import ConfigError
from ddlsim.units import MiB

DEFAULT_HOROVOD_VERSION = "0.28.1"
#: negotiation schemes (see the module docstring)
PER_MESSAGE, GATHER, CACHE = "per-message", "gather", "cache"
#: rank 0's CPU time per small control message it receives (probe, receive, parse, count) and
#: per message it sends, s, by the control plane's transport. Measured on this project's 2-core
#: AMD EPYC (Zen 4) machine with Open MPI 4.1.4, medians of 5 runs
#: (``bash scripts/measure_coordinator.sh`` -> traces/mpi/coordinator.json): shared memory
#: stands for kernel-bypass transports (RDMA), TCP loopback for sockets. With one sender the
#: TCP figure is an upper bound (the sender's system calls may set the pace).
CONTROL_RECV_S = {"rdma": 0.30e-6, "tcp": 15.0e-6}
CONTROL_SEND_S = {"rdma": 0.13e-6, "tcp": 6.2e-6}
#: one small MPI message inside a node (shared memory), s
SHM_CONTROL_LATENCY_S = 1e-6


@dataclass(frozen=True)
class HorovodRelease:
    """The coordination behaviour and defaults of one Horovod release."""

    version: str
    fusion_threshold_bytes: int
    cycle_time_s: float
    sleep_after_work: bool  # 0.9-0.12: a fixed sleep after each cycle's work
    negotiation: str  # PER_MESSAGE | GATHER | CACHE (with the response cache on)

    @property
    def has_response_cache(self) -> bool:
        """Whether the release has the response cache (0.16 and later)."""
        return self.negotiation == CACHE


#: the last Horovod release's minor version (0.28.1, June 2023; PyPI's release history)
LAST_HOROVOD_MINOR = 28


def horovod_release(version: str = DEFAULT_HOROVOD_VERSION) -> HorovodRelease:
    """The release ``version`` (``0.12``, ``0.16.4``, ``0.28.1``...); ConfigError otherwise."""
    match = re.fullmatch(r"\s*0\.(\d+)(?:\.(\d+))?\s*", str(version))
    if match is None or int(match[1]) < 9:
        raise ConfigError(
            f"Horovod version must be 0.9 or later, like 0.12 or 0.28.1, got {version!r}"
        )
    if int(match[1]) > LAST_HOROVOD_MINOR:
        raise ConfigError(
            f"no Horovod release {str(version).strip()}: the releases are 0.9 to "
            f"{DEFAULT_HOROVOD_VERSION} (the last, 2023)"
        )
    minor = int(match[1])
    if minor <= 12:
        return HorovodRelease(str(version).strip(), 64 * MiB, 5e-3, True, PER_MESSAGE)
    if minor <= 15:
        return HorovodRelease(str(version).strip(), 64 * MiB, 5e-3, False, GATHER)
    if minor <= 20:
        return HorovodRelease(str(version).strip(), 64 * MiB, 5e-3, False, CACHE)
    return HorovodRelease(str(version).strip(), 128 * MiB, 1e-3, False, CACHE)


@dataclass(frozen=True)
class Coordination:
    """Horovod's coordinator as one run uses it: on or off (``horovod``), the cycle
    (``cycle_time_s``; after each cycle's work with ``sleep_after_work``, Horovod <= 0.12), the
    release's ``negotiation`` scheme, and the run-time fusion threshold
    (``fusion_threshold_bytes``: what pending operations may be fused into at a cycle; None or
    0: each alone). The engines take it as one object, from the strategy
    (:meth:`ddlsim.execution.strategy.Strategy.coordination`)."""

    horovod: bool = False
    cycle_time_s: float = 0.0
    negotiation: str = CACHE
    sleep_after_work: bool = False
    fusion_threshold_bytes: int | None = None


#: no coordinator: every operation is launched when it is ready
NO_COORDINATION = Coordination()


def tree_rounds_s(n_ranks: int, local_ranks: int, network_latency_s: float) -> float:
    """Latency of one small tree collective (binomial or recursive doubling) over ``n_ranks``
    ranks packed ``local_ranks`` per node: ceil(log2 g) rounds in shared memory, then
    ceil(log2 n) over the network."""
    if n_ranks <= 1:
        return 0.0
    g = max(1, min(local_ranks, n_ranks))
    nodes = -(-n_ranks // g)
    inside = math.ceil(math.log2(g)) if g > 1 else 0
    across = math.ceil(math.log2(nodes)) if nodes > 1 else 0
    return inside * SHM_CONTROL_LATENCY_S + across * network_latency_s


def negotiation_model(
    scheme: str,
    n_ranks: int,
    local_ranks: int,
    network_latency_s: float,
    transport: str = "rdma",
) -> Callable[[int, int], float]:
    """Seconds one cycle's negotiation costs, as a function of (tensors ready, responses).

    ``scheme`` is the release's (:data:`PER_MESSAGE`, :data:`GATHER`, :data:`CACHE`);
    ``network_latency_s`` one message between nodes; ``transport`` (``rdma`` or ``tcp``) picks
    rank 0's per-message CPU costs (:data:`CONTROL_RECV_S`, :data:`CONTROL_SEND_S`). Zero for
    one rank. Per cycle, with k tensors and r fused responses:

    - per-message: one hop + (N-1) ((k + 1) recv + (r + 1) send) at rank 0;
    - gather: 4 tree collectives + rank 0 parsing (N-1) k requests (the RDMA receive cost,
      the CPU part of handling a request);
    - cache: one bit-vector allreduce (a tree collective).
    """
    if scheme not in (PER_MESSAGE, GATHER, CACHE):
        raise ConfigError(f"unknown Horovod negotiation scheme {scheme!r}")
    if n_ranks <= 1:
        return lambda tensors, responses: 0.0
    tree_s = tree_rounds_s(n_ranks, local_ranks, network_latency_s)
    last_hop_s = network_latency_s if n_ranks > local_ranks else SHM_CONTROL_LATENCY_S
    others = n_ranks - 1

    recv_s, send_s = CONTROL_RECV_S[transport], CONTROL_SEND_S[transport]

    def per_message(tensors: int, responses: int) -> float:
        return last_hop_s + others * ((tensors + 1) * recv_s + (responses + 1) * send_s)

    def gather(tensors: int, responses: int) -> float:
        return 4 * tree_s + others * tensors * CONTROL_RECV_S["rdma"]

    def cache(tensors: int, responses: int) -> float:
        return tree_s

    return {PER_MESSAGE: per_message, GATHER: gather, CACHE: cache}[scheme]


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
