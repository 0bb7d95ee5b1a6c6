"""Ring building blocks shared by the methods: ring flows and per-hop costs.

Ranks are packed node by node, so the ring ``0 -> 1 -> ... -> N-1 -> 0`` crosses each node
boundary once: inside a node a hop is the intra fabric (GPU port to GPU port), between nodes it
is the NIC, and each node's NIC carries exactly one ring crossing per direction. A ring
allreduce is a reduce-scatter then an allgather, 2(N-1) steps in which every rank sends one
S/N chunk to its successor. NCCL's ring is costed by NCCL's own model
(:mod:`ddlsim.comm.nccl`, :mod:`ddlsim.comm.nccl_allreduce`); the host rings of MPI and Gloo,
whose steps are lock-step sends and receives, take their slowest hop per step
(:func:`ring_hop_s`): alpha_h + chunk / B_h with B_h the intra bandwidth for an intra-node hop
and ``nics_per_node`` x NIC bandwidth for a crossing.
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step, flows
from ddlsim.comm.fabric import Fabric
from ddlsim.errors import SimulationError
from ddlsim.system.specs import Cluster


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
