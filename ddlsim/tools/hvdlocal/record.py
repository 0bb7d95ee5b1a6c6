"""The record of a measured run: what the logs and timelines say, and ddlsim's predictions of
it with this run's own device and loopback figures (:func:`measured_catalog`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.tools.hvdlocal import COMM, CPU_DEVICE_ID, INTRA_NODE, SOURCE_ID, machine
from ddlsim.tools.hvdlocal import fit as fitting
from ddlsim.tools.hvdlocal.outputs import trim_timeline
from ddlsim.tools.hvdlocal.report import format_table, predict_run
from ddlsim.tools.hvdlocal.stages import ROOT, say

#: timed iterations kept in the committed timelines (whole iterations, after the warm-up)
KEEP_ITERATIONS = 6


def timeline_record(path: Path, warmup_batches: int) -> tuple[dict[str, Any], str]:
    """Steady-state phases over the timed steps, and the trimmed timeline text.

    Iteration window k of the timeline is training step k; the first ``warmup_batches`` are
    the warm-up (:func:`steady_state` drops the first window it is given, hence the ``- 1``).
    """
    from ddlsim.tools.traces.phases import steady_state, timeline_phases
    from ddlsim.tools.traces.timeline import load_timeline

    timeline = load_timeline(path)
    try:
        iterations = timeline_phases(timeline)
    except ConfigError as exc:  # one worker: Horovod's tape skips the allreduce altogether
        text = path.read_text(encoding="utf-8", errors="replace")
        reason = " ".join(str(exc).split()).replace(str(path), path.name)
        return {"note": f"no iterations: {reason}"}, text
    timed = [it for it in iterations[warmup_batches:] if it.duration_s is not None]
    summary = steady_state(iterations[max(0, warmup_batches - 1) :] if timed else iterations)
    keep = timed[:KEEP_ITERATIONS] or iterations
    lo = keep[0].start_s
    hi = keep[-1].start_s + (keep[-1].duration_s or 0.0)
    text = trim_timeline(path.read_text(encoding="utf-8", errors="replace"), lo, hi, str(path))
    return summary, text


def run_row(args: argparse.Namespace, n: int, log_name: str, text: str, facts: Any) -> dict:
    """The measured-runs row of the ``n``-worker run (the log's facts and this machine's)."""
    from ddlsim.tools.traces.importer import ImportFlags, build_row

    flags = ImportFlags(
        source_id=SOURCE_ID,
        gpu=CPU_DEVICE_ID,
        gpus_per_node=n,
        intra_node=INTRA_NODE,
        inter_node="none",
        comm=COMM,
        precision="fp32",
        framework="tensorflow",
    )
    row = build_row(facts, flags, log_name, f"{SOURCE_ID}-{args.workers.index(n) + 1:04d}")
    row["note"] = (
        f"this repo's dev machine (2-vCPU AMD EPYC Zen 4 KVM guest), 1 core per worker "
        f"(pinned; TF 1 intra/1 inter-op thread), Horovod Gloo, loopback; {log_name}"
    )[:199]
    return row


@contextlib.contextmanager
def measured_catalog(probes: dict[str, Any], link: dict[str, float] | None) -> Iterator[None]:
    """Within the block, ddlsim's catalog has this run's figures for the CPU worker and (when
    fitted) the loopback link, rounded as devices.json / links.json store them, so that the
    predictions of a run rest on its own measurements. Committing the same figures to the
    catalog makes ``ddlsim validate`` reproduce them (tests/test_hvdlocal.py checks both)."""
    from ddlsim.system import catalog
    from ddlsim.system.catalog_files import _data_file, _load_catalog

    devices = json.loads(_data_file("devices.json").read_text(encoding="utf-8"))
    links = json.loads(_data_file("links.json").read_text(encoding="utf-8"))
    devices["devices"][CPU_DEVICE_ID].update(fitting.device_figures(probes))
    if link is not None:
        entry = links["intra"][INTRA_NODE]
        entry["bandwidth_GBps"] = link["bandwidth_GBps"]
        entry["efficiency"] = {t: link["efficiency"] for t in entry["efficiency"]}
        entry["latency_us"] = {t: link["latency_us"] for t in entry["latency_us"]}
    with tempfile.TemporaryDirectory(prefix="ddlsim-catalog-") as tmp:
        dev_path, link_path = Path(tmp) / "devices.json", Path(tmp) / "links.json"
        dev_path.write_text(json.dumps(devices), encoding="utf-8")
        link_path.write_text(json.dumps(links), encoding="utf-8")
        patched = _load_catalog(dev_path, link_path)
    saved = catalog._catalog
    catalog._catalog = lambda: patched
    try:
        yield
    finally:
        catalog._catalog = saved


def measured_runs(args: argparse.Namespace, logs: dict[int, str]) -> dict[int, dict[str, Any]]:
    """What each training log states (rank 0's benchmark lines)."""
    from ddlsim.tools.traces.logs import parse_log

    measured: dict[int, dict[str, Any]] = {}
    for n in args.workers:
        facts = parse_log(logs[n], f"train_np{n}.log")
        conf = None
        for line in logs[n].splitlines():
            if "Total img/sec on" in line and "+-" in line:
                conf = float(line.rsplit("+-", 1)[1])
        per_iter = [
            float(line.split(":")[-1].split()[0])
            for line in logs[n].splitlines()
            if "]<stdout>:Iter #" in line
        ]
        measured[n] = {
            "images_per_sec": facts.images_per_sec,
            "conf": conf,
            "per_worker_iter_images_per_sec": per_iter,
            "step_time_s": n * args.batch / facts.images_per_sec,
            "facts": facts.detail,
        }
    return measured


def loopback_link(probes: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, float] | None:
    """The loopback figures of this run (None without a sweep or a sensible fit)."""
    if sweep is None:
        return None
    fit = fitting.RingFit(**{**sweep["fit"], "sizes": tuple(sweep["fit"]["sizes"])})
    try:
        return asdict(fitting.link_figures(probes["loopback"]["bandwidth_Bps"], fit))
    except ConfigError as exc:
        say(f"warning: no loopback figures (the catalog's are used): {exc}")
        return None


def predictions(
    args: argparse.Namespace,
    probes: dict[str, Any],
    link: dict[str, float] | None,
    measured: dict[int, dict[str, Any]],
    calibration: str,
) -> dict[int, Any]:
    """ddlsim's prediction of each run, with this run's figures in the catalog."""
    baseline = measured[1]["images_per_sec"]
    with measured_catalog(probes, link):
        return {
            n: predict_run(args.model, n, args.batch, calibration, baseline if n > 1 else None)
            for n in args.workers
        }


def build_record(args, probes, calibration, sweep, logs, timelines) -> dict[str, Any]:
    """``results.json``'s content: measured, predicted, timeline phases, the fits."""
    from ddlsim.calibration import profile as profile_io

    measured = measured_runs(args, logs)
    link = loopback_link(probes, sweep)
    predicted = predictions(args, probes, link, measured, str(calibration))
    phases, trimmed = {}, {}
    for n in args.workers:
        phases[n], trimmed[n] = timeline_record(timelines[n], args.warmup_batches)
    prof = profile_io.load(calibration)
    return {
        "model": args.model,
        "batch_per_worker": args.batch,
        "workers": args.workers,
        "source_id": SOURCE_ID,
        "run": {
            "warmup_batches": args.warmup_batches,
            "batches_per_iter": args.batches_per_iter,
            "iters": args.iters,
            "calibrate_steps": args.calibrate_steps,
        },
        "ddlsim_git": (machine.git_commit(ROOT) or {}).get("commit"),
        "measured": {str(n): m for n, m in measured.items()},
        "predicted": {str(n): p.to_dict() for n, p in predicted.items()},
        "timeline_steady_state": {str(n): phases[n] for n in args.workers},
        "calibration": {
            "file": str(calibration),
            "step_time_s": prof.step_time_s,
            "images_per_sec": prof.images_per_sec,
            "sum_layers_over_step": prof.sum_layers_s / prof.step_time_s,
        },
        "sweep_fit": sweep["fit"] if sweep else None,
        "loopback_link": link,
        "cpu_device": fitting.device_figures(probes),
        "table": format_table(measured, predicted),
        "trimmed_timelines": trimmed,
    }
