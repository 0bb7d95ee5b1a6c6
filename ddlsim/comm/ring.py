"""NCCL ring allreduce over all N GPUs (``horovod-nccl``, the default algorithm).

Ranks are packed node by node, so the ring ``0 -> 1 -> ... -> N-1 -> 0`` crosses each node
boundary once: inside a node a hop is the intra fabric (GPU port to GPU port), between nodes it
is the NIC, and each node's NIC carries exactly one ring crossing per direction. A ring
allreduce is a reduce-scatter then an allgather, 2(N-1) steps in which every rank sends one
S/N chunk to its successor; NCCL fuses the summation into its copy kernels, so no reduction
term. A step lasts as long as its slowest hop, hence::

    T_ring = 2 (N - 1) * max over hops h in the ring of (alpha_h + (S / N) / B_h)

with B_h = ``intra`` bandwidth for an intra-node hop and ``nics_per_node`` x ``nic`` bandwidth
for a crossing. The event-level schedule is one step of N flows repeated 2(N-1) times; with all
ranks starting together the executor reproduces the formula exactly (the slowest hop's source
is busy for the whole of every step).
"""

from __future__ import annotations

import numpy as np

from ddlsim.cluster.specs import Cluster
from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import Fabric, ScheduledModel
from ddlsim.errors import SimulationError


def ring_flows(
    fabric: Fabric,
    rings: np.ndarray,
    chunk_bytes: float,
    *,
    host: bool = False,
    reduce: bool = False,
) -> Step:
    """One step of parallel rings: row ``i`` of ``rings`` is a ring of ranks, each sending
    ``chunk_bytes`` to its successor over GPU paths, or over host paths with ``host=True``
    (where ``reduce=True`` makes the destination node's CPU sum the chunk)."""
    rings = np.atleast_2d(rings)
    src, dst = rings.ravel(), np.roll(rings, -1, axis=1).ravel()
    if not host:
        res, lat = fabric.gpu_path(src, dst)
        return flows(src, dst, chunk_bytes, res, lat)
    res, lat = fabric.host_path(src, dst)
    reducer = fabric.res("cpu", fabric.node(dst)) if reduce else -1
    return flows(src, dst, chunk_bytes, res, lat, reducer)


def intra_hop_s(cluster: Cluster, nbytes: float, flows: int = 1) -> float:
    """One intra-node message of ``nbytes`` while ``flows`` messages share the GPU port (s):
    alpha_intra + flows * nbytes / B_intra."""
    hop = cluster.intra
    if hop is None:
        raise SimulationError("intra-node hop asked of a cluster with one GPU per node")
    return hop.latency_s + flows * nbytes / hop.bandwidth_Bps


def nic_hop_s(cluster: Cluster, nbytes: float, flows: int = 1) -> float:
    """One inter-node message of ``nbytes`` while ``flows`` messages share the node's NICs (s):
    alpha_nic + flows * nbytes / (nics_per_node * B_nic)."""
    hop = cluster.nic
    if hop is None:
        raise SimulationError("network hop asked of a single-node cluster")
    return hop.latency_s + flows * nbytes / (cluster.nics_per_node * hop.bandwidth_Bps)


def ring_hop_s(cluster: Cluster, chunk_bytes: float) -> float:
    """Slowest hop (s) of the flat ring over all GPUs moving ``chunk_bytes``: the intra hop if
    nodes hold more than one GPU, the NIC hop if there is more than one node."""
    hops = [intra_hop_s(cluster, chunk_bytes)] if cluster.local_gpus > 1 else []
    if cluster.n_nodes > 1:
        hops.append(nic_hop_s(cluster, chunk_bytes))
    return max(hops, default=0.0)


def intra_ring_s(cluster: Cluster, nbytes: float) -> float:
    """Reduce-scatter (or allgather) of ``nbytes`` among a node's g GPUs, all nodes at once:
    (g - 1) (alpha_intra + S / (g B_intra)) seconds; 0 for one GPU per node."""
    g = cluster.local_gpus
    return (g - 1) * intra_hop_s(cluster, nbytes / g) if g > 1 else 0.0


def intra_rings(fabric: Fabric) -> np.ndarray:
    """One ring per node over its local ranks (n x g)."""
    return np.arange(fabric.n_ranks).reshape(fabric.n_nodes, fabric.g)


class RingModel(ScheduledModel):
    """NCCL ring allreduce: T = 2(N-1) max_h(alpha_h + S/(N B_h)) (see module docstring)."""

    name = "horovod-nccl"

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        n = self.cluster.n_gpus
        return 2 * (n - 1) * ring_hop_s(self.cluster, nbytes / n)

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        ring = np.arange(f.n_ranks)[None, :]
        return [step(ring_flows(f, ring, nbytes / f.n_ranks), repeat=2 * (f.n_ranks - 1))]
