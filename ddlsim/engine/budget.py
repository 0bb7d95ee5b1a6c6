"""The detailed engine's work and memory, estimated before it starts, and the budget it must fit.

The detailed engine simulates every GPU, so its cost grows with the cluster: SimPy events with
the workers, flow transfers with the schedules (a ring allreduce over N GPUs is 2(N-1) steps of
N flows: N² per operation). :func:`estimate_detailed` counts both from the plan and the
communication model's own schedules (built here one at a time, and kept in the model's cache
for the run), and the memory the run holds; :func:`check_detailed` refuses, with one line
naming the limit and the fast engine, a run over the budget:

- **events** at most ``max_events`` (``--max-events``, default :data:`DEFAULT_MAX_EVENTS`):
  flow transfers, plus :data:`PROCESS_EVENT_WEIGHT` for each SimPy event and each executor
  step, which cost microseconds of Python each where the vectorised executor moves a flow in
  nanoseconds; so the budget bounds the run time whichever kind dominates;
- **memory** at most :data:`MEMORY_FRACTION` of the memory available when the run starts
  (``MemAvailable`` in ``/proc/meminfo``; not checked where it cannot be read).

The per-unit figures were measured on this project's 2-core development machine
(``benchmarks/bench_budget.py`` checks them against real runs): one worker-iteration costs
``segments + 4`` SimPy events, where ``segments`` are the backward points where gradients
become ready plus the forward points that wait for a pull (twice that where compute overlapping
communication is extended by interference: a second timeout per segment); a worker holds
:data:`WORKER_BYTES` plus :data:`WORKER_OP_ITERATION_BYTES` per operation and iteration; a
traced span :data:`SPAN_BYTES`. Measured rates: SimPy 50,000-240,000 events/s, the executor
~12 µs per step and ~190 million flows/s, so a run at the default budget takes at most a few
minutes here (ResNet-50 on 4,096 GPUs: 1.2e10 events, 29 s).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.comm.base import CommModel
from ddlsim.engine.plan import Plan
from ddlsim.errors import ConfigError

#: most events a detailed run may take unless ``--max-events`` says otherwise
DEFAULT_MAX_EVENTS = 2e10
#: what one SimPy event or executor step counts for, in flow transfers (µs against ns)
PROCESS_EVENT_WEIGHT = 1000
#: share of the available memory a detailed run may plan to hold
MEMORY_FRACTION = 0.8
#: SimPy events per worker and iteration beyond one per compute segment (update, input, waits)
EVENTS_PER_WORKER_ITERATION = 4
#: SimPy events per operation and iteration that do not depend on the workers (channels,
#: coordinator)
EVENTS_PER_OP_ITERATION = 6
#: memory of one simulated worker (its SimPy process, arrays' per-worker entries), bytes
WORKER_BYTES = 3_500
#: per worker, operation and iteration (ready times, start and end arrays), bytes
WORKER_OP_ITERATION_BYTES = 16
#: one recorded span of a traced worker, bytes
SPAN_BYTES = 260
#: a schedule's compiled form next to its flow arrays (x the arrays' own bytes)
COMPILED_FACTOR = 2.0


@dataclass(frozen=True)
class Estimate:
    """What a detailed run would cost: counts per whole run, memory in bytes."""

    n_workers: int
    iterations: int
    sim_events: float
    steps: float
    flows: float
    memory_bytes: float

    @property
    def process_events(self) -> float:
        """SimPy events and executor steps (each a few microseconds of Python)."""
        return self.sim_events + self.steps

    @property
    def events(self) -> float:
        """The budgeted count: flow transfers + :data:`PROCESS_EVENT_WEIGHT` x process events."""
        return self.flows + PROCESS_EVENT_WEIGHT * self.process_events


def estimate_detailed(
    plan: Plan,
    comm: CommModel,
    n_workers: int,
    iterations: int,
    traced: int,
    *,
    limit: float,
    timeouts_per_segment: int = 1,
) -> Estimate:
    """Events and memory of ``iterations`` detailed iterations of ``plan`` on ``n_workers``
    workers (``traced`` of them recording spans). A compute segment takes
    ``timeouts_per_segment`` SimPy timeouts (2 where interference with communication extends
    it). Schedules are counted one operation at a time and the count stops early once it
    passes ``limit`` events."""
    ops = plan.ops
    segments = len({op.trigger for op in ops if op.op != "pull"}) + 1
    segments += len({op.fwd_index for op in ops if op.op == "pull"}) + 1
    segments *= timeouts_per_segment
    per_iteration = n_workers * (segments + EVENTS_PER_WORKER_ITERATION)
    sim_events = iterations * (per_iteration + EVENTS_PER_OP_ITERATION * len(ops))
    spans = traced * (len(plan.fwd_s) + len(plan.bwd_s) + len(ops) + 3) * iterations
    memory = n_workers * (WORKER_BYTES + WORKER_OP_ITERATION_BYTES * iterations * len(ops))
    memory += spans * SPAN_BYTES
    steps = flows = 0.0
    seen: set[int] = set()
    for op in ops:
        if flows + PROCESS_EVENT_WEIGHT * (sim_events + steps) > limit:
            break
        schedule = comm.schedule(op.nbytes, op.op, op.channel)
        for s in schedule.steps:
            steps += iterations * s.repeat
            flows += iterations * s.repeat * s.n_flows
            if id(s) not in seen:
                seen.add(id(s))
                arrays = (s.src, s.dst, s.nbytes, s.resources, s.latency_s, s.reducer)
                memory += COMPILED_FACTOR * sum(a.nbytes for a in arrays)
    return Estimate(n_workers, iterations, sim_events, steps, flows, memory)


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
    timeouts_per_segment: int = 1,
) -> Estimate:
    """The estimate, or :class:`ConfigError` (one line) when it is over the budget."""
    limit = check_max_events(max_events)
    est = estimate_detailed(
        plan,
        comm,
        n_workers,
        iterations,
        traced,
        limit=limit,
        timeouts_per_segment=timeouts_per_segment,
    )
    available = available_memory_bytes() if available_bytes is None else available_bytes
    what = (
        f"the detailed engine at {n_workers:,} GPUs would take "
        f"{'over ' if est.events > limit else '~'}{est.events:.2g} events "
        f"({est.process_events:.2g} SimPy events and executor steps, counted "
        f"{PROCESS_EVENT_WEIGHT:,} each, and {est.flows:.2g} flow transfers) and "
        f"~{est.memory_bytes / 2**30:.2g} GiB"
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
