"""The communication side of a run: channels, Horovod's coordinator and their event loop.

Operations become ready when every worker has registered them (:meth:`Channels.register`, at
the latest worker's time). An event loop over a heap of ``(time, sequence)`` then replays, in
time order, what the engine's processes do:

- a **channel** serialises its operations: in submission order, each costed as it arrives
  (its start is when the channel frees), or, where the schedule sets priorities, the most
  urgent queued operation when the channel frees (it frees at the earliest worker's end);
- Horovod's **coordinator** (``horovod``) ticks, negotiates what is pending everywhere and
  launches it, fused up to the threshold (:func:`fuse`).

Each operation is costed by the engine's ``cost(op, starts)`` (per-worker start times to
per-worker end times; a float for one worker). Time moves as SimPy moves it: a wait from ``t``
until ``u > t`` ends at ``t + (u - t)``, a delay ``d`` at ``t + d``; events at the same time run
in the order they were scheduled. The worker side (:mod:`ddlsim.engine.core`) advances the
loop up to the instants it needs: :meth:`Channels.run_before` (interference of the operations
in flight) and :meth:`Channels.run_until` (a worker waits for an operation).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddlsim.engine.plan import CommOp
from ddlsim.errors import SimulationError
from ddlsim.execution.horovod import next_tick_s

#: per-worker times: a float for one worker, an array for several
Lanes = Any
CostFn = Callable[[CommOp, Lanes], Lanes]
NegotiationFn = Callable[[int, int], float]


@dataclass(frozen=True)
class Coordination:
    """Horovod's coordinator: cycle time, the release's timing, fusion at run time."""

    cycle_time_s: float = 0.0
    sleep_after_work: bool = False  # Horovod <= 0.12: a fixed sleep after each cycle's work
    fusion_threshold_bytes: int | None = None
    negotiation: NegotiationFn | None = None  # (tensors, responses) -> seconds per cycle


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


def merged(ops: list[CommOp]) -> CommOp:
    """One collective carrying the plan's ``ops`` (fused at run time)."""
    return CommOp(
        name=f"{ops[0].name}+{len(ops) - 1}",
        op=ops[0].op,
        channel=ops[0].channel,
        nbytes=sum(o.nbytes for o in ops),
        layers=[layer for o in ops for layer in o.layers],
        n_tensors=sum(o.n_tensors for o in ops),
    )


class Channels:
    """Channels and coordinator of one run (see the module docstring).

    ``done[(it, op_i)]`` is ``(time, ends)`` once operation ``op_i`` of iteration ``it`` ran;
    ``comm_done[it]`` the time the last operation the update waits for ran, ``comm_end[it]``
    the workers' latest ends among them; ``in_flight`` lists ``(time, starts, ends)`` of the
    operations run (``track_in_flight``), for the interference of communication with compute.
    ``span(worker, stream, name, kind, start, end, it, nbytes, parts)`` records a traced span.
    """

    def __init__(
        self,
        ops: list[CommOp],
        cost: CostFn,
        *,
        n_workers: int,
        iterations: int,
        horovod: Coordination | None,
        traced: list[int],
        span: Callable[..., None],
        track_in_flight: bool,
    ) -> None:
        self.ops, self.cost, self.horovod, self.traced = ops, cost, horovod, traced
        self.span = span
        self.scalar = n_workers == 1
        self.n_workers = n_workers
        self.track_in_flight = track_in_flight
        self.now = 0.0
        self.events = 0  # events handled (the loop's work)
        self._heap: list[tuple[float, int, Callable[..., None], tuple]] = []
        self._seq = 0
        channels = sorted({op.channel for op in ops})
        self.prioritised = any(op.priority is not None for op in ops)
        zero = 0.0 if self.scalar else np.zeros(n_workers)
        self.free: dict[int, Lanes] = dict.fromkeys(channels, zero)
        self._streams = {ch: f"comm:{ch}" for ch in channels}
        self._queue: dict[int, list[tuple[tuple[int, int, int], tuple]]] = {c: [] for c in channels}
        self._idle = dict.fromkeys(channels, True)
        self._queued = 0  # submission counter: FIFO among equal priorities
        self.push_end: dict[tuple[str, int], float] = {}
        self.done: dict[tuple[int, int], tuple[float, Lanes]] = {}
        n_blocking = sum(1 for op in ops if not op.deferred)
        self.blocking = n_blocking > 0
        self._comm_left = [n_blocking] * iterations
        self._all_left = [len(ops)] * iterations
        self.comm_done: dict[int, float] = {}
        self.comm_end: list[Lanes] = [zero] * iterations
        self.all_done: dict[int, float] = {}
        self.in_flight: list[tuple[float, Lanes, Lanes]] = []
        self._pending: list[tuple[int, int]] = []
        self._coord_waiting = True  # the coordinator waits for something to be pending
        cycle = horovod.cycle_time_s if horovod else 0.0
        self._last_start, self._last_end = -cycle, 0.0

    # -- the event loop ------------------------------------------------------------------------
    def _at(self, time_s: float, fn: Callable[..., None], *args: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_s, self._seq, fn, args))

    def _after(self, target_s: float, fn: Callable[..., None], *args: object) -> None:
        """``fn`` once the time reaches ``target_s`` (now, if it has)."""
        if target_s > self.now:
            self._at(self.now + (target_s - self.now), fn, *args)
        else:
            fn(*args)

    def _step(self) -> None:
        time_s, _, fn, args = heapq.heappop(self._heap)
        self.now = time_s
        self.events += 1
        fn(*args)

    def run_before(self, time_s: float) -> None:
        """Run every event scheduled before ``time_s``."""
        heap = self._heap
        while heap and heap[0][0] < time_s:
            self._step()

    def run_until(self, ready: Callable[[], bool]) -> None:
        """Run events until ``ready()``; a run that can never get there is an error."""
        while not ready():
            if not self._heap:
                raise SimulationError("the simulation stalled: an operation never ran")
            self._step()

    # -- operations ----------------------------------------------------------------------------
    def register(self, it: int, op_i: int, starts: Lanes, ready_s: float) -> None:
        """Every worker has operation ``op_i`` of iteration ``it`` ready, the last at
        ``ready_s``; ``starts`` are their ready times."""
        self._at(ready_s, self._ready, it, op_i, starts)

    def _ready(self, it: int, op_i: int, starts: Lanes) -> None:
        op = self.ops[op_i]
        if self.horovod is not None and op.op == "allreduce":
            self._pending.append((it, op_i))
            if self._coord_waiting:  # the coordinator wakes (one event later) for its next cycle
                self._coord_waiting = False
                next_s = self._next_cycle_s()
                if next_s > self.now:  # nothing can happen before the wait starts: start it now
                    self._at(self.now + (next_s - self.now), self._cycle)
                else:
                    self._at(self.now, self._coordinate)
            return
        key = (op.layers[0], op.channel)
        if op.op == "pull" and key in self.push_end:
            push_end = self.push_end[key]
            starts = max(starts, push_end) if self.scalar else np.maximum(starts, push_end)
        self._submit(it, [op_i], starts)

    def _submit(self, it: int, group: list[int], starts: Lanes) -> None:
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
        self._at(self.now, self._put, ch)

    def _pop(self, ch: int) -> tuple:
        queue = self._queue[ch]
        return (heapq.heappop(queue) if self.prioritised else queue.pop(0))[1]

    def _put(self, ch: int) -> None:
        """An operation was queued: a channel waiting for one takes the first (most urgent)."""
        if self._idle[ch] and self._queue[ch]:
            self._idle[ch] = False
            self._at(self.now, self._got, ch, self._pop(ch))

    def _got(self, ch: int, item: tuple) -> None:
        """The channel runs the operation it took; with priorities it frees at the earliest
        worker's end, then takes the most urgent one queued by then."""
        ends = self._run_op(ch, *item)
        if self.prioritised:
            self._after(float(ends if self.scalar else ends.min()), self._get, ch)
        else:
            self._get(ch)

    def _get(self, ch: int) -> None:
        """The channel asks for its next operation."""
        if self._queue[ch]:
            self._at(self.now, self._got, ch, self._pop(ch))
        else:
            self._idle[ch] = True

    def _run_op(self, ch: int, it: int, group: list[int], starts: Lanes) -> Lanes:
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
        if self.track_in_flight:
            self.in_flight.append((self.now, starts, ends))
        if len(group) == 1:
            parts: tuple[str, ...] = ()
            self.done[(it, group[0])] = (self.now, ends)
            blocking = 0 if op.deferred else 1
        else:
            parts = tuple(ops[i].name for i in group)
            for op_i in group:
                self.done[(it, op_i)] = (self.now, ends)
            blocking = sum(1 for op_i in group if not ops[op_i].deferred)
        for w in self.traced:
            s, e = (starts, ends) if self.scalar else (starts[w], ends[w])
            self.span(w, self._streams[ch], op.name, op.op, s, e, it, op.nbytes, parts)
        if op.op == "push":
            self.push_end[(op.layers[0], ch)] = float(ends if self.scalar else ends.max())
        if blocking:
            last = self.comm_end[it]
            self.comm_end[it] = max(last, ends) if self.scalar else np.maximum(last, ends)
            self._comm_left[it] -= blocking
            if self._comm_left[it] == 0:
                self.comm_done[it] = self.now
        self._all_left[it] -= len(group)
        if self._all_left[it] == 0:
            self.all_done[it] = self.now
        return ends

    # -- Horovod's coordinator -----------------------------------------------------------------
    def _next_cycle_s(self) -> float:
        """When the coordinator's next cycle starts, something being pending now.

        From Horovod 0.13 cycles start on the ``cycle_time`` grid, at least a cycle after the
        previous start; before, the loop slept ``cycle_time`` after each cycle's work, idle
        cycles included (each costing an empty negotiation), so cycles come every
        ``cycle_time + idle negotiation`` after the last busy one.
        """
        cfg, now = self.horovod, self.now
        assert cfg is not None
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
        self._after(self._next_cycle_s(), self._cycle)

    def _cycle(self) -> None:
        """A cycle: negotiate what is pending, then launch it."""
        cfg = self.horovod
        assert cfg is not None
        batch, self._pending = self._pending, []
        t0 = self.now
        if cfg.negotiation is not None:
            tensors = sum(self.ops[op_i].n_tensors for _, op_i in batch)
            cost_s = cfg.negotiation(tensors, len(batch))
            if cost_s > 0:
                self._at(self.now + cost_s, self._launch, t0, batch)
                return
        self._launch(t0, batch)

    def _launch(self, t0: float, batch: list[tuple[int, int]]) -> None:
        cfg = self.horovod
        assert cfg is not None
        now = self.now
        for w in self.traced:
            self.span(w, "coordinator", "NEGOTIATE_ALLREDUCE", "negotiate", t0, now, batch[0][0])
        starts = now if self.scalar else np.full(self.n_workers, now)
        for it, group in fuse(self.ops, batch, cfg.fusion_threshold_bytes):
            self._submit(it, group, starts)
        self._last_start, self._last_end = t0, now
        if self._pending:
            self._coordinate()
        else:
            self._coord_waiting = True
