"""``ddlsim calibrate network``: logs in, a network calibration file out.

What a log states (its GPUs and hosts, NCCL version, forced algorithm or protocol, the NCCL
transport it printed) is used; the flags supply what it does not (OSU prints no rank count,
no log names the catalog network) and may not contradict it. All logs must describe one
cluster (one GPU, GPUs per node, fabric, network, NCCL version); their rank counts may differ,
which is what separates a per-hop latency from a bandwidth. Single-node logs fit the
intra-node fabric first, then multi-node logs fit the network on top of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ddlsim.atomic import atomic_write_text, file_sha256
from ddlsim.comm.nccl import NcclVersion
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.system.specs import Cluster
from ddlsim.tools.netcal import names, write
from ddlsim.tools.netcal.fit import LinkFit, Target, fit_link, with_link
from ddlsim.tools.netcal.logs import Measurement, read_log


@dataclass(frozen=True)
class Request:
    """The command's inputs (flags None: taken from the logs or the catalog)."""

    files: tuple[Path, ...]
    output: Path
    gpu: str | None = None
    gpus: int | None = None
    gpus_per_node: int | None = None
    intra_node: str | None = None
    inter_node: str | None = None
    transport: str | None = None
    nics_per_node: int = 1
    nccl_version: str | None = None
    collective: str | None = None
    command: str = ""


def _one(values: set[Any], what: str, flag: str, given: Any) -> Any:
    values = {v for v in values if v is not None}
    if len(values) > 1:
        shown = ", ".join(sorted(map(str, values)))
        raise ConfigError(f"the logs describe different clusters: {what} {shown}")
    found = next(iter(values), None)
    if given is not None and found is not None and str(given) != str(found):
        raise ConfigError(f"the log(s) say {what} {found}, {flag} says {given}")
    return given if given is not None else found


def _ranks(m: Measurement, req: Request) -> tuple[int, int]:
    """(ranks, GPUs per node) of one log."""
    n = m.n_ranks if m.n_ranks is not None else req.gpus
    per = m.gpus_per_node if m.hosts and m.format == "nccl-tests" else None
    per = per if per is not None else req.gpus_per_node
    if m.format == "sweep-json" and per is None and m.nodes == 1:
        per = n
    if n is None or per is None:
        raise ConfigError(
            f"{m.path}: the log does not say how many ranks ran on how many nodes; give "
            "--gpus and --gpus-per-node"
        )
    if m.n_ranks is not None and req.gpus is not None and req.gpus != m.n_ranks:
        raise ConfigError(f"{m.path}: the log lists {m.n_ranks} ranks, --gpus says {req.gpus}")
    if n % per and n > per:
        raise ConfigError(f"{m.path}: {n} ranks do not fill nodes of {per}")
    return n, per


def target_of(logs: Sequence[Measurement], req: Request) -> tuple[Target, list[int]]:
    """The cluster the logs measured, and each log's rank count."""
    library = _one({m.library for m in logs}, "library", "(none)", None)
    shapes = [_ranks(m, req) for m in logs]
    per = _one({p for _, p in shapes}, "GPUs per node", "--gpus-per-node", None)
    gpus: set[str | None] = set()
    for m in logs:
        for device in set(m.devices):
            mapped = names.gpu_name(device, req.intra_node or "")
            if mapped.name is None and req.gpu is None:
                raise ConfigError(
                    f"{m.path}: {mapped.reason}; name the catalog GPU to calibrate as with --gpu"
                )
            gpus.add(mapped.name)
    gpu = req.gpu if req.gpu is not None else _one(gpus, "GPU", "--gpu", None)
    if gpu is None:
        raise ConfigError("the logs name no GPU; give --gpu (a catalog GPU, or a CPU worker)")
    gpu = catalog.device(gpu).id
    named = {catalog.device(g).id for g in gpus if g is not None}
    if req.gpu is not None and named and named != {gpu}:
        raise ConfigError(
            f"--gpu {req.gpu} contradicts the logs, which ran on {', '.join(sorted(named))}: "
            "a calibration holds for the GPUs it measured"
        )
    intra = "none" if per == 1 else req.intra_node or catalog._catalog().default_intra[gpu]
    intra = catalog.intra_link(intra).id if intra != "none" else "none"
    multi = any(n > p for n, p in shapes)
    inter, transport = "none", None
    if multi:
        if req.inter_node is None:
            raise ConfigError(
                "multi-node logs: name the network they measured with --inter-node "
                f"({', '.join(n for n in catalog.inter_link_names() if n != 'none')})"
            )
        net = catalog.network(req.inter_node, gpu)
        inter = net.id
        given = req.transport.lower() if req.transport else None
        transport = _one({m.transport for m in logs}, "transport", "--transport", given)
        if transport is None:
            transport = net.nccl_transport if library == "nccl" else net.default_transport
    version = req.nccl_version
    if library == "nccl":
        stated = {names.nccl_version_text(m.nccl_version or "") for m in logs}
        wanted = names.nccl_version_text(req.nccl_version) if req.nccl_version else None
        version = _one(stated, "NCCL version", "--nccl-version", wanted)
        if version is None:
            raise ConfigError("the logs print no NCCL version; give --nccl-version")
    version = str(NcclVersion.parse(version or "2.14"))
    target = Target(gpu, per, intra, inter, transport, req.nics_per_node, version, library)
    return target, [n for n, _ in shapes]


def calibrate(req: Request) -> dict[str, Any]:
    """Read the logs, fit, write the calibration file (atomically); return its content."""
    if not req.files:
        raise ConfigError("no log files given")
    logs = [read_log(path, req.collective) for path in req.files]
    target, ranks = target_of(logs, req)
    logs = [_with_ranks(m, n) for m, n in zip(logs, ranks, strict=True)]
    single = [m for m in logs if (m.n_ranks or 0) <= target.gpus_per_node]
    multi = [m for m in logs if (m.n_ranks or 0) > target.gpus_per_node]
    terms: dict[str, dict[str, Any]] = {}
    fits: list[dict[str, Any]] = []
    intra_fit = _fit_scope(target, single, "intra", target.cluster, terms, fits)

    def base(n: int) -> Cluster:
        cluster = target.cluster(n)
        if intra_fit is None or cluster.intra is None or not intra_fit.bandwidth_determined:
            return cluster
        latency = intra_fit.latency_s if intra_fit.latency_determined else cluster.intra.latency_s
        return with_link(cluster, "intra", intra_fit.bandwidth_Bps, latency)

    _fit_scope(target, multi, "network", base, terms, fits)
    sources = [write.source_entry(m, file_sha256(m.path)) for m in logs]
    doc = write.document(target, terms, fits, sources, req.command)
    atomic_write_text(req.output, json.dumps(doc, indent=1) + "\n")
    return doc


def _fit_scope(
    target: Target,
    group: Sequence[Measurement],
    scope: str,
    base: Callable[[int], Cluster],
    terms: dict[str, dict[str, Any]],
    fits: list[dict[str, Any]],
) -> LinkFit | None:
    """Fit ``scope`` on ``group`` (all logs, then each forced algorithm / protocol apart where
    the logs force several) into ``terms`` and ``fits``; the combined fit, None without logs."""
    if not group:
        return None
    combined = fit_link(target, group, scope, base)
    terms[scope] = write.terms_entry(combined, target.nics_per_node)
    fits.append(write.fit_entry(combined, list(group), *_label(group)))
    forced = sorted({(m.algorithm, m.protocol) for m in group})
    if len(forced) > 1:
        for algo, proto in forced:
            part = [m for m in group if (m.algorithm, m.protocol) == (algo, proto)]
            fits.append(write.fit_entry(fit_link(target, part, scope, base), part, algo, proto))
    return combined


def _label(group: Sequence[Measurement]) -> tuple[str, str]:
    forced = {(m.algorithm, m.protocol) for m in group}
    return forced.pop() if len(forced) == 1 else ("all", "all")


def _with_ranks(m: Measurement, n: int) -> Measurement:
    return m if m.n_ranks == n else replace(m, n_ranks=n)


def format_summary(doc: dict[str, Any], output: Path) -> str:
    """What the command prints: the cluster, the fitted terms against the catalog's, the fit."""
    c = doc["cluster"]
    lines = [
        f"ddlsim calibrate network: {len(doc['sources'])} log(s), {doc['library']}, "
        f"{c['gpu']} x {c['gpus_per_node']} per node, intra {c['intra_node']}, network "
        f"{c['inter_node']}"
        + (f" over {c['transport']}" if c["transport"] else "")
        + (f", NCCL {c['nccl_version']}" if doc["library"] == "nccl" else ""),
    ]
    for s in doc["sources"]:
        lines.append(
            f"  {s['path']}  sha256 {s['sha256'][:12]}  {s['collective']}, {s['rows']} sizes, "
            f"{s['n_ranks']} ranks" + (f", NCCL {s['nccl_version']}" if s["nccl_version"] else "")
            + (f", {s['algorithm']}/{s['protocol']}" if s["algorithm"] != "auto"
               or s["protocol"] != "auto" else "")
        )  # fmt: skip
    for f in doc["fits"]:
        bw = f"{f['bandwidth_GBps']:.3f} GB/s" + (
            "" if f["bandwidth_determined"] else " (not binding)"
        )
        lat = (
            "latency from NCCL's tables"
            if f["latency_us"] is None
            else f"{f['latency_us']:.2f} us" + ("" if f["latency_determined"] else " (not binding)")
        )
        lines.append(
            f"  {f['scope']:<8}{f['algorithm']}/{f['protocol']}: bandwidth {bw} (catalog "
            f"{f['catalog_bandwidth_GBps']:.3f}), latency {lat} (catalog "
            f"{f['catalog_latency_us']:.2f} us); {f['n_points']} points, rms log residual "
            f"{f['rms_log_residual']:.3f}, max |residual| {100 * f['max_abs_residual']:.1f}%"
        )
    lines.append(f"wrote {output}")
    return "\n".join(lines) + "\n"
