"""Horovod allreduce over MPI on the CPU (``horovod-mpi``: Horovod built without NCCL).

Each of the N ranks copies its S-byte fusion buffer device->host, the N MPI processes run a
ring allreduce on host memory, and each copies the result host->device:

1. D2H: every GPU sends S over PCIe; the m GPUs under one switch share its uplink:
   alpha_host + m S / B_host;
2. ring reduce-scatter, N-1 steps of S/N: a hop inside a node is a shared-memory copy through
   the node's host memory (``host_reduce_Bps``, shared by the k hops of the node: k = g-1 with
   several nodes, g on one), a hop between nodes crosses the NICs; the receiver then sums the
   chunk on the CPU, whose ``host_reduce_Bps`` the node's g receiving ranks share:
   step = max(alpha_shm + k (S/N) / R, alpha_nic + (S/N) / B_nic) + g (S/N) / R;
3. ring allgather, N-1 steps without the summation;
4. H2D, as 1 in the other direction.

::

    T_mpi = 2 (alpha_host + m S / B_host) + 2 (N-1) hop(S/N) + (N-1) g (S/N) / R

Per-step flows are uniform within each hop kind, so the executor reproduces this exactly when
every switch holds m GPUs (m divides g), and stays within a few per cent otherwise.
"""

from __future__ import annotations

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import SHM_LATENCY_S, ScheduledModel
from ddlsim.comm.ring import nic_hop_s, ring_flows


class MPIModel(ScheduledModel):
    """Horovod + MPI on host memory: copies, CPU ring allreduce, copies back (see module)."""

    name = "horovod-mpi"

    def _copy_s(self, nbytes: float) -> float:
        """Device<->host copy of ``nbytes`` by every GPU, a switch's GPUs sharing its link."""
        host = self.cluster.host
        return host.latency_s + self.fabric.switch_gpus * nbytes / host.bandwidth_Bps

    def _hop_s(self, chunk_bytes: float) -> float:
        """Slowest host-ring hop of ``chunk_bytes`` (shared memory or NIC), s."""
        c = self.cluster
        g, hops = c.local_gpus, []
        if g > 1:
            shm_hops = g - 1 if c.n_nodes > 1 else g
            hops.append(SHM_LATENCY_S + shm_hops * chunk_bytes / c.host_reduce_Bps)
        if c.n_nodes > 1:
            hops.append(nic_hop_s(c, chunk_bytes))
        return max(hops)

    def host_ring_s(self, nbytes: float) -> float:
        """The host ring alone (no device copies): ``2 (N-1) hop(S/N) + (N-1) g (S/N) / R``,
        what an MPI benchmark on host buffers (OSU ``osu_allreduce``) times."""
        c = self.cluster
        n, chunk = c.n_gpus, nbytes / c.n_gpus
        reduce_s = c.local_gpus * chunk / c.host_reduce_Bps
        return 2 * (n - 1) * self._hop_s(chunk) + (n - 1) * reduce_s

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        return 2 * self._copy_s(nbytes) + self.host_ring_s(nbytes)

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        ranks = np.arange(f.n_ranks)
        chunk = nbytes / f.n_ranks
        d2h = flows(ranks, ranks, nbytes, [f.res("pcie_up", f.switch(ranks))], f.host_latency_s)
        h2d = flows(ranks, ranks, nbytes, [f.res("pcie_down", f.switch(ranks))], f.host_latency_s)
        ring = ranks[None, :]
        return [
            step(d2h),
            step(ring_flows(f, ring, chunk, host=True, reduce=True), repeat=f.n_ranks - 1),
            step(ring_flows(f, ring, chunk, host=True), repeat=f.n_ranks - 1),
            step(h2d),
        ]
