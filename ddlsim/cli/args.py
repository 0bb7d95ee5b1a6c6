"""Argument types shared by the sub-commands: numbers with their valid range, output paths.

Every type raises :class:`argparse.ArgumentTypeError` with the value and the reason, so a bad
flag prints one line, ``ddlsim: error: argument --flag: ...``, and exits 2 before any work.
Output paths are checked here, at parse time, by :func:`ddlsim.atomic.check_output`: a missing
(never created) or unwritable folder, a path that is not a regular file (a device, a FIFO, a
directory) or an extension the command does not write fails before the job runs, not after it.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlsim.atomic import check_existing_folder, check_output
from ddlsim.errors import ConfigError, shown


def integer(text: str) -> int:
    """Any integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def number(text: str) -> float:
    """Any finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def int_at_least(low: int) -> Callable[[str], int]:
    """An integer >= ``low``."""

    def parse(text: str) -> int:
        value = integer(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        value = integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {low:,} to {high:,}, got {value:,}"
            )
        return value

    parse.__name__ = f"integer in {low}..{high}"
    return parse


def positive_number(text: str) -> float:
    """A finite number > 0."""
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def non_negative_number(text: str) -> float:
    """A finite number >= 0."""
    value = number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def number_or(
    word: str,
    meaning: Any,
    what: str = "a number",
    value: Callable[[str], Any] = number,
) -> Callable[[str], Any]:
    """A finite number (``value`` parses it: an integer with :func:`integer`), or ``word``
    (any case), which stands for ``meaning``: ``none`` for a node MTBF of 0 (no failures),
    ``auto`` for an interval left to ddlsim (None), ``max`` for the largest micro-batch."""

    def parse(text: str) -> Any:
        if text.strip().lower() == word:
            return meaning
        try:
            return value(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"expected {what} or {word}, got {shown(text)}"
            ) from None

    parse.__name__ = f"number or {word}"
    return parse


#: a Dask scheduler address: ``[tcp|tls|ws|wss://]host:port`` (an IPv6 host in brackets)
_SCHEDULER = re.compile(
    r"^(?:(?:tcp|tls|ws|wss)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$"
)


def scheduler_address(text: str) -> str:
    """A Dask scheduler address, ``tcp://host:port`` (also ``tls://``, ``ws://``, ``wss://``,
    or ``host:port``): its form is checked here, whether it answers when the sweep starts."""
    match = _SCHEDULER.match(text)
    if match is None or not 1 <= int(match.group(2)) <= 65535:
        raise argparse.ArgumentTypeError(
            f"expected a Dask scheduler address like tcp://host:8786, got {shown(text)}"
        )
    return text


def output_file(*suffixes: str, stdout: bool = False) -> Callable[[str], str]:
    """An output file ending in one of ``suffixes`` (``-``: standard output if ``stdout``)."""

    def parse(text: str) -> str:
        try:
            check_output(text, suffixes=suffixes, stdout=stdout, what="file")
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    parse.__name__ = "output file"
    return parse


def output_folder(text: str) -> Path:
    """A folder that exists and takes files (:mod:`ddlsim.atomic`: a folder you name is never
    created)."""
    try:
        check_existing_folder(text, "folder")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)
