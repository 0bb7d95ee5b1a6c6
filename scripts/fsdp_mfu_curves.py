"""FSDP's MFU against the GPU count: llm-foundry's measured curves beside ddlsim's (issue 31).

    PYTHONPATH=$PWD python3 scripts/fsdp_mfu_curves.py [traces/measured/runs_transformers.csv]

Predicts every MPT FULL_SHARD row of the two llm-foundry sources (``MOSAIC_LLMF_2307``,
``MOSAIC_LLMF_2401``) as ``ddlsim validate --absolute --assume-inter-node ib-ndr
--assume-nics-per-node 8`` does (the H100 tables state no network), then prints:

1. MAPE and bias per (GPU, GPU-count band: 8, 16-64, 128-512), every sequence length;
2. per (GPU, model) with rows at two or more GPU counts at 2,048 tokens, the measured and
   predicted MFU at each count (rows of one count averaged; predicted MFU = measured MFU x
   predicted / measured throughput, as notebook 07 draws it), the change from the smallest to
   the largest count, and whether the prediction has its direction;
3. how many curves have the right direction, and how many have the change within 3 MFU points
   (issue 31's target: every curve, within 3 points).

Takes about 8 s of one core.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from ddlsim.tools.validate.core import validate_file
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import load_runs

SOURCES = {"MOSAIC_LLMF_2307", "MOSAIC_LLMF_2401"}
#: the sequence length of the curves (notebook 07's last cells)
CURVE_TOKENS = 2048
#: issue 31's tolerance on the change of MFU from the smallest to the largest GPU count
TOLERANCE_POINTS = 3.0


def band(gpus: int) -> str:
    """The GPU-count band a row is summarised in."""
    return "8" if gpus <= 8 else ("16-64" if gpus <= 64 else "128-512")


def collect(path: Path) -> tuple[dict, dict]:
    """Errors per (GPU, band) and curve points per (GPU, model) -> {gpus: [(measured,
    predicted MFU)]}."""
    options = ValidateOptions(absolute=True, assume_inter_node="ib-ndr", assume_nics_per_node=8)
    errors: dict = defaultdict(list)
    curves: dict = defaultdict(lambda: defaultdict(list))
    for r in validate_file(load_runs(path), options, sources=SOURCES):
        run = r.run
        if r.rel_error is None or "full_shard" not in run.variant:
            continue
        errors[(run.gpu, band(run.gpus))].append(r.rel_error)
        mfu = re.search(r"MFU ([\d.]+)", run.note or "")
        if run.seq_len == CURVE_TOKENS and mfu:
            measured = float(mfu.group(1))
            curves[(run.gpu, run.model)][run.gpus].append((measured, measured * (1 + r.rel_error)))
    return errors, curves


def curve_changes(curves: dict) -> list[tuple]:
    """Per curve of two or more GPU counts: ``(key, [(gpus, measured, predicted)], change
    measured, change predicted)``, the changes from the smallest to the largest count (points of
    one count averaged)."""
    out = []
    for key, points in sorted(curves.items()):
        if len(points) < 2:
            continue
        row = []
        for n in sorted(points):
            pts = points[n]
            row.append((n, sum(m for m, _ in pts) / len(pts), sum(p for _, p in pts) / len(pts)))
        out.append((key, row, row[-1][1] - row[0][1], row[-1][2] - row[0][2]))
    return out


def right_direction(d_measured: float, d_predicted: float) -> bool:
    """Whether the predicted change has the measured one's direction (a flat measured curve,
    change 0, counts as falling)."""
    return (d_measured > 0) == (d_predicted > 0)


def main(argv: list[str]) -> int:
    """Print the table, the curves and the counts (module docstring); exit status 0."""
    path = Path(argv[0] if argv else "traces/measured/runs_transformers.csv")
    errors, curves = collect(path)
    print("group                    n    MAPE    bias")
    for (gpu, b), errs in sorted(errors.items()):
        mape = 100 * sum(map(abs, errs)) / len(errs)
        bias = 100 * sum(errs) / len(errs)
        print(f"{gpu:15s} {b:>7s} {len(errs):4d} {mape:6.1f}% {bias:+6.1f}%")
    changes = curve_changes(curves)
    right = within = 0
    print(f"\nMFU at {CURVE_TOKENS:,} tokens, measured / predicted, by GPU count")
    for (gpu, model), row, d_meas, d_pred in changes:
        ok = right_direction(d_meas, d_pred)
        right += ok
        within += abs(d_meas - d_pred) <= TOLERANCE_POINTS
        cells = "  ".join(f"{n}:{m:.1f}/{p:.1f}" for n, m, p in row)
        print(
            f"{gpu:15s} {model:9s} {cells}  | change measured {d_meas:+.1f}, "
            f"predicted {d_pred:+.1f} {'right' if ok else 'WRONG'}"
        )
    print(
        f"direction right for {right} of {len(changes)} curves; change within "
        f"{TOLERANCE_POINTS:g} points for {within} of {len(changes)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
