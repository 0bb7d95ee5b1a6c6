"""The stages of ``python -m ddlsim.tools.hvdlocal`` that run programs: probes, calibration, the
allreduce sweep and training under ``horovodrun``, each with its output kept as a log.

A failed subprocess raises :class:`~ddlsim.errors.ConfigError` naming its log; nothing is
created in the record folder or the calibration folder before the measurements succeed
(:func:`preflight` only checks that they can be written).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from importlib import util
from pathlib import Path
from typing import Any

import ddlsim.version
from ddlsim.atomic import check_folder
from ddlsim.errors import ConfigError
from ddlsim.extras import install_hint
from ddlsim.tools.hvdlocal import CPU_DEVICE_ID
from ddlsim.tools.hvdlocal import fit as fitting
from ddlsim.tools.hvdlocal.workers import THREAD_ENV, pin, usable_cores

PREFIX = "ddlsim-hvdlocal"
ROOT = Path(ddlsim.version.__file__).resolve().parents[1]


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


def preflight(args: argparse.Namespace) -> list[int]:
    """Horovod (with Gloo) and TensorFlow importable; a core per worker; the folders usable."""
    for module, extra in (("tensorflow", "calibrate"), ("horovod", "horovod")):
        if util.find_spec(module) is None:
            raise ConfigError(
                f"{module} is not installed: run scripts/horovod_local.sh, which builds Horovod "
                f"from source with Gloo ({install_hint(extra)})"
            )
    cores = usable_cores()
    if len(cores) < max(args.workers):
        raise ConfigError(
            f"{max(args.workers)} workers need as many cores (one each); this process may use "
            f"{len(cores)} ({cores})"
        )
    from ddlsim.system import catalog
    from ddlsim.workload.zoo import get_model

    get_model(args.model)
    catalog.device(CPU_DEVICE_ID)
    check_folder(args.out, "record folder --out")
    check_folder(args.calibration_dir, "--calibration-dir")
    return cores


def run_probes(work: Path) -> dict[str, Any]:
    """Stage 1."""
    text = _run([sys.executable, "-m", "ddlsim.tools.hvdlocal.probes"], work / "probes.log")
    return json.loads(text.strip().splitlines()[-1])


def run_calibration(args: argparse.Namespace, work: Path, core: int) -> Path:
    """Stage 2: the calibration file, profiled on one pinned core."""
    from ddlsim.calibration.store import calibration_path

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
    from ddlsim.tools.traces.timeline import parse_events

    timeline = work / "sweep_timeline.json"
    program = ["ddlsim.tools.hvdlocal.sweep", "--max-log2", str(args.sweep_max_log2)]
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
        "ddlsim.tools.hvdlocal.train",
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
