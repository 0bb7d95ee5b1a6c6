"""Synchronisation costs of synchronous SGD: three terms, each named, sized and bounded.

1. **Co-located GPUs (``host_contention``)**: GPUs that share a node share its CPU cores (the
   framework's op dispatch, input threads, Horovod's background thread), its PCIe root and
   memory bandwidth and its power and cooling budget, so each computes slower than a lone GPU
   in the same server (the single-GPU baseline). A fraction ``c`` of compute time on every
   multi-GPU node; it does not grow with N beyond one node. Fitted on single-node measured runs
   (``scripts/fit_sync.py``), where neither the network nor large-N waits enter.
2. **Compute/communication interference**: while a collective runs, its kernels hold
   ``channels`` thread blocks (one SM each, NCCL) of the GPU's ``sm_count``; compute
   overlapping it runs on the rest. Computed, not fitted: ``channels / sm_count`` (datasheet
   SM counts, NCCL channels per fabric), only while communication is in flight.
3. **Per-rank variability (``rank_sigma``)**: each rank's compute time in one iteration is the
   nominal times an independent mean-1 log-normal factor of shape ``sigma``; every collective
   waits for the last rank, so an iteration runs at the pace of the slowest of N. The fast
   engine stretches its representative worker's compute by ``E[max(X_1..X_N)]``
   (:func:`expected_slowest_factor`, exact by quadrature) and leaves the stretch idle; the
   detailed engine draws every rank's factor (seeded). Grows like ``sigma * sqrt(2 ln N)``:
   slowly and without bound, the one term that grows with N.

``DEFAULT_HOST_CONTENTION`` and ``DEFAULT_RANK_SIGMA`` are fitted to the measured runs in
``traces/measured`` (docs/design.md, "Synchronisation"): ``c`` on single-node rows, ``sigma``
on how the loss grows from one node to many.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ddlsim.errors import ConfigError

if TYPE_CHECKING:
    from ddlsim.comm.base import CommModel
    from ddlsim.system.specs import Cluster

#: per-rank, per-iteration log-normal shape of compute time (fitted, see the module docstring)
DEFAULT_RANK_SIGMA = 0.02
#: compute slowdown of each GPU when a node runs several (fitted, see the module docstring)
DEFAULT_HOST_CONTENTION = 0.04
#: largest accepted host contention (a node's GPUs computing twice as slow as a lone one)
MAX_HOST_CONTENTION = 1.0
#: largest accepted sigma (beyond it one rank's iteration varies by orders of magnitude)
MAX_RANK_SIGMA = 1.0


@lru_cache(maxsize=1)
def _standard_normal_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quadrature grid with the standard normal pdf and cdf (built once, on first use)."""
    grid = np.linspace(-9.0, 9.0, 4001)
    pdf = np.exp(-0.5 * grid**2) / math.sqrt(2.0 * math.pi)
    cdf = 0.5 * (1.0 + np.array([math.erf(z / math.sqrt(2.0)) for z in grid]))
    return grid, pdf, cdf


@dataclass(frozen=True)
class SyncTerms:
    """The three synchronisation terms of the module docstring (each can be switched off:
    ``rank_sigma=0``, ``host_contention=0``, ``interference=False``)."""

    rank_sigma: float = DEFAULT_RANK_SIGMA
    host_contention: float = DEFAULT_HOST_CONTENTION
    interference: bool = True

    def __post_init__(self) -> None:
        check_rank_sigma(self.rank_sigma)
        check_host_contention(self.host_contention)

    def contention(self, cluster: Cluster) -> float:
        """Compute slowdown of ``cluster``'s GPUs: ``host_contention`` where a node runs several
        GPUs (not for CPU workers, whose measured runs show no such term), else 0."""
        shared = cluster.local_gpus > 1 and cluster.device.kind == "gpu"
        return self.host_contention if shared else 0.0

    def interference_fraction(self, cluster: Cluster, comm: CommModel) -> float:
        """Fraction of each GPU the method's communication kernels hold while they run."""
        sms = cluster.device.sm_count or 0
        if not self.interference or sms <= 0 or cluster.n_gpus == 1:
            return 0.0
        return min(0.5, comm.sm_blocks() / sms)


def check_host_contention(fraction: float) -> float:
    """``fraction`` as a float, or :class:`ConfigError` naming the bad value."""
    ok = isinstance(fraction, int | float) and not isinstance(fraction, bool)
    if not ok or math.isnan(fraction):
        raise ConfigError(f"host contention must be a number, got {fraction!r}")
    if not 0 <= fraction <= MAX_HOST_CONTENTION:
        raise ConfigError(
            f"host contention must be in 0..{MAX_HOST_CONTENTION:g}, got {fraction:g}"
        )
    return float(fraction)


def check_rank_sigma(sigma: float) -> float:
    """``sigma`` as a float, or :class:`ConfigError` naming the bad value."""
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or math.isnan(sigma):
        raise ConfigError(f"rank sigma must be a number, got {sigma!r}")
    if not 0 <= sigma <= MAX_RANK_SIGMA:
        raise ConfigError(f"rank sigma must be in 0..{MAX_RANK_SIGMA:g}, got {sigma:g}")
    return float(sigma)


def rank_factors(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    """``size`` independent mean-1 log-normal compute-time factors (ones when ``sigma`` is 0)."""
    if sigma <= 0:
        return np.ones(size)
    return rng.lognormal(-0.5 * sigma**2, sigma, size)


@lru_cache(maxsize=1024)
def expected_slowest_factor(n_ranks: int, sigma: float) -> float:
    """``E[max(X_1..X_n)]`` for ``n`` iid mean-1 log-normal factors of shape ``sigma``.

    1 for one rank or ``sigma == 0``; increasing in both arguments.
    """
    if n_ranks < 1:
        raise ConfigError(f"need at least one rank, got {n_ranks}")
    if n_ranks == 1 or sigma <= 0:
        return 1.0
    grid, pdf, cdf = _standard_normal_grid()
    # density of the largest of n standard normals: n * pdf(z) * cdf(z)^(n-1)
    y = np.exp(sigma * grid - 0.5 * sigma**2) * n_ranks * pdf * cdf ** (n_ranks - 1)
    integral = float(np.sum((y[1:] + y[:-1]) * np.diff(grid)) / 2)  # trapezoid rule
    # the max of mean-1 factors is at least 1; the clamp absorbs quadrature rounding
    return max(1.0, integral)
