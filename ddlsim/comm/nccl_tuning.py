"""NCCL's bandwidth ceilings per GPU architecture, and the channels one call runs on.

Read from NCCL 2.29.7's sources (Debian's ``nvidia-nccl`` orig tarball; summarised in our words
in docs/design.md, "Collectives as NCCL costs them"):

- ``src/graph/tuning.cc``, ``ncclTunerConstantsDefaults`` and ``ncclTopoTuneModel``: the
  ceilings NCCL's model puts on each protocol's bus bandwidth, by architecture row (Volta,
  Ampere, Hopper, Blackwell: ``compCapIndex``) and node-count column (1 node, 2 nodes, 3 or
  more: ``index2``). They are NVIDIA's measurements of what a protocol moves, not our fits:

  - **LL** (``llMaxBws``): one node, by architecture; on several nodes, by the host CPU
    (LL and LL128 buffers of a network connection live in host memory, so the GPU's 8-byte
    flag-and-data stores and its polls cross PCIe to the CPU's memory: 39 GB/s on Intel hosts
    at 2 nodes, 20.4 from 3; AMD 22.5 / 19.0). ddlsim's hosts are costed as Intel x86, as
    NCCL's network post overhead already is (:data:`~ddlsim.comm.nccl.MIN_INTRA_HOP_MULTINODE_US`).
  - **LL128** per channel (``perChMaxRingLL128Bws``, ``perChMaxTreeLL128Bws``) and the
    **tree** per channel (``perChMaxTreeBws``).

- ``src/enqueue.cc``, ``topoGetAlgoInfo``: once the (algorithm, protocol) is chosen, a ring or
  tree call runs on fewer channels than the communicator has while ``bytes < channels x
  threads x threshold``: each channel's threads need at least ``threshold`` bytes each
  (``NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD`` = 8, 8, 64 in ``src/include/comm.h``; a ring LL
  call's threshold is multiplied by the ranks), ``threads`` the protocol's maximum
  (``NCCL_LL_MAX_NTHREADS`` 512, ``NCCL_LL128_MAX_NTHREADS`` 640, ``NCCL_SIMPLE_MAX_NTHREADS``
  512, or 256 for a ring whose graph moves no more than ``PCI_BW`` = 12 GB/s). A call on ``c``
  of ``C`` channels runs on ``c`` CTAs and ``c`` of the ``C`` connections per peer: ``c / C``
  of the bandwidth. NCCL's own time estimate ignores this (it chose with all channels); the
  time a call takes does not.
"""

from __future__ import annotations

import math

#: NCCL's architecture rows (``compCapIndex``): compute capability below 8 counts as Volta
ARCH_ROW = {"ampere": 1, "hopper": 2, "blackwell": 3}
#: LL bus-bandwidth ceiling on one node, by architecture row (GB/s, ``llMaxBws[arch][0]``)
LL_MAX_ONE_NODE_GBps = (39.0, 87.7, 141.0, 282.0)
#: LL ceiling on several nodes, Intel hosts (GB/s): 2 nodes, 3 or more (``llMaxBws[0][1:]``)
LL_MAX_MULTI_NODE_GBps = (39.0, 20.4)
#: LL128 ring ceiling per channel, by architecture row (GB/s, ``perChMaxRingLL128Bws``)
RING_LL128_PER_CHANNEL_GBps = (20.0, 20.0, 36.7, 40.0)
#: LL128 tree ceiling per channel, [arch][1 node, 2 nodes, 3+] (GB/s, ``perChMaxTreeLL128Bws``)
TREE_LL128_PER_CHANNEL_GBps = (
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0)
)  # fmt: skip
#: tree ceiling per channel, [arch][1 node, 2 nodes, 3+] (GB/s, ``perChMaxTreeBws``)
TREE_PER_CHANNEL_GBps = (
    (26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0)
)  # fmt: skip
#: tree LL128 carries 7 data bytes of 9 on one node, 120 of 128 across nodes
TREE_LL128_FRACTION = {"one_node": 7 / 9, "multi_node": 120 / 128}
#: bytes each thread must have before NCCL adds a channel (``NCCL_*_THREAD_THRESHOLD``)
THREAD_THRESHOLD_BYTES = {"LL": 8, "LL128": 8, "Simple": 64}
#: threads per channel (``NCCL_*_MAX_NTHREADS``; Simple rings on a graph <= PCI_BW: 256)
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
PCI_BW_Bps = 12e9
GB = 1e9


def arch_row(arch: str) -> int:
    """NCCL's architecture row: 0 Volta (and older), 1 Ampere, 2 Hopper, 3 Blackwell."""
    return ARCH_ROW.get(arch, 0)


def node_column(n_nodes: int) -> int:
    """NCCL's node-count column: 0 for one node, 1 for two, 2 for three or more."""
    return min(max(n_nodes, 1), 3) - 1


def ll_max_Bps(arch: str, n_nodes: int) -> float:
    """The LL protocol's bus-bandwidth ceiling (bytes/s)."""
    if n_nodes <= 1:
        return LL_MAX_ONE_NODE_GBps[arch_row(arch)] * GB
    return LL_MAX_MULTI_NODE_GBps[node_column(n_nodes) - 1] * GB


def ring_ll128_per_channel_Bps(arch: str) -> float:
    """LL128 ring ceiling per channel (bytes/s)."""
    return RING_LL128_PER_CHANNEL_GBps[arch_row(arch)] * GB


def tree_per_channel_Bps(arch: str, n_nodes: int, protocol: str) -> float:
    """Tree ceiling per channel (bytes/s): the tree's, LL128's own for LL128."""
    table = TREE_LL128_PER_CHANNEL_GBps if protocol == "LL128" else TREE_PER_CHANNEL_GBps
    return table[arch_row(arch)][node_column(n_nodes)] * GB


def channel_bytes(algorithm: str, protocol: str, n_ranks: int, bus_Bps: float) -> int:
    """Bytes of a call each channel needs (``threads x threshold``) before NCCL runs it on
    one more: a ring LL call's threshold is per rank's slice, so x ``n_ranks``."""
    threads = MAX_THREADS[protocol]
    if algorithm == "ring" and protocol == "Simple" and bus_Bps <= PCI_BW_Bps:
        threads = 256
    threshold = THREAD_THRESHOLD_BYTES[protocol]
    if algorithm == "ring" and protocol == "LL":
        threshold *= n_ranks
    return threads * threshold


def channels_used(
    channels: int, algorithm: str, protocol: str, nbytes: float, n_ranks: int, bus_Bps: float
) -> int:
    """Channels a ring or tree call of ``nbytes`` runs on (``topoGetAlgoInfo``): the most,
    up to ``channels``, that leave every channel :func:`channel_bytes`; at least one."""
    unit = channel_bytes(algorithm, protocol, n_ranks, bus_Bps)
    return max(1, min(channels, math.floor(nbytes / unit)))


def channel_share(
    channels: int, algorithm: str, protocol: str, nbytes: float, n_ranks: int, bus_Bps: float
) -> float:
    """The channels a call's bandwidth runs on, as a number: ``nbytes / channel_bytes``
    between 1 and ``channels``. NCCL's count (:func:`channels_used`) is its floor; at the
    sizes nccl-tests measures (powers of two) the two agree wherever ``channel_bytes`` divides
    the size, and without the floor a call never ends sooner than a smaller one on the same
    protocol (the floor's sawtooth: one channel's share of time won or lost at each count)."""
    unit = channel_bytes(algorithm, protocol, n_ranks, bus_Bps)
    return max(1.0, min(float(channels), nbytes / unit))
