"""Load a Horovod timeline (``HOROVOD_TIMELINE`` / ``--timeline-filename``).

The format, from ``horovod/common/timeline.cc`` (0.28.1): a Chrome-trace JSON *array* written by
rank 0 only. ``TimelineWriter`` opens it with ``[`` and two metadata records for pid 0, then
gives every tensor its own pid (1, 2, ... in order of first appearance), announced by a
``process_name`` metadata record (``"args": {"name": "<tensor name>"}``) and a
``process_sort_index`` record. Each event is written as ``{...}]``; the next write seeks back
over the ``]`` and writes ``,``, so a file is valid JSON after every event, but a crash leaves
it unterminated or cut inside an object, and older releases never closed the array. Both are
tolerated: a missing ``]`` and an incomplete last object are ignored (``truncated``).

Per tensor pid the events nest (``ph`` B/E):

- ``NEGOTIATE_ALLREDUCE`` (B ... E): from the first rank's request to the last one's, with an
  ``X`` event per rank as it reports ready (name = the rank); with the response cache (default)
  cached tensors later get B/E only;
- the operation (``ALLREDUCE``, ``BROADCAST``, ...: B ... E, the E carrying ``dtype`` and
  ``shape`` args), containing activities (B/E): ``WAIT_FOR_DATA``,
  ``WAIT_FOR_OTHER_TENSOR_DATA``, ``QUEUE``, ``MEMCPY_IN_FUSION_BUFFER``, ``NCCL_ALLREDUCE`` /
  ``MPI_ALLREDUCE`` / ``GLOO_ALLREDUCE`` (hierarchical: ``NCCL_REDUCESCATTER``, ``NCCL_ALLGATHER``,
  ...), ``MEMCPY_OUT_FUSION_BUFFER``. Tensors fused into one buffer get identical activity
  timestamps (``ActivityStartAll``).

``HOROVOD_TIMELINE_MARK_CYCLES=1`` adds instant events ``{"ph": "i", "name": "CYCLE_START",
"s": "g"}`` (no pid), one per background-loop cycle. Timestamps are microseconds since start.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from ddlsim.errors import ConfigError
from ddlsim.inputs import TIMELINE_MAX_BYTES, read_text

NEGOTIATE_PREFIX = "NEGOTIATE_"
CYCLE_START = "CYCLE_START"
DTYPE_BYTES = {
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    "uint16": 2,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "float32": 4,
    "int64": 8,
    "float64": 8,
}
_NEXT_OBJECT = re.compile(r"\}\s*,\s*\{")


@dataclass(frozen=True)
class TimelineSpan:
    """A closed B/E interval on one tensor: ``level`` negotiate, op or activity (seconds)."""

    tensor: str
    name: str
    level: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class HorovodTimeline:
    """Everything summarised from one timeline file."""

    path: str
    spans: tuple[TimelineSpan, ...]
    cycle_starts_s: tuple[float, ...]
    ranks: int | None
    tensor_bytes: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    unclosed_spans: int = 0


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_events(text: str, label: str) -> tuple[list[dict], bool]:
    """The event objects of a Chrome-trace array (or ``{"traceEvents": [...]}``), tolerating a
    missing ``]`` and a cut last object; returns ``(events, truncated)``."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if text.startswith("{", pos):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{label}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            raise ConfigError(f"{label}: a JSON object without a 'traceEvents' list")
        return [e for e in events if isinstance(e, dict)], False
    if not text.startswith("[", pos):
        raise ConfigError(f"{label}: not a Horovod timeline (a JSON array of trace events)")
    pos += 1
    events: list[dict] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            return events, True  # unterminated array
        if text[pos] == "]":
            return events, False
        try:
            event, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if _NEXT_OBJECT.search(text, pos) is None:
                return events, True  # the last object was cut
            line = _line_of(text, exc.pos)
            raise ConfigError(f"{label}:{line}: malformed trace event: {exc.msg}") from None
        if not isinstance(event, dict):
            line = _line_of(text, pos)
            raise ConfigError(f"{label}:{line}: trace events must be JSON objects")
        events.append(event)


def _nbytes(args: object) -> int | None:
    if not isinstance(args, dict) or "shape" not in args or "dtype" not in args:
        return None
    dims = re.findall(r"-?\d+", str(args["shape"]))
    size = DTYPE_BYTES.get(str(args["dtype"]).lower())
    if size is None:
        return None
    count = 1
    for d in dims:
        count *= max(int(d), 0)
    return count * size


def load_timeline(path: str | os.PathLike[str]) -> HorovodTimeline:
    """Read and pair the events of a Horovod timeline file."""
    label = str(path)
    text = read_text(path, "Horovod timeline", TIMELINE_MAX_BYTES, lenient=True)
    events, truncated = parse_events(text, label)
    names: dict[object, str] = {}
    stacks: dict[object, list[tuple[str, float]]] = defaultdict(list)
    spans: list[TimelineSpan] = []
    cycles: list[float] = []
    tensor_bytes: dict[str, int] = {}
    max_rank = -1
    for ev in events:
        ph, pid = ev.get("ph"), ev.get("pid")
        ts = ev.get("ts")
        if ph == "M":
            args = ev.get("args")
            if ev.get("name") == "process_name" and isinstance(args, dict) and "name" in args:
                names[pid] = str(args["name"])
            continue
        if not isinstance(ts, (int, float)):
            continue
        t_s = float(ts) * 1e-6
        if ph == "B":
            stacks[pid].append((str(ev.get("name", "")), t_s))
        elif ph == "E" and stacks[pid]:
            name, start_s = stacks[pid].pop()
            tensor = names.get(pid, f"pid {pid}")
            if name.startswith(NEGOTIATE_PREFIX):
                level = "negotiate"
            else:
                level = "activity" if stacks[pid] else "op"
            spans.append(TimelineSpan(tensor, name, level, start_s, t_s))
            nbytes = _nbytes(ev.get("args"))
            if level == "op" and nbytes is not None:
                tensor_bytes[tensor] = nbytes
        elif ph == "X" and str(ev.get("name", "")).isdigit():
            max_rank = max(max_rank, int(ev["name"]))
        elif ph == "i" and ev.get("name") == CYCLE_START:
            cycles.append(t_s)
    if not spans:
        raise ConfigError(f"{label}: no complete B/E event pairs: not a Horovod timeline?")
    return HorovodTimeline(
        path=label,
        spans=tuple(spans),
        cycle_starts_s=tuple(cycles),
        ranks=max_rank + 1 if max_rank >= 0 else None,
        tensor_bytes=tensor_bytes,
        truncated=truncated,
        unclosed_spans=sum(len(s) for s in stacks.values()),
    )
