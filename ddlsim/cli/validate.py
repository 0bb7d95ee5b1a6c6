"""``ddlsim validate RUNS.csv``: predict every measured multi-GPU row and report the errors.

Each multi-GPU row is predicted with the compute calibration anchored to its single-GPU
baseline's measured throughput (same source, model, GPU, batch, precision, data, framework) and
the row's cluster and method; rows ddlsim cannot predict are listed with the reason. See
:mod:`ddlsim.validate.mapping` for the mapping decisions.
"""

from __future__ import annotations

import argparse
import json
import sys

from ddlsim.analysis.plot import FORMATS as FIGURE_FORMATS
from ddlsim.cli.args import output_file
from ddlsim.cli.predict import _number

_EPILOG = """\
baseline: a 1-GPU row of the same source, model, gpu, batch, precision, data and framework;
among several, the one agreeing with a speedup stated in the note, then the same platform
(the note's text before the first ',' or ';'), variant, comm, intra_node.
rows validated on the efficiency: a row with only scaling_efficiency (no images_per_sec) is
compared on ddlsim's predicted efficiency, anchored to its baseline like the others.
skipped rows: single-GPU rows (baselines), no measured value, comm empty or 'other', batch or
precision not stated, multi-node rows without a network or on a network whose bandwidth the
catalog only assumes (ib, azure-eth), no baseline, and any error ddlsim raises for the row.
empty cells otherwise take predict's defaults, listed in the row's notes (data: synthetic).
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``validate`` sub-command."""
    p = sub.add_parser(
        "validate",
        help="compare predictions with measured runs (a CSV in the measured-runs schema)",
        description="Predict every multi-GPU row of a measured-runs CSV with the compute\n"
        "anchored to the row's single-GPU baseline, and report the errors by source, method,\n"
        "GPU and network.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("csv", metavar="RUNS.csv", help="measured runs (traces/measured/runs.csv)")
    p.add_argument("--json", action="store_true", help="print one JSON object: rows, summary")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        type=output_file(*FIGURE_FORMATS),
        default=None,
        help="write a figure (matplotlib; .png or .svg)",
    )
    p.add_argument(
        "--source",
        action="append",
        default=None,
        metavar="SOURCE_ID",
        help="validate only the rows of this source (repeatable); baselines come from all rows",
    )
    p.add_argument("--engine", default="fast", choices=("fast", "detailed"), help="default: fast")
    p.add_argument(
        "--fusion-threshold-mb",
        type=_number,
        default=None,
        help="HOROVOD_FUSION_THRESHOLD for every Horovod row (default: predict's)",
    )
    p.add_argument(
        "--cycle-time-ms",
        type=_number,
        default=None,
        help="HOROVOD_CYCLE_TIME for every Horovod row (default: predict's)",
    )
    p.add_argument(
        "--rank-sigma",
        type=_number,
        default=None,
        help="per-rank speed variability for every row (default: predict's fitted value)",
    )
    p.add_argument(
        "--assume-baseline-batch",
        action="store_true",
        help="predict rows whose batch_per_gpu is empty with their baseline's batch",
    )
    p.add_argument(
        "--allow-assumed-bandwidth",
        action="store_true",
        help="predict rows on networks whose bandwidth the catalog only assumes (ib, azure-eth)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim validate``."""
    from ddlsim.validate.core import validate_runs
    from ddlsim.validate.mapping import ValidateOptions
    from ddlsim.validate.report import format_report
    from ddlsim.validate.runs import read_runs
    from ddlsim.validate.stats import summarise

    if args.plot:
        from ddlsim.validate.plot import _matplotlib

        _matplotlib()  # fail before the run, not after it
    runs = read_runs(args.csv)
    options = ValidateOptions(
        engine=args.engine,
        fusion_threshold_mb=args.fusion_threshold_mb,
        cycle_time_ms=args.cycle_time_ms,
        rank_sigma=args.rank_sigma,
        assume_baseline_batch=args.assume_baseline_batch,
        allow_assumed_bandwidth=args.allow_assumed_bandwidth,
    )
    _check_settings(options)
    sources = set(args.source) if args.source else None
    only = None if sources is None else (lambda r: r.source_id in sources)
    results = validate_runs(runs, options, only=only)
    summary = summarise(results)
    if args.plot:
        from ddlsim.validate.plot import plot_validation

        plot_validation(results, args.plot, title=args.csv)
    if args.json:
        doc = {"rows": [r.to_json() for r in results], "summary": summary}
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(args.csv, results, summary))
    return 0


def _check_settings(options: object) -> None:
    """The settings every row gets (``--rank-sigma``, ``--fusion-threshold-mb``, ...) checked
    once, by predict's own validation on a 2-GPU job, before any row: a bad value is one error
    line, not every row skipped."""
    from dataclasses import fields

    from ddlsim.api import predict
    from ddlsim.reproduce import keyword_defaults

    keywords = keyword_defaults()
    given = {
        f.name: getattr(options, f.name)
        for f in fields(options)  # type: ignore[arg-type]
        if f.name in keywords and getattr(options, f.name) is not None
    }
    predict("alexnet", 2, gpus_per_node=2, **{**given, "engine": "fast"})
