"""Device and link catalogs, and the cluster builder.

Owns the shipped data files ``ddlsim/cluster/data/devices.json`` (GPUs) and
``ddlsim/cluster/data/links.json`` (intra-node fabrics, GPU<->host links, networks). The files
use human units in their key names (``peak_fp32_TFLOPS``, ``bandwidth_GBps``, ``bandwidth_Gbps``,
``latency_us``, ``memory_GiB``); this module validates them and converts them to SI once, on
first use (FLOP/s, bytes/s, seconds, bytes), then caches the result.

:func:`build_cluster` turns a GPU name, a GPU count and optional link names into the resolved
:class:`~ddlsim.cluster.specs.Cluster` the engines simulate. Its defaults, in order:

* ``gpus_per_node`` = min(``n_gpus``, the device's reference node size (8; 16 for the DGX-2's
  v100-sxm3), the ``intra_node`` fabric's GPU limit when one is given);
* ``intra_node`` = ``"none"`` when ``gpus_per_node`` is 1, else the device's reference fabric
  (pcie3 for PCIe parts and K80/P40, nvlink-p100 / nvlink-v100 for SXM2, nvswitch for
  v100-sxm3, nvlink-a100 / nvlink-h100);
* ``inter_node`` = ``"ib-edr"`` when the cluster spans several nodes, ``"none"`` otherwise;
* ``transport`` = the network's default transport (Ethernet and cloud networks: tcp;
  InfiniBand and Aries: rdma).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ddlsim.cluster.specs import TRANSPORTS, Cluster, DeviceSpec, Hop, LinkSpec
from ddlsim.errors import CatalogError, ConfigError, UnknownNameError
from ddlsim.units import GBps_to_Bps, GiB, gbps_to_Bps, tflops_to_flops, us_to_s

SCHEMA_VERSION = 1
MAX_GPUS = 1_000_000  # more GPUs than any cluster built: an input error
MAX_GPUS_PER_NODE = 64
MAX_NICS_PER_NODE = 64
DEFAULT_INTER_NODE = "ib-edr"
NONE = "none"

if TYPE_CHECKING:
    from importlib.abc import Traversable

PathLike = Union[str, "os.PathLike[str]", "Traversable"]

_DEVICE_FIGURES = (
    "peak_fp32_TFLOPS",
    "peak_fp16_TFLOPS",
    "mem_bandwidth_GBps",
    "memory_GiB",
    "host_link",
    "default_intra_node",
    "default_gpus_per_node",
)
_DEVICE_KEYS = frozenset({"name", "sources", *_DEVICE_FIGURES})
_BANDWIDTH_KEY = {"intra": "bandwidth_GBps", "host": "bandwidth_GBps", "inter": "bandwidth_Gbps"}
_LINK_COMMON = ("description", "efficiency", "latency_us", "default_transport")
_LINK_KEYS = {
    "intra": frozenset(
        {*_LINK_COMMON, "bandwidth_GBps", "gpus_per_pcie_switch", "max_gpus"}
        | {"sources", "assumptions"}
    ),
    "host": frozenset({*_LINK_COMMON, "bandwidth_GBps", "sources", "assumptions"}),
    "inter": frozenset(
        {*_LINK_COMMON, "bandwidth_Gbps", "instance", "by_gpu", "sources", "assumptions"}
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
        key = _norm(name)
        if key not in self.inter:
            raise UnknownNameError("inter_node network", name, self.inter)
        return key

    def network(self, inter_id: str, device_id: str | None) -> tuple[LinkSpec, str | None]:
        """The network ``inter_id`` as seen by ``device_id`` (cloud instance type applied)."""
        if device_id is not None and (inter_id, device_id) in self.by_gpu:
            return self.by_gpu[(inter_id, device_id)]
        return self.inter[inter_id], self.instances.get(inter_id)


def _norm(name: object) -> str:
    return name.strip().lower() if isinstance(name, str) else f"\0{name!r}"


def _data_file(filename: str) -> Traversable:
    from importlib import resources  # lazy: keeps the import of this module cheap

    return resources.files("ddlsim.cluster").joinpath("data").joinpath(filename)


def _read_json(path: PathLike) -> tuple[dict[str, Any], str]:
    source = Path(path) if isinstance(path, (str, os.PathLike)) else path
    label = str(source)
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"{label}: cannot read catalog file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{label}: not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise CatalogError(f"{label}: top level must be an object, got {type(doc).__name__}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CatalogError(
            f"{label}: schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    return doc, label


class _Checker:
    """Validation helpers whose messages name the file, the entry and the key."""

    def __init__(self, file: str, where: str) -> None:
        self.file = file
        self.where = where

    def fail(self, key: str | None, problem: str) -> CatalogError:
        at = f"{self.where}, key {key!r}" if key else self.where
        return CatalogError(f"{self.file}: {at}: {problem}")

    def identifier(self, name: str) -> None:
        # look-ups lower-case and strip the user's spelling, so ids must already be normalised
        if not name or name != name.strip().lower() or " " in name:
            raise self.fail(None, "ids must be non-empty, lower-case and without blanks")

    def obj(self, value: object, key: str | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r}")
        return value

    def keys(
        self, entry: dict[str, Any], required: frozenset[str], optional: frozenset[str]
    ) -> None:
        for key in sorted(required - entry.keys()):
            raise self.fail(key, "missing")
        for key in sorted(entry.keys() - required - optional):
            raise self.fail(key, "unknown key (typo or wrong unit?)")

    def text(self, entry: dict[str, Any], key: str) -> str:
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def number(self, value: object, key: str, *, allow_zero: bool = False) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            kind = "non-negative" if allow_zero else "positive"
            raise self.fail(key, f"must be a {kind} finite number, got {value!r}")
        return float(value)

    def count(self, value: object, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise self.fail(key, f"must be a positive integer, got {value!r}")
        return value

    def per_transport(self, value: object, key: str, *, fraction: bool) -> dict[str, float]:
        table = self.obj(value, key)
        if set(table) != set(TRANSPORTS):
            raise self.fail(key, f"must give exactly {list(TRANSPORTS)}, got {sorted(table)}")
        out = {}
        for transport in TRANSPORTS:
            item = f"{key}.{transport}"
            number = self.number(table[transport], item, allow_zero=not fraction)
            if fraction and number > 1:
                raise self.fail(item, f"efficiency must lie in (0, 1], got {number!r}")
            out[transport] = number
        return out

    def documented(self, entry: dict[str, Any], figures: list[str]) -> dict[str, str]:
        """Merge ``sources`` and ``assumptions``; every figure must be explained by one."""
        sources = self.obj(entry.get("sources", {}), "sources")
        assumptions = self.obj(entry.get("assumptions", {}), "assumptions")
        merged: dict[str, str] = {}
        for table, prefix in ((sources, ""), (assumptions, "assumption: ")):
            for key, value in table.items():
                if not isinstance(value, str) or not value.strip():
                    raise self.fail(key, f"source must be a non-empty string, got {value!r}")
                text = prefix + value
                merged[key] = f"{merged[key]} | {text}" if key in merged else text
        for figure in figures:
            if figure not in merged:
                raise self.fail(figure, "no source or assumption given for this figure")
        return merged


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
                required |= {"gpus_per_pcie_switch", "max_gpus"}
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
            if scope == "intra":
                per_switch = check.count(entry["gpus_per_pcie_switch"], "gpus_per_pcie_switch")
                limit = entry["max_gpus"]
                max_gpus[link_id] = None if limit is None else check.count(limit, "max_gpus")
                figures.append("gpus_per_pcie_switch")
                if limit is not None:
                    figures.append("max_gpus")
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


def _parse_devices(doc: dict[str, Any], file: str, links: dict[str, Any]) -> dict[str, Any]:
    table = _Checker(file, "top level").obj(doc.get("devices"), "devices")
    devices: dict[str, DeviceSpec] = {}
    node_gpus: dict[str, int] = {}
    default_intra: dict[str, str] = {}
    for device_id, raw in table.items():
        check = _Checker(file, f"device {device_id!r}")
        check.identifier(device_id)
        entry = check.obj(raw, None)
        check.keys(entry, _DEVICE_KEYS, frozenset())
        fp32 = check.number(entry["peak_fp32_TFLOPS"], "peak_fp32_TFLOPS")
        fp16 = entry["peak_fp16_TFLOPS"]
        if fp16 is not None:
            fp16 = check.number(fp16, "peak_fp16_TFLOPS")
        host_link = check.text(entry, "host_link")
        if host_link not in links["host"]:
            raise check.fail(
                "host_link",
                f"{host_link!r} is not a host link of links.json; "
                f"valid: {', '.join(sorted(links['host']))}",
            )
        intra = check.text(entry, "default_intra_node")
        if intra not in links["intra"] or intra == NONE:
            valid = ", ".join(sorted(set(links["intra"]) - {NONE}))
            raise check.fail("default_intra_node", f"{intra!r} is not an intra fabric; {valid}")
        per_node = check.count(entry["default_gpus_per_node"], "default_gpus_per_node")
        if per_node > MAX_GPUS_PER_NODE:
            raise check.fail("default_gpus_per_node", f"{per_node} > {MAX_GPUS_PER_NODE}")
        devices[device_id] = DeviceSpec(
            id=device_id,
            name=check.text(entry, "name"),
            peak_fp32_flops=tflops_to_flops(fp32),
            peak_fp16_flops=None if fp16 is None else tflops_to_flops(fp16),
            mem_bandwidth_Bps=GBps_to_Bps(
                check.number(entry["mem_bandwidth_GBps"], "mem_bandwidth_GBps")
            ),
            memory_bytes=round(check.number(entry["memory_GiB"], "memory_GiB") * GiB),
            host_link=host_link,
            sources=check.documented({"sources": entry["sources"]}, list(_DEVICE_FIGURES)),
        )
        node_gpus[device_id] = per_node
        default_intra[device_id] = intra
    if not devices:
        raise CatalogError(f"{file}: no devices")
    aliases: dict[str, str] = {}
    for alias, target in _Checker(file, "top level").obj(doc.get("aliases"), "aliases").items():
        check = _Checker(file, f"alias {alias!r}")
        check.identifier(alias)
        if alias in devices:
            raise check.fail(None, "alias shadows a device id")
        if target not in devices:
            raise check.fail(None, f"points to unknown device {target!r}")
        aliases[alias] = target
    return {
        "devices": devices,
        "aliases": aliases,
        "node_gpus": node_gpus,
        "default_intra": default_intra,
    }


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


# --------------------------------------------------------------------------- public look-ups


def device(name: str) -> DeviceSpec:
    """The GPU ``name`` (canonical id or alias, case-insensitive), figures in SI units."""
    cat = _catalog()
    return cat.devices[cat.device_id(name)]


def device_names() -> tuple[str, ...]:
    """Every accepted GPU name: canonical ids first (file order), then aliases."""
    cat = _catalog()
    return (*cat.devices, *cat.aliases)


def device_aliases() -> dict[str, str]:
    """Alias -> canonical GPU id (e.g. ``{"v100": "v100-sxm2", ...}``)."""
    return dict(_catalog().aliases)


def link(name: str) -> LinkSpec:
    """An intra-node fabric or a network by id (intra fabrics first: ``"none"`` and ``"pcie3"``
    resolve to their intra-node entries; use :func:`host_link` for GPU<->host links)."""
    cat = _catalog()
    key = _norm(name)
    if key in cat.intra:
        return cat.intra[key]
    if key in cat.inter:
        return cat.inter[key]
    raise UnknownNameError("link", name, {*cat.intra, *cat.inter})


def intra_link(name: str) -> LinkSpec:
    """The intra-node GPU-to-GPU fabric ``name`` (bandwidth = ring bus bandwidth per GPU)."""
    cat = _catalog()
    return cat.intra[cat.intra_id(name)]


def network(name: str, gpu: str | None = None) -> LinkSpec:
    """The inter-node network ``name``; for cloud networks with per-instance figures (``ec2``),
    the figures of the instance type that carries ``gpu`` (e.g. v100-sxm2 -> p3.16xlarge)."""
    cat = _catalog()
    device_id = None if gpu is None else cat.device_id(gpu)
    return cat.network(cat.inter_id(name), device_id)[0]


def host_link(name: str) -> LinkSpec:
    """The GPU<->host link ``name`` (pcie3, pcie4, pcie5)."""
    cat = _catalog()
    key = _norm(name)
    if key not in cat.host:
        raise UnknownNameError("host link", name, cat.host)
    return cat.host[key]


def intra_link_names() -> tuple[str, ...]:
    """Ids of the intra-node fabrics, ``"none"`` included."""
    return tuple(_catalog().intra)


def inter_link_names() -> tuple[str, ...]:
    """Ids of the networks, ``"none"`` included."""
    return tuple(_catalog().inter)


def host_link_names() -> tuple[str, ...]:
    """Ids of the GPU<->host links."""
    return tuple(_catalog().host)


# --------------------------------------------------------------------------- cluster builder


def _count(what: str, value: object, maximum: int) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be an integer, got {value!r}")
    if not isinstance(value, int):
        try:
            value = int(value.__index__())  # type: ignore[attr-defined]  # numpy integers
        except (AttributeError, TypeError):
            raise ConfigError(f"{what} must be an integer, got {value!r}") from None
    if value < 1:
        raise ConfigError(f"{what} must be at least 1, got {value}")
    if value > maximum:
        raise ConfigError(f"{what}={value} is implausibly large (limit {maximum})")
    return value


def build_cluster(
    device: str,
    n_gpus: int,
    gpus_per_node: int | None = None,
    intra_node: str | None = None,
    inter_node: str | None = None,
    transport: str | None = None,
    nics_per_node: int = 1,
) -> Cluster:
    """Resolve a homogeneous data-parallel cluster of ``n_gpus`` GPUs of type ``device``.

    Defaults (module docstring): ``gpus_per_node`` = min(n_gpus, device's reference node size,
    the fabric's GPU limit); ``intra_node`` = "none" for one GPU per node, else the device's
    reference fabric; ``inter_node`` = "ib-edr" for several nodes, else "none"; ``transport`` =
    the network's default. ``n_gpus`` below ``gpus_per_node`` means one node using ``n_gpus``
    GPUs; above it, ``n_gpus`` must be a multiple of ``gpus_per_node``. Raises
    :class:`UnknownNameError` for unknown names and :class:`ConfigError` for bad values or
    combinations. Hops are in SI units (bytes/s, seconds).
    """
    cat = _catalog()
    device_id = cat.device_id(device)
    spec = cat.devices[device_id]
    n = _count("n_gpus", n_gpus, MAX_GPUS)
    intra_id = None if intra_node is None else cat.intra_id(intra_node)
    if gpus_per_node is None:
        limits = [n, cat.node_gpus[device_id]]
        if intra_id is not None and cat.max_gpus[intra_id] is not None:
            limits.append(cat.max_gpus[intra_id])  # type: ignore[arg-type]
        per_node = min(limits)
    else:
        per_node = _count("gpus_per_node", gpus_per_node, MAX_GPUS_PER_NODE)
    if n > per_node and n % per_node:
        raise ConfigError(
            f"n_gpus={n} is not a multiple of gpus_per_node={per_node} "
            f"(a cluster of {n} GPUs cannot be split into nodes of {per_node})"
        )
    local = min(n, per_node)
    n_nodes = n // per_node if n >= per_node else 1
    if intra_id is None:
        intra_id = NONE if per_node == 1 else cat.default_intra[device_id]
    limit = cat.max_gpus[intra_id]
    if limit is not None and local > limit:
        raise ConfigError(
            f"intra_node {intra_id!r} connects at most {limit} GPU(s) per node, "
            f"got {local} (gpus_per_node={per_node}, n_gpus={n})"
        )

    if inter_node is None:
        inter_id = DEFAULT_INTER_NODE if n_nodes > 1 else NONE
    else:
        inter_id = cat.inter_id(inter_node)
    if n_nodes > 1 and inter_id == NONE:
        raise ConfigError(
            f"inter_node 'none' but the cluster spans {n_nodes} nodes "
            f"(n_gpus={n}, gpus_per_node={per_node}); name a network"
        )
    net, _instance = cat.network(inter_id, device_id)
    if transport is None:
        transport_id = net.default_transport
    else:
        transport_id = _norm(transport)
        if transport_id not in TRANSPORTS:
            raise UnknownNameError("transport", transport, TRANSPORTS)
    nics = _count("nics_per_node", nics_per_node, MAX_NICS_PER_NODE)

    fabric = cat.intra[intra_id]
    host = cat.host[spec.host_link]
    return Cluster(
        device=spec,
        n_gpus=n,
        gpus_per_node=per_node,
        intra_link=intra_id,
        inter_link=inter_id,
        transport=transport_id,
        intra=None if local == 1 else Hop(fabric.bandwidth_Bps(), fabric.message_latency_s()),
        nic=None
        if n_nodes == 1
        else Hop(net.bandwidth_Bps(transport_id), net.message_latency_s(transport_id)),
        host=Hop(host.bandwidth_Bps("rdma"), host.message_latency_s("rdma")),
        gpus_per_pcie_switch=max(1, min(fabric.gpus_per_pcie_switch, local)),
        nics_per_node=nics,
    )


def _sig(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")


def describe_cluster(cluster: Cluster) -> dict[str, Any]:
    """The resolved cluster in human units for reports (GB/s, Gb/s, us, TFLOPS); JSON-safe.

    Bandwidths are effective (nominal x efficiency of the transport used) unless the key says
    ``nominal``. Inter-node fields are ``None`` for a single-node cluster.
    """
    cat = _catalog()
    dev = cluster.device
    fp16 = dev.peak_fp16_flops
    multi = cluster.n_nodes > 1
    nominal_Gbps = instance = None
    if cluster.inter_link in cat.inter and cluster.inter_link != NONE:
        net, instance = cat.network(cluster.inter_link, dev.id if dev.id in cat.devices else None)
        nominal_Gbps = net.nominal_bandwidth_Bps * 8 / 1e9
    intra, nic, host = cluster.intra, cluster.nic, cluster.host
    return {
        "gpu": dev.id,
        "gpu_name": dev.name,
        "peak_fp32_TFLOPS": _sig(dev.peak_fp32_flops / 1e12),
        "peak_fp16_TFLOPS": None if fp16 is None else _sig(fp16 / 1e12),
        "n_gpus": cluster.n_gpus,
        "gpus_per_node": cluster.gpus_per_node,
        "local_gpus": cluster.local_gpus,
        "nodes": cluster.n_nodes,
        "intra_node": cluster.intra_link,
        "intra_bandwidth_GBps": _sig(intra.bandwidth_Bps / 1e9) if intra else None,
        "intra_latency_us": _sig(intra.latency_s * 1e6) if intra else None,
        "inter_node": cluster.inter_link,
        "instance": instance,
        "nic_nominal_Gbps": _sig(nominal_Gbps) if multi else None,
        "nic_bandwidth_Gbps": _sig(nic.bandwidth_Bps * 8 / 1e9) if nic else None,
        "nic_latency_us": _sig(nic.latency_s * 1e6) if nic else None,
        "nics_per_node": cluster.nics_per_node,
        "transport": cluster.transport if multi else None,
        "host_link": dev.host_link,
        "host_bandwidth_GBps": _sig(host.bandwidth_Bps / 1e9),
        "gpus_per_pcie_switch": cluster.gpus_per_pcie_switch,
    }
