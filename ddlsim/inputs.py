"""Every input file ddlsim reads goes through here: checked, then read with a bound.

Rules (the same for every reader, the counterpart of :mod:`ddlsim.atomic` for outputs):

- **Only regular files are read.** A directory, a device (``/dev/zero``), a FIFO or a socket
  is refused at once with one line, before it is opened: reading a FIFO would wait forever for
  a writer, a device can be endless. Symbolic links are followed.
- **Each kind of file has a size cap** (the constants below, each with its reason): a larger
  file is refused from its size alone, before a byte is read, and the read itself stops one
  byte past the cap (a file that grows while read, or a ``/proc`` file that reports size 0).
  The caps are far above any real file of the kind and far below what exhausts memory.
- Text is UTF-8; a byte-order mark is dropped (``utf-8-sig``), for JSON as for CSV.
- Every fault is one line naming the file: the caller's error class (:class:`ConfigError` for
  user input, :class:`CalibrationError` for a calibration), exit 2 through the CLI.
"""

from __future__ import annotations

import csv
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddlsim.errors import ConfigError, DdlsimError

MIB = 1 << 20

#: a compute calibration file: the largest shipped one (ResNet-152, 517 layers) is 14 KB; 16 MiB
#: holds a model of half a million layers
CALIBRATION_MAX_BYTES = 16 * MIB
#: a network calibration file: a few terms and sources, under 10 KB in practice
NETWORK_CALIBRATION_MAX_BYTES = 4 * MIB
#: a ddlsim JSON result read back by ``--from-json`` (``predict --json``, ``timeline``): a
#: timeline's trace is capped at 2 million events (~200 MB), its record is what is read
RESULT_JSON_MAX_BYTES = 512 * MIB
#: a measured-runs or measured-collectives CSV (validate): a row is ~150 bytes, so 256 MiB
#: is over a million runs, more than every published measurement together
RUNS_CSV_MAX_BYTES = 256 * MIB
#: a kernel-timing CSV (``ddlsim kernels``): ~100 bytes a row, 256 MiB is 2.5 million kernels
KERNELS_CSV_MAX_BYTES = 256 * MIB
#: a sweep file read back (``plot``): ~300 bytes a configuration, and a sweep has at most
#: 100,000 configurations (``MAX_CONFIGS``): 30 MB; the cap leaves room for user-made files
SWEEP_MAX_BYTES = 512 * MIB
#: a transformer's model file (``--model-config``): a few dozen fields, a Hugging Face
#: config.json a few KB
MODEL_CONFIG_MAX_BYTES = 1 * MIB
#: a YAML sweep grid: a few lines of parameter lists
GRID_MAX_BYTES = 1 * MIB
#: a training log (``traces import``, ``calibrate --from-log``): a log prints a line per ten
#: steps; 256 MiB is days of verbose output
LOG_MAX_BYTES = 256 * MIB
#: a Horovod timeline (``traces timeline-summary``): ~150 bytes an event, 1 GiB is 7 million
#: events, minutes of a large job with every tensor traced
TIMELINE_MAX_BYTES = 1024 * MIB
#: a collective benchmark log (nccl-tests, OSU, host sweeps): a line per message size
BENCHMARK_LOG_MAX_BYTES = 64 * MIB

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a ``stat`` mode that is not a regular file is, in words (``a FIFO``, ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    return f"{n / MIB:,.1f} MiB" if n >= MIB else f"{n:,} bytes"


def check_input(
    path: str | os.PathLike[str],
    what: str,
    max_bytes: int,
    error: type[DdlsimError] = ConfigError,
) -> int:
    """The size of the regular file at ``path``, after checking that it is one (symlinks
    followed) and no larger than ``max_bytes``; ``error`` (one line naming ``what``) if not.
    Nothing is opened, so a FIFO cannot block."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise error(f"cannot read {what} {p}: not found") from None
    except OSError as exc:  # a name too long, a loop of links, a folder not searchable
        raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL byte in the name
        raise error(f"cannot read {what} {p!r}: the name holds a NUL byte") from None
    _check_stat(p, st, what, max_bytes, error)
    return st.st_size


def _check_stat(
    p: Path, st: os.stat_result, what: str, max_bytes: int, error: type[DdlsimError]
) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise error(
            f"cannot read {what} {p}: it is {kind_of(st.st_mode)}; ddlsim reads only regular files"
        )
    if st.st_size > max_bytes:
        raise error(
            f"{what} {p} is too large: {_size(st.st_size)}, ddlsim reads at most "
            f"{_size(max_bytes)} for a {what}"
        )


def read_bytes(
    path: str | os.PathLike[str],
    what: str,
    max_bytes: int,
    error: type[DdlsimError] = ConfigError,
) -> bytes:
    """The bytes of the regular file at ``path`` (:func:`check_input`'s checks), read with a
    bound: at most ``max_bytes``, a file that turns out longer is refused."""
    p = Path(path)
    check_input(p, what, max_bytes, error)
    try:
        # O_NONBLOCK: should a FIFO replace the file between the check and the open, the open
        # returns at once instead of waiting for a writer; the fstat below refuses it
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        try:
            _check_stat(p, os.fstat(fd), what, max_bytes, error)
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise error(f"{what} {p} is too large: ddlsim reads at most {_size(max_bytes)}")
    return data


def decode(data: bytes, p: str | os.PathLike[str], what: str, error=ConfigError) -> str:
    """``data`` as UTF-8 text, a byte-order mark dropped; ``error`` naming the line of the first
    byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{p}:{line}: corrupt {what}: not UTF-8 text ({exc.reason})") from None


def read_text(
    path: str | os.PathLike[str],
    what: str,
    max_bytes: int,
    error: type[DdlsimError] = ConfigError,
    *,
    lenient: bool = False,
) -> str:
    """The text of the file at ``path`` (:func:`read_bytes`), UTF-8 with an optional BOM;
    ``lenient``: bytes that are not UTF-8 become U+FFFD instead of an error (logs)."""
    data = read_bytes(path, what, max_bytes, error)
    if lenient:
        return data.decode("utf-8-sig", errors="replace")
    return decode(data, path, what, error)


def parse_json(text: str, p: str | os.PathLike[str], what: str, error=ConfigError) -> Any:
    """``text`` parsed as JSON; ``error`` naming the line and column of a syntax error, or a
    nesting too deep to parse."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{p}: corrupt {what}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise error(f"{p}: corrupt {what}: invalid JSON (nested too deeply)") from None
    except MemoryError:
        raise error(f"{p}: {what} is too large to parse in the memory available") from None


def read_json(
    path: str | os.PathLike[str],
    what: str,
    max_bytes: int,
    error: type[DdlsimError] = ConfigError,
) -> Any:
    """The JSON document in the file at ``path``: :func:`read_text`, then :func:`parse_json`."""
    return parse_json(read_text(path, what, max_bytes, error), path, what, error)


def csv_rows(reader: Iterator[Any]) -> Iterator[tuple[Any, str]]:
    """The rows of a ``csv`` reader as ``(row, "")``, and a row with a cell longer than
    Python's csv field limit (131,072 characters) as ``(None, reason)``: the caller skips that
    row and reads on (the reader's ``line_num`` is the row's last line). Other
    :class:`csv.Error` (broken quoting) propagate."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field larger than field limit" not in str(exc):
                raise
            yield None, f"a cell longer than {csv.field_size_limit():,} characters"
            continue
        yield row, ""
