"""Which MPI a run used: the implementation and its release, read from text such as
``openmpi-3.1.4``, ``Open MPI 4.1``, ``intel-mpi-2018``, ``mvapich2-2.3`` or ``mpich``.

A measured-runs file states it in its ``mpi`` column (``traces/measured/README.md``); what an
implementation does with the bytes (Open MPI sums with vectorised kernels only from 4.1; Intel
MPI and MVAPICH2 have their own reduction and transports) belongs to the model that uses it:
this module only names the library, so that such a model can ask ``MpiLibrary.at_least``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddlsim.errors import ConfigError

#: implementation -> the pattern of its name (any case; words joined by space, '-' or '_')
IMPLEMENTATIONS: dict[str, str] = {
    "openmpi": r"open[\s_-]*mpi|ompi",
    "intel-mpi": r"intel[\s_-]*mpi|impi",
    "mvapich2": r"mvapich2?",
    "cray-mpich": r"cray[\s_-]*mpich|cray[\s_-]*mpi",
    "mpich": r"mpich",
    "spectrum-mpi": r"(?:ibm[\s_-]*)?spectrum[\s_-]*mpi",
}
#: the release after the name: digits and dots, then an optional suffix (``4.1.4rc1``)
_RELEASE = r"(?:[\s_-]*v?(\d+(?:\.\d+){0,2})[a-z][\w.+-]*|[\s_-]*v?(\d+(?:\.\d+){0,2}))?"


@dataclass(frozen=True)
class MpiLibrary:
    """An MPI implementation (a key of :data:`IMPLEMENTATIONS`) and its release as integers
    (``()`` when the text names no release)."""

    name: str
    release: tuple[int, ...] = ()

    def at_least(self, *release: int) -> bool:
        """Whether the stated release is ``release`` or later (False when none is stated)."""
        return bool(self.release) and self.release >= release

    def __str__(self) -> str:
        version = ".".join(map(str, self.release))
        return f"{self.name}-{version}" if version else self.name


def parse_mpi(text: str) -> MpiLibrary:
    """The MPI library ``text`` names (see the module docstring); ConfigError naming the text
    when it names no known implementation or its release is not a number."""
    for name, pattern in IMPLEMENTATIONS.items():
        match = re.fullmatch(rf"\s*(?:{pattern}){_RELEASE}\s*", str(text), re.IGNORECASE)
        if match is not None:
            release = match[1] or match[2]
            return MpiLibrary(name, tuple(int(p) for p in release.split(".")) if release else ())
    raise ConfigError(
        f"MPI {str(text)!r} is not an implementation and release ddlsim reads (like "
        f"openmpi-3.1.4, intel-mpi-2018, mvapich2-2.3; implementations: "
        f"{', '.join(IMPLEMENTATIONS)})"
    )
