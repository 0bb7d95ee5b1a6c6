"""NCCL double binary tree allreduce (``horovod-nccl`` with algorithm ``tree``).

Structure (NCCL 2.4+): inside a node the g GPUs form a chain whose head (local rank 0) talks to
the network; across nodes two binary trees, each carrying half of the data, are built so that
a node is interior in at most one of them. Here tree A is the heap tree over nodes
(parent of i is (i-1)//2, height H = floor(log2 n)) and tree B its mirror (node i plays n-1-i);
NCCL's in-order trees have the same shape property (height ~log2 n, interior in one tree).

Each half is cut into C chunks of c = S / (2C) bytes that stream up the chain and the tree
(reduce) and back down (broadcast), reduce and broadcast overlapping. A chunk needs
D = 2(g-1) + 2H pipeline ticks to go from the chain end of a leaf to the chain end of the
deepest node, so the operation takes C + D - 1 ticks. In a steady-state tick every tree edge and
chain edge carries one chunk in each direction for each tree; a node interior in tree A with
two children and a parent, and a leaf of tree B, moves 4 chunks per NIC direction (2 children +
parent + its other-tree parent), a middle chain GPU 4 per port direction. With L_nic, L_intra
the largest such loads (computed from the trees: L_nic = 2, 3, 3 for n = 2, 3, 4 and 4 from
n = 5; L_intra = 2 for g = 2, 4 for g >= 3) a tick lasts

    t(C) = max(alpha_intra + L_intra c / B_intra, alpha_nic + L_nic c / B_nic)

and T_tree = (C + D - 1) t(C), with C in 1..1024 chosen to minimise it (a tuned pipeline; the
optimum is near sqrt((D-1) K / alpha) with K = L c C / B). Bandwidth term: C t(C) -> L_nic S /
(2 B_nic) = 2 S / B_nic for n >= 5 (each NIC carries S up and S down in total -- the factor
NCCL's tuner uses, tree algorithm bandwidth = bus bandwidth / 2), and >= 2(n-1)/n S / B_nic
for every n. Latency term: (D + C - 1) alpha ~ 2 log2(n) alpha_nic for small S. Ticks are
charged at the steady-state load even while the pipeline fills and drains (the textbook
pipeline formula); every NCCL tick is global here, so a chain tick costs as much as a network
tick (NCCL's own model: 2(g-1) alpha_intra + 2 log2(n) alpha_nic).

The schedule is the steady-state tick (all chain and tree flows) repeated C + D - 1 times;
with all ranks starting together the executor reproduces T_tree exactly, and a late rank
delays its tree neighbours one hop per tick.
"""

from __future__ import annotations

import numpy as np

from ddlsim.cluster.specs import Cluster
from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import Fabric, ScheduledModel

MAX_CHUNKS = 1024


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


class TreeModel(ScheduledModel):
    """NCCL double binary tree: T = (C + D - 1) t(C) (see module docstring)."""

    name = "horovod-nccl"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        c = self.cluster
        g, n = c.local_gpus, c.n_nodes
        self.depth_ticks = 2 * (g - 1) + 2 * int(np.floor(np.log2(n)))
        self.l_intra, self.l_nic = max_loads(self.fabric) if c.n_gpus > 1 else (0, 0)
        self._chunks: dict[float, tuple[int, float]] = {}

    def _hops(self) -> list[tuple[float, float]]:
        """(alpha, load / B) per link kind the tick uses."""
        c, hops = self.cluster, []
        if c.local_gpus > 1 and c.intra is not None:
            hops.append((c.intra.latency_s, self.l_intra / c.intra.bandwidth_Bps))
        if c.n_nodes > 1 and c.nic is not None:
            nic_Bps = c.nics_per_node * c.nic.bandwidth_Bps
            hops.append((c.nic.latency_s, self.l_nic / nic_Bps))
        return hops

    def chunks(self, nbytes: float) -> tuple[int, float]:
        """(C, T_tree): the chunk count minimising (C + D - 1) t(C), and that time (s)."""
        got = self._chunks.get(nbytes)
        if got is None:
            n_chunks = np.arange(1, MAX_CHUNKS + 1)
            chunk = nbytes / (2 * n_chunks)
            tick = np.max([a + k * chunk for a, k in self._hops()], axis=0)
            total = (n_chunks + self.depth_ticks - 1) * tick
            best = int(np.argmin(total))
            got = self._chunks[nbytes] = (best + 1, float(total[best]))
        return got

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        return self.chunks(nbytes)[1]

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        n_chunks, _ = self.chunks(nbytes)
        tick = tick_flows(self.fabric, nbytes / (2 * n_chunks))
        return [step(tick, repeat=n_chunks + self.depth_ticks - 1)]
