"""The GPUs of ``devices.json`` (and ``kernel_devices.json``): each figure checked against
its source and converted to SI once (:func:`_parse_devices`); the aliases; each GPU's
reference server (GPUs per node, fabric, and the network and NIC count of its multi-node
cluster)."""

from __future__ import annotations

from typing import Any

from ddlsim.errors import CatalogError
from ddlsim.system.catalog_check import MAX_GPUS_PER_NODE, MAX_NICS_PER_NODE, NONE, _Checker
from ddlsim.system.specs import DeviceSpec
from ddlsim.units import GBps_to_Bps, GiB, tflops_to_flops

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
#: optional GPU key (with CLOCKS): the clock the datasheet's tensor-core peaks are quoted at
#: where it is not the boost clock (Hopper: 989.4 TFLOPS = 132 SMs x 4096 x 1830 MHz while the
#: fp32 peak is at the 1980 MHz boost)
TENSOR_CLOCK = "tensor_clock_MHz"
GPU_ARCHS = (
    "kepler",
    "maxwell",
    "pascal",
    "volta",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
)
#: optional GPU keys: dense fp8 (Hopper and later) and fp4 (Blackwell) tensor-core peaks, the
#: datasheet's sparsity figures halved where it gives only those; reported, not yet timed
LOW_PRECISION = ("peak_fp8_TFLOPS", "peak_fp4_TFLOPS")
#: optional device keys, both or none: the network and NICs per node of the reference server's
#: multi-node cluster (DGX H100: 8 x ib-ndr); absent: DEFAULT_INTER_NODE with one NIC
NETWORK = ("default_inter_node", "default_nics_per_node")
#: optional flag: true while only the datasheet vouches for the entry (reports say so)
DATASHEET_ONLY = "datasheet_only"
#: optional key: the device whose compute this one is (another memory size of the same part)
SILICON_OF = "silicon_of"
_OPTIONAL_KEYS = frozenset(
    {"kind", SM_COUNT, ARCH, TF32, SILICON_OF, *CLOCKS, TENSOR_CLOCK, *LOW_PRECISION, *NETWORK}
)


def _parse_devices(doc: dict[str, Any], file: str, links: dict[str, Any]) -> dict[str, Any]:
    """The devices and aliases of devices.json, with each device's reference node (GPUs, fabric,
    network and NICs: ``default_network`` maps a device to ``(network id, NICs, source)``, or
    has no entry where the file names no network)."""
    table = _Checker(file, "top level").obj(doc.get("devices"), "devices")
    devices: dict[str, DeviceSpec] = {}
    node_gpus: dict[str, int] = {}
    default_intra: dict[str, str] = {}
    default_network: dict[str, tuple[str, int, str]] = {}
    for device_id, raw in table.items():
        spec, per_node, intra = _parse_device(file, device_id, raw, links)
        devices[device_id] = spec
        node_gpus[device_id] = per_node
        default_intra[device_id] = intra
        network = _reference_network(file, device_id, raw, links)
        if network is not None:
            default_network[device_id] = network
    if not devices:
        raise CatalogError(f"{file}: no devices")
    for device_id, spec in devices.items():
        twin = devices.get(spec.silicon_of) if spec.silicon_of else spec
        if twin is None or twin.silicon_of or twin.peak_fp32_flops != spec.peak_fp32_flops:
            raise CatalogError(
                f"{file}: device {device_id!r}: silicon_of {spec.silicon_of!r} must name a "
                "device of the same peaks that is its own silicon"
            )
    return {
        "devices": devices,
        "aliases": _parse_aliases(doc, file, devices),
        "node_gpus": node_gpus,
        "default_intra": default_intra,
        "default_network": default_network,
    }


def _parse_device(
    file: str, device_id: str, raw: object, links: dict[str, Any]
) -> tuple[DeviceSpec, int, str]:
    """One device entry: its spec (SI units), reference GPUs per node and intra fabric id."""
    check = _Checker(file, f"device {device_id!r}")
    check.identifier(device_id)
    entry = check.obj(raw, None)
    check.keys(entry, _DEVICE_KEYS, _OPTIONAL_KEYS | {DATASHEET_ONLY})
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
    low = _low_precision(check, entry, kind, fp16)
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
                *([TENSOR_CLOCK] if "tensor_clock_hz" in clocks else []),
                *(key for key in (*LOW_PRECISION, *NETWORK) if key in entry),
            ],
        ),
        kind=kind,
        arch=arch,
        sm_count=sm_count,
        peak_tf32_flops=None if tf32 is None else tflops_to_flops(tf32),
        **clocks,
        **low,
        datasheet_only=_flag(check, entry, DATASHEET_ONLY),
        silicon_of=check.text(entry, SILICON_OF) if SILICON_OF in entry else None,
    )
    return spec, per_node, intra


def _flag(check: _Checker, entry: dict[str, Any], key: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise check.fail(key, f"must be true or false, got {value!r}")
    return value


def _low_precision(
    check: _Checker, entry: dict[str, Any], kind: str, fp16: float | None
) -> dict[str, float]:
    """The DeviceSpec fp8 / fp4 peaks (FLOP/s) a GPU entry gives; each above the fp16 peak and
    fp4 only beside fp8."""
    out: dict[str, float] = {}
    below = fp16
    for key in LOW_PRECISION:
        if key not in entry:
            continue
        value = check.number(entry[key], key)
        if kind != "gpu" or below is None or value <= below:
            raise check.fail(key, f"a GPU's peak above its next wider precision's, got {value}")
        out[key.replace("_TFLOPS", "_flops")] = tflops_to_flops(value)
        below = value
    if "peak_fp4_TFLOPS" in entry and "peak_fp8_TFLOPS" not in entry:
        raise check.fail("peak_fp4_TFLOPS", "given without peak_fp8_TFLOPS")
    return out


def _reference_network(
    file: str, device_id: str, raw: dict[str, Any], links: dict[str, Any]
) -> tuple[str, int, str] | None:
    """``(network id, NICs per node, source)`` of the device's reference server, or None."""
    check = _Checker(file, f"device {device_id!r}")
    given = [key for key in NETWORK if key in raw]
    if not given:
        return None
    if len(given) < len(NETWORK):
        raise check.fail(given[0], f"{' and '.join(NETWORK)} come together")
    network = check.text(raw, NETWORK[0])
    if network not in links["inter"] or network == NONE:
        valid = ", ".join(sorted(set(links["inter"]) - {NONE}))
        raise check.fail(NETWORK[0], f"{network!r} is not a network of links.json; {valid}")
    nics = check.count(raw[NETWORK[1]], NETWORK[1])
    if nics > MAX_NICS_PER_NODE:
        raise check.fail(NETWORK[1], f"{nics} > {MAX_NICS_PER_NODE}")
    return network, nics, raw["sources"][NETWORK[0]]


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
    if not given and TENSOR_CLOCK in entry:
        raise check.fail(TENSOR_CLOCK, "comes with the clocks: " + ", ".join(CLOCKS))
    if not given:
        return {}
    if len(given) < len(CLOCKS) or kind != "gpu":
        missing = ", ".join(k for k in CLOCKS if k not in given) or "(a CPU has none)"
        raise check.fail(given[0], f"clocks come all together, for GPUs: missing {missing}")
    base, boost, power = (check.number(entry[key], key) for key in CLOCKS)
    if base > boost:
        raise check.fail("base_clock_MHz", f"{base} above the boost clock {boost}")
    out = {"base_clock_hz": base * 1e6, "boost_clock_hz": boost * 1e6, "max_power_w": power}
    if TENSOR_CLOCK in entry:
        tensor = check.number(entry[TENSOR_CLOCK], TENSOR_CLOCK)
        if not base <= tensor <= boost:
            raise check.fail(TENSOR_CLOCK, f"{tensor} outside base {base} .. boost {boost}")
        out["tensor_clock_hz"] = tensor * 1e6
    return out
