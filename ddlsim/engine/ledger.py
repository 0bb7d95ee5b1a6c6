"""What the communication of a run has done: the record the workers wait on.

``done[(it, op_i)]`` is ``(time, ends)`` once operation ``op_i`` of iteration ``it`` ran;
``comm_done[it]`` the time the last operation the update waits for ran (the blocking ones:
not ``deferred``), ``comm_end[it]`` the workers' latest ends among them; ``all_done[it]`` the
time every operation of the iteration ran; ``in_flight`` lists ``(time, starts, ends)`` of the
operations run (when the interference of communication with compute is charged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ddlsim.comm.sharded import COPY_OPS
from ddlsim.engine.plan import CommOp

#: per-worker times: a float for one worker, an array for several
Lanes = Any


class Ledger:
    """The record of one run's operations (module docstring)."""

    def __init__(
        self, ops: list[CommOp], iterations: int, n_workers: int, *, track_in_flight: bool
    ) -> None:
        self.ops = ops
        self.scalar = n_workers == 1
        self.zero: Lanes = 0.0 if self.scalar else np.zeros(n_workers)
        self.track_in_flight = track_in_flight
        n_blocking = sum(1 for op in ops if not op.deferred)
        self.blocking = n_blocking > 0
        self._comm_left = [n_blocking] * iterations
        self._all_left = [len(ops)] * iterations
        self.done: dict[tuple[int, int], tuple[float, Lanes]] = {}
        self.comm_done: dict[int, float] = {}
        self.comm_end: list[Lanes] = [self.zero] * iterations
        self.all_done: dict[int, float] = {}
        self.in_flight: list[tuple[float, Lanes, Lanes]] = []

    def record(
        self, now: float, it: int, group: list[int], op: CommOp, starts: Lanes, ends: Lanes
    ) -> None:
        """The operations ``group`` of iteration ``it`` (run as ``op``) ran at ``now`` from
        ``starts`` to ``ends``."""
        ops = self.ops
        if self.track_in_flight and op.op not in COPY_OPS:  # a copy's DMA holds no SMs
            self.in_flight.append((now, starts, ends))
        if len(group) == 1:
            self.done[(it, group[0])] = (now, ends)
            blocking = 0 if op.deferred else 1
        else:
            for op_i in group:
                self.done[(it, op_i)] = (now, ends)
            blocking = sum(1 for op_i in group if not ops[op_i].deferred)
        if blocking:
            last = self.comm_end[it]
            self.comm_end[it] = max(last, ends) if self.scalar else np.maximum(last, ends)
            self._comm_left[it] -= blocking
            if self._comm_left[it] == 0:
                self.comm_done[it] = now
        self._all_left[it] -= len(group)
        if self._all_left[it] == 0:
            self.all_done[it] = now
