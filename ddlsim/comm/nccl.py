"""NCCL's own cost model of an allreduce, per version: which (algorithm, protocol) a call uses.

Figures are NCCL's (``src/graph/tuning.cc``, 2.5 and later; summarised with their history in
docs/design.md, "Collectives as NCCL costs them"). One allreduce of S bytes over N ranks on
``n`` nodes of ``g`` GPUs costs ``latency + S / algorithm_bandwidth``:

- **latency** (µs): a base per (algorithm, protocol) plus per-hop latencies by link class
  (NVLink, PCIe, network; the network hop adds the transport's own per-message latency, twice
  for SIMPLE, which flushes). A RING takes ``2(N-1)`` steps of which only ``2(n-1)`` cross the
  network; a TREE (chain in the node, double binary tree across nodes) ``2((g-1) intra +
  log2(n) net)``. In the tuned versions (2.5+), multi-node RING+SIMPLE calls with at least 64
  bytes per channel and rank pay NCCL's "plateau" factor (1.9 before Ampere, 1.4 after).
- **bandwidth**: the bus bandwidth is the slowest link a byte crosses (the intra-node fabric, the
  node's NICs). RING: ``bus x N / (2(N-1))``; LL moves 8-byte lines of 4 data bytes (x0.5),
  LL128 128-byte lines of 120 (x0.92). TREE: ``min(0.92 bus, channels x cap) / 2``, LL tree at
  1/3.8 of that, times NCCL's empirical correction by size. Each protocol's ceilings by
  architecture (LL's whole-GPU one, LL128's and the tree's per channel) are NCCL 2.29's
  (:mod:`ddlsim.comm.nccl_tuning`).
- **channels**: NCCL chooses by the estimate above (all channels), then runs a small call on
  fewer channels (``topoGetAlgoInfo``): the time is that call's (:func:`executed`, 2.5+).
- **NVLS** (NVLink SHARP, 2.17+; :mod:`ddlsim.comm.nccl_nvls`) on switches that reduce.

Versions: 2.0-2.3 run rings only, LL below a per-thread size threshold and SIMPLE above; 2.4
adds trees (the cheaper of ring and tree: ``NCCL_TREE_THRESHOLD``'s crossover); 2.5 and later
pick, per call, the (algorithm, protocol) of least predicted time, LL128 on Volta and later.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

from ddlsim.comm import nccl_nvls as nvls
from ddlsim.comm import nccl_tuning as tuning
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system.specs import Cluster

ALGORITHMS = ("ring", "tree")
PROTOCOLS = ("LL", "LL128", "Simple")
#: what ``--algorithm`` / ``--nccl-protocol`` accept: ``auto`` (NCCL's choice) or a forced one
ALGORITHM_CHOICES = ("auto", *ALGORITHMS, *nvls.NVLS_ALGORITHMS)
PROTOCOL_CHOICES = ("auto", *PROTOCOLS)
#: the NCCL of PyTorch 2.0's CUDA wheels (nvidia-nccl-cu11 2.14.3, read from torch 2.0.1's
#: wheel metadata), the newest framework Horovod 0.28.1 supports
DEFAULT_NCCL_VERSION = "2.14"

#: base latency of one call (µs), by algorithm and protocol
BASE_LATENCY_US = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
}
#: latency of one hop (µs) by link class, algorithm and protocol
HOP_LATENCY_US = {
    "nvlink": {
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
    },
    "pcie": {
        "tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0},
        "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
    },
    "network": {
        "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
        "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
    },
}
#: on a multi-node ring an intra-node hop costs at least the network post overhead (µs; Intel
#: hosts), three times for SIMPLE
MIN_INTRA_HOP_MULTINODE_US = 1.0
#: fraction of the bus bandwidth a protocol's lines carry as data; each protocol's ceilings by
#: architecture (LL's ``llMaxBws``, LL128's and the tree's per channel) are in
#: :mod:`ddlsim.comm.nccl_tuning`
PROTOCOL_BANDWIDTH = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}
TREE_EFFICIENCY = 0.92
TREE_LL_FACTOR = 1 / 3.8
#: NCCL's empirical tree correction by size bucket: bucket b covers [64 * 2**b, 64 * 2**(b+1))
#: bytes, 64 B to 256 MiB (NCCL 2.5-2.8 tuning.cc)
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8,
              .9, .9, .92, .92),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9),
}  # fmt: skip
#: evidence that a two-node tree loads each NIC with S, not 2S, each way: measured nccl-tests
#: bus bandwidths of about 1.9x the NICs' rate on two nodes (traces/measured/collectives:
#: p4d EFA S06 57 GB/s on 4 x 100 Gb/s, NCCL 2.9.9; GCP A3 Mega S01 339 GB/s on 8 x 200 Gb/s;
#: OCI H100 S19 464 GB/s), which NCCL's maintainers explain so (NVIDIA/nccl#209, #307,
#: nccl-tests#22); from three nodes on an interior node carries 2S (S08: 4 nodes, 0.59 of line)
TWO_NODE_TREE = "each NIC carries S per direction"
#: multi-node RING+SIMPLE latency factor ("plateau effect of ring"): before / from Ampere. A
#: refinement of the tuning model (2.5+); the 2.0-2.4 rings, which had no cost model, go without
RING_PLATEAU = {"pre_ampere": 1.9, "ampere": 1.4}
#: NCCL 2.0-2.4: LL for calls of at most this many bytes per thread (pre-Volta / Volta+)
LL_BYTES_PER_THREAD = {"pre_volta": 32, "volta": 64}
THREADS_PER_CHANNEL = 256
#: NCCL's socket transport per connection (``src/transport/net_socket.cc``): before 2.5 one
#: socket, progressed by the rank's one proxy thread; from 2.5 ``NCCL_SOCKET_NTHREADS`` helper
#: threads x ``NCCL_NSOCKS_PERTHREAD`` sockets, auto-detected from the NIC's PCI vendor
#: (``ncclSocketGetNsockNthread``): AWS ENA 2 x 8, Google gVNIC 4 x 1, any other NIC 0 helper
#: threads (the proxy thread and one socket)
SOCKET_THREADS_SOCKS = {"aws": (2, 8), "gcp": (4, 1), "": (0, 1)}
#: TCP payload per byte on an Ethernet wire at a 1,500-byte MTU: 1,448 bytes of a 1,538-byte
#: frame (IPv4, TCP with timestamps, Ethernet header, FCS, preamble, inter-frame gap)
TCP_WIRE_EFFICIENCY = 1448 / 1538


@dataclass(frozen=True, order=True)
class NcclVersion:
    """An NCCL release, ``major.minor`` (the patch level changes no cost)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: object) -> NcclVersion:
        """``"2.4"``, ``"2.14.3"`` or a :class:`NcclVersion`; ConfigError for anything else."""
        if isinstance(text, NcclVersion):
            return text
        match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", str(text))
        if match is None:
            raise ConfigError(f"NCCL version must look like 2.4 or 2.14.3, got {text!r}")
        version = cls(int(match[1]), int(match[2]))
        if not (2, 0) <= (version.major, version.minor) < (3, 0):
            raise ConfigError(f"NCCL version must be 2.x (2.0 or later), got {text!r}")
        return version

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def has_tree(self) -> bool:
        """Double binary trees for allreduce (2.4, December 2018)."""
        return (self.major, self.minor) >= (2, 4)

    @property
    def tuned(self) -> bool:
        """Per-call (algorithm, protocol) choice from the cost model (2.5, September 2019)."""
        return (self.major, self.minor) >= (2, 5)

    @property
    def generation(self) -> str:
        """``rings`` (2.0-2.3), ``trees`` (2.4) or ``tuned`` (2.5+)."""
        return "tuned" if self.tuned else "trees" if self.has_tree else "rings"


@dataclass(frozen=True)
class Topology:
    """What NCCL's model needs of a cluster (seconds, bytes/s)."""

    n_ranks: int
    n_nodes: int
    local: int  # GPUs per node taking part
    intra_hop: str  # "nvlink" | "pcie"
    channels: int
    bus_Bps: float  # slowest link a byte crosses: intra fabric, node NICs
    transport_latency_s: float  # the network transport's per-message latency
    arch: str
    net_Bps: float = math.inf  # the node's NICs together (inf: no network)
    intra_Bps: float = math.inf  # the intra-node fabric per GPU (inf: one GPU per node)
    nvls: bool = False  # the intra-node fabric reduces and multicasts in the switch (NVLS)

    @classmethod
    def of(cls, cluster: Cluster, version: NcclVersion | None = None) -> Topology:
        """The topology of ``cluster``; over sockets the network is what ``version``'s
        socket transport moves (:func:`socket_net_Bps`; None: the newest release's)."""
        c = cluster
        multi = c.n_nodes > 1 and c.nic is not None
        net_Bps = math.inf
        if multi:
            net_Bps = c.nics_per_node * c.nic.bandwidth_Bps
            if c.transport == "tcp":
                net_Bps = socket_net_Bps(c, version or NcclVersion.parse(DEFAULT_NCCL_VERSION))
        links = [net_Bps]
        if c.local_gpus > 1 and c.intra is not None:
            links.append(c.intra.bandwidth_Bps)
        return cls(
            n_ranks=c.n_gpus,
            n_nodes=c.n_nodes,
            local=c.local_gpus,
            intra_hop=c.nccl_hop,
            channels=max(1, c.nccl_channels),
            bus_Bps=min(links, default=math.inf),
            transport_latency_s=c.nic.latency_s if multi else 0.0,
            arch=c.device.arch,
            net_Bps=net_Bps,
            intra_Bps=c.intra.bandwidth_Bps if c.local_gpus > 1 and c.intra else math.inf,
            nvls=c.nvls and c.local_gpus > 1,
        )

    @property
    def volta_or_later(self) -> bool:
        """Volta or newer (LL128, the larger LL threshold)."""
        return self.arch in ("volta", "turing", "ampere", "hopper", "blackwell")


def socket_net_Bps(cluster: Cluster, version: NcclVersion) -> float:
    """What NCCL's socket transport moves out of a node (bytes/s): flows x the provider's
    per-flow cap and threads x one thread's stream, bounded by the NICs' line.

    Every channel is one connection across the node boundary. Without helper threads (before
    2.5, or a NIC of no listed vendor) its one socket is progressed by the rank's proxy
    thread: one stream per NIC (the catalog's TCP figure, ``cluster.nic``), at most channels x
    the cap. With T helper threads of S sockets each: channels x T x S flows and channels x T
    threads, up to the NICs' line rate at TCP's wire efficiency.
    """
    c = cluster
    assert c.nic is not None
    channels = max(1, c.nccl_channels)
    stream = c.nics_per_node * c.nic.bandwidth_Bps
    threads, socks = SOCKET_THREADS_SOCKS.get(c.socket_vendor, (0, 1))
    if not version.tuned or threads == 0:
        return min(stream, channels * c.socket_flow_cap_Bps)
    from ddlsim.system import catalog

    nominal = catalog.network(c.inter_link, c.device.id).nominal_bandwidth_Bps
    line = c.nics_per_node * nominal * TCP_WIRE_EFFICIENCY
    flows = channels * threads * socks
    return min(line, flows * c.socket_flow_cap_Bps, channels * threads * stream)


@dataclass(frozen=True)
class Choice:
    """One call's algorithm and protocol and its predicted time (s)."""

    algorithm: str
    protocol: str
    time_s: float
    latency_s: float
    channels: int = 0  # channels the call ran on (0: not stated)

    @property
    def bandwidth_s(self) -> float:
        """The bandwidth part of the time (s)."""
        return self.time_s - self.latency_s

    def label(self) -> dict[str, str]:
        """``{"algorithm": ..., "protocol": ...}`` for timelines and JSON."""
        return {"algorithm": self.algorithm, "protocol": self.protocol}


def _net_hop_s(topo: Topology, algorithm: str, protocol: str) -> float:
    """One network crossing: the hop's latency (one GPU per node: the tree's, whatever the
    algorithm; tuning.cc: "with ppn=1 latencies are fully exposed") + the transport's."""
    row = "tree" if topo.local == 1 else algorithm
    hop = HOP_LATENCY_US["network"][row][protocol] * 1e-6
    flushes = 2 if protocol == "Simple" else 1
    return hop + flushes * topo.transport_latency_s


def _intra_hop_s(topo: Topology, algorithm: str, protocol: str) -> float:
    hop = HOP_LATENCY_US[topo.intra_hop][algorithm][protocol] * 1e-6
    if algorithm == "ring" and topo.n_nodes > 1:
        floor_us = MIN_INTRA_HOP_MULTINODE_US * (3 if protocol == "Simple" else 1)
        hop = max(hop, floor_us * 1e-6)
    return hop


def ring_latency_s(
    topo: Topology, protocol: str, nbytes: float, *, plateau: bool = True, rounds: int = 2
) -> float:
    """Latency of a ring call that goes ``rounds`` times round the ring (an allreduce 2: its
    reduce-scatter and its allgather; an allgather or a reduce-scatter 1): base + the
    ``rounds (N-1)`` steps' intra hops + the ``rounds (n-1)`` network crossings; an allreduce
    pays the tuning model's plateau factor where ``plateau`` (NCCL 2.5+)."""
    n, nodes = topo.n_ranks, topo.n_nodes
    net_steps = rounds * (nodes - 1)
    lat = BASE_LATENCY_US["ring"][protocol] * 1e-6
    lat += (rounds * (n - 1) - net_steps) * _intra_hop_s(topo, "ring", protocol)
    lat += net_steps * _net_hop_s(topo, "ring", protocol)
    slice_bytes = nbytes / (topo.channels * n)
    if plateau and rounds == 2 and nodes > 1 and protocol == "Simple" and slice_bytes >= 64:
        ampere = topo.arch in ("ampere", "hopper", "blackwell")
        lat *= RING_PLATEAU["ampere" if ampere else "pre_ampere"]
    return lat


def tree_latency_s(topo: Topology, protocol: str) -> float:
    """Latency of a tree allreduce: up and down the chain and log2(n) tree levels."""
    levels = math.floor(math.log2(topo.n_nodes)) if topo.n_nodes > 1 else 0
    hops = (topo.local - 1) * _intra_hop_s(topo, "tree", protocol)
    hops += levels * _net_hop_s(topo, "tree", protocol)
    return BASE_LATENCY_US["tree"][protocol] * 1e-6 + 2 * hops


def bus_on_channels(topo: Topology, used: float = 0) -> float:
    """The slowest link a byte crosses when a call runs on ``used`` of the channels (0: all).
    A channel is one CTA per GPU driving the intra-node fabric at its share of it (NCCL's
    graph search sized the channels to the fabric: ``bwIntra`` per channel), so that side
    scales with ``used``; a node's NICs are shared by whatever channels run (one network
    connection fills a NIC), so they do not. One GPU per node: the NICs' share per channel
    stands for the GPU side."""
    if not used or used >= topo.channels:
        return topo.bus_Bps
    gpu_Bps = topo.intra_Bps if math.isfinite(topo.intra_Bps) else topo.bus_Bps
    return min(topo.bus_Bps, gpu_Bps * used / topo.channels)


def ring_bus_Bps(topo: Topology, protocol: str, used: float = 0) -> float:
    """A ring's bus bandwidth with ``protocol`` on ``used`` of its channels (0: all): the
    data the protocol's lines carry over :func:`bus_on_channels`, LL128 at most its ceiling
    per channel, LL at most NCCL's whole-GPU ``llMaxBws`` (:mod:`~ddlsim.comm.nccl_tuning`)."""
    bus = bus_on_channels(topo, used) * PROTOCOL_BANDWIDTH[protocol]
    if protocol == "LL128":
        bus = min(bus, (used or topo.channels) * tuning.ring_ll128_per_channel_Bps(topo.arch))
    elif protocol == "LL":
        bus = min(bus, tuning.ll_max_Bps(topo.arch, topo.n_nodes))
    return bus


def ring_bandwidth_s(
    topo: Topology, protocol: str, nbytes: float, rounds: int = 2, used: float = 0
) -> float:
    """Bandwidth term of a ring call: ``rounds (N-1)/N S`` over the protocol's bus bandwidth
    on ``used`` channels (:func:`ring_bus_Bps`)."""
    n = topo.n_ranks
    return rounds * (n - 1) / n * nbytes / ring_bus_Bps(topo, protocol, used)


def tree_correction(protocol: str, nbytes: float) -> float:
    """NCCL's empirical tree bandwidth factor for a call of ``nbytes``: its size buckets
    (:data:`TREE_CORRECTION`) taken as samples of a smooth curve, each bucket's factor at the
    bucket's geometric centre and linear in log2(size) between centres. NCCL's tuner reads the
    bucket as a step; a measured bus bandwidth has no step at a power of two, and a stepped
    factor makes a larger call faster than a smaller one at the step (a 64 MB call 9% slower
    than a 64 MiB one on two nodes). No factor moves by 2x between neighbours, so the time
    still grows with the size."""
    table = TREE_CORRECTION[protocol]
    x = math.log2(max(nbytes, 64.0) / 64.0) - 0.5  # bucket b's centre at x = b
    if x <= 0:
        return table[0]
    if x >= len(table) - 1:
        return table[-1]
    lo = int(x)
    return table[lo] + (x - lo) * (table[lo + 1] - table[lo])


def tree_bandwidth_s(topo: Topology, protocol: str, nbytes: float, used: float = 0) -> float:
    """Bandwidth term of a tree allreduce: NCCL's ``min(0.92 bus, channels x cap) / 2`` (an
    interior node of the double binary tree moves 2S through its NIC each way: S/2 from each
    child and to the parent in one tree, S/2 as a leaf of the other, twice). On exactly two
    nodes each node is the root of one tree and the only child in the other, so its NIC
    carries S each way: the network side is ``0.92 net``, not halved (the "up to 2x the wire
    rate" bus bandwidth of two-node trees, :data:`TWO_NODE_TREE`). LL moves 1/3.8 of it, at
    most LL's ceiling; LL128 7/9 of it on one node and 120/128 across nodes, at most its
    per-channel ceiling (NCCL's caps are on the bus bandwidth, twice the tree's algorithm
    bandwidth). On ``used`` of the channels (0: all) the links are :func:`bus_on_channels`'s
    and each ceiling per channel counts ``used`` times, LL's whole-GPU ceiling once."""
    arch, nodes, ch = topo.arch, topo.n_nodes, used or topo.channels
    cap = ch * tuning.tree_per_channel_Bps(arch, nodes, "Simple")
    algo = min(bus_on_channels(topo, used) * TREE_EFFICIENCY, cap) / 2
    if nodes == 2 and math.isfinite(topo.net_Bps):
        intra_side = min(topo.intra_Bps * ch / topo.channels * TREE_EFFICIENCY, cap) / 2
        algo = min(topo.net_Bps * TREE_EFFICIENCY, intra_side)
    if protocol == "LL":
        algo = min(algo * TREE_LL_FACTOR, tuning.ll_max_Bps(arch, nodes) / 2)
    elif protocol == "LL128":
        frac = tuning.TREE_LL128_FRACTION["one_node" if nodes == 1 else "multi_node"]
        algo = min(algo * frac, ch * tuning.tree_per_channel_Bps(arch, nodes, "LL128") / 2)
    return nbytes / (algo * tree_correction(protocol, nbytes))


def cost(
    topo: Topology,
    algorithm: str,
    protocol: str,
    nbytes: float,
    *,
    plateau: bool = True,
    rounds: int = 2,
    channels: float = 0,
) -> Choice:
    """Time of one call of ``nbytes`` with this algorithm and protocol: an allreduce
    (``rounds`` 2; ``plateau``: the tuning model's ring plateau factor, NCCL 2.5+) or a ring
    allgather / reduce-scatter (``rounds`` 1), on ``channels`` of the topology's channels
    (0: all, NCCL's own estimate; fewer: each drives its share of the intra-node fabric, the
    NICs are shared, the ceilings per channel count that many times, LL's once)."""
    if algorithm in nvls.NVLS_ALGORITHMS:  # Simple, on NVLS's own channels
        lat, bw_s, ch = nvls.cost(
            topo, algorithm, nbytes, rounds, tree_correction("Simple", nbytes)
        )
        return Choice(algorithm, "Simple", lat + bw_s, lat, ch)
    used = channels if 0 < channels < topo.channels else topo.channels
    if algorithm == "ring":
        lat = ring_latency_s(topo, protocol, nbytes, plateau=plateau, rounds=rounds)
        bw_s = ring_bandwidth_s(topo, protocol, nbytes, rounds, used)
    else:
        lat = tree_latency_s(topo, protocol)
        bw_s = tree_bandwidth_s(topo, protocol, nbytes, used)
    return Choice(algorithm, protocol, lat + bw_s, lat, math.ceil(used))


def executed(topo: Topology, version: NcclVersion, predicted: Choice, nbytes: float,
             rounds: int = 2) -> Choice:  # fmt: skip
    """The call NCCL chose (``predicted``, its own estimate on all channels) as it runs: from
    2.5 on, on the channels :func:`~ddlsim.comm.nccl_tuning.channels_used` leaves it."""
    if not version.tuned or predicted.algorithm in nvls.NVLS_ALGORITHMS:
        return predicted  # NVLS runs on its own channels at any size
    a, p = predicted.algorithm, predicted.protocol
    share = tuning.channel_share(topo.channels, a, p, nbytes, topo.n_ranks, topo.bus_Bps)
    if share >= topo.channels:
        return predicted
    ch = cost(topo, a, p, nbytes, plateau=True, rounds=rounds, channels=share)
    used = tuning.channels_used(topo.channels, a, p, nbytes, topo.n_ranks, topo.bus_Bps)
    return replace(ch, channels=used)


def ll_threshold_bytes(topo: Topology) -> float:
    """NCCL 2.0-2.4: largest call that runs LL (bytes per thread x threads x channels x ranks)."""
    per_thread = LL_BYTES_PER_THREAD["volta" if topo.volta_or_later else "pre_volta"]
    return per_thread * THREADS_PER_CHANNEL * topo.channels * topo.n_ranks


def candidates(
    version: NcclVersion, topo: Topology, algorithm: str = "auto", protocol: str = "auto",
    collective: str = "all_reduce",
) -> list[tuple[str, str]]:  # fmt: skip
    """The (algorithm, protocol) pairs this NCCL would consider for ``collective``, restricted
    as asked (``NCCL_ALGO`` / ``NCCL_PROTO``; ConfigError if none is available), with NVLS
    where release, switch and nodes have it (:func:`~ddlsim.comm.nccl_nvls.unavailable`). An
    all-gather / reduce-scatter forced to an algorithm it lacks here is a ring."""
    if algorithm not in ALGORITHM_CHOICES:
        raise UnknownNameError("NCCL algorithm", algorithm, ALGORITHM_CHOICES)
    if protocol not in PROTOCOL_CHOICES:
        raise UnknownNameError("NCCL protocol", protocol, PROTOCOL_CHOICES)
    algos = list(ALGORITHMS) if version.has_tree and collective == "all_reduce" else ["ring"]
    why = {a: nvls.unavailable(a, collective, (version.major, version.minor), fabric_nvls=topo.nvls,
                               arch=topo.arch, n_nodes=topo.n_nodes, local=topo.local)
           for a in nvls.NVLS_ALGORITHMS}  # fmt: skip
    algos += [a for a in nvls.NVLS_ALGORITHMS if not why[a]]
    if algorithm in why and why[algorithm] and collective == "all_reduce":
        raise ConfigError(f"NCCL {version} --algorithm {algorithm}: {why[algorithm]}")
    if algorithm != "auto":
        if algorithm not in algos and collective == "all_reduce":
            raise ConfigError(
                f"NCCL {version} has no {algorithm} allreduce (double binary trees arrived in "
                "2.4); use --algorithm ring or a newer --nccl-version"
            )
        algos = [algorithm if algorithm in algos else "ring"]
    protos = ["LL", "Simple"]
    if version.tuned and topo.volta_or_later:
        protos.insert(1, "LL128")
    if protocol != "auto":
        if protocol not in protos:
            why_p = "needs NCCL 2.5+ on a Volta or newer GPU" if protocol == "LL128" else ""
            raise ConfigError(f"NCCL protocol {protocol} is not available here ({why_p})")
        protos = [protocol]
    pairs = [(a, p) for a in algos for p in protos if a not in why or p == "Simple"]
    if not pairs:
        raise ConfigError(f"NCCL --algorithm {algorithm} runs Simple only, not {protocol}")
    return pairs


@lru_cache(maxsize=65536)
def choose(
    topo: Topology,
    version: NcclVersion,
    nbytes: float,
    algorithm: str = "auto",
    protocol: str = "auto",
) -> Choice:
    """The (algorithm, protocol) this NCCL runs an allreduce of ``nbytes`` with, and its time.

    2.5+: the pair of least predicted time (NCCL's estimate, all channels), run on the
    channels that size gets (:func:`executed`). 2.0-2.4: LL up to :func:`ll_threshold_bytes`,
    SIMPLE above (unless forced); 2.4 takes the cheaper of ring and tree with that protocol;
    their rings pay no plateau factor (a refinement of the 2.5+ tuning model).
    """
    pairs = candidates(version, topo, algorithm, protocol)
    if not version.tuned and protocol == "auto":
        wanted = "LL" if nbytes <= ll_threshold_bytes(topo) else "Simple"
        pairs = [(a, p) for a, p in pairs if p == wanted]
    costs = (cost(topo, a, p, nbytes, plateau=version.tuned) for a, p in pairs)
    return executed(topo, version, min(costs, key=lambda ch: ch.time_s), nbytes)


@lru_cache(maxsize=4096)
def choose_half_ring(
    topo: Topology, version: NcclVersion, nbytes: float, protocol: str = "auto",
    algorithm: str = "auto",
) -> Choice:  # fmt: skip
    """A ring reduce-scatter (or allgather) of ``nbytes`` (the whole buffer, as nccl-tests
    and NCCL's ``ncclFuncMaxSendRecvCount`` size it): one round of the ring, N-1 steps of
    S/N of which the n-1 node crossings are network hops (:func:`cost` with ``rounds`` 1),
    protocol chosen as :func:`choose` would, or ``protocol`` (``NCCL_PROTO``), and run on the
    channels that size gets; or NVLS where it is cheaper or forced (``algorithm``, 2.19+, one
    node). Inside one node these are the phases of Horovod's hierarchical allreduce."""
    pairs = candidates(version, topo, algorithm, protocol, "all_gather")
    if not version.tuned and protocol == "auto":
        pairs = [("ring", "LL" if nbytes <= ll_threshold_bytes(topo) / 2 else "Simple")]
    best = min((cost(topo, a, p, nbytes, rounds=1) for a, p in pairs),
               key=lambda ch: ch.time_s)  # fmt: skip
    return executed(topo, version, best, nbytes, rounds=1)
