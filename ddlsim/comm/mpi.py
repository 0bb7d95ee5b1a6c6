"""Horovod allreduce over MPI on the CPU (``horovod-mpi``: Horovod built without NCCL).

Each of the N ranks copies its S-byte fusion buffer device->host, the N MPI processes run a
ring allreduce on host memory, and each copies the result host->device (Horovod's
``MPIAllreduce``: ``MPI_Allreduce`` in place on the host fusion buffer; Open MPI's
``coll/tuned`` runs a (segmented) ring for large commutative reductions). The host work of a
rank is done by ONE thread, its MPI progress thread, so its rate is one core's, the same for
every process of a node and the same inside a node (shared memory) and across the network:

1. D2H: every GPU sends S over PCIe; the m GPUs under one switch share its uplink:
   alpha_host + m S / B_host;
2. ring reduce-scatter, N-1 steps of c = S/N: each process moves its chunk at its thread's
   transfer rate X (a shared-memory hop), or across nodes at min(X, the node's NICs, one TCP
   flow's cap: Open MPI opens one connection per peer), then sums it at its thread's rate R:
   step = max(alpha_shm + c / X, alpha_nic + c / min(X, B_nic, cap)) + c / R;
3. ring allgather, N-1 steps without the summation;
4. H2D, as 1 in the other direction.

::

    T_mpi = 2 (alpha_host + m S / B_host) + 2 (N-1) hop(S/N) + (N-1) (S/N) / R

X and R are one core's memcpy rate (the host's CPU generation, :mod:`ddlsim.system.hosts`)
times measured ratios (:data:`XFER_PER_COPY`, :data:`SUM_PER_COPY`); which summation loop
runs is the MPI release's (:class:`MpiRelease`): Open MPI vectorises MPI_SUM from 4.1
(``ompi/mca/op/avx``), earlier releases run the plain C loops of ``ompi/mca/op/base``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ddlsim.comm.executor import Step, flows, step
from ddlsim.comm.fabric import SHM_LATENCY_S, ScheduledModel
from ddlsim.errors import ConfigError
from ddlsim.system.hosts import HostCPU, default_host_cpu
from ddlsim.system.specs import Cluster

#: the MPI predict assumes: Open MPI 4.1 (Debian 12's 4.1.4, Horovod 0.28's era)
DEFAULT_MPI = "openmpi-4.1"
#: MPI implementations ddlsim knows, and whether their MPI_SUM on floats is vectorised
MPI_IMPLEMENTATIONS = ("openmpi", "intel-mpi", "mvapich2")
#: one MPI process's ring transfer rate (bytes of chunk moved per second by its progress
#: thread: copy-in / copy-out through shared-memory fragments, or the socket copies) per byte
#: of its core's memcpy rate. Measured: bash scripts/measure_mpi_allreduce.sh
#: (traces/mpi/allreduce.json, Open MPI 4.1.4, 2 ranks over vader on this machine's 2 cores):
#: a 2-rank ring takes S / X + S / (2 R), so X = 1 / (1 / algbw - 1 / (2 R)); the median of
#: the 5 AVX runs, 2.3 GB/s against the 11.6 GB/s memcpy of the same core
XFER_PER_COPY = 0.20
#: one core's MPI_SUM (bytes of input per second) per byte of its memcpy rate, vectorised
#: (Open MPI >= 4.1's AVX op component: 11.15 GB/s median) and plain loops (``--mca op ^avx``,
#: the code of earlier releases: 6.5 GB/s); same measurement
SUM_PER_COPY = {"vector": 0.96, "scalar": 0.56}


@dataclass(frozen=True)
class MpiRelease:
    """An MPI implementation and release, e.g. ``openmpi-3.0``, ``openmpi-4.1.4``,
    ``intel-mpi-2019``, ``mvapich2-2.3``."""

    implementation: str
    version: tuple[int, ...]

    @classmethod
    def parse(cls, text: object) -> MpiRelease:
        """``openmpi-4.1`` (a space or no separator also works, any case); ConfigError naming
        the bad value otherwise."""
        if isinstance(text, MpiRelease):
            return text
        word = str(text).strip().lower().replace("open mpi", "openmpi").replace("_", "-")
        impl = "|".join(re.escape(i) for i in MPI_IMPLEMENTATIONS)
        match = re.fullmatch(rf"({impl})[\s-]*v?(\d+(?:\.\d+)*)", word)
        if match is None:
            raise ConfigError(
                f"MPI must name an implementation and release ({', '.join(MPI_IMPLEMENTATIONS)}"
                f", e.g. openmpi-4.1), got {text!r}"
            )
        return cls(match[1], tuple(int(p) for p in match[2].split(".")))

    def __str__(self) -> str:
        return f"{self.implementation}-{'.'.join(map(str, self.version))}"

    @property
    def summation(self) -> str:
        """``vector`` or ``scalar``: Open MPI from 4.1 (``ompi/mca/op/avx``) and Intel MPI
        sum with SIMD kernels; earlier Open MPI and MVAPICH2 with plain C loops."""
        if self.implementation == "openmpi":
            return "vector" if self.version[:2] >= (4, 1) else "scalar"
        return "vector" if self.implementation == "intel-mpi" else "scalar"


@dataclass(frozen=True)
class HostRates:
    """One MPI process's progress thread: ``xfer_Bps`` moving a ring chunk, ``sum_Bps``
    summing one (bytes per second)."""

    xfer_Bps: float
    sum_Bps: float

    @classmethod
    def of(cls, cpu: HostCPU, mpi: str | MpiRelease = DEFAULT_MPI) -> HostRates:
        """The rates of one core of ``cpu`` under ``mpi``."""
        loop = MpiRelease.parse(mpi).summation
        return cls(cpu.core_copy_Bps * XFER_PER_COPY, cpu.core_copy_Bps * SUM_PER_COPY[loop])


class MPIModel(ScheduledModel):
    """Horovod + MPI on host memory: copies, CPU ring allreduce, copies back (see module)."""

    name = "horovod-mpi"

    def __init__(
        self, cluster: Cluster, mpi: str | MpiRelease = DEFAULT_MPI, host: HostCPU | None = None
    ) -> None:
        self.mpi = MpiRelease.parse(mpi)
        self.host_cpu = host or default_host_cpu(cluster.device)
        self.rates = HostRates.of(self.host_cpu, self.mpi)
        self.thread_xfer_Bps, self.thread_sum_Bps = self.rates.xfer_Bps, self.rates.sum_Bps
        super().__init__(cluster)

    def _copy_s(self, nbytes: float) -> float:
        """Device<->host copy of ``nbytes`` by every GPU, a switch's GPUs sharing its link."""
        host = self.cluster.host
        return host.latency_s + self.fabric.switch_gpus * nbytes / host.bandwidth_Bps

    def crossing_Bps(self) -> float:
        """Rate of the ring's hop between nodes: the thread, the node's NICs (one crossing per
        direction) and, over TCP, one flow's cap."""
        c = self.cluster
        cap = c.socket_flow_cap_Bps if c.transport == "tcp" else math.inf
        return min(self.rates.xfer_Bps, c.nics_per_node * c.nic.bandwidth_Bps, cap)

    def _hop_s(self, chunk_bytes: float) -> float:
        """Slowest host-ring hop of ``chunk_bytes`` (shared memory or NIC), s."""
        c = self.cluster
        hops = []
        if c.local_gpus > 1:
            hops.append(SHM_LATENCY_S + chunk_bytes / self.rates.xfer_Bps)
        if c.n_nodes > 1:
            hops.append(c.nic.latency_s + chunk_bytes / self.crossing_Bps())
        return max(hops)

    def host_ring_s(self, nbytes: float) -> float:
        """The host ring alone (no device copies): ``2 (N-1) hop(S/N) + (N-1) (S/N) / R``,
        what an MPI benchmark on host buffers (OSU ``osu_allreduce``) times."""
        n, chunk = self.cluster.n_gpus, nbytes / self.cluster.n_gpus
        return 2 * (n - 1) * self._hop_s(chunk) + (n - 1) * chunk / self.rates.sum_Bps

    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        return 2 * self._copy_s(nbytes) + self.host_ring_s(nbytes)

    def _ring(self, chunk: float, reduce: bool) -> Step:
        """One host-ring step: every rank's thread moves ``chunk`` to its successor (shared
        memory inside a node, the NICs and one socket between nodes), summing it there."""
        f = self.fabric
        src = np.arange(f.n_ranks)
        dst = np.roll(src, -1)
        same = f.node(src) == f.node(dst)
        nic_out = np.where(same, -1, f.res("nic_out", f.node(src)))
        nic_in = np.where(same, -1, f.res("nic_in", f.node(dst)))
        sock = np.where(same | (self.cluster.transport != "tcp"), -1, f.res("rank_flow", src))
        lat = np.where(same, SHM_LATENCY_S, f.nic_latency_s)
        reducer = f.res("rank_sum", dst) if reduce else -1
        res = [f.res("rank_xfer", dst), nic_out, nic_in, sock]
        return flows(src, dst, chunk, res, lat, reducer)

    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        f = self.fabric
        chunk = nbytes / f.n_ranks
        d2h, h2d = f.copies(nbytes, to_host=True), f.copies(nbytes, to_host=False)
        return [
            step(d2h),
            step(self._ring(chunk, reduce=True), repeat=f.n_ranks - 1),
            step(self._ring(chunk, reduce=False), repeat=f.n_ranks - 1),
            step(h2d),
        ]
