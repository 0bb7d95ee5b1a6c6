"""tf_cnn_benchmarks ``variable_update=distributed_replicated``.

Each worker node keeps local copies of the variables on its g GPUs; the global copy lives on k
co-located parameter-server shards (variables placed round-robin, as for ``ps``). Per shard
slice of b bytes:

``push``: the node's GPUs all-reduce b over the intra fabric (ring, 2(g-1) steps of b/g), then
the node's first GPU (its *lead*) pushes the node's sum to the shard -- one flow per node
instead of g -- where the CPU sums the n contributions; then a zero-byte notice::

    T_push = 2 (g-1) (alpha_intra + b / (g B_intra)) + t_ps(b, 1 worker per node) + n b / R

``pull``: the shard sends b to every lead, which broadcasts it to the node's g-1 other GPUs
over the intra fabric, its port shared by the g-1 copies::

    T_pull = t_ps(b, 1 worker per node) + alpha_intra + (g-1) b / B_intra

t_ps is :meth:`ddlsim.comm.ps.PSModel.stage_s` (PCIe + NIC path, worker and server sides, and
the PS task's gRPC: the job runs PS tasks, so a one-machine job's worker reaches its PS task
over gRPC on loopback too),
with the PS flows built by :meth:`ddlsim.comm.ps.PSModel.transfer` for the leads only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import ScheduledModel
from ddlsim.comm.placement import rule_for
from ddlsim.comm.ps import PSModel
from ddlsim.comm.ring import intra_ring_s, intra_rings, ring_flows
from ddlsim.system.specs import Cluster


class DistributedReplicatedModel(ScheduledModel):
    """Local allreduce, per-node push/pull to co-located PS shards, local broadcast."""

    name = "distributed-replicated"
    ops = ("push", "pull")

    def __init__(
        self, cluster: Cluster, n_ps: int | None = None, tensor_bytes: Sequence[int] = ()
    ) -> None:
        super().__init__(cluster)
        self.ps = PSModel(
            cluster,
            n_ps,
            colocated=True,
            placement="cpu",
            tensor_bytes=tensor_bytes,
            placement_rule=rule_for(self.name),
            ps_tasks=True,  # a PS task per machine, the worker's gRPC peer even on one machine
        )
        self.n_ps, self.shard_bytes = self.ps.n_ps, self.ps.shard_bytes
        self.n_servers, self.server_rpc_Bps = self.ps.n_servers, self.ps.server_rpc_Bps

    def n_channels(self) -> int:
        """One channel per shard."""
        return self.ps.n_channels()

    def channel_of(self, op_index: int) -> int:
        """Shard of the ``op_index``-th variable (round-robin)."""
        return self.ps.channel_of(op_index)

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        c = self.cluster
        g = c.local_gpus
        remote = self.ps.stage_s(nbytes, per_node=1)
        if op == "push":
            return 2 * intra_ring_s(c, nbytes) + remote + self.ps.reduce_s(nbytes, per_node=1)
        bcast = c.intra.latency_s + (g - 1) * nbytes / c.intra.bandwidth_Bps if g > 1 else 0.0
        return remote + bcast

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        g, ranks = f.g, np.arange(f.n_ranks)
        local = intra_rings(f)
        leads, others = local[:, 0], local[:, 1:]
        if op == "push":
            steps = [step(ring_flows(f, local, nbytes / g), repeat=2 * (g - 1))] if g > 1 else []
            return [
                *steps,
                self.ps.transfer(channel, leads, nbytes, push=True),
                self.ps.notify(channel, ranks),
            ]
        steps = [self.ps.transfer(channel, leads, nbytes, push=False)]
        if g > 1:
            src = np.broadcast_to(leads[:, None], others.shape)
            res = [f.res("gpu_out", src), f.res("gpu_in", others)]
            steps.append(step(flows(src, others, nbytes, res, f.intra_latency_s)))
        return steps
