"""The failure-model flags of ``ddlsim predict`` and the configuration they give.

Any of the flags (or ``--failures`` alone, for the defaults) adds the "with failures" section to
the report and a ``resilience`` field to ``--json``; without them ``predict`` is unchanged.
Flags take human units (hours, minutes, GB, GB/s) and are converted here, once.
"""

from __future__ import annotations

import argparse
import math
import sys

from ddlsim.cli.args import number, output_file
from ddlsim.resilience.analysis import ResilienceResult, from_prediction
from ddlsim.resilience.config import (
    HOUR_S,
    MINUTE_S,
    OPTIMIZERS,
    RECOVERIES,
    ResilienceConfig,
)

#: the argparse destinations of the flags (``predict --from-json`` accepts them)
DESTS = (
    "failures",
    "node_mtbf_hours",
    "recovery",
    "optimizer",
    "checkpoint_write_GBps",
    "checkpoint_time_s",
    "checkpoint_GB",
    "checkpoint_interval_min",
    "restart_min",
    "rendezvous_s",
    "replace_min",
    "mc_draws",
    "mc_seed",
    "failure_timeline",
)
NO_FAILURES = ("0", "none")


def _mtbf_hours(text: str) -> float:
    """Hours > 0, or ``0`` / ``none`` (no failures: inf)."""
    if text.strip().lower() in NO_FAILURES:
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected hours > 0, or 0 / none for no failures, got {text!r}"
        ) from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(
            f"a node MTBF must be a finite number of hours > 0 (0 / none: no failures), got {text}"
        )
    return value


def _positive(text: str) -> float:
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def _interval(text: str) -> float | str:
    """Minutes > 0, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    return _positive(text)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the failure-model flags to ``p``."""
    g = p.add_argument_group(
        "failures and checkpoints",
        "any of these adds the 'with failures' section (docs/design.md, Failures)",
    )
    g.add_argument(
        "--failures",
        action="store_true",
        help="add the section with every default below",
    )
    g.add_argument(
        "--node-mtbf-hours",
        type=_mtbf_hours,
        default=None,
        metavar="H",
        help="each node's mean time between failures; 0 or none: no failures (default: 6,335 "
        "h, Llama 3's 419 interruptions in 54 days x its 2,048 nodes; Kokolis et al. 2024's "
        "research clusters: about 1,024)",
    )
    g.add_argument(
        "--recovery",
        default=None,
        choices=RECOVERIES,
        help="restart from the last checkpoint (default) or elastic (Horovod Elastic: the "
        "survivors roll back to the last commit and continue)",
    )
    g.add_argument(
        "--optimizer",
        default=None,
        choices=OPTIMIZERS,
        help="optimizer state in the checkpoint (default: momentum)",
    )
    g.add_argument(
        "--checkpoint-write-GBps",
        type=_positive,
        default=None,
        metavar="GBPS",
        help="checkpoint write (and read) bandwidth of a node, GB/s (default: 1, Llama 3's "
        "2 TB/s checkpoint store over its 2,048 nodes)",
    )
    g.add_argument(
        "--checkpoint-time-s",
        type=_positive,
        default=None,
        metavar="S",
        help="a measured checkpoint write time, in place of size / bandwidth",
    )
    g.add_argument(
        "--checkpoint-GB",
        type=_positive,
        default=None,
        metavar="GB",
        help="checkpoint size in GB, in place of the model's parameters x bytes per parameter",
    )
    g.add_argument(
        "--checkpoint-interval-min",
        type=_interval,
        default=None,
        metavar="MIN|auto",
        help="training minutes between checkpoints (elastic: commits); default auto, the "
        "minimum of the expected time-to-train (Daly)",
    )
    g.add_argument(
        "--restart-min",
        type=_non_negative,
        default=None,
        metavar="MIN",
        help="a measured restart, checkpoint load included (default: 10 min assumed for "
        "detection, relaunch, rendezvous and warm-up, plus the load)",
    )
    g.add_argument(
        "--rendezvous-s",
        type=_non_negative,
        default=None,
        metavar="S",
        help="elastic: detection and re-rendezvous after a failure (default: 60, assumed)",
    )
    g.add_argument(
        "--replace-min",
        type=_non_negative,
        default=None,
        metavar="MIN",
        help="elastic: minutes until a failed node's replacement arrives (default: 10, the "
        "restart's relaunch)",
    )
    g.add_argument(
        "--mc-draws",
        type=_count,
        default=None,
        metavar="N",
        help="Monte Carlo runs for the time-to-train distribution (default: 0, none)",
    )
    g.add_argument(
        "--mc-seed", type=_count, default=None, metavar="N", help="Monte Carlo seed (default 0)"
    )
    g.add_argument(
        "--failure-timeline",
        type=output_file(".json"),
        default=None,
        metavar="FILE.json",
        help="write a Chrome / Perfetto trace of one run in which a node fails halfway through "
        "(training, checkpoints or commits, lost work, restart or re-rendezvous, admission; "
        "other failures drawn with --mc-seed)",
    )


def requested(args: argparse.Namespace) -> bool:
    """Whether any failure-model flag was given."""
    return any(getattr(args, d, None) not in (None, False) for d in DESTS)


def config_from_args(args: argparse.Namespace) -> ResilienceConfig | None:
    """The :class:`ResilienceConfig` of the flags (None when none was given)."""
    if not requested(args):
        return None
    kwargs: dict = {}
    if args.node_mtbf_hours is not None:
        hours = args.node_mtbf_hours
        kwargs["node_mtbf_s"] = None if math.isinf(hours) else hours * HOUR_S
    for dest, key in (("recovery", "recovery"), ("optimizer", "optimizer")):
        if getattr(args, dest) is not None:
            kwargs[key] = getattr(args, dest)
    scaled = (
        ("checkpoint_write_GBps", "checkpoint_write_Bps", 1e9),
        ("checkpoint_time_s", "checkpoint_time_s", 1.0),
        ("checkpoint_GB", "checkpoint_bytes", 1e9),
        ("checkpoint_interval_min", "interval_s", MINUTE_S),
        ("restart_min", "restart_s", MINUTE_S),
        ("rendezvous_s", "rendezvous_s", 1.0),
        ("replace_min", "replace_s", MINUTE_S),
    )
    for dest, key, factor in scaled:
        value = getattr(args, dest)
        if value is not None and value != "auto":
            kwargs[key] = value * factor
    if args.mc_draws is not None:
        kwargs["mc_draws"] = args.mc_draws
    if args.mc_seed is not None:
        kwargs["seed"] = args.mc_seed
    return ResilienceConfig(**kwargs)


#: flags that only one recovery uses: (argparse destination, flag, the recovery it applies to)
_ONLY = (
    ("checkpoint_write_GBps", "--checkpoint-write-GBps", "restart"),
    ("checkpoint_time_s", "--checkpoint-time-s", "restart"),
    ("restart_min", "--restart-min", "restart"),
    ("rendezvous_s", "--rendezvous-s", "elastic"),
    ("replace_min", "--replace-min", "elastic"),
)


def inapplicable(args: argparse.Namespace, config: ResilienceConfig) -> list[str]:
    """One message per given failure-model flag that has no effect with ``config``."""
    out = [
        f"{flag} has no effect with --recovery {config.recovery} (it applies to {only})"
        for dest, flag, only in _ONLY
        if getattr(args, dest) is not None and config.recovery != only
    ]
    if args.mc_seed is not None and not config.mc_draws:
        out.append("--mc-seed has no effect without --mc-draws")
    if config.mc_draws and not config.fails:
        out.append("--mc-draws has no effect without failures (--node-mtbf-hours none)")
    return out


def analyse_args(args: argparse.Namespace, prediction: object) -> ResilienceResult | None:
    """The failure model of the flags applied to ``prediction`` (None when no flag was given);
    writes the ``--failure-timeline`` file; a ``ddlsim: warning:`` line on stderr for each
    given flag that has no effect."""
    config = config_from_args(args)
    if config is None:
        return None
    result = from_prediction(prediction, config)
    if args.failure_timeline is not None:
        from ddlsim.analysis.timeline import write_trace
        from ddlsim.resilience.timeline import failure_timeline

        write_trace(failure_timeline(result, seed=config.seed), args.failure_timeline)
    for message in inapplicable(args, config):
        print(f"ddlsim: warning: {message}", file=sys.stderr)
    return result
