"""``python -m ddlsim.hvdlocal``: measure Horovod here, predict it, write ``traces/horovod``.

Stages (each subprocess's output is kept as a log):

1. ``probes``: raw TCP loopback and one core's memory bandwidth / SGEMM (:mod:`.probes`);
2. ``calibrate``: ``ddlsim calibrate --device cpu --catalog-id epyc-zen4-core`` of the model
   and batch, pinned to one core (:mod:`.workers`); the file goes to ``--calibration-dir``
   (default ``calibration/``: the shipped calibrations, where ``ddlsim validate`` finds it);
3. ``sweep``: ``horovodrun`` of :mod:`.sweep` on the largest worker count, with a timeline; the
   ``GLOO_ALLREDUCE`` medians are fitted to the ring (:mod:`.fit`) and compared with the
   ``loopback`` entry of the link catalog;
4. ``train``: ``horovodrun -np N --gloo --timeline-filename`` of :mod:`.train` for each N;
5. predictions (:mod:`.report`) and the record: ``runs.csv`` (measured-runs schema, the 1-worker
   row is the baseline of the others), ``results.json``, trimmed timelines, ``machine.json``,
   ``README.md``.

Errors print one line (``ddlsim-hvdlocal: error: ...``) and exit 2; a failed subprocess names
its log. Nothing in the output folder is replaced before the measurements have succeeded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from importlib import util
from pathlib import Path
from typing import Any

import ddlsim
from ddlsim.errors import ConfigError, DdlsimError
from ddlsim.hvdlocal import (
    COMM,
    CPU_DEVICE_ID,
    DEFAULT_BATCH,
    DEFAULT_MODEL,
    DEFAULT_WORKERS,
    INTRA_NODE,
    SOURCE_ID,
    machine,
)
from ddlsim.hvdlocal import fit as fitting
from ddlsim.hvdlocal.outputs import trim_timeline, write_json, write_text
from ddlsim.hvdlocal.report import format_table, predict_run
from ddlsim.hvdlocal.workers import (
    INTER_OP_THREADS,
    INTRA_OP_THREADS,
    THREAD_ENV,
    core_for,
    pin,
    usable_cores,
)

PREFIX = "ddlsim-hvdlocal"
ROOT = Path(ddlsim.__file__).resolve().parents[1]
#: timed iterations kept in the committed timelines (whole iterations, after the warm-up)
KEEP_ITERATIONS = 6
EXIT_ERROR = 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="python -m ddlsim.hvdlocal",
        description="Measure Horovod (Gloo, CPU) data-parallel training of a zoo model on this "
        "host with 1 and 2 workers, predict it with ddlsim, and write the record.",
    )
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"zoo model (default {DEFAULT_MODEL})")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="batch per worker (16)")
    p.add_argument(
        "--workers", type=int, nargs="+", default=list(DEFAULT_WORKERS), help="default: 1 2"
    )
    p.add_argument("--out", type=Path, default=Path("traces/horovod"), help="record folder")
    p.add_argument(
        "--calibration-dir",
        type=Path,
        default=Path("calibration"),
        help="where the CPU calibration is written (default: calibration/, the shipped files)",
    )
    p.add_argument("--warmup-batches", type=int, default=10, help="untimed steps per run (10)")
    p.add_argument("--batches-per-iter", type=int, default=5, help="steps per timed iter (5)")
    p.add_argument("--iters", type=int, default=10, help="timed iterations per run (10)")
    p.add_argument("--calibrate-steps", type=int, default=5, help="traced calibration steps")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 2 warm-up steps, 3 iterations of 2 steps, a coarse sweep",
    )
    p.add_argument(
        "--sweep-max-log2", type=int, default=28, help="largest sweep message, log2 bytes (28)"
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: predict the record in --out again with this ddlsim and rewrite "
        "its results.json predictions and README.md",
    )
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the intermediate files (full timelines, logs) in this folder",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.warmup_batches, args.batches_per_iter, args.iters = 2, 2, 3
        args.calibrate_steps = 2
    if sorted(set(args.workers)) != sorted(args.workers) or min(args.workers) < 1:
        p.error("--workers: distinct positive counts")
    if 1 not in args.workers:
        p.error("--workers must include 1 (the baseline of the others)")
    return args


# --------------------------------------------------------------------------- subprocesses


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(THREAD_ENV)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    return env


def _run(cmd: list[str], log: Path, *, core: int | None = None, timeout: float = 3600) -> str:
    """Run ``cmd`` (output to ``log``); return the output; a failure names the log."""
    say(f"$ {shlex.join(cmd)}")
    t0 = time.monotonic()
    with open(log, "w", encoding="utf-8") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n")
        fh.flush()
        try:
            done = subprocess.run(
                cmd,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=_env(),
                timeout=timeout,
                preexec_fn=(lambda: pin(core)) if core is not None else None,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(f"{cmd[2:4]} took over {timeout:.0f} s; see {log}") from None
    text = log.read_text(encoding="utf-8", errors="replace")
    if done.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-3:])
        head = shlex.join(cmd[:6])
        raise ConfigError(f"exit {done.returncode} of {head} ...: {tail} (log {log})")
    say(f"  done in {time.monotonic() - t0:.0f} s")
    return text


def _horovodrun(n: int, timeline: Path, program: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "-np",
        str(n),
        "-H",
        f"localhost:{n}",
        "--gloo",
        "--timeline-filename",
        str(timeline),
        sys.executable,
        "-m",
        *program,
    ]


def say(text: str) -> None:
    """A progress line on stderr."""
    print(f"{PREFIX}: {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- stages


def preflight(args: argparse.Namespace) -> list[int]:
    """Horovod (with Gloo) and TensorFlow importable; a core per worker; the folders usable."""
    for module, extra in (("tensorflow", "calibrate"), ("horovod", "horovod")):
        if util.find_spec(module) is None:
            raise ConfigError(
                f"{module} is not installed: run scripts/horovod_local.sh, which installs "
                f"'ddlsim[{extra}]' (Horovod is built from source with Gloo)"
            )
    cores = usable_cores()
    if len(cores) < max(args.workers):
        raise ConfigError(
            f"{max(args.workers)} workers need as many cores (one each); this process may use "
            f"{len(cores)} ({cores})"
        )
    from ddlsim.cluster import catalog
    from ddlsim.workload.zoo import get_model

    get_model(args.model)
    catalog.device(CPU_DEVICE_ID)
    for folder in (args.out, args.calibration_dir):
        folder.mkdir(parents=True, exist_ok=True)
    return cores


def run_probes(work: Path) -> dict[str, Any]:
    """Stage 1."""
    text = _run([sys.executable, "-m", "ddlsim.hvdlocal.probes"], work / "probes.log")
    return json.loads(text.strip().splitlines()[-1])


def run_calibration(args: argparse.Namespace, work: Path, core: int) -> Path:
    """Stage 2: the calibration file, profiled on one pinned core."""
    from ddlsim.workload.store import calibration_path

    cmd = [
        sys.executable,
        "-m",
        "ddlsim",
        "calibrate",
        "--device",
        "cpu",
        "--catalog-id",
        CPU_DEVICE_ID,
        "--model",
        args.model,
        "--batch",
        str(args.batch),
        "--steps",
        str(args.calibrate_steps),
        "--output",
        str(args.calibration_dir),
    ]
    _run(cmd, work / "calibrate.log", core=core)
    return calibration_path(args.calibration_dir, args.model, CPU_DEVICE_ID, args.batch, "fp32")


def run_sweep(args: argparse.Namespace, work: Path, n: int, memory_Bps: float) -> dict[str, Any]:
    """Stage 3: wall and Gloo times per size, and the ring fit."""
    from ddlsim.traces.timeline import parse_events

    timeline = work / "sweep_timeline.json"
    program = ["ddlsim.hvdlocal.sweep", "--max-log2", str(args.sweep_max_log2)]
    if args.quick:
        program += ["--step", "3"]
    text = _run(_horovodrun(n, timeline, program), work / "sweep.log")
    walls: dict[int, list[float]] = {}
    for line in text.splitlines():
        start = line.find('{"sweep"')
        if start >= 0:
            row = json.loads(line[start:])["sweep"]
            walls[int(row["nbytes"])] = row["wall_s"]
    events, _ = parse_events(timeline.read_text(encoding="utf-8", errors="replace"), "sweep")
    gloo = fitting.gloo_durations(events)
    reduce_Bps = fitting.reduce_rate_Bps(memory_Bps)
    fit = fitting.fit_ring(fitting.medians(gloo), n, reduce_Bps)
    return {
        "ranks": n,
        "method": "hvd.allreduce(op=Sum) of float32 tensors, eager; Gloo; ranks pinned to cores",
        "reduce_Bps": reduce_Bps,
        "sizes": [
            {
                "nbytes": s,
                "wall_s": walls.get(s, []),
                "gloo_allreduce_s": [round(x, 7) for x in gloo.get(s, [])],
            }
            for s in sorted(set(walls) | set(gloo))
        ],
        "fit": fit.to_dict(),
    }


def run_training(args: argparse.Namespace, work: Path, n: int) -> tuple[str, Path]:
    """Stage 4 for ``n`` workers: the log text and the timeline file."""
    timeline = work / f"timeline_np{n}.json"
    program = [
        "ddlsim.hvdlocal.train",
        "--model",
        args.model,
        "--batch-size",
        str(args.batch),
        "--num-warmup-batches",
        str(args.warmup_batches),
        "--num-batches-per-iter",
        str(args.batches_per_iter),
        "--num-iters",
        str(args.iters),
    ]
    text = _run(_horovodrun(n, timeline, program), work / f"train_np{n}.log")
    return text, timeline


# --------------------------------------------------------------------------- the record


def _timeline_record(path: Path, warmup_batches: int) -> tuple[dict[str, Any], str]:
    """Steady-state phases over the timed steps, and the trimmed timeline text.

    Iteration window k of the timeline is training step k; the first ``warmup_batches`` are
    the warm-up (:func:`steady_state` drops the first window it is given, hence the ``- 1``).
    """
    from ddlsim.traces.phases import steady_state, timeline_phases
    from ddlsim.traces.timeline import load_timeline

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


def _row(args: argparse.Namespace, n: int, log_name: str, text: str, facts: Any) -> dict:
    from ddlsim.traces.importer import ImportFlags, build_row

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


def _readme(args: argparse.Namespace, info: dict, results: dict, table: str, cmd: str) -> str:
    v = info["versions"]
    cpu = info["cpu"]
    mem = info["memory_bytes"] or 0
    sweep = results.get("sweep_fit") or {}
    link = results.get("loopback_link") or {}
    lines = [
        "# Measured Horovod runs on this machine's CPU (Gloo, localhost)",
        "",
        f"Written by `{cmd}` (`scripts/horovod_local.sh` installs `ddlsim[horovod]` and runs "
        "it) on " + info["date_utc"] + ". Re-running it replaces every file here and the "
        f"calibration `{results['calibration']['file']}`.",
        "",
        "## What ran",
        "",
        f"- Model `{args.model}` (the zoo's Keras model, as `ddlsim calibrate` profiles it), "
        f"batch {args.batch} per worker, fp32, synthetic data, momentum SGD.",
        f"- Horovod data-parallel training, `horovodrun -np N -H localhost:N --gloo`, N = "
        f"{', '.join(map(str, args.workers))}; {args.warmup_batches} warm-up steps, then "
        f"{args.iters} timed iterations of {args.batches_per_iter} steps; Horovod 0.28.1 "
        "defaults (fusion 128 MiB, cycle 1 ms).",
        "- One core per worker everywhere: each worker pinned to its own core, TensorFlow "
        f"with {INTRA_OP_THREADS} intra-op and {INTER_OP_THREADS} inter-op thread; the "
        "calibration pinned to one core with the same threads. Horovod's background thread "
        "and Gloo's TCP I/O share the worker's core.",
        "",
        "## Machine and versions",
        "",
        f"- CPU: {cpu.get('model_name')} (family {cpu.get('cpu_family')}, model "
        f"{cpu.get('model')}, stepping {cpu.get('stepping')}), {cpu.get('logical_cpus')} "
        f"logical CPUs, flags {', '.join(cpu.get('flags', []))}",
        f"- RAM {mem / 2**30:.1f} GiB; kernel {info['kernel']}; {info['os']}",
        f"- Python {v['python']}, TensorFlow {v.get('tensorflow-cpu') or v.get('tensorflow')}, "
        f"Keras {v['keras']}, Horovod {v['horovod']}, NumPy {v['numpy']}, ddlsim {v['ddlsim']}"
        + (f" (git {info['git']['commit'][:12]})" if info.get("git") else ""),
        f"- Load average before / after: {results['load_before']} / {results['load_after']} "
        "(the machine was shared; see the top-level README)",
        "",
        "## Results (images/s over all workers)",
        "",
        "```",
        table.rstrip(),
        "```",
        "",
        "`calibrated`: ddlsim from the calibration alone; `anchored`: compute anchored to the "
        "measured 1-worker run (what `ddlsim validate runs.csv` predicts). A CPU worker's core "
        "also moves and sums the gradients, so ddlsim never hides its communication behind "
        "backprop.",
        "",
        f"Loopback link fitted from the allreduce sweep ({sweep.get('n_ranks')} ranks): "
        f"{link.get('bandwidth_GBps')} GB/s raw TCP, Gloo hop efficiency "
        f"{link.get('efficiency')}, {link.get('latency_us')} us per ring step (max relative "
        f"residual {sweep.get('max_rel_residual', 0):.0%}).",
        "",
        "## Files",
        "",
        "- `runs.csv`: the measured rows (measured-runs schema of `traces/measured/README.md`; "
        f"beyond its vocabulary: gpu `{CPU_DEVICE_ID}`, a CPU worker; intra_node "
        f"`{INTRA_NODE}`; comm `{COMM}`)",
        "- `results.json`: measured, predicted, timeline phases, the sweep fit",
        "- `train_npN.log`, `calibrate.log`, `sweep.log`, `probes.log`: raw output",
        f"- `timeline_npN.json`: Horovod timelines, trimmed to {KEEP_ITERATIONS} timed steps",
        "- `allreduce_sweep.json`, `probes.json`: the link and core measurements",
        "- `machine.json`: machine, versions, `horovodrun --check-build`, the command",
        "",
        "`python -m ddlsim.hvdlocal --report-only` predicts this record again with the "
        "installed ddlsim (no measurement) and rewrites `results.json`'s predictions and this "
        "README; `ddlsim validate traces/horovod/runs.csv` predicts the 2-worker row with the "
        "catalog's figures, which should be this run's (`results.json`: `cpu_device`, "
        "`loopback_link`).",
        "",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """All stages; returns 0."""
    cores = preflight(args)
    cmd = "python -m ddlsim.hvdlocal " + shlex.join(sys.argv[1:])
    load_before = machine.load_average()
    with tempfile.TemporaryDirectory(prefix="ddlsim-hvdlocal-") as tmp:
        work = Path(tmp) if args.work is None else args.work
        work.mkdir(parents=True, exist_ok=True)
        say(f"[1/5] probes (loopback TCP, memory, SGEMM) on cores {cores[:2]}")
        probes = run_probes(work)
        say(f"[2/5] ddlsim calibrate --device cpu on core {core_for(0, cores)}")
        calibration = run_calibration(args, work, core_for(0, cores))
        biggest = max(args.workers)
        sweep = None
        if biggest > 1:
            say(f"[3/5] hvd.allreduce sweep, {biggest} workers")
            sweep = run_sweep(args, work, biggest, probes["memory"]["bandwidth_Bps"])
        logs: dict[int, str] = {}
        timelines: dict[int, Path] = {}
        for n in args.workers:
            say(f"[4/5] Horovod training, {n} worker(s)")
            logs[n], timelines[n] = run_training(args, work, n)
        load_after = machine.load_average()
        say("[5/5] predictions and the record")
        record = _record(args, probes, calibration, sweep, logs, timelines)
        record.update(load_before=load_before, load_after=load_after, command=cmd)
        info = machine.describe(ROOT)
        info["command"] = cmd
        info["settings"] = {
            "pinning": "one core per worker (HOROVOD_LOCAL_RANK-th usable core)",
            "intra_op_threads": INTRA_OP_THREADS,
            "inter_op_threads": INTER_OP_THREADS,
            "environment": THREAD_ENV,
        }
        info["load_average_before"], info["load_average_after"] = load_before, load_after
        _write(args, work, record, info, probes, sweep)
    return 0


@contextlib.contextmanager
def measured_catalog(probes: dict[str, Any], link: dict[str, float] | None) -> Iterator[None]:
    """Within the block, ddlsim's catalog has this run's figures for the CPU worker and (when
    fitted) the loopback link, rounded as devices.json / links.json store them, so that the
    predictions of a run rest on its own measurements. Committing the same figures to the
    catalog makes ``ddlsim validate`` reproduce them (tests/test_hvdlocal.py checks both)."""
    from ddlsim.cluster import catalog
    from ddlsim.cluster.catalog_files import _data_file, _load_catalog

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


def _measured(args: argparse.Namespace, logs: dict[int, str]) -> dict[int, dict[str, Any]]:
    """What each training log states (rank 0's benchmark lines)."""
    from ddlsim.traces.logs import parse_log

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


def _link(probes: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, float] | None:
    """The loopback figures of this run (None without a sweep or a sensible fit)."""
    if sweep is None:
        return None
    fit = fitting.RingFit(**{**sweep["fit"], "sizes": tuple(sweep["fit"]["sizes"])})
    try:
        return asdict(fitting.link_figures(probes["loopback"]["bandwidth_Bps"], fit))
    except ConfigError as exc:
        say(f"warning: no loopback figures (the catalog's are used): {exc}")
        return None


def _predictions(
    args: argparse.Namespace,
    probes: dict[str, Any],
    link: dict[str, float] | None,
    measured: dict[int, dict[str, Any]],
    calibration: str,
) -> dict[int, Any]:
    baseline = measured[1]["images_per_sec"]
    with measured_catalog(probes, link):
        return {
            n: predict_run(args.model, n, args.batch, calibration, baseline if n > 1 else None)
            for n in args.workers
        }


def _record(args, probes, calibration, sweep, logs, timelines) -> dict[str, Any]:
    from ddlsim.workload import profile as profile_io

    measured = _measured(args, logs)
    link = _link(probes, sweep)
    predicted = _predictions(args, probes, link, measured, str(calibration))
    phases, trimmed = {}, {}
    for n in args.workers:
        phases[n], trimmed[n] = _timeline_record(timelines[n], args.warmup_batches)
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


def _write(args, work, record, info, probes, sweep) -> None:
    from ddlsim.traces.logs import parse_log
    from ddlsim.validate.runs import format_rows, write_atomic

    out = args.out
    trimmed = record.pop("trimmed_timelines")
    rows = []
    for n in args.workers:
        name = f"train_np{n}.log"
        text = (work / name).read_text(encoding="utf-8", errors="replace")
        rows.append(_row(args, n, name, text, parse_log(text, name)))
        write_text(out / name, text)
        write_text(out / f"timeline_np{n}.json", trimmed[n])
    for name in ("calibrate.log", "probes.log", "sweep.log"):
        if (work / name).exists():
            write_text(out / name, (work / name).read_text(encoding="utf-8", errors="replace"))
    write_json(out / "probes.json", probes)
    if sweep is not None:
        write_json(out / "allreduce_sweep.json", sweep)
    write_json(out / "machine.json", info)
    write_atomic(out / "runs.csv", format_rows(rows))
    _write_report(args, record, info)


def _write_report(args: argparse.Namespace, record: dict[str, Any], info: dict) -> None:
    """results.json and README.md, and the summary on stdout."""
    out = args.out
    table = record.pop("table")
    write_json(out / "results.json", record)
    write_text(out / "README.md", _readme(args, info, record, table, record["command"]))
    print(f"\n{PREFIX}: {args.model}, batch {args.batch} per worker, images/s over all workers")
    print(table, end="")
    link = record.get("loopback_link")
    if link:
        print(
            f"loopback link (links.json 'loopback'): bandwidth_GBps {link['bandwidth_GBps']}, "
            f"efficiency {link['efficiency']}, latency_us {link['latency_us']}"
        )
    _compare_catalog(link, record["cpu_device"])
    ts = record["timeline_steady_state"]
    for n in args.workers:
        p = record["predicted"][str(n)]
        print(
            f"{n} worker(s): timeline allreduce {_ms(ts[str(n)].get('allreduce_s'))} ms/step, "
            f"negotiation {_ms(ts[str(n)].get('negotiate_s'))} ms/step; ddlsim comm "
            f"{_ms(p['comm_s_per_iteration'])} ms/step ({_ms(p['comm_hidden_s'])} hidden)"
        )
    print(f"wrote {out}/ and {record['calibration']['file']}")


def report_only(args: argparse.Namespace) -> int:
    """Predict the record in ``--out`` again with this ddlsim (no measurement): rewrites the
    predictions of ``results.json`` and ``README.md``, after a change of the model."""
    out = args.out
    try:
        record = json.loads((out / "results.json").read_text(encoding="utf-8"))
        info = json.loads((out / "machine.json").read_text(encoding="utf-8"))
        probes = json.loads((out / "probes.json").read_text(encoding="utf-8"))
        logs = {
            n: (out / f"train_np{n}.log").read_text(encoding="utf-8") for n in record["workers"]
        }
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{out} does not hold a complete record: {exc}") from None
    args.model, args.batch, args.workers = (
        record["model"],
        record["batch_per_worker"],
        record["workers"],
    )
    for key, value in record.get("run", {}).items():
        setattr(args, key, value)
    record["run"] = {
        key: getattr(args, key)
        for key in ("warmup_batches", "batches_per_iter", "iters", "calibrate_steps")
    }
    measured = _measured(args, logs)
    calibration = record["calibration"]["file"]
    predicted = _predictions(args, probes, record.get("loopback_link"), measured, calibration)
    record["predicted"] = {str(n): p.to_dict() for n, p in predicted.items()}
    record["ddlsim_git"] = (machine.git_commit(ROOT) or {}).get("commit")
    record["table"] = format_table(measured, predicted)
    _write_report(args, record, info)
    return 0


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _compare_catalog(link: dict[str, float] | None, device: dict[str, float]) -> None:
    """Say which catalog figures differ from this run's (the predictions used this run's)."""
    from ddlsim.cluster import catalog

    dev = catalog.device(CPU_DEVICE_ID)
    have = {
        f"devices.json {CPU_DEVICE_ID} peak_fp32_TFLOPS": (
            dev.peak_fp32_flops / 1e12,
            device["peak_fp32_TFLOPS"],
        ),
        f"devices.json {CPU_DEVICE_ID} mem_bandwidth_GBps": (
            dev.mem_bandwidth_Bps / 1e9,
            device["mem_bandwidth_GBps"],
        ),
    }
    if link is not None:
        spec = catalog.intra_link(INTRA_NODE)
        have.update(
            {
                "links.json loopback bandwidth_GBps": (
                    spec.nominal_bandwidth_Bps / 1e9,
                    link["bandwidth_GBps"],
                ),
                "links.json loopback efficiency": (spec.efficiency["tcp"], link["efficiency"]),
                "links.json loopback latency_us": (spec.latency_s["tcp"] * 1e6, link["latency_us"]),
            }
        )
    off = [f"{k}: {a:.6g} -> {b:.6g}" for k, (a, b) in have.items() if abs(a - b) > 1e-9]
    if off:
        print(
            f"{PREFIX}: the catalog's figures differ from this run's (the predictions above use "
            "this run's); to commit the run, set (and update the figures quoted in their "
            "sources):\n  " + "\n  ".join(off)
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; one-line errors, exit 2."""
    args = parse_args(argv)
    try:
        return report_only(args) if args.report_only else run(args)
    except DdlsimError as exc:
        print(f"{PREFIX}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{PREFIX}: interrupted", file=sys.stderr)
        return 130
