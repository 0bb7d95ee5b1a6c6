"""Attributing a ``torch.profiler`` trace of training steps to zoo layers (no PyTorch import).

The profiling pass wraps each step in ``record_function("ddlsim::step")`` and the model wraps
each zoo layer's forward pass in ``record_function("ddlsim::<layer>")``
(:mod:`ddlsim.tools.calibrate.torch_models`). :func:`attribute` then assigns, per step:

* forward: the cost of each layer range;
* backward: every autograd node the engine runs (``autograd::engine::evaluate_function: ...``)
  carries the *sequence number* of the forward op that created it; the forward ops inside a
  layer's range give the map sequence number -> layer, so each backward node's cost goes to the
  layer whose forward op made it;
* everything else that runs in the step (optimizer update, gradient accumulation of the
  parameters, the loss gradient's seed, flatten views) is *unattributed*, grouped by name.

The cost of an event is its wall time on the CPU (a CPU device), or on a GPU the time of the
kernels it and its children launched (``self_device_time_total`` summed over the subtree), so a
layer's GPU time is device time, not launch time. :func:`read_events` reduces the profiler's
``FunctionEvent`` objects to plain :class:`Event` records (tested without a GPU).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ddlsim.errors import CalibrationError
from ddlsim.tools.calibrate.profiler import Attribution

LAYER_EVENT_PREFIX = "ddlsim::"
STEP_EVENT = "ddlsim::step"
BACKWARD_EVENT = "autograd::engine::evaluate_function: "
US = 1e-6  # seconds per microsecond


@dataclass(frozen=True)
class Event:
    """One profiled CPU-side event: times in microseconds, ``parent`` an event id or None,
    ``seq`` the autograd sequence number (-1: none), ``device_us`` the time of the kernels this
    event itself launched."""

    id: int
    name: str
    thread: int
    start_us: float
    end_us: float
    parent: int | None = None
    seq: int = -1
    fwd_thread: int = 0
    device_us: float = 0.0


def read_events(function_events: Iterable[Any]) -> list[Event]:
    """Plain records of ``prof.events()`` (PyTorch's ``FunctionEvent`` objects, CPU side)."""
    out = []
    for e in function_events:
        if str(getattr(e, "device_type", "DeviceType.CPU")).rsplit(".", 1)[-1] != "CPU":
            continue
        parent = getattr(e, "cpu_parent", None)
        device_us = getattr(e, "self_device_time_total", None)
        if device_us is None:
            device_us = getattr(e, "self_cuda_time_total", 0.0)
        out.append(
            Event(
                id=int(e.id),
                name=str(e.name),
                thread=int(e.thread),
                start_us=float(e.time_range.start),
                end_us=float(e.time_range.end),
                parent=None if parent is None else int(parent.id),
                seq=int(getattr(e, "sequence_nr", -1)),
                fwd_thread=int(getattr(e, "fwd_thread", 0) or 0),
                device_us=float(device_us or 0.0),
            )
        )
    return out


def attribute(events: Sequence[Event], layer_names: Sequence[str], gpu: bool) -> Attribution:
    """Per-layer forward / backward seconds per step (means over the profiled steps)."""
    steps = sorted((e for e in events if e.name == STEP_EVENT), key=lambda e: e.start_us)
    if not steps:
        raise CalibrationError(f"no {STEP_EVENT!r} step events in the PyTorch profiler trace")
    step_ids = {e.id for e in steps}
    children: defaultdict[int, list[Event]] = defaultdict(list)
    for e in events:
        if e.parent is not None:
            children[e.parent].append(e)

    def subtree(e: Event) -> Iterable[Event]:
        yield e
        for child in children.get(e.id, ()):
            yield from subtree(child)

    def cost_s(e: Event) -> float:
        if gpu:
            return US * sum(x.device_us for x in subtree(e))
        return US * (e.end_us - e.start_us)

    known = set(layer_names)
    fwd: defaultdict[str, float] = defaultdict(float)
    bwd: defaultdict[str, float] = defaultdict(float)
    other: defaultdict[str, float] = defaultdict(float)
    n = 0
    for step in steps:
        roots = sorted(
            (
                e
                for e in events
                if e.id not in step_ids
                and step.start_us <= e.start_us < step.end_us
                and (e.parent is None or e.parent in step_ids)
            ),
            key=lambda e: e.start_us,
        )
        owner: dict[tuple[int, int], str] = {}
        for e in roots:  # forward ranges first: they define the sequence numbers' owners
            layer = _layer_of(e.name)
            if layer in known:
                fwd[layer] += cost_s(e)
                owner.update({(x.thread, x.seq): layer for x in subtree(e) if x.seq >= 0})
        for e in roots:
            n += 1
            if _layer_of(e.name) in known:
                continue
            backward = e.name.startswith(BACKWARD_EVENT)
            target = owner.get((e.fwd_thread, e.seq)) if backward and e.seq >= 0 else None
            if target is None and backward and e.seq >= 0:  # a thread id not recorded
                target = next((v for (_, s), v in owner.items() if s == e.seq), None)
            if target is not None:
                bwd[target] += cost_s(e)
            else:
                other[_group(e.name)] += cost_s(e)
    k = len(steps)
    top = sorted(other.items(), key=lambda kv: -kv[1])[:10]
    return Attribution(
        fwd_s={name: fwd[name] / k for name in layer_names},
        bwd_s={name: bwd[name] / k for name in layer_names},
        unattributed_s=sum(other.values()) / k,
        step_times_s=[US * (s.end_us - s.start_us) for s in steps],
        top_unattributed=[(name, t / k) for name, t in top],
        n_events=n,
    )


def _layer_of(name: str) -> str | None:
    return name[len(LAYER_EVENT_PREFIX) :] if name.startswith(LAYER_EVENT_PREFIX) else None


def _group(name: str) -> str:
    """Unattributed events by name: ``Optimizer.step#SGD.step``, ``AccumulateGrad`` ..."""
    if name.startswith(BACKWARD_EVENT):
        name = name[len(BACKWARD_EVENT) :]
    return name.rsplit("::", 1)[-1] if name.startswith("torch::autograd::") else name
