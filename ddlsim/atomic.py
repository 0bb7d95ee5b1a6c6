"""Every output file ddlsim writes goes through here: checked up front, written atomically.

Rules (the same for every sub-command and every writer):

- **Only regular files are replaced.** A path that exists and is anything else -- a directory,
  a device (``/dev/null``, ``/dev/full``), a FIFO, a socket -- is refused with one line
  (:class:`ConfigError`, exit 2); nothing is written.
- **Symbolic links are followed**, as the shell's ``>`` follows them: the file the link points
  to is replaced and the link stays a link. A link to something that is not a regular file is
  refused like that thing; a dangling link creates its target (its folder must exist).
- **Atomic**: the data goes to a temporary file beside the target, then one rename puts it in
  place. A reader never sees a half-written file; an error or Ctrl-C while writing leaves
  neither the target changed nor the temporary file behind. The target keeps its permissions.
- **Folders are never created for you.** The folder of an output file, and a folder given
  as an output (``calibrate --output DIR``), must exist, as for the shell's ``>``: a missing
  one is refused with one line, so a mistyped path cannot scatter files. ddlsim creates only
  its own folders: the user calibration directory and the ``<gpu>/<model>/`` folders of the
  calibration layout inside an output folder (:func:`make_parents`; taken away again when an
  error or Ctrl-C stops the write).
- ``-`` as the path means standard output.
- :func:`check_output` runs all of these checks (and the file's extension) *before* the work,
  so a job never runs for minutes and then fails to write; the writer checks again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ddlsim.errors import ConfigError, shown
from ddlsim.inputs import kind_of

STDOUT = "-"


def resolve_target(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or where its symlinks lead."""
    p = Path(path)
    if p.is_symlink():
        return Path(os.path.realpath(p))
    return p


def check_output(
    path: str | os.PathLike[str],
    *,
    suffixes: Iterable[str] = (),
    stdout: bool = False,
    what: str = "output",
) -> None:
    """Raise :class:`ConfigError` unless ``path`` can be written by :func:`atomic_write`.

    ``suffixes`` (``.csv``, ...; case-insensitive) are the extensions the caller writes; an
    empty tuple accepts any. ``stdout``: ``-`` is allowed (standard output).
    """
    text = os.fspath(path)
    if text == STDOUT:
        if not stdout:
            raise ConfigError(f"{what} cannot be standard output ('-'): give a file name")
        return
    if not text:
        raise ConfigError(f"{what}: empty file name")
    _check_no_trailing_slash(text, what)
    p = Path(text)
    check_replaceable(p)
    allowed = tuple(s.lower() for s in suffixes)
    if allowed and p.suffix.lower() not in allowed:
        got = repr(p.suffix) if p.suffix else "no extension"
        valid = " or ".join(allowed) + (" or - (standard output)" if stdout else "")
        raise ConfigError(f"{what} {text!r} has {got}; it must end in {valid}")
    _check_target(p)


def check_replaceable(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` would replace (symlinks followed), after checking that it is
    a regular file or does not exist yet; :class:`ConfigError` (one line) otherwise."""
    p = target = Path(path)
    try:
        target = resolve_target(p)
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:  # a name too long, a loop of links, a folder not searchable
        raise _cannot_write(p, target, exc) from None
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"refusing to write {p}{_via(p, target)}: it is {kind_of(mode)}; ddlsim only replaces "
            "regular files"
        )
    return target


def _via(p: Path, target: Path) -> str:
    return f" (a symlink to {target})" if target != p else ""


def _cannot_write(p: Path, target: Path, exc: OSError) -> ConfigError:
    """The one-line error of an operating-system error on an output path."""
    return ConfigError(f"cannot write {p}{_via(p, target)}: {exc.strerror or exc}")


def _check_no_trailing_slash(text: str, what: str) -> None:
    """A file name ending in a slash names a folder: refused, never written without it."""
    if text.endswith(("/", os.sep)):
        raise ConfigError(
            f"{what} {shown(text)} ends in '/': give a file name (a trailing slash names a folder)"
        )


#: a temporary file's name is ``.<name>.XXXXXXXX.tmp`` (``mkstemp``: 8 random characters): 14
#: bytes more than the target's; a longer name is replaced by its hash there, so that every name
#: the file system takes (NAME_MAX, 255 bytes) can be written
_TEMP_EXTRA_BYTES = 14


def _temp_prefix(name: str) -> str:
    """The ``mkstemp`` prefix of the temporary file beside the target ``name``."""
    if len(os.fsencode(name)) + _TEMP_EXTRA_BYTES <= 255:
        return f".{name}."
    return f".{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}."


def _check_name_length(p: Path, target: Path, folder: Path) -> None:
    """The target's name fits the folder's file system (NAME_MAX); a one-line error before
    any work otherwise."""
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(target.name)) > name_max:
        exc = OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
        raise _cannot_write(p, target, exc)


def _check_target(p: Path) -> Path:
    """The resolved target of ``p``, after checking it and its folder; ConfigError otherwise."""
    target = check_replaceable(p)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        is_dir = folder.is_dir()
    except OSError as exc:
        raise _cannot_write(p, target, exc) from None
    if not is_dir:
        raise ConfigError(
            f"cannot write {p}{_via(p, target)}: folder {folder} does not exist (ddlsim "
            "creates no folder you name: create it first)"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {p}{_via(p, target)}: folder {folder} is not writable")
    _check_name_length(p, target, folder)
    return target


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` to produce a temporary file, then rename it over ``path``.

    ``path`` is checked as :func:`check_output` does (not a regular file, missing or unwritable
    folder: :class:`ConfigError`, one line). Any exception from ``write`` removes the temporary
    file and propagates; ``-`` copies the file's bytes to standard output.
    """
    if os.fspath(path) == STDOUT:
        _write_to_stdout(write)
        return
    _check_no_trailing_slash(os.fspath(path), "output")
    p = Path(path)
    target = _check_target(p)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=_temp_prefix(target.name), suffix=".tmp", dir=target.parent
        )
    except OSError as exc:
        raise ConfigError(f"cannot write {p}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise ConfigError(f"cannot write {p}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; ``-`` writes it to standard output."""
    if os.fspath(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (synced before the rename)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    atomic_write(path, write)


def make_parents(path: str | os.PathLike[str]) -> list[Path]:
    """Create the missing folders above ``path``; return them, outermost first, so that a caller
    interrupted before it wrote anything can take them away again (:func:`remove_empty`)."""
    missing: list[Path] = []
    folder = Path(path).parent
    try:
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
    except OSError as exc:
        raise ConfigError(f"cannot create folder {folder}: {exc.strerror or exc}") from None
    missing.reverse()
    for folder in missing:
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            remove_empty(missing)
            raise ConfigError(f"cannot create folder {folder}: {exc.strerror or exc}") from None
    return missing


def remove_empty(folders: Iterable[Path]) -> None:
    """Remove those of ``folders`` that are empty, innermost first (others are left alone)."""
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()


def nearest_existing(path: str | os.PathLike[str]) -> Path:
    """``path`` or its closest ancestor that exists (the folder a ``make_parents`` starts in)."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _existing_folder_above(p: Path, what: str) -> Path:
    """The closest existing ancestor of ``p`` (or ``p``), which must be a folder;
    :class:`ConfigError`, one line, otherwise."""
    try:
        base = nearest_existing(p)
        is_dir = base.is_dir()
    except OSError as exc:
        raise ConfigError(f"{what} {p}: {exc.strerror or exc}") from None
    if not is_dir:
        raise ConfigError(f"{what} {p}: {base} is not a directory")
    return base


def check_existing_folder(path: str | os.PathLike[str], what: str = "output folder") -> None:
    """``path`` is an existing folder ddlsim can write into (a folder named as an output is
    never created: the module's rule); :class:`ConfigError`, one line, otherwise."""
    p = Path(path)
    base = _existing_folder_above(p, what)
    if base != Path(os.path.abspath(p)):
        raise ConfigError(
            f"{what} {p} does not exist (ddlsim creates no folder you name: create it first)"
        )
    if not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {p} is not writable")


def check_folder(path: str | os.PathLike[str], what: str = "output folder") -> None:
    """``path`` is a folder ddlsim can write into, or one of its own it can create (the user
    calibration directory; nothing is created here)."""
    p = Path(path)
    base = _existing_folder_above(p, what)
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {p}: {base} is not writable")


def _write_to_stdout(write: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="ddlsim-") as folder:
        tmp = os.path.join(folder, "out")
        write(tmp)
        with open(tmp, "rb") as fh:
            out = sys.stdout.buffer
            shutil.copyfileobj(fh, out)
            out.flush()


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


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
