"""The ``ddlsim`` command line: sub-commands, and turning errors into one line and exit code 2.

Every :class:`ddlsim.errors.DdlsimError` and every argument error prints ``ddlsim: error: ...``
on one line of stderr and exits 2; Ctrl-C exits 130. No traceback reaches the user.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ddlsim.errors import DdlsimError
from ddlsim.version import __version__

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Raised instead of argparse's exit so that the message stays one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every sub-command registered."""
    from ddlsim.cli import calibrate, kernels, plot, predict, sweep, timeline, traces, validate

    parser = _Parser(
        prog="ddlsim",
        description="Simulate distributed synchronous-SGD training and predict its scaling.",
    )
    parser.add_argument("--version", action="version", version=f"ddlsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    predict.register(sub)
    calibrate.register(sub)
    validate.register(sub)
    traces.register(sub)
    timeline.register(sub)
    plot.register(sub)
    sweep.register(sub)
    kernels.register(sub)
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
    try:
        _import_numpy_with_one_blas_thread()
        parser = build_parser()
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"ddlsim: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DdlsimError as exc:
        message = " ".join(str(exc).split())
        print(f"ddlsim: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ddlsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
