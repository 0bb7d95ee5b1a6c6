"""Cloud GPU instances by name (``--instance``): the GPU, GPUs per node, their fabric, the
network and its adapters, from the providers' published instance tables
(``data/instances.json``, a source per instance).

An instance fills the system settings a job leaves unset; a setting the job gives that
contradicts the instance (``--instance p3.16xlarge --gpu a100``) is refused with one line. A
name ddlsim does not model is refused with the nearest names, or the reason it is not modelled.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.system.specs import Cluster


@dataclass(frozen=True)
class Instance:
    """One instance type: its GPUs, the fabric between them, the network and its adapters."""

    name: str
    gpu: str
    gpus: int
    intra: str
    network: str
    nics: int
    source: str
    transport: str
    nic_vendor: str = ""  # NCCL's socket defaults by NIC vendor: aws | gcp | "" (others)
    flow_cap_Gbps: float | None = None  # the provider's cap on one TCP flow (None: none)


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, Instance], dict[str, str]]:
    text = resources.files("ddlsim.system").joinpath("data", "instances.json").read_text("utf-8")
    doc = json.loads(text)
    instances = {
        name: Instance(
            name,
            e["gpu"],
            e["gpus"],
            e["intra"],
            e["network"],
            e["nics"],
            e["source"],
            e["transport"],
            e.get("nic_vendor", ""),
            e.get("flow_cap_Gbps"),
        )
        for name, e in doc["instances"].items()
    }
    return instances, dict(doc["not_modelled"])


def instance_names() -> tuple[str, ...]:
    """The instances ddlsim models, by name."""
    return tuple(_table()[0])


def instance(name: str) -> Instance:
    """The instance ``name`` (any case); ConfigError naming the nearest names, or why it is
    not modelled."""
    instances, not_modelled = _table()
    key = str(name).strip().lower()
    if key in instances:
        return instances[key]
    for prefix, reason in not_modelled.items():
        if key == prefix or key.startswith(prefix + "."):
            raise ConfigError(f"instance {name!r} is not modelled: {reason}")
    near = difflib.get_close_matches(key, list(instances), n=4, cutoff=0.4)
    listed = ", ".join(near) if near else ", ".join(instances)
    raise ConfigError(f"unknown instance {name!r}; nearest: {listed}")


def _same(key: str, mine: Any, theirs: Any) -> bool:
    """Whether a given setting names the instance's (a GPU by any of its catalog names)."""
    if key == "gpu":
        from ddlsim.system import catalog

        return catalog.device(str(mine)).id == catalog.device(str(theirs)).id
    return str(mine).strip().lower() == str(theirs).strip().lower()


def with_instance(settings: dict[str, Any], name: str) -> dict[str, Any]:
    """``settings`` (the system's ``gpu``, ``gpus_per_node``, ``intra_node``, ``inter_node``,
    ``nics_per_node``, ``transport``) with the instance's where they are unset (None;
    ``nics_per_node`` 1); a set value that differs from the instance's is a ConfigError naming
    both."""
    inst = instance(name)
    theirs = {
        "gpu": inst.gpu,
        "gpus_per_node": inst.gpus,
        "intra_node": inst.intra,
        "inter_node": inst.network,
        "nics_per_node": inst.nics,
        "transport": inst.transport,
    }
    out = dict(settings)
    for key, value in theirs.items():
        mine = settings.get(key)
        unset = mine is None or (key == "nics_per_node" and mine == 1)
        if unset:
            out[key] = value
        elif not _same(key, mine, value):
            flag = "--" + key.replace("_", "-")
            raise ConfigError(
                f"{flag} {mine} contradicts --instance {inst.name}, which has {value} "
                f"({inst.source})"
            )
    return out


def with_sockets(cluster: Cluster, name: str | None) -> Cluster:
    """``cluster`` with instance ``name``'s NIC vendor and per-flow cap (unchanged for None or
    a name without them)."""
    if name is None or str(name).strip().lower() not in _table()[0]:
        return cluster
    inst = instance(name)
    cap = math.inf if inst.flow_cap_Gbps is None else inst.flow_cap_Gbps * 1e9 / 8
    return replace(cluster, socket_vendor=inst.nic_vendor, socket_flow_cap_Bps=cap)
