"""Fit the per-layer kernel model to measured cuDNN convolutions; check it on the other GPUs.

    python scripts/fit_kernel_model.py [KERNELS.csv] [--write] [--skip-held-out]   (needs scipy)

Fits the six fitted coefficients of ``ddlsim/workload/data/kernel_model.json`` (their meaning is
in that file) to the P100 rows of the kernel file, minimising the mean |ln(predicted/measured)|
over every P100 pass (differential evolution, fixed seed, then Nelder-Mead), and prints

1. the P100 fit applied, unchanged, to every GPU of the file: MAPE per GPU and pass, over all
   shapes and over the vision shapes (square inputs);
2. leave one GPU out: for each GPU, the model fitted on the *other* GPUs' rows, its MAPE on the
   held-out GPU (a second check of how the model transfers; the shipped fit is the P100 one).

``--write`` stores the P100 fit and the table of (1) in kernel_model.json; ``--skip-held-out``
skips (2), the slow part (four more fits, each on three times the rows: about half an hour on
2 busy cores). The P100 fit took 9.5 minutes on this project's shared 2-core machine, at 40% of
one core (2026-11-25: about 4 minutes of one core). A progress line on stderr shows the fit and
the generation it is at, its best loss, elapsed and remaining time. scipy is in the dev extra.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import date
from pathlib import Path

import numpy as np
from scipy.optimize import differential_evolution, minimize

from ddlsim.atomic import atomic_write_text
from ddlsim.calibrate.progress import Progress
from ddlsim.workload import kernels
from ddlsim.workload.kernel_check import (
    PASSES,
    KernelRow,
    error_stats,
    predict_rows,
    read_kernel_csv,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT / "traces" / "measured" / "kernels" / "deepbench_conv_fp32.csv"
MODEL_JSON = ROOT / "ddlsim" / "workload" / "data" / kernels.MODEL_FILE
FIT_GPU = "p100"
#: fitted coefficients and their search bounds (physical ranges)
BOUNDS = {
    "fwd_efficiency": (0.3, 1.0),
    "bwd_data_efficiency": (0.3, 1.0),
    "bwd_filter_efficiency": (0.3, 1.0),
    "tile_overhead_steps": (0.0, 512.0),
    "call_overhead_s": (0.0, 1e-4),
    "col2im_efficiency": (0.05, 1.0),
}


def _loss(values: np.ndarray, rows: list[KernelRow], base: kernels.KernelModel) -> float:
    model = base.with_values(**dict(zip(BOUNDS, map(float, values), strict=True)))
    return float(
        np.mean([abs(math.log(r.predicted_ms / r.measured_ms)) for r in predict_rows(rows, model)])
    )


#: differential evolution's generations at most (it may converge sooner)
GENERATIONS = 150


def fit(
    rows: list[KernelRow],
    base: kernels.KernelModel,
    progress: Progress | None = None,
    label: str = "",
) -> kernels.KernelModel:
    """The coefficients minimising the mean |log error| over ``rows``; ``progress`` shows
    ``label``, the generation reached and the best loss every 10 generations."""
    bounds = list(BOUNDS.values())
    generation = 0

    def report(intermediate_result: object) -> None:
        nonlocal generation
        generation += 1
        if progress is not None and generation % 10 == 0:
            loss = getattr(intermediate_result, "fun", float("nan"))
            progress.show(f"{label}: generation {generation}/{GENERATIONS}, loss {loss:.4f}")

    coarse = differential_evolution(
        _loss,
        bounds,
        args=(rows, base),
        seed=1,
        maxiter=GENERATIONS,
        tol=1e-7,
        polish=False,
        callback=report,
    )
    if progress is not None:
        progress.show(f"{label}: Nelder-Mead from loss {coarse.fun:.4f}")
    fine = minimize(
        _loss,
        coarse.x,
        args=(rows, base),
        method="Nelder-Mead",
        bounds=bounds,
        options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 4000},
    )
    best = fine.x if fine.fun <= coarse.fun else coarse.x
    return base.with_values(**dict(zip(BOUNDS, map(float, best), strict=True)))


def table(rows: list[KernelRow], model: kernels.KernelModel) -> dict[str, dict[str, float]]:
    """MAPE per GPU, pass and shape set (``"fwd"`` / ``"fwd vision"`` ...)."""
    results = predict_rows(rows, model)
    out: dict[str, dict[str, float]] = {}
    for gpu in dict.fromkeys(r.gpu for r in rows):
        cells = {}
        for pass_ in PASSES:
            for vision in (False, True):
                sel = [
                    r
                    for r in results
                    if r.row.gpu == gpu and r.pass_ == pass_ and (r.row.vision or not vision)
                ]
                key = f"{pass_} vision" if vision else pass_
                cells[key] = round(error_stats(sel)["mape"], 4)
        out[gpu] = cells
    return out


def _print(title: str, mape: dict[str, dict[str, float]]) -> None:
    print(title)
    cols = [f"{p}{v}" for p in PASSES for v in ("", " vision")]
    print(f"  {'gpu':<15}" + "".join(f"{c:>19}" for c in cols))
    for gpu, cells in mape.items():
        print(f"  {gpu:<15}" + "".join(f"{100 * cells[c]:>18.1f}%" for c in cols))


def main(argv: list[str]) -> int:
    """Fit, print the two tables, optionally write the model file."""
    write, held = "--write" in argv, "--skip-held-out" not in argv
    paths = [a for a in argv if not a.startswith("--")]
    rows, _, _ = read_kernel_csv(paths[0] if paths else DEFAULT_CSV)
    base = kernels.default_model()
    p100 = [r for r in rows if r.gpu == FIT_GPU]
    gpus = list(dict.fromkeys(r.gpu for r in rows)) if held else []
    progress = Progress([len(p100), *(len(rows) - len(p100) for _ in gpus)], name="fit")
    model = fit(p100, base, progress, f"P100 fit ({len(p100)} rows)")
    progress.advance()
    print("fitted on the P100 rows:")
    for name in BOUNDS:
        print(f"  {name:<22} {getattr(model, name):.6g}")
    applied = table(rows, model)
    _print("\nP100 fit applied to every GPU (MAPE):", applied)
    held_out = {}
    for gpu in gpus:
        other = fit([r for r in rows if r.gpu != gpu], base, progress, f"{gpu} held out")
        progress.advance()
        held_out[gpu] = table([r for r in rows if r.gpu == gpu], other)[gpu]
        print(f"  held out {gpu}: fitted {other.as_dict()}")
    progress.close()
    if held:
        _print("\nleave one GPU out: fitted on the other GPUs, MAPE on the held-out one:", held_out)
    if write:
        doc = json.loads(MODEL_JSON.read_text())
        for name in BOUNDS:
            doc["coefficients"][name]["value"] = float(f"{getattr(model, name):.5g}")
        doc["fitted_on"]["date"] = date.today().isoformat()
        doc["check"] = {"p100_fit_mape": applied}
        if held:
            doc["check"]["leave_one_gpu_out_mape"] = held_out
        atomic_write_text(MODEL_JSON, json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {MODEL_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
