"""One run with failures, event by event, with a failure clock per node.

The reference for :mod:`ddlsim.resilience.montecarlo`: the same dynamics written the plain
way, each node carrying its own exponential failure time (a failed node's replacement starts a
fresh one; in an elastic job a node has no clock while it is away and gets one when admitted).
It is slow (pure Python, one run at a time) and records what happened: a list of
:class:`Event` (time, what, node) that shows one run's checkpoints (commits), failures,
restarts (re-rendezvous), rollbacks and admissions; :mod:`ddlsim.resilience.timeline` draws
it. ``fail_at_s`` makes node 0 fail first at that time (the other clocks stay random), to
show one failure's course.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ddlsim.resilience.daly import SEGMENT_TOLERANCE


@dataclass(frozen=True)
class Event:
    """``what`` happened at ``time_s`` (``node``: the node concerned, -1 for the job)."""

    time_s: float
    what: str  # save (a checkpoint / commit completed) | failure | resume | admit | end
    node: int = -1
    saved_work_s: float = 0.0  # work saved by the last checkpoint / commit at this point


class _Clocks:
    """Each node's next failure time (inf while it is away)."""

    def __init__(
        self, nodes: int, mtbf_s: float, rng: random.Random, fail_at_s: float | None = None
    ) -> None:
        self.mtbf_s, self.rng = mtbf_s, rng
        self.at = [rng.expovariate(1 / mtbf_s) for _ in range(nodes)]
        if fail_at_s is not None:
            self.at[0] = fail_at_s
            self.at[1:] = [max(x, fail_at_s * (1 + 1e-12)) for x in self.at[1:]]

    def first(self) -> tuple[float, int]:
        node = min(range(len(self.at)), key=self.at.__getitem__)
        return self.at[node], node

    def renew(self, node: int, now: float) -> None:
        self.at[node] = now + self.rng.expovariate(1 / self.mtbf_s)


def _saves(events: list[Event], t0: float, count: int, seg_s: float, done: float, tau: float):
    """``count`` completed checkpoints (commits), every ``seg_s`` from ``t0``."""
    events.extend(Event(t0 + i * seg_s, "save", -1, done + i * tau) for i in range(1, count + 1))


def trace_restart(
    work_s: float,
    interval_s: float | None,
    checkpoint_s: float,
    restart_s: float,
    nodes: int,
    node_mtbf_s: float,
    seed: int,
    fail_at_s: float | None = None,
) -> list[Event]:
    """One checkpoint/restart run (the dynamics of :func:`montecarlo.run_restart`)."""
    clocks = _Clocks(nodes, node_mtbf_s, random.Random(seed), fail_at_s)
    tau = work_s if interval_s is None else min(interval_s, work_s)
    length = tau + checkpoint_s
    t = done = 0.0
    events: list[Event] = []
    while True:
        rem = work_s - done
        m = max(1, math.ceil(rem / tau - SEGMENT_TOLERANCE))
        end = t + rem + (m - 1) * checkpoint_s
        when, node = clocks.first()
        if when >= end:
            _saves(events, t, m - 1, length, done, tau)
            events.append(Event(end, "end", saved_work_s=work_s))
            return events
        saved = min(math.floor((when - t) / length), m - 1)
        _saves(events, t, saved, length, done, tau)
        done += saved * tau
        t = when
        while True:  # restart; a failure during it starts it over
            events.append(Event(t, "failure", node, done))
            clocks.renew(node, t)
            when, node = clocks.first()
            if when >= t + restart_s:
                break
            t = when
        t += restart_s
        events.append(Event(t, "resume", saved_work_s=done))


def trace_elastic(
    work_s: float,
    nodes: int,
    node_mtbf_s: float,
    interval_s: float,
    commit_s: float,
    rendezvous_s: float,
    admit_s: float,
    replace_s: float,
    seed: int,
    fail_at_s: float | None = None,
) -> list[Event]:
    """One elastic run (the dynamics of :func:`montecarlo.run_elastic`)."""
    clocks = _Clocks(nodes, node_mtbf_s, random.Random(seed), fail_at_s)
    t = done = 0.0
    arrivals: list[tuple[float, int]] = []  # (time, node slot), in failure order
    events: list[Event] = []

    def stall(seconds: float) -> None:
        """Stall for ``seconds``; a failure during it (node leaves) starts it over."""
        nonlocal t
        while True:
            when, node = clocks.first()
            if when >= t + seconds:
                t += seconds
                events.append(Event(t, "resume", saved_work_s=done))
                return
            t = when
            events.append(Event(t, "failure", node, done))
            clocks.at[node] = math.inf
            arrivals.append((t + replace_s, node))
            if all(math.isinf(x) for x in clocks.at):  # nobody left: wait for a replacement
                admit()
                return

    def admit() -> None:
        nonlocal t
        t = max(t, arrivals[0][0])
        while arrivals and arrivals[0][0] <= t:
            node = arrivals.pop(0)[1]
            clocks.renew(node, t)
            events.append(Event(t, "admit", node, done))
        stall(admit_s)

    while True:
        present = sum(1 for x in clocks.at if math.isfinite(x))
        seg = interval_s * nodes / present + commit_s  # a segment's wall time
        rem = work_s - done
        m = max(1, math.ceil(rem / interval_s - SEGMENT_TOLERANCE))
        end = t + rem * nodes / present + (m - 1) * commit_s
        j = max(1, math.ceil((arrivals[0][0] - t) / seg)) if arrivals else math.inf
        admit_at = t + j * seg if j <= m - 1 else math.inf
        when, node = clocks.first()
        if when >= end and math.isinf(admit_at):
            _saves(events, t, m - 1, seg, done, interval_s)
            events.append(Event(end, "end", saved_work_s=work_s))
            return events
        if admit_at <= when:
            _saves(events, t, j, seg, done, interval_s)
            done += j * interval_s
            t = admit_at
            admit()
            continue
        saved = math.floor((when - t) / seg) if math.isfinite(seg) else 0
        _saves(events, t, saved, seg, done, interval_s)
        done += saved * interval_s
        t = when
        events.append(Event(t, "failure", node, done))
        clocks.at[node] = math.inf
        arrivals.append((t + replace_s, node))
        if present == 1:
            admit()
        else:
            stall(rendezvous_s)
