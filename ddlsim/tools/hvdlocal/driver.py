"""``python -m ddlsim.tools.hvdlocal``: measure Horovod here, predict it, write ``traces/horovod``.

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

The command line and the order of the stages live here; :mod:`.stages` runs the programs,
:mod:`.record` turns their output into the record and its predictions, :mod:`.publish` writes
the record folder.

Errors print one line (``ddlsim-hvdlocal: error: ...``) and exit 2; a failed subprocess names
its log. Nothing in the output folder is created or replaced before the measurements have
succeeded.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ddlsim.errors import ConfigError, DdlsimError
from ddlsim.tools.hvdlocal import DEFAULT_BATCH, DEFAULT_MODEL, DEFAULT_WORKERS, machine
from ddlsim.tools.hvdlocal.publish import write, write_report
from ddlsim.tools.hvdlocal.record import build_record, measured_runs, predictions
from ddlsim.tools.hvdlocal.report import format_table
from ddlsim.tools.hvdlocal.stages import (
    PREFIX,
    ROOT,
    preflight,
    run_calibration,
    run_probes,
    run_sweep,
    run_training,
    say,
)
from ddlsim.tools.hvdlocal.workers import INTER_OP_THREADS, INTRA_OP_THREADS, THREAD_ENV, core_for

EXIT_ERROR = 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="python -m ddlsim.tools.hvdlocal",
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


def run(args: argparse.Namespace) -> int:
    """All stages; returns 0."""
    cores = preflight(args)
    cmd = "python -m ddlsim.tools.hvdlocal " + shlex.join(sys.argv[1:])
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
        record = build_record(args, probes, calibration, sweep, logs, timelines)
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
        write(args, work, record, info, probes, sweep)
    return 0


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
    except OSError as exc:
        where = f" ({Path(exc.filename).name})" if exc.filename else ""
        raise ConfigError(
            f"{out} does not hold a complete record: {exc.strerror or 'unreadable'}{where}"
        ) from None
    except ValueError:  # json.JSONDecodeError, UnicodeDecodeError
        raise ConfigError(f"{out} does not hold a complete record: a file is not JSON") from None
    except KeyError as exc:
        raise ConfigError(
            f"{out} does not hold a complete record: results.json has no {exc.args[0]!r} field"
        ) from None
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
    measured = measured_runs(args, logs)
    calibration = record["calibration"]["file"]
    predicted = predictions(args, probes, record.get("loopback_link"), measured, calibration)
    record["predicted"] = {str(n): p.to_dict() for n, p in predicted.items()}
    record["ddlsim_git"] = (machine.git_commit(ROOT) or {}).get("commit")
    record["table"] = format_table(measured, predicted)
    write_report(args, record, info)
    return 0


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
