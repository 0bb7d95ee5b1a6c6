"""Horovod allreduce over Gloo (``horovod-gloo``: Horovod's CPU operations with Gloo).

Horovod 0.28.1's ``GlooAllreduce`` (``horovod/common/ops/gloo_operations.cc``) runs Gloo's ring
(``gloo/allreduce.cc``) on host memory: a reduce-scatter of N-1 steps in which every rank sends
one S/N share to its successor over a TCP pair and sums the share it receives into its buffer
on its own CPU, then an allgather of N-1 steps without the sum. Gloo pipelines 1 MiB segments
of a share, but a step still moves and sums the whole share. Between the ranks of one host a
pair is a TCP connection over the loopback interface, so the intra-node hop is the
``loopback`` link (a cluster with another intra-node fabric is refused: NVLink or PCIe peer
access are not what Gloo uses); between hosts it is the NIC.

Where the summation runs and what is copied depends on the worker:

- a CPU worker (device ``kind`` cpu: a core trains, its tensors are in host memory) sums on its
  own core at R = memory bandwidth / 3 (two operands read, one written) and copies nothing;
- a GPU worker copies its fusion buffer device->host and back, as ``horovod-mpi`` does, and the
  ranks of a node sum on the node's CPU (``host_reduce_Bps``, shared by its g receiving ranks).

::

    T_gloo = 2 copy(S) + 2 (N-1) hop(S/N) + (N-1) (S/N) / R_rank

with hop = the slowest of the ring's hops (loopback inside a node, NIC between nodes),
R_rank = R for a CPU worker and ``host_reduce_Bps`` / g for a GPU worker. The event-level
schedule is the same ring with the sum charged to a reducer at each destination.
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import SUM_STREAMS, ScheduledModel, cluster_label
from ddlsim.comm.ring import ring_hop_s
from ddlsim.errors import ConfigError
from ddlsim.system.specs import Cluster

#: the intra-node link of Gloo's TCP pairs between the ranks of one host
LOOPBACK = "loopback"


def is_cpu_worker(cluster: Cluster) -> bool:
    """Whether the workers are CPU cores (their tensors already in host memory)."""
    return cluster.device.kind == "cpu"


class GlooModel(ScheduledModel):
    """Horovod + Gloo: ring over TCP with the sum on the CPU (see module docstring)."""

    name = "horovod-gloo"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        if cluster.local_gpus > 1 and cluster.intra_link != LOOPBACK:
            raise ConfigError(
                f"horovod-gloo: Gloo's ranks on one node talk over TCP loopback, but cluster "
                f"{cluster_label(cluster)} has intra-node link {cluster.intra_link!r}; "
                f"use --intra-node {LOOPBACK}"
            )
        self.cpu_worker = is_cpu_worker(cluster)

    def rank_reduce_Bps(self) -> float:
        """Bytes of received share one rank sums per second."""
        c = self.cluster
        if self.cpu_worker:
            return c.device.mem_bandwidth_Bps / SUM_STREAMS
        return c.host_reduce_Bps / c.local_gpus

    def _copy_s(self, nbytes: float) -> float:
        """Device<->host copy of the fusion buffer (GPU workers; a switch's GPUs share it)."""
        if self.cpu_worker:
            return 0.0
        host = self.cluster.host
        return host.latency_s + self.fabric.switch_gpus * nbytes / host.bandwidth_Bps

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        n = self.cluster.n_gpus
        chunk = nbytes / n
        ring = 2 * (n - 1) * ring_hop_s(self.cluster, chunk)
        return 2 * self._copy_s(nbytes) + ring + (n - 1) * chunk / self.rank_reduce_Bps()

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        ranks = np.arange(f.n_ranks)
        succ = np.roll(ranks, -1)
        chunk = nbytes / f.n_ranks
        res, lat = f.gpu_path(ranks, succ)
        reducer = f.res("rank_cpu", succ) if self.cpu_worker else f.res("cpu", f.node(succ))
        ring = [
            step(flows(ranks, succ, chunk, res, lat, reducer), repeat=f.n_ranks - 1),
            step(flows(ranks, succ, chunk, res, lat), repeat=f.n_ranks - 1),
        ]
        if self.cpu_worker:
            return ring
        d2h, h2d = f.copies(nbytes, to_host=True), f.copies(nbytes, to_host=False)
        return [step(d2h), *ring, step(h2d)]
