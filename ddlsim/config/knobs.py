"""Every option of a job, in one table: name, group, default, check, flag, help, when it applies.

Each :class:`Knob` is one keyword of :func:`ddlsim.predict` and one field of its group
(:mod:`ddlsim.config.groups` builds the four group classes from this table, in its order).
From the same row come:

- the group's validation (``check``: a :class:`~ddlsim.config.checks.Range` or a
  :class:`~ddlsim.config.checks.Vocabulary` of the registry that owns the names, or the check
  of the module that owns the quantity);
- the command-line flag of ``predict``, ``timeline``, ``traces --compare``, ``validate``
  and ``sweep`` (``flag``, ``parse``, ``metavar``, ``help``; :mod:`ddlsim.cli.config_args`);
- the sweep grid's check of each value (``sweep``: whether it may be a grid axis;
  :mod:`ddlsim.tools.analysis.grid`);
- the warning that a flag has no effect (``applies``: a predicate on the resolved job,
  :mod:`ddlsim.cli.applies`);
- the README's flag tables (a test keeps them equal to this table).

Adding an option is one row here plus the physics that uses it.
"""

from __future__ import annotations

from ddlsim.config.knob import (  # noqa: F401  (the table's types and limits, imported from here)
    MAX_CYCLE_TIME_MS,
    MAX_FUSION_THRESHOLD_MB,
    MAX_JITTER_SIGMA,
    MAX_SLOWDOWN,
    MIN_CYCLE_TIME_MS,
    Applies,
    Knob,
    check_stragglers,
)
from ddlsim.config.table import execution, sharded, simulation, system, transformer, workload
from ddlsim.system.specs import TRANSPORTS

#: every knob, in group order and, within a group, in the order of its fields
KNOBS: tuple[Knob, ...] = (
    *workload.ROWS,
    *system.ROWS,
    *execution.ROWS,
    *transformer.ROWS,
    *sharded.ROWS,
    *simulation.ROWS,
)
#: knob name -> knob
BY_NAME: dict[str, Knob] = {k.name: k for k in KNOBS}
#: the sweep grid's accepted spellings of the transport (the catalog's word for it)
TRANSPORT_NAMES = TRANSPORTS


def in_group(group: str) -> tuple[Knob, ...]:
    """The knobs of ``group``, in field order."""
    return tuple(k for k in KNOBS if k.group == group)
