"""Fit ddlsim's rank-variability sigma to measured runs, with a leave-one-source-out check.

    python scripts/fit_rank_sigma.py [traces/measured/runs.csv]

For each sigma of a grid, validates every predictable row (compute anchored to its single-GPU
baseline, as ``ddlsim validate`` does) and prints the MAPE of all rows and of each source; then,
for each source, the sigma fitted on the *other* sources and the MAPE it gives on the held-out
one. The shipped default (``ddlsim.engine.sync.DEFAULT_RANK_SIGMA``) is the rounded all-rows fit.
"""

from __future__ import annotations

import sys

import numpy as np

from ddlsim.engine.sync import DEFAULT_RANK_SIGMA
from ddlsim.validate.core import PREDICTED, validate_runs
from ddlsim.validate.mapping import ValidateOptions
from ddlsim.validate.runs import read_runs

GRID = (0.0, 0.02, 0.04, 0.05, 0.06, 0.07, 0.08, 0.10)


def errors_by_source(runs, sigma: float) -> dict[str, np.ndarray]:
    """Absolute relative errors of the predicted rows, by source, at ``sigma``."""
    out: dict[str, list[float]] = {}
    for row in validate_runs(runs, ValidateOptions(rank_sigma=sigma)):
        if row.status == PREDICTED:
            out.setdefault(row.run.source_id, []).append(abs(row.rel_error))
    return {source: np.asarray(errs) for source, errs in out.items()}


def main(path: str = "traces/measured/runs.csv") -> None:
    """Print the grid and the leave-one-source-out check."""
    runs = read_runs(path)
    table = {sigma: errors_by_source(runs, sigma) for sigma in GRID}
    sources = sorted(table[GRID[0]])
    print(f"MAPE (%) by rank sigma, {path}")
    print(f"{'sigma':>6} {'all':>6} " + " ".join(f"{s:>20}" for s in sources))
    for sigma, errs in table.items():
        everything = np.concatenate(list(errs.values()))
        cells = " ".join(f"{100 * errs[s].mean():>20.1f}" for s in sources)
        print(f"{sigma:>6.3f} {100 * everything.mean():>6.1f} {cells}")
    print("\nleave one source out: sigma fitted on the others -> MAPE on the held-out source")
    for held in sources:

        def rest(sigma: float, held: str = held) -> float:
            return float(np.concatenate([e for s, e in table[sigma].items() if s != held]).mean())

        best = min(GRID, key=rest)
        print(f"  {held:20} sigma {best:.3f}  held-out MAPE {100 * table[best][held].mean():.1f}%")
    print(f"\nshipped default: {DEFAULT_RANK_SIGMA}")


if __name__ == "__main__":
    main(*sys.argv[1:])
