"""Waiting for the slowest rank: the synchronisation cost of synchronous SGD.

Every collective (and every parameter-server round) starts when the *last* rank has its
gradients ready, so an iteration runs at the pace of the slowest of ``N`` ranks. Ranks are not
identical from one iteration to the next: GPU clocks under power and thermal limits, host
jitter (input threads, the framework's op dispatch, OS noise) and interference make each
rank's iteration time vary. ddlsim models one rank's compute time in one iteration as the
nominal time times an independent log-normal factor ``X`` with mean 1 and shape ``sigma``;
the iteration's critical path is then the nominal compute times ``E[max(X_1..X_N)]``.

- The fast engine stretches its representative worker's compute by that expectation
  (:func:`expected_slowest_factor`, exact by quadrature); the extra time is idle (waiting) on
  the compute stream, which the breakdown reports as ``coordination_s``.
- The detailed engine draws ``X`` per rank and iteration (seeded), so the same cost emerges.

``DEFAULT_RANK_SIGMA`` is fitted to the measured runs in ``traces/measured`` (see
docs/design.md, "Synchronisation"): it is an effective figure that lumps together every
per-rank source of variability the other models do not represent. With one GPU it has no
effect; it grows like ``sigma * sqrt(2 ln N)``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ddlsim.errors import ConfigError

#: per-rank, per-iteration log-normal shape of compute time (fitted, see the module docstring)
DEFAULT_RANK_SIGMA = 0.06
#: largest accepted sigma (beyond it one rank's iteration varies by orders of magnitude)
MAX_RANK_SIGMA = 1.0


@lru_cache(maxsize=1)
def _standard_normal_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quadrature grid with the standard normal pdf and cdf (built once, on first use)."""
    grid = np.linspace(-9.0, 9.0, 4001)
    pdf = np.exp(-0.5 * grid**2) / math.sqrt(2.0 * math.pi)
    cdf = 0.5 * (1.0 + np.array([math.erf(z / math.sqrt(2.0)) for z in grid]))
    return grid, pdf, cdf


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
