"""Fitting the transformer kernel routes' few free coefficients (:class:`GemmModel`) to rows.

The objective is the mean over groups -- (GPU, precision, op, source) -- of the mean
``|ln(predicted / measured)|`` of their rows, so every group counts alike however many rows it
has. Each row is first reduced to its *design*: for a GEMM its tiles' time at efficiency 1 and
its memory roof (from :func:`ddlsim.compute.gemm.gemm_parts`), for a memory-bound op its bytes
over the bandwidth and its kernels; a trial model then predicts every row with a few array
operations: ``launch + max(tiles / efficiency, memory)`` or ``kernels x floor + bytes /
stream_efficiency``, plus the row's timing overhead. The search is a pattern search on the
coefficients' logarithms (numpy only: no scipy), efficiencies kept at most 1, restarted from where
it stopped until a restart gains nothing. The tiling a design
fixes is the one the model picks at the efficiencies it was built with; :func:`fit` rebuilds
the designs at the new coefficients and searches again (``rounds``).

:func:`leave_one_gpu_out` refits without each GPU's rows (starting from :data:`START`, so a
coefficient no other GPU's rows pin keeps its prior, not the full fit's value) and predicts the
held-out rows with the full model at those coefficients.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ddlsim.compute import gpu_clock
from ddlsim.compute.gemm import (
    ISSUE_BOUND,
    TIMING_CALLS,
    TIMINGS,
    GemmModel,
    gemm_parts,
    unit_peak,
    unit_power_budget,
)
from ddlsim.compute.gemm_check import MeasuredKernel, group_key, predict, summarise
from ddlsim.compute.transformer_ops import op_bytes, op_kernels

#: the priors of the energies per FLOP per nm (:mod:`ddlsim.compute.gpu_clock`): the V100 PCIe's
#: datasheet TDP over its peaks at its 12 nm (250 W / 14 TFLOPS fp32 and 112 TFLOPS tensor), as
#: if that board held boost at its TDP under a dense GEMM
CUDA_PJ_PER_FLOP_NM_PRIOR = 250 / 14e12 / 12 / 1e-12
TENSOR_PJ_PER_FLOP_NM_PRIOR = 250 / 112e12 / 12 / 1e-12
#: the prior of GPU Boost's power window: an assumption of the order of a power-management
#: control period (no datasheet states it); the T4's rows alone fit 2-6 ms
POWER_WINDOW_PRIOR_S = 0.01
#: where the search starts, and the priors of coefficients a subset of rows does not pin:
#: datasheet-level round figures (80% of peak in the main loop, 80% of DRAM bandwidth, a few
#: microseconds a kernel, NeuSight's README's 25 us dispatch floor, tens of microseconds of
#: Python for a compiled call's guards, the priors above)
START = GemmModel(
    cuda_efficiency=0.8,
    tensor_efficiency=0.75,
    launch_s=4e-6,
    stream_efficiency=0.8,
    stream_launch_s=3e-6,
    event_dispatch_s=25e-6,
    issue_interval_s=3e-6,
    host_sync_s=15e-6,
    compiled_call_s=20e-6,
    cuda_pJ_per_flop_nm=CUDA_PJ_PER_FLOP_NM_PRIOR,
    tensor_pJ_per_flop_nm=TENSOR_PJ_PER_FLOP_NM_PRIOR,
    power_window_s=POWER_WINDOW_PRIOR_S,
)
NAMES = tuple(f.name for f in fields(GemmModel))
#: timing statistics no fit sees: MAMF's ``best_shape_mean100`` is the best of a brute-force
#: search over shapes near the asked one, biased high (the README of the measured files), not
#: the time of a typical kernel the route predicts; its rows are checked only. ddlsim's
#: ``event10_median5`` (eager PyTorch calls back to back, scripts/device_measure.py's fallback
#: where a CUDA graph cannot be captured) is bounded by PyTorch's per-op host interval, larger
#: than the ``issue_interval_s`` DeepBench's cuBLAS loop pins: checked only, not to bias it
CHECK_ONLY_STATS = ("best_shape_mean100", "event10_median5")


def fitted_row(row: MeasuredKernel) -> bool:
    """Whether a row enters the fits: not timed by a check-only statistic, not FlashAttention
    (its main-loop asymptotes are a paper's, :data:`ddlsim.compute.flash_grid.FLASH_ASYMPTOTE`;
    the fit has no term for them)."""
    return row.time_stat not in CHECK_ONLY_STATS and not row.is_flash


#: coefficients that are fractions of a peak (capped at 1)
FRACTIONS = ("cuda_efficiency", "tensor_efficiency", "stream_efficiency")
#: searches from where the last one stopped, with its step reset, until one gains nothing (a
#: pattern search's step shrinks in a valley it could leave at a larger step)
RESTARTS = 6
#: coefficients held near their priors (:data:`START`) by a penalty of ``PRIOR_WEIGHT`` x
#: ln(value / prior)^2 added to the objective: the power window, which only boards whose power
#: limit binds between their boost and base clocks pin (the T4); without such rows the other
#: GPUs' slowness that is not power (old cuBLAS kernels) drives it to zero, every call
#: throttled. A factor e from the prior costs 0.01, about what one group's error moving by 1.3
#: points of 130 groups' mean costs
PRIORED = ("power_window_s",)
PRIOR_WEIGHT = 0.01
#: the penalty weight of every other coefficient: too small to move one the rows pin, enough
#: that one they do not pin (a timing method no remaining row uses) stays at its prior rather
#: than drifting with the simplex
WEAK_PRIOR = 1e-5
#: the most cost evaluations of one Nelder-Mead polish (about 0.2 ms each on the sample)
SIMPLEX_EVALS = 4000
_FLOOR = 1e-8  # smallest value of a time coefficient (seconds): the search is on logarithms


@dataclass(frozen=True)
class Design:
    """Every row's terms that do not depend on the coefficients, as arrays."""

    gemm: np.ndarray  # bool: a GEMM row
    tensor: np.ndarray  # bool: its tiles run on tensor cores
    tiles_s: np.ndarray  # GEMM: tiles' seconds at efficiency 1 and the boost clock
    budget: np.ndarray  # GEMM: TDP per peak FLOP/s per nm (pJ/FLOP/nm; inf: no power model)
    floor: np.ndarray  # GEMM: base clock / boost clock (0: not catalogued)
    load_calls: np.ndarray  # GEMM: back-to-back calls of its measurement (the clock's load)
    memory_s: np.ndarray  # GEMM: memory roof (seconds)
    stream_s: np.ndarray  # memory-bound op: bytes / DRAM bandwidth (seconds)
    kernels: np.ndarray  # memory-bound op: kernels per call
    calls: np.ndarray
    stat: np.ndarray  # index into TIMING_NAMES of the timing method's coefficient (-1: none)
    issue: np.ndarray  # bool: back-to-back calls (the larger of kernel and issue interval)
    compiled: np.ndarray  # bool: a host-timed torch.compile'd call
    measured_s: np.ndarray
    group: np.ndarray  # group index of each row


TIMING_NAMES = tuple(sorted({v for v in TIMINGS.values() if v is not None}))


def design(rows: Sequence[MeasuredKernel], model: GemmModel) -> Design:
    """The rows' designs with the tilings ``model``'s efficiencies pick."""
    n = len(rows)
    names = ("tiles_s", "memory_s", "stream_s", "kernels", "calls", "floor", "load_calls")
    cols = {k: np.zeros(n) for k in names}
    cols["budget"] = np.full(n, np.inf)
    gemm, tensor = np.zeros(n, bool), np.zeros(n, bool)
    stat, group, issue = np.full(n, -1), np.zeros(n, int), np.zeros(n, bool)
    compiled = np.zeros(n, bool)
    groups: dict[tuple[str, ...], int] = {}
    for i, r in enumerate(rows):
        cols["calls"][i] = r.calls
        name = TIMINGS[r.time_stat]
        stat[i] = TIMING_NAMES.index(name) if name else -1
        issue[i] = r.time_stat in ISSUE_BOUND
        compiled[i] = r.compiled and name is not None
        group[i] = groups.setdefault((*group_key(r), r.source), len(groups))
        if r.is_flash:  # in no fit (fitted_row): a finite placeholder design
            cols["kernels"][i] = 1
        elif r.is_gemm:
            batch, m, n_, k = r.dims
            parts = gemm_parts(m, n_, k, r.device, r.precision, batch=batch, model=model)
            peak, tensor[i] = unit_peak(r.device, r.precision)
            eff = model.tensor_efficiency if tensor[i] else model.cuda_efficiency
            gemm[i] = True
            cols["tiles_s"][i], cols["memory_s"][i] = parts.boost_compute_s * eff, parts.memory_s
            cols["budget"][i] = unit_power_budget(r.device, peak, bool(tensor[i]))
            cols["floor"][i] = gpu_clock.base_fraction(r.device, bool(tensor[i]))
            cols["load_calls"][i] = TIMING_CALLS[r.time_stat]
        else:
            rows_, c = r.dims
            cols["stream_s"][i] = op_bytes(r.op, rows_, c, r.precision) / r.device.mem_bandwidth_Bps
            cols["kernels"][i] = op_kernels(r.op)
    measured = np.array([r.measured_us * 1e-6 for r in rows])
    return Design(
        gemm,
        tensor,
        stat=stat,
        issue=issue,
        compiled=compiled,
        measured_s=measured,
        group=group,
        **cols,
    )


def predict_design(d: Design, m: GemmModel) -> np.ndarray:
    """Predicted seconds of every row of ``d`` under ``m`` (kernel + timing overhead)."""
    eff = np.where(d.tensor, m.tensor_efficiency, m.cuda_efficiency)
    tiles = d.tiles_s / eff
    gemm = m.launch_s + np.maximum(tiles / _clock(d, m, tiles), d.memory_s)
    stream = d.kernels * m.stream_launch_s + d.stream_s / m.stream_efficiency
    overhead = np.array([getattr(m, name) for name in TIMING_NAMES] + [0.0])[d.stat]
    overhead = overhead + d.compiled * m.compiled_call_s
    kernel = np.where(d.gemm, gemm, stream)
    return d.calls * np.where(d.issue, np.maximum(kernel, overhead), kernel + overhead)


def _clock(d: Design, m: GemmModel, tiles_s: np.ndarray) -> np.ndarray:
    """Every GEMM row's mean clock over its measurement's load (:mod:`gpu_clock`, vectorised)."""
    energy = np.where(d.tensor, m.tensor_pJ_per_flop_nm, m.cuda_pJ_per_flop_nm)
    sustained = np.maximum(d.floor, np.minimum(1.0, d.budget / energy))
    x = np.maximum(d.load_calls * tiles_s, 1e-30) / m.power_window_s
    return sustained + (1.0 - sustained) * -np.expm1(-x) / x


def objective(d: Design, m: GemmModel, mask: np.ndarray | None = None) -> float:
    """Mean over groups of the mean |ln(predicted / measured)| of the rows in ``mask``."""
    err = np.abs(np.log(predict_design(d, m) / d.measured_s))
    sel = np.ones(len(err), bool) if mask is None else mask
    groups = d.group[sel]
    if not len(groups):
        return 0.0
    sums = np.bincount(groups, weights=err[sel])
    counts = np.bincount(groups)
    used = counts > 0
    return float(np.mean(sums[used] / counts[used]))


def _search(d: Design, start: GemmModel, mask: np.ndarray | None) -> GemmModel:
    """Pattern search on the logarithms of the coefficients the rows in ``mask`` depend on,
    then a Nelder-Mead polish (:func:`_simplex`: it follows the valleys where two coefficients
    trade against each other, an efficiency and an energy per FLOP), until neither gains."""
    x = np.array([np.log(max(v, _FLOOR)) for v in start.as_dict().values()])
    frac = np.array([name in FRACTIONS for name in NAMES])

    def model(values: np.ndarray) -> GemmModel:
        out = np.exp(np.where(frac, np.minimum(values, 0.0), values))
        return GemmModel(**dict(zip(NAMES, (float(v) for v in out), strict=True)))

    prior = np.array([np.log(getattr(START, name)) for name in NAMES])
    weight = np.array([PRIOR_WEIGHT if name in PRIORED else WEAK_PRIOR for name in NAMES])

    def cost(values: np.ndarray) -> float:
        return objective(d, model(values), mask) + float(np.sum(weight * (values - prior) ** 2))

    best = cost(x)
    for _ in range(RESTARTS):
        before = best
        x, best = _pattern(cost, np.where(frac, np.minimum(x, 0.0), x), best)
        x, best = _simplex(cost, x, best)
        if best > before - 1e-6:
            break
    return model(x)


def _pattern(cost: Any, x: np.ndarray, best: float) -> tuple[np.ndarray, float]:
    """Coordinate pattern search: the first move of ``step`` that lowers the cost, the step
    halved when none does, from log 2 down to 0.004."""
    step = float(np.log(2.0))
    while step > 0.004:
        improved = False
        for i in range(len(x)):
            for sign in (1.0, -1.0):
                trial = x.copy()
                trial[i] += sign * step
                value = cost(trial)
                if value < best - 1e-9:
                    x, best, improved = trial, value, True
                    break
        if not improved:
            step /= 2
    return x, best


def _simplex(cost: Any, x: np.ndarray, best: float) -> tuple[np.ndarray, float]:
    """Nelder-Mead from ``x`` (a simplex of steps of ln 1.5 along each axis), at most
    :data:`SIMPLEX_EVALS` evaluations; the best point and its cost."""
    n = len(x)
    pts = np.vstack([x] + [x + np.log(1.5) * np.eye(n)[i] for i in range(n)])
    vals = np.array([best] + [cost(p) for p in pts[1:]])
    for _ in range(SIMPLEX_EVALS // 2):
        order = np.argsort(vals)
        pts, vals = pts[order], vals[order]
        if vals[-1] - vals[0] < 1e-7:
            break
        centre = pts[:-1].mean(axis=0)
        refl = centre + (centre - pts[-1])
        r = cost(refl)
        if r < vals[0]:
            grow = centre + 2.0 * (centre - pts[-1])
            g = cost(grow)
            pts[-1], vals[-1] = (grow, g) if g < r else (refl, r)
        elif r < vals[-2]:
            pts[-1], vals[-1] = refl, r
        else:
            inner = centre + 0.5 * (pts[-1] - centre)
            c = cost(inner)
            if c < vals[-1]:
                pts[-1], vals[-1] = inner, c
            else:  # shrink towards the best point
                pts[1:] = pts[0] + 0.5 * (pts[1:] - pts[0])
                vals[1:] = [cost(p) for p in pts[1:]]
    i = int(np.argmin(vals))
    return (pts[i], float(vals[i])) if vals[i] < best else (x, best)


def fit(
    rows: Sequence[MeasuredKernel], start: GemmModel = START, rounds: int = 2
) -> tuple[GemmModel, float]:
    """The coefficients that minimise :func:`objective` over ``rows`` (but those
    :func:`fitted_row` leaves out), and its value."""
    rows = [r for r in rows if fitted_row(r)]
    m = start
    for _ in range(rounds):
        d = design(rows, m)
        m = _search(d, m, None)
    d = design(rows, m)
    return m, objective(d, m)


def leave_one_gpu_out(
    rows: Sequence[MeasuredKernel], model: GemmModel
) -> tuple[dict[tuple[str, str, str], dict[str, Any]], dict[str, dict[str, float]]]:
    """For each catalog GPU: the coefficients fitted without its rows (one search from
    :data:`START` on the designs at ``model``'s tilings; rows :func:`fitted_row` leaves out
    are in no fit) and the statistics of its rows predicted with them, per (GPU, precision, op)."""
    d = design(rows, model)
    gpus = np.array([r.device.id for r in rows])
    kept = np.array([fitted_row(r) for r in rows])
    stats: dict[tuple[str, str, str], dict[str, Any]] = {}
    fitted: dict[str, dict[str, float]] = {}
    for gpu in dict.fromkeys(gpus):
        held = gpus == gpu
        m = _search(d, START, ~held & kept)
        fitted[str(gpu)] = {k: float(f"{v:.5g}") for k, v in m.as_dict().items()}
        results = [predict(r, m) for r, h in zip(rows, held, strict=True) if h]
        for s in summarise(results):
            stats[(s["gpu"], s["precision"], s["op"])] = s
    return stats, fitted
