"""The ``ddlsim`` command line: sub-commands, and turning errors into one line and exit code 2.

Every :class:`ddlsim.errors.DdlsimError` and every argument error prints ``ddlsim: error: ...``
on one line of stderr and exits 2, and so does an operating-system error on a file ddlsim was
given (a name too long, a full disk: the error and the file, on one line); Ctrl-C exits 130
and SIGTERM 143, after the same clean-up (:mod:`ddlsim.signals`). No traceback reaches the user,
and no message echoes more than :data:`ddlsim.errors.MAX_SHOWN_CHARS` characters of one value.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from ddlsim.errors import DdlsimError, clip_long_words
from ddlsim.signals import EXIT_INTERRUPTED, exit_code, sigterm_as_interrupt
from ddlsim.version import __version__

EXIT_USAGE = 2


class UsageError(Exception):
    """Raised instead of argparse's exit so that the message stays one line."""


class _WholeNamesFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a line never breaks inside a hyphenated name
    (``efficientnet-widese-b0``, ``horovod-nccl``): the help lists names to copy."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _WholeNamesFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


#: the sub-commands, in the order ``ddlsim --help`` lists them: name -> module of ddlsim.cli
COMMANDS = {
    "predict": "predict",
    "calibrate": "calibrate",
    "calibrations": "calibrations",
    "validate": "validate",
    "traces": "traces",
    "timeline": "timeline",
    "plot": "plot",
    "sweep": "sweep",
    "kernels": "kernels",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every sub-command registered (``only``: just that one, what
    running one command needs: the others' modules are not imported)."""
    import importlib

    parser = _Parser(
        prog="ddlsim",
        description="Simulate distributed synchronous-SGD training and predict its scaling.",
    )
    parser.add_argument("--version", action="version", version=f"ddlsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    names = [only] if only in COMMANDS else list(COMMANDS)
    for name in names:
        importlib.import_module(f"ddlsim.cli.{COMMANDS[name]}").register(sub)
    return parser


def _import_numpy_with_one_blas_thread() -> None:
    """Import numpy with its OpenBLAS limited to one thread unless the user set a number: the
    command line does no linear algebra, and starting OpenBLAS's thread pool costs a fifth of
    ``ddlsim predict``'s 0.25 s on 2 cores. The setting is not left in the environment, so
    processes started later (a calibration's framework) see the user's."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ddlsim`` console script; returns the exit code."""
    closed = sys.stdout is None  # started with file descriptor 1 closed (``>&-``)
    if closed:
        sys.stdout = _ClosedStdout()
    try:
        return _run(argv)
    finally:
        if closed:
            sys.stdout = None


def _run(argv: Sequence[str] | None) -> int:
    with sigterm_as_interrupt():
        try:
            _import_numpy_with_one_blas_thread()
            argv = list(sys.argv[1:] if argv is None else argv)
            parser = build_parser(only=argv[0] if argv else None)
            args = parser.parse_args(argv)
            return int(args.func(args) or 0)
        except (UsageError, DdlsimError) as exc:
            return _error(str(exc))
        except KeyboardInterrupt as exc:
            code = exit_code(exc)
            _say(f"ddlsim: {'interrupted' if code == EXIT_INTERRUPTED else 'terminated'}")
            return code
        except BrokenPipeError:
            _silence_stdout()
            return _error("standard output was closed before all of the output was written")
        except OSError as exc:  # a file the command was given, that the checks did not foresee
            where = f": {exc.filename}" if exc.filename is not None else ""
            return _error(f"{exc.strerror or exc}{where}")


class _ClosedStdout:
    """``sys.stdout`` when the process started without one: writing is the error
    "standard output is closed" (one line, exit 2) instead of an AttributeError on None."""

    def write(self, _text: object) -> int:
        raise OSError(errno.EBADF, "standard output is closed (nothing was written)")

    def flush(self) -> None:
        """Nothing to flush."""

    @property
    def buffer(self) -> _ClosedStdout:
        """Binary writes fail the same way."""
        return self

    def isatty(self) -> bool:
        """Not a terminal."""
        return False


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null after a broken pipe, so that the interpreter's
    final flush of what is still buffered does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass


def _say(line: str) -> None:
    """``line`` on stderr, when there is one (a closed stderr drops it)."""
    if sys.stderr is not None:
        with contextlib.suppress(OSError):
            print(line, file=sys.stderr)


def _error(message: str) -> int:
    """Print ``ddlsim: error: <message>`` on one line (long values cut); exit code 2."""
    _say(f"ddlsim: error: {clip_long_words(message)}")
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
