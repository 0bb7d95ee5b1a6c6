"""The checks a knob's value must pass: a range, or a vocabulary owned by a registry.

A check is a callable that returns nothing and raises :class:`~ddlsim.errors.ConfigError`
naming the value. :class:`Range` is a number's physical range (an integer's where it counts
things), stated once in the knob table (:mod:`ddlsim.config.knobs`); :class:`Vocabulary`
points at the registry that owns the names (the comm methods in :mod:`ddlsim.comm`, the
schedules in :mod:`ddlsim.execution.schedules`, the GPUs and links in the catalog), so that a
name is declared in one place. A check written elsewhere (the failure model's in
:mod:`ddlsim.resilience.config`, the engine's in :mod:`ddlsim.engine`) is used as it is.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ddlsim.errors import ConfigError, UnknownNameError, shown

Check = Callable[[Any], None]


def is_real(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Range:
    """A number in ``low..high``: finite; an integer where ``integer``; 0 also where ``zero``;
    above ``low``, not at it, where ``open_low``. ``text`` replaces the stated range in the
    message where the bound is worded (``1 byte .. 65536 MiB``)."""

    what: str
    low: float
    high: float
    unit: str = ""
    integer: bool = False
    zero: bool = False
    text: str | None = None
    open_low: bool = False

    def ok(self, value: Any) -> bool:
        """Whether ``value`` passes."""
        if self.integer:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                return False
        elif not is_real(value) or not math.isfinite(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        return (self.zero and value == 0) or (above and value <= self.high)

    def describe(self) -> str:
        """The accepted values in words: ``a number in 0..65536 MiB``."""
        if self.text is not None:
            return self.text
        kind = "an integer" if self.integer else "a number"
        unit = f" {self.unit}" if self.unit else ""
        span = f"{self.low:g}..{self.high:g}" if not self.integer else f"{self.low}..{self.high}"
        return f"{'0 or ' if self.zero else ''}{kind} in {span}{unit}"

    def __call__(self, value: Any) -> None:
        """ConfigError naming ``value`` unless it is in the range."""
        if not self.ok(value):
            raise ConfigError(f"{self.what} must be {self.describe()}, got {shown(value)}")


@dataclass(frozen=True)
class Vocabulary:
    """One of the names ``names()`` lists (the registry that owns them)."""

    what: str
    names: Callable[[], Sequence[str]]

    def __call__(self, value: Any) -> None:
        """UnknownNameError naming ``value`` unless the registry lists it."""
        names = tuple(self.names())
        if value not in names:
            raise UnknownNameError(self.what, value, names)


def optional(check: Check) -> Check:
    """``check`` for a value that may also be None (the default: decided later)."""

    def run(value: Any) -> None:
        if value is not None:
            check(value)

    return run
