"""Reading and validating the catalog data files (``ddlsim/system/data/*.json``).

Every figure is checked (missing or unknown key, non-positive bandwidth, efficiency outside
(0, 1], unknown transport, a figure without a source) and converted from the file's human units
to SI once; :class:`_Catalog` holds the result. The public look-ups and the cluster builder are
in :mod:`ddlsim.system.catalog`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ddlsim.errors import CatalogError, UnknownNameError
from ddlsim.system.specs import TRANSPORTS, DeviceSpec, LinkSpec
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
    "host_cpu_threads",
)
_DEVICE_KEYS = frozenset({"name", "sources", *_DEVICE_FIGURES})
#: optional device key: "gpu" (default) or "cpu" (a CPU core as the worker device)
DEVICE_KINDS = ("gpu", "cpu")
#: device key required of GPUs (the kernel model's waves of thread blocks), absent for CPUs
SM_COUNT = "sm_count"
#: device key required of GPUs (NCCL's protocols and caps depend on it), absent for CPUs
ARCH = "arch"
#: optional GPU key: dense TF32 tensor-core peak (Ampere and later), what fp32 convolutions and
#: matrix products run on by default in TensorFlow (2.4+) and PyTorch's cuDNN
TF32 = "peak_tf32_TFLOPS"
#: optional GPU keys, all or none: the clocks NVIDIA's product brief states (the peaks are at the
#: boost clock) and the board's power limit, under which a card's clock may sit below its boost
CLOCKS = ("base_clock_MHz", "boost_clock_MHz", "max_power_W")
GPU_ARCHS = ("kepler", "maxwell", "pascal", "volta", "turing", "ampere", "hopper")
#: NCCL's latency classes of an intra-node hop (rows of its tuning tables)
NCCL_HOPS = ("nvlink", "pcie")
_BANDWIDTH_KEY = {"intra": "bandwidth_GBps", "host": "bandwidth_GBps", "inter": "bandwidth_Gbps"}
_LINK_COMMON = ("description", "efficiency", "latency_us", "default_transport")
_LINK_KEYS = {
    "intra": frozenset(
        {*_LINK_COMMON, "bandwidth_GBps", "gpus_per_pcie_switch", "max_gpus"}
        | {"nccl_hop", "nccl_channels", "sources", "assumptions"}
    ),
    "host": frozenset({*_LINK_COMMON, "bandwidth_GBps", "sources", "assumptions"}),
    "inter": frozenset(
        {*_LINK_COMMON, "bandwidth_Gbps", "instance", "by_gpu", "nccl_transport"}
        | {"sources", "assumptions"}
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

    return resources.files("ddlsim.system").joinpath("data").joinpath(filename)


def _read_json(path: PathLike) -> tuple[dict[str, Any], str]:
    source = Path(path) if isinstance(path, (str, os.PathLike)) else path
    label = str(source)
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"{label}: cannot read catalog file: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"{label}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
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

    def choice(self, entry: dict[str, Any], key: str, valid: tuple[str, ...]) -> str:
        value = entry.get(key)
        if value not in valid:
            raise self.fail(key, f"must be one of {', '.join(valid)}, got {value!r}")
        return value

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
                nccl["nccl_hop"] = check.choice(entry, "nccl_hop", NCCL_HOPS)
                nccl["nccl_channels"] = check.count(entry["nccl_channels"], "nccl_channels")
                figures += ["nccl_hop", "nccl_channels"]
            if scope == "inter":
                nccl["nccl_transport"] = check.choice(entry, "nccl_transport", TRANSPORTS)
                figures.append("nccl_transport")
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


def _parse_devices(doc: dict[str, Any], file: str, links: dict[str, Any]) -> dict[str, Any]:
    """The devices and aliases of devices.json, with each device's reference node (GPUs, fabric)."""
    table = _Checker(file, "top level").obj(doc.get("devices"), "devices")
    devices: dict[str, DeviceSpec] = {}
    node_gpus: dict[str, int] = {}
    default_intra: dict[str, str] = {}
    for device_id, raw in table.items():
        spec, per_node, intra = _parse_device(file, device_id, raw, links)
        devices[device_id] = spec
        node_gpus[device_id] = per_node
        default_intra[device_id] = intra
    if not devices:
        raise CatalogError(f"{file}: no devices")
    return {
        "devices": devices,
        "aliases": _parse_aliases(doc, file, devices),
        "node_gpus": node_gpus,
        "default_intra": default_intra,
    }


def _parse_device(
    file: str, device_id: str, raw: object, links: dict[str, Any]
) -> tuple[DeviceSpec, int, str]:
    """One device entry: its spec (SI units), reference GPUs per node and intra fabric id."""
    check = _Checker(file, f"device {device_id!r}")
    check.identifier(device_id)
    entry = check.obj(raw, None)
    check.keys(entry, _DEVICE_KEYS, frozenset({"kind", SM_COUNT, ARCH, TF32, *CLOCKS}))
    kind = entry.get("kind", DEVICE_KINDS[0])
    if kind not in DEVICE_KINDS:
        raise check.fail("kind", f"must be one of {', '.join(DEVICE_KINDS)}, got {kind!r}")
    for key in (SM_COUNT, ARCH):
        if (key in entry) != (kind == "gpu"):
            raise check.fail(key, "required of a GPU, not allowed for a CPU")
    sm_count = check.count(entry[SM_COUNT], SM_COUNT) if SM_COUNT in entry else None
    arch = check.choice(entry, ARCH, GPU_ARCHS) if ARCH in entry else "cpu"
    fp32 = check.number(entry["peak_fp32_TFLOPS"], "peak_fp32_TFLOPS")
    fp16 = entry["peak_fp16_TFLOPS"]
    if fp16 is not None:
        fp16 = check.number(fp16, "peak_fp16_TFLOPS")
    tf32 = check.number(entry[TF32], TF32) if TF32 in entry else None
    if tf32 is not None and (kind != "gpu" or tf32 <= fp32):
        raise check.fail(TF32, f"a GPU's tensor-core peak above its fp32 peak, got {tf32}")
    clocks = _clocks(check, entry, kind)
    host_link, intra, per_node = _reference_node(check, entry, links)
    spec = DeviceSpec(
        id=device_id,
        name=check.text(entry, "name"),
        peak_fp32_flops=tflops_to_flops(fp32),
        peak_fp16_flops=None if fp16 is None else tflops_to_flops(fp16),
        mem_bandwidth_Bps=GBps_to_Bps(
            check.number(entry["mem_bandwidth_GBps"], "mem_bandwidth_GBps")
        ),
        memory_bytes=round(check.number(entry["memory_GiB"], "memory_GiB") * GiB),
        host_link=host_link,
        host_cpu_threads=check.count(entry["host_cpu_threads"], "host_cpu_threads"),
        sources=check.documented(
            {"sources": entry["sources"]},
            [
                *_DEVICE_FIGURES,
                *([SM_COUNT, ARCH] if sm_count else []),
                *([TF32] if tf32 is not None else []),
                *(CLOCKS if clocks else []),
            ],
        ),
        kind=kind,
        arch=arch,
        sm_count=sm_count,
        peak_tf32_flops=None if tf32 is None else tflops_to_flops(tf32),
        **clocks,
    )
    return spec, per_node, intra


def _reference_node(
    check: _Checker, entry: dict[str, Any], links: dict[str, Any]
) -> tuple[str, str, int]:
    """A device's host link, default intra fabric and default GPUs per node, checked."""
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
    return host_link, intra, per_node


def _parse_aliases(
    doc: dict[str, Any], file: str, devices: dict[str, DeviceSpec]
) -> dict[str, str]:
    """The aliases of devices.json (alias -> device id), each checked against the devices."""
    aliases: dict[str, str] = {}
    for alias, target in _Checker(file, "top level").obj(doc.get("aliases"), "aliases").items():
        check = _Checker(file, f"alias {alias!r}")
        check.identifier(alias)
        if alias in devices:
            raise check.fail(None, "alias shadows a device id")
        if target not in devices:
            raise check.fail(None, f"points to unknown device {target!r}")
        aliases[alias] = target
    return aliases


def _clocks(check: _Checker, entry: dict[str, Any], kind: str) -> dict[str, float]:
    """The DeviceSpec clock and power fields of a GPU entry that gives all of CLOCKS (SI)."""
    given = [key for key in CLOCKS if key in entry]
    if not given:
        return {}
    if len(given) < len(CLOCKS) or kind != "gpu":
        missing = ", ".join(k for k in CLOCKS if k not in given) or "(a CPU has none)"
        raise check.fail(given[0], f"clocks come all together, for GPUs: missing {missing}")
    base, boost, power = (check.number(entry[key], key) for key in CLOCKS)
    if base > boost:
        raise check.fail("base_clock_MHz", f"{base} above the boost clock {boost}")
    return {"base_clock_hz": base * 1e6, "boost_clock_hz": boost * 1e6, "max_power_w": power}


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
