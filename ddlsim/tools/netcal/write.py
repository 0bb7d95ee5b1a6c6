"""Writing a network calibration file (:mod:`ddlsim.calibration.network` documents the schema
and reads it back): the entries of one fit, of its terms, of each log, and the whole document."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ddlsim.calibration.network import SCHEMA, SCHEMA_VERSION
from ddlsim.tools.netcal.fit import LinkFit, Target
from ddlsim.tools.netcal.logs import Measurement
from ddlsim.version import __version__


def _r(x: float, digits: int = 6) -> float:
    return float(f"{x:.{digits}g}")


def fit_entry(fit: LinkFit, logs: list[Measurement], algorithm: str, protocol: str) -> dict:
    """One entry of ``fits``."""
    return {
        "scope": fit.scope,
        "algorithm": algorithm,
        "protocol": protocol,
        "logs": [m.path for m in logs],
        "n_points": len(fit.residuals),
        "bandwidth_GBps": _r(fit.bandwidth_Bps / 1e9),
        "latency_us": _r(fit.latency_s * 1e6) if fit.latency_fitted else None,
        "bandwidth_determined": fit.bandwidth_determined,
        "latency_determined": fit.latency_determined,
        "catalog_bandwidth_GBps": _r(fit.catalog_bandwidth_Bps / 1e9),
        "catalog_latency_us": _r(fit.catalog_latency_s * 1e6),
        "rms_log_residual": _r(fit.rms_log_residual, 4),
        "max_abs_residual": _r(fit.max_abs_residual, 4),
        "residuals": [
            {
                "log": r["log"],
                "size_bytes": r["size_bytes"],
                "measured_us": _r(r["measured_us"]),
                "fitted_us": _r(r["fitted_us"]),
                "rel_residual": _r(r["rel_residual"], 4),
            }
            for r in fit.residuals
        ],
    }


def terms_entry(fit: LinkFit, nics: int) -> dict[str, Any]:
    """The ``terms`` entry predict applies for one scope (determined terms only)."""
    out: dict[str, Any] = {
        "bandwidth_GBps": _r(fit.bandwidth_Bps / 1e9) if fit.bandwidth_determined else None,
        "latency_us": _r(fit.latency_s * 1e6) if fit.latency_determined else None,
    }
    if fit.scope == "network" and out["bandwidth_GBps"] is not None:
        out["bandwidth_per_nic_GBps"] = _r(fit.bandwidth_Bps / 1e9 / nics)
    return out


def source_entry(m: Measurement, sha256: str) -> dict[str, Any]:
    """One entry of ``sources``: a log and what it states."""
    return {
        "path": m.path,
        "sha256": sha256,
        "format": m.format,
        "collective": m.collective,
        "nccl_version": m.nccl_version,
        "devices": sorted(set(m.devices)),
        "nodes": m.nodes,
        "gpus_per_node": m.gpus_per_node,
        "n_ranks": m.n_ranks,
        "algorithm": m.algorithm,
        "protocol": m.protocol,
        "transport_in_log": m.transport,
        "env": dict(sorted(m.env.items())),
        "header": m.header,
        "rows": len(m.sizes_bytes),
        "size_range_bytes": [min(m.sizes_bytes), max(m.sizes_bytes)],
    }


def document(
    target: Target,
    terms: dict[str, dict[str, Any]],
    fits: list[dict[str, Any]],
    sources: list[dict[str, Any]],
    command: str,
) -> dict[str, Any]:
    """The whole file."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "ddlsim_version": __version__,
        "command": command,
        "library": target.library,
        "cluster": {
            "gpu": target.gpu,
            "gpus_per_node": target.gpus_per_node,
            "intra_node": target.intra_node,
            "inter_node": target.inter_node,
            "transport": target.transport,
            "nics_per_node": target.nics_per_node,
            "nccl_version": target.nccl_version,
        },
        "terms": terms,
        "fits": fits,
        "sources": sources,
    }
