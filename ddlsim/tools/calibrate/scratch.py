"""A private temporary folder for the frameworks ``ddlsim calibrate`` runs, removed on exit.

TensorFlow's autograph writes the Python source of each converted function to the temporary
folder and imports it (leaving ``TMPDIR/__pycache__/*.pyc``); PyTorch's inductor keeps its
compile cache in ``TMPDIR/torchinductor_<user>`` and Triton its kernels in ``~/.triton``. Left
alone, every calibration adds files there that nothing removes. :func:`private_tempdir` points
all of them (Python's :mod:`tempfile` default, ``TMPDIR`` for child processes,
``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``) at one new folder for the run and removes it
afterwards, whether the run succeeded, failed or was interrupted; the settings are restored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

#: environment variable -> the sub-folder of the private folder it names
CACHE_VARIABLES = {
    "TMPDIR": "",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
}


@contextlib.contextmanager
def private_tempdir() -> Iterator[str]:
    """A new temporary folder that the frameworks' temporary files and caches go to while the
    ``with`` block runs; removed with all it holds on exit."""
    folder = tempfile.mkdtemp(prefix="ddlsim-calibrate-")
    saved_env = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    saved_tempdir = tempfile.tempdir
    try:
        for name, sub in CACHE_VARIABLES.items():
            os.environ[name] = os.path.join(folder, sub) if sub else folder
        tempfile.tempdir = folder
        yield folder
    finally:
        tempfile.tempdir = saved_tempdir
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)
