"""``ddlsim kernels FILE.csv``: the per-layer kernel model against measured kernels.

A transformer kernel file (``traces/measured/kernels/transformer/gemm.csv`` or
``elementwise.csv``: it has ``time_us`` and ``time_stat`` columns) is checked by
:mod:`ddlsim.compute.gemm_check`: MAPE and median error per (GPU, precision, op), in sample and
with each GPU left out of the fit (:func:`ddlsim.compute.gemm_fit.leave_one_gpu_out`). Any other
file is a convolution kernel file:

Predicts the forward, data-gradient and weight-gradient time of every row of a kernel file
(``traces/measured/kernels/``) with the model that builds calibrations
(:mod:`ddlsim.compute.kernels`) and reports measured vs predicted per pass, then MAPE, median
and 90th percentile of the errors per GPU and pass (all shapes, and the vision shapes). See
:mod:`ddlsim.compute.kernel_check` for the file format and what is skipped.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ddlsim.cli.args import output_file
from ddlsim.errors import ConfigError

_EPILOG = """\
columns: gpu,in_w,in_h,in_c,batch,out_k,filter_h,filter_w,pad_h,pad_w,stride_h,stride_w,
fwd_ms,bwd_data_ms,bwd_filter_ms, optional math (fp32 = TF32 off, the default; tf32 and fp16:
tensor cores, fp32 sums); others are ignored. gpu is a catalog GPU name or alias (p100 =
p100-sxm2). A row with an unknown GPU or a bad size, a math the GPU cannot run (fp16 on a K80,
tensor-core math on a GPU without tensor cores), and a pass with an empty or bad time, is
skipped with its reason.
vision shapes = square inputs (image CNN layers).

transformer kernel files (columns gpu, precision, op, batch, m, n, k or rows, cols, time_us,
time_stat): cuBLAS GEMMs and memory-bound ops, predicted as kernel time + the timing method's
overhead per call, summarised per (GPU, precision, op) with the leave-one-GPU-out MAPE. A
source whose own records name the board maps its rows there (Vidur's a100-80gb: the A100 80GB
PCIe, gemm_check.SOURCE_GPU).

examples:
  ddlsim kernels traces/measured/kernels/deepbench_conv_fp32.csv
  ddlsim kernels traces/measured/kernels/transformer/gemm.csv
  ddlsim kernels traces/measured/kernels/transformer/elementwise.csv --no-held-out
  ddlsim kernels traces/measured/kernels/deepbench_conv_fp32.csv --gpu m40 --json
  ddlsim kernels traces/measured/kernels/deepbench_conv_v100_fp16.csv
  ddlsim kernels traces/measured/kernels/deepbench_conv_fp32.csv --plot kernels.png
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``kernels`` sub-command."""
    p = sub.add_parser(
        "kernels",
        help="check the per-layer kernel model against measured convolution kernel times",
        description="Predict each row of a measured-kernels CSV (cuDNN convolutions: forward,\n"
        "backward-data, backward-filter) with ddlsim's per-layer model and report the errors.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("csv", metavar="FILE.csv", help="measured kernels (traces/measured/kernels/)")
    p.add_argument("--gpu", default=None, metavar="NAME", help="only the rows of this GPU")
    p.add_argument("--json", action="store_true", help="print one JSON object: rows, summary")
    p.add_argument(
        "--no-held-out",
        action="store_true",
        help="transformer files: skip the leave-one-GPU-out refits",
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        type=output_file(".png"),
        default=None,
        help="write a figure (matplotlib; .png), checked before the work",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim kernels``."""
    from ddlsim.compute import kernels
    from ddlsim.compute.kernel_check import (
        format_report,
        predict_rows,
        read_kernel_csv,
        summarise,
        summarise_by_filter,
    )
    from ddlsim.system import catalog

    wanted = catalog.kernel_device(args.gpu).id if args.gpu is not None else None
    if args.plot:
        from ddlsim.tools.validate.plot import _matplotlib

        _matplotlib()  # fail before the work, not after it
    if _transformer_file(args.csv):
        return run_transformer(args, wanted)
    rows, skipped, n_rows = read_kernel_csv(args.csv)
    if wanted is not None:
        in_file = sorted({r.gpu for r in rows})
        rows = [r for r in rows if r.device.id == wanted]
        skipped = [s for s in skipped if _same_gpu(s.gpu, wanted)]
        if not rows:
            raise ConfigError(
                f"no usable row of GPU {args.gpu!r} in {args.csv}; it has: "
                f"{', '.join(in_file) or 'none'}"
            )
    elif not rows:
        first = f" (first: line {skipped[0].line}: {skipped[0].reason})" if skipped else ""
        raise ConfigError(f"no usable row in {args.csv}: {len(skipped)} skipped{first}")
    results = predict_rows(rows)
    if args.plot:
        plot_kernels(results, args.plot, title=args.csv)
    if args.json:
        doc = {
            "rows": [r.to_json() for r in results],
            "summary": {
                "n_rows": n_rows,
                "n_passes": len(results),
                "by_gpu_pass": summarise(results),
                "by_gpu_pass_filter": summarise_by_filter(results),
                "skipped": [s.to_json() for s in skipped],
                "model": kernels.provenance(),
            },
        }
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(args.csv, results, skipped, n_rows))
    return 0


def _transformer_file(path: str) -> bool:
    """Whether ``path`` is a transformer kernel file (its header has time_us and time_stat)."""
    import csv

    from ddlsim.compute.gemm_check import is_transformer_file
    from ddlsim.inputs import KERNELS_CSV_MAX_BYTES, check_input

    check_input(path, "kernel file", KERNELS_CSV_MAX_BYTES)  # a regular file: a FIFO never opens
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError):
        return False  # the convolution reader says why
    return is_transformer_file([h.strip() for h in header])


def run_transformer(args: argparse.Namespace, wanted: str | None) -> int:
    """``ddlsim kernels`` on a transformer GEMM or element-wise file."""
    from ddlsim.compute import gemm, gemm_fit
    from ddlsim.compute.gemm_check import (
        format_summary,
        predict,
        read_transformer_csv,
        summarise,
    )

    if args.plot:
        raise ConfigError("--plot draws convolution kernel files only")
    rows, skipped, n_rows = read_transformer_csv(args.csv)
    every = rows
    if wanted is not None:
        rows = [r for r in rows if r.device.id == wanted]
        skipped = [s for s in skipped if _same_gpu(s.gpu, wanted)]
    if not rows:
        raise ConfigError(f"no usable row in {args.csv}: {len(skipped)} skipped")
    results = [predict(r) for r in rows]
    held_out, fitted = ({}, {})
    if not args.no_held_out:
        held_out, fitted = gemm_fit.leave_one_gpu_out(every, gemm.default_gemm_model())
        if wanted is not None:
            held_out = {k: v for k, v in held_out.items() if k[0] == wanted}
    if args.json:
        doc = {
            "rows": [r.to_json() for r in results],
            "summary": {
                "n_rows": n_rows,
                "n_predicted": len(results),
                "by_gpu_precision_op": summarise(results),
                "leave_one_gpu_out": [held_out[k] for k in held_out],
                "leave_one_gpu_out_fitted": fitted,
                "skipped": [s.to_json() for s in skipped],
                "model": {k: v["value"] for k, v in gemm.model_document()["coefficients"].items()},
            },
        }
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_summary(args.csv, results, skipped, n_rows, held_out))
    return 0


def _same_gpu(name: str, wanted: str) -> bool:
    from ddlsim.system import catalog

    try:
        return catalog.kernel_device(name).id == wanted
    except ConfigError:
        return False


def plot_kernels(results: Sequence, path: str | os.PathLike[str], title: str = "") -> None:
    """Draw :func:`kernels_figure` into ``path`` (PNG, written atomically)."""
    from ddlsim.atomic import atomic_write_bytes

    fig = kernels_figure(results, title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(path, buffer.getvalue())


def kernels_figure(results: Sequence, title: str = "") -> Any:
    """Predicted against measured milliseconds, one panel per GPU, a colour per pass."""
    from ddlsim.compute.kernels import PASSES
    from ddlsim.tools.validate.plot import _matplotlib

    Figure, FigureCanvasAgg = _matplotlib()
    gpus = list(dict.fromkeys(r.row.gpu for r in results))
    # at least 6.5 x 5.5 in at 100 dpi: one GPU's panel still holds the title and the legend
    fig = Figure(figsize=(max(6.5, 4.6 * len(gpus)), 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    values = [v for r in results for v in (r.measured_ms, r.predicted_ms)]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    for i, gpu in enumerate(gpus):
        ax = fig.add_subplot(1, len(gpus), i + 1)
        ax.fill_between(
            [lo, hi], [lo * 0.7, hi * 0.7], [lo * 1.3, hi * 1.3], color="0.88", label="+-30%"
        )
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=1)
        for j, pass_ in enumerate(PASSES):
            sel = [r for r in results if r.row.gpu == gpu and r.pass_ == pass_]
            ax.scatter(
                [r.measured_ms for r in sel],
                [r.predicted_ms for r in sel],
                s=12,
                color=f"C{j}",
                alpha=0.8,
                label=f"{pass_} ({len(sel)})",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(gpu)
        ax.set_xlabel("measured ms")
        if i == 0:
            ax.set_ylabel("predicted ms")
        ax.legend(fontsize=8, loc="upper left")
    name = os.path.basename(os.fspath(title))  # the file's name: a long path would run off
    fig.suptitle(f"ddlsim kernels{': ' + name if name else ''}", fontsize=11)
    return fig
