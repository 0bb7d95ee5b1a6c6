"""The communication channels of a run: SimPy's resources, one per channel.

A channel serialises its operations: in submission order, each costed as it arrives (its
start is when the channel frees), or, where the schedule sets priorities, the most urgent
queued operation when the channel frees (it frees at the earliest worker's end). Each
operation is costed by the engine's ``cost(op, starts)`` (per-worker start times to
per-worker end times; a float for one worker) and recorded in the run's
:class:`~ddlsim.engine.ledger.Ledger`. The channels schedule on the run's
:class:`~ddlsim.engine.loop.EventLoop` as SimPy stores hand items to waiting processes, so that
they interleave as one SimPy process per channel did.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from ddlsim.engine.ledger import Lanes, Ledger
from ddlsim.engine.loop import EventLoop
from ddlsim.engine.plan import CommOp, merged

CostFn = Callable[[CommOp, Lanes], Lanes]

__all__ = ["Channels", "CostFn", "Lanes"]


class Channels:
    """The channels of one run. ``span(worker, stream, name, kind, start, end, it, nbytes,
    parts)`` records a traced span of the workers ``traced``."""

    def __init__(
        self,
        loop: EventLoop,
        ledger: Ledger,
        ops: list[CommOp],
        cost: CostFn,
        *,
        traced: list[int],
        span: Callable[..., None],
    ) -> None:
        self.loop, self.ledger, self.ops, self.cost = loop, ledger, ops, cost
        self.traced, self.span = traced, span
        self.scalar = ledger.scalar
        channels = sorted({op.channel for op in ops})
        self.prioritised = any(op.priority is not None for op in ops)
        self.free: dict[int, Lanes] = dict.fromkeys(channels, ledger.zero)
        self._streams = {ch: f"comm:{ch}" for ch in channels}
        self._queue: dict[int, list[tuple[tuple[int, int, int], tuple]]] = {c: [] for c in channels}
        self._idle = dict.fromkeys(channels, True)
        self._queued = 0  # submission counter: FIFO among equal priorities
        self.push_end: dict[tuple[str, int], float] = {}

    def ready(self, it: int, op_i: int, starts: Lanes) -> None:
        """Operation ``op_i`` of iteration ``it`` is ready on every worker (``starts``): a
        pull starts after the push of the same layer and channel ends."""
        op = self.ops[op_i]
        key = (op.layers[0], op.channel)
        if op.op == "pull" and key in self.push_end:
            push_end = self.push_end[key]
            starts = max(starts, push_end) if self.scalar else np.maximum(starts, push_end)
        self.submit(it, [op_i], starts)

    def submit(self, it: int, group: list[int], starts: Lanes) -> None:
        """Queue the operations ``group`` of iteration ``it`` on their channel: in order of
        submission, or by (iteration, priority) where the schedule sets priorities.

        As a SimPy store hands items to the processes waiting on it, a channel waiting for an
        operation takes it one event later (:meth:`_put`) and runs it one event after that
        (:meth:`_got`), so that channels interleave as they did; a lone first-come channel
        runs it at once (nothing could come in between)."""
        ch = self.ops[group[0]].channel
        item = (it, group, starts)
        if self.prioritised:
            self._queued += 1
            priority = self.ops[group[0]].priority
            key = (it, self._queued if priority is None else priority, self._queued)
            heapq.heappush(self._queue[ch], (key, item))
        elif len(self.free) > 1:
            self._queue[ch].append(((0, 0, 0), item))
        else:
            self._run_op(ch, *item)
            return
        self.loop.at(self.loop.now, self._put, ch)

    def _pop(self, ch: int) -> tuple:
        queue = self._queue[ch]
        return (heapq.heappop(queue) if self.prioritised else queue.pop(0))[1]

    def _put(self, ch: int) -> None:
        """An operation was queued: a channel waiting for one takes the first (most urgent)."""
        if self._idle[ch] and self._queue[ch]:
            self._idle[ch] = False
            self.loop.at(self.loop.now, self._got, ch, self._pop(ch))

    def _got(self, ch: int, item: tuple) -> None:
        """The channel runs the operation it took; with priorities it frees at the earliest
        worker's end, then takes the most urgent one queued by then."""
        ends = self._run_op(ch, *item)
        if self.prioritised:
            self.loop.after(float(ends if self.scalar else ends.min()), self._get, ch)
        else:
            self._get(ch)

    def _get(self, ch: int) -> None:
        """The channel asks for its next operation."""
        if self._queue[ch]:
            self.loop.at(self.loop.now, self._got, ch, self._pop(ch))
        else:
            self._idle[ch] = True

    def _run_op(self, ch: int, it: int, group: list[int], starts: Any) -> Lanes:
        """Cost the operations ``group`` (fused into one where several) from ``starts`` once
        the channel is free, record and trace them."""
        ops = self.ops
        op = ops[group[0]] if len(group) == 1 else merged([ops[i] for i in group])
        if self.scalar:
            free = self.free[ch]
            starts = starts if starts >= free else free
            ends = self.cost(op, starts)
        else:
            starts = np.maximum(starts, self.free[ch])
            ends = np.asarray(self.cost(op, starts), dtype=float)
        self.free[ch] = ends
        self.ledger.record(self.loop.now, it, group, op, starts, ends)
        parts = () if len(group) == 1 else tuple(ops[i].name for i in group)
        for w in self.traced:
            s, e = (starts, ends) if self.scalar else (starts[w], ends[w])
            self.span(w, self._streams[ch], op.name, op.op, s, e, it, op.nbytes, parts)
        if op.op == "push":
            self.push_end[(op.layers[0], ch)] = float(ends if self.scalar else ends.max())
        return ends
