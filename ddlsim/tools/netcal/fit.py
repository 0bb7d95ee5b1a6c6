"""Fit a link's bandwidth and per-message latency to measured collectives, through the model
ddlsim costs that library's collective with.

The model is the one ``predict`` uses, on the cluster the logs measured, with one link's terms
replaced by the parameters being fitted:

- across nodes (``network`` scope), the node's network: bandwidth B (bytes/s per node, all NICs
  together) and the transport's per-message latency alpha, which NCCL's model adds to every
  network hop (twice for SIMPLE) and the host rings of MPI and Gloo charge per step;
- inside a node (``intra`` scope), the GPU-to-GPU fabric's bandwidth (NCCL: the ring's bus
  bandwidth; its hop latencies are NCCL's own tables, so alpha is not fitted) or, for Gloo and
  MPI, the loopback / shared-memory hop's bandwidth and latency.

NCCL calls are costed by :class:`~ddlsim.comm.nccl_allreduce.NcclAllreduceModel` with the
log's NCCL version and any ``NCCL_ALGO`` / ``NCCL_PROTO`` it forced; MPI host buffers (OSU) by
:meth:`~ddlsim.comm.mpi.MPIModel.host_ring_s`; Gloo by :class:`~ddlsim.comm.gloo.GlooModel`.

The objective is the mean squared log ratio of fitted to measured time (every size counts
alike across six decades of sizes), minimised over a log grid of B and a grid of alpha, then
refined by Nelder-Mead. A term the logs do not determine (the bandwidth where another link
binds, the latency where every size is bandwidth-bound) is reported as such (``determined``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ddlsim.comm.gloo import GlooModel
from ddlsim.comm.mpi import MPIModel
from ddlsim.comm.nccl_allreduce import NcclAllreduceModel
from ddlsim.errors import ConfigError
from ddlsim.system.specs import Cluster, Hop
from ddlsim.tools.netcal.logs import Measurement

SCOPES = ("network", "intra")
#: relative change of the objective below which a term counts as not determined
FLAT = 1e-4


@dataclass(frozen=True)
class Target:
    """The cluster the logs measured (catalog names), one log's rank count aside."""

    gpu: str
    gpus_per_node: int
    intra_node: str
    inter_node: str
    transport: str | None
    nics_per_node: int
    nccl_version: str
    library: str

    def cluster(self, n_ranks: int) -> Cluster:
        """The catalog cluster of ``n_ranks`` ranks."""
        from ddlsim.config.groups import SystemConfig
        from ddlsim.resolve.system import resolve_system

        multi = n_ranks > self.gpus_per_node
        system = SystemConfig(
            gpus=n_ranks,
            gpu=self.gpu,
            gpus_per_node=self.gpus_per_node,
            intra_node=self.intra_node if min(n_ranks, self.gpus_per_node) > 1 else None,
            inter_node=self.inter_node if multi else None,
            transport=self.transport if multi else None,
            nics_per_node=self.nics_per_node,
        )
        return resolve_system(system, self.gpu, nccl=self.library == "nccl")


def with_link(cluster: Cluster, scope: str, bandwidth_Bps: float, latency_s: float) -> Cluster:
    """``cluster`` with its network (per node: all NICs together) or intra-node link replaced."""
    if scope == "network":
        per_nic = bandwidth_Bps / cluster.nics_per_node
        return replace(cluster, nic=Hop(per_nic, latency_s))
    if cluster.intra is None:
        raise ConfigError("an intra-node fit needs several GPUs per node")
    return replace(cluster, intra=Hop(bandwidth_Bps, latency_s))


def link_of(cluster: Cluster, scope: str) -> tuple[float, float]:
    """(bandwidth per node or per GPU port, latency) of the link ``scope`` names."""
    if scope == "network":
        assert cluster.nic is not None
        return cluster.nic.bandwidth_Bps * cluster.nics_per_node, cluster.nic.latency_s
    assert cluster.intra is not None
    return cluster.intra.bandwidth_Bps, cluster.intra.latency_s


def model_time_s(target: Target, cluster: Cluster, m: Measurement, nbytes: float) -> float:
    """The time ddlsim's model gives one call of ``m``'s collective on ``cluster``."""
    if target.library == "nccl":
        model = NcclAllreduceModel(
            cluster, version=target.nccl_version, algorithm=m.algorithm, protocol=m.protocol
        )
        return model.collective_choice(m.collective, nbytes).time_s
    if m.collective != "all_reduce":
        raise ConfigError(f"{m.path}: {target.library} {m.collective} is not modelled")
    if target.library == "mpi":
        return MPIModel(cluster).host_ring_s(nbytes)
    return GlooModel(cluster).time_s(nbytes)


@dataclass(frozen=True)
class LinkFit:
    """Fitted terms of one link and how well they reproduce the logs."""

    scope: str
    bandwidth_Bps: float
    latency_s: float
    bandwidth_determined: bool
    latency_determined: bool
    latency_fitted: bool
    catalog_bandwidth_Bps: float
    catalog_latency_s: float
    residuals: tuple[dict[str, Any], ...]

    @property
    def rms_log_residual(self) -> float:
        """Root mean square of ln(fitted / measured)."""
        return math.sqrt(np.mean([math.log1p(r["rel_residual"]) ** 2 for r in self.residuals]))

    @property
    def max_abs_residual(self) -> float:
        """Largest |fitted / measured - 1|."""
        return max(abs(r["rel_residual"]) for r in self.residuals)


def fit_link(
    target: Target,
    measurements: Sequence[Measurement],
    scope: str,
    base: Callable[[int], Cluster] | None = None,
) -> LinkFit:
    """Fit the ``scope`` link of ``target`` to every point of ``measurements``.

    ``base(n_ranks)`` gives the cluster before the fitted link is replaced (default: the
    catalog's, :meth:`Target.cluster`), so that terms fitted first (an intra-node fabric)
    carry into the next fit.
    """
    base = base or target.cluster
    points = [
        (m, base(m.n_ranks or 0), s, t)
        for m in measurements
        for s, t in zip(m.sizes_bytes, m.times_s, strict=True)
    ]
    if not points:
        raise ConfigError("no measured points to fit")
    catalog_B, catalog_alpha = link_of(points[0][1], scope)
    fit_alpha = scope == "network" or target.library != "nccl"

    def loss(bandwidth: float, alpha: float) -> float:
        if not bandwidth > 0 or alpha < 0:
            return math.inf
        errs = []
        for m, cluster, s, t in points:
            c = with_link(cluster, scope, bandwidth, alpha)
            errs.append(math.log(model_time_s(target, c, m, s) / t))
        return float(np.mean(np.square(errs)))

    b0 = max(s / t for _, _, s, t in points)
    t_min = min(t for *_, t in points)
    grid_b = b0 * np.logspace(-2.0, 1.5, 29)
    grid_a = [0.0, *np.geomspace(1e-7, max(t_min, 2e-7), 16)] if fit_alpha else [catalog_alpha]
    scored = sorted((loss(b, a), b, a) for b in grid_b for a in grid_a)
    best = min((_nelder_mead(loss, b, a, fit_alpha, t_min) for _, b, a in scored[:3]))
    value, bandwidth, alpha = best
    b_determined = _changes(loss, value, bandwidth * 4, alpha)
    a_determined = fit_alpha and _changes(loss, value, bandwidth, alpha * 4 + t_min * 0.1)
    residuals = tuple(
        {
            "log": m.path,
            "size_bytes": s,
            "measured_us": t * 1e6,
            "fitted_us": (f := model_time_s(target, with_link(c, scope, bandwidth, alpha), m, s))
            * 1e6,
            "rel_residual": f / t - 1.0,
        }
        for m, c, s, t in points
    )
    return LinkFit(
        scope, bandwidth, alpha, b_determined, a_determined, fit_alpha,
        catalog_B, catalog_alpha, residuals,
    )  # fmt: skip


def _changes(loss: Callable[[float, float], float], value: float, b: float, a: float) -> bool:
    """Whether moving a term to (b, a) changes the loss noticeably (the term is determined)."""
    other = loss(b, a)
    return abs(other - value) > FLAT * max(value, 1e-6)


def _nelder_mead(
    loss: Callable[[float, float], float], b: float, a: float, fit_alpha: bool, scale: float
) -> tuple[float, float, float]:
    """Refine (bandwidth, latency) from a grid point: simplex on (ln B, alpha / scale)."""

    def f(x: np.ndarray) -> float:
        return loss(math.exp(x[0]), max(0.0, x[1] * scale) if fit_alpha else a)

    dims = 2 if fit_alpha else 1
    x0 = np.array([math.log(b), a / scale][:dims])
    simplex = [x0] + [x0 + step for step in np.eye(dims) * np.array([0.2, 0.2])[:dims]]
    values = [f(_pad(x, a / scale)) for x in simplex]
    for _ in range(200 * dims):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < 1e-12 * max(1.0, abs(values[0])):
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        trial = centroid + (centroid - worst)
        ft = f(_pad(trial, a / scale))
        if ft < values[0]:
            expanded = centroid + 2 * (centroid - worst)
            fe = f(_pad(expanded, a / scale))
            simplex[-1], values[-1] = (expanded, fe) if fe < ft else (trial, ft)
        elif ft < values[-2]:
            simplex[-1], values[-1] = trial, ft
        else:
            contracted = centroid + 0.5 * (worst - centroid)
            fc = f(_pad(contracted, a / scale))
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [f(_pad(x, a / scale)) for x in simplex]
    i = int(np.argmin(values))
    x = _pad(simplex[i], a / scale)
    return values[i], math.exp(x[0]), (max(0.0, x[1] * scale) if fit_alpha else a)


def _pad(x: np.ndarray, a_scaled: float) -> np.ndarray:
    return x if len(x) == 2 else np.array([x[0], a_scaled])
