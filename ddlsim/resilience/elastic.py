"""Elastic recovery (Horovod Elastic, 0.20+) in closed form.

What Horovod Elastic does (horovod.readthedocs.io, "Elastic Horovod"): the training loop runs
under ``hvd.elastic.run``; every few batches it calls ``state.commit()``, which copies the model
and optimizer state aside in memory and checks whether hosts were added or removed. When a
worker dies, the survivors' collective fails (``HorovodInternalError``): they restore the last
commit, re-rendezvous without the lost host and go on. A new host found by the discovery script
is admitted at the next commit (``HostsUpdatedInterrupt``, no rollback): another rendezvous,
then ``state.sync()`` broadcasts the state from rank 0 to it. Each worker keeps its own batch,
so with ``a`` of ``n`` nodes the global batch is ``a / n`` of the original (the docs advise
scaling the learning rate with ``hvd.size()``).

The model. Nodes fail independently (exponential, MTBF ``M``). The job commits after every
``tau`` of work (``tau`` seconds at the full size: ``tau n / a`` on ``a`` nodes), each commit
taking ``delta_c``. A failure costs the work since the last commit plus a re-rendezvous of
``R_e`` (a failure during it starts it over). The failed node's replacement arrives
``replace_s`` later and joins at the first commit after that: the node misses
``A = L max(1, ceil((replace_s - R_e) / L))`` of training, ``L`` the wall time of a segment
trained without it (commits restart with the training after the rendezvous); its admission
stalls the job for ``R_add = R_e + state / network`` (the broadcast). Iteration time is
unchanged with fewer workers (each keeps its batch, and the exchange's cost barely moves
between ``n`` and ``n - 1`` nodes), so the job's throughput is ``a / n`` of the full one.
**Assumption**: the same epochs reach the same accuracy with the smaller global batch (its
convergence is not modelled).

The run takes ``T`` in all and trains successfully for ``T_t``. Failures come at the rate of
the nodes present over all of ``T`` (stalls and lost work included) and land in the segments in
proportion to each segment's failures (Daly's count for its length). A failure rolls back to
its segment's start; its node then misses ``A``, or the rest of the run when fewer than
``A / L`` commits are left (then it is never re-admitted). The mean of that over the failures,
``a_f``, makes a node away a fraction ``p`` of the training with
``p / (1 - p) = T a_f / (M T_t)``, so training the work takes ``T_t = W / (1 - p)``, the
segments stretch by ``T_t / W``, and the ``n (1 - p)`` nodes present fail at rate
``Lambda = n (1 - p) / M``. Each of the ``m - 1`` committed segments and the last one (the rest
of the work, no commit after it) costs Daly's segment time with ``R = R_e``; an admission is
started over by a failure during it. ``T`` enters its own terms and is solved for by
fixed-point iteration. Approximations (first order, checked against the Monte Carlo): every
segment stretched alike, another node's absence overlapping a node's own left out of ``A``,
replacements arriving before the same commit admitted separately, the commit alignment after
a second failure ignored.
"""

from __future__ import annotations

import math

from ddlsim.errors import ConfigError
from ddlsim.resilience.daly import (
    SEGMENT_TOLERANCE,
    Expectation,
    optimal_interval_s,
    segment_costs,
    segments,
)


def away_s(interval_s: float, commit_s: float, rendezvous_s: float, replace_s: float) -> float:
    """Training time a failed node misses: until the first commit after its replacement
    arrives, counted from the end of the re-rendezvous that follows the failure."""
    length = interval_s + commit_s
    return length * max(1, math.ceil((replace_s - rendezvous_s) / length - 1e-12))


def _away(
    m: int, commits: int, seg_s: float, last_s: float, f_seg: float, f_last: float
) -> tuple[float, float]:
    """``(mean training missed, share re-admitted)`` of a failed node, failures spread over the
    ``m`` segments in proportion to ``f_seg`` (the ``m - 1`` committed ones) and ``f_last``
    (the last). A failure in segment ``k`` rolls back to its start; its node is re-admitted
    after ``commits`` segments of ``seg_s`` (trained without it) if the run has that many
    commits left, else it misses the rest of the run (``last_s`` for the last segment)."""
    first_late = max(0, m - commits)  # segments from here on end the run before re-admission
    early = first_late * f_seg  # failures re-admitted (all in committed segments)
    n_late = m - 1 - first_late  # committed segments among the late ones
    late_sum = seg_s * n_late * (n_late + 1) / 2 + n_late * last_s  # rest of run after each
    total = early * commits * seg_s + f_seg * late_sum + f_last * last_s
    base = (m - 1) * f_seg + f_last
    return total / base, early / base


def elastic_expectation(
    work_s: float,
    nodes: int,
    node_rate: float,
    interval_s: float | None,
    commit_s: float,
    rendezvous_s: float,
    admit_s: float,
    replace_s: float,
) -> Expectation:
    """Expected run of ``work_s`` failure-free seconds on ``nodes`` (>= 2) nodes that each fail
    at ``node_rate`` per second, recovering elastically (the module's model): commits every
    ``interval_s`` of training (None: never) at ``commit_s`` each, re-rendezvous
    ``rendezvous_s``, admission of a replacement ``admit_s``, replacement after ``replace_s``.
    The run's length enters its own terms (how many failures there are, how long their nodes
    stay away); they are solved for by fixed-point iteration."""
    if nodes < 2:
        raise ConfigError(f"elastic recovery needs at least 2 nodes, got {nodes}")
    interval = work_s if interval_s is None else min(interval_s, work_s)
    m, last = segments(work_s, interval)  # commits come after every interval of work
    if node_rate == 0:  # no failures: only the commits cost
        return Expectation(work_s, work_s + (m - 1) * commit_s, 0.0, (m - 1) * commit_s, 0.0, 0.0)
    never = Expectation(work_s, math.inf, math.inf, math.inf, math.inf, math.inf, math.inf)
    # while a failed node is away its segments run on the n - 1 others (the others' own
    # absences overlapping it are left out: second order)
    without = nodes / (nodes - 1)
    seg_without = interval * without + commit_s
    commits_away = max(1, math.ceil((replace_s - rendezvous_s) / seg_without - SEGMENT_TOLERANCE))
    span = trained = work_s
    p = 0.0
    for _ in range(200):
        stretch = trained / work_s  # segments take longer on fewer nodes
        length = interval * stretch + commit_s
        rate = nodes * (1 - p) * node_rate
        f_seg, lost_seg, rend_seg = segment_costs(length, rendezvous_s, rate)
        f_last, lost_last, rend_last = segment_costs(last * stretch, rendezvous_s, rate)
        if not math.isfinite(f_seg + f_last) or rate * admit_s >= math.log(2):
            return never  # (an admission started over once or more on average: never done)
        per_admission = math.expm1(rate * admit_s)  # failures during one admission
        away, admitted = _away(m, commits_away, seg_without, last * without, f_seg, f_last)
        # failures come over the whole run (stalls and lost work included): a node is away
        # node_rate * span * away of the training
        ratio = node_rate * span * away / trained
        p = ratio / (1 + ratio)
        trained = work_s / (1 - p)
        base = (m - 1) * f_seg + f_last
        admissions = admitted * base / (1 - admitted * per_admission)
        committed = (m - 1) * commit_s
        lost = (m - 1) * lost_seg + lost_last
        recovery = (m - 1) * rend_seg + rend_last + admissions * per_admission / rate
        total = trained + committed + lost + recovery
        if not math.isfinite(total) or total > 1e6 * work_s:
            return never
        converged = abs(total - span) <= 1e-13 * total
        span = total
        if converged:
            break
    return Expectation(
        work_s=work_s,
        time_s=span,
        failures=base + admissions * per_admission,
        checkpoint_s=committed,
        lost_s=lost,
        recovery_s=recovery,
        degraded_s=trained - work_s,
    )


def auto_interval_s(
    work_s: float,
    nodes: int,
    node_rate: float,
    commit_s: float,
    rendezvous_s: float,
    admit_s: float,
    replace_s: float,
    min_interval_s: float = 0.0,
) -> float | None:
    """The ``auto`` commit interval: ``W / m`` for the segment count ``m`` around Daly's optimum
    (commit cost, the job's MTBF) that minimises the expected time; None when ``m = 1`` (no
    commit) is best. No interval is shorter than ``min_interval_s``."""
    if node_rate == 0:
        return None
    tau = max(optimal_interval_s(commit_s, 1 / (nodes * node_rate)), min_interval_s)
    guess = work_s / tau
    most = max(1, math.floor(work_s / min_interval_s)) if min_interval_s > 0 else math.inf
    best: tuple[float, float | None] = (math.inf, None)
    for m in sorted({1, *range(max(1, math.floor(guess) - 2), math.ceil(guess) + 3)}):
        if m > most:
            break
        interval = None if m == 1 else work_s / m
        args = (commit_s, rendezvous_s, admit_s, replace_s)
        e = elastic_expectation(work_s, nodes, node_rate, interval, *args)
        if e.time_s < best[0]:
            best = (e.time_s, interval)
    return best[1]
