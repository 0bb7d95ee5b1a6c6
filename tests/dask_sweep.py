"""A detailed sweep on a local Dask cluster, started in its own process group: what the signal
tests interrupt (tests/test_signals.py, tests/test_outputs.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def start_dask_sweep(
    tmp_path: Path, previous: str | None = None
) -> tuple[subprocess.Popen, Path, Path]:
    """Start ``ddlsim sweep`` with 2 Dask workers writing ``tmp_path/rows.csv`` (holding
    ``previous`` beforehand, if given) and a scratch TMPDIR; returns the process, the output
    path and the scratch folder."""
    pytest.importorskip("dask.distributed")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "rows.csv"
    if previous is not None:
        out.write_text(previous)
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(REPO),
        "DDLSIM_CALIBRATION_DIR": str(tmp_path / "cal"),
    }
    # 20 detailed configurations, about a minute on 2 workers of a 2-core machine: a piped bar
    # logs its first line after 10 s (cli/progress.py), and that line must come mid-sweep on a
    # machine several times faster too (12 configurations once took 11 s and ended first)
    argv = ["sweep", "--model", "resnet50", "vgg16", "inception3", "googlenet"]
    argv += ["--gpus", "2048", "4096", "8192", "16384", "32768"]
    argv += ["--engine", "detailed", "--workers", "2", "-o", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddlsim", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, out, scratch
