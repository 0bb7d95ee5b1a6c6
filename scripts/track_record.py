"""Rebuild (or check) ddlsim/config/data/track_record.json: the measured error that
``ddlsim predict`` quotes, by communication method and node count.

    python scripts/track_record.py            # print the table
    python scripts/track_record.py --write    # rewrite the shipped file

Runs ``ddlsim validate`` over traces/measured/runs.csv and traces/measured/runs_modern.csv (and
runs_transformers.csv for the transformer families, anchored and ``--absolute``): the
default (anchored) pass of both, the large-N efficiency-only rows of runs.csv under their era's
configuration (:data:`ASSUMED_PASS`), and an ``--absolute`` pass of both whose 1-GPU rows give
the compute's own error per GPU, precision (and framework); see :mod:`ddlsim.config.track_record`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ddlsim.atomic import atomic_write_text
from ddlsim.config.track_record import ASSUMED_PASS, FILE, format_line
from ddlsim.tools.validate.core import validate_file
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import load_runs
from ddlsim.tools.validate.track_record_build import summarise, summarise_transformers

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "traces" / "measured" / "runs.csv"
MODERN = ROOT / "traces" / "measured" / "runs_modern.csv"
TRANSFORMERS = ROOT / "traces" / "measured" / "runs_transformers.csv"
OUT = ROOT / "ddlsim" / "config" / "data" / FILE


def build(
    runs_csv: Path = RUNS, modern_csv: Path = MODERN, transformers_csv: Path = TRANSFORMERS
) -> dict:
    """The track record of the current model over ``runs_csv`` and ``modern_csv`` (CNNs) and
    ``transformers_csv``."""
    default, absolute = [], []
    for path in (runs_csv, modern_csv):
        table = load_runs(path)
        default += validate_file(table, ValidateOptions())
        absolute += validate_file(table, ValidateOptions(absolute=True))
    table = load_runs(runs_csv)
    options = ValidateOptions(**ASSUMED_PASS["options"])
    assumed = validate_file(table, options, sources=set(ASSUMED_PASS["sources"]))
    table = load_runs(transformers_csv)
    transformers = summarise_transformers(
        validate_file(table, ValidateOptions()),
        validate_file(table, ValidateOptions(absolute=True)),
    )
    return summarise(default, assumed, absolute, transformers)


def render(doc: dict) -> str:
    """The file's text (sorted keys, one trailing newline)."""
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    """Print the table; ``--write`` stores it."""
    doc = build()
    for key in doc["by_comm_regime"]:
        comm, label = key.split(" | ")
        entry = {**doc["by_comm_regime"][key], "comm": comm, "regime": label}
        print(format_line(entry))
    if "--write" in argv:
        atomic_write_text(OUT, render(doc))
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
