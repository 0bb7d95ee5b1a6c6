"""The one exception hierarchy of ddlsim.

Every error ddlsim raises on purpose derives from :class:`DdlsimError`; the CLI turns any of them
into one line on stderr and exit code 2. Messages name the bad value and, where there is a closed
vocabulary, list the valid ones::

    DdlsimError
    ├── ConfigError            bad user input: a flag value, a combination of flags
    │   └── UnknownNameError   a model / GPU / link / method name not in the catalog
    ├── CalibrationError       a calibration file missing, corrupt, or of another schema version
    ├── CatalogError           a shipped data file (device / link catalog) is inconsistent
    └── SimulationError        the engine reached an impossible state (a bug)
"""

from __future__ import annotations

import re
from collections.abc import Iterable


class DdlsimError(Exception):
    """Base class of every error ddlsim raises on purpose."""


class ConfigError(DdlsimError, ValueError):
    """A user-supplied value or combination of values is invalid."""


#: most characters of a user's value an error message echoes (a 300-character model name or a
#: 4,096-character path is cut, with its length, so the message stays one readable line)
MAX_SHOWN_CHARS = 100


def shown(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message (a float as ``{:g}``): at most ``limit``
    characters of it, then how long it was (``'xxxx...' (302 characters)``)."""
    return _cut(f"{value:g}" if isinstance(value, float) else repr(value), limit)


def _cut(word: str, limit: int) -> str:
    if len(word) <= limit:
        return word
    tail = word[-1] if word[-1] in ",:;" else ""  # keep the punctuation that follows a value
    return f"{word[: limit - 3]}... ({len(word) - len(tail)} characters){tail}"


#: a quoted value in a message (argparse and ``repr`` quote with ' or "; an apostrophe inside a
#: word, as in "the file's", opens nothing)
_QUOTED = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|(?<!\w)\"[^\"\n]*\"(?!\w)")


def clip_long_words(message: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``message`` on one line, every quoted value and every run of non-blank characters longer
    than ``limit`` cut as :func:`shown` cuts a value (the last line of defence for a value
    echoed without it, such as argparse's ``invalid choice: '...'``)."""
    message = _QUOTED.sub(lambda m: _cut(" ".join(m.group(0).split()), limit), message)
    return " ".join(_cut(word, limit) for word in message.split())


class UnknownNameError(ConfigError, KeyError):
    """A name that is not in a closed vocabulary (model, GPU, link, method, ...)."""

    def __init__(self, what: str, name: object, valid: Iterable[str]) -> None:
        self.what = what
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {what} {shown(name)}; valid: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return str(self.args[0])


class CalibrationError(DdlsimError):
    """A calibration file is missing, unreadable, corrupt, or of another schema version."""


class CatalogError(DdlsimError):
    """A shipped catalog data file is inconsistent (a packaging bug, not a user error)."""


class SimulationError(DdlsimError):
    """The simulation reached an impossible state (an internal bug)."""
