"""Horovod's hierarchical allreduce (``HOROVOD_HIERARCHICAL_ALLREDUCE=1``) over NCCL.

Three phases on a cluster of n nodes with g GPUs each (S bytes per GPU):

1. reduce-scatter inside every node: a ring over the g local GPUs, g-1 steps of S/g;
2. cross-node allreduce of each GPU's S/g shard: local rank l of every node forms a ring over
   the n nodes (g rings at once), 2(n-1) steps of S/(g n). The g rings of a node share its
   NIC, so each flow gets B_nic/g and a step moves S/(g n) in alpha_nic + S/(n B_nic);
3. allgather inside every node, g-1 steps of S/g.

::

    T_hier = 2 (g-1) (alpha_intra + S / (g B_intra)) + 2 (n-1) (alpha_nic + S / (n B_nic))

with B_nic = ``nics_per_node`` x NIC bandwidth. Every flow of a phase has the same duration, so
the executor reproduces the formula exactly. Horovod 0.28 can run phase 2 with MPI on host
memory after a device-to-host copy (``HOROVOD_GPU_ALLREDUCE=NCCL`` with an MPI-built
cross-node path); this models the all-NCCL build, where phase 2 is an ``ncclAllReduce`` over
the cross-node communicator. The latency-bound gain over a flat ring: a flat ring pays the NIC
latency on all 2(N-1) steps, this pays it on 2(n-1).
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step, step
from ddlsim.comm.fabric import ScheduledModel
from ddlsim.comm.ring import intra_ring_s, intra_rings, nic_hop_s, ring_flows


class HierarchicalModel(ScheduledModel):
    """Reduce-scatter in node, g parallel cross-node rings, allgather in node (see module)."""

    name = "horovod-nccl"

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        c = self.cluster
        g, n = c.local_gpus, c.n_nodes
        cross = 2 * (n - 1) * nic_hop_s(c, nbytes / (g * n), flows=g) if n > 1 else 0.0
        return 2 * intra_ring_s(c, nbytes) + cross

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        g, n = f.g, f.n_nodes
        steps: list[Step] = []
        local = step(ring_flows(f, intra_rings(f), nbytes / g), repeat=g - 1) if g > 1 else None
        if local is not None:
            steps.append(local)
        if n > 1:
            cross_rings = np.arange(f.n_ranks).reshape(n, g).T  # local rank l's ring over nodes
            steps.append(step(ring_flows(f, cross_rings, nbytes / (g * n)), repeat=2 * (n - 1)))
        if local is not None:
            steps.append(local)
        return steps
