"""``ddlsim timeline``: a Chrome-trace / Perfetto JSON of the simulated steady-state iteration,
or (``--failure``) of a whole training run in which a node fails.

Open the file in https://ui.perfetto.dev or ``chrome://tracing``. Takes every ``ddlsim predict``
configuration flag; see :mod:`ddlsim.tools.analysis.timeline` and :mod:`ddlsim.resilience.timeline`
for what the traces hold.
"""

from __future__ import annotations

import argparse
import sys

from ddlsim.cli.args import integer as _int
from ddlsim.cli.args import output_file
from ddlsim.cli.config_args import add_config_arguments, predict_kwargs


def _ranks(text: str) -> list[int]:
    """``0,1,5`` or ``0-3,8`` as a list of ranks."""
    ranks: list[int] = []
    try:
        for item in filter(None, (part.strip() for part in text.split(","))):
            lo, sep, hi = item.partition("-")
            ranks.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ranks like 0,1,5 or 0-3, got {text!r}"
        ) from None
    if not ranks:
        raise argparse.ArgumentTypeError(f"expected at least one rank, got {text!r}")
    return ranks


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``timeline`` sub-command."""
    p = sub.add_parser(
        "timeline",
        help="write a Chrome/Perfetto trace of the simulated steady-state iteration",
        description="Simulate one configuration and write the last measured iteration(s) as a "
        "Chrome trace / Perfetto JSON: a track per worker stream (compute, communication "
        "channels, Horovod coordinator, input), per-layer forward/backward, fused collectives "
        "with their tensors and bytes, and the compute stream's waits. With --failure: the "
        "whole training run instead, in which node 0 fails halfway through.",
    )
    add_config_arguments(p)
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file(".json", stdout=True),
        metavar="FILE.json",
        help="trace file to write (- = stdout)",
    )
    p.add_argument(
        "--iterations",
        type=_int,
        default=1,
        metavar="K",
        help="export the last K measured iterations (default: 1)",
    )
    p.add_argument(
        "--workers",
        type=_ranks,
        default=None,
        metavar="RANKS",
        help="ranks to trace, e.g. 0,1,5 or 0-3 (default: all with --engine detailed, "
        "the representative worker 0 with the fast engine)",
    )
    p.add_argument(
        "--failure",
        action="store_true",
        help="trace the whole training run with failures instead, node 0 failing halfway "
        "through (training, checkpoints or commits, the work lost, the restart or "
        "re-rendezvous, the node's absence and admission; other failures drawn with "
        "--mc-seed): the failure model's --recovery, --node-mtbf-hours, ... apply",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim timeline``."""
    from ddlsim.cli.applies import note_one_gpu_nodes, warn_inapplicable
    from ddlsim.tools.analysis.timeline import build_trace, write_trace

    kwargs = predict_kwargs(args)
    if args.failure:
        return _failure(args, kwargs)
    trace = build_trace(kwargs, iterations=args.iterations, workers=args.workers)
    warn_inapplicable(kwargs, trace["metadata"]["inputs"])
    note_one_gpu_nodes(trace["metadata"]["inputs"].get("one_gpu_nodes"))
    _warn_failure_flags(kwargs)
    write_trace(trace, args.output)
    if args.output != "-":
        meta = trace["metadata"]
        its, workers = meta["iterations"], meta["workers"]
        print(
            f"wrote {args.output}: {len(trace['traceEvents']):,} events, "
            f"{_span(its, 'iteration')} of {_span(workers, 'worker')} "
            f"({meta['engine']} engine); open it in https://ui.perfetto.dev",
            file=sys.stderr,
        )
    return 0


def _warn_failure_flags(kwargs: dict) -> None:
    """One warning per failure-model flag given without ``--failure`` (the iteration's trace
    does not depend on it)."""
    from ddlsim.config.groups import defaults
    from ddlsim.config.knobs import KNOBS

    default = defaults()
    for knob in KNOBS:
        if knob.failure and kwargs[knob.name] != default[knob.name]:
            flag = knob.flag
            print(
                f"ddlsim: warning: {flag} has no effect without --failure (the iteration's "
                "trace); ignored",
                file=sys.stderr,
            )


def _failure(args: argparse.Namespace, kwargs: dict) -> int:
    """``timeline --failure``: the failure course trace of the configuration."""
    from ddlsim.cli.applies import note_one_gpu_nodes, warn_inapplicable
    from ddlsim.tools.analysis.timeline import build_failure_trace, write_trace

    trace = build_failure_trace(kwargs)
    warn_inapplicable(kwargs, trace["metadata"]["inputs"])
    note_one_gpu_nodes(trace["metadata"]["inputs"].get("one_gpu_nodes"))
    for flag, given in (("--iterations", args.iterations != 1), ("--workers", args.workers)):
        if given:
            print(f"ddlsim: warning: {flag} has no effect with --failure; ignored", file=sys.stderr)
    write_trace(trace, args.output)
    if args.output != "-":
        meta = trace["metadata"]
        print(
            f"wrote {args.output}: {len(trace['traceEvents']):,} events, one "
            f"{meta['resilience']['recovery']} run of {meta['nodes']:,} node(s) with "
            f"{meta['failures']} failure(s) (seed {meta['seed']}); open it in "
            "https://ui.perfetto.dev",
            file=sys.stderr,
        )
    return 0


def _span(values: list[int], noun: str) -> str:
    """``iteration 4``, ``iterations 2-4``, ``workers 0, 3, 5``."""
    if len(values) == 1:
        return f"{noun} {values[0]}"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{noun}s {values[0]}-{values[-1]}"
    return f"{noun}s " + ", ".join(map(str, values))
