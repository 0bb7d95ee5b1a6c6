"""Host CPUs of GPU servers (``data/hosts.json``): what one core streams through memory.

Horovod's allreduce over MPI runs on the host, in one MPI progress thread per process
(:mod:`ddlsim.comm.mpi`), so its rate is a single core's, not the node's or the wire's. The
catalog gives each CPU generation one core's memcpy rate; a GPU's host is the generation that
brought its PCIe generation to GPU servers (the reference servers of ``devices.json``), a CPU
worker's the machine the figures were measured on.

For CPU offload the catalog also gives each generation's reference server (the DGX of its
time): its DRAM's sustained bandwidth (the datasheet peak times what STREAM Triad sustains of
it), its installed DRAM and its cores (:attr:`HostCPU.node_mem_Bps`, ``node_dram_bytes``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ddlsim.errors import UnknownNameError
from ddlsim.system.specs import DeviceSpec


@dataclass(frozen=True)
class HostCPU:
    """One CPU generation: ``core_copy_Bps`` is one core's memcpy of a large buffer (bytes of
    the buffer per second); its reference server's sustained DRAM bandwidth (bytes read plus
    written per second), installed DRAM and physical cores (None where unknown)."""

    id: str
    name: str
    core_copy_Bps: float
    source: str
    node_mem_Bps: float | None = None
    node_dram_bytes: float | None = None
    node_cores: int | None = None

    @property
    def core_mem_Bps(self) -> float:
        """One core's streaming rate, bytes read plus written (STREAM's accounting: a memcpy
        reads and writes each byte of its buffer)."""
        return 2.0 * self.core_copy_Bps


def _cpu(key: str, e: dict) -> HostCPU:
    peak, fraction = e.get("node_mem_peak_GBps"), e.get("stream_fraction")
    dram = e.get("node_dram_GB")
    return HostCPU(
        key,
        e["name"],
        e["core_copy_GBps"] * 1e9,
        e["source"],
        node_mem_Bps=peak * fraction * 1e9 if peak and fraction else None,
        node_dram_bytes=dram * 1e9 if dram else None,
        node_cores=e.get("node_cores"),
    )


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, HostCPU], dict[str, str]]:
    text = resources.files("ddlsim.system").joinpath("data", "hosts.json").read_text("utf-8")
    doc = json.loads(text)
    cpus = {key: _cpu(key, e) for key, e in doc["cpus"].items()}
    return cpus, dict(doc["by_host_link"])


def host_cpu_names() -> tuple[str, ...]:
    """The catalogued CPU generations."""
    return tuple(_table()[0])


def host_cpu(name: str) -> HostCPU:
    """The CPU generation ``name``; UnknownNameError listing the catalogued ones."""
    cpus = _table()[0]
    key = str(name).strip().lower()
    if key not in cpus:
        raise UnknownNameError("host CPU", name, cpus)
    return cpus[key]


def default_host_cpu(device: DeviceSpec) -> HostCPU:
    """The host of ``device``'s servers: by its host link's PCIe generation (a CPU worker:
    the measured machine); the newest generation for a link the table does not name."""
    cpus, by_link = _table()
    return cpus[by_link.get(device.host_link, by_link["pcie5"])]
