"""A run is predicted with the stack it ran: the ``nccl_version``, ``horovod_version``,
``framework_version`` and ``mpi`` cells of a measured-runs row (``traces/measured/README.md``).

- A stated cell that does not parse skips the row (``bad-version``, naming the column and the
  cell): it is never predicted with a default in its place.
- A stated release predict models is passed to it (``nccl_version`` for ``horovod-nccl``:
  NCCL 2.0-2.3 rings only, 2.4 trees, 2.5+ tuned; ``horovod_version`` for the Horovod methods:
  negotiation, fusion threshold and cycle time by release). The row's cell wins over the
  ``--nccl-version`` / ``--horovod-version`` / ``--mpi`` option, which fills the rows that
  state none.
- A release the method uses but the row leaves empty is predicted with the option's or
  predict's default, and the row's notes say which.
- ``mpi`` (``openmpi-3.1.4``: :class:`ddlsim.comm.mpi.MpiRelease`) goes to predict for
  ``horovod-mpi`` (the host's per-process reduction by implementation and release);
  ``framework_version`` is checked and noted: no modelled term depends on it yet.
- Each row is labelled by how much of the stack its method uses was stated
  (:data:`STACK_LABELS`), which the report groups by.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddlsim.comm.mpi import DEFAULT_MPI, MpiRelease
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION, NcclVersion
from ddlsim.errors import ConfigError
from ddlsim.execution.horovod import DEFAULT_HOROVOD_VERSION, horovod_release
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import Run

BAD_VERSION = "bad-version"
#: how much of the stack its method uses a row states
STATED, PARTLY, ASSUMED, NOT_USED = "stated", "partly stated", "assumed", "no release modelled"
STACK_LABELS = (STATED, PARTLY, ASSUMED, NOT_USED)
#: predict's keyword of each release column, the methods whose model uses it, its default
_MODELLED: dict[str, tuple[tuple[str, ...], str]] = {
    "nccl_version": (("horovod-nccl",), DEFAULT_NCCL_VERSION),
    "horovod_version": (("horovod-nccl", "horovod-mpi", "horovod-gloo"), DEFAULT_HOROVOD_VERSION),
    "mpi": (("horovod-mpi",), DEFAULT_MPI),
}
_FRAMEWORK_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[a-z+][\w.+-]*)?", re.IGNORECASE)


def _framework_version(text: str) -> None:
    if _FRAMEWORK_VERSION.fullmatch(text) is None:
        raise ConfigError(f"framework version must look like 1.15.2 or 2.3, got {text!r}")


#: column -> its check (ConfigError naming the cell)
_CHECKS: dict[str, Callable[[str], object]] = {
    "nccl_version": NcclVersion.parse,
    "horovod_version": horovod_release,
    "framework_version": _framework_version,
    "mpi": MpiRelease.parse,
}


@dataclass(frozen=True)
class StackPlan:
    """The stack a row is predicted with: predict's keywords, the notes, the row's label
    (:data:`STACK_LABELS`); or why it is skipped (``column`` holds the bad cell)."""

    kwargs: dict[str, Any]
    notes: tuple[str, ...]
    label: str
    column: str | None = None
    reason: str = ""


def bad_cell(run: Run) -> tuple[str, str] | None:
    """``(column, message)`` of the first stated stack cell that does not parse, or None."""
    for column, check in _CHECKS.items():
        cell = getattr(run, column)
        if cell:
            try:
                check(cell)
            except ConfigError as exc:
                return column, f"column {column!r}: {exc}"
    return None


def stack_plan(run: Run, comm: str, options: ValidateOptions) -> StackPlan:
    """The releases ``run`` is predicted with under method ``comm`` (module docstring)."""
    bad = bad_cell(run)
    if bad is not None:
        return StackPlan({}, (), "", bad[0], bad[1])
    kwargs: dict[str, Any] = {}
    notes: list[str] = []
    used = stated = 0
    for column, (methods, default) in _MODELLED.items():
        if comm not in methods:
            continue
        used += 1
        cell, option = getattr(run, column), getattr(options, column)
        if cell:
            stated += 1
            kwargs[column] = str(MpiRelease.parse(cell)) if column == "mpi" else cell
        elif option is not None:
            notes.append(f"{column} not stated: {option} assumed (--{_flag(column)})")
        else:
            notes.append(f"{column} not stated: {default} assumed (predict's default)")
    if run.framework_version:
        notes.append(
            f"framework_version {run.framework_version} stated: no release-specific term of "
            f"{run.framework or 'the framework'} is modelled"
        )
    if not used:
        label = NOT_USED
    else:
        label = STATED if stated == used else ASSUMED if not stated else PARTLY
    return StackPlan(kwargs, tuple(notes), label)


def _flag(column: str) -> str:
    return column.replace("_", "-")
