"""Optional dependencies (pyproject extras): importing them, and the one install hint.

ddlsim is installed from its checkout (it is not published on PyPI), so the hint names the
command that works there: ``python3 -m pip install -e '.[sweep]'``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ddlsim.errors import ConfigError

#: extra -> what it installs (pyproject.toml ``[project.optional-dependencies]``)
EXTRAS = {
    "sweep": "Dask, PyYAML, pandas, pyarrow",
    "plot": "matplotlib",
    "calibrate": "tensorflow-cpu 2.18.1, Keras",
    "horovod": "TensorFlow and Horovod 0.28.1 (scripts/horovod_local.sh builds it)",
    "torch": "torch 2.13.0 (the CPU build here; a CUDA build of it to profile a GPU)",
}


def install_hint(extra: str) -> str:
    """How to install ``extra``: the command that works from a ddlsim checkout."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    return f"python3 -m pip install -e '.[{extra}]' in the ddlsim checkout"


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise :class:`ConfigError`: ``<purpose> needs <module>: <hint>``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"{purpose} needs {module}: {install_hint(extra)}") from None
