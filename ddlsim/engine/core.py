"""The replay shared by both engines: the workers of a :class:`Plan`, in step.

``simulate_plan`` runs ``W`` simulated workers through several iterations of a plan. Every
worker runs the same program -- compute segments on its own compute stream, registering the
communication operations that become ready, waiting for the ones it needs -- at its own pace,
so the workers advance together, one segment at a time, each with its own clock: one float for
one worker (the fast engine), an array of ``W`` for several (the detailed engine), so that a
step costs a few numpy operations however many workers there are. Communication runs on
channels (ops serialised per channel) and, for Horovod, after the coordinator's cycle tick and
negotiation, split as SimPy splits a simulation: the event loop
(:class:`ddlsim.engine.loop.EventLoop`, the environment) that the workers advance to the
instants they need, the channels (:class:`ddlsim.engine.channels.Channels`, the resources),
Horovod's coordinator (:class:`ddlsim.engine.coordinator.Coordinator`, a process) and the
record of what ran (:class:`ddlsim.engine.ledger.Ledger`). The cost of an op is delegated to
``cost(op, starts)``, which maps per-worker start times to per-worker end times:

- the fast engine simulates one representative worker and costs ops in closed form;
- the detailed engine simulates every worker (own speed, jitter) and executes each op as steps
  of flows over shared links (:func:`ddlsim.comm.executor.execute`).

Synchronisation terms (:mod:`ddlsim.engine.sync`) act on the compute stream: ``contention``
slows every rank's compute when GPUs share a node; ``interference`` is the fraction of the GPU
that communication kernels hold while they run, which slows compute overlapping them; the fast
engine's ``sync_stretch`` adds the expected wait for the slowest rank after each compute run
(the detailed engine draws every rank's factor instead). Worker 0's share of each is recorded
per iteration (``RunRecord.sync_s``).

Times are in seconds and move as a discrete-event simulation moves them (a wait from ``t``
until ``u`` ends at ``t + (u - t)``), so the replay gives the same numbers as one SimPy process
per worker did, to the last digit (the detailed engine's jitter apart: its draws come one array
per segment instead of one number per worker and segment, in a different order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ddlsim.engine.channels import Channels, CostFn, Lanes
from ddlsim.engine.coordinator import Coordinator, CoordinatorConfig, NegotiationFn
from ddlsim.engine.intervals import clip, length, overlap_lengths, union_intervals
from ddlsim.engine.ledger import Ledger
from ddlsim.engine.loop import EventLoop
from ddlsim.engine.plan import CommOp, Plan
from ddlsim.engine.sync import rank_factors
from ddlsim.engine.trace import INTERFERENCE, Span, Trace

__all__ = [
    "INTERFERENCE",
    "SYNC_PARTS",
    "EngineConfig",
    "Program",
    "RunRecord",
    "Segment",
    "Span",
    "Trace",
    "program",
    "simulate_plan",
]


#: per-iteration synchronisation parts of worker 0, in ``RunRecord.sync_s`` column order
SYNC_PARTS = ("contention_s", "interference_s", "straggler_wait_s")


@dataclass
class EngineConfig:
    """Engine knobs: simulated workers, their speeds, iterations and Horovod timing."""

    n_workers: int = 1
    slowdown: np.ndarray | None = None  # per-worker compute time multiplier (1 = nominal)
    jitter_sigma: float = 0.0  # log-normal sigma of per-segment compute noise
    rank_sigma: float = 0.0  # detailed: log-normal sigma of each rank's per-iteration speed
    sync_stretch: float = 1.0  # fast: compute stretch of waiting for the slowest rank (>= 1)
    contention: float = 0.0  # compute slowdown of GPUs sharing a node (fraction)
    interference: float = 0.0  # fraction of the GPU communication kernels hold while running
    seed: int = 0
    warmup_iterations: int = 2
    measured_iterations: int = 3
    horovod: bool = False
    cycle_time_s: float = 0.0
    sleep_after_work: bool = False  # Horovod <= 0.12: a fixed sleep after each cycle's work
    fusion_threshold_bytes: int | None = None  # Horovod: fuse what is pending at a cycle
    negotiation: NegotiationFn | None = None  # (tensors, responses) -> seconds per cycle
    trace_workers: frozenset[int] = frozenset({0})


@dataclass
class RunRecord:
    """What a run produced: per-iteration end time of every worker, the traced spans, worker 0's
    synchronisation parts per iteration (seconds, columns :data:`SYNC_PARTS`), and the work
    done: ``steps`` of the workers (compute segments and waits, each over every worker) and
    ``events`` of the communication loop."""

    iteration_end_s: np.ndarray  # shape (iterations, workers)
    trace: Trace = field(default_factory=Trace)
    warmup_iterations: int = 0
    sync_s: np.ndarray | None = None  # shape (iterations, len(SYNC_PARTS))
    steps: int = 0
    events: int = 0


def simulate_plan(plan: Plan, cost: CostFn, cfg: EngineConfig) -> RunRecord:
    """Run ``cfg.warmup_iterations + cfg.measured_iterations`` iterations of ``plan``."""
    return _Run(plan, cost, cfg).run()


@dataclass(frozen=True)
class Segment:
    """Layers run back to back on the compute stream."""

    names: list[str]
    secs: list[float]
    layers_s: float  # sum(secs), summed once
    kind: str


#: a step of a worker's program: a compute segment, or (``"register"`` | ``"pull"`` | ``"gate"``,
#: op index): the op is ready / wait for this iteration's pull / for the previous iteration's op
Step = Segment | tuple[str, int]


@dataclass(frozen=True)
class Program:
    """What every worker does in an iteration of a plan: ``ops`` (ops after the backward pass,
    then pulls), the pulls it registers when the iteration starts, its steps in the first
    iteration and in later ones (which wait for the previous iteration's gating ops), and the
    update."""

    ops: list[CommOp]
    pull_order: list[int]
    first: list[Step]
    later: list[Step]
    update: Segment

    @property
    def blocking(self) -> bool:
        """Whether the update waits for communication."""
        return any(not op.deferred for op in self.ops)

    def worker_steps(self, iterations: int, with_input: bool) -> int:
        """Compute segments and waits of ``iterations`` iterations (each a step of every
        worker at once): the steps of the program, the update, the wait for the operations the
        update needs, and the wait for the input (``with_input``)."""

        def waits(steps: list[Step]) -> int:
            return sum(1 for x in steps if isinstance(x, Segment) or x[0] != "register")

        per_iteration = 1 + self.blocking + with_input
        return waits(self.first) + waits(self.later) * (iterations - 1) + per_iteration * iterations


def program(plan: Plan) -> Program:
    """The :class:`Program` of ``plan``: forward segments split where a pull or a gate waits,
    backward segments where ops become ready (a sharded method's step:
    :func:`sequenced_program`)."""
    if plan.micro_steps > 1 or any(op.issue_pos >= 0 for op in plan.ops):
        return sequenced_program(plan)
    after_ops = plan.pushes_and_allreduces
    pull_ops = plan.pulls
    by_trigger: dict[int, list[int]] = {}
    for i, op in enumerate(after_ops):
        by_trigger.setdefault(op.trigger, []).append(i)
    pulls_at: dict[int, list[int]] = {}
    for j, op in enumerate(pull_ops):
        pulls_at.setdefault(op.fwd_index, []).append(len(after_ops) + j)
    # ops of the previous iteration the forward pass of a layer waits for (layer-wise update)
    gates_at: dict[int, list[int]] = {}
    for i, op in enumerate(after_ops):
        if op.deferred:
            gates_at.setdefault(op.next_fwd_index, []).append(i)
    n_fwd, n_bwd = len(plan.fwd_s), len(plan.bwd_s)
    programs = []
    for gates in ({}, gates_at):
        prog: list[Step] = []
        start = 0
        for stop in sorted({*pulls_at, *gates, n_fwd}):
            if stop > start:
                secs = plan.fwd_s[start:stop]
                prog.append(Segment(plan.fwd_names[start:stop], secs, sum(secs), "forward"))
            start = stop
            prog.extend(("pull", op_i) for op_i in pulls_at.get(stop, []))
            prog.extend(("gate", op_i) for op_i in gates.get(stop, []))
        start = 0
        for stop in sorted({*(t + 1 for t in by_trigger), n_bwd}):
            if stop > start:
                secs = plan.bwd_s[start:stop]
                prog.append(Segment(plan.bwd_names[start:stop], secs, sum(secs), "backward"))
            prog.extend(("register", op_i) for op_i in by_trigger.get(stop - 1, []))
            start = stop
        programs.append(prog)
    update = Segment(["update"], [plan.update_s], sum([plan.update_s]), "update")
    pull_order = [i for lst in pulls_at.values() for i in lst]
    return Program(after_ops + pull_ops, pull_order, programs[0], programs[1], update)


def sequenced_program(plan: Plan) -> Program:
    """The program of a sharded method's step: its micro-steps' forward and backward layers
    in sequence, split where a call is issued (registered) or awaited (a wait for this
    iteration's call, as a pull is awaited)."""
    nf, nb = len(plan.fwd_s) // plan.micro_steps, len(plan.bwd_s) // plan.micro_steps
    per = nf + nb
    total = per * plan.micro_steps
    issued: dict[int, list[int]] = {}
    awaited: dict[int, list[int]] = {}
    for i, op in enumerate(plan.ops):
        issued.setdefault(op.issue_pos, []).append(i)
        if op.wait_pos >= 0:
            awaited.setdefault(op.wait_pos, []).append(i)
    phases = {m * per + k for m in range(plan.micro_steps) for k in (0, nf)}
    steps: list[Step] = []
    start = 0
    for stop in sorted({*issued, *awaited, *phases, total}):
        if stop > start:
            m, k = divmod(start, per)
            if k < nf:  # a forward run
                lo, hi = m * nf + k, m * nf + k + (stop - start)
                names, secs, kind = plan.fwd_names[lo:hi], plan.fwd_s[lo:hi], "forward"
            else:
                lo = m * nb + k - nf
                hi = lo + (stop - start)
                names, secs, kind = plan.bwd_names[lo:hi], plan.bwd_s[lo:hi], "backward"
            steps.append(Segment(names, secs, sum(secs), kind))
        steps.extend(("register", i) for i in issued.get(stop, []))
        steps.extend(("pull", i) for i in awaited.get(stop, []))
        start = stop
    update = Segment(["update"], [plan.update_s], sum([plan.update_s]), "update")
    return Program(list(plan.ops), [], steps, steps, update)


class _Run:
    """State of one run: the workers' clocks (``t``) and the communication loop."""

    def __init__(self, plan: Plan, cost: CostFn, cfg: EngineConfig) -> None:
        self.plan, self.cfg = plan, cfg
        self.W = cfg.n_workers
        self.scalar = self.W == 1
        self.iters = cfg.warmup_iterations + cfg.measured_iterations
        self.slowdown = np.ones(self.W) if cfg.slowdown is None else np.asarray(cfg.slowdown)
        self._rng: np.random.Generator | None = None
        self.rank_factor: dict[int, np.ndarray] = {}  # iteration -> every rank's speed factor
        self._speed: dict[int, Lanes] = {}  # iteration -> slowdown x rank factor
        self.sync_s = [[0.0, 0.0, 0.0] for _ in range(self.iters)]
        self.program = program(plan)
        self.ops = self.program.ops
        self.trace = Trace()
        self.traced = sorted(w for w in cfg.trace_workers if w < self.W)
        self.loop = EventLoop()
        self.ledger = Ledger(self.ops, self.iters, self.W, track_in_flight=cfg.interference > 0)
        self.channels = Channels(
            self.loop, self.ledger, self.ops, cost, traced=self.traced, span=self._span
        )
        self.coordinator = None
        if cfg.horovod:
            horovod = CoordinatorConfig(
                cfg.cycle_time_s, cfg.sleep_after_work, cfg.fusion_threshold_bytes,
                cfg.negotiation,
            )  # fmt: skip
            self.coordinator = Coordinator(
                self.loop, self.channels, self.ops, horovod,
                n_workers=self.W, traced=self.traced, span=self._span,
            )  # fmt: skip
        self.end = np.zeros((self.iters, self.W))
        self.steps = 0
        self.t: Lanes = 0.0 if self.scalar else np.zeros(self.W)

    def _span(self, *fields: object) -> None:
        self.trace.add(Span(*fields))  # type: ignore[arg-type]

    def run(self) -> RunRecord:
        plan = self.plan
        for it in range(self.iters):
            if plan.input_s is not None:
                ready_s = (it + 1) * plan.input_s  # the input pipeline produces continuously
                for w in self.traced:
                    self._span(w, "input", "input", "input", ready_s - plan.input_s, ready_s, it)
                self.steps += 1
                self._wait_until(ready_s)
            for op_i in self.program.pull_order:
                self._register(it, op_i)
            for step in self.program.later if it > 0 else self.program.first:
                if isinstance(step, Segment):
                    self._compute(it, step)
                    continue
                what, op_i = step
                if what == "register":
                    self._register(it, op_i)
                else:  # a pull of this iteration, or the previous iteration's gradients
                    self._wait_op(it if what == "pull" else it - 1, op_i)
            if self.ledger.blocking:
                comm_done = self.ledger.comm_done
                self.loop.run_until(lambda it=it, done=comm_done: it in done)
                self._resume(comm_done[it], self.ledger.comm_end[it])
            self._compute(it, self.program.update)
            self.end[it] = self.t
        if self.ops:  # the last iteration's deferred operations end the run
            last = self.iters - 1
            self.loop.run_until(lambda: last in self.ledger.all_done)
        return RunRecord(
            self.end,
            self.trace,
            self.cfg.warmup_iterations,
            np.array(self.sync_s).reshape(self.iters, len(SYNC_PARTS)),
            self.steps,
            self.loop.events,
        )

    # -- waits -------------------------------------------------------------------------------
    def _wait_until(self, target: Lanes) -> None:
        """Each worker idles until ``target`` (its own entry) if it is not there yet."""
        t = self.t
        if self.scalar:
            if target > t:
                self.t = t + (target - t)
        else:
            self.t = np.where(target > t, t + (target - t), t)

    def _resume(self, time_s: float, target: Lanes) -> None:
        """The workers blocked on an event that happened at ``time_s`` resume, then each
        waits until its ``target``."""
        self.steps += 1
        t = self.t
        self.t = (t if t >= time_s else time_s) if self.scalar else np.maximum(t, time_s)
        self._wait_until(target)

    def _wait_op(self, it: int, op_i: int) -> None:
        key = (it, op_i)
        done = self.ledger.done
        self.loop.run_until(lambda: key in done)
        self._resume(*done[key])

    def _register(self, it: int, op_i: int) -> None:
        """Every worker has op ``op_i`` of iteration ``it`` ready now (its own now): it is
        ready on the loop at the latest worker's time."""
        t = self.t
        self.loop.at(float(t if self.scalar else t.max()), self._ready, it, op_i, t)

    def _ready(self, it: int, op_i: int, starts: Lanes) -> None:
        """An operation ready everywhere: an allreduce waits for Horovod's coordinator (where
        there is one), anything else goes to its channel."""
        if self.coordinator is not None and self.ops[op_i].op == "allreduce":
            self.coordinator.pend(it, op_i)
        else:
            self.channels.ready(it, op_i, starts)

    # -- compute -----------------------------------------------------------------------------
    @property
    def rng(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = np.random.default_rng(self.cfg.seed)
        return self._rng

    def _rank_factors(self, it: int) -> np.ndarray:
        """Every rank's speed factor in iteration ``it`` (drawn once, when first needed)."""
        got = self.rank_factor.get(it)
        if got is None:
            sigma = self.cfg.rank_sigma
            got = rank_factors(self.rng, sigma, self.W) if sigma > 0 else np.ones(self.W)
            self.rank_factor[it] = got
        return got

    def _factor(self, it: int) -> Lanes:
        """Every worker's compute-time factor in this segment of iteration ``it``."""
        speed = self._speed.get(it)
        if speed is None:
            speed = self.slowdown * self._rank_factors(it)
            speed = self._speed[it] = float(speed[0]) if self.scalar else speed
        if self.cfg.jitter_sigma > 0:
            if self.scalar:
                return speed * float(self.rng.lognormal(0.0, self.cfg.jitter_sigma))
            return speed * self.rng.lognormal(0.0, self.cfg.jitter_sigma, self.W)
        return speed

    def _overlap_s(self, t0: Lanes, t1: Lanes) -> Lanes:
        """Per worker, the time within ``[t0, t1]`` during which it had communication in
        flight: the operations that started before ``t1`` (their intervals are known once they
        start); ones over for every worker are dropped."""
        loop, ledger = self.loop, self.ledger
        if self.scalar:
            loop.run_before(t1)
            live = [x for x in ledger.in_flight if x[2] > t0]
            ledger.in_flight = live
            ivs = [(s, e) for time_s, s, e in live if time_s < t1]
            if not ivs:
                return 0.0
            if len(ivs) == 1:  # length(clip(union_intervals(ivs), t0, t1)) of one interval
                a, b = ivs[0]
                return (b if b < t1 else t1) - (a if a > t0 else t0) if a < b and a < t1 else 0.0
            return length(clip(union_intervals(ivs), t0, t1))
        loop.run_before(float(t1.max()))
        t0_min = float(t0.min())
        live = [x for x in ledger.in_flight if x[2].max() > t0_min]
        ledger.in_flight = live
        rows = [x for x in live if x[0] < t1.max()]
        if not rows:
            return np.zeros(self.W)
        starts = np.stack([x[1] for x in rows])
        ends = np.stack([x[2] for x in rows])
        times = np.array([x[0] for x in rows])
        valid = (times[:, None] < t1) & (ends > t0) & (ends > starts)
        return overlap_lengths(starts, ends, valid, t0, t1)

    def _compute(self, it: int, seg: Segment) -> None:
        """One uninterrupted run of layers on the compute stream.

        Node contention stretches the run; afterwards, for the time communication overlapped
        it, a fraction ``interference`` of the GPU was busy with the collectives, so the run
        continues by ``overlap x f / (1 - f)``; with ``sync_stretch`` > 1 (fast engine) an idle
        wait of ``(sync_stretch - 1)`` times the work follows: the slowest rank still computes.
        """
        cfg = self.cfg
        self.steps += 1
        layers_s = seg.layers_s
        nominal_s = layers_s * self._factor(it)
        work_s = nominal_s * (1 + cfg.contention)
        t0 = self.t
        for w in self.traced:
            t_w = t0 if self.scalar else t0[w]
            work_w = work_s if self.scalar else work_s[w]
            scale = work_w / layers_s if layers_s > 0 else 0.0
            self.trace.layers(w, it, seg.kind, t_w, scale, seg.names, seg.secs)
        t1 = t0 + work_s
        f = cfg.interference
        extra_s: Lanes = 0.0 if self.scalar else np.zeros(self.W)
        if f > 0 and (work_s > 0 if self.scalar else bool(work_s.max() > 0)):
            extra_s = self._overlap_s(t0, t1) * f / (1 - f)
            for w in self.traced:
                extra_w = extra_s if self.scalar else extra_s[w]
                if extra_w > 0:
                    t1_w = t1 if self.scalar else t1[w]
                    self._span(w, "compute", INTERFERENCE, INTERFERENCE, t1_w, t1_w + extra_w, it)
        t2 = t1 + extra_s
        wait_s = (work_s + extra_s) * (cfg.sync_stretch - 1)
        if self.W > 1 and cfg.rank_sigma > 0:  # detailed: the slowest rank's lead on worker 0
            own = self._rank_factors(it)
            wait_s_0 = layers_s * self.slowdown[0] * (own.max() - own[0])
        else:
            wait_s_0 = wait_s if self.scalar else wait_s[0]
        parts = self.sync_s[it]
        if self.scalar:
            parts[0] += nominal_s * cfg.contention
            parts[1] += extra_s
        else:
            parts[0] += nominal_s[0] * cfg.contention
            parts[1] += extra_s[0]
        parts[2] += wait_s_0
        self.t = t2 + wait_s
