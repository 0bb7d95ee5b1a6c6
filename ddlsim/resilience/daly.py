"""Checkpoint/restart in closed form: Young (1974), Daly (2006), and the exact expected time.

The model (Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart
dumps", FGCS 22:303-312). Failures of the job arrive as a Poisson process of rate
``rate = 1 / M`` (``M`` the job's MTBF: a node's MTBF over the node count). The failure-free
work ``W`` is cut into segments of ``tau`` seconds of training, each followed by a checkpoint
of ``delta`` seconds; the last segment (``r = W - (m - 1) tau``) ends the job and writes none.
A failure anywhere in a segment (its checkpoint included) loses the segment; the job restarts,
which takes ``R`` seconds and may itself be hit (then it starts over), and redoes the segment
from the last checkpoint. A segment that needs ``L`` uninterrupted seconds then takes, on
average::

    E[T_L] = exp(R / M) * M * (exp(L / M) - 1)

which is exact for exponential failures. Daly sums it over ``W / tau`` segments of
``tau + delta``; :func:`restart_expectation` sums it over the whole segments and the shorter
last one, so that it is exact for a job of finite work (what the Monte Carlo runs). Split:
``exp(L/M) - 1`` failed attempts on average, each losing the truncated-exponential time it
ran (``M - L / (exp(L/M) - 1)``) and costing ``M (exp(R/M) - 1)`` of restarting.

Intervals. Young (1974, "A first order approximation to the optimum checkpoint interval",
CACM 17:530) gives ``tau = sqrt(2 delta M)``; Daly's higher-order estimate is
``sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta`` for ``delta < 2M``, else
``M``. Both approximate the minimum of Daly's ``T_w(tau) = W / tau * E[T_{tau + delta}]``,
whose derivative vanishes where ``(1 - x) exp(x) = exp(-delta / M)`` with ``x = tau / M``:
:func:`optimal_interval_s` solves that exactly (the Lambert-W form of the optimum).
``auto`` (:func:`auto_segments`) then picks the whole number of equal segments around it that
minimises the exact finite-job time: for a fixed segment count the time grows with ``tau``
(the last segment shrinks while the checkpointed ones grow), so the minimum over every
interval is at ``tau = W / m`` for some ``m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: below this ``rate * L`` the truncated-exponential mean uses its series (no cancellation)
_SERIES_BELOW = 1e-4
#: ``rate * L`` beyond which exp overflows: the segment (practically) never completes
_OVERFLOW = 700.0
#: a last segment shorter than this fraction of an interval is rounding, not a segment
SEGMENT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Expectation:
    """Expected wall time of a run with failures, and where it goes (seconds).

    ``time_s = work_s + degraded_s + checkpoint_s + lost_s + recovery_s``: ``work_s`` the
    failure-free time-to-train, ``degraded_s`` the extra time an elastic job trains with fewer
    nodes, ``checkpoint_s`` writing checkpoints (elastic: ``state.commit()``), ``lost_s`` work
    and checkpoint writes lost to failures (re-computed), ``recovery_s`` restarting (elastic:
    re-rendezvous and re-admitting replaced nodes). ``failures`` is the expected count.
    """

    work_s: float
    time_s: float
    failures: float
    checkpoint_s: float
    lost_s: float
    recovery_s: float
    degraded_s: float = 0.0

    @property
    def goodput(self) -> float:
        """Useful (failure-free) training time over the expected wall time."""
        return self.work_s / self.time_s if math.isfinite(self.time_s) else 0.0


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's (1974) first-order optimum: ``sqrt(2 delta M)``."""
    return math.sqrt(2 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's (2006) higher-order estimate of the optimum interval."""
    d, m = checkpoint_s, mtbf_s
    if d >= 2 * m:
        return m
    ratio = d / (2 * m)
    return math.sqrt(2 * d * m) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - d


def optimal_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """The interval minimising Daly's ``T_w``: ``M x`` with ``(1 - x) e^x = e^(-delta/M)``.

    The root ``x`` lies in (0, 1) (``M (1 + W0(-e^(-1 - delta/M)))`` in Lambert-W form); it is
    found by Newton's method on ``g(x) = expm1(x) - x e^x + (1 - e^(-delta/M))``, bracketed,
    from the series ``p - p^2/3 + 11 p^3/72``, ``p = sqrt(2 (1 - e^(-delta/M)))``.
    """
    c = -math.expm1(-checkpoint_s / mtbf_s)  # 1 - e^(-delta/M), in (0, 1]
    p = math.sqrt(2 * c)
    x = min(max(p - p * p / 3 + 11 * p**3 / 72, 1e-300), 1 - 1e-16)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        g = math.expm1(x) - x * math.exp(x) + c  # decreasing in x on (0, 1)
        if g > 0:
            lo = x
        else:
            hi = x
        step = g / (x * math.exp(x))  # g'(x) = -x e^x
        nxt = x + step
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if abs(nxt - x) <= 1e-15 * x:
            x = nxt
            break
        x = nxt
    return mtbf_s * x


def _truncated_mean(length_s: float, rate: float) -> float:
    """Mean time to a failure that happens before ``length_s`` (exponential, ``rate``)."""
    y = rate * length_s
    if y < _SERIES_BELOW:
        return length_s * (0.5 - y / 12 + y**3 / 720)
    return 1 / rate - length_s / math.expm1(y)


def segment_costs(length_s: float, restart_s: float, rate: float) -> tuple[float, float, float]:
    """``(failures, lost_s, recovery_s)`` expected while completing ``length_s`` seconds that
    must run uninterrupted, each failure followed by a restart of ``restart_s`` that a failure
    starts over; inf where ``exp`` overflows (the segment practically never completes)."""
    if rate == 0 or length_s == 0:
        return 0.0, 0.0, 0.0
    if rate * length_s > _OVERFLOW or rate * restart_s > _OVERFLOW:
        return math.inf, math.inf, math.inf
    attempts = math.expm1(rate * length_s)  # failed attempts before the one that completes
    per_restart = math.expm1(rate * restart_s) / rate  # restart time, failed restarts included
    failures = attempts * math.exp(rate * restart_s)
    return failures, attempts * _truncated_mean(length_s, rate), attempts * per_restart


def segments(work_s: float, interval_s: float | None) -> tuple[int, float]:
    """``(m, last_s)``: segments of a run of ``work_s`` checkpointed every ``interval_s`` of
    training (None: never) and the length of the last one (no checkpoint after it)."""
    if interval_s is None or interval_s >= work_s:
        return 1, work_s
    m = max(1, math.ceil(work_s / interval_s - SEGMENT_TOLERANCE))
    return m, work_s - (m - 1) * interval_s


def restart_expectation(
    work_s: float,
    interval_s: float | None,
    checkpoint_s: float,
    restart_s: float,
    rate: float,
) -> Expectation:
    """Expected run of ``work_s`` failure-free seconds, checkpointed every ``interval_s`` (None:
    never) at ``checkpoint_s`` each, with job failures at ``rate`` per second and restarts of
    ``restart_s`` (the module's model; exact for exponential failures)."""
    m, last = segments(work_s, interval_s)
    parts = [(last, 1)] + ([(interval_s + checkpoint_s, m - 1)] if m > 1 else [])
    failures = lost = recovery = 0.0
    for length, count in parts:
        f, lo, rec = segment_costs(length, restart_s, rate)
        failures += count * f
        lost += count * lo
        recovery += count * rec
    written = (m - 1) * checkpoint_s
    return Expectation(
        work_s=work_s,
        time_s=work_s + written + lost + recovery,
        failures=failures,
        checkpoint_s=written,
        lost_s=lost,
        recovery_s=recovery,
    )


def auto_segments(
    work_s: float,
    checkpoint_s: float,
    restart_s: float,
    rate: float,
    min_interval_s: float = 0.0,
) -> float | None:
    """The ``auto`` interval: ``W / m`` for the segment count ``m`` around ``W`` over the
    :func:`optimal_interval_s` that minimises :func:`restart_expectation` (None: ``m = 1``, no
    checkpoint pays off). No interval is shorter than ``min_interval_s`` (one iteration)."""
    if rate == 0:
        return None
    tau = max(optimal_interval_s(checkpoint_s, 1 / rate), min_interval_s)
    guess = work_s / tau
    most = max(1, math.floor(work_s / min_interval_s)) if min_interval_s > 0 else math.inf
    candidates = {1, *range(max(1, math.floor(guess) - 2), math.ceil(guess) + 3)}
    best_m, best_t = 1, math.inf
    for m in sorted(c for c in candidates if c <= most):
        interval = None if m == 1 else work_s / m
        t = restart_expectation(work_s, interval, checkpoint_s, restart_s, rate).time_s
        if t < best_t:
            best_m, best_t = m, t
    return None if best_m == 1 else work_s / best_m
