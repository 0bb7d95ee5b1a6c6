"""Per-iteration phase times of a Horovod timeline, and of a ddlsim simulation to compare.

Iterations are found by the repeat of the first all-reduced tensor's negotiation: every
``NEGOTIATE_ALLREDUCE`` start of that tensor opens an iteration, which lasts until the next one
(the last window, closed by the end of the file, has no iteration time). Events before the
first window (the initial broadcast of the variables) are left out. In each window a phase's
time is the wall time during which at least one span of the phase is open (union of
intervals, clipped to the window):

- ``negotiate_s``: ``NEGOTIATE_*`` spans (first rank ready -> last rank ready: this includes
  waiting for the slowest rank's backward pass);
- ``memcpy_in_s`` / ``memcpy_out_s``: ``MEMCPY_IN_*`` / ``MEMCPY_OUT_*`` (fusion-buffer copies);
- ``allreduce_s``: the collective itself (``NCCL_*``, ``MPI_*``, ``GLOO_*``, ``CCL_*``);
- ``queue_wait_s``: ``QUEUE``, ``WAIT_FOR_DATA``, ``WAIT_FOR_OTHER_TENSOR_DATA``.

ddlsim's simulated spans (:func:`simulated_phases`) have a negotiation round per fused launch on
the coordinator (``NEGOTIATE_ALLREDUCE``, control latencies only, no waiting for ranks) and the
collectives on the comm streams; fusion-buffer copies are not modelled (``None``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.tools.traces.timeline import NEGOTIATE_PREFIX, HorovodTimeline, TimelineSpan

PHASES = ("negotiate_s", "memcpy_in_s", "allreduce_s", "memcpy_out_s", "queue_wait_s")
_COLLECTIVE_PREFIXES = ("NCCL_", "MPI_", "GLOO_", "CCL_")
_WAITS = ("QUEUE", "WAIT_FOR_DATA", "WAIT_FOR_OTHER_TENSOR_DATA")


@dataclass(frozen=True)
class IterationPhases:
    """One iteration's phase times (seconds); ``duration_s`` None for the last window."""

    index: int
    start_s: float
    duration_s: float | None
    negotiate_s: float
    memcpy_in_s: float | None
    allreduce_s: float
    memcpy_out_s: float | None
    queue_wait_s: float | None
    n_tensors: int
    n_ops: int
    nbytes: int
    cycles: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def phase_of(span: TimelineSpan) -> str | None:
    """The phase a timeline span counts towards (None: not one of the phases)."""
    name = span.name
    if span.level == "negotiate":
        return "negotiate_s"
    if span.level != "activity":
        return None
    if name.startswith("MEMCPY_IN_"):
        return "memcpy_in_s"
    if name.startswith("MEMCPY_OUT_"):
        return "memcpy_out_s"
    if name in _WAITS:
        return "queue_wait_s"
    if name.startswith(_COLLECTIVE_PREFIXES):
        return "allreduce_s"
    return None


def union_s(intervals: Iterable[tuple[float, float]], lo: float, hi: float) -> float:
    """Total length of the union of ``intervals`` clipped to ``[lo, hi)``."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, end = 0.0, lo
    for a, b in clipped:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def iteration_starts_s(timeline: HorovodTimeline) -> tuple[str, list[float]]:
    """The first all-reduced tensor and the start times of its negotiations."""
    negotiations = sorted(
        (s for s in timeline.spans if s.name == NEGOTIATE_PREFIX + "ALLREDUCE"),
        key=lambda s: s.start_s,
    )
    if not negotiations:
        raise ConfigError(f"{timeline.path}: no NEGOTIATE_ALLREDUCE spans: no iterations to find")
    first = negotiations[0].tensor
    return first, [s.start_s for s in negotiations if s.tensor == first]


def timeline_phases(timeline: HorovodTimeline) -> list[IterationPhases]:
    """Phase times of every iteration window of ``timeline``."""
    _, starts = iteration_starts_s(timeline)
    t_end = max(s.end_s for s in timeline.spans)
    bounds = [*starts, t_end]
    out = []
    for k, lo in enumerate(starts):
        hi = bounds[k + 1]
        by_phase: dict[str, list[tuple[float, float]]] = {p: [] for p in PHASES}
        tensors, launches = set(), set()
        for span in timeline.spans:
            phase = phase_of(span)
            if phase is not None:
                by_phase[phase].append((span.start_s, span.end_s))
            if span.level == "op" and span.name == "ALLREDUCE" and lo <= span.end_s <= hi:
                tensors.add(span.tensor)
            if phase == "allreduce_s" and lo <= span.start_s < hi:
                launches.add((span.name, span.start_s))
        out.append(
            IterationPhases(
                index=k,
                start_s=lo,
                duration_s=hi - lo if k + 1 < len(starts) else None,
                **{p: union_s(by_phase[p], lo, hi) for p in PHASES},
                n_tensors=len(tensors),
                n_ops=len(launches),
                nbytes=sum(timeline.tensor_bytes.get(t, 0) for t in tensors),
                cycles=sum(1 for c in timeline.cycle_starts_s if lo <= c < hi),
            )
        )
    return out


def steady_state(iterations: Sequence[IterationPhases]) -> dict[str, Any]:
    """Mean of each figure over the complete iterations after the first (warm-up) one."""
    complete = [it for it in iterations if it.duration_s is not None]
    chosen = complete[1:] if len(complete) > 1 else complete or list(iterations)
    out: dict[str, Any] = {"iterations": [it.index for it in chosen]}
    for key in ("duration_s", *PHASES, "n_tensors", "n_ops", "nbytes", "cycles"):
        values = [getattr(it, key) for it in chosen if getattr(it, key) is not None]
        out[key] = statistics.fmean(values) if values else None
    return out


def simulated_phases(spans: Sequence[Any], iteration_time_s: float, n_measured: int) -> dict:
    """The same figures from ddlsim's spans of worker 0 (mean of the measured iterations)."""
    own = [s for s in spans if s.worker == 0]
    last = max((s.iteration for s in own), default=0)
    chosen = list(range(max(0, last - n_measured + 1), last + 1))
    per_iter = []
    for it in chosen:
        mine = [s for s in own if s.iteration == it]
        neg = [(float(s.start_s), float(s.end_s)) for s in mine if s.name.startswith("NEGOTIATE")]
        comm = [s for s in mine if s.stream.startswith("comm")]
        intervals = [(float(s.start_s), float(s.end_s)) for s in comm]
        per_iter.append(
            {
                "negotiate_s": union_s(neg, -1e9, 1e9),
                "allreduce_s": union_s(intervals, -1e9, 1e9),
                "n_ops": len(comm),
                "nbytes": sum(int(s.nbytes) for s in comm),
            }
        )
    out: dict[str, Any] = {"iterations": chosen, "duration_s": iteration_time_s}
    for key in ("negotiate_s", "allreduce_s", "n_ops", "nbytes"):
        out[key] = statistics.fmean(p[key] for p in per_iter) if per_iter else None
    out.update(memcpy_in_s=None, memcpy_out_s=None, queue_wait_s=None, n_tensors=None)
    return out
