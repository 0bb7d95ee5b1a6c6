"""``ddlsim timeline``: a Chrome-trace / Perfetto JSON of the simulated steady-state iteration.

Open the file in https://ui.perfetto.dev or ``chrome://tracing``. Takes every ``ddlsim predict``
configuration flag; see :mod:`ddlsim.analysis.timeline` for what the trace holds.
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
        "with their tensors and bytes, and the compute stream's waits.",
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim timeline``."""
    from ddlsim.analysis.timeline import build_trace, write_trace
    from ddlsim.cli.applies import warn_inapplicable

    kwargs = predict_kwargs(args)
    trace = build_trace(kwargs, iterations=args.iterations, workers=args.workers)
    warn_inapplicable(kwargs)
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


def _span(values: list[int], noun: str) -> str:
    """``iteration 4``, ``iterations 2-4``, ``workers 0, 3, 5``."""
    if len(values) == 1:
        return f"{noun} {values[0]}"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{noun}s {values[0]}-{values[-1]}"
    return f"{noun}s " + ", ".join(map(str, values))
