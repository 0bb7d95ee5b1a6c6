"""The failure model's flags, one per field of the job (:mod:`ddlsim.config.groups`), in its groups.

Failures are modelled by default (:mod:`ddlsim.resilience`: the closed form, well under a
millisecond); ``--node-mtbf-hours 0`` (or ``none``) turns them off. Each flag is the job's field
of the same name, in the unit the name says; :mod:`ddlsim.cli.config_args` adds them to the
workload, system, execution and simulation groups and puts them in :func:`predict_kwargs`.
Ranges are checked where the fields are (:mod:`ddlsim.config.groups`), so the API, a sweep grid and
``--from-json`` refuse the same values with the same line.
"""

from __future__ import annotations

import argparse
from typing import Any

from ddlsim.cli.args import integer, non_negative_number, number_or, positive_number
from ddlsim.resilience.config import (
    DEFAULT_CHECKPOINT_WRITE_GBPS,
    DEFAULT_NODE_MTBF_HOURS,
    DEFAULT_RENDEZVOUS_S,
    DEFAULT_REPLACE_MIN,
    DEFAULT_RESTART_S,
    MINUTE_S,
    OPTIMIZERS,
    RECOVERIES,
)

#: the failure model's fields, by group (the flags' destinations are the same names)
FIELDS = {
    "workload": ("optimizer", "checkpoint_GB"),
    "system": ("node_mtbf_hours", "checkpoint_write_GBps", "checkpoint_time_s"),
    "execution": (
        "recovery",
        "checkpoint_interval_min",
        "restart_min",
        "rendezvous_s",
        "replace_min",
    ),
    "simulation": ("mc_draws", "mc_seed"),
}

mtbf_hours = number_or("none", 0.0, "hours")
minutes_or_auto = number_or("auto", None, "minutes")


def add_workload(g: argparse._ArgumentGroup) -> None:
    """``--optimizer``, ``--checkpoint-GB``."""
    g.add_argument(
        "--optimizer",
        default="momentum",
        choices=OPTIMIZERS,
        help="optimizer state in a checkpoint: sgd 4, momentum 8, adam 12 bytes per parameter "
        "(default: momentum)",
    )
    g.add_argument(
        "--checkpoint-GB",
        dest="checkpoint_GB",
        type=positive_number,
        default=None,
        metavar="GB",
        help="checkpoint size, in place of the model's parameters x bytes per parameter",
    )


def add_system(g: argparse._ArgumentGroup) -> None:
    """``--node-mtbf-hours``, ``--checkpoint-write-GBps``, ``--checkpoint-time-s``."""
    g.add_argument(
        "--node-mtbf-hours",
        type=mtbf_hours,
        default=DEFAULT_NODE_MTBF_HOURS,
        metavar="H",
        help="each node's mean time between failures; 0 or none: no failures (default: "
        f"{DEFAULT_NODE_MTBF_HOURS:,.0f}, Llama 3's 419 interruptions in 54 days x its 2,048 "
        "nodes; Kokolis et al. 2024's research clusters: about 1,024)",
    )
    g.add_argument(
        "--checkpoint-write-GBps",
        dest="checkpoint_write_GBps",
        type=positive_number,
        default=DEFAULT_CHECKPOINT_WRITE_GBPS,
        metavar="GBPS",
        help="checkpoint write (and read) bandwidth of a node, GB/s (default: "
        f"{DEFAULT_CHECKPOINT_WRITE_GBPS:g}, Llama 3's 2 TB/s store over its 2,048 nodes)",
    )
    g.add_argument(
        "--checkpoint-time-s",
        type=positive_number,
        default=None,
        metavar="S",
        help="a measured checkpoint write time, in place of size / bandwidth",
    )


def add_execution(g: argparse._ArgumentGroup) -> None:
    """``--recovery``, ``--checkpoint-interval-min``, ``--restart-min``, ``--rendezvous-s``,
    ``--replace-min``."""
    g.add_argument(
        "--recovery",
        default="restart",
        choices=RECOVERIES,
        help="after a node fails: restart from the last checkpoint (default), or elastic "
        "(Horovod Elastic: the survivors roll back to the last commit and train on)",
    )
    g.add_argument(
        "--checkpoint-interval-min",
        type=minutes_or_auto,
        default=None,
        metavar="MIN|auto",
        help="training minutes between checkpoints (elastic: commits); default auto, the "
        "minimum of the expected time-to-train (Daly)",
    )
    g.add_argument(
        "--restart-min",
        type=non_negative_number,
        default=None,
        metavar="MIN",
        help="a measured restart, checkpoint load included (default: "
        f"{DEFAULT_RESTART_S / MINUTE_S:g} min assumed for detection, relaunch, rendezvous "
        "and warm-up, plus the load)",
    )
    g.add_argument(
        "--rendezvous-s",
        type=non_negative_number,
        default=DEFAULT_RENDEZVOUS_S,
        metavar="S",
        help=f"elastic: detection and re-rendezvous after a failure (default: "
        f"{DEFAULT_RENDEZVOUS_S:g}, assumed)",
    )
    g.add_argument(
        "--replace-min",
        type=non_negative_number,
        default=DEFAULT_REPLACE_MIN,
        metavar="MIN",
        help="elastic: minutes until a failed node's replacement arrives (default: "
        f"{DEFAULT_REPLACE_MIN:g}, the restart's relaunch)",
    )


def add_simulation(g: argparse._ArgumentGroup) -> None:
    """``--mc-draws``, ``--mc-seed``."""
    g.add_argument(
        "--mc-draws",
        type=integer,
        default=0,
        metavar="N",
        help="Monte Carlo runs of the whole training with failures: the time-to-train's "
        "p10 / p50 / p90 (default: 0, none)",
    )
    g.add_argument(
        "--mc-seed", type=integer, default=0, metavar="N", help="Monte Carlo seed (default: 0)"
    )


def failure_kwargs(args: argparse.Namespace, group: str) -> dict[str, Any]:
    """The failure model's keywords of ``group`` from parsed flags."""
    return {name: getattr(args, name) for name in FIELDS[group]}
