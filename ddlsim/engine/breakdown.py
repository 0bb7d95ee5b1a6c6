"""Where an iteration's time goes, from one worker's traced spans.

The iteration window (from the end of the previous update to the end of this one) is split into
disjoint parts that add up to it exactly:

- ``compute_s``: the compute stream is busy (forward, backward, update);
- ``comm_hidden_s``: communication in flight *while* computing (overlapped by wait-free backprop);
  reported alongside, it is part of ``compute_s``'s wall time, not added to the total;
- ``comm_exposed_s``: communication in flight while the compute stream waits;
- ``input_stall_s``: waiting for the host input pipeline (real data);
- ``coordination_s``: nothing runs: Horovod cycle ticks, negotiation, synchronisation waits.

``compute_s + comm_exposed_s + input_stall_s + coordination_s == iteration time``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ddlsim.engine.intervals import clip, intersection_length, length, union_intervals
from ddlsim.engine.trace import Span, stream_intervals

__all__ = [
    "Breakdown",
    "intervals_breakdown",
    "mean_breakdown",
    "near",
    "stream_intervals",
    "union_intervals",
    "window_breakdown",
]


@dataclass(frozen=True)
class Breakdown:
    """Seconds per iteration by category (see the module docstring)."""

    compute_s: float
    comm_hidden_s: float
    comm_exposed_s: float
    input_stall_s: float
    coordination_s: float

    @property
    def total_s(self) -> float:
        """The iteration time these parts add up to."""
        return self.compute_s + self.comm_exposed_s + self.input_stall_s + self.coordination_s

    def to_dict(self) -> dict[str, float]:
        """Plain dict, seconds."""
        return asdict(self)


def window_breakdown(spans: Iterable[Span], lo: float, hi: float) -> Breakdown:
    """Breakdown of the window ``[lo, hi]`` of one worker's spans."""
    return intervals_breakdown(*stream_intervals(spans), lo, hi)


Intervals = list[tuple[float, float]]


def near(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """The intervals that reach ``[lo, hi]`` (the others change neither its union nor its
    clips: :func:`intervals_breakdown` of them is the same, to the last digit)."""
    return [iv for iv in intervals if iv[1] >= lo and iv[0] <= hi]


def intervals_breakdown(
    compute_ivs: Intervals, comm_ivs: Intervals, input_ivs: Intervals, lo: float, hi: float
) -> Breakdown:
    """Breakdown of the window ``[lo, hi]`` of one worker's compute, communication and input
    intervals."""
    compute = clip(union_intervals(compute_ivs), lo, hi)
    comm = clip(union_intervals(comm_ivs), lo, hi)
    inputs = clip(union_intervals(input_ivs), lo, hi)
    compute_s = length(compute)
    hidden_s = intersection_length(compute, comm)
    exposed_s = length(comm) - hidden_s
    busy = union_intervals(compute + comm)
    stall_s = length(inputs) - intersection_length(union_intervals(inputs), busy)
    coordination_s = max(0.0, (hi - lo) - compute_s - exposed_s - stall_s)
    return Breakdown(compute_s, hidden_s, exposed_s, stall_s, coordination_s)


def mean_breakdown(parts: list[Breakdown]) -> Breakdown:
    """Component-wise mean of several iterations' breakdowns."""
    n = len(parts)
    return Breakdown(*(sum(getattr(p, f) for p in parts) / n for f in Breakdown.__annotations__))
