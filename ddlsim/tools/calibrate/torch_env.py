"""Importing PyTorch for ``ddlsim calibrate --framework torch`` (an optional extra), and what it
sees.

PyTorch is imported only here, only on that path (never by ``ddlsim predict``).
:func:`import_torch` turns a missing install into a one-line error naming the extra;
:func:`list_devices` lists the CPU and every CUDA device with the names PyTorch reports;
:func:`build_info` records the PyTorch, CUDA and cuDNN versions.
"""

from __future__ import annotations

import platform
from types import ModuleType
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.extras import install_hint
from ddlsim.tools.calibrate.devices import LocalDevice
from ddlsim.tools.calibrate.tf_env import cpu_name, nvidia_driver

TORCH_REQUIREMENT = "torch==2.13.0"
INSTALL_HINT = (
    f"'ddlsim calibrate --framework torch' needs PyTorch: {install_hint('torch')} "
    f"({TORCH_REQUIREMENT}; a CUDA build of it to profile a GPU)"
)
GPU_INSTALL = f"pip install {TORCH_REQUIREMENT} with a CUDA build (PyTorch's CUDA wheel index)"


class TorchMissingError(ConfigError):
    """PyTorch (the ``torch`` extra) is not installed."""


def import_torch() -> ModuleType:
    """``torch``, imported (a missing install: :class:`TorchMissingError`, one line)."""
    try:
        import torch
    except ImportError as exc:
        raise TorchMissingError(f"{INSTALL_HINT} [{exc}]") from None
    return torch


def list_devices(torch: ModuleType) -> list[LocalDevice]:
    """The CPU and every CUDA device PyTorch sees, with the names it reports."""
    out = [LocalDevice("cpu", "cpu", 0, cpu_name(), {"threads": torch.get_num_threads()})]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            details = {
                "compute_capability": f"{props.major}.{props.minor}",
                "sm_count": int(props.multi_processor_count),
                "memory_bytes": int(props.total_memory),
            }
            out.append(LocalDevice(f"cuda:{i}", "gpu", i, str(props.name), details))
    return out


def build_info(torch: ModuleType) -> dict[str, Any]:
    """PyTorch, CUDA and cuDNN versions, and the NVIDIA driver, where present."""
    out: dict[str, Any] = {
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,  # None for a CPU-only build
        "cuda_build": torch.version.cuda is not None,
        "python": platform.python_version(),
    }
    if torch.backends.cudnn.is_available():
        out["cudnn"] = str(torch.backends.cudnn.version())
    driver = nvidia_driver()
    if driver:
        out["nvidia_driver"] = driver
    return out
