"""The network calibration file: what ``ddlsim calibrate network`` writes
(:mod:`ddlsim.tools.netcal.write`) and ``predict --network-calibration`` applies.

JSON, schema ``ddlsim-network-calibration`` version 1, units in the keys::

    {"schema": "ddlsim-network-calibration", "schema_version": 1,
     "created": ISO-8601, "ddlsim_version": ..., "command": ...,
     "library": "nccl" | "mpi" | "gloo",
     "cluster": {"gpu", "gpus_per_node", "intra_node", "inter_node", "transport",
                 "nics_per_node", "nccl_version"},
     "terms": {"network": {"bandwidth_GBps": per node, "bandwidth_per_nic_GBps",
                           "latency_us"},            # when multi-node logs were given
               "intra": {"bandwidth_GBps", "latency_us" | null}},  # single-node logs
     "fits": [{"scope", "algorithm", "protocol", "logs", "n_points", "bandwidth_GBps",
               "latency_us", "bandwidth_determined", "latency_determined",
               "catalog_bandwidth_GBps", "catalog_latency_us", "rms_log_residual",
               "max_abs_residual", "residuals": [{"log", "size_bytes", "measured_us",
               "fitted_us", "rel_residual"}]}],
     "sources": [{"path", "sha256", "format", "collective", "nccl_version", "devices",
                  "nodes", "gpus_per_node", "n_ranks", "algorithm", "protocol",
                  "transport_in_log", "env", "header", "rows", "size_range_bytes"}]}

``terms`` are what predict uses: the fit over every log of a scope. The per-algorithm fits
(logs that forced ``NCCL_ALGO`` / ``NCCL_PROTO``) are in ``fits`` beside the combined one.
:func:`apply` puts the terms into a cluster whose network (and transport) and intra-node
fabric are the calibrated ones; another network or fabric is refused (a calibration holds for
the links it measured). A term the logs did not determine is not applied.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ddlsim.atomic import file_sha256
from ddlsim.errors import CalibrationError, ConfigError, DdlsimError
from ddlsim.inputs import NETWORK_CALIBRATION_MAX_BYTES, read_json
from ddlsim.system.specs import Cluster, Hop

SCHEMA = "ddlsim-network-calibration"
SCHEMA_VERSION = 1
LIBRARIES = ("nccl", "mpi", "gloo")
#: the physical range of each term a file may hold (issue 33, 9: a file's numbers are held to
#: the ranges of the flags). A NIC: the stated-speed grammar's 1..10,000 Gb/s per adapter
#: (:data:`ddlsim.system.network_speeds.SPEED_RANGE_GBPS`), widened below to 1 MB/s for what a
#: fit of a slow TCP path can give; a node or a fabric: up to 1 PB/s (72 GPUs of NVLink 5's
#: 1.8 TB/s are 130 TB/s); a hop's latency: up to 1 s (a fitted Gloo step is ~1 ms)
TERM_RANGES = {
    "bandwidth_GBps": (1e-3, 1e6, "GB/s"),
    "bandwidth_per_nic_GBps": (1e-3, 10_000.0 / 8, "GB/s"),
    "latency_us": (0.0, 1e6, "us"),
}


def load(path: str | Path) -> dict[str, Any]:
    """A network calibration file, checked (CalibrationError naming the file and the fault)."""
    p = Path(path)
    doc = read_json(p, "network calibration", NETWORK_CALIBRATION_MAX_BYTES, CalibrationError)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise CalibrationError(
            f"network calibration {p}: not a ddlsim network calibration (schema {SCHEMA!r}; "
            "write one with 'ddlsim calibrate network')"
        )
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CalibrationError(
            f"network calibration {p}: schema version {doc.get('schema_version')!r}, this "
            f"ddlsim reads {SCHEMA_VERSION}"
        )
    terms, cluster = doc.get("terms"), doc.get("cluster")
    if not isinstance(terms, dict) or not isinstance(cluster, dict) or not terms:
        raise CalibrationError(f"network calibration {p}: no 'terms' or 'cluster' object")
    for scope, entry in terms.items():
        if scope not in ("network", "intra") or not isinstance(entry, dict):
            raise CalibrationError(f"network calibration {p}: unknown term {scope!r}")
        for key, (low, high, unit) in TERM_RANGES.items():
            value = entry.get(key)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if value is None or (number and math.isfinite(value) and low <= value <= high):
                continue
            raise CalibrationError(
                f"network calibration {p}: terms.{scope}.{key} must be a number in "
                f"{low:g}..{high:g} {unit} or null, got {value!r}"
            )
    doc["_path"] = str(p)
    return doc


def apply(cal: dict[str, Any], cluster: Cluster) -> Cluster:
    """``cluster`` with the calibrated terms of ``cal`` (a :func:`load` result) in place of the
    catalog's. The network terms apply to a multi-node cluster on the calibrated network and
    transport (the per-NIC bandwidth times the cluster's NICs); the intra-node terms to a
    cluster with several GPUs per node on the calibrated fabric; a term the cluster does not
    use (the network of a single node) changes nothing. A cluster on other links than the ones
    measured is refused: a calibration holds for what it measured."""
    where = cal.get("_path", "network calibration")
    c = cal["cluster"]
    terms = cal["terms"]
    if "network" in terms and cluster.n_nodes > 1:
        net = (c.get("inter_node"), c.get("transport"))
        if (cluster.inter_link, cluster.transport) != net:
            raise ConfigError(
                f"network calibration {where} measured {net[0]} over {net[1]}; this cluster "
                f"runs {cluster.inter_link} over {cluster.transport} (name that network, or "
                "leave the calibration out)"
            )
        entry = terms["network"]
        assert cluster.nic is not None
        bandwidth, latency = cluster.nic.bandwidth_Bps, cluster.nic.latency_s
        if entry.get("bandwidth_per_nic_GBps") is not None:
            bandwidth = entry["bandwidth_per_nic_GBps"] * 1e9
        if entry.get("latency_us") is not None:
            latency = entry["latency_us"] * 1e-6
        cluster = replace(cluster, nic=Hop(bandwidth, latency))
    if "intra" in terms and cluster.local_gpus > 1:
        if cluster.intra_link != c.get("intra_node"):
            raise ConfigError(
                f"network calibration {where} measured intra-node {c.get('intra_node')}; this "
                f"cluster's GPUs are on {cluster.intra_link}"
            )
        entry = terms["intra"]
        assert cluster.intra is not None
        bandwidth, latency = cluster.intra.bandwidth_Bps, cluster.intra.latency_s
        if entry.get("bandwidth_GBps") is not None:
            bandwidth = entry["bandwidth_GBps"] * 1e9
        if entry.get("latency_us") is not None:
            latency = entry["latency_us"] * 1e-6
        cluster = replace(cluster, intra=Hop(bandwidth, latency))
    return cluster


def inputs_of(path: str | Path | None) -> dict[str, Any] | None:
    """What ``predict --json`` records under ``inputs.network_calibration`` (None: none)."""
    if path is None:
        return None
    return describe(load(path), file_sha256(path))


def describe(cal: dict[str, Any], sha256: str) -> dict[str, Any]:
    """The record of a loaded calibration: file, SHA-256, cluster, terms, sources."""
    return {
        "file": cal.get("_path"),
        "sha256": sha256,
        "library": cal.get("library"),
        "cluster": cal.get("cluster"),
        "terms": cal.get("terms"),
        "sources": [
            {k: s.get(k) for k in ("path", "sha256", "format", "collective", "nccl_version")}
            for s in cal.get("sources", [])
        ],
    }


def network_calibration_kwargs(path: str, run: Any, kwargs: dict[str, Any]) -> list[str]:
    """``ddlsim validate --network-calibration``: put ``path`` into a measured row's predict
    ``kwargs`` when the row runs on the network and transport it measured (the transport NCCL
    or the method picks where the row does not state one); the note saying so, or nothing."""
    from ddlsim.comm import NCCL_METHODS
    from ddlsim.system import catalog

    cal = _load_cached(str(path))
    c = cal["cluster"]
    try:
        net = catalog.network(run.inter_node, run.gpu)
    except DdlsimError:
        return []
    transport = run.transport.lower() if run.transport else None
    if transport is None:
        transport = net.nccl_transport if run.comm in NCCL_METHODS else net.default_transport
    if "network" not in cal["terms"] or (net.id, transport) != (
        c.get("inter_node"),
        c.get("transport"),
    ):
        return []
    kwargs["network_calibration"] = str(path)
    return [f"network calibration {path} ({net.id} {transport})"]


@lru_cache(maxsize=8)
def _load_cached(path: str) -> dict[str, Any]:
    return load(path)
