"""The detailed engine's work and memory, estimated before it starts, and the budget it must fit.

The detailed engine simulates every GPU, so part of its cost grows with the cluster. A run of
``I`` iterations on ``N`` workers does (:mod:`ddlsim.engine.core`, :mod:`ddlsim.engine.channels`,
:mod:`ddlsim.comm.executor`):

- **worker steps** ``S``: the compute segments and waits of the workers' program (segments end
  where a bucket becomes ready or a pull or gate waits, so ``S ~ I x (fused buffers + pulls +
  3)``, whatever ``N`` is), each a few numpy operations over all ``N`` workers at once: ``S``
  Python steps and ``N x S`` *lane steps*;
- **loop events** ``E``: per operation and iteration one when it is ready, two more for
  Horovod's cycle tick and negotiation, two more where several channels or priorities hand
  operations over (a store's put and get), one more where a channel with priorities frees;
- **executor steps and flows**: each operation runs its schedule (a ring allreduce over ``N``
  GPUs is ``2(N-1)`` steps of ``N`` flows; NCCL's tree one step of ~``4N`` flows repeated once
  per pipeline level), each step a few numpy operations over its flows.

:func:`estimate_detailed` counts all of them from the plan (the worker steps exactly: the same
program) and the communication model's own schedules (built here one at a time, and kept in
the model's cache for the run), and the memory the run holds; :func:`check_detailed` refuses,
with one line naming the limit and the fast engine, a run over the budget:

- **events** (:attr:`Estimate.events`) at most ``max_events`` (``--max-events``, default
  :data:`DEFAULT_MAX_EVENTS`): the work weighted by what each kind costs, in units of about
  1.5 ns of one core here: :data:`FLOW_WEIGHT` per flow transfer, :data:`LANE_WEIGHT` per lane
  step, :data:`PROCESS_EVENT_WEIGHT` per worker step, loop event and executor step (which cost
  microseconds of Python each where the executor moves a flow in nanoseconds); so the budget
  bounds the run time whichever kind dominates;
- **memory** at most :data:`MEMORY_FRACTION` of the memory available when the run starts
  (``MemAvailable`` in ``/proc/meminfo``; not checked where it cannot be read).

The weights were fitted to the CPU time of 16 detailed runs on this project's 2-core
development machine (8 to 4,096 GPUs, six methods; ``benchmarks/bench_budget.py`` prints the
estimate against the counts of real runs and the time per event): the executor moves a flow in
~6 ns, a lane step costs ~110 ns, a Python step ~2.3 µs. So the default budget is about half
a minute here (ResNet-50 on 4,096 GPUs: ~6.7e8 events, about a second; on a million GPUs the
worker lanes alone are over it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.comm.base import CommModel
from ddlsim.engine.core import program
from ddlsim.engine.plan import Plan
from ddlsim.errors import ConfigError

#: most events a detailed run may take unless ``--max-events`` says otherwise (about half a
#: minute of one core here)
DEFAULT_MAX_EVENTS = 2e10
#: what one flow transfer counts for (~6 ns)
FLOW_WEIGHT = 4
#: what one worker's share of a worker step counts for (~110 ns)
LANE_WEIGHT = 80
#: what one worker step, loop event or executor step counts for (~2.3 µs of Python)
PROCESS_EVENT_WEIGHT = 1600
#: share of the available memory a detailed run may plan to hold
MEMORY_FRACTION = 0.8
#: memory of one simulated worker (its clock, speed and end times), bytes
WORKER_BYTES = 200
#: per worker, operation and iteration (the end times the run keeps), bytes
WORKER_OP_ITERATION_BYTES = 16
#: one recorded span of a traced worker, bytes
SPAN_BYTES = 200
#: a schedule's compiled form next to its flow arrays (x the arrays' own bytes)
COMPILED_FACTOR = 2.0


@dataclass(frozen=True)
class Estimate:
    """What a detailed run costs (counts per whole run, memory in bytes): estimated by
    :func:`estimate_detailed`, or counted during a run (``SimResult.work``)."""

    n_workers: int
    iterations: int
    worker_steps: float
    loop_events: float
    steps: float
    flows: float
    memory_bytes: float = 0.0

    @property
    def lane_steps(self) -> float:
        """Worker steps times the workers each one moves."""
        return self.n_workers * self.worker_steps

    @property
    def process_events(self) -> float:
        """Worker steps, loop events and executor steps (each a few µs of Python)."""
        return self.worker_steps + self.loop_events + self.steps

    @property
    def events(self) -> float:
        """The budgeted count: :data:`FLOW_WEIGHT` x flow transfers + :data:`LANE_WEIGHT` x lane
        steps + :data:`PROCESS_EVENT_WEIGHT` x process events."""
        lanes = LANE_WEIGHT * self.lane_steps
        return FLOW_WEIGHT * self.flows + lanes + PROCESS_EVENT_WEIGHT * self.process_events


def loop_events_per_op(plan: Plan, horovod: bool) -> list[int]:
    """Events of the communication loop per operation of ``plan`` and iteration (see the
    module docstring; Horovod ops fused at run time share theirs, so this is an upper bound)."""
    prioritised = any(op.priority is not None for op in plan.ops)
    handed = prioritised or len({op.channel for op in plan.ops}) > 1
    per_op = []
    for op in plan.ops:
        n = 1 + (2 if horovod and op.op == "allreduce" else 0)
        per_op.append(n + 2 * handed + prioritised)
    return per_op


def estimate_detailed(
    plan: Plan,
    comm: CommModel,
    n_workers: int,
    iterations: int,
    traced: int,
    *,
    limit: float,
    horovod: bool = False,
) -> Estimate:
    """Events and memory of ``iterations`` detailed iterations of ``plan`` on ``n_workers``
    workers (``traced`` of them recording spans; ``horovod``: the coordinator runs). Schedules
    are counted one operation at a time and the count stops early once it passes ``limit``
    events."""
    ops = plan.ops
    worker_steps = program(plan).worker_steps(iterations, plan.input_s is not None)
    loop_events = iterations * sum(loop_events_per_op(plan, horovod))
    spans = traced * (len(plan.fwd_s) + len(plan.bwd_s) + len(ops) + 3) * iterations
    memory = n_workers * (WORKER_BYTES + WORKER_OP_ITERATION_BYTES * iterations * len(ops))
    memory += spans * SPAN_BYTES
    est = Estimate(n_workers, iterations, worker_steps, loop_events, 0.0, 0.0)
    steps = flows = 0.0
    seen: set[int] = set()
    for op in ops:
        if est.events + FLOW_WEIGHT * flows + PROCESS_EVENT_WEIGHT * steps > limit:
            break
        schedule = comm.schedule(op.nbytes, op.op, op.channel)
        for s in schedule.steps:
            if s.n_flows:
                steps += iterations * s.repeat
                flows += iterations * s.repeat * s.n_flows
            if id(s) not in seen:
                seen.add(id(s))
                arrays = (s.src, s.dst, s.nbytes, s.resources, s.latency_s, s.reducer)
                memory += COMPILED_FACTOR * sum(a.nbytes for a in arrays)
    return Estimate(n_workers, iterations, worker_steps, loop_events, steps, flows, memory)


def available_memory_bytes() -> float | None:
    """Memory available to a new allocation now (Linux ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_max_events(max_events: object) -> float:
    """``max_events`` as a float, or ConfigError naming the value."""
    ok = isinstance(max_events, (int, float)) and not isinstance(max_events, bool)
    if not ok or not 1 <= max_events < float("inf"):  # type: ignore[operator]
        raise ConfigError(f"max events must be a finite number >= 1, got {max_events!r}")
    return float(max_events)  # type: ignore[arg-type]


def check_detailed(
    plan: Plan,
    comm: CommModel,
    n_workers: int,
    iterations: int,
    traced: int,
    max_events: float = DEFAULT_MAX_EVENTS,
    available_bytes: float | None = None,
    horovod: bool = False,
) -> Estimate:
    """The estimate, or :class:`ConfigError` (one line) when it is over the budget."""
    limit = check_max_events(max_events)
    est = estimate_detailed(plan, comm, n_workers, iterations, traced, limit=limit, horovod=horovod)
    available = available_memory_bytes() if available_bytes is None else available_bytes
    what = (
        f"the detailed engine at {n_workers:,} GPUs would take "
        f"{'over ' if est.events > limit else '~'}{est.events:.2g} events "
        f"({est.process_events:.2g} worker steps, loop events and executor steps, counted "
        f"{PROCESS_EVENT_WEIGHT:,} each, {est.lane_steps:.2g} worker lanes, counted "
        f"{LANE_WEIGHT} each, and {est.flows:.2g} flow transfers, counted {FLOW_WEIGHT} each) "
        f"and ~{est.memory_bytes / 2**30:.2g} GiB"
    )
    if est.events > limit:
        raise ConfigError(
            f"{what}, more than --max-events {limit:.3g}; use --engine fast (one "
            "representative worker, the same result on homogeneous inputs) or raise --max-events"
        )
    if available is not None and est.memory_bytes > MEMORY_FRACTION * available:
        raise ConfigError(
            f"{what}, more than {MEMORY_FRACTION:.0%} of the {available / 2**30:.3g} GiB of "
            "memory available; use --engine fast (one representative worker, the same result "
            "on homogeneous inputs) or fewer GPUs"
        )
    return est
