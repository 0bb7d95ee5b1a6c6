"""The cluster as endpoints and shared resources, and the base class of the method modules.

:class:`Fabric` numbers the endpoints and resources of a :class:`~ddlsim.system.specs.Cluster`
for :mod:`ddlsim.comm.executor`. Endpoints: GPU ranks ``0..N-1``, node hosts ``N..N+n-1``, then
``n_servers`` parameter-server tasks. Resources (capacity in bytes/s, per direction):

- ``gpu_out`` / ``gpu_in`` per GPU: its port on the intra-node fabric (``intra`` bandwidth);
- ``nic_out`` / ``nic_in`` per node: ``nics_per_node`` x ``nic`` bandwidth;
- ``pcie_up`` / ``pcie_down`` per PCIe switch: ``host`` bandwidth, shared by the
  ``gpus_per_pcie_switch`` GPUs under it (GPU<->host copies; 0 in the spec means one per GPU);
- ``host_mem`` per node: shared-memory copies between processes of a node. The cluster has no
  separate host-memory bandwidth, so this uses ``host_reduce_Bps`` (a summation streams the
  same bytes through memory);
- reducers: ``cpu`` per node and ``srv_cpu`` per server (``host_reduce_Bps``), ``gpu_red`` per
  GPU (the device's memory bandwidth), ``rank_cpu`` per rank of CPU workers (a core summing in
  its own memory: the device's memory bandwidth / :data:`SUM_STREAMS`);
- ``srv_nic_out`` / ``srv_nic_in`` per dedicated server: a NIC like the workers';
- ``srv_rpc_in`` / ``srv_rpc_out`` per server: the task's RPC runtime (TensorFlow's gRPC:
  serialisation, copies, HTTP/2 framing on the host CPU), ``server_rpc_Bps`` per direction
  (unbounded unless a method sets it);
- ``rank_xfer`` / ``rank_sum`` per rank: the one progress thread of a rank's MPI process,
  moving and summing host buffers (``thread_Bps``; unbounded unless a method sets it);
  ``rank_flow`` per rank: one TCP flow of the rank, the network's per-flow cap.

A GPU-to-GPU flow between nodes (NCCL over GPUDirect RDMA) crosses only the two NICs; staged
paths (MPI, parameter servers, BytePS) list their PCIe hops explicitly.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import replace

import numpy as np

from ddlsim.comm.base import CommModel
from ddlsim.comm.executor import Schedule, Step, flows
from ddlsim.errors import ConfigError, SimulationError
from ddlsim.system.specs import Cluster

#: latency of one shared-memory message between two MPI processes of a node (s); Open MPI's
#: vader/sm transport is well under a microsecond to a few microseconds
SHM_LATENCY_S = 1e-6
#: memory streams of a summation ``a += b`` (two operands read, one result written): a core
#: sums bytes at its memory bandwidth divided by this (STREAM's "Add" accounting)
SUM_STREAMS = 3


def cluster_label(cluster: Cluster) -> str:
    """A short description of a cluster for error messages."""
    return (
        f"{cluster.n_gpus} x {cluster.device.id} on {cluster.n_nodes} node(s) "
        f"({cluster.gpus_per_node} GPU(s)/node, {cluster.intra_link}/{cluster.inter_link})"
    )


class Fabric:
    """Endpoint and resource numbering of one cluster (see module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        n_servers: int = 0,
        server_rpc_Bps: float = math.inf,
        thread_Bps: tuple[float, float] = (math.inf, math.inf),
    ) -> None:
        c = cluster
        self.cluster = c
        self.n_ranks, self.g, self.n_nodes, self.n_servers = (
            c.n_gpus, c.local_gpus, c.n_nodes, n_servers
        )  # fmt: skip
        self.switch_gpus = min(c.gpus_per_pcie_switch or 1, self.g)
        self.switches_per_node = -(-self.g // self.switch_gpus)
        inf = math.inf
        intra_Bps = c.intra.bandwidth_Bps if c.intra else inf
        nic_Bps = c.nics_per_node * c.nic.bandwidth_Bps if c.nic else inf
        self.intra_Bps, self.nic_Bps, self.host_Bps = intra_Bps, nic_Bps, c.host.bandwidth_Bps
        self.intra_latency_s = c.intra.latency_s if c.intra else 0.0
        self.nic_latency_s = c.nic.latency_s if c.nic else 0.0
        self.host_latency_s = c.host.latency_s
        n_sw = self.n_nodes * self.switches_per_node
        blocks = {
            "gpu_out": (self.n_ranks, intra_Bps),
            "gpu_in": (self.n_ranks, intra_Bps),
            "nic_out": (self.n_nodes, nic_Bps),
            "nic_in": (self.n_nodes, nic_Bps),
            "pcie_up": (n_sw, c.host.bandwidth_Bps),
            "pcie_down": (n_sw, c.host.bandwidth_Bps),
            "host_mem": (self.n_nodes, c.host_reduce_Bps),
            "cpu": (self.n_nodes, c.host_reduce_Bps),
            "gpu_red": (self.n_ranks, c.device.mem_bandwidth_Bps),
            "srv_nic_out": (n_servers, nic_Bps),
            "srv_nic_in": (n_servers, nic_Bps),
            "srv_cpu": (n_servers, c.host_reduce_Bps),
            "srv_rpc_in": (n_servers, server_rpc_Bps),
            "srv_rpc_out": (n_servers, server_rpc_Bps),
            "rank_cpu": (self.n_ranks, c.device.mem_bandwidth_Bps / SUM_STREAMS),
            "rank_xfer": (self.n_ranks, thread_Bps[0]),
            "rank_sum": (self.n_ranks, thread_Bps[1]),
            "rank_flow": (self.n_ranks, c.socket_flow_cap_Bps),
        }
        self._offset: dict[str, int] = {}
        caps: list[np.ndarray] = []
        total = 0
        for name, (size, cap) in blocks.items():
            self._offset[name] = total
            caps.append(np.full(size, cap))
            total += size
        self.capacity_Bps = np.concatenate(caps)
        self.n_endpoints = self.n_ranks + self.n_nodes + n_servers

    def res(self, block: str, index: object) -> np.ndarray:
        """Resource indices of ``block`` entries ``index`` (GPU rank, node, switch or server)."""
        return self._offset[block] + np.asarray(index, np.int64)

    def node(self, rank: object) -> np.ndarray:
        """Node of GPU ``rank`` (ranks packed node by node)."""
        return np.asarray(rank, np.int64) // self.g

    def switch(self, rank: object) -> np.ndarray:
        """Global PCIe-switch index of GPU ``rank``."""
        r = np.asarray(rank, np.int64)
        return (r // self.g) * self.switches_per_node + (r % self.g) // self.switch_gpus

    def host(self, node: object) -> np.ndarray:
        """Endpoint of a node's host (CPU)."""
        return self.n_ranks + np.asarray(node, np.int64)

    def server(self, j: object) -> np.ndarray:
        """Endpoint of parameter-server task ``j``."""
        return self.n_ranks + self.n_nodes + np.asarray(j, np.int64)

    def gpu_path(self, src: object, dst: object) -> tuple[list[np.ndarray], np.ndarray]:
        """GPU->GPU path: intra ports inside a node, the two NICs between nodes."""
        s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        same = self.node(s) == self.node(d)
        out = np.where(same, self.res("gpu_out", s), self.res("nic_out", self.node(s)))
        inn = np.where(same, self.res("gpu_in", d), self.res("nic_in", self.node(d)))
        return [out, inn], np.where(same, self.intra_latency_s, self.nic_latency_s)

    def host_path(self, src: object, dst: object) -> tuple[list[np.ndarray], np.ndarray]:
        """Host-buffer path between two ranks' processes: shared memory inside a node, NICs
        between nodes."""
        s, d = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        same = self.node(s) == self.node(d)
        out = np.where(same, self.res("host_mem", self.node(s)), self.res("nic_out", self.node(s)))
        inn = np.where(same, -1, self.res("nic_in", self.node(d)))
        return [out, inn], np.where(same, SHM_LATENCY_S, self.nic_latency_s)

    def copies(self, nbytes: float, to_host: bool) -> Step:
        """Every GPU copies ``nbytes`` to its host (``to_host``) or from it, over its PCIe
        switch's uplink (shared by the GPUs behind the switch)."""
        ranks = np.arange(self.n_ranks)
        link = self.res("pcie_up" if to_host else "pcie_down", self.switch(ranks))
        return flows(ranks, ranks, nbytes, [link], self.host_latency_s)

    def schedule(self, steps: list[Step]) -> Schedule:
        """A :class:`Schedule` of ``steps`` over this fabric."""
        return Schedule(self.n_ranks, self.n_endpoints, self.capacity_Bps, steps)


def timed_step(
    fabric: Fabric, unit: Step, repeat: int, bandwidth_s: float, latency_s: float
) -> Step:
    """``unit`` (the flows of one step, any sizes) rescaled so that ``repeat`` repetitions take
    ``latency_s + bandwidth_s`` when every rank starts together.

    A closed form that is not a sum of per-step link costs (NCCL's: a latency summed along the
    ring, a protocol's bandwidth factor, per-channel caps) is executed this way: every flow
    carries the latency ``latency_s / repeat`` and bytes in the proportions of ``unit``, scaled
    so that the slowest flow of a step (equal sharing, as the executor shares) takes
    ``bandwidth_s / repeat`` to transfer. Which ranks wait for which stays the unit's.
    """
    zero = replace(unit, latency_s=np.zeros_like(unit.latency_s), repeat=1)
    per_step_s = float(fabric.schedule([]).durations_s(zero).max()) if unit.n_flows else 0.0
    scale = bandwidth_s / (repeat * per_step_s) if per_step_s > 0 else 0.0
    return replace(
        unit,
        nbytes=unit.nbytes * scale,
        latency_s=np.full(unit.n_flows, latency_s / repeat),
        repeat=repeat,
    )


def share_Bps(*cap_count: tuple[float, int]) -> float:
    """Equal-sharing rate of a flow: min over its resources of capacity / flows crossing it."""
    return min((cap / count for cap, count in cap_count if count > 0), default=math.inf)


class ScheduledModel(CommModel):
    """Common part of every method: validation, the zero cases, and the schedule cache.

    Subclasses implement :meth:`_time_s` and :meth:`_schedule` for ``nbytes > 0`` and N > 1.
    """

    n_servers: int = 0
    #: what one server task's RPC runtime moves per direction (bytes/s); inf: not modelled
    server_rpc_Bps: float = math.inf
    #: what one rank's host thread moves and sums (bytes/s); inf: not modelled
    thread_xfer_Bps: float = math.inf
    thread_sum_Bps: float = math.inf

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        c = cluster
        if c.n_gpus < 1 or c.n_gpus % c.local_gpus:
            raise ConfigError(f"{c.n_gpus} GPUs do not fill nodes of {c.gpus_per_node} GPUs")
        if c.local_gpus > 1 and c.intra is None:
            raise ConfigError(f"cluster {cluster_label(c)} has no intra-node hop")
        if c.n_nodes > 1 and c.nic is None:
            raise ConfigError(f"cluster {cluster_label(c)} has no network hop")
        self._schedules: dict[tuple[float, str, int], Schedule] = {}
        self._fabric: Fabric | None = None

    @property
    def fabric(self) -> Fabric:
        """Endpoints and resources of the cluster (built on first use)."""
        if self._fabric is None:
            threads = (self.thread_xfer_Bps, self.thread_sum_Bps)
            self._fabric = Fabric(self.cluster, self.n_servers, self.server_rpc_Bps, threads)
        return self._fabric

    def _check(self, op: str, channel: int) -> None:
        if op not in self.ops:
            raise SimulationError(f"{self.name} performs {self.ops}, not {op!r}")
        if not 0 <= channel < self.n_channels():
            raise SimulationError(f"{self.name}: channel {channel} not in [0, {self.n_channels()})")

    def time_s(self, nbytes: float, op: str = "allreduce", channel: int = 0) -> float:
        """Closed-form duration (s) of ``op`` on ``nbytes`` per worker; 0 for 0 bytes or 1 GPU."""
        self._check(op, channel)
        if nbytes <= 0 or self.cluster.n_gpus == 1:
            return 0.0
        return self._time_s(float(nbytes), op, channel)

    def schedule(self, nbytes: float, op: str = "allreduce", channel: int = 0) -> Schedule:
        """Event-level schedule of the same operation (cached per bytes, op and channel)."""
        self._check(op, channel)
        key = (float(nbytes), op, channel)
        got = self._schedules.get(key)
        if got is None:
            trivial = nbytes <= 0 or self.cluster.n_gpus == 1
            got = self.fabric.schedule([] if trivial else self._schedule(*key))
            self._schedules[key] = got
        return got

    @abstractmethod
    def _time_s(self, nbytes: float, op: str, channel: int) -> float:
        """Closed form for ``nbytes > 0`` on more than one GPU (s)."""

    @abstractmethod
    def _schedule(self, nbytes: float, op: str, channel: int) -> list[Step]:
        """Steps for ``nbytes > 0`` on more than one GPU."""
