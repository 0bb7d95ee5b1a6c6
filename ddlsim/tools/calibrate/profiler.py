"""Reading a TensorFlow profiler trace and attributing its op time to zoo layers.

``tf.profiler.experimental.start/stop`` writes ``<logdir>/plugins/profile/<run>/<host>.xplane.pb``
(an ``XSpace`` protobuf; TensorFlow ships the reader, ``tensorflow.tsl.profiler.protobuf``).
:func:`read_trace` extracts two things from it:

* step windows: the ``train`` TraceMe events the pass wraps around each traced step
  (``tf.profiler.experimental.Trace("train", step_num=i)``), on the host plane;
* op events: on the CPU, host-plane events named ``scope/.../op:OpType`` (nested events on one
  thread are counted once, at the outermost); on a GPU, kernel events of the ``/device:GPU:N``
  plane, named by their ``tf_op`` stat.

:func:`attribute` assigns each op event of a step to a zoo layer by its name: a ``gradient_tape/``
prefix marks the backward pass; after the model's root scope, the scope components are matched
against the zoo layer paths (a component may carry TensorFlow's ``_N`` uniquifying suffix). Op
time outside every layer (optimizer, gradient sums outside a layer scope, flatten reshapes) is
*unattributed*. This module only needs TensorFlow to read the protobuf (:func:`read_trace`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlsim.errors import CalibrationError

STEP_EVENT = "train"
BACKWARD_PREFIX = "gradient_tape"
_OP_EVENT = re.compile(r"^(?P<name>[^:\s][^:]*):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")
_SUFFIX = re.compile(r"^(?P<base>.+)_\d+$")
_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
PS = 1e-12  # seconds per picosecond


@dataclass(frozen=True)
class OpEvent:
    """One executed op: TF op name (``scope/.../op``), its type, start and duration (ps)."""

    name: str
    op_type: str
    start_ps: int
    duration_ps: int


@dataclass(frozen=True)
class StepWindow:
    """One traced training step on the host clock (ps)."""

    step: int
    start_ps: int
    end_ps: int

    @property
    def duration_s(self) -> float:
        """Wall time of the step."""
        return (self.end_ps - self.start_ps) * PS


@dataclass
class Attribution:
    """Per-layer forward / backward seconds per step (means over the traced steps)."""

    fwd_s: dict[str, float]
    bwd_s: dict[str, float]
    unattributed_s: float
    step_times_s: list[float]
    top_unattributed: list[tuple[str, float]] = field(default_factory=list)
    n_events: int = 0

    @property
    def step_time_s(self) -> float:
        """Mean traced step time."""
        return sum(self.step_times_s) / len(self.step_times_s)

    @property
    def sum_layers_s(self) -> float:
        """Sum of the per-layer forward and backward times."""
        return sum(self.fwd_s.values()) + sum(self.bwd_s.values())


def _stat_str(plane: Any, stat: Any) -> str | None:
    kind = stat.WhichOneof("value")
    if kind == "str_value":
        return str(stat.str_value)
    if kind == "ref_value":
        return str(plane.stat_metadata[stat.ref_value].name)
    return None


def _top_level(events: list[OpEvent]) -> list[OpEvent]:
    """Drop events nested inside an earlier event of the same thread."""
    out: list[OpEvent] = []
    end = -1
    for ev in sorted(events, key=lambda e: (e.start_ps, -e.duration_ps)):
        if ev.start_ps >= end:
            out.append(ev)
            end = ev.start_ps + ev.duration_ps
    return out


def _plane_events(plane: Any, gpu: bool) -> list[OpEvent]:
    events: list[OpEvent] = []
    for line in plane.lines:
        base_ps = int(line.timestamp_ns) * 1000
        found: list[OpEvent] = []
        for ev in line.events:
            label: str | None = plane.event_metadata[ev.metadata_id].name
            if gpu:
                label = next(
                    (
                        _stat_str(plane, s)
                        for s in ev.stats
                        if plane.stat_metadata[s.metadata_id].name == "tf_op"
                    ),
                    None,
                )
            match = _OP_EVENT.match(label or "")
            if match and match["type"] not in _CALL_OPS:
                start = base_ps + int(ev.offset_ps)
                found.append(OpEvent(match["name"], match["type"], start, int(ev.duration_ps)))
        events.extend(found if gpu else _top_level(found))
    return events


def read_trace(
    logdir: str | Path, device: str = "/device:CPU:0"
) -> tuple[list[StepWindow], list[OpEvent]]:
    """Step windows and the op events of ``device`` (a TF device name) in the ``*.xplane.pb``
    under ``logdir``: host-plane op events for the CPU, kernels of that GPU's plane for a GPU."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(Path(logdir).rglob("*.xplane.pb"))
    if not files:
        raise CalibrationError(f"the TensorFlow profiler wrote no *.xplane.pb under {logdir}")
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[-1].read_bytes())
    windows: list[StepWindow] = []
    events: list[OpEvent] = []
    gpu = device.startswith("/device:GPU:")
    for plane in space.planes:
        if plane.name.startswith("/host:"):
            windows.extend(_step_windows(plane))
            if not gpu:
                events.extend(_plane_events(plane, gpu=False))
        elif gpu and plane.name == device:
            events.extend(_plane_events(plane, gpu=True))
    return sorted(windows, key=lambda w: w.start_ps), events


def _step_windows(plane: Any) -> Iterable[StepWindow]:
    for line in plane.lines:
        base_ps = int(line.timestamp_ns) * 1000
        for ev in line.events:
            if plane.event_metadata[ev.metadata_id].name != STEP_EVENT:
                continue
            step = next(
                (
                    int(s.int64_value or s.uint64_value)
                    for s in ev.stats
                    if plane.stat_metadata[s.metadata_id].name == "step_num"
                ),
                -1,
            )
            start = base_ps + int(ev.offset_ps)
            yield StepWindow(step, start, start + int(ev.duration_ps))


def _matches(component: str, name: str) -> bool:
    if component == name:
        return True
    m = _SUFFIX.match(component)
    return m is not None and m["base"] == name


class LayerMatcher:
    """Maps a TF op name to (zoo layer, is-backward), or None when no layer owns it."""

    def __init__(self, layer_names: Sequence[str], root_scope: str) -> None:
        self.root = root_scope
        self.trie: dict[str, Any] = {}
        for name in layer_names:
            node = self.trie
            for part in name.split("/"):
                node = node.setdefault(part, {})
            node[""] = name  # terminal marker

    def match(self, op_name: str) -> tuple[str | None, bool]:
        """The zoo layer that owns ``op_name`` (or None) and whether it is a backward op."""
        parts = op_name.split("/")
        backward = bool(parts) and parts[0] == BACKWARD_PREFIX
        if backward:
            parts = parts[1:]
        if not parts or not _matches(parts[0], self.root):
            return None, backward
        node, owner = self.trie, None
        for part in parts[1:]:
            child = node.get(part) if part else None
            if child is None and (m := _SUFFIX.match(part)):
                child = node.get(m["base"])
            if child is None:
                break
            node = child
            owner = node.get("", owner)
        return owner, backward


def attribute(
    windows: Sequence[StepWindow],
    events: Sequence[OpEvent],
    layer_names: Sequence[str],
    root_scope: str,
) -> Attribution:
    """Sum op time per layer and direction over the steps ``windows``; means per step."""
    if not windows:
        raise CalibrationError(f"no {STEP_EVENT!r} step events in the profiler trace")
    matcher = LayerMatcher(layer_names, root_scope)
    fwd: defaultdict[str, float] = defaultdict(float)
    bwd: defaultdict[str, float] = defaultdict(float)
    other: defaultdict[str, float] = defaultdict(float)
    bounds = sorted((w.start_ps, w.end_ps) for w in windows)
    n = 0
    for ev in events:
        if not any(lo <= ev.start_ps < hi for lo, hi in bounds):
            continue
        n += 1
        seconds = ev.duration_ps * PS
        layer, backward = matcher.match(ev.name)
        if layer is None:
            other[_group(ev)] += seconds
        elif backward:
            bwd[layer] += seconds
        else:
            fwd[layer] += seconds
    k = len(windows)
    top = sorted(other.items(), key=lambda kv: -kv[1])[:10]
    return Attribution(
        fwd_s={name: fwd[name] / k for name in layer_names},
        bwd_s={name: bwd[name] / k for name in layer_names},
        unattributed_s=sum(other.values()) / k,
        step_times_s=[w.duration_s for w in windows],
        top_unattributed=[(name, t / k) for name, t in top],
        n_events=n,
    )


def _group(ev: OpEvent) -> str:
    """Unattributed ops grouped by direction, first scope and op type: ``sgd/Mul``."""
    parts = ev.name.split("/")
    head = parts[:2] if parts[0] == BACKWARD_PREFIX and len(parts) > 2 else parts[:1]
    if len(parts) == len(head):  # a bare op name: no scope
        head = head[:-1]
    scope = "/".join(_SUFFIX.sub(r"\g<base>", p) for p in head)
    return f"{scope}/{ev.op_type}" if scope else ev.op_type
