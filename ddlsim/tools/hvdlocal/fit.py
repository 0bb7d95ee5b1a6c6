"""From the allreduce sweep to the ``loopback`` link's figures (pure: no Horovod, no TensorFlow).

:func:`gloo_durations` reads the Gloo ring's own time per message size from a Horovod timeline
(every ``GLOO_ALLREDUCE`` activity, sized by the ``ALLREDUCE`` operation around it).
:func:`fit_ring` fits the ring model ddlsim uses for ``horovod-gloo`` (:mod:`ddlsim.comm.gloo`)
to the medians, N ranks on one host, per-rank reduction rate R known::

    T(S) = 2 (N-1) alpha + 2 (N-1) (S/N) / B + (N-1) (S/N) / R

by least squares on relative errors (the sizes span six decades, and every size should count
alike): T = a + b S with a = 2 (N-1) alpha and b = (N-1)/N (2/B + 1/R). R is one core's
summation rate, the STREAM-Add memory bandwidth / 3 (:mod:`ddlsim.tools.hvdlocal.probes`).
:func:`link_figures` expresses B against the raw TCP loopback throughput, the link's nominal.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ddlsim.comm.fabric import SUM_STREAMS
from ddlsim.errors import ConfigError
from ddlsim.tools.traces.timeline import DTYPE_BYTES

GLOO_ACTIVITY = "GLOO_ALLREDUCE"
OP_NAME = "ALLREDUCE"


def _op_bytes(args: object) -> int | None:
    if not isinstance(args, dict):
        return None
    size = DTYPE_BYTES.get(str(args.get("dtype", "")).lower())
    dims = str(args.get("shape", "")).strip("[]() ").replace(",", " ").split()
    if size is None or not dims or not all(d.isdigit() for d in dims):
        return None
    return math.prod(int(d) for d in dims) * size


def gloo_durations(events: Iterable[Mapping[str, Any]]) -> dict[int, list[float]]:
    """Seconds of every ``GLOO_ALLREDUCE`` activity, keyed by its operation's bytes."""
    stacks: dict[object, list[tuple[str, float, list[float]]]] = defaultdict(list)
    out: dict[int, list[float]] = defaultdict(list)
    for ev in events:
        ph, pid, ts = ev.get("ph"), ev.get("pid"), ev.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        if ph == "B":
            stacks[pid].append((str(ev.get("name", "")), float(ts), []))
        elif ph == "E" and stacks[pid]:
            name, start, inner = stacks[pid].pop()
            seconds = (float(ts) - start) * 1e-6
            if name == GLOO_ACTIVITY and stacks[pid]:
                stacks[pid][-1][2].append(seconds)
            elif name == OP_NAME:
                nbytes = _op_bytes(ev.get("args"))
                if nbytes is not None:
                    out[nbytes].extend(inner)
    return {k: out[k] for k in sorted(out)}


@dataclass(frozen=True)
class RingFit:
    """The fitted ring: per-hop latency and bandwidth, and how well the line fits."""

    n_ranks: int
    reduce_Bps: float
    intercept_s: float
    slope_s_per_byte: float
    hop_latency_s: float
    hop_bandwidth_Bps: float
    max_rel_residual: float
    sizes: tuple[int, ...]

    def predict_s(self, nbytes: float) -> float:
        """The fitted allreduce time of ``nbytes``."""
        return self.intercept_s + self.slope_s_per_byte * nbytes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def fit_ring(medians: Mapping[int, float], n_ranks: int, reduce_Bps: float) -> RingFit:
    """Fit ``T = a + b S`` to ``{bytes: median seconds}`` on relative errors; per-hop figures."""
    if n_ranks < 2:
        raise ConfigError("a ring fit needs at least 2 ranks")
    points = sorted((float(s), float(t)) for s, t in medians.items() if s > 0 and t > 0)
    if len(points) < 3:
        raise ConfigError(f"a ring fit needs at least 3 message sizes, got {len(points)}")
    # minimise sum ((a + b s) / t - 1)^2: linear in (a, b) with rows (1/t, s/t) and target 1
    s11 = sum(1 / t**2 for s, t in points)
    s12 = sum(s / t**2 for s, t in points)
    s22 = sum(s**2 / t**2 for s, t in points)
    r1 = sum(1 / t for s, t in points)
    r2 = sum(s / t for s, t in points)
    det = s11 * s22 - s12**2
    a = (r1 * s22 - r2 * s12) / det
    b = (s11 * r2 - s12 * r1) / det
    n = n_ranks
    per_hop = b * n / (n - 1) - 1 / reduce_Bps  # = 2 / B
    if a <= 0 or per_hop <= 0:
        raise ConfigError(
            f"the sweep does not fit a ring with positive latency and bandwidth "
            f"(intercept {a:.3g} s, slope {b:.3g} s/B, reduction {reduce_Bps:.3g} B/s)"
        )
    residual = max(abs((a + b * s) / t - 1) for s, t in points)
    return RingFit(
        n_ranks=n,
        reduce_Bps=reduce_Bps,
        intercept_s=a,
        slope_s_per_byte=b,
        hop_latency_s=a / (2 * (n - 1)),
        hop_bandwidth_Bps=2 / per_hop,
        max_rel_residual=residual,
        sizes=tuple(int(s) for s, _ in points),
    )


def medians(samples: Mapping[int, Sequence[float]]) -> dict[int, float]:
    """The median of each size's samples."""
    return {k: statistics.median(v) for k, v in samples.items() if v}


def reduce_rate_Bps(memory_bandwidth_Bps: float) -> float:
    """Bytes one core sums per second at a STREAM-Add memory bandwidth."""
    return memory_bandwidth_Bps / SUM_STREAMS


@dataclass(frozen=True)
class LinkFigures:
    """The ``loopback`` entry of links.json, in its units."""

    bandwidth_GBps: float
    efficiency: float
    latency_us: float


def device_figures(probes: dict[str, Any]) -> dict[str, float]:
    """The CPU worker's measured figures in devices.json's units and rounding."""
    return {
        "peak_fp32_TFLOPS": round(probes["sgemm"]["flops"] / 1e12, 3),
        "mem_bandwidth_GBps": round(probes["memory"]["bandwidth_Bps"] / 1e9, 1),
    }


def link_figures(raw_bandwidth_Bps: float, fit: RingFit) -> LinkFigures:
    """Nominal = raw TCP loopback throughput; efficiency = the Gloo hop's share of it."""
    efficiency = fit.hop_bandwidth_Bps / raw_bandwidth_Bps
    if not 0 < efficiency <= 1:
        raise ConfigError(
            f"the Gloo ring hop ({fit.hop_bandwidth_Bps / 1e9:.3f} GB/s) is faster than the raw "
            f"TCP loopback stream ({raw_bandwidth_Bps / 1e9:.3f} GB/s): re-run on a quiet machine"
        )
    return LinkFigures(
        bandwidth_GBps=round(raw_bandwidth_Bps / 1e9, 3),
        efficiency=round(efficiency, 3),
        latency_us=round(fit.hop_latency_s * 1e6, 1),
    )
