"""Chrome-trace events of engine spans: names, track ids, ``args``; waits of the compute stream.

Used by :mod:`ddlsim.tools.analysis.timeline`. Times are microseconds (the trace format's unit).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ddlsim.engine.breakdown import union_intervals
from ddlsim.engine.core import INTERFERENCE, Span
from ddlsim.execution.dag import COMM_KINDS
from ddlsim.units import BYTES_PER_ELEMENT, US_PER_S

Interval = tuple[float, float]

TID_COMPUTE, TID_COORDINATOR, TID_INPUT, TID_COMM0 = 1, 2, 3, 10
#: wait event name -> the breakdown field it counts towards
WAIT_NAMES = {
    "WAIT_COMM_EXPOSED": "comm_exposed_s",
    "WAIT_INPUT": "input_stall_s",
    "WAIT_COORDINATION": "coordination_s",
}
#: gaps shorter than this (floating-point noise between segments) are not wait events
MIN_WAIT_S = 1e-12
#: Horovod timeline's activity name of an allreduce, per method (flat, not hierarchical)
_HOROVOD_COLLECTIVE = {
    "horovod-nccl": "NCCL_ALLREDUCE",
    "horovod-mpi": "MPI_ALLREDUCE",
    "horovod-gloo": "GLOO_ALLREDUCE",
}
#: the activity name of other methods' NCCL all-reduce (PyTorch's profiler names the kernel so)
_NCCL_COLLECTIVE = {"ddp": "NCCL_ALLREDUCE"}


def us(seconds: float) -> float:
    """Seconds to trace microseconds (a plain float)."""
    return float(seconds) * US_PER_S


def tid_of(stream: str) -> int:
    """Thread id of an engine stream (``compute``, ``coordinator``, ``input``, ``comm:<k>``)."""
    if stream.startswith("comm:"):
        return TID_COMM0 + int(stream.split(":", 1)[1])
    return {"compute": TID_COMPUTE, "coordinator": TID_COORDINATOR, "input": TID_INPUT}[stream]


class EventFactory:
    """Turns the spans of one configuration's simulation into trace events."""

    def __init__(self, setup: Any) -> None:
        self.setup = setup
        strategy = setup.strategy
        self.layers = {layer.name: layer for layer in setup.workload.layers}
        self.grad_bytes = {
            layer.name: layer.grad_bytes(strategy.grad_dtype) for layer in setup.workload.layers
        }
        self.tensor_bytes = {
            t.name: t.nbytes(strategy.grad_dtype) for t in setup.workload.model.tensors
        }
        self.ops = {n: d for n, d in setup.dag.nodes(data=True) if d.get("kind") in COMM_KINDS}
        act = BYTES_PER_ELEMENT["fp16" if strategy.precision == "amp" else "fp32"]
        self.activation_elem_bytes = act
        self.batch = strategy.batch_per_gpu
        horovod_flat = strategy.is_horovod and not strategy.hierarchical
        self.allreduce_name = _HOROVOD_COLLECTIVE.get(strategy.comm) if horovod_flat else None
        if strategy.is_horovod and strategy.hierarchical:
            self.allreduce_name = "ALLREDUCE"  # Horovod's op name; its phases are not modelled
        self.allreduce_name = self.allreduce_name or _NCCL_COLLECTIVE.get(strategy.comm)

    def span(self, s: Span, t0: float, t1: float) -> dict[str, Any]:
        """The complete (``X``) event of span ``s``, ``ts`` measured from ``t0`` seconds.

        Input-pipeline spans (a batch may be produced long before its iteration starts) are
        clipped to the traced range ``[t0, t1]``; ``args.produced_s`` keeps the whole span.
        """
        name, cat, args = s.name, s.kind, {"iteration": s.iteration}
        start_s, end_s = s.start_s, s.end_s
        if s.stream == "compute":
            name, args = self._compute(s, args)
        elif s.stream.startswith("comm:"):
            name, args = self._comm(s, args)
        elif s.stream == "coordinator":
            cycle_ms = self.setup.strategy.cycle_time_s * 1e3
            args.update(negotiation_s=float(s.end_s - s.start_s), cycle_time_ms=cycle_ms)
        elif s.stream == "input":
            args["images_per_node"] = self.batch * self.setup.cluster.local_gpus
            args["produced_s"] = [float(s.start_s), float(s.end_s)]
            start_s, end_s = max(start_s, t0), max(min(end_s, t1), t0)
        return {
            "name": name,
            "cat": cat,
            "ph": "X",
            "ts": us(start_s - t0),
            "dur": us(end_s - start_s),
            "pid": s.worker,
            "tid": tid_of(s.stream),
            "args": args,
        }

    def _compute(self, s: Span, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        layer = self.layers.get(s.name)
        if s.kind == INTERFERENCE:
            args["what"] = "compute slowed by collectives holding SMs while it overlapped them"
            return s.name, args
        if s.kind == "update" or layer is None:
            args["what"] = "optimizer update, loss and time no layer owns"
            return s.name, args
        backward = s.kind == "backward"
        args.update(
            layer=layer.name,
            layer_kind=layer.kind.value,
            flops=(layer.bwd_flops if backward else layer.fwd_flops) * self.batch,
            grad_bytes=self.grad_bytes[layer.name],
            activation_bytes=layer.output_elems * self.batch * self.activation_elem_bytes,
        )
        return f"{'bwd' if backward else 'fwd'}:{layer.name}", args

    def _comm(self, s: Span, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        nodes = [self.ops.get(name, {}) for name in (s.parts or (s.name,))]
        node = nodes[0]
        tensors = [t for n in nodes for t in n.get("tensors", [])]
        dur = s.end_s - s.start_s
        args.update(
            op=s.name,
            kind=s.kind,
            method=self.setup.strategy.comm,
            channel=node.get("channel", 0),
            bytes=int(s.nbytes),
            layers=[layer for n in nodes for layer in n.get("layers", [])],
            tensors=tensors,
            tensor_bytes=[self.tensor_bytes.get(t, 0) for t in tensors],
            n_tensors=len(tensors),
        )
        args.update(self.setup.comm.label(s.nbytes, s.kind))  # NCCL: algorithm, protocol
        if dur > 0:
            args["algbw_GBps"] = s.nbytes / dur / 1e9
        name = self.allreduce_name if s.kind == "allreduce" and self.allreduce_name else s.name
        return name, args

    def metadata(self, streams: dict[int, set[str]], engine: str) -> list[dict[str, Any]]:
        """``process_name`` / ``thread_name`` (and sort-index) events of the traced tracks."""
        cluster = self.setup.cluster
        gpn = cluster.gpus_per_node
        out: list[dict[str, Any]] = []
        for w in sorted(streams):
            if engine == "detailed":
                label = f"worker {w} (node {w // gpn}, local GPU {w % gpn})"
            elif cluster.n_gpus == 1:
                label = f"worker {w} (the only GPU)"
            else:
                label = f"worker {w} (fast engine: stands for each of the {cluster.n_gpus} GPUs)"
            out.append(_meta("process_name", w, None, {"name": label}))
            out.append(_meta("process_sort_index", w, None, {"sort_index": w}))
            for stream in sorted({"compute", *streams[w]}, key=tid_of):
                tid = tid_of(stream)
                out.append(_meta("thread_name", w, tid, {"name": self._thread_label(stream)}))
                out.append(_meta("thread_sort_index", w, tid, {"sort_index": tid}))
        return out

    def _thread_label(self, stream: str) -> str:
        strategy = self.setup.strategy
        if stream == "compute":
            return "GPU compute stream"
        if stream == "coordinator":
            return f"Horovod coordinator (cycle {strategy.cycle_time_s * 1e3:g} ms)"
        if stream == "input":
            return "host input pipeline"
        channel = stream.split(":", 1)[1]
        if strategy.is_parameter_server:
            return f"{stream} (parameter server {channel})"
        return f"{stream} ({strategy.comm}, {type(self.setup.comm).__name__})"


def _meta(name: str, pid: int, tid: int | None, args: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _union(intervals: Iterable[Interval], lo: float, hi: float) -> list[Interval]:
    return union_intervals((max(a, lo), min(b, hi)) for a, b in intervals)


def _subtract(x: list[Interval], y: list[Interval]) -> list[Interval]:
    """``x`` minus ``y`` (both sorted, disjoint)."""
    out: list[Interval] = []
    for a, b in x:
        cur = a
        for c, d in y:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return out


def classify_waits(spans: list[Span], lo: float, hi: float) -> list[tuple[str, Interval]]:
    """Idle intervals of the compute stream in ``[lo, hi]``, named by breakdown category.

    Communication in flight: ``WAIT_COMM_EXPOSED``; else the input pipeline running:
    ``WAIT_INPUT``; else ``WAIT_COORDINATION`` — exactly :func:`window_breakdown`'s split.
    """

    def busy(pred: Any) -> list[Interval]:
        return _union(((s.start_s, s.end_s) for s in spans if pred(s.stream)), lo, hi)

    gaps = _subtract([(lo, hi)], busy(lambda st: st == "compute"))
    comm = busy(lambda st: st.startswith("comm"))
    exposed = _subtract(gaps, _subtract(gaps, comm))
    rest = _subtract(gaps, comm)
    stall = _subtract(rest, _subtract(rest, busy(lambda st: st == "input")))
    coordination = _subtract(rest, stall)
    named = [
        *(("WAIT_COMM_EXPOSED", iv) for iv in exposed),
        *(("WAIT_INPUT", iv) for iv in stall),
        *(("WAIT_COORDINATION", iv) for iv in coordination),
    ]
    return sorted(((n, iv) for n, iv in named if iv[1] - iv[0] >= MIN_WAIT_S), key=lambda x: x[1])
