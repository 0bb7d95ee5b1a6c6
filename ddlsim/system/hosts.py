"""Host CPUs of GPU servers (``data/hosts.json``): what one core streams through memory.

Horovod's allreduce over MPI runs on the host, in one MPI progress thread per process
(:mod:`ddlsim.comm.mpi`), so its rate is a single core's, not the node's or the wire's. The
catalog gives each CPU generation one core's memcpy rate; a GPU's host is the generation that
brought its PCIe generation to GPU servers (the reference servers of ``devices.json``), a CPU
worker's the machine the figures were measured on.
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
    the buffer per second)."""

    id: str
    name: str
    core_copy_Bps: float
    source: str


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, HostCPU], dict[str, str]]:
    text = resources.files("ddlsim.system").joinpath("data", "hosts.json").read_text("utf-8")
    doc = json.loads(text)
    cpus = {
        key: HostCPU(key, e["name"], e["core_copy_GBps"] * 1e9, e["source"])
        for key, e in doc["cpus"].items()
    }
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
