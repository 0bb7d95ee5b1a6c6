"""ddlsim's measured error, by communication method and node count: what ``ddlsim predict``
quotes next to a prediction.

``data/track_record.json`` is ``ddlsim validate`` of traces/measured/runs.csv and runs_modern.csv
summarised per (method, regime), where the regime is the number of nodes (1, 2-8, 9-64, 65+):
two passes, the default one (every row that states what a prediction needs) and the
efficiency-only rows at 128 and 512 GPUs under the configuration their source's era states
(``HVD_README_EFF``: batch 64, fp32, Horovod 0.12, NCCL 2.1; marked ``assumed``); and the
1-GPU rows of an ``--absolute`` pass by GPU and precision (and framework).
``python scripts/track_record.py --write`` rebuilds it
(:mod:`ddlsim.tools.validate.track_record_build`) and a test checks that the shipped file is what
the
model gives now, so the figure quoted is never stale. This module only reads the file:
:func:`lookup` is light and imports no validation machinery.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from ddlsim.errors import CatalogError

FILE = "track_record.json"
#: node-count regimes: (label, fewest nodes, most nodes)
REGIMES = (("1 node", 1, 1), ("2-8 nodes", 2, 8), ("9-64 nodes", 9, 64), ("65+ nodes", 65, None))
#: the second pass: efficiency-only large-N rows under their era's stated configuration
ASSUMED_PASS = {
    "sources": ("HVD_README_EFF",),
    "options": {
        "assume_batch": 64,
        "assume_precision": "fp32",
        "horovod_version": "0.12",
        "nccl_version": "2.1",
    },
    "why": "the source gives efficiency only; batch and precision assumed, its era's stack",
}


def regime(nodes: int) -> str:
    """The regime label of a run on ``nodes`` nodes."""
    for label, low, high in REGIMES:
        if nodes >= low and (high is None or nodes <= high):
            return label
    raise ValueError(f"nodes must be >= 1, got {nodes}")


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    try:
        text = resources.files("ddlsim.config").joinpath("data", FILE).read_text("utf-8")
        return json.loads(text)
    except (OSError, ValueError) as exc:
        raise CatalogError(f"ddlsim/config/data/{FILE} is unreadable: {exc}") from None


def _family(transformer: bool) -> dict[str, Any]:
    """The CNN track record (the document) or its transformer families' section."""
    doc = _document()
    return doc.get("transformers", {}) if transformer else doc


def lookup(comm: str, nodes: int, *, transformer: bool = False) -> dict[str, Any]:
    """The measured error of ``comm`` at ``nodes`` nodes (of a transformer's runs with
    ``transformer``): ``{"comm", "regime", "n", "mape", "median_ape", "bias", "worst_run_id",
    "worst_rel_error", "n_assumed", "source"}``; ``n`` 0 (figures None) where no measured run
    of that method and regime exists."""
    label = regime(nodes)
    doc = _family(transformer)
    entry = doc.get("by_comm_regime", {}).get(f"{comm} | {label}")
    base = {"comm": comm, "regime": label, "source": doc.get("source", "")}
    if entry is None:
        empty = dict.fromkeys(("mape", "median_ape", "bias", "worst_run_id", "worst_rel_error"))
        return {**base, "n": 0, "n_assumed": 0, **empty}
    return {**base, **entry}


def lookup_absolute(
    gpu: str, precision: str, framework: str | None = None, *, transformer: bool = False
) -> dict[str, Any]:
    """The measured error of ddlsim's own 1-GPU compute for ``gpu`` at ``precision``
    (``validate --absolute``; a transformer's runs with ``transformer``): ``{"gpu",
    "precision", "framework", "n", "mape", "bias", ...}``; the runs of ``framework`` where
    there are some (``framework`` then set), else every run of that GPU and precision; ``n``
    0 where there is none."""
    doc = _family(transformer)
    own = doc.get("absolute_by_gpu_precision_framework", {}).get(
        f"{gpu} | {precision} | {framework}"
    )
    entry = own or doc.get("absolute_by_gpu_precision", {}).get(f"{gpu} | {precision}")
    base = {
        "gpu": gpu,
        "precision": precision,
        "framework": framework if own else None,
        "source": doc.get("source", ""),
    }
    if entry is None:
        empty = dict.fromkeys(("mape", "median_ape", "bias", "worst_run_id", "worst_rel_error"))
        return {**base, "n": 0, **empty}
    return {**base, **entry}


def format_absolute_line(entry: dict[str, Any]) -> str:
    """``p100-sxm2 fp32: 12 measured 1-GPU runs, MAPE 4.0%, bias +1.0%`` (or none)."""
    where = f"{entry['gpu']} {entry['precision']}"
    if entry.get("framework"):
        where += f" {entry['framework']}"
    if not entry["n"]:
        return f"{where}: no measured 1-GPU run (the compute is unchecked there)"
    return (
        f"{where}: {entry['n']} measured 1-GPU run(s), MAPE {100 * entry['mape']:.1f}%, "
        f"bias {100 * entry['bias']:+.1f}%"
    )


def format_line(entry: dict[str, Any]) -> str:
    """``horovod-nccl, 2-8 nodes: 18 measured runs, MAPE 6.0%, bias +5.7%`` (or none)."""
    where = f"{entry['comm']}, {entry['regime']}"
    if not entry["n"]:
        return f"{where}: no measured run (unchecked there)"
    assumed = (
        f" ({entry['n_assumed']} efficiency-only, batch assumed)" if entry["n_assumed"] else ""
    )
    return (
        f"{where}: {entry['n']} measured run(s){assumed}, MAPE {100 * entry['mape']:.1f}%, "
        f"bias {100 * entry['bias']:+.1f}%"
    )
