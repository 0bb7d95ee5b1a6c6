"""``ddlsim plot``: figures of a sweep file (scaling curves, efficiency, goodput and
time-to-train with failures, time breakdown)."""

from __future__ import annotations

import argparse

from ddlsim.cli.args import output_file
from ddlsim.tools.analysis.plot import FORMATS, KINDS


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plot`` sub-command."""
    p = sub.add_parser(
        "plot",
        help="plot a sweep file: scaling, efficiency, goodput, time-to-train or breakdown",
        description="Draw a figure from a sweep file (CSV or Parquet, one row per "
        "configuration, as ddlsim sweep writes it): throughput against GPUs with the "
        "ideal-linear line, scaling efficiency, the goodput or how much longer the expected "
        "time-to-train with failures is than the failure-free one (%), or stacked "
        "per-iteration time breakdowns. Failed rows are skipped.",
    )
    p.add_argument(
        "sweep", metavar="SWEEP", help="sweep file to read (.csv, or .parquet as sweep writes)"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file(*FORMATS),
        metavar="FIG",
        help="figure to write (.png or .svg)",
    )
    p.add_argument("--kind", default="scaling", choices=KINDS, help="default: scaling")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim plot``."""
    from ddlsim.extras import require
    from ddlsim.tools.analysis.plot import plot_sweep

    require("matplotlib", "plot", "ddlsim plot")  # before reading the sweep
    plot_sweep(args.sweep, args.output, args.kind)
    return 0
