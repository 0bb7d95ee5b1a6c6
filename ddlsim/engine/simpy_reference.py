"""The reference replay: every worker, channel and Horovod's coordinator a SimPy process.

This is how ddlsim's engine ran until the engine in :mod:`ddlsim.engine.core` replaced it for
speed (the workers stepped together, the communication in a small event loop that moves time as
SimPy does). It is kept as the reference semantics: ``tests/test_engine_reference.py`` runs
both on the same plans, fast and detailed, with every schedule, and requires the same iteration
end times to the last bits. :func:`reference_run` builds the run as
:func:`ddlsim.engine.simulate.simulate` does. Not used by predict.

Each worker is a SimPy process on its own compute stream; communication ops run on channels
(one SimPy process each, ops serialised per channel); Horovod ops additionally wait for the
coordinator's process (cycle tick and negotiation). Costs, synchronisation terms and fusion
are the engine's own (:mod:`ddlsim.engine.core`'s docstring describes them).

``env.now`` is in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from ddlsim.engine.channels import CostFn
from ddlsim.engine.coordinator import fuse
from ddlsim.engine.core import SYNC_PARTS, EngineConfig
from ddlsim.engine.intervals import clip, length, union_intervals
from ddlsim.engine.plan import CommOp, Plan, merged
from ddlsim.engine.sync import rank_factors
from ddlsim.engine.trace import INTERFERENCE, Span
from ddlsim.execution.horovod import next_tick_s


@dataclass
class RunRecord:
    """What a run produced: per-iteration end time of every worker, traced spans, and worker
    0's synchronisation parts per iteration (seconds, columns :data:`SYNC_PARTS`)."""

    iteration_end_s: np.ndarray  # shape (iterations, workers)
    spans: list[Span] = field(default_factory=list)
    warmup_iterations: int = 0
    sync_s: np.ndarray | None = None  # shape (iterations, len(SYNC_PARTS))


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
        self.rank_factor: dict[int, np.ndarray] = {}  # iteration -> every rank's speed factor
        self.sync_s = np.zeros((self.iters, len(SYNC_PARTS)))
        self.comm_iv: list[list[tuple[float, float]]] = [[] for _ in range(self.W)]
        self.after_ops = plan.pushes_and_allreduces
        self.pull_ops = plan.pulls
        self.ops = self.after_ops + self.pull_ops
        self.by_trigger: dict[int, list[int]] = {}
        for i, op in enumerate(self.after_ops):
            self.by_trigger.setdefault(op.trigger, []).append(i)
        self.pulls_at: dict[int, list[int]] = {}
        for j, op in enumerate(self.pull_ops):
            self.pulls_at.setdefault(op.fwd_index, []).append(len(self.after_ops) + j)
        # ops of the previous iteration the forward pass of a layer waits for (layer-wise update)
        self.gates_at: dict[int, list[int]] = {}
        for i, op in enumerate(self.after_ops):
            if op.deferred:
                self.gates_at.setdefault(op.next_fwd_index, []).append(i)
        n_ops = len(self.ops)
        n_blocking = sum(1 for op in self.ops if not op.deferred)
        self.ready = np.full((self.iters, n_ops, self.W), np.nan)
        self.ready_count = np.zeros((self.iters, n_ops), dtype=int)
        self.op_done = [[self.env.event() for _ in range(n_ops)] for _ in range(self.iters)]
        self.blocking = n_blocking > 0  # whether the update waits for communication
        self.comm_left = [n_blocking] * self.iters  # ops the update waits for
        self.all_left = [n_ops] * self.iters
        self.comm_end = np.zeros((self.iters, self.W))
        self.comm_done = [self.env.event() for _ in range(self.iters)]
        self.all_done = [self.env.event() for _ in range(self.iters)]
        self.push_end: dict[tuple[str, int], float] = {}
        channels = sorted({op.channel for op in self.ops})
        # a schedule that orders operations (priorities) gets a priority queue per channel
        self.prioritised = any(op.priority is not None for op in self.ops)
        store = simpy.PriorityStore if self.prioritised else simpy.Store
        self.stores = {ch: store(self.env) for ch in channels}
        self.queued = 0  # submission counter: FIFO among equal priorities
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
        return RunRecord(self.end, self.spans, self.cfg.warmup_iterations, self.sync_s)

    # -- compute ---------------------------------------------------------------------------
    def _rank_factors(self, it: int) -> np.ndarray:
        """Every rank's speed factor in iteration ``it`` (drawn once, when first needed)."""
        got = self.rank_factor.get(it)
        if got is None:
            got = self.rank_factor[it] = rank_factors(self.rng, self.cfg.rank_sigma, self.W)
        return got

    def _factor(self, w: int, it: int) -> float:
        factor = float(self.slowdown[w] * self._rank_factors(it)[w])
        if self.cfg.jitter_sigma > 0:
            return factor * float(self.rng.lognormal(0.0, self.cfg.jitter_sigma))
        return factor

    def _overlap_s(self, w: int, t0: float, t1: float) -> float:
        """Time within ``[t0, t1]`` during which worker ``w`` had communication in flight
        (its ops' intervals are known once they start; older intervals are dropped)."""
        ivs = [iv for iv in self.comm_iv[w] if iv[1] > t0]
        self.comm_iv[w] = ivs
        return length(clip(union_intervals(ivs), t0, t1))

    def _compute(self, w: int, it: int, names: list[str], secs: list[float], kind: str):
        """One uninterrupted run of layers on the compute stream.

        Node contention stretches the run; afterwards, for the time communication overlapped
        it, a fraction ``interference`` of the GPU was busy with the collectives, so the run
        continues by ``overlap x f / (1 - f)``; with ``sync_stretch`` > 1 (fast engine) an idle
        wait of ``(sync_stretch - 1)`` times the work follows: the slowest rank still computes.
        """
        factor = self._factor(w, it)
        layers_s = sum(secs)
        nominal_s = layers_s * factor
        work_s = nominal_s * (1 + self.cfg.contention)
        t0 = self.env.now
        if w in self.traced and secs:
            t, scale = t0, work_s / layers_s if layers_s > 0 else 0.0
            for name, s in zip(names, secs, strict=True):
                self.spans.append(Span(w, "compute", name, kind, t, t + s * scale, it))
                t += s * scale
        if work_s > 0:
            yield self.env.timeout(work_s)
        extra_s = 0.0
        f = self.cfg.interference
        if f > 0 and work_s > 0:
            extra_s = self._overlap_s(w, t0, self.env.now) * f / (1 - f)
            if extra_s > 0:
                if w in self.traced:
                    end = self.env.now + extra_s
                    self.spans.append(
                        Span(w, "compute", INTERFERENCE, INTERFERENCE, self.env.now, end, it)
                    )
                yield self.env.timeout(extra_s)
        wait_s = (work_s + extra_s) * (self.cfg.sync_stretch - 1)
        if w == 0:
            if self.W > 1 and self.cfg.rank_sigma > 0:  # detailed: the slowest rank's lead
                own = self._rank_factors(it)
                wait_s_0 = layers_s * self.slowdown[0] * (own.max() - own[0])
            else:
                wait_s_0 = wait_s
            self.sync_s[it] += (nominal_s * self.cfg.contention, extra_s, wait_s_0)
        if wait_s > 0:
            yield self.env.timeout(wait_s)

    def _wait_until(self, t: float):
        if t > self.env.now:
            yield self.env.timeout(t - self.env.now)

    def _worker(self, w: int):
        env, plan = self.env, self.plan
        n_fwd, n_bwd = len(plan.fwd_s), len(plan.bwd_s)
        for it in range(self.iters):
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
            gates = self.gates_at if it > 0 else {}
            for stop in sorted({*self.pulls_at, *gates, n_fwd}):
                if stop > start:
                    yield from self._compute(
                        w, it, plan.fwd_names[start:stop], plan.fwd_s[start:stop], "forward"
                    )
                start = stop
                for op_i in self.pulls_at.get(stop, []):
                    yield self.op_done[it][op_i]
                    yield from self._wait_until(self.op_done[it][op_i].value[w])
                for op_i in gates.get(stop, []):  # the previous iteration's gradients
                    yield self.op_done[it - 1][op_i]
                    yield from self._wait_until(self.op_done[it - 1][op_i].value[w])
            start = 0
            for stop in sorted({*(t + 1 for t in self.by_trigger), n_bwd}):
                if stop > start:
                    yield from self._compute(
                        w, it, plan.bwd_names[start:stop], plan.bwd_s[start:stop], "backward"
                    )
                for op_i in self.by_trigger.get(stop - 1, []):
                    self._register(it, op_i, w)
                start = stop
            if self.blocking:
                yield self.comm_done[it]
                yield from self._wait_until(self.comm_end[it, w])
            yield from self._compute(w, it, ["update"], [plan.update_s], "update")
            self.end[it, w] = env.now
        if self.ops:  # the last iteration's deferred operations end the run
            yield self.all_done[self.iters - 1]

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
        self._submit(it, [op_i], starts)

    def _submit(self, it: int, group: list[int], starts: np.ndarray) -> None:
        """Queue the operations ``group`` of iteration ``it`` on their channel: in order of
        submission, or by (iteration, priority) where the schedule sets priorities."""
        store = self.stores[self.ops[group[0]].channel]
        if not self.prioritised:
            store.put((it, group, starts))
            return
        self.queued += 1
        priority = self.ops[group[0]].priority
        key = (it, self.queued if priority is None else priority, self.queued)
        store.put(simpy.PriorityItem(key, (it, group, starts)))

    def _next_cycle_s(self, last_start_s: float, last_end_s: float) -> float:
        """When the coordinator's next cycle starts, something being pending now.

        From Horovod 0.13 cycles start on the ``cycle_time`` grid, at least a cycle after the
        previous start; before, the loop slept ``cycle_time`` after each cycle's work, idle
        cycles included (each costing an empty negotiation), so cycles come every
        ``cycle_time + idle negotiation`` after the last busy one.
        """
        cfg, now = self.cfg, self.env.now
        if not cfg.sleep_after_work:
            return next_tick_s(max(now, last_start_s + cfg.cycle_time_s), cfg.cycle_time_s)
        first = last_end_s + cfg.cycle_time_s
        if now <= first:
            return first
        idle = cfg.negotiation(0, 0) if cfg.negotiation is not None else 0.0
        period = cfg.cycle_time_s + idle
        return first + math.ceil((now - first) / period - 1e-9) * period if period > 0 else now

    def _coordinator(self):
        """Horovod's background loop: tick, negotiate, launch what is ready everywhere."""
        env, cfg = self.env, self.cfg
        last_start, last_end = -cfg.cycle_time_s, 0.0
        while True:
            if not self.coord_pending:
                self.coord_wake = env.event()
                yield self.coord_wake
            yield from self._wait_until(self._next_cycle_s(last_start, last_end))
            batch, self.coord_pending = self.coord_pending, []
            t0 = env.now
            if cfg.negotiation is not None:
                tensors = sum(self.ops[op_i].n_tensors for _, op_i in batch)
                cost_s = cfg.negotiation(tensors, len(batch))
                if cost_s > 0:
                    yield env.timeout(cost_s)
            for w in self.traced:
                it = batch[0][0]
                self.spans.append(
                    Span(w, "coordinator", "NEGOTIATE_ALLREDUCE", "negotiate", t0, env.now, it)
                )
            for it, group in fuse(self.ops, batch, self.cfg.fusion_threshold_bytes):
                self._submit(it, group, np.full(self.W, env.now))
            last_start, last_end = t0, env.now

    def _channel(self, ch: int):
        """Serialise the ops of one channel; cost each with the engine's cost function. In
        submission order, each op is costed as it arrives (its start is when the channel
        frees); with priorities, the channel picks the most urgent op queued when it frees."""
        store = self.stores[ch]
        while True:
            got = yield store.get()
            it, group, starts = got.item if self.prioritised else got
            op = self.ops[group[0]] if len(group) == 1 else merged([self.ops[i] for i in group])
            starts = np.maximum(starts, self.free[ch])
            ends = np.asarray(self.cost(op, starts), dtype=float)
            self.free[ch] = ends
            if self.cfg.interference > 0:
                for w in range(self.W):
                    self.comm_iv[w].append((float(starts[w]), float(ends[w])))
            parts = tuple(self.ops[i].name for i in group) if len(group) > 1 else ()
            for w in self.traced:
                self.spans.append(
                    Span(w, f"comm:{ch}", op.name, op.op, starts[w], ends[w], it, op.nbytes, parts)
                )
            if op.op == "push":
                self.push_end[(op.layers[0], ch)] = float(ends.max())
            for op_i in group:
                self.op_done[it][op_i].succeed(ends)
            blocking = sum(1 for op_i in group if not self.ops[op_i].deferred)
            if blocking:
                np.maximum(self.comm_end[it], ends, out=self.comm_end[it])
                self.comm_left[it] -= blocking
                if self.comm_left[it] == 0:
                    self.comm_done[it].succeed()
            self.all_left[it] -= len(group)
            if self.all_left[it] == 0:
                self.all_done[it].succeed()
            if self.prioritised:  # the next operation is chosen when the channel frees
                yield from self._wait_until(float(ends.min()))


def reference_run(
    dag: Any,
    cluster: Any,
    comm: Any,
    *,
    options: Any = None,
    coordination: Any = None,
) -> RunRecord:
    """The SimPy run of the configuration :func:`ddlsim.engine.simulate.simulate` would run
    (same plan, costs and knobs; ``coordination``: its Horovod coordinator,
    :class:`~ddlsim.execution.horovod.Coordination`; no budget check, no caches)."""
    from ddlsim.comm.executor import execute
    from ddlsim.engine.plan import plan_from_dag
    from ddlsim.engine.simulate import SimOptions, engine_config

    opts = options or SimOptions()
    detailed = opts.engine == "detailed"
    cfg = engine_config(cluster, comm, opts, *(() if coordination is None else (coordination,)))

    def fast(op: CommOp, starts: np.ndarray) -> np.ndarray:
        return starts.max() + comm.time_s(op.nbytes, op.op, op.channel) + np.zeros_like(starts)

    def exact(op: CommOp, starts: np.ndarray) -> np.ndarray:
        return execute(comm.schedule(op.nbytes, op.op, op.channel), starts)

    plan = plan_from_dag(dag, with_comm=cluster.n_gpus > 1)
    return simulate_plan(plan, exact if detailed else fast, cfg)
