"""BytePS: CPU summation servers with push/pull, tensors partitioned evenly over the servers.

Servers: one per worker node, co-located (k = n), or ``n_ps`` dedicated server machines with
their own NIC on the same network (default k = n). BytePS partitions every tensor over all k
servers, so there is no shard imbalance and a single channel carries every operation; the
per-server load is S/k. With n nodes of g GPUs and S bytes per GPU:

``push``: (1) reduce-scatter inside the node over the intra fabric (ring, g-1 steps of S/g),
so one copy of the node's sum leaves the node; (2) each GPU copies its S/g partition to the
host (the m GPUs under a PCIe switch share its uplink); (3) the node's host (BytePS' CPU
process) sends S/k to every server; the server sums the n contributions on its CPU at
R = ``host_reduce_Bps``; (4) zero-byte notices (servers -> server 0 -> every GPU) mark the
push done everywhere.
``pull``: (5) every server sends S/k to every node's host; (6) host->device copy of S/g;
(7) allgather inside the node.

A node's NIC sends k_r flows (k_r = k-1 remote servers co-located, k dedicated) and a
server's NIC receives n_r (n_r = n-1 or n); each flow gets the smaller equal share::

    t_net  = alpha_nic + (S / k) / min(B_nic / k_r, B_nic / n_r)
    T_push = T_rs(S) + alpha_host + m (S/g) / B_host + t_net + n S / (k R)
    T_pull = t_net + alpha_host + m (S/g) / B_host + T_rs(S)

with T_rs(S) = (g-1)(alpha_intra + S / (g B_intra)). Bandwidth-optimal: with k >= n dedicated
servers each worker NIC carries S per direction (versus 2(n-1)/n S for a ring). On a single
node only the intra-node reduce-scatter (push) and allgather (pull) remain.
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import ScheduledModel, cluster_label, share_Bps
from ddlsim.comm.ring import intra_ring_s, intra_rings, ring_flows
from ddlsim.errors import ConfigError
from ddlsim.system.specs import Cluster


class BytePSModel(ScheduledModel):
    """BytePS push/pull through k CPU servers (see module docstring)."""

    name = "byteps"
    ops = ("push", "pull")

    def __init__(self, cluster: Cluster, n_ps: int | None = None, colocated: bool = True) -> None:
        super().__init__(cluster)
        n = cluster.n_nodes
        if colocated and n_ps not in (None, n):
            raise ConfigError(f"co-located BytePS runs one server per node ({n}), not {n_ps}")
        if not colocated and n == 1:
            raise ConfigError(f"dedicated BytePS servers need a network; {cluster_label(cluster)}")
        k = n if n_ps is None else n_ps
        if k < 1:
            raise ConfigError(f"number of BytePS servers must be >= 1, got {k}")
        self.n_ps, self.colocated = k, colocated
        self.n_servers = k

    def _copy_s(self, nbytes: float) -> float:
        f = self.fabric
        return f.host_latency_s + f.switch_gpus * nbytes / f.host_Bps

    def _net_s(self, nbytes: float) -> float:
        f, n, k = self.fabric, self.fabric.n_nodes, self.n_ps
        k_r, n_r = (k - 1, n - 1) if self.colocated else (k, n)
        return f.nic_latency_s + nbytes / k / share_Bps((f.nic_Bps, k_r), (f.nic_Bps, n_r))

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        c = self.cluster
        total = intra_ring_s(c, nbytes)
        if c.n_nodes > 1:
            total += self._copy_s(nbytes / c.local_gpus) + self._net_s(nbytes)
            if op == "push":
                total += c.n_nodes * nbytes / (self.n_ps * c.host_reduce_Bps)
        return total

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        g, n, k = f.g, f.n_nodes, self.n_ps
        ranks = np.arange(f.n_ranks)
        intra = [step(ring_flows(f, intra_rings(f), nbytes / g), repeat=g - 1)] if g > 1 else []
        if n == 1:
            return intra
        hosts = f.host(f.node(ranks))
        if op == "push":
            res = [f.res("pcie_up", f.switch(ranks))]
            copy = step(flows(ranks, hosts, nbytes / g, res, f.host_latency_s))
        else:
            res = [f.res("pcie_down", f.switch(ranks))]
            copy = step(flows(hosts, ranks, nbytes / g, res, f.host_latency_s))
        node, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(k), indexing="ij"))
        remote = (node != j) if self.colocated else np.ones(node.size, bool)
        srv = "nic_" if self.colocated else "srv_nic_"
        if op == "push":
            res = [f.res("nic_out", node), f.res(srv + "in", j)]
            red = f.res("cpu", j) if self.colocated else f.res("srv_cpu", j)
            src, dst = f.host(node), f.server(j)
        else:
            res = [f.res(srv + "out", j), f.res("nic_in", node)]
            red, src, dst = np.full(node.size, -1), f.server(j), f.host(node)
        res = [np.where(remote, x, -1) for x in res]
        lat = np.where(remote, f.nic_latency_s, 0.0)
        net = step(flows(src, dst, nbytes / k, res, lat, red))
        if op == "push":
            gather = step(flows(f.server(np.arange(k)), f.server(0), 0.0))  # all servers done
            notice = step(flows(f.server(0), ranks, 0.0))
            return [*intra, copy, net, gather, notice]
        return [net, copy, *intra]
