"""What the MPI measurement scripts (measure_coordinator.sh, measure_mpi_allreduce.sh) record
besides their figures: the host, the MPI, the time; and reading their benchmarks' JSON lines.
Imported by their Python steps, run from the repository root."""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
from collections.abc import Iterable
from pathlib import Path

from ddlsim.tools.calibrate.tf_env import cpu_name


def header(what: str, command: str) -> dict:
    """The fields every measurement file starts with."""
    mpirun = subprocess.run(["mpirun", "--version"], capture_output=True, text=True)
    return {
        "what": what,
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "mpi": mpirun.stdout.splitlines()[0],
        "load_average": os.getloadavg(),
    }


def load_runs(folder: str, name: str) -> list[dict]:
    """The JSON objects of ``folder/name``, one per non-empty line (one per benchmark run)."""
    lines = Path(folder, name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def medians(runs: list[dict], keys: Iterable[str]) -> dict:
    """The median over ``runs`` of each of ``keys``, with the runs themselves."""
    return {**{k: statistics.median(r[k] for r in runs) for k in keys}, "runs": runs}


def write(path: str, doc: dict) -> None:
    """``doc`` as indented JSON at ``path``."""
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
