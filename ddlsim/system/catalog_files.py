"""Reading and validating the catalog data files (``ddlsim/system/data/*.json``).

Every figure is checked (missing or unknown key, non-positive bandwidth, efficiency outside
(0, 1], unknown transport, a figure without a source) and converted from the file's human units
to SI once; :class:`_Catalog` holds the result. The public look-ups and the cluster builder are
in :mod:`ddlsim.system.catalog`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ddlsim.errors import CatalogError, UnknownNameError
from ddlsim.system.catalog_check import (  # noqa: F401  (re-exported: the limits' one home)
    DEFAULT_INTER_NODE,
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_NICS_PER_NODE,
    NONE,
    SCHEMA_VERSION,
    PathLike,
    _Checker,
    _data_file,
    _norm,
    _read_json,
)
from ddlsim.system.catalog_devices import (  # noqa: F401  (re-exported for catalog and tests)
    ARCH,
    CLOCKS,
    DEVICE_KINDS,
    GPU_ARCHS,
    SM_COUNT,
    TF32,
    _parse_devices,
)
from ddlsim.system.network_speeds import GRAMMAR, stated_network
from ddlsim.system.specs import TRANSPORTS, DeviceSpec, LinkSpec
from ddlsim.units import GBps_to_Bps, gbps_to_Bps, us_to_s

#: NCCL's latency classes of an intra-node hop (rows of its tuning tables)
NCCL_HOPS = ("nvlink", "pcie")
_BANDWIDTH_KEY = {"intra": "bandwidth_GBps", "host": "bandwidth_GBps", "inter": "bandwidth_Gbps"}
_LINK_COMMON = ("description", "efficiency", "latency_us", "default_transport")
#: optional link flag: true while only the datasheet vouches for the entry (reports say so)
_DATASHEET_ONLY = "datasheet_only"
_LINK_KEYS = {
    "intra": frozenset(
        {*_LINK_COMMON, "bandwidth_GBps", "gpus_per_pcie_switch", "max_gpus"}
        | {"nccl_hop", "nccl_channels", "nvlink_peers", "nvls", "sources", "assumptions"}
        | {_DATASHEET_ONLY}
    ),
    "host": frozenset({*_LINK_COMMON, "bandwidth_GBps", "sources", "assumptions", _DATASHEET_ONLY}),
    "inter": frozenset(
        {*_LINK_COMMON, "bandwidth_Gbps", "instance", "by_gpu", "nccl_transport"}
        | {"sources", "assumptions", _DATASHEET_ONLY}
    ),
}
_BY_GPU_KEYS = frozenset({"instance", "bandwidth_Gbps", "efficiency", "source"})


# --------------------------------------------------------------------------- loaded catalog


@dataclass(frozen=True)
class _Catalog:
    """Everything the two data files say, validated and in SI units."""

    devices: dict[str, DeviceSpec]
    aliases: dict[str, str]
    node_gpus: dict[str, int]  # device id -> GPUs per node of its reference server
    default_intra: dict[str, str]  # device id -> intra fabric id of its reference server
    #: device id -> (network id, NICs per node, source) of its reference server's cluster
    default_network: dict[str, tuple[str, int, str]]
    intra: dict[str, LinkSpec]
    inter: dict[str, LinkSpec]
    host: dict[str, LinkSpec]
    max_gpus: dict[str, int | None]  # intra fabric id -> GPUs it can connect (None: no limit)
    by_gpu: dict[tuple[str, str], tuple[LinkSpec, str]]  # (network, device) -> (link, instance)
    instances: dict[str, str]  # cloud network id -> instance type its default figures describe

    def device_id(self, name: object) -> str:
        key = _norm(name)
        if key in self.devices:
            return key
        if key in self.aliases:
            return self.aliases[key]
        raise UnknownNameError("gpu", name, [*self.devices, *self.aliases])

    def intra_id(self, name: object) -> str:
        key = _norm(name)
        if key not in self.intra:
            raise UnknownNameError("intra_node link", name, self.intra)
        return key

    def inter_id(self, name: object) -> str:
        """A catalogued network's id, or a stated speed's (:mod:`network_speeds`; ``ib-400``
        is ``ib-ndr``); UnknownNameError naming the valid ids and the grammar."""
        key = _norm(name).replace(" ", "")
        if key in self.inter:
            return key
        stated = stated_network(key, self.inter) if isinstance(name, str) else None
        if stated is None:
            raise UnknownNameError("inter_node network", name, [*self.inter, GRAMMAR])
        return stated.id

    def inter_link(self, inter_id: str) -> LinkSpec:
        """The network ``inter_id`` (an id :meth:`inter_id` returned)."""
        if inter_id in self.inter:
            return self.inter[inter_id]
        stated = stated_network(inter_id, self.inter)
        if stated is None:
            raise UnknownNameError("inter_node network", inter_id, [*self.inter, GRAMMAR])
        return stated

    def network(self, inter_id: str, device_id: str | None) -> tuple[LinkSpec, str | None]:
        """The network ``inter_id`` as seen by ``device_id`` (cloud instance type applied)."""
        if device_id is not None and (inter_id, device_id) in self.by_gpu:
            return self.by_gpu[(inter_id, device_id)]
        return self.inter_link(inter_id), self.instances.get(inter_id)


def _parse_links(doc: dict[str, Any], file: str) -> dict[str, Any]:
    sections: dict[str, dict[str, LinkSpec]] = {}
    max_gpus: dict[str, int | None] = {}
    raw_by_gpu: dict[str, dict[str, Any]] = {}
    instances: dict[str, str] = {}
    for scope in ("intra", "host", "inter"):
        table = _Checker(file, "top level").obj(doc.get(scope), scope)
        sections[scope] = {}
        for link_id, raw in table.items():
            check = _Checker(file, f"{scope} entry {link_id!r}")
            check.identifier(link_id)
            entry = check.obj(raw, None)
            bw_key = _BANDWIDTH_KEY[scope]
            required = frozenset({*_LINK_COMMON, bw_key, "sources"})
            if scope == "intra":
                required |= {"gpus_per_pcie_switch", "max_gpus", "nccl_hop", "nccl_channels"}
            if scope == "inter":
                required |= {"nccl_transport"}
            check.keys(entry, required, _LINK_KEYS[scope])
            figures = ["efficiency", "latency_us"]
            if link_id == NONE:
                if entry[bw_key] is not None:
                    raise check.fail(bw_key, "the 'none' entry must have a null bandwidth")
                nominal = math.inf
            else:
                if entry[bw_key] is None:
                    raise check.fail(bw_key, "only the 'none' entry may have a null bandwidth")
                value = check.number(entry[bw_key], bw_key)
                nominal = gbps_to_Bps(value) if scope == "inter" else GBps_to_Bps(value)
                figures.append(bw_key)
            default = entry["default_transport"]
            if default not in TRANSPORTS:
                raise check.fail(
                    "default_transport",
                    f"unknown transport {default!r}; valid: {', '.join(TRANSPORTS)}",
                )
            efficiency = check.per_transport(entry["efficiency"], "efficiency", fraction=True)
            latency = check.per_transport(entry["latency_us"], "latency_us", fraction=False)
            per_switch = 0
            nccl: dict[str, Any] = {}
            if scope == "intra":
                per_switch = check.count(entry["gpus_per_pcie_switch"], "gpus_per_pcie_switch")
                limit = entry["max_gpus"]
                max_gpus[link_id] = None if limit is None else check.count(limit, "max_gpus")
                figures.append("gpus_per_pcie_switch")
                if limit is not None:
                    figures.append("max_gpus")
                nccl = _nccl_fields(check, entry, limit)
                figures += list(nccl)
            if scope == "inter":
                nccl["nccl_transport"] = check.choice(entry, "nccl_transport", TRANSPORTS)
                figures.append("nccl_transport")
            flag = check.flag(entry.get(_DATASHEET_ONLY, False), _DATASHEET_ONLY)
            sections[scope][link_id] = LinkSpec(
                id=link_id,
                scope=scope,
                nominal_bandwidth_Bps=nominal,
                efficiency=efficiency,
                latency_s={t: us_to_s(v) for t, v in latency.items()},
                default_transport=default,
                description=check.text(entry, "description"),
                gpus_per_pcie_switch=per_switch,
                sources=check.documented(entry, figures),
                datasheet_only=flag,
                **nccl,
            )
            if "instance" in entry:
                instances[link_id] = check.text(entry, "instance")
            if "by_gpu" in entry:
                raw_by_gpu[link_id] = check.obj(entry["by_gpu"], "by_gpu")
    for scope in ("intra", "inter"):
        if NONE not in sections[scope]:
            raise CatalogError(f"{file}: section {scope!r} has no {NONE!r} entry")
    return {**sections, "max_gpus": max_gpus, "raw_by_gpu": raw_by_gpu, "instances": instances}


def _parse_by_gpu(
    links: dict[str, Any], devices: dict[str, DeviceSpec], file: str
) -> dict[tuple[str, str], tuple[LinkSpec, str]]:
    out: dict[tuple[str, str], tuple[LinkSpec, str]] = {}
    for link_id, table in links["raw_by_gpu"].items():
        base: LinkSpec = links["inter"][link_id]
        for device_id, raw in table.items():
            check = _Checker(file, f"inter entry {link_id!r}, by_gpu {device_id!r}")
            if device_id not in devices:
                raise check.fail(None, f"unknown device id; valid: {', '.join(sorted(devices))}")
            entry = check.obj(raw, None)
            check.keys(entry, frozenset({"instance", "bandwidth_Gbps", "source"}), _BY_GPU_KEYS)
            efficiency = base.efficiency
            if "efficiency" in entry:
                efficiency = check.per_transport(entry["efficiency"], "efficiency", fraction=True)
            instance = check.text(entry, "instance")
            link = replace(
                base,
                nominal_bandwidth_Bps=gbps_to_Bps(
                    check.number(entry["bandwidth_Gbps"], "bandwidth_Gbps")
                ),
                efficiency=efficiency,
                description=f"{base.description} [{instance}]",
                sources={**base.sources, "bandwidth_Gbps": check.text(entry, "source")},
            )
            out[(link_id, device_id)] = (link, instance)
    return out


def _load_catalog(
    devices_path: PathLike | None = None, links_path: PathLike | None = None
) -> _Catalog:
    """Load and validate the catalog from the given files (default: the shipped ones).

    Internal: tests point it at corrupted copies; everything else uses the cached default.
    """
    links_doc, links_file = _read_json(links_path or _data_file("links.json"))
    devices_doc, devices_file = _read_json(devices_path or _data_file("devices.json"))
    links = _parse_links(links_doc, links_file)
    devices = _parse_devices(devices_doc, devices_file, links)
    return _Catalog(
        **devices,
        intra=links["intra"],
        inter=links["inter"],
        host=links["host"],
        max_gpus=links["max_gpus"],
        by_gpu=_parse_by_gpu(links, devices["devices"], links_file),
        instances=links["instances"],
    )


@lru_cache(maxsize=1)
def _catalog() -> _Catalog:
    return _load_catalog()


def _nccl_fields(check: _Checker, entry: dict[str, Any], max_gpus: object) -> dict[str, Any]:
    """An intra fabric's NCCL fields: its hop class, channels, and where stated the NVLink
    peers and whether the switch reduces (``nvls``, NVLink SHARP)."""
    nccl: dict[str, Any] = {
        "nccl_hop": check.choice(entry, "nccl_hop", NCCL_HOPS),
        "nccl_channels": check.count(entry["nccl_channels"], "nccl_channels"),
    }
    if "nvlink_peers" in entry:
        nccl["nvlink_peers"] = _peers(check, entry["nvlink_peers"], max_gpus)
    if "nvls" in entry:
        nccl["nvls"] = check.flag(entry["nvls"], "nvls")
    return nccl


def _peers(check: _Checker, raw: object, max_gpus: object) -> tuple[frozenset[int], ...]:
    """``nvlink_peers``: one list per GPU of a node (``max_gpus`` of them) of the GPUs it
    reaches over NVLink; a link joins both ends."""
    if not isinstance(raw, list) or len(raw) != max_gpus:
        raise check.fail("nvlink_peers", f"must list the peers of each of the {max_gpus} GPUs")
    peers: list[frozenset[int]] = []
    for i, row in enumerate(raw):
        ok = isinstance(row, list) and all(type(j) is int and 0 <= j < len(raw) for j in row)
        if not ok or i in row:
            raise check.fail("nvlink_peers", f"GPU {i}: peers must be other GPUs' indices")
        peers.append(frozenset(row))
    for i, row in enumerate(peers):
        for j in row:
            if i not in peers[j]:
                raise check.fail("nvlink_peers", f"GPU {i} lists {j} but {j} does not list {i}")
    return tuple(peers)
