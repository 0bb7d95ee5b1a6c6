"""TensorFlow parameter servers over gRPC (``ps``: tf_cnn_benchmarks
``variable_update=parameter_server``).

k = ``n_ps`` shards hold the variables, each on the least-loaded shard in creation order as
tf_cnn_benchmarks places them (:mod:`ddlsim.comm.placement`; ``placement_rule="round-robin"``
for a plain ``replica_device_setter``); a variable is never split, so VGG-16's 411 MB fc6 alone
loads one shard. An operation
is one shard's slice of b bytes: ``push`` (every worker sends b to the shard, whose CPU sums
the N contributions) or ``pull`` (every worker receives b). Shards are either on dedicated PS
machines (their own NIC on the same network) or co-located, shard j on node j mod n, sharing
that node's NIC with its workers; on a single node the PS is the host CPU reached over PCIe
(``placement="cpu"``, tf_cnn_benchmarks ``local_parameter_device=cpu``) or, with
``placement="gpu"``, a GPU reached over the intra fabric (variables on GPU (j div n) mod g of
node j mod n). gRPC runs over TCP: the cluster's NIC hop already carries TCP's efficiency.
Across nodes every worker, the PS node's own included, reaches a PS task through gRPC, whose
host-side work (serialisation, copies, framing) moves at most :data:`GRPC_TASK_Bps` per
direction for all of the task's workers together (measured; on one node tf_cnn_benchmarks keeps
the variables in the workers' process and no gRPC is involved, unless the job runs PS tasks of
its own: ``distributed_replicated`` on one machine, a worker task and a PS task that talk gRPC
over loopback, which is what the measurement is).

Push of b bytes to shard j, W workers (w per node), m GPUs per PCIe switch; each flow moves b
at the equal-sharing rate of its most crowded resource (worker side: the switch uplink, m
flows, and the node's NIC, w flows; server side: the PS NIC, W_r remote flows), then the PS
sums the W contributions one after another at R (``host_reduce_Bps``; a GPU's memory
bandwidth with ``placement="gpu"``)::

    t_remote = alpha_host + alpha_nic + b / min(B_host / m, B_nic / w, B_nic / W_r, G / W)
    t_local  = alpha_host + b / min(B_host / m, G / W)   (co-located, the PS node's own workers;
                                     GPU placement: alpha_intra + b / min(B_intra / (w-1), G / W))
    T_push   = max(t_remote, t_local) + W b / R      W_r = W (dedicated) or W - w (co-located)

with G = :data:`GRPC_TASK_Bps` across nodes or between tasks (infinite in one process), i.e.
the slower of the worker stage (b / B_worker) and the server stage (W_r b / B_ps, W b / G), plus
latencies and the summation. ``pull`` is the same flows reversed, without the summation. A
push completes on every worker when the shard has summed (the schedule ends with a zero-byte
notification), so a pull issued after it starts from a summed shard.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import ScheduledModel, cluster_label, share_Bps
from ddlsim.comm.placement import place, totals
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system.specs import Cluster

PLACEMENTS = ("cpu", "gpu")
#: bytes/s one parameter-server task's gRPC runtime moves per direction, all its workers
#: together: TensorFlow 2.18's gRPC between a PS task and a worker task on one host over
#: loopback (no link limit), median of the 64 and 411 MiB pushes and pulls in
#: traces/grpc/transfer.json (``python scripts/measure_grpc.py``; 2-core Xeon, 1.05-1.90 GB/s).
#: Charged per task, not per stream: the Horovod README's 2017 PS runs imply a constant
#: ~1.0-1.25 GB/s per task from 16 to 64 workers (docs/design.md).
GRPC_TASK_Bps = 1.76e9


def default_n_ps(cluster: Cluster) -> int:
    """tf_cnn_benchmarks convention: one PS task per worker node (1 on a single node)."""
    return cluster.n_nodes


class PSModel(ScheduledModel):
    """Sharded parameter servers, push and pull per shard (see module docstring)."""

    name = "ps"
    ops = ("push", "pull")

    def __init__(
        self,
        cluster: Cluster,
        n_ps: int | None = None,
        colocated: bool = True,
        placement: str = "cpu",
        tensor_bytes: Sequence[int] = (),
        placement_rule: str = "greedy",
        ps_tasks: bool = False,
    ) -> None:
        super().__init__(cluster)
        if placement not in PLACEMENTS:
            raise UnknownNameError("ps placement", placement, PLACEMENTS)
        k = default_n_ps(cluster) if n_ps is None else n_ps
        if k < 1:
            raise ConfigError(f"number of parameter servers must be >= 1, got {k}")
        if not colocated and (cluster.n_nodes == 1 or cluster.nic is None):
            raise ConfigError(
                f"dedicated parameter servers need a network; {cluster_label(cluster)} is a "
                "single node (use co-located parameter servers)"
            )
        if not colocated and placement == "gpu":
            raise ConfigError("ps placement 'gpu' needs co-located parameter servers")
        self.n_ps, self.colocated, self.placement = k, colocated, placement
        self.n_servers = k
        # across nodes every worker reaches a PS task over gRPC, its node's own included; on
        # one node tf_cnn_benchmarks keeps the variables in the workers' process, unless the
        # job runs PS tasks of its own (``ps_tasks``: distributed_replicated on one machine)
        rpc = cluster.n_nodes > 1 or ps_tasks
        self.server_rpc_Bps = GRPC_TASK_Bps if rpc else math.inf
        self.shards = place(tensor_bytes, k, placement_rule)
        self.shard_bytes = totals(tensor_bytes, self.shards, k)

    def n_channels(self) -> int:
        """One channel per shard."""
        return self.n_ps

    def channel_of(self, op_index: int) -> int:
        """Shard of the ``op_index``-th variable under the placement rule; without tensor
        sizes, round-robin (what the least-loaded rule does with equal sizes)."""
        if op_index < len(self.shards):
            return self.shards[op_index]
        return op_index % self.n_ps

    def ps_node(self, j: int) -> int:
        """Node hosting co-located shard ``j``."""
        return j % self.cluster.n_nodes

    def ps_gpu(self, j: int) -> int:
        """GPU rank holding shard ``j``'s variables with ``placement="gpu"``."""
        g = self.cluster.local_gpus
        return self.ps_node(j) * g + (j // self.cluster.n_nodes) % g

    # -- closed form ---------------------------------------------------------------------
    def stage_s(self, nbytes: float, per_node: int) -> float:
        """Longest transfer (s) of ``nbytes`` between a shard and ``per_node`` workers on
        every node (push or pull: the shares are symmetric)."""
        c, f = self.cluster, self.fabric
        workers = per_node * c.n_nodes
        remote = workers - (per_node if self.colocated else 0)
        sw = min(f.switch_gpus, per_node)
        rpc = (self.server_rpc_Bps, workers)  # the PS task's gRPC, shared by all its workers
        times = []
        if remote:
            lat = f.host_latency_s + f.nic_latency_s
            shares = [(f.host_Bps, sw), (f.nic_Bps, per_node), (f.nic_Bps, remote), rpc]
            if self.placement == "gpu":
                lat += f.host_latency_s
                shares.append((f.host_Bps, remote))
            times.append(lat + nbytes / share_Bps(*shares))
        if self.colocated and self.placement == "cpu":
            times.append(f.host_latency_s + nbytes / share_Bps((f.host_Bps, sw), rpc))
        elif self.colocated and per_node > 1:
            local = share_Bps((f.intra_Bps, per_node - 1), rpc)
            times.append(f.intra_latency_s + nbytes / local)
        return max(times, default=0.0)

    def reduce_s(self, nbytes: float, per_node: int) -> float:
        """The shard summing one contribution per worker (s)."""
        rate = self.cluster.device.mem_bandwidth_Bps if self.placement == "gpu" else None
        workers = per_node * self.cluster.n_nodes
        return workers * nbytes / (rate or self.cluster.host_reduce_Bps)

    def hottest_shard_s(self) -> float:
        """The push of the most loaded shard (s): every worker sends it its slice and the task
        sums them -- ``max(shard_bytes)`` through :meth:`stage_s` and :meth:`reduce_s`. No
        iteration is shorter: every byte of that shard reaches its one task each step, through
        one gRPC server and one NIC (the pull, the same bytes the other way, comes on top
        wherever it cannot overlap other shards' pushes)."""
        b = max(self.shard_bytes, default=0)
        g = self.cluster.local_gpus
        return self.stage_s(b, g) + self.reduce_s(b, g) if b else 0.0

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        g = self.cluster.local_gpus
        push = self.reduce_s(nbytes, g) if op == "push" else 0.0
        return self.stage_s(nbytes, g) + push

    # -- schedule ------------------------------------------------------------------------
    def transfer(self, j: int, workers: np.ndarray, nbytes: float, push: bool) -> Step:
        """Flows between shard ``j`` and ``workers``: to the shard (summed there) for a push,
        from it for a pull."""
        f = self.fabric
        w = np.asarray(workers, np.int64)
        remote = f.node(w) != self.ps_node(j) if self.colocated else np.ones(w.size, bool)
        gpu = self.placement == "gpu"
        p = self.ps_gpu(j)
        wr, wl = w[remote], w[~remote]
        up, down = ("out", "in") if push else ("in", "out")  # worker side, PS side
        if self.colocated:
            ps_nic = f.res(f"nic_{down}", self.ps_node(j))
        else:
            ps_nic = f.res(f"srv_nic_{down}", j)
        res_r = [
            f.res("pcie_up" if push else "pcie_down", f.switch(wr)),
            f.res(f"nic_{up}", f.node(wr)),
            np.full(wr.size, ps_nic),
        ]
        lat_r = f.host_latency_s + f.nic_latency_s
        if gpu:
            res_r.append(np.full(wr.size, f.res("pcie_down" if push else "pcie_up", f.switch(p))))
            lat_r += f.host_latency_s
        if not gpu:
            res_l = [f.res("pcie_up" if push else "pcie_down", f.switch(wl))]
            lat_l = np.full(wl.size, f.host_latency_s)
        else:
            own = wl == p
            out_l = np.where(own, -1, f.res("gpu_out", wl if push else p))
            in_l = np.where(own, -1, f.res("gpu_in", p if push else wl))
            res_l, lat_l = [out_l, in_l], np.where(own, 0.0, f.intra_latency_s)
        if gpu:
            reducer = f.res("gpu_red", p)
        else:
            reducer = f.res("cpu", self.ps_node(j)) if self.colocated else f.res("srv_cpu", j)
        server = f.server(j)
        red = reducer if push else -1
        rpc = f.res("srv_rpc_in" if push else "srv_rpc_out", j)
        parts = []
        for ws, res, lat in ((wr, res_r, lat_r), (wl, res_l, lat_l)):
            if ws.size:
                res = [*res, np.full(ws.size, rpc)]
                src, dst = (ws, server) if push else (server, ws)
                parts.append(flows(src, dst, nbytes, res, lat, red))
        return step(*parts)

    def notify(self, j: int, ranks: np.ndarray) -> Step:
        """Zero-byte completion notice from shard ``j`` to ``ranks``."""
        return step(flows(self.fabric.server(j), ranks, 0.0))

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        ranks = np.arange(self.cluster.n_gpus)
        if op == "pull":
            return [self.transfer(channel, ranks, nbytes, push=False)]
        return [self.transfer(channel, ranks, nbytes, push=True), self.notify(channel, ranks)]
