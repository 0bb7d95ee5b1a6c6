"""Horovod's hierarchical allreduce (``HOROVOD_HIERARCHICAL_ALLREDUCE=1``) over NCCL.

Three NCCL calls on a cluster of n nodes with g GPUs each (S bytes per GPU):

1. ``ncclReduceScatter`` inside every node: a ring over the g local GPUs, g-1 steps of S/g;
2. ``ncclAllReduce`` of each GPU's S/g shard across nodes: local rank l of every node is in a
   communicator of n ranks, one per node (g communicators at once), whose traffic shares the
   node's NICs: NCCL's allreduce (ring or tree, as the version picks) with bus bandwidth
   ``nics_per_node x B_nic / g``;
3. ``ncclAllGather`` inside every node, g-1 steps of S/g.

Each phase is costed by NCCL's model (:mod:`ddlsim.comm.nccl`): T_hier = T_rs + T_cross + T_ag.
This models the all-NCCL build (Horovod 0.28 can also run phase 2 with MPI on host memory).
The latency-bound gain over a flat ring on fat nodes: the cross-node call has n ranks, not N.
The schedule runs the three phases as steps of flows over the links, each rescaled to its
phase's NCCL time (:func:`~ddlsim.comm.fabric.timed_step`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ddlsim.comm.executor import Step
from ddlsim.comm.fabric import ScheduledModel, timed_step
from ddlsim.comm.nccl import (
    DEFAULT_NCCL_VERSION,
    Choice,
    NcclVersion,
    Topology,
    choose,
    choose_half_ring,
)
from ddlsim.comm.ring import intra_rings, ring_flows
from ddlsim.comm.tree import pipeline_depth, tick_flows
from ddlsim.system.specs import Cluster


class HierarchicalModel(ScheduledModel):
    """Reduce-scatter in node, g cross-node NCCL allreduces, allgather in node (see module)."""

    name = "horovod-nccl"

    def __init__(
        self, cluster: Cluster, *, version: str | NcclVersion = DEFAULT_NCCL_VERSION
    ) -> None:
        super().__init__(cluster)
        self.version = NcclVersion.parse(version)
        c = cluster
        g, n = c.local_gpus, c.n_nodes
        topo = Topology.of(c, self.version)
        intra_Bps = c.intra.bandwidth_Bps if c.intra is not None else topo.bus_Bps
        nic_Bps = topo.net_Bps / g if c.nic is not None else topo.bus_Bps
        #: the intra-node calls: one node of g ranks; the cross-node call: n ranks, one per
        #: node, whose g communicators share each node's NICs
        self.local = replace(
            topo, n_ranks=g, n_nodes=1, transport_latency_s=0.0, bus_Bps=intra_Bps,
            net_Bps=math.inf, intra_Bps=intra_Bps,
        )  # fmt: skip
        self.cross = replace(
            topo, n_ranks=n, local=1, bus_Bps=nic_Bps, net_Bps=nic_Bps, intra_Bps=math.inf
        )

    def phases(self, nbytes: float) -> tuple[Choice | None, Choice | None]:
        """(intra reduce-scatter = allgather, cross-node allreduce); None where absent."""
        c = self.cluster
        g, n = c.local_gpus, c.n_nodes
        half = choose_half_ring(self.local, self.version, float(nbytes)) if g > 1 else None
        cross = choose(self.cross, self.version, float(nbytes) / g) if n > 1 else None
        return half, cross

    def sm_blocks(self) -> int:
        """One NCCL thread block (an SM) per channel while a call runs."""
        return self.local.channels

    def label(self, nbytes: float, op: str = "allreduce") -> dict[str, str]:
        """``hierarchical`` and the cross-node call's algorithm and protocol."""
        if nbytes <= 0 or self.cluster.n_gpus == 1:
            return {}
        half, cross = self.phases(nbytes)
        main = cross or half
        assert main is not None
        return {
            "algorithm": f"hierarchical ({main.algorithm} across nodes)"
            if cross
            else "hierarchical (one node)",
            "protocol": main.protocol,
        }

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        half, cross = self.phases(nbytes)
        return 2 * (half.time_s if half else 0.0) + (cross.time_s if cross else 0.0)

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        g, n = f.g, f.n_nodes
        half, cross = self.phases(nbytes)
        steps: list[Step] = []
        local = None
        if half is not None:
            unit = ring_flows(f, intra_rings(f), 1.0)
            local = timed_step(f, unit, g - 1, half.bandwidth_s, half.latency_s)
            steps.append(local)
        if cross is not None:
            if cross.algorithm == "ring":
                rings = np.arange(f.n_ranks).reshape(n, g).T  # local rank l's ring over nodes
                unit, repeat = ring_flows(f, rings, 1.0), 2 * (n - 1)
            else:
                unit, repeat = tick_flows(f, 1.0), pipeline_depth(1, n)
            steps.append(timed_step(f, unit, repeat, cross.bandwidth_s, cross.latency_s))
        if local is not None:
            steps.append(local)
        return steps
