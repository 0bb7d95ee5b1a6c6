"""A measured run on a named cloud instance (the ``instance`` column, ``p2.8xlarge``): the
instance's GPUs per node, GPU fabric, network, NICs and transport
(:mod:`ddlsim.system.instances`, from the providers' instance tables) fill the cells the row
leaves empty, each noted. A cell the row states is kept, and where it differs from the
instance's the note says so (the row is what the source states; a provider-wide network such as
``ec2`` stays the row's). An instance ddlsim does not know skips the row
(``unknown-instance``), the reason listing the nearest names or why it is not modelled.
"""

from __future__ import annotations

from dataclasses import replace

from ddlsim.errors import ConfigError
from ddlsim.system.instances import instance
from ddlsim.tools.validate.runs import Run

UNKNOWN_INSTANCE = "unknown-instance"


def with_instance(run: Run) -> tuple[Run, list[str]] | str:
    """``run`` with its instance's values in its empty system cells and the notes saying
    which; the skip reason (str) when the instance is unknown. A row without an instance is
    returned as it is."""
    if not run.instance:
        return run, []
    try:
        inst = instance(run.instance)
    except ConfigError as exc:
        return f"column 'instance': {exc}"
    per_node = inst.gpus if run.gpus >= inst.gpus else run.gpus
    multi = (run.gpus_per_node or per_node) < run.gpus
    fills = {
        "gpus_per_node": (run.gpus_per_node, per_node),
        "intra_node": (run.intra_node, inst.intra),
        "inter_node": (run.inter_node, inst.network if multi else "none"),
        "transport": (run.transport, inst.transport if multi else ""),
        "nics_per_node": (run.nics_per_node, inst.nics if multi else None),
    }
    changes, filled, kept = {}, [], []
    for column, (mine, theirs) in fills.items():
        if mine in (None, "") and theirs not in (None, ""):
            changes[column] = theirs
            filled.append(f"{column} {theirs}")
        elif mine not in (None, "") and theirs not in (None, "") and str(mine) != str(theirs):
            kept.append(f"{column} {mine} (the instance's: {theirs})")
    notes = []
    if filled:
        notes.append(f"from instance {inst.name}: {', '.join(filled)}")
    if kept:
        notes.append(f"instance {inst.name}: the row's {', '.join(kept)} kept")
    return replace(run, **changes), notes
