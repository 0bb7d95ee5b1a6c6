"""Event-level network: schedules of point-to-point flows and their execution.

A :class:`Schedule` is a sequence of :class:`Step`; a step is a set of flows that run at the
same time. A flow goes from a source endpoint to a destination endpoint (GPU ranks ``0..N-1``,
then node hosts, then parameter-server tasks; see :class:`~ddlsim.comm.fabric.Fabric`), carries
``nbytes``, crosses a few link resources, and may be summed into a *reducer* at the destination.
Semantics of one step (seconds, bytes, bytes/second)::

    count_r  = number of the step's flows crossing resource r     (equal sharing)
    rate_f   = min over resources r of f of capacity_r / count_r  (inf if f crosses none)
    reduce_f = nbytes_f * n_q / capacity_q   with q the reducer of f and n_q the step's flows
               reduced there (the reducer sums them one after another)
    dur_f    = latency_f + nbytes_f / rate_f + reduce_f
    start_f  = ready[src_f]                      (a flow starts when its source is ready)
    ready'[e] = max(ready[e], max over flows f into or out of e of start_f + dur_f)

so a destination is ready once every flow into it arrived, and a source stays busy until its
flows finish. Durations do not depend on start times: each distinct step is *compiled* once into
a max-plus update (per endpoint: its own busy time plus, per incoming flow, source and duration),
and executing it costs a handful of numpy calls however many flows it has. A step object may be
repeated (``repeat``) -- a ring's 2(N-1) steps are one step repeated -- so a schedule costs
O(distinct steps) memory and O(total steps) numpy calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddlsim.errors import SimulationError

NO_RESOURCE = -1
IntArray = np.ndarray
FloatArray = np.ndarray


@dataclass(frozen=True, eq=False)
class Step:
    """Flows that run concurrently, repeated ``repeat`` times back to back.

    Arrays have one entry per flow: ``src``/``dst`` endpoints, ``nbytes``, ``latency_s``,
    ``reducer`` (resource index of the destination's reducer, -1 for none) and ``resources``
    (flows x k resource indices, padded with -1).
    """

    src: IntArray
    dst: IntArray
    nbytes: FloatArray
    resources: IntArray
    latency_s: FloatArray
    reducer: IntArray
    repeat: int = 1

    @property
    def n_flows(self) -> int:
        """Number of flows in one repetition."""
        return int(self.src.size)


def flows(
    src: object,
    dst: object,
    nbytes: object,
    resources: Sequence[object] = (),
    latency_s: object = 0.0,
    reducer: object = NO_RESOURCE,
) -> Step:
    """One class of flows; scalars broadcast. ``resources`` lists one index array per hop."""
    size = np.broadcast_shapes(*(np.shape(a) for a in (src, dst, nbytes, latency_s, reducer)))
    size = np.broadcast_shapes(size, *(np.shape(r) for r in resources))

    def as_array(value: object, dtype: type) -> np.ndarray:
        return np.array(np.broadcast_to(np.asarray(value, dtype), size).ravel())

    cols = [as_array(r, np.int64) for r in resources]
    n = int(np.prod(size))
    res = np.stack(cols, axis=1) if cols else np.full((n, 0), NO_RESOURCE, np.int64)
    return Step(
        src=as_array(src, np.int64),
        dst=as_array(dst, np.int64),
        nbytes=as_array(nbytes, np.float64),
        resources=res,
        latency_s=as_array(latency_s, np.float64),
        reducer=as_array(reducer, np.int64),
    )


def step(*parts: Step, repeat: int = 1) -> Step:
    """Concatenate flow classes into one step repeated ``repeat`` times."""
    width = max((p.resources.shape[1] for p in parts), default=0)
    res = [
        np.pad(p.resources, ((0, 0), (0, width - p.resources.shape[1])), constant_values=-1)
        for p in parts
    ]
    return Step(
        src=np.concatenate([p.src for p in parts]),
        dst=np.concatenate([p.dst for p in parts]),
        nbytes=np.concatenate([p.nbytes for p in parts]),
        resources=np.concatenate(res) if res else np.empty((0, 0), np.int64),
        latency_s=np.concatenate([p.latency_s for p in parts]),
        reducer=np.concatenate([p.reducer for p in parts]),
        repeat=repeat,
    )


@dataclass(frozen=True, eq=False)
class _Compiled:
    """A step as a max-plus update of the ``touched`` endpoints' ready times."""

    touched: IntArray
    prefix: bool  # touched == arange(T): slice instead of gather/scatter
    self_s: FloatArray  # per touched endpoint: longest flow it sources (0 if none)
    in_rows: IntArray | None  # first incoming flow per row (None: every row, in order)
    in_src: IntArray
    in_s: FloatArray
    more: tuple[IntArray, IntArray, FloatArray, IntArray] | None  # further incoming flows


class Schedule:
    """An operation as steps of flows over ``capacity_Bps`` resources (see module docstring)."""

    def __init__(
        self, n_ranks: int, n_endpoints: int, capacity_Bps: FloatArray, steps: Sequence[Step]
    ) -> None:
        self.n_ranks = n_ranks
        self.n_endpoints = n_endpoints
        self.capacity_Bps = np.asarray(capacity_Bps, np.float64)
        self.steps = list(steps)
        self._compiled: dict[int, _Compiled] = {}

    @property
    def n_steps(self) -> int:
        """Total steps, repetitions included."""
        return sum(s.repeat for s in self.steps)

    def durations_s(self, s: Step) -> FloatArray:
        """Per-flow duration of step ``s`` (latency + shared transfer + shared reduction), s."""
        n_res = self.capacity_Bps.size
        cap = np.append(self.capacity_Bps, np.inf)
        res = np.where(s.resources < 0, n_res, s.resources)
        count = np.bincount(res.ravel(), minlength=n_res + 1)
        share = cap / np.maximum(count, 1)
        rate = share[res].min(axis=1) if res.shape[1] else np.full(s.n_flows, np.inf)
        transfer = np.divide(s.nbytes, rate, out=np.zeros(s.n_flows), where=s.nbytes > 0)
        red = np.where(s.reducer < 0, n_res, s.reducer)
        n_red = np.bincount(red[s.reducer >= 0], minlength=n_res + 1)
        reduce = np.where(s.reducer >= 0, s.nbytes * n_red[red] / cap[red], 0.0)
        return s.latency_s + transfer + reduce

    def _compile(self, s: Step) -> _Compiled:
        got = self._compiled.get(id(s))
        if got is not None:
            return got
        dur = self.durations_s(s)
        if np.any(s.src >= self.n_endpoints) or np.any(s.dst >= self.n_endpoints):
            raise SimulationError("flow endpoint out of range")
        touched = np.unique(np.concatenate([s.src, s.dst]))
        row = np.full(self.n_endpoints, -1, np.int64)
        row[touched] = np.arange(touched.size)
        self_s = np.zeros(touched.size)
        np.maximum.at(self_s, row[s.src], dur)
        order = np.argsort(s.dst, kind="stable")
        d = s.dst[order]
        first = np.ones(d.size, bool)
        first[1:] = d[1:] != d[:-1]
        head, rest = order[first], order[~first]
        in_rows: IntArray | None = row[s.dst[head]]
        if in_rows.size == touched.size:  # every touched endpoint receives: rows 0..T-1 in order
            in_rows = None
        more = None
        if rest.size:
            rows = row[s.dst[rest]]
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            more = (rows[starts], s.src[rest], dur[rest], starts)
        prefix = bool(touched[-1] == touched.size - 1) if touched.size else True
        c = _Compiled(touched, prefix, self_s, in_rows, s.src[head], dur[head], more)
        self._compiled[id(s)] = c
        return c


def _apply(c: _Compiled, ready: FloatArray) -> None:
    """One step: update ``ready`` (endpoint ready times, s) in place."""
    n = c.touched.size
    vals = (ready[:n] if c.prefix else ready[c.touched]) + c.self_s
    if c.in_rows is None:
        np.maximum(vals, ready[c.in_src] + c.in_s, out=vals)
    else:
        vals[c.in_rows] = np.maximum(vals[c.in_rows], ready[c.in_src] + c.in_s)
    if c.more is not None:
        rows, src, dur, starts = c.more
        vals[rows] = np.maximum(vals[rows], np.maximum.reduceat(ready[src] + dur, starts))
    if c.prefix:
        ready[:n] = vals
    else:
        ready[c.touched] = vals


def execute(schedule: Schedule, start_s: FloatArray) -> FloatArray:
    """Run ``schedule`` with GPU rank ``r`` starting at ``start_s[r]`` (s); return each rank's
    completion time (s). Hosts and servers start idle at the earliest start."""
    start = np.asarray(start_s, np.float64)
    if start.shape != (schedule.n_ranks,):
        raise SimulationError(f"expected {schedule.n_ranks} start times, got shape {start.shape}")
    ready = np.full(schedule.n_endpoints, start.min() if start.size else 0.0)
    ready[: schedule.n_ranks] = start
    for s in schedule.steps:
        if s.n_flows == 0:
            continue
        c = schedule._compile(s)
        for _ in range(s.repeat):
            _apply(c, ready)
    return ready[: schedule.n_ranks].copy()
