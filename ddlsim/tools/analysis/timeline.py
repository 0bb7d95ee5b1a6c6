"""A Chrome-trace / Perfetto JSON timeline of the simulated steady-state iteration (or, with
:func:`build_failure_trace`, of a whole training run with a failure).

:func:`build_trace` simulates one configuration, keeps the last ``iterations`` measured
iterations of the traced workers and turns every span into a complete event (``ph: "X"``,
``ts`` / ``dur`` in microseconds from the start of the first exported iteration):

- one process (``pid``) per traced worker (the fast engine traces one representative worker;
  the detailed engine can trace every GPU), one thread (``tid``) per stream: compute,
  Horovod coordinator, input pipeline, and one per communication channel;
- ``fwd:<layer>`` / ``bwd:<layer>`` / ``update`` on the compute thread, with the layer, its
  FLOPs, gradient bytes and activation bytes in ``args``;
- each (fused) collective with its layers, tensors and bytes in ``args``, named as in
  Horovod's timeline where the phase exists there (``NEGOTIATE_ALLREDUCE``, ``NCCL_ALLREDUCE``,
  ``MPI_ALLREDUCE``); Horovod's ``MEMCPY_IN_FUSION_BUFFER`` / ``MEMCPY_OUT_FUSION_BUFFER`` are
  not emitted: the communication models do not separate the fusion-buffer copies;
- ``WAIT_*`` events on the compute thread where the compute stream idles, split into exactly the
  categories of :mod:`ddlsim.engine.breakdown`, so the compute thread tiles each iteration and
  the waits add up to its ``comm_exposed_s + input_stall_s + coordination_s``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ddlsim.atomic import atomic_write_text
from ddlsim.config.groups import JobConfig
from ddlsim.engine.breakdown import window_breakdown
from ddlsim.engine.core import Span
from ddlsim.engine.simulate import SimResult
from ddlsim.errors import ConfigError
from ddlsim.tools.analysis.trace_events import (
    TID_COMPUTE,
    WAIT_NAMES,
    EventFactory,
    Interval,
    classify_waits,
    us,
)

#: more exported iterations than this make traces nobody opens
MAX_TRACE_ITERATIONS = 100
#: most events in one trace (~250 bytes of JSON each: ~500 MB, what Perfetto's UI still opens)
MAX_TRACE_EVENTS = 2_000_000


def iteration_windows(spans: Iterable[Span], worker: int) -> dict[int, Interval]:
    """Per iteration of ``worker``: (start, end) in seconds, from the end of the previous
    update to the end of this one, as the breakdown counts it."""
    update_end = {s.iteration: s.end_s for s in spans if s.worker == worker and s.kind == "update"}
    return {
        it: (update_end.get(it - 1, 0.0) if it > 0 else 0.0, end)
        for it, end in sorted(update_end.items())
    }


def build_trace(
    config: dict[str, Any],
    *,
    iterations: int = 1,
    workers: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Simulate ``config`` (keyword arguments of :func:`ddlsim.predict`) and return the trace.

    ``iterations``: the last K measured iterations; ``workers``: ranks to trace (default: all
    in the detailed engine, the representative worker 0 in the fast engine).
    """
    from ddlsim import api

    if (
        isinstance(iterations, bool)
        or not isinstance(iterations, int)
        or not 1 <= iterations <= MAX_TRACE_ITERATIONS
    ):
        raise ConfigError(f"iterations must be in 1..{MAX_TRACE_ITERATIONS}, got {iterations!r}")
    job = JobConfig.from_kwargs(**config)
    options = api.sim_options(job.simulation)
    setup = api.prepare(job)
    traced = _resolve_workers(workers, options.engine, setup.cluster.n_gpus)
    _check_trace_size(len(traced), iterations, setup.dag.number_of_nodes())
    options = replace(
        options, measured_iterations=max(3, iterations), trace_workers=frozenset(traced)
    )
    sim = setup.simulate(options)
    inputs = api.describe(job, setup, options)
    return trace_from_sim(sim, setup, inputs, iterations=iterations, workers=traced)


def build_failure_trace(config: dict[str, Any]) -> dict[str, Any]:
    """Predict ``config`` (keyword arguments of :func:`ddlsim.predict`) and return the trace of
    one whole training run in which node 0 fails halfway through
    (:func:`ddlsim.resilience.timeline.failure_timeline`; the other failures drawn with
    ``mc_seed``), its ``metadata.inputs`` recording what re-runs it."""
    from ddlsim import api
    from ddlsim.resilience.timeline import failure_timeline

    prediction = api.predict(**config)
    result = prediction.resilience
    if result is None:
        raise ConfigError(
            "a failure timeline needs failures: the node MTBF is 0 (no failures); give "
            "--node-mtbf-hours H"
        )
    trace = failure_timeline(result, seed=result.config.seed)
    trace["metadata"] = {
        "generator": "ddlsim timeline --failure",
        "inputs": prediction.inputs,
        **trace["metadata"],
    }
    return trace


def _check_trace_size(workers: int, iterations: int, per_iteration: int) -> None:
    """Refuse a trace over :data:`MAX_TRACE_EVENTS` before simulating it (each DAG node is
    about one event per traced worker and iteration; waits add a few)."""
    events = workers * iterations * per_iteration
    if events > MAX_TRACE_EVENTS:
        raise ConfigError(
            f"the trace would hold ~{events:,} events ({workers:,} worker(s) x {iterations} "
            f"iteration(s) x ~{per_iteration} each), more than the {MAX_TRACE_EVENTS:,} trace "
            "viewers open; trace fewer --workers (e.g. 0-7) or --iterations"
        )


def _resolve_workers(workers: Sequence[int] | None, engine: str, n_gpus: int) -> list[int]:
    if workers is None:
        return list(range(n_gpus)) if engine == "detailed" else [0]
    ranks = sorted(set(workers))
    if not ranks:
        raise ConfigError("no workers to trace")
    bad = [w for w in ranks if isinstance(w, bool) or not 0 <= w < n_gpus]
    if bad:
        raise ConfigError(f"worker rank(s) {bad} out of range 0..{n_gpus - 1}")
    if engine != "detailed" and ranks != [0]:
        raise ConfigError(
            "the fast engine simulates one representative worker (rank 0); use --engine "
            "detailed to trace other workers"
        )
    return ranks


def trace_from_sim(
    sim: SimResult, setup: Any, inputs: dict[str, Any], *, iterations: int, workers: list[int]
) -> dict[str, Any]:
    """The trace document of the last ``iterations`` iterations of ``sim`` (see the module)."""
    all_its = sorted({s.iteration for s in sim.spans})
    exported = all_its[-iterations:]
    by_worker: dict[int, list[Span]] = {w: [] for w in workers}
    for s in sim.spans:
        if s.worker in by_worker:
            by_worker[s.worker].append(s)
    windows = {w: iteration_windows(by_worker[w], w) for w in workers}
    t0 = min(windows[w][exported[0]][0] for w in workers)
    t1 = max(windows[w][exported[-1]][1] for w in workers)
    wanted = set(exported)
    keep = [s for w in workers for s in by_worker[w] if s.iteration in wanted]
    factory = EventFactory(setup)
    events = [factory.span(s, t0, t1) for s in keep if s.stream != "input" or s.end_s > t0]
    waits_s: dict[str, dict[str, dict[str, float]]] = {}
    breakdowns: dict[str, dict[str, dict[str, float]]] = {}
    for w in workers:
        for it in exported:
            lo, hi = windows[w][it]
            totals = dict.fromkeys(WAIT_NAMES, 0.0)
            for name, (a, b) in classify_waits(by_worker[w], lo, hi):
                events.append(_wait_event(name, w, it, a, b, t0))
                totals[name] += float(b - a)
            waits_s.setdefault(str(w), {})[str(it)] = totals
            parts = window_breakdown(by_worker[w], lo, hi).to_dict()
            breakdowns.setdefault(str(w), {})[str(it)] = {k: float(v) for k, v in parts.items()}
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"]))
    streams: dict[int, set[str]] = {w: set() for w in workers}
    for s in keep:
        streams[s.worker].add(s.stream)
    meta = factory.metadata(streams, sim.engine)
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "metadata": {
            "generator": "ddlsim timeline",
            "inputs": inputs,
            "engine": sim.engine,
            "workers": workers,
            "iterations": exported,
            "iteration_windows_s": {
                str(w): {str(it): [float(x) for x in windows[w][it]] for it in exported}
                for w in workers
            },
            "time_origin_s": float(t0),
            "trace_end_s": float(t1),
            "steady_state_iteration_time_s": sim.iteration_time_s,
            "breakdown_mean_s": sim.breakdown.to_dict(),
            "breakdown_s": breakdowns,
            "waits_s": waits_s,
            "not_modelled": "Horovod QUEUE, MEMCPY_IN_FUSION_BUFFER and MEMCPY_OUT_FUSION_BUFFER "
            "are inside the collective's duration, not separate phases",
            "wait_categories": dict(WAIT_NAMES),
        },
    }


def _wait_event(name: str, worker: int, it: int, a: float, b: float, t0: float) -> dict:
    return {
        "name": name,
        "cat": "wait",
        "ph": "X",
        "ts": us(a - t0),
        "dur": us(b - a),
        "pid": worker,
        "tid": TID_COMPUTE,
        "args": {"iteration": it, "breakdown": WAIT_NAMES[name]},
    }


def write_trace(trace: dict[str, Any], path: str) -> None:
    """Write ``trace`` as JSON to ``path`` atomically (``-``: standard output).

    The document is serialised completely (C encoder) before anything is written, so a
    serialisation error leaves nothing behind, and a failed write leaves no partial file.
    """
    text = json.dumps(trace, allow_nan=False, default=_jsonable) + "\n"
    atomic_write_text(path, text)


def _jsonable(value: object) -> object:
    """numpy scalars as plain numbers (non-finite ones refused); anything else as text."""
    if hasattr(value, "item"):
        item = value.item()  # type: ignore[attr-defined]
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"non-finite number in trace: {item}")
        return item
    return str(value)
