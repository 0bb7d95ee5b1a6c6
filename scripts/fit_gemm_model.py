"""Fit the transformer kernel routes' free coefficients to measured kernels; check them.

    python scripts/fit_gemm_model.py [--write] [DIR]

``DIR`` (default ``traces/measured/kernels/transformer``, the shipped sample; the full files
of ``scripts/sample_transformer_kernels.py``'s ``SRC_DIR`` work too) holds ``gemm.csv`` and
``elementwise.csv``. Every row whose GPU is in the catalog, but MAMF's best-of-a-shape-search
rows (``gemm_fit.CHECK_ONLY_STATS``: predicted and reported only), enters one fit
(:func:`ddlsim.compute.gemm_fit.fit`: mean over (GPU, precision, op, source) groups of the
mean |ln(predicted / measured)|) of the coefficients of ``ddlsim/compute/data/gemm_model.json``.
Everything else is a datasheet figure (the catalog's peaks, bandwidths, SM counts, clocks and
power limits), the convolution model's (tile sizes, tile overhead, DRAM efficiency of the
GEMM's memory roof) or an architecture's process node (``gpu_clock.PROCESS_NM``). It prints
the per-group MAPE in sample and with each GPU left out of the fit, and ``--write`` stores the
coefficients, their meaning and both tables.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from ddlsim.compute import gemm_fit
from ddlsim.compute.gemm_check import format_summary, predict, read_transformer_csv, summarise

MODEL = Path(__file__).resolve().parents[1] / "ddlsim" / "compute" / "data" / "gemm_model.json"
FILES = ("gemm.csv", "elementwise.csv")
MEANING = {
    "cuda_efficiency": "fraction of the CUDA-core fp32 peak cuBLAS's SGEMM kernels sustain in "
    "their main loop (128-row tiles, every generation Maxwell..Ampere)",
    "tensor_efficiency": "fraction of the tensor-core peak (fp16 / bf16 / TF32) cuBLAS's "
    "tensor-core GEMM kernels sustain in their main loop (Volta, Turing, Ampere)",
    "launch_s": "fixed seconds of one GEMM kernel as a kernel timer sees it: the first tile's "
    "latency and the tail; the least a GEMM call takes",
    "stream_efficiency": "fraction of the DRAM bandwidth the element-wise kernels (norms, "
    "softmax, activations, adds, RoPE, gathers) move their bytes at",
    "stream_launch_s": "fixed seconds of one element-wise kernel as a kernel timer sees it",
    "event_dispatch_s": "what NeuSight's timing (CUDA events around one PyTorch op call, "
    "event_min5of25) adds per call: the host's dispatch of the op between the events (its "
    "README: a 25-40 us floor)",
    "issue_interval_s": "DeepBench's timing (host clock over 400 back-to-back cuBLAS calls, "
    "host_mean400): the interval at which the host issues calls; a call shows the larger of it "
    "and the kernel",
    "host_sync_s": "what LLMCompass's timing (host clock around one call + synchronize, "
    "host_median50) adds per call: launch and synchronisation",
    "compiled_call_s": "what a host-timed call of a torch.compile'd function adds (Dynamo's "
    "guards, the compiled graph's Python wrapper): LLMCompass's layernorm and gelu rows",
    "cuda_pJ_per_flop_nm": "energy per FLOP (pJ) per nm of process node a dense CUDA-core "
    "GEMM draws at the boost clock, board level: with the TDP it sets the power-limited "
    "clock (ddlsim.compute.gpu_clock)",
    "tensor_pJ_per_flop_nm": "the same for tensor-core GEMMs",
    "power_window_s": "time constant (s) with which GPU Boost brings the clock from boost to "
    "the power-limited clock under a continuous load",
}


def _rows(folder: Path) -> list:
    rows = []
    for name in FILES:
        mine, _, _ = read_transformer_csv(folder / name)
        rows += mine
    return rows


def _table(stats: dict | list) -> dict[str, float]:
    items = stats.values() if isinstance(stats, dict) else stats
    return {f"{s['gpu']} {s['precision']} {s['op']}": round(s["mape"], 4) for s in items}


def main(argv: list[str] | None = None) -> int:
    """Fit, print the in-sample and leave-one-GPU-out tables, ``--write`` the model file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path("traces/measured/kernels/transformer")
    ap.add_argument("dir", nargs="?", type=Path, default=default)
    ap.add_argument("--write", action="store_true", help="store the fit in gemm_model.json")
    args = ap.parse_args(argv)
    rows = [r for r in _rows(args.dir) if gemm_fit.fitted_row(r)]
    model, value = gemm_fit.fit(rows)
    print(f"fitted on {len(rows)} rows: objective {value:.4f}; {model}", file=sys.stderr)
    in_sample, held_out_mape, fitted = {}, {}, {}
    for name in FILES:
        mine, skipped, n = read_transformer_csv(args.dir / name)
        held_out, fitted[name] = gemm_fit.leave_one_gpu_out(mine, model)
        results = [predict(r, model) for r in mine]
        sys.stdout.write(format_summary(str(args.dir / name), results, skipped, n, held_out))
        in_sample.update(_table(summarise(results)))
        held_out_mape.update(_table(held_out))
    if args.write:
        doc = json.loads(MODEL.read_text())
        start = gemm_fit.START.as_dict()
        doc["coefficients"] = {
            k: {
                "value": float(f"{v:.5g}"),
                "fitted": abs(v / start[k] - 1) > 1e-6,
                "meaning": MEANING[k],
            }
            for k, v in model.as_dict().items()
        }
        doc["fitted_on"] = {
            "files": [f"traces/measured/kernels/transformer/{f}" for f in FILES],
            "rows": len(rows),
            "objective": "mean over (GPU, precision, op, source) groups of the mean "
            "|ln(predicted / measured)|; prediction = kernel + the timing method's overhead; "
            "plus penalties toward the priors (gemm_fit.PRIORED, PRIOR_WEIGHT, WEAK_PRIOR); "
            "MAMF's best_shape_mean100 rows checked, not fitted",
            "script": "python scripts/fit_gemm_model.py --write",
            "date": datetime.date.today().isoformat(),
        }
        doc["check"] = {
            "fit_mape": in_sample,
            "leave_one_gpu_out": "each file's rows refitted without one GPU's (the tilings of "
            "the full fit; coefficients its rows do not pin at their priors, gemm_fit.START)",
            "leave_one_gpu_out_mape": held_out_mape,
            "leave_one_gpu_out_fitted": fitted,
        }
        MODEL.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
