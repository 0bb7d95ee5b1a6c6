"""Importing TensorFlow for ``ddlsim calibrate`` (an optional extra), and what it sees.

TensorFlow is imported only here, only on the calibration path (never by ``ddlsim predict``).
:func:`import_tensorflow` quietens its C++ logging, serialises op execution
(``set_inter_op_parallelism_threads(1)``, so per-layer op times add up to the step) and turns a
missing install into a one-line error that says what to install.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from types import ModuleType
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.extras import install_hint
from ddlsim.tools.calibrate.devices import LocalDevice

TF_REQUIREMENT = "tensorflow-cpu==2.18.1"
INSTALL_HINT = (
    f"'ddlsim calibrate' needs TensorFlow: {install_hint('calibrate')} "
    f"({TF_REQUIREMENT}; to profile a GPU: pip install 'tensorflow[and-cuda]==2.18.1')"
)


class TensorFlowMissingError(ConfigError):
    """TensorFlow (the ``calibrate`` extra) is not installed."""


def import_tensorflow() -> ModuleType:
    """``tensorflow``, imported and configured for profiling (inter-op threads = 1)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise TensorFlowMissingError(f"{INSTALL_HINT} [{exc}]") from None
    with contextlib.suppress(RuntimeError):  # runtime already initialised: keep its setting
        tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf


def inter_op_threads(tf: ModuleType) -> int:
    """Inter-op threads in force (0 = TensorFlow's default, one per core)."""
    return int(tf.config.threading.get_inter_op_parallelism_threads())


def cpu_name() -> str:
    """The host CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def list_devices(tf: ModuleType) -> list[LocalDevice]:
    """The CPU and every GPU TensorFlow sees, with the names it reports."""
    out: list[LocalDevice] = []
    for kind in ("CPU", "GPU"):
        for i, dev in enumerate(tf.config.list_physical_devices(kind)):
            details: dict[str, Any] = {}
            if kind == "GPU":
                try:
                    details = dict(tf.config.experimental.get_device_details(dev))
                except (ValueError, RuntimeError):
                    details = {}
            name = cpu_name() if kind == "CPU" else str(details.get("device_name", dev.name))
            index = int(dev.name.rsplit(":", 1)[-1]) if dev.name[-1:].isdigit() else i
            out.append(LocalDevice(f"/device:{kind}:{index}", kind.lower(), index, name, details))
    return out


def build_info(tf: ModuleType) -> dict[str, Any]:
    """CUDA / cuDNN versions TensorFlow was built with and the NVIDIA driver, where present."""
    info = dict(tf.sysconfig.get_build_info())
    out: dict[str, Any] = {"cuda_build": bool(info.get("is_cuda_build"))}
    for key in ("cuda_version", "cudnn_version"):
        if info.get(key):
            out[key] = str(info[key])
    driver = nvidia_driver()
    if driver:
        out["nvidia_driver"] = driver
    return out


def nvidia_driver() -> str | None:
    """The NVIDIA kernel driver's version line, where one is loaded."""
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return " ".join(first.split())
