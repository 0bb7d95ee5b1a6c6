"""What machine and which versions produced a measurement (``machine.json``).

Everything is read from ``/proc``, ``/etc/os-release``, package metadata and ``git``; nothing
imports TensorFlow or Horovod (``horovodrun --check-build`` reports how Horovod was built).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ddlsim.version import __version__

PACKAGES = ("tensorflow-cpu", "tensorflow", "keras", "horovod", "numpy")
_CPU_KEYS = ("model name", "vendor_id", "cpu family", "model", "stepping", "microcode")
_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "hypervisor")


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu() -> dict[str, Any]:
    """The first processor's identification in ``/proc/cpuinfo``, selected flags, core counts."""
    info: dict[str, Any] = {}
    flags: list[str] = []
    for line in _read("/proc/cpuinfo").splitlines():
        if not line.strip():
            break  # first processor only
        key, _, value = (part.strip() for part in line.partition(":"))
        if key in _CPU_KEYS:
            info[key.replace(" ", "_")] = value
        elif key == "flags":
            flags = value.split()
        elif key == "bogomips":
            info["bogomips"] = value
    info["flags"] = [f for f in _FLAGS if f in flags]
    info["logical_cpus"] = os.cpu_count()
    info["usable_cpus"] = sorted(os.sched_getaffinity(0))
    return info


def memory_bytes() -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in bytes."""
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    fields = _read("/proc/loadavg").split()
    return [float(f) for f in fields[:3]] if len(fields) >= 3 else []


def os_name() -> str:
    """``PRETTY_NAME`` of ``/etc/os-release``."""
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.platform()


def versions() -> dict[str, str | None]:
    """Installed versions of Python, ddlsim and the measured stack."""
    out: dict[str, str | None] = {"python": platform.python_version(), "ddlsim": __version__}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(root: Path) -> dict[str, Any] | None:
    """The checkout's commit and whether it has uncommitted changes (None outside git)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "uncommitted_changes": bool(dirty)}


def horovod_build() -> list[str]:
    """``horovodrun --check-build``: frameworks, controllers and tensor operations built."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "horovod.runner.launch", "--check-build"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.rstrip() for line in done.stdout.splitlines() if line.strip()]


def describe(root: Path) -> dict[str, Any]:
    """Everything above, with the UTC time."""
    return {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu(),
        "memory_bytes": memory_bytes(),
        "kernel": platform.release(),
        "os": os_name(),
        "versions": versions(),
        "git": git_commit(root),
        "horovod_check_build": horovod_build(),
    }
