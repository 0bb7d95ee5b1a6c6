"""Hardware as benchmark logs and published tables name it -> ddlsim's catalog names.

Collective benchmarks print what the driver calls a device (``NVIDIA H100 80GB HBM3``,
``Tesla V100-SXM2-32GB``) and publications describe fabrics and networks in prose (``NVLink
(hybrid cube mesh)``, ``efa (p4d, 4x100G)``, ``roce 100G x8``). These functions map such text
onto the catalog where the text determines the entry, and return ``None`` (with the reason)
where it does not: a GPU the catalog lacks, a network whose speed is not stated, a fabric
ddlsim does not describe. Nothing is guessed from context that the text does not carry,
except what a named platform implies (an SXM2 V100 is the only V100 with NVLink besides the
DGX-2's SXM3, so ``V100`` with NVLink is ``v100-sxm2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddlsim.system import catalog

#: transports as logs and tables spell them -> ddlsim's (tcp: NCCL's sockets / kernel TCP;
#: rdma: InfiniBand verbs, RoCE, AWS EFA's SRD through libfabric)
_TRANSPORT_WORDS = (
    ("socket", "tcp"),
    ("tcp", "tcp"),
    ("efa", "rdma"),
    ("libfabric", "rdma"),
    ("ofi", "rdma"),
    ("roce", "rdma"),
    ("rdma", "rdma"),
    ("verbs", "rdma"),
    ("gib", "rdma"),  # Google Cloud's gIB: NCCL's IB-verbs plugin over RoCE (A3 Ultra, A4)
    ("net/ib", "rdma"),
    ("ib", "rdma"),
)


@dataclass(frozen=True)
class Mapped:
    """A catalog name (``name``) or why there is none (``reason``)."""

    name: str | None
    reason: str = ""


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", " ", text.lower()).strip()


def gpu_name(text: str, intra_hint: str = "") -> Mapped:
    """The catalog GPU a device string names (``intra_hint``: the fabric text, which tells an
    NVLink V100 / P100 from a PCIe one when the device string does not)."""
    words = _words(text)
    nvlink = "nvlink" in _words(intra_hint) or "nvswitch" in _words(intra_hint)
    if not words:
        return Mapped(None, "GPU not stated")
    if re.search(r"\bgb200\b", words):
        return Mapped("gb200")
    for part in ("b200", "h200", "h20", "t4"):
        if re.search(rf"\b{part}\b", words):
            return Mapped(part)
    if "h100" in words:
        if "pcie" in words or " nvl" in f" {words}":
            return Mapped(None, f"GPU {text!r}: only the SXM5 H100 is in the catalog")
        return Mapped("h100")
    if "a100" in words:
        if "pcie" in words or "nv12" in _words(intra_hint) or "bridge" in _words(intra_hint):
            return Mapped(None, f"GPU {text!r}: only the SXM4 A100 (NVSwitch) is in the catalog")
        return Mapped("a100")
    for part in ("v100", "p100"):
        if part in words:
            if "sxm3" in words:
                return Mapped("v100-sxm3" if part == "v100" else None, f"GPU {text!r}")
            if "sxm2" in words or (nvlink and "pcie" not in words):
                return Mapped(f"{part}-sxm2")
            if "pcie" in words or "pcie" in _words(intra_hint):
                return Mapped(f"{part}-pcie")
            return Mapped(None, f"GPU {text!r}: PCIe or SXM2 not stated")
    if "k80" in words:
        return Mapped("k80")
    if re.search(r"\bp40\b", words):
        return Mapped("p40")
    try:
        return Mapped(catalog.device(text.strip()).id)
    except Exception:
        return Mapped(None, f"GPU {text!r} is not in the catalog")


def intra_name(text: str, gpu: str) -> Mapped:
    """The catalog intra-node fabric of ``gpu`` that ``text`` describes."""
    words = _words(text)
    if not words or words.startswith("none") or "unused" in words:
        return Mapped("none")
    default = catalog.device(gpu)
    usual = _usual_intra(gpu)
    if "bridge" in words or "nv12" in words:
        return Mapped(None, f"intra-node {text!r}: NVLink bridges are not in the catalog")
    if "nvswitch" in words or "nvlink" in words:
        if catalog.intra_link(usual).nccl_hop != "nvlink":
            return Mapped(None, f"intra-node {text!r} on {default.id}: no NVLink fabric")
        return Mapped(usual)
    if "pcie" in words:
        if re.search(r"gen ?[45]|pcie ?[45]", words):
            return Mapped(None, f"intra-node {text!r}: only PCIe 3.0 fabrics are in the catalog")
        return Mapped("pcie3")
    try:
        return Mapped(catalog.intra_link(text.strip()).id)
    except Exception:
        return Mapped(None, f"intra-node {text!r} is not a catalog fabric")


def _usual_intra(gpu: str) -> str:
    return catalog._catalog().default_intra[catalog.device(gpu).id]


#: network words -> catalog network (InfiniBand generations, AWS EFA, Google Cloud's
#: GPUDirect-TCPX(O) and the machine types that carry them: a3-highgpu TCPX, a3-megagpu TCPXO)
_NETWORK_WORDS = (
    ("tcpxo", "gcp-tcpxo"),
    ("a3mega", "gcp-tcpxo"),
    ("tcpx", "gcp-tcpx"),
    ("a3high", "gcp-tcpx"),
    ("xdr", "ib-xdr"),
    ("ndr", "ib-ndr"),
    ("hdr", "ib-hdr"),
    ("edr", "ib-edr"),
    ("fdr", "ib-fdr"),
    ("efa", "efa"),
)


def network_name(text: str) -> Mapped:
    """The catalog network ``text`` names: an InfiniBand generation or speed (``ib 400G``), AWS
    EFA, Google Cloud's GPUDirect-TCPX(O), or an Ethernet of a stated speed (``100gbe``,
    ``tcp100g``, ``roce 100G``, ``ec2-ena 100G``, ``gcp-32gbe``: any speed, as the catalog's
    stated-speed grammar takes it). ``ib`` alone is InfiniBand of unstated generation."""
    words = _words(text)
    if not words or words.startswith("none") or "single node" in words:
        return Mapped("none")
    try:
        return Mapped(catalog.network(text.strip()).id)
    except Exception:
        pass
    ib_speed = re.match(r"(?:ib|infiniband) (\d+)\s*g(?:b|bps|bit)?\b", words)
    if ib_speed:
        return Mapped(catalog.network(f"ib-{ib_speed[1]}").id)
    first = text.strip().lower().split()[0].strip("(),;")
    if first in catalog.inter_link_names():
        return Mapped(first)
    for word, name in _NETWORK_WORDS:
        if re.search(rf"\b{word}\b", words):
            return Mapped(name)
    ethernet = re.search(r"(\d+)\s*g(?:b|be|bps|bit)?\b", words)
    is_ethernet = any(w in words for w in ("gbe", "roce", "ena", "ethernet", "tcp"))
    if ethernet and is_ethernet:  # a catalogued speed, or any other as stated (32gbe)
        return Mapped(catalog.network(f"{ethernet[1]}gbe").id)
    if words.split()[0] in ("ib", "infiniband"):
        return Mapped("ib")
    return Mapped(None, f"network {text!r}: no catalog network (speed or kind not stated)")


def transport_name(text: str) -> Mapped:
    """``tcp`` or ``rdma`` for a transport as logs and tables spell it."""
    words = f" {_words(text)} "
    if not words.strip():
        return Mapped(None, "transport not stated")
    if "tcpx" in words:  # GPUDirect-TCPX(O): TCP with the payload in GPU memory (gcp-tcpx*)
        return Mapped("tcp")
    for word, name in _TRANSPORT_WORDS:
        if f" {word} " in words or words.startswith(f" {word}"):
            return Mapped(name)
    return Mapped(None, f"transport {text!r} is not tcp or rdma")


def nccl_version_text(text: str) -> str | None:
    """``major.minor`` of a version cell or log line (``2.4.7ms0 (...)`` -> ``2.4``)."""
    match = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", text or "")
    return f"{match[1]}.{match[2]}" if match else None
