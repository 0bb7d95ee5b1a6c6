"""What the traced workers did: spans, kept compact until someone reads them.

A run traces one worker (the fast engine's, or rank 0) or several (timelines). Its compute
stream is one span per layer: hundreds per iteration, which a prediction never reads one by
one. So :class:`Trace` keeps, in the order they happen, the spans the run makes (communication,
coordinator, input, interference) and, for each run of layers, one compact record (worker,
iteration, kind, start, time scale, layers); :attr:`Trace.spans` expands them into the spans
they stand for, the same objects with the same times, in the same order, when first read.
:meth:`Trace.intervals` gives one worker's busy intervals per stream without expanding: a run
of layers is one interval, from its start to its last layer's end (its layers' spans are
contiguous: each starts where the previous ended), so unions and clips of them are the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["INTERFERENCE", "Span", "Trace", "stream_intervals"]

#: name and kind of the compute-stream span that interference with communication adds
INTERFERENCE = "interference"

Interval = tuple[float, float]


class Span(NamedTuple):
    """One interval on one worker's stream (seconds)."""

    worker: int
    stream: str  # compute | comm:<channel> | coordinator | input
    name: str
    kind: str
    start_s: float
    end_s: float
    iteration: int
    nbytes: int = 0
    parts: tuple[str, ...] = ()  # a collective fused at run time: the plan's ops it carries


class _Layers(NamedTuple):
    """Layers ``names`` run back to back from ``start_s``, layer ``k`` for ``secs[k] * scale``."""

    worker: int
    iteration: int
    kind: str
    start_s: float
    scale: float
    names: list[str]
    secs: list[float]
    end_s: float

    @property
    def stream(self) -> str:
        """Layers run on the compute stream."""
        return "compute"


_new = tuple.__new__


def _expand(rec: _Layers) -> list[Span]:
    w, it, kind, t, scale = rec.worker, rec.iteration, rec.kind, rec.start_s, rec.scale
    out = []
    for name, s in zip(rec.names, rec.secs, strict=True):
        t_next = t + s * scale
        out.append(_new(Span, (w, "compute", name, kind, t, t_next, it, 0, ())))
        t = t_next
    return out


class Trace:
    """The traced spans of a run, in the order they were made (see the module docstring)."""

    def __init__(self) -> None:
        self._items: list[Span | _Layers] = []
        self._spans: tuple[Span, ...] | None = None

    def add(self, span: Span) -> None:
        """Record ``span``."""
        self._items.append(span)
        self._spans = None

    def layers(
        self, worker: int, it: int, kind: str, start_s: float, scale: float,
        names: list[str], secs: list[float],
    ) -> None:  # fmt: skip
        """Record layers ``names`` of iteration ``it`` run back to back on ``worker``'s compute
        stream from ``start_s``, layer ``k`` taking ``secs[k] * scale``."""
        t = start_s
        for s in secs:
            t = t + s * scale
        self._items.append(_Layers(worker, it, kind, start_s, scale, names, secs, t))
        self._spans = None

    @property
    def spans(self) -> tuple[Span, ...]:
        """Every span, one per layer, in the order the run made them."""
        if self._spans is None:
            out: list[Span] = []
            for x in self._items:
                if isinstance(x, Span):
                    out.append(x)
                else:
                    out.extend(_expand(x))
            self._spans = tuple(out)
        return self._spans

    def comm_spans(self) -> list[Span]:
        """The spans of the communication streams, in order."""
        return [x for x in self._items if isinstance(x, Span) and x.stream.startswith("comm")]

    def intervals(self, worker: int) -> tuple[list[Interval], list[Interval], list[Interval]]:
        """``worker``'s compute, communication and input intervals (a run of layers as one)."""
        return stream_intervals(x for x in self._items if x.worker == worker)


def stream_intervals(
    spans: Iterable[Span | _Layers],
) -> tuple[list[Interval], list[Interval], list[Interval]]:
    """``(start, end)`` of the compute, communication and input spans of ``spans``."""
    compute: list[Interval] = []
    comm: list[Interval] = []
    inputs: list[Interval] = []
    for s in spans:
        if s.stream == "compute":
            compute.append((s.start_s, s.end_s))
        elif s.stream.startswith("comm"):
            comm.append((s.start_s, s.end_s))
        elif s.stream == "input":
            inputs.append((s.start_s, s.end_s))
    return compute, comm, inputs
