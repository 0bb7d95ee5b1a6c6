"""Horovod's coordinator in a run: a process on the event loop.

It wakes when an allreduce is pending, waits for its next cycle tick, negotiates what is
pending everywhere (the release's negotiation cost) and launches it on the channels, fused
up to the threshold (:func:`fuse`). From Horovod 0.13 cycles start on
the ``cycle_time`` grid; before, the loop slept ``cycle_time`` after each cycle's work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddlsim.engine.channels import Channels
from ddlsim.engine.loop import EventLoop
from ddlsim.engine.plan import CommOp
from ddlsim.execution.horovod import next_tick_s

NegotiationFn = Callable[[int, int], float]


def fuse(
    ops: list[CommOp], batch: list[tuple[int, int]], limit: int | None
) -> list[tuple[int, list[int]]]:
    """Horovod packs the tensors ready at a cycle into fusion buffers of at most ``limit``
    bytes, in order. The plan's ops are the buffers of nominal cycles; ops that end up pending
    at the same cycle (a cycle stretched by its negotiation) are fused again here. Without a
    threshold (``None``) or with 0 (fusion off) every op goes alone."""
    groups: list[tuple[int, list[int]]] = []
    size = 0
    for it, op_i in batch:
        nbytes = ops[op_i].nbytes
        last = groups[-1] if groups else None
        same = last is not None and last[0] == it
        same = same and ops[last[1][0]].channel == ops[op_i].channel
        if limit and same and size + nbytes <= limit:
            groups[-1][1].append(op_i)
            size += nbytes
        else:
            groups.append((it, [op_i]))
            size = nbytes
    return groups


@dataclass(frozen=True)
class CoordinatorConfig:
    """Horovod's coordinator as the engine runs it: cycle time, the release's timing, fusion
    at run time and the negotiation's cost (tensors, responses) -> seconds per cycle."""

    cycle_time_s: float = 0.0
    sleep_after_work: bool = False  # Horovod <= 0.12: a fixed sleep after each cycle's work
    fusion_threshold_bytes: int | None = None
    negotiation: NegotiationFn | None = None


class Coordinator:
    """The coordinator of one run, launching on ``channels``; ``span`` traces its
    negotiations on the workers ``traced``."""

    def __init__(
        self,
        loop: EventLoop,
        channels: Channels,
        ops: list[CommOp],
        cfg: CoordinatorConfig,
        *,
        n_workers: int,
        traced: list[int],
        span: Callable[..., None],
    ) -> None:
        self.loop, self.channels, self.ops, self.cfg = loop, channels, ops, cfg
        self.n_workers, self.traced, self.span = n_workers, traced, span
        self.scalar = n_workers == 1
        self._pending: list[tuple[int, int]] = []
        self._waiting = True  # the coordinator waits for something to be pending
        self._last_start, self._last_end = -cfg.cycle_time_s, 0.0

    def pend(self, it: int, op_i: int) -> None:
        """Allreduce ``op_i`` of iteration ``it`` is ready everywhere: pending at the next
        cycle (the coordinator wakes, one event later, if it was waiting)."""
        self._pending.append((it, op_i))
        if self._waiting:
            self._waiting = False
            loop = self.loop
            next_s = self._next_cycle_s()
            if next_s > loop.now:  # nothing can happen before the wait starts: start it now
                loop.at(loop.now + (next_s - loop.now), self._cycle)
            else:
                loop.at(loop.now, self._coordinate)

    def _next_cycle_s(self) -> float:
        """When the coordinator's next cycle starts, something being pending now.

        From Horovod 0.13 cycles start on the ``cycle_time`` grid, at least a cycle after the
        previous start; before, the loop slept ``cycle_time`` after each cycle's work, idle
        cycles included (each costing an empty negotiation), so cycles come every
        ``cycle_time + idle negotiation`` after the last busy one.
        """
        cfg, now = self.cfg, self.loop.now
        if not cfg.sleep_after_work:
            return next_tick_s(max(now, self._last_start + cfg.cycle_time_s), cfg.cycle_time_s)
        first = self._last_end + cfg.cycle_time_s
        if now <= first:
            return first
        idle = cfg.negotiation(0, 0) if cfg.negotiation is not None else 0.0
        period = cfg.cycle_time_s + idle
        return first + math.ceil((now - first) / period - 1e-9) * period if period > 0 else now

    def _coordinate(self) -> None:
        """Something is pending: wait for the next cycle."""
        self.loop.after(self._next_cycle_s(), self._cycle)

    def _cycle(self) -> None:
        """A cycle: negotiate what is pending, then launch it."""
        cfg = self.cfg
        batch, self._pending = self._pending, []
        t0 = self.loop.now
        if cfg.negotiation is not None:
            tensors = sum(self.ops[op_i].n_tensors for _, op_i in batch)
            cost_s = cfg.negotiation(tensors, len(batch))
            if cost_s > 0:
                self.loop.at(self.loop.now + cost_s, self._launch, t0, batch)
                return
        self._launch(t0, batch)

    def _launch(self, t0: float, batch: list[tuple[int, int]]) -> None:
        now = self.loop.now
        for w in self.traced:
            self.span(w, "coordinator", "NEGOTIATE_ALLREDUCE", "negotiate", t0, now, batch[0][0])
        starts = now if self.scalar else np.full(self.n_workers, now)
        for it, group in fuse(self.ops, batch, self.cfg.fusion_threshold_bytes):
            self.channels.submit(it, group, starts)
        self._last_start, self._last_end = t0, now
        if self._pending:
            self._coordinate()
        else:
            self._waiting = True
