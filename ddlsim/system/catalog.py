"""Device and link catalogs, and the cluster builder.

Owns the shipped data files ``ddlsim/system/data/devices.json`` (GPUs) and
``ddlsim/system/data/links.json`` (intra-node fabrics, GPU<->host links, networks). The files
use human units in their key names (``peak_fp32_TFLOPS``, ``bandwidth_GBps``, ``bandwidth_Gbps``,
``latency_us``, ``memory_GiB``); this module validates them and converts them to SI once, on
first use (FLOP/s, bytes/s, seconds, bytes), then caches the result.

:func:`build_cluster` turns a GPU name, a GPU count and optional link names into the resolved
:class:`~ddlsim.system.specs.Cluster` the engines simulate. Its defaults, in order:

* ``gpus_per_node`` = min(``n_gpus``, the device's reference node size (8; 16 for the DGX-2's
  v100-sxm3), the ``intra_node`` fabric's GPU limit when one is given);
* ``intra_node`` = ``"none"`` when ``gpus_per_node`` is 1, else the device's reference fabric
  (pcie3 for PCIe parts and K80/P40, nvlink-p100 / nvlink-v100 for SXM2, nvswitch for
  v100-sxm3, nvlink-a100 / nvlink-h100);
* ``inter_node`` / ``nics_per_node`` = when the cluster spans several nodes, the network and
  NIC count of the GPU's reference server where ``devices.json`` names one (DGX A100: 8 x
  ib-hdr; DGX H100 / H200, DGX B200: 8 x ib-ndr; GB200 NVL72: 72 x ib-ndr per NVLink domain),
  else ``"ib-edr"`` with one NIC (the older GPUs, whose measured seeds ran on it); ``"none"``
  for one node. A network the caller names without a NIC count has one NIC. The cluster's
  ``network_default`` says which default was taken;
* ``transport`` = the network's default transport (Ethernet and cloud networks: tcp;
  InfiniBand and Aries: rdma); for NCCL (``nccl=True``) the transport NCCL itself picks:
  RDMA wherever the network's NICs offer it (RoCE on 25-200 GbE), sockets otherwise.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from ddlsim.errors import CatalogError, ConfigError, UnknownNameError
from ddlsim.system.catalog_files import (  # noqa: F401  (_load_catalog: used by the tests)
    DEFAULT_INTER_NODE,
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_NICS_PER_NODE,
    NONE,
    SCHEMA_VERSION,
    _Catalog,
    _catalog,
    _data_file,
    _load_catalog,
    _norm,
    _parse_devices,
    _parse_links,
    _read_json,
)
from ddlsim.system.specs import TRANSPORTS, Cluster, DeviceSpec, Hop, LinkSpec

# --------------------------------------------------------------------------- public look-ups


def device(name: str) -> DeviceSpec:
    """The GPU ``name`` (canonical id or alias, case-insensitive), figures in SI units."""
    cat = _catalog()
    return cat.devices[cat.device_id(name)]


@lru_cache(maxsize=1)
def _kernel_devices() -> dict[str, DeviceSpec]:
    """The GPUs of ``kernel_devices.json`` (measured kernel files' GPUs without shipped
    calibrations), parsed as ``devices.json`` is, against the shipped links."""
    links_doc, links_file = _read_json(_data_file("links.json"))
    doc, file = _read_json(_data_file("kernel_devices.json"))
    devices = _parse_devices(doc, file, _parse_links(links_doc, links_file))["devices"]
    clash = set(devices) & set(_catalog().devices)
    if clash:
        raise CatalogError(f"{file}: {', '.join(sorted(clash))} already in devices.json")
    return devices


def kernel_device(name: str) -> DeviceSpec:
    """A catalog GPU (:func:`device`), or one of the GPUs of the measured kernel files that
    ddlsim ships no calibrations for (``data/kernel_devices.json``: T4, P4, A40, GTX 1080 Ti,
    TITAN Xp, L4), which only the kernel routes and checks take."""
    extra = _kernel_devices().get(_norm(name))
    return extra if extra is not None else device(name)


def device_names() -> tuple[str, ...]:
    """Every accepted GPU name: canonical ids first (file order), then aliases."""
    cat = _catalog()
    return (*cat.devices, *cat.aliases)


def device_aliases() -> dict[str, str]:
    """Alias -> canonical GPU id (e.g. ``{"v100": "v100-sxm2", ...}``)."""
    return dict(_catalog().aliases)


def reference_network(gpu: str) -> tuple[str, int] | None:
    """The network id and NICs per node of ``gpu``'s reference server (DGX H100: ``("ib-ndr",
    8)``), None where the catalog names none."""
    cat = _catalog()
    entry = cat.default_network.get(cat.device_id(gpu))
    return None if entry is None else entry[:2]


def link(name: str) -> LinkSpec:
    """An intra-node fabric or a network by id (intra fabrics first: ``"none"`` and ``"pcie3"``
    resolve to their intra-node entries; use :func:`host_link` for GPU<->host links)."""
    cat = _catalog()
    key = _norm(name)
    if key in cat.intra:
        return cat.intra[key]
    try:
        return cat.inter_link(cat.inter_id(name))
    except UnknownNameError:
        raise UnknownNameError("link", name, {*cat.intra, *cat.inter}) from None


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


def network_instance(name: str, gpu: str) -> str | None:
    """The cloud instance type whose figures the network ``name`` takes for ``gpu`` (``ec2``
    with a V100: p3.16xlarge), None for a network of no instance."""
    cat = _catalog()
    return cat.network(cat.inter_id(name), cat.device_id(gpu))[1]


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


def check_count(what: str, value: object, maximum: int) -> int:
    """``value`` as an int if it counts GPUs, nodes or NICs (1..``maximum``), else a
    :class:`ConfigError` naming it (the knob table's check of those counts)."""
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
    nics_per_node: int | None = None,
    *,
    nccl: bool = False,
) -> Cluster:
    """Resolve a homogeneous data-parallel cluster of ``n_gpus`` GPUs of type ``device``.

    Defaults (module docstring): ``gpus_per_node`` = min(n_gpus, device's reference node size,
    the fabric's GPU limit); ``intra_node`` = "none" for one GPU per node, else the device's
    reference fabric; ``inter_node`` and ``nics_per_node`` = the reference server's network for
    several nodes (module docstring), else "none"; ``transport`` =
    the network's default (with ``nccl=True``: the transport NCCL picks on that network, e.g.
    RDMA over RoCE-capable 25 GbE). ``n_gpus`` below ``gpus_per_node`` means one node using
    ``n_gpus`` GPUs; above it, ``n_gpus`` must be a multiple of ``gpus_per_node``. Raises
    :class:`UnknownNameError` for unknown names and :class:`ConfigError` for bad values or
    combinations. Hops are in SI units (bytes/s, seconds).
    """
    cat = _catalog()
    device_id = cat.device_id(device)
    spec = cat.devices[device_id]
    n = check_count("n_gpus", n_gpus, MAX_GPUS)
    intra_id = None if intra_node is None else cat.intra_id(intra_node)
    per_node = _gpus_per_node(cat, device_id, n, gpus_per_node, intra_id)
    local = min(n, per_node)
    n_nodes = n // per_node if n >= per_node else 1
    intra_id = _intra_fabric_id(cat, device_id, intra_id, n, per_node)
    inter_id = _inter_network_id(cat, inter_node, n, per_node, n_nodes)
    nics, network_default = 1, ""
    if inter_node is None and n_nodes > 1:
        inter_id, nics, network_default = _reference_network(cat, device_id)
    if nics_per_node is not None:
        nics = check_count("nics_per_node", nics_per_node, MAX_NICS_PER_NODE)
    net, _instance = cat.network(inter_id, device_id)
    transport_id = _transport_id(net, transport, nccl)

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
        nccl_hop=fabric.nccl_hop,
        nccl_channels=fabric.nccl_channels,
        network_default=network_default,
        nvlink_peers=fabric.nvlink_peers,
        nvls=fabric.nvls,
        staged=None if local == 1 else Hop(fabric.bandwidth_Bps("tcp"), fabric.latency_s["tcp"]),
    )


def _reference_network(cat: _Catalog, device_id: str) -> tuple[str, int, str]:
    """The network, NICs per node and a note on the default of a multi-node cluster of
    ``device_id`` that names no network: its reference server's, else ib-edr with one NIC."""
    if device_id in cat.default_network:
        network, nics, _source = cat.default_network[device_id]
        return network, nics, f"{device_id}'s reference server: {nics} x {network}"
    return (
        DEFAULT_INTER_NODE,
        1,
        f"{DEFAULT_INTER_NODE}, 1 NIC: no reference network for {device_id}",
    )


def _gpus_per_node(
    cat: _Catalog, device_id: str, n: int, gpus_per_node: int | None, intra_id: str | None
) -> int:
    """GPUs per node: given, or the smallest of ``n``, the device's node and the fabric's limit;
    ``n`` above it must be a multiple of it."""
    if gpus_per_node is None:
        limits = [n, cat.node_gpus[device_id]]
        if intra_id is not None and cat.max_gpus[intra_id] is not None:
            limits.append(cat.max_gpus[intra_id])  # type: ignore[arg-type]
        per_node = min(limits)
    else:
        per_node = check_count("gpus_per_node", gpus_per_node, MAX_GPUS_PER_NODE)
    if n > per_node and n % per_node:
        raise ConfigError(
            f"n_gpus={n} is not a multiple of gpus_per_node={per_node} "
            f"(a cluster of {n} GPUs cannot be split into nodes of {per_node})"
        )
    return per_node


def _intra_fabric_id(
    cat: _Catalog, device_id: str, intra_id: str | None, n: int, per_node: int
) -> str:
    """The intra-node fabric: given, none for one GPU a node, else the device's; within its
    GPU limit."""
    local = min(n, per_node)
    if intra_id is None:
        intra_id = NONE if per_node == 1 else cat.default_intra[device_id]
    limit = cat.max_gpus[intra_id]
    if limit is not None and local > limit:
        raise ConfigError(
            f"intra_node {intra_id!r} connects at most {limit} GPU(s) per node, "
            f"got {local} (gpus_per_node={per_node}, n_gpus={n})"
        )
    return intra_id


def _inter_network_id(
    cat: _Catalog, inter_node: str | None, n: int, per_node: int, n_nodes: int
) -> str:
    """The network between nodes: given, else the default for several nodes and none for one;
    never none across nodes."""
    if inter_node is None:
        inter_id = DEFAULT_INTER_NODE if n_nodes > 1 else NONE
    else:
        inter_id = cat.inter_id(inter_node)
    if n_nodes > 1 and inter_id == NONE:
        raise ConfigError(
            f"inter_node 'none' but the cluster spans {n_nodes} nodes "
            f"(n_gpus={n}, gpus_per_node={per_node}); name a network"
        )
    return inter_id


def _transport_id(net: LinkSpec, transport: str | None, nccl: bool) -> str:
    """The transport: given (a known one), else the one NCCL picks or the network's default."""
    if transport is None:
        return net.nccl_transport if nccl else net.default_transport
    transport_id = _norm(transport)
    if transport_id not in TRANSPORTS:
        raise UnknownNameError("transport", transport, TRANSPORTS)
    return transport_id


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
    if cluster.inter_link != NONE and _known_network(cluster.inter_link) is not None:
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
        "network_default": cluster.network_default or None,
        "transport": cluster.transport if multi else None,
        "host_link": dev.host_link,
        # None for host link 'none' (a CPU worker: nothing to copy, infinite in the model)
        "host_bandwidth_GBps": _sig(host.bandwidth_Bps / 1e9)
        if math.isfinite(host.bandwidth_Bps)
        else None,
        "gpus_per_pcie_switch": cluster.gpus_per_pcie_switch,
        "peak_fp8_TFLOPS": _tflops(dev.peak_fp8_flops),
        "peak_fp4_TFLOPS": _tflops(dev.peak_fp4_flops),
        "datasheet_only": datasheet_only(cluster),
    }


def _tflops(flops: float | None) -> float | None:
    return None if flops is None else _sig(flops / 1e12)


def _known_network(name: str) -> LinkSpec | None:
    """The catalogued or stated network ``name``; None for a name of neither (a hand-built
    cluster's)."""
    cat = _catalog()
    try:
        return cat.inter_link(cat.inter_id(name))
    except ConfigError:
        return None


def datasheet_only(cluster: Cluster) -> list[str]:
    """The catalog entries of ``cluster`` that only a datasheet vouches for (no measured run
    has checked them yet): its GPU, fabric, network and host link, by id."""
    cat = _catalog()
    entries: list[tuple[str, bool]] = [(cluster.device.id, cluster.device.datasheet_only)]
    if cluster.local_gpus > 1 and cluster.intra_link in cat.intra:
        entries.append((cluster.intra_link, cat.intra[cluster.intra_link].datasheet_only))
    net = _known_network(cluster.inter_link) if cluster.n_nodes > 1 else None
    if net is not None:
        entries.append((cluster.inter_link, net.datasheet_only))
    host = cat.host.get(cluster.device.host_link)
    if host is not None:
        entries.append((host.id, host.datasheet_only))
    return [name for name, flag in entries if flag]
