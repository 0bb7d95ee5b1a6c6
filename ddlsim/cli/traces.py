"""``ddlsim traces``: benchmark logs -> measured-runs CSV rows; Horovod timeline summaries.

- ``ddlsim traces import LOG... [-o FILE]``: Horovod synthetic-benchmark and tf_cnn_benchmarks
  logs to rows of the measured-runs schema (what the log states beats the flags; a conflict is
  an error); CSV on stdout or written atomically to ``-o FILE``.
- ``ddlsim traces timeline-summary TIMELINE.json [--compare ...]``: per-iteration negotiation,
  fusion-copy and allreduce times of a Horovod timeline; ``--compare`` with predict's flags
  puts ddlsim's simulated times of the same phases beside them.
"""

from __future__ import annotations

import argparse
import json
import sys

from ddlsim.cli.args import int_at_least, output_file
from ddlsim.cli.config_args import add_config_arguments, predict_kwargs


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``traces`` sub-command and its ``import`` / ``timeline-summary`` actions."""
    p = sub.add_parser("traces", help="import benchmark logs; summarise Horovod timelines")
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    actions.required = True
    _register_import(actions)
    _register_timeline(actions)


def _register_import(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "import",
        help="benchmark logs -> measured-runs CSV rows",
        description="Turn Horovod synthetic-benchmark and tf_cnn_benchmarks logs into rows of "
        "the measured-runs schema. What a log states wins; a flag that contradicts it is an "
        "error. Fields no log states come from the flags, else stay empty (unknown).",
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="benchmark output files")
    p.add_argument(
        "-o",
        "--output",
        default="-",
        type=output_file(".csv", stdout=True),
        metavar="FILE.csv",
        help="write the CSV here, atomically (default: - = standard output)",
    )
    p.add_argument("--source-id", default="IMPORTED", help="source_id and run_id prefix")
    text_flags = {
        "model": "zoo model (logs state it)",
        "gpu": "GPU type, e.g. v100-sxm2 (no log states it)",
        "intra-node": "GPU-to-GPU fabric of the nodes",
        "inter-node": "network (default: none for a single-process, single-node run)",
        "transport": "tcp or rdma (multi-node rows only)",
        "comm": "gradient exchange; must agree with tf_cnn_benchmarks' Variables line",
        "framework": "default: tensorflow",
        "precision": "fp32 (default of both benchmarks) or amp",
        "data": "synthetic or real (when the log does not say)",
    }
    for flag, text in text_flags.items():
        p.add_argument(f"--{flag}", default=None, help=text)
    int_flags = {
        "gpus": "total GPUs (logs state it)",
        "gpus-per-node": "GPUs per node",
        "batch": "batch per GPU (logs state it)",
    }
    for flag, text in int_flags.items():
        p.add_argument(f"--{flag}", type=int_at_least(1), default=None, help=text)
    p.set_defaults(func=run_import)


def _register_timeline(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "timeline-summary",
        help="per-iteration phase times of a Horovod timeline",
        description="Summarise a Horovod timeline (HOROVOD_TIMELINE / --timeline-filename) per "
        "iteration: negotiation, fusion-buffer copies, allreduce. With --compare, ddlsim "
        "simulates the configuration given by predict's flags and prints the same phases.",
    )
    p.add_argument(
        "timeline",
        metavar="TIMELINE.json",
        help="a Horovod timeline (HOROVOD_TIMELINE), e.g. traces/horovod/timeline_np2.json",
    )
    p.add_argument("--compare", action="store_true", help="simulate with the flags below")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_arguments(p, title="--compare: ")
    p.set_defaults(func=run_timeline)


def run_import(args: argparse.Namespace) -> int:
    """Run ``ddlsim traces import``."""
    from ddlsim.atomic import atomic_write_text
    from ddlsim.tools.traces.importer import ImportFlags, import_logs
    from ddlsim.tools.validate.runs import format_rows

    flags = ImportFlags(
        source_id=args.source_id,
        model=args.model,
        gpu=args.gpu,
        gpus=args.gpus,
        gpus_per_node=args.gpus_per_node,
        intra_node=args.intra_node,
        inter_node=args.inter_node,
        transport=args.transport,
        comm=args.comm,
        batch=args.batch,
        precision=args.precision,
        data=args.data,
        framework=args.framework,
    )
    text = format_rows(import_logs(args.logs, flags))
    atomic_write_text(args.output, text)
    return 0


def run_timeline(args: argparse.Namespace) -> int:
    """Run ``ddlsim traces timeline-summary``."""
    from ddlsim.tools.traces.phases import (
        iteration_starts_s,
        simulated_phases,
        steady_state,
        timeline_phases,
    )
    from ddlsim.tools.traces.report import format_timeline_summary
    from ddlsim.tools.traces.timeline import load_timeline

    timeline = load_timeline(args.timeline)
    first_tensor, _ = iteration_starts_s(timeline)
    iterations = timeline_phases(timeline)
    simulated = None
    if args.compare:
        from ddlsim.api import predict
        from ddlsim.cli.applies import warn_inapplicable

        kwargs = predict_kwargs(args)
        pred = predict(**kwargs)
        warn_inapplicable(kwargs, pred.inputs)
        simulated = simulated_phases(
            pred.sim.spans, pred.iteration_time_s, len(pred.sim.iteration_times_s)
        )
        simulated["gpus"] = args.gpus
    doc = {
        "file": timeline.path,
        "ranks": timeline.ranks,
        "first_tensor": first_tensor,
        "truncated": timeline.truncated,
        "unclosed_spans": timeline.unclosed_spans,
        "iterations": [it.to_dict() for it in iterations],
        "steady_state": steady_state(iterations),
        "simulated": simulated,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_timeline_summary(doc))
    return 0
