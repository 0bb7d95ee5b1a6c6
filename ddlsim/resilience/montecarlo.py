"""Monte Carlo of whole training runs with failures: every draw a run, all draws in lockstep.

Failure arrivals. Each node fails after an exponential time of mean ``M`` (the node MTBF),
independently of the others and of its age (a restarted or replaced node is as good as new).
The job's next failure is the first of its ``a`` present nodes' failures: the minimum of ``a``
independent Exp(1/M) times, which is Exp(a/M) exactly, so each event draws that minimum
directly (one draw per event instead of one per node; :mod:`ddlsim.resilience.trace` runs the
same dynamics with an explicit clock per node, and the tests check that both agree).

Each loop step advances every unfinished draw by one event, jumping over the uneventful
segments in between: ``restart`` (a failure, the end of a restart, or the end of the run) and
``elastic`` (a failure, the admission of replaced nodes at a commit, the end of a stall, or the
end). The dynamics are those of the closed forms (:mod:`ddlsim.resilience.daly`,
:mod:`ddlsim.resilience.elastic`): the same segments, restarts started over by a failure,
rollback to the last checkpoint or commit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ddlsim.errors import ConfigError, SimulationError
from ddlsim.resilience.daly import SEGMENT_TOLERANCE

#: refuse a Monte Carlo expected to need more events than this per draw
MAX_EVENTS_PER_DRAW = 100_000

_RUN, _STALL_FAILED, _STALL_ADMIT, _WAIT = 0, 1, 2, 3


@dataclass(frozen=True)
class Draws:
    """Wall time and failure count of each simulated run."""

    time_s: np.ndarray
    failures: np.ndarray

    def summary(self) -> dict[str, float | None]:
        """Mean, standard error of the mean (None for one run), p10 / p50 / p90 and mean
        failures."""
        t = self.time_s
        p10, p50, p90 = np.percentile(t, [10, 50, 90])
        sem = float(t.std(ddof=1) / math.sqrt(t.size)) if t.size > 1 else None
        return {
            "draws": int(t.size),
            "mean_s": float(t.mean()),
            "sem_s": sem,
            "p10_s": float(p10),
            "p50_s": float(p50),
            "p90_s": float(p90),
            "failures_mean": float(self.failures.mean()),
        }


def _steps() -> range:
    """The loop's steps: a draw needs about two per failure; more is a bug, not bad luck."""
    return range(20 * MAX_EVENTS_PER_DRAW)


def check_events(expected_failures: float) -> None:
    """Refuse a Monte Carlo whose runs would take too many events to simulate."""
    if not expected_failures <= MAX_EVENTS_PER_DRAW:
        raise ConfigError(
            f"expected failures per run {expected_failures:.3g} exceed the Monte Carlo's limit "
            f"of {MAX_EVENTS_PER_DRAW:,}: the job practically never completes"
        )


def run_restart(
    work_s: float,
    interval_s: float | None,
    checkpoint_s: float,
    restart_s: float,
    nodes: int,
    node_mtbf_s: float,
    draws: int,
    seed: int,
) -> Draws:
    """``draws`` runs of ``work_s`` checkpointed every ``interval_s`` (None: never), restarted
    from the last checkpoint in ``restart_s`` after each failure of any of ``nodes`` nodes."""
    rng = np.random.default_rng(seed)
    tau = work_s if interval_s is None else min(interval_s, work_s)
    length = tau + checkpoint_s
    mean_gap = node_mtbf_s / nodes
    t = np.zeros(draws)
    done = np.zeros(draws)  # work saved by the last checkpoint
    failures = np.zeros(draws, dtype=np.int64)
    running = np.ones(draws, dtype=bool)
    active = np.arange(draws)
    for _ in _steps():
        if not active.size:
            break
        gap = rng.exponential(mean_gap, active.size)
        run = running[active]
        finished = np.zeros(active.size, dtype=bool)
        ids, g = active[run], gap[run]
        if ids.size:
            rem = work_s - done[ids]
            m = np.maximum(1, np.ceil(rem / tau - SEGMENT_TOLERANCE))
            to_end = rem + (m - 1) * checkpoint_s
            end = g >= to_end
            finished[np.flatnonzero(run)[end]] = True
            t[ids[end]] += to_end[end]
            hit, gh = ids[~end], g[~end]
            saved = np.minimum(np.floor(gh / length), m[~end] - 1)
            done[hit] += saved * tau
            t[hit] += gh
            failures[hit] += 1
            running[hit] = False
        ids, g = active[~run], gap[~run]
        if ids.size:
            back = g >= restart_s
            t[ids[back]] += restart_s
            running[ids[back]] = True
            t[ids[~back]] += g[~back]
            failures[ids[~back]] += 1
        active = active[~finished]
    else:
        raise SimulationError("restart Monte Carlo did not finish: runs without end")
    return Draws(t, failures)


class _Queue:
    """Per-draw FIFO of replacement arrival times (arrivals come in failure order)."""

    def __init__(self, draws: int) -> None:
        self.times = np.full((draws, 4), np.inf)
        self.head = np.zeros(draws, dtype=np.int64)
        self.tail = np.zeros(draws, dtype=np.int64)

    def push(self, ids: np.ndarray, when: np.ndarray) -> None:
        if ids.size and self.tail[ids].max() >= self.times.shape[1]:
            grown = np.full((self.times.shape[0], 2 * self.times.shape[1]), np.inf)
            grown[:, : self.times.shape[1]] = self.times
            self.times = grown
        self.times[ids, self.tail[ids]] = when
        self.tail[ids] += 1

    def next(self, ids: np.ndarray) -> np.ndarray:
        """The earliest pending arrival of each draw (inf: none)."""
        col = np.minimum(self.head[ids], self.times.shape[1] - 1)
        return np.where(self.head[ids] < self.tail[ids], self.times[ids, col], np.inf)

    def pop_until(self, ids: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Remove the arrivals at or before ``t`` (per draw); return how many each had."""
        count = np.zeros(ids.size, dtype=np.int64)
        while True:
            due = self.next(ids) <= t
            if not due.any():
                return count
            self.head[ids[due]] += 1
            count += due


class _ElasticState:
    """Each draw's clock (s), work saved (s), nodes present, phase, failures and replacements."""

    def __init__(self, draws: int, nodes: int, replace_s: float) -> None:
        self.t = np.zeros(draws)
        self.done = np.zeros(draws)  # work saved by the last commit
        self.alive = np.full(draws, nodes, dtype=np.int64)
        self.phase = np.full(draws, _RUN)
        self.failures = np.zeros(draws, dtype=np.int64)
        self.queue = _Queue(draws)
        self.unfinished = np.ones(draws, dtype=bool)
        self.replace_s = replace_s

    def fail(self, ids: np.ndarray) -> None:
        """A node of each draw ``ids`` fails now; its replacement arrives in ``replace_s``."""
        self.alive[ids] -= 1
        self.failures[ids] += 1
        self.queue.push(ids, self.t[ids] + self.replace_s)
        self.phase[ids] = np.where(self.alive[ids] == 0, _WAIT, self.phase[ids])


def run_elastic(
    work_s: float,
    nodes: int,
    node_mtbf_s: float,
    interval_s: float,
    commit_s: float,
    rendezvous_s: float,
    admit_s: float,
    replace_s: float,
    draws: int,
    seed: int,
) -> Draws:
    """``draws`` elastic runs (:mod:`ddlsim.resilience.elastic`'s dynamics): a commit after
    every ``interval_s`` of work (at the full size: longer on fewer nodes), rollback and
    re-rendezvous on a failure, replacements admitted at the first commit after they arrive,
    throughput in proportion to the nodes present; ``interval_s`` inf: no commit."""
    rng = np.random.default_rng(seed)
    runs = _ElasticState(draws, nodes, replace_s)
    for _ in _steps():
        if not runs.unfinished.any():
            break
        _advance_running(runs, rng, work_s, nodes, node_mtbf_s, interval_s, commit_s)
        _advance_stalled(runs, rng, node_mtbf_s, admit_s, rendezvous_s)
        _advance_waiting(runs)
    else:
        raise SimulationError("elastic Monte Carlo did not finish: runs without end")
    return Draws(runs.t, runs.failures)


def _advance_running(
    runs: _ElasticState,
    rng: np.random.Generator,
    work_s: float,
    nodes: int,
    node_mtbf_s: float,
    interval_s: float,
    commit_s: float,
) -> None:
    """Running draws to their next event: the end of the run, an admission at a commit, or a
    failure (rollback to the last commit)."""
    commits = math.isfinite(interval_s)  # inf: no commit at all
    ids = np.flatnonzero(runs.unfinished & (runs.phase == _RUN))
    if not ids.size:
        return
    a = runs.alive[ids]
    rem = work_s - runs.done[ids]
    stretch = nodes / a  # a segment's work takes longer on fewer nodes
    if commits:
        m = np.maximum(1, np.ceil(rem / interval_s - SEGMENT_TOLERANCE))
        seg = interval_s * stretch + commit_s
        j = np.maximum(1, np.ceil((runs.queue.next(ids) - runs.t[ids]) / seg))
        to_admit = np.where(j <= m - 1, j * seg, np.inf)
    else:  # one segment: no commit, so no admission either
        m = j = seg = np.ones(ids.size)
        to_admit = np.full(ids.size, np.inf)
    to_end = rem * stretch + (m - 1) * commit_s
    gap = rng.exponential(1.0, ids.size) * node_mtbf_s / a
    end = (gap >= to_end) & np.isinf(to_admit)
    admit = ~end & (to_admit <= gap)
    hit = ~end & ~admit
    runs.t[ids[end]] += to_end[end]
    runs.unfinished[ids[end]] = False
    adm = ids[admit]
    runs.t[adm] += to_admit[admit]
    runs.done[adm] += j[admit] * interval_s
    runs.alive[adm] += runs.queue.pop_until(adm, runs.t[adm])
    runs.phase[adm] = _STALL_ADMIT
    h = ids[hit]
    if commits:
        runs.done[h] += np.floor(gap[hit] / seg[hit]) * interval_s
    runs.t[h] += gap[hit]
    runs.phase[h] = _STALL_FAILED
    runs.fail(h)


def _advance_stalled(
    runs: _ElasticState,
    rng: np.random.Generator,
    node_mtbf_s: float,
    admit_s: float,
    rendezvous_s: float,
) -> None:
    """Stalled draws (re-rendezvous after a failure, or admitting replacements) back to running,
    unless a node fails first."""
    ids = np.flatnonzero(
        runs.unfinished & ((runs.phase == _STALL_FAILED) | (runs.phase == _STALL_ADMIT))
    )
    if not ids.size:
        return
    stall = np.where(runs.phase[ids] == _STALL_ADMIT, admit_s, rendezvous_s)
    gap = rng.exponential(1.0, ids.size) * node_mtbf_s / runs.alive[ids]
    over = gap >= stall
    runs.t[ids[over]] += stall[over]
    runs.phase[ids[over]] = _RUN
    h = ids[~over]
    runs.t[h] += gap[~over]
    runs.fail(h)


def _advance_waiting(runs: _ElasticState) -> None:
    """Draws with no node left wait for the next replacement, then admit what has arrived."""
    ids = np.flatnonzero(runs.unfinished & (runs.phase == _WAIT))
    if not ids.size:
        return
    runs.t[ids] = np.maximum(runs.t[ids], runs.queue.next(ids))
    runs.alive[ids] += runs.queue.pop_until(ids, runs.t[ids])
    runs.phase[ids] = _STALL_ADMIT
