"""Hardware descriptions: a GPU, a link, and the resolved cluster the engines simulate.

All fields are SI (seconds, bytes, bytes/second, FLOP/s). Catalog files use human units and are
converted once by :mod:`ddlsim.system.catalog`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TRANSPORTS = ("tcp", "rdma")


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU (or other accelerator) as the framework sees it.

    ``peak_fp16_flops`` is the dense half-precision throughput mixed precision can use (tensor
    cores where present); ``None`` where the device has no fast fp16 path (K80, P40), in which case
    ``--precision amp`` is refused. ``kind`` is ``gpu``, or ``cpu`` for a CPU core used as a
    worker (its tensors live in host memory: no device<->host copies, sums on the core).
    ``sm_count`` is a GPU's number of streaming multiprocessors (the per-layer kernel model
    schedules thread blocks on them in waves: :mod:`ddlsim.compute.kernels`); ``None`` for a CPU.
    ``peak_tf32_flops`` is the dense TF32 tensor-core throughput (Ampere and later; ``None``
    before): fp32 convolutions and matrix products run on it unless TF32 is turned off.
    ``base_clock_hz`` / ``boost_clock_hz`` / ``max_power_w``: the product brief's clocks and
    power limit where catalogued (the peaks are at the boost clock): the GEMM route's clock under
    a long dense load (:mod:`ddlsim.compute.gpu_clock`); the convolution model times at the
    peaks. ``peak_fp8_flops`` / ``peak_fp4_flops``: dense fp8 (Hopper and later)
    and fp4 (Blackwell) tensor-core peaks, descriptive (reported, not yet timed).
    ``datasheet_only``: no measured run has checked the entry yet (reports say so).
    """

    id: str
    name: str
    peak_fp32_flops: float
    peak_fp16_flops: float | None
    mem_bandwidth_Bps: float
    memory_bytes: int
    host_link: str  # id of the GPU<->host link in the link catalog (pcie3, pcie4, ...)
    host_cpu_threads: int = 0  # hardware threads of the reference server's CPUs (0: unknown)
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    kind: str = "gpu"  # "gpu" | "cpu" (a CPU core as the worker device)
    sm_count: int | None = None  # streaming multiprocessors (GPUs); NCCL's CTAs occupy some
    arch: str = "pascal"  # GPU architecture generation (NCCL protocols, caps); "cpu" for CPUs
    peak_tf32_flops: float | None = None  # dense TF32 tensor-core peak (Ampere+)
    base_clock_hz: float | None = None  # product brief's base clock (None: not catalogued)
    boost_clock_hz: float | None = None  # the clock the peaks are quoted at
    max_power_w: float | None = None  # the board's power limit (TDP)
    #: the clock the tensor-core peaks are quoted at where not the boost clock (Hopper)
    tensor_clock_hz: float | None = None
    peak_fp8_flops: float | None = None  # dense fp8 tensor-core peak (Hopper+; None: none)
    peak_fp4_flops: float | None = None  # dense fp4 tensor-core peak (Blackwell; None: none)
    #: True while only the datasheet vouches for the entry (no measured run checks it yet)
    datasheet_only: bool = False
    #: the catalog part whose compute this one is (the same die, clocks and bandwidth with
    #: another memory size: the 32 GB V100 SXM2 of the 16 GB one): its calibrations serve both
    silicon_of: str | None = None


@dataclass(frozen=True)
class LinkSpec:
    """A link or network as catalogued (nominal, per direction).

    For an intra-node fabric the bandwidth is what one GPU can send to its ring neighbour while
    every GPU of the node does the same (the bus bandwidth a ring sees); for a network it is the
    node's NIC. ``efficiency`` maps a transport to the fraction of nominal bandwidth achieved and
    ``latency_s`` maps it to the per-message latency (software + wire).
    """

    id: str
    scope: str  # "intra" | "inter" | "host"
    nominal_bandwidth_Bps: float
    efficiency: dict[str, float]
    latency_s: dict[str, float]
    default_transport: str
    description: str = ""
    gpus_per_pcie_switch: int = 0  # intra fabrics on PCIe: GPUs sharing one switch uplink
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    nccl_hop: str = "pcie"  # intra fabrics: NCCL's latency class of a hop (nvlink | pcie)
    nccl_channels: int = 2  # intra fabrics: channels (rings, one CTA each) NCCL opens
    #: intra fabrics of a fixed topology: the GPUs each GPU reaches over its own NVLink
    #: (empty: every pair is alike, e.g. PCIe or NVSwitch)
    nvlink_peers: tuple[frozenset[int], ...] = ()
    #: intra fabrics: the switch reduces and multicasts (NVLink SHARP, NCCL's NVLS)
    nvls: bool = False
    nccl_transport: str = ""  # networks: the transport NCCL picks when none is given
    #: True while only the datasheet vouches for the entry (no measured run checks it yet)
    datasheet_only: bool = False
    #: the catalog part whose compute this one is (the same die, clocks and bandwidth with
    #: another memory size: the 32 GB V100 SXM2 of the 16 GB one): its calibrations serve both
    silicon_of: str | None = None

    def bandwidth_Bps(self, transport: str | None = None) -> float:
        """Achievable bandwidth per direction over ``transport`` (default: the link's own)."""
        return self.nominal_bandwidth_Bps * self.efficiency[transport or self.default_transport]

    def message_latency_s(self, transport: str | None = None) -> float:
        """Per-message latency over ``transport`` (default: the link's own)."""
        return self.latency_s[transport or self.default_transport]


@dataclass(frozen=True)
class Hop:
    """A resolved point-to-point path: effective bandwidth per direction and per-message latency."""

    bandwidth_Bps: float
    latency_s: float

    def time_s(self, nbytes: float) -> float:
        """Time to move ``nbytes`` over the hop (one message)."""
        return self.latency_s + nbytes / self.bandwidth_Bps


@dataclass(frozen=True)
class Cluster:
    """A homogeneous data-parallel cluster: ``n_gpus`` GPUs, ``gpus_per_node`` per node.

    ``intra`` is the GPU-to-GPU hop inside a node (``None`` for one GPU per node), ``nic`` the hop
    between nodes through the node's NIC(s) (``None`` for a single node), ``host`` the GPU<->host
    PCIe hop (device-to-host copies, CPU reductions, gRPC staging). ``nics_per_node`` NICs share
    the node's traffic. ``host_reduce_Bps`` is the CPU's summation bandwidth (bytes of input
    reduced per second) used by parameter servers. ``socket_flow_cap_Bps`` is what the provider
    lets one TCP flow carry (EC2: 5 Gb/s, 10 inside a cluster placement group; inf where none
    is documented) and ``socket_vendor`` the NIC vendor NCCL's socket transport reads to pick
    its threads and sockets per connection (``aws``, ``gcp``; empty: any other).
    """

    device: DeviceSpec
    n_gpus: int
    gpus_per_node: int
    intra_link: str
    inter_link: str
    transport: str
    intra: Hop | None
    nic: Hop | None
    host: Hop
    gpus_per_pcie_switch: int
    nics_per_node: int = 1
    host_reduce_Bps: float = 10e9
    nccl_hop: str = "pcie"  # NCCL latency class of an intra-node hop: nvlink | pcie
    nccl_channels: int = 2  # channels NCCL runs (one CTA, i.e. one SM, each)
    #: how the network was chosen when the job named none ("" when it named one, or one node)
    network_default: str = field(default="", compare=False)
    socket_flow_cap_Bps: float = math.inf  # one TCP flow's cap (provider), inf: none
    socket_vendor: str = ""  # NIC vendor for NCCL's socket defaults: aws | gcp | ""
    #: the GPUs each GPU of a node reaches over its own NVLink (empty: every pair alike)
    nvlink_peers: tuple[frozenset[int], ...] = ()
    #: a GPU-to-GPU hop without peer access, staged through host memory (the intra fabric's
    #: ``tcp`` figure); None on one GPU per node
    staged: Hop | None = None
    #: the intra-node switch reduces and multicasts (NVLink SHARP: NCCL's NVLS algorithms)
    nvls: bool = False

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return self.n_gpus // self.gpus_per_node if self.n_gpus >= self.gpus_per_node else 1

    @property
    def local_gpus(self) -> int:
        """GPUs used on each node."""
        return min(self.n_gpus, self.gpus_per_node)

    def node_of(self, rank: int) -> int:
        """Node index of GPU ``rank`` (ranks are packed node by node)."""
        return rank // self.local_gpus
