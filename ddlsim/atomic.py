"""Atomic output files: written to a temporary file beside the target, then renamed over it.

A reader never sees a half-written file, and an error while writing leaves neither the target
nor the temporary file behind. ``-`` as the path means standard output (text only).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ddlsim.errors import ConfigError

STDOUT = "-"


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` to produce a temporary file, then rename it to ``path``.

    A missing or unwritable folder raises :class:`ConfigError` (one line); any exception from
    ``write`` removes the temporary file and propagates.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(f"cannot write {target}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; ``-`` writes it to standard output."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    atomic_write(path, write)


def _mode_for(target: Path) -> int:
    """The target's current permissions, or what a plain ``open`` would give a new file."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
