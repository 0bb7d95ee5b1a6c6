"""The SimPy replay shared by both engines.

``simulate_plan`` runs ``W`` simulated workers through several iterations of a :class:`Plan`.
Each worker is a SimPy process on its own compute stream; communication ops run on channels
(one SimPy process each, ops serialised per channel); Horovod ops additionally wait for the
coordinator's cycle tick and negotiation. The cost of an op is delegated to ``cost(op, starts)``
which maps per-worker start times to per-worker end times:

- the fast engine simulates one representative worker and costs ops in closed form;
- the detailed engine simulates every worker (own speed, jitter) and executes each op as steps
  of flows over shared links (:func:`ddlsim.comm.executor.execute`).

``env.now`` is in seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import simpy

from ddlsim.engine.plan import CommOp, Plan
from ddlsim.engine.sync import rank_factors
from ddlsim.horovod import next_tick_s

CostFn = Callable[[CommOp, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Span:
    """One interval on one worker's stream (seconds)."""

    worker: int
    stream: str  # compute | comm:<channel> | coordinator | input
    name: str
    kind: str
    start_s: float
    end_s: float
    iteration: int
    nbytes: int = 0


@dataclass
class EngineConfig:
    """Engine knobs: simulated workers, their speeds, iterations and Horovod timing."""

    n_workers: int = 1
    slowdown: np.ndarray | None = None  # per-worker compute time multiplier (1 = nominal)
    jitter_sigma: float = 0.0  # log-normal sigma of per-segment compute noise
    rank_sigma: float = 0.0  # detailed: log-normal sigma of each rank's per-iteration speed
    sync_stretch: float = 1.0  # fast: compute stretch of waiting for the slowest rank (>= 1)
    seed: int = 0
    warmup_iterations: int = 2
    measured_iterations: int = 3
    horovod: bool = False
    cycle_time_s: float = 0.0
    negotiation_s: float = 0.0
    trace_workers: frozenset[int] = frozenset({0})


@dataclass
class RunRecord:
    """What a run produced: per-iteration end time of every worker, and traced spans."""

    iteration_end_s: np.ndarray  # shape (iterations, workers)
    spans: list[Span] = field(default_factory=list)
    warmup_iterations: int = 0


def simulate_plan(plan: Plan, cost: CostFn, cfg: EngineConfig) -> RunRecord:
    """Run ``cfg.warmup_iterations + cfg.measured_iterations`` iterations of ``plan``."""
    return _Run(plan, cost, cfg).run()


class _Run:
    """State of one simulation run (kept in one object so processes share it cheaply)."""

    def __init__(self, plan: Plan, cost: CostFn, cfg: EngineConfig) -> None:
        self.plan, self.cost, self.cfg = plan, cost, cfg
        self.env = simpy.Environment()
        self.W = cfg.n_workers
        self.iters = cfg.warmup_iterations + cfg.measured_iterations
        self.slowdown = np.ones(self.W) if cfg.slowdown is None else np.asarray(cfg.slowdown)
        self.rng = np.random.default_rng(cfg.seed)
        self.rank_factor = np.ones(self.W)  # this iteration's speed of each rank (detailed)
        self.after_ops = plan.pushes_and_allreduces
        self.pull_ops = plan.pulls
        self.ops = self.after_ops + self.pull_ops
        self.by_trigger: dict[int, list[int]] = {}
        for i, op in enumerate(self.after_ops):
            self.by_trigger.setdefault(op.trigger, []).append(i)
        self.pulls_at: dict[int, list[int]] = {}
        for j, op in enumerate(self.pull_ops):
            self.pulls_at.setdefault(op.fwd_index, []).append(len(self.after_ops) + j)
        n_ops = len(self.ops)
        self.ready = np.full((self.iters, n_ops, self.W), np.nan)
        self.ready_count = np.zeros((self.iters, n_ops), dtype=int)
        self.op_done = [[self.env.event() for _ in range(n_ops)] for _ in range(self.iters)]
        self.comm_left = [n_ops] * self.iters
        self.comm_end = np.zeros((self.iters, self.W))
        self.comm_done = [self.env.event() for _ in range(self.iters)]
        self.push_end: dict[tuple[str, int], float] = {}
        channels = sorted({op.channel for op in self.ops})
        self.stores = {ch: simpy.Store(self.env) for ch in channels}
        self.free = {ch: np.zeros(self.W) for ch in channels}
        self.coord_pending: list[tuple[int, int]] = []
        self.coord_wake: simpy.Event | None = None
        self.end = np.zeros((self.iters, self.W))
        self.spans: list[Span] = []
        self.traced = sorted(w for w in cfg.trace_workers if w < self.W)

    def run(self) -> RunRecord:
        env = self.env
        for ch in self.stores:
            env.process(self._channel(ch))
        if self.cfg.horovod:
            env.process(self._coordinator())
        workers = [env.process(self._worker(w)) for w in range(self.W)]
        env.run(until=simpy.AllOf(env, workers))
        return RunRecord(self.end, self.spans, self.cfg.warmup_iterations)

    # -- compute ---------------------------------------------------------------------------
    def _factor(self, w: int) -> float:
        factor = float(self.slowdown[w] * self.rank_factor[w])
        if self.cfg.jitter_sigma > 0:
            return factor * float(self.rng.lognormal(0.0, self.cfg.jitter_sigma))
        return factor

    def _compute(self, w: int, it: int, names: list[str], secs: list[float], kind: str):
        """One uninterrupted run of layers on the compute stream (a single SimPy timeout).

        With ``sync_stretch`` > 1 (fast engine) the run is followed by an idle wait of
        ``(sync_stretch - 1)`` times its length: the slowest rank is still computing.
        """
        factor = self._factor(w)
        total = sum(secs) * factor * self.cfg.sync_stretch
        if w in self.traced:
            t = self.env.now
            for name, s in zip(names, secs, strict=True):
                self.spans.append(Span(w, "compute", name, kind, t, t + s * factor, it))
                t += s * factor
        if total > 0:
            yield self.env.timeout(total)

    def _wait_until(self, t: float):
        if t > self.env.now:
            yield self.env.timeout(t - self.env.now)

    def _worker(self, w: int):
        env, plan = self.env, self.plan
        n_fwd, n_bwd = len(plan.fwd_s), len(plan.bwd_s)
        for it in range(self.iters):
            if self.cfg.rank_sigma > 0:
                self.rank_factor[w] = rank_factors(self.rng, self.cfg.rank_sigma, 1)[0]
            if plan.input_s is not None:
                ready_s = (it + 1) * plan.input_s  # the input pipeline produces continuously
                if w in self.traced:
                    self.spans.append(
                        Span(w, "input", "input", "input", ready_s - plan.input_s, ready_s, it)
                    )
                yield from self._wait_until(ready_s)
            for op_i in (i for lst in self.pulls_at.values() for i in lst):
                self._register(it, op_i, w)
            start = 0
            for stop in sorted({*self.pulls_at, n_fwd}):
                if stop > start:
                    yield from self._compute(
                        w, it, plan.fwd_names[start:stop], plan.fwd_s[start:stop], "forward"
                    )
                start = stop
                for op_i in self.pulls_at.get(stop, []):
                    yield self.op_done[it][op_i]
                    yield from self._wait_until(self.op_done[it][op_i].value[w])
            start = 0
            for stop in sorted({*(t + 1 for t in self.by_trigger), n_bwd}):
                if stop > start:
                    yield from self._compute(
                        w, it, plan.bwd_names[start:stop], plan.bwd_s[start:stop], "backward"
                    )
                for op_i in self.by_trigger.get(stop - 1, []):
                    self._register(it, op_i, w)
                start = stop
            if self.ops:
                yield self.comm_done[it]
                yield from self._wait_until(self.comm_end[it, w])
            yield from self._compute(w, it, ["update"], [plan.update_s], "update")
            self.end[it, w] = env.now

    # -- communication ---------------------------------------------------------------------
    def _register(self, it: int, op_i: int, w: int) -> None:
        """Worker ``w`` has op ``op_i`` of iteration ``it`` ready now."""
        self.ready[it, op_i, w] = self.env.now
        self.ready_count[it, op_i] += 1
        if self.ready_count[it, op_i] < self.W:
            return
        op = self.ops[op_i]
        if self.cfg.horovod and op.op == "allreduce":
            self.coord_pending.append((it, op_i))
            if self.coord_wake is not None and not self.coord_wake.triggered:
                self.coord_wake.succeed()
            return
        starts = self.ready[it, op_i].copy()
        if op.op == "pull" and (op.layers[0], op.channel) in self.push_end:
            starts = np.maximum(starts, self.push_end[(op.layers[0], op.channel)])
        self.stores[op.channel].put((it, op_i, starts))

    def _coordinator(self):
        """Horovod's background loop: tick, negotiate, launch what is ready everywhere."""
        env, cfg = self.env, self.cfg
        last_s = 0.0
        while True:
            if not self.coord_pending:
                self.coord_wake = env.event()
                yield self.coord_wake
            tick = next_tick_s(max(env.now, last_s), cfg.cycle_time_s)
            yield from self._wait_until(tick)
            batch, self.coord_pending = self.coord_pending, []
            t0 = env.now
            if cfg.negotiation_s > 0:
                yield env.timeout(cfg.negotiation_s)
            for w in self.traced:
                it = batch[0][0]
                self.spans.append(
                    Span(w, "coordinator", "NEGOTIATE_ALLREDUCE", "negotiate", t0, env.now, it)
                )
            for it, op_i in batch:
                self.stores[self.ops[op_i].channel].put((it, op_i, np.full(self.W, env.now)))
            last_s = t0 + cfg.cycle_time_s

    def _channel(self, ch: int):
        """Serialise the ops of one channel; cost each with the engine's cost function."""
        store = self.stores[ch]
        while True:
            it, op_i, starts = yield store.get()
            op = self.ops[op_i]
            starts = np.maximum(starts, self.free[ch])
            ends = np.asarray(self.cost(op, starts), dtype=float)
            self.free[ch] = ends
            for w in self.traced:
                self.spans.append(
                    Span(w, f"comm:{ch}", op.name, op.op, starts[w], ends[w], it, op.nbytes)
                )
            if op.op == "push":
                self.push_end[(op.layers[0], ch)] = float(ends.max())
            self.op_done[it][op_i].succeed(ends)
            np.maximum(self.comm_end[it], ends, out=self.comm_end[it])
            self.comm_left[it] -= 1
            if self.comm_left[it] == 0:
                self.comm_done[it].succeed()
