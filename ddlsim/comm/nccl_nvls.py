"""NVLink SHARP (NVLS): NCCL's collectives reduced and multicast by the NVLink switch.

On an NVLink switch that reduces and multicasts in the switch (NVSwitch gen3 of HGX H100 / H200,
the NVLink 5 switches of HGX B200 and GB200 NVL72: the fabric's ``nvls`` flag in ``links.json``)
and a Hopper or newer GPU, NCCL has two more algorithms (read in NCCL 2.29.7's sources,
summarised in docs/design.md, "NVLink SHARP (NVLS)"):

- **NVLS** (one node): each GPU's share of the call is reduced by the switch as the GPUs load
  it (``multimem.ld_reduce``) and multicast back as they store it: every GPU sends and
  receives S (S/G more), not the ring's 2(G-1)/G S twice.
- **NVLS-tree** (several nodes, all-reduce): NVLS inside each node, a tree across nodes whose
  heads (one per channel, each with its NIC) exchange the node's reduced data.

The cost is NCCL's own (``src/graph/tuning.cc``, ``ncclTopoTuneModel``). NCCL's NVLS graph has
one channel per GPU of the node (``src/graph/search.cc``: ``maxChannels = min(32, GPUs)``,
forced for one node), each of ``bwIntra = L / (G + 1)`` (the search charges every GPU's link
one unit per channel and the channel's head one more: ``ncclTopoSearchTryNvls``), where L is
the GPU's NVLink bandwidth (ddlsim: the fabric's, ``intra_Bps``). Per channel NCCL takes
``bwIntra x nvlsEfficiency x (G-1)/G``, doubled for an all-reduce (its reduce and its
multicast are pipelined), times ``(G-1)/G`` for all-gather / reduce-scatter; across nodes the
channel's network share (doubled on 2 nodes for NVLS-tree, as the tree's) and the NVLS-tree
ceiling per channel bound it. The bus bandwidth is G channels' worth; all-reduce's algorithm
bandwidth is ``bus x N / (2(N-1))``; all-gather's and reduce-scatter's is the bus bandwidth
itself (NCCL converts only rings' there), of the whole gathered buffer.

Latency (Simple only; NVLS has no LL / LL128): NVLS 25 µs (NVLink row, base 0); NVLS-tree
25 µs + 2 log2(n) x (20.9 µs + the network transport's latency twice, SIMPLE's flush).

Releases (read from the ``nvidia-nccl-cu12`` wheels' ``libnccl.so.2``): 2.17.1 has the NVLS
algorithm and ``NCCL_NVLS_ENABLE`` but no ``NVLSTree`` (2.18.1 is the first that names it);
2.19.3 is the first whose device functions include ``AllGather_NVLS_SIMPLE`` and
``ReduceScatter_NVLS_SIMPLE`` (2.17-2.18 list every (collective, algorithm) pair, implemented
or not). NCCL disables NVLS across nodes without CollNet (``ncclTopoTuneModel``) and NVLS
all-gather / reduce-scatter across nodes without a CollNet plugin's: across nodes only the
NVLS-tree all-reduce runs.
"""

from __future__ import annotations

import math
from typing import Any

#: the NVLS algorithms (NCCL_ALGO names NVLS, NVLSTree)
NVLS_ALGORITHMS = ("nvls", "nvls_tree")
#: ``nvlsEfficiency`` by architecture (0 before Hopper: no multicast)
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
#: NVLink-row latency of an NVLS or NVLS-tree call (µs, ``hwLatencies[NVLINK]``, Simple)
NVLS_INTRA_US = 25.0
#: network-row latency of one NVLS-tree level (µs, ``hwLatencies[NET][NVLS_TREE]``, Simple)
NVLS_TREE_NET_US = 20.9
#: NVLS-tree ceiling per channel, [arch][2 nodes, 3+] (GB/s, ``perChMaxNVLSTreeBws``)
NVLS_TREE_PER_CHANNEL_GBps = {"hopper": (57.7, 45.5), "blackwell": (96.0, 43.8)}
#: the first release with each path: (algorithm, collective) -> (major, minor)
SINCE = {
    ("nvls", "all_reduce"): (2, 17),
    ("nvls_tree", "all_reduce"): (2, 18),
    ("nvls", "all_gather"): (2, 19),
    ("nvls", "reduce_scatter"): (2, 19),
}
#: most GPUs of a node an NVLS all-gather / reduce-scatter takes (``NCCL_MAX_NVLS_ARITY``)
MAX_ARITY = 32
#: NVLS channels (CTAs) a call runs on (``src/transport/nvls.cc``): Hopper 16; Blackwell 24 on
#: one node, 32 across nodes
NVLS_CHANNELS = {"hopper": (16, 16), "blackwell": (24, 32)}


def unavailable(
    algorithm: str, collective: str, version: tuple[int, int], *, fabric_nvls: bool,
    arch: str, n_nodes: int, local: int,
) -> str:  # fmt: skip
    """Why ``algorithm`` (nvls | nvls_tree) cannot run ``collective`` here ("" if it can)."""
    if not fabric_nvls or arch not in NVLS_EFFICIENCY:
        return "needs an NVLink switch with SHARP (HGX H100 / H200 / B200, NVL72)"
    if local < 2:
        return "needs 2 or more GPUs of a node on the NVLink switch"
    since = SINCE.get((algorithm, collective))
    if since is None:
        return f"NCCL has no {algorithm} {collective}"
    if version < since:
        return f"arrived in NCCL {since[0]}.{since[1]}"
    if algorithm == "nvls" and n_nodes > 1:
        return "runs on one node (across nodes NCCL runs nvls_tree, without CollNet)"
    if algorithm == "nvls_tree" and n_nodes < 2:
        return "runs across nodes (one node: nvls)"
    if collective != "all_reduce" and local > MAX_ARITY:
        return f"takes at most {MAX_ARITY} GPUs of a node"
    return ""


def bus_Bps(
    algorithm: str, collective: str, *, arch: str, local: int, n_nodes: int,
    intra_Bps: float, net_Bps: float,
) -> float:  # fmt: skip
    """NCCL's NVLS bus bandwidth (bytes/s): G channels of ``L / (G+1)`` at the NVLS
    efficiency, (G-1)/G, doubled for all-reduce (x (G-1)/G for all-gather / reduce-scatter);
    NVLS-tree also at most each channel's network share (x2 on 2 nodes) and its ceiling."""
    g = local
    per_channel = intra_Bps / (g + 1) * NVLS_EFFICIENCY[arch] * (g - 1) / g
    per_channel *= 2.0 if collective == "all_reduce" else (g - 1) / g
    if algorithm == "nvls_tree":
        net = net_Bps / g * (2 if n_nodes <= 2 else 1)
        cap = NVLS_TREE_PER_CHANNEL_GBps[arch][0 if n_nodes <= 2 else 1] * 1e9
        per_channel = min(per_channel, net, cap)
    return g * per_channel


def algo_Bps(collective: str, bus: float, n_ranks: int) -> float:
    """The algorithm bandwidth NCCL's estimate divides the call's bytes by."""
    if collective == "all_reduce":
        return bus * n_ranks / (2 * (n_ranks - 1))
    return bus


def latency_s(algorithm: str, n_nodes: int, transport_latency_s: float) -> float:
    """NVLS: the NVLink row's 25 µs; NVLS-tree: that plus 2 log2(n) network levels, each
    20.9 µs and the transport's latency twice (SIMPLE's flush)."""
    lat = NVLS_INTRA_US * 1e-6
    if algorithm == "nvls_tree":
        levels = int(math.log2(n_nodes))
        lat += 2 * levels * (NVLS_TREE_NET_US * 1e-6 + 2 * transport_latency_s)
    return lat


def channels(arch: str, n_nodes: int) -> int:
    """The NVLS channels a call runs on, whatever its size."""
    return NVLS_CHANNELS[arch][0 if n_nodes == 1 else 1]


def cost(
    topo: Any, algorithm: str, nbytes: float, rounds: int, correction: float
) -> tuple[float, float, int]:
    """``(latency_s, bandwidth_s, channels)`` of an NVLS or NVLS-tree call on ``topo`` (a
    :class:`~ddlsim.comm.nccl.Topology`): an all-reduce (``rounds`` 2) or an all-gather /
    reduce-scatter of the whole buffer (1). Blackwell's NVLS-tree all-reduce moves at NCCL's
    tree ``correction`` for the size (``ncclTopoGetAlgoTime``, x86 hosts)."""
    t, coll = topo, "all_reduce" if rounds == 2 else "all_gather"
    bus = bus_Bps(algorithm, coll, arch=t.arch, local=t.local, n_nodes=t.n_nodes,
                  intra_Bps=t.intra_Bps, net_Bps=t.net_Bps)  # fmt: skip
    algo = algo_Bps(coll, bus, t.n_ranks)
    if algorithm == "nvls_tree" and t.arch == "blackwell":
        algo *= correction
    lat = latency_s(algorithm, t.n_nodes, t.transport_latency_s)
    return lat, nbytes / algo, channels(t.arch, t.n_nodes)
