"""TensorFlow ``variable_update=replicated`` (tf_cnn_benchmarks), single node only.

Every GPU holds a copy of the variables and the gradients are all-reduced inside the node:

- ``replicated-nccl`` (``all_reduce_spec=nccl``): TensorFlow 1.x's own NCCL ops
  (``tf.contrib.nccl``, NCCL 1.x bundled with TensorFlow): a ring allreduce over the node's
  GPUs with NCCL 1's only protocol, SIMPLE (no LL), costed as NCCL's ring
  (:class:`~ddlsim.comm.nccl_allreduce.NcclAllreduceModel` with rings only). NCCL 1 searches
  no topology: its one ring visits the GPUs in the order the framework lists them (0, 1, ...,
  N-1, back to 0). On a hybrid cube-mesh (DGX-1) the hops 3 -> 4 and 7 -> 0 have no NVLink
  and cross the CPU sockets, so without peer access they are staged through host memory, and
  the ring runs at that hop's rate (:func:`device_order_ring_Bps`);
- ``replicated-cpu`` (no NCCL, ``local_parameter_device=cpu``): every GPU sends S to the host
  over PCIe (the m GPUs of a switch share its uplink), the CPU sums the N copies at
  R = ``host_reduce_Bps``, and sends S back to every GPU:
  T = 2 (alpha_host + m S / B_host) + N S / R;
  with ``placement="gpu"`` (``local_parameter_device=gpu``) the copies go over the intra fabric
  to GPU 0, whose port the N-1 senders share, and GPU 0 sums them at its memory bandwidth M:
  T = 2 (alpha_intra + (N-1) S / B_intra) + (N-1) S / M.

A multi-node cluster raises :class:`~ddlsim.errors.ConfigError` naming it (use
``distributed-replicated`` or ``ps`` there).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import ScheduledModel, cluster_label
from ddlsim.comm.nccl_allreduce import NcclAllreduceModel
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system.specs import Cluster

PLACEMENTS = ("cpu", "gpu")


def require_single_node(cluster: Cluster, method: str) -> None:
    """Refuse ``method`` on a multi-node cluster."""
    if cluster.n_nodes > 1:
        raise ConfigError(
            f"{method} (variable_update=replicated) runs on a single node, but the cluster is "
            f"{cluster_label(cluster)}; use distributed-replicated or ps"
        )


def device_order_ring_Bps(cluster: Cluster) -> float:
    """Bus bandwidth of a ring through the node's GPUs in device order (bytes/s): the staged
    hop's rate where a hop ``i -> i+1`` (and ``N-1 -> 0``) has no NVLink of its own, else
    infinite (the fabric's figure applies)."""
    peers, g = cluster.nvlink_peers, cluster.local_gpus
    if not peers or g < 2 or cluster.staged is None:
        return math.inf
    if all((i + 1) % g in peers[i] for i in range(g)):
        return math.inf
    return cluster.staged.bandwidth_Bps


class ReplicatedNcclModel(NcclAllreduceModel):
    """``replicated-nccl``: NCCL 1 ring allreduce (SIMPLE) in device order inside the node."""

    name = "replicated-nccl"

    def __init__(self, cluster: Cluster) -> None:
        require_single_node(cluster, self.name)
        super().__init__(cluster, version="2.0", algorithm="ring", protocol="Simple")
        ring_Bps = device_order_ring_Bps(cluster)
        if ring_Bps < self.topology.bus_Bps:
            self.topology = replace(self.topology, bus_Bps=ring_Bps)


class ReplicatedCpuModel(ScheduledModel):
    """``replicated-cpu``: gather to the parameter device, sum, broadcast (see module)."""

    name = "replicated-cpu"

    def __init__(self, cluster: Cluster, placement: str = "cpu") -> None:
        require_single_node(cluster, self.name)
        if placement not in PLACEMENTS:
            raise UnknownNameError("ps placement", placement, PLACEMENTS)
        super().__init__(cluster)
        self.placement = placement

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        c, f = self.cluster, self.fabric
        n = c.n_gpus
        if self.placement == "cpu":
            copy_s = f.host_latency_s + f.switch_gpus * nbytes / f.host_Bps
            return 2 * copy_s + n * nbytes / c.host_reduce_Bps
        copy_s = f.intra_latency_s + (n - 1) * nbytes / f.intra_Bps
        return 2 * copy_s + (n - 1) * nbytes / c.device.mem_bandwidth_Bps

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        if self.placement == "cpu":
            ranks, host = np.arange(f.n_ranks), f.host(0)
            up = [f.res("pcie_up", f.switch(ranks))]
            down = [f.res("pcie_down", f.switch(ranks))]
            lat, red = f.host_latency_s, f.res("cpu", 0)
            gather = flows(ranks, host, nbytes, up, lat, red)
            return [step(gather), step(flows(host, ranks, nbytes, down, lat))]
        others = np.arange(1, f.n_ranks)
        lat = f.intra_latency_s
        gather_res = [f.res("gpu_out", others), f.res("gpu_in", 0)]
        gather = flows(others, 0, nbytes, gather_res, lat, f.res("gpu_red", 0))
        bcast_res = [f.res("gpu_out", 0), f.res("gpu_in", others)]
        return [step(gather), step(flows(0, others, nbytes, bcast_res, lat))]
