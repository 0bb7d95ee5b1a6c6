"""The collectives of sharded data parallelism (PyTorch FSDP, DeepSpeed ZeRO) through NCCL.

A sharded method moves parameters and gradients with three NCCL calls, each costed by
NCCL's own model (:mod:`ddlsim.comm.nccl`) for the configured release:

- ``allgather`` of ``S`` bytes (the whole gathered buffer, as nccl-tests sizes it: N shards of
  S/N): a ring of N-1 steps of S/N (:func:`~ddlsim.comm.nccl.choose_half_ring`), bus
  bandwidth ``algbw x (N-1)/N``, or NVLS on one node of an NVLink SHARP switch (2.19+);
- ``reducescatter`` of ``S`` bytes (the whole buffer before the reduction): the same ring;
- ``allreduce`` (``NO_SHARD``, and the replicas' exchange of ``HYBRID_SHARD``).

``HYBRID_SHARD`` shards inside a node and replicates across nodes (FSDP's
``ShardingStrategy.HYBRID_SHARD``): the gathers and scatters run inside the node
(``allgather-node``, ``reducescatter-node``: a one-node topology on the intra-node fabric) and
each rank all-reduces its 1/g shard of the gradients with the ranks holding the same shard on
the other nodes (``allreduce-replicas``: a ring of n ranks, one per node; the g local rings
share the node's NICs, so each sees 1/g of them).

With CPU offload (:mod:`ddlsim.execution.offload`) the method also copies shards between a GPU
and its host: ``h2d`` / ``d2h`` of ``S`` bytes per GPU, a DMA over the host link at
``latency + S / (host bandwidth / GPUs behind the PCIe switch)`` (the switch's GPUs copy at the
same time); the detailed engine runs them as flows over the switches' ``pcie_down`` /
``pcie_up``, which share them the same way.

The detailed engine executes the same choice over the cluster's links: a ring step of N flows
repeated N-1 times, rescaled so that it takes NCCL's time when every rank starts together
(:func:`~ddlsim.comm.fabric.timed_step`); the hybrid calls run as the flat ones.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ddlsim.comm.executor import Schedule, Step
from ddlsim.comm.fabric import timed_step
from ddlsim.comm.nccl import Choice, Topology, choose_half_ring
from ddlsim.comm.nccl import choose as nccl_choose
from ddlsim.comm.nccl_allreduce import NcclAllreduceModel
from ddlsim.comm.ring import ring_flows
from ddlsim.errors import ConfigError
from ddlsim.execution.offload import copy_Bps
from ddlsim.system.catalog import host_link

#: the calls a sharded method makes, and the nccl-tests collective each one is
SHARDED_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "allgather-node": "all_gather",
    "reducescatter-node": "reduce_scatter",
    "allreduce-replicas": "all_reduce",
}
#: CPU offload's copies: host-to-device, device-to-host, from or to pinned host memory, or
#: pageable memory (staged by the driver through a pinned buffer); DMA, not NCCL: no SMs held
COPY_OPS = ("h2d", "d2h", "h2d-pageable", "d2h-pageable")


def node_topology(topo: Topology) -> Topology:
    """One node of ``topo``: its g GPUs on the intra-node fabric, no network."""
    return replace(
        topo,
        n_ranks=topo.local,
        n_nodes=1,
        bus_Bps=topo.intra_Bps,
        transport_latency_s=0.0,
        net_Bps=math.inf,
    )


def replica_topology(topo: Topology) -> Topology:
    """The ranks that hold one shard, one per node: a ring across the n nodes whose g
    concurrent rings (one per local rank) share each node's NICs."""
    per_ring_Bps = topo.net_Bps / topo.local
    return replace(
        topo,
        n_ranks=topo.n_nodes,
        local=1,
        bus_Bps=per_ring_Bps,
        net_Bps=per_ring_Bps,
        intra_Bps=math.inf,
    )


class ShardedModel(NcclAllreduceModel):
    """NCCL's all-gather, reduce-scatter and all-reduce for FSDP / ZeRO (see module)."""

    name = "fsdp"
    ops = (*SHARDED_OPS, *COPY_OPS)

    def copy_Bps(self, op: str = "h2d") -> float:
        """The bandwidth one GPU's copy ``op`` to or from its host gets (:func:`copy_Bps`):
        the host link's pinned rate, or its pageable one (the link catalog's ``tcp``
        efficiency: pageable memory staged by the driver)."""
        c = self.cluster
        link_Bps = c.host.bandwidth_Bps
        if op.endswith("-pageable"):
            link_Bps = host_link(c.device.host_link).bandwidth_Bps("tcp")
        return copy_Bps(link_Bps, c.gpus_per_pcie_switch)

    def time_s(self, nbytes: float, op: str = "allreduce", channel: int = 0) -> float:
        """As :meth:`ScheduledModel.time_s`; a copy costs its DMA on one GPU too."""
        if op in COPY_OPS and nbytes > 0:
            self._check(op, channel)
            return self.cluster.host.latency_s + nbytes / self.copy_Bps(op)
        return super().time_s(nbytes, op, channel)

    def schedule(self, nbytes: float, op: str = "allreduce", channel: int = 0) -> Schedule:
        """As :meth:`ScheduledModel.schedule`; a copy is scheduled on one GPU too."""
        if op in COPY_OPS and nbytes > 0 and self.cluster.n_gpus == 1:
            self._check(op, channel)
            return self.fabric.schedule(self._schedule(float(nbytes), op, channel))
        return super().schedule(nbytes, op, channel)

    def call_choice(self, op: str, nbytes: float) -> Choice:
        """The (algorithm, protocol) and time of one ``op`` of ``nbytes``."""
        topo = self.topology
        if op in ("allreduce", "allgather", "reducescatter"):  # one flat NCCL call
            return self.collective_choice(SHARDED_OPS[op], nbytes)
        if topo.n_nodes < 2 or topo.local < 2:
            raise ConfigError(
                f"{op} is HYBRID_SHARD's: it needs several nodes of several GPUs, not "
                f"{topo.n_nodes} node(s) of {topo.local}"
            )
        if op == "allreduce-replicas":
            return nccl_choose(replica_topology(topo), self.version, float(nbytes), "auto",
                               self.protocol)  # fmt: skip
        return choose_half_ring(
            node_topology(topo), self.version, float(nbytes), self.protocol, self.algorithm
        )

    def label(self, nbytes: float, op: str = "allreduce") -> dict[str, str]:
        """``{"algorithm", "protocol"}`` of one ``op`` (empty for a copy, one GPU or no bytes)."""
        if nbytes <= 0 or self.cluster.n_gpus == 1 or op in COPY_OPS:
            return {}
        return self.call_choice(op, nbytes).label()

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        return self.call_choice(op, nbytes).time_s

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        if op in COPY_OPS:  # bytes scaled so that the pinned link takes the op's time
            scaled = nbytes * self.fabric.host_Bps / (self.copy_Bps(op) * self.fabric.switch_gpus)
            return [self.fabric.copies(scaled, to_host=op.startswith("d2h"))]
        if op == "allreduce":
            return super()._schedule(nbytes, op, channel)
        f = self.fabric
        ch = self.call_choice(op, nbytes)
        ranks = np.arange(f.n_ranks)
        if op.endswith("-node"):  # g rings, one per node
            rings, repeat = ranks.reshape(f.n_nodes, f.g), f.g - 1
        elif op == "allreduce-replicas":  # g rings, one per local rank, across the nodes
            rings, repeat = ranks.reshape(f.n_nodes, f.g).T, 2 * (f.n_nodes - 1)
        else:
            rings, repeat = ranks[None, :], f.n_ranks - 1
        unit = ring_flows(f, rings, 1.0)
        return [timed_step(f, unit, repeat, ch.bandwidth_s, ch.latency_s)]
