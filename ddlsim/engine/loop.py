"""The event loop of a run: SimPy's environment, without processes.

A heap of ``(time, sequence, callback, args)``: :meth:`EventLoop.at` schedules a callback,
:meth:`EventLoop.run_before` and :meth:`EventLoop.run_until` run them in time order. Time moves
as SimPy moves it: a wait from ``t`` until ``u > t`` ends at ``t + (u - t)``
(:meth:`EventLoop.after`), a delay ``d`` at ``t + d``; events at the same time run in the order
they were scheduled. The resources (:mod:`ddlsim.engine.channels`) and Horovod's coordinator
(:mod:`ddlsim.engine.coordinator`) schedule on it; the workers (:mod:`ddlsim.engine.core`)
advance it to the instants they need.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from ddlsim.errors import SimulationError


class EventLoop:
    """The clock (``now``, seconds), the events scheduled and the count of events run."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0  # events handled (the loop's work)
        self._heap: list[tuple[float, int, Callable[..., None], tuple]] = []
        self._seq = 0

    def at(self, time_s: float, fn: Callable[..., None], *args: object) -> None:
        """Run ``fn(*args)`` at ``time_s`` (after what is already scheduled then)."""
        self._seq += 1
        heapq.heappush(self._heap, (time_s, self._seq, fn, args))

    def after(self, target_s: float, fn: Callable[..., None], *args: object) -> None:
        """``fn`` once the time reaches ``target_s`` (now, if it has)."""
        if target_s > self.now:
            self.at(self.now + (target_s - self.now), fn, *args)
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
