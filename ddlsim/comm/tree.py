"""The structure of NCCL's double binary tree, for the detailed engine.

Inside a node the g GPUs form a chain whose head (local rank 0) talks to the network; across
nodes two binary trees, each carrying half of the data, are built so that a node is interior in
at most one of them (NCCL 2.4+). Here tree A is the heap tree over nodes (parent of i is
(i-1)//2, height floor(log2 n)) and tree B its mirror (node i plays n-1-i); NCCL's in-order
trees have the same shape property.

Data streams up the chain and the trees (reduce) and back down (broadcast), both at once. In a
steady-state *tick* every chain and tree edge carries one chunk in each direction for each
tree: a node interior in tree A with two children and a parent, and a leaf of tree B, moves 4
chunks per NIC direction -- which is why each NIC carries about 2 S in all, the factor NCCL's
tuner uses (tree algorithm bandwidth = bus bandwidth / 2). A chunk needs
``pipeline_depth(g, n) = 2(g-1) + 2 floor(log2 n)`` ticks to go from a leaf's chain end to the
root and back. The cost is NCCL's (:mod:`ddlsim.comm.nccl`); :mod:`ddlsim.comm.nccl_allreduce`
repeats the tick ``pipeline_depth`` times, rescaled to that cost.
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import Fabric


def pipeline_depth(g: int, n_nodes: int) -> int:
    """Ticks a chunk takes up and down the chain of ``g`` GPUs and the trees over ``n_nodes``
    nodes (at least 1)."""
    levels = int(np.floor(np.log2(n_nodes))) if n_nodes > 1 else 0
    return max(1, 2 * (g - 1) + 2 * levels)


def tree_edges(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(child, parent) node pairs of both trees: heap tree A then its mirror B."""
    child = np.arange(1, n_nodes)
    parent = (child - 1) // 2
    mirror = n_nodes - 1
    return np.r_[child, mirror - child], np.r_[parent, mirror - parent]


def tick_flows(fabric: Fabric, chunk_bytes: float) -> Step:
    """One steady-state tick: every chain and tree edge, both directions, both trees."""
    g, n = fabric.g, fabric.n_nodes
    child, parent = tree_edges(n)
    heads_c, heads_p = child * g, parent * g
    local = np.arange(fabric.n_ranks).reshape(n, g)
    lo, hi = np.tile(local[:, :-1].ravel(), 2), np.tile(local[:, 1:].ravel(), 2)  # x 2 trees
    src = np.r_[heads_c, heads_p, hi, lo]  # up the tree, down the tree, up / down the chain
    dst = np.r_[heads_p, heads_c, lo, hi]
    res, lat = fabric.gpu_path(src, dst)
    return step(flows(src, dst, chunk_bytes, res, lat))


def max_loads(fabric: Fabric) -> tuple[int, int]:
    """(L_intra, L_nic): most flows on one GPU port / one NIC direction that a flow crosses."""
    tick = tick_flows(fabric, 1.0)
    count = np.bincount(tick.resources.ravel(), minlength=fabric.capacity_Bps.size)
    per_flow = count[tick.resources].max(axis=1)
    inter = fabric.node(tick.src) != fabric.node(tick.dst)
    l_nic = int(per_flow[inter].max()) if inter.any() else 0
    l_intra = int(per_flow[~inter].max()) if (~inter).any() else 0
    return l_intra, l_nic
