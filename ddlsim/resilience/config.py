"""Inputs of the failure model: what fails how often, what a checkpoint costs, how a job recovers.

Every default below is either derived from a published measurement (the derivation is spelled
out) or an assumption, named as such. Each input is a field of the job
(:mod:`ddlsim.config.groups`), in the unit its name says, and so a keyword of :func:`ddlsim.predict`
and a flag of ``ddlsim predict``: the workload's ``optimizer`` and ``checkpoint_GB``, the
system's ``node_mtbf_hours``, ``checkpoint_write_GBps`` and ``checkpoint_time_s``, the
execution's ``recovery``, ``checkpoint_interval_min``, ``restart_min``, ``rendezvous_s`` and
``replace_min``, the simulation's ``mc_draws`` and ``mc_seed``. The checks of those fields
(:func:`check_choice`, :func:`check_positive`, :func:`check_duration`, :func:`check_count`)
are here; :class:`ResilienceConfig` is the same inputs in SI units, as the model takes them.

Node MTBF (default :data:`DEFAULT_NODE_MTBF_S`)
    Meta's Llama 3 report (Llama Team, "The Llama 3 Herd of Models", 2024, section 3.3.4)
    counts 419 unexpected interruptions in a 54-day pre-training snapshot on 16,384 H100 GPUs,
    i.e. 2,048 nodes of 8. The job's MTBF is 54 x 24 h / 419 = 3.09 h. Every interruption stops
    a synchronous job, so all 419 count (about 78% were attributed to hardware, GPUs and HBM
    first; the rest to software, network and host maintenance, which also stop the job).
    ddlsim assumes nodes fail independently and at the same rate, so the job's failure rate is
    the sum of the nodes' rates and one node's MTBF is the job's times the node count:
    1,296 h x 2,048 / 419 = 6,335 h (about 264 days). Kokolis et al. (2024, "Revisiting
    Reliability in Large-Scale Machine Learning Research Clusters", Meta's RSC clusters) find
    job failure rates growing about linearly with the node count, which is this assumption, and
    a mean time to failure of about 8 hours for 1,024-GPU (128-node) jobs: 8 h x 128 = 1,024 h,
    per node, six times worse than Llama 3's production job (a research cluster's mix of jobs
    on A100 nodes). Use ``--node-mtbf-hours 1024`` for that figure.
Checkpoint write bandwidth per node (default :data:`DEFAULT_CHECKPOINT_WRITE_BPS`)
    Llama 3's checkpoint store (Tectonic, 240 PB on 7,500 SSD servers) sustains 2 TB/s for the
    16,384-GPU job: 2 TB/s / 2,048 nodes = 0.98 GB/s per node when every node writes. A
    data-parallel job's checkpoint is written by one rank (Horovod's examples save on rank 0),
    which may get more than that share; 1 GB/s per node is the conservative default.
Restart (default :data:`DEFAULT_RESTART_S` plus the checkpoint load)
    Detection of the failure, requeue on a spare node, process start and framework import,
    rendezvous and NCCL initialisation, warm-up: 10 minutes, an **assumption** (no source above
    times it). The checkpoint load, size / bandwidth (read back as fast as it was written), is
    computed and added. With Llama 3's 3.09 h job MTBF and its reported > 90% effective
    training time, each interruption cost that job at most 18.6 min in all, which 10 min of
    restart plus half an interval fits.
Elastic re-rendezvous (default :data:`DEFAULT_RENDEZVOUS_S`)
    Horovod Elastic (0.20+) catches the failed collective on the survivors, rolls them back to
    the last ``state.commit()`` and re-forms the ring without the lost host: detection,
    rendezvous and NCCL re-initialisation, 1 minute, an **assumption**.
Replacement (default: :data:`DEFAULT_RESTART_S`)
    A restarted job needs a spare node as much as an elastic one does; ddlsim gives the
    elastic job its replacement after the same time a restart needs to relaunch on one.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ddlsim.errors import ConfigError

HOUR_S = 3600.0
MINUTE_S = 60.0

#: Llama 3 (2024): unexpected interruptions, days, and nodes (16,384 H100 / 8 per node)
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_NODES = 2048
#: the job's MTBF times its node count, in seconds (6,335 h)
DEFAULT_NODE_MTBF_S = LLAMA3_DAYS * 24 * HOUR_S * LLAMA3_NODES / LLAMA3_INTERRUPTIONS
DEFAULT_NODE_MTBF_HOURS = DEFAULT_NODE_MTBF_S / HOUR_S
#: accepted node MTBFs, hours, besides 0 (no failures): from 3.6 s (a node that fails more
#: often completes no iteration) to 1e9 h (failures never matter)
MIN_NODE_MTBF_HOURS = 1e-3
MAX_NODE_MTBF_HOURS = 1e9
#: Kokolis et al. (2024): ~8 h MTTF of 1,024-GPU (128-node) jobs -> 1,024 h per node
KOKOLIS_NODE_MTBF_S = 8 * HOUR_S * 128
#: Llama 3's checkpoint store: 2 TB/s sustained over 2,048 nodes, rounded to 1 GB/s per node
DEFAULT_CHECKPOINT_WRITE_BPS = 1e9
DEFAULT_CHECKPOINT_WRITE_GBPS = DEFAULT_CHECKPOINT_WRITE_BPS / 1e9
#: accepted checkpoint write bandwidths per node, GB/s: 1 kB/s to 1 PB/s
MIN_CHECKPOINT_WRITE_GBPS = 1e-6
MAX_CHECKPOINT_WRITE_GBPS = 1e6
#: smallest accepted checkpoint size given, GB (one byte)
MIN_CHECKPOINT_GB = 1e-9
#: assumption: detection + requeue on a spare node + start + rendezvous + warm-up
DEFAULT_RESTART_S = 10 * MINUTE_S
#: assumption: Horovod Elastic's detection + re-rendezvous + NCCL re-initialisation
DEFAULT_RENDEZVOUS_S = 1 * MINUTE_S
#: a failed node's replacement arrives after the restart's relaunch (minutes)
DEFAULT_REPLACE_MIN = DEFAULT_RESTART_S / MINUTE_S
#: Monte Carlo draws and time bounds beyond which an input is certainly a mistake
MAX_MC_DRAWS = 10_000_000
MAX_TIME_S = 100 * 365 * 24 * HOUR_S

RECOVERIES = ("restart", "elastic")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "lamb")


def _real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _shown(value: object) -> str:
    return f"{value:g}" if _real(value) else repr(value)


def check_positive(what: str, value: object, unit: str, *, zero: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite number > 0 (>= 0 with ``zero``);
    the one-line message names ``what``, the value and the unit."""
    ok = _real(value) and math.isfinite(value)  # type: ignore[arg-type]
    bound = "a finite number >= 0" if zero else "a finite number > 0"
    if not ok or value < 0 or (value == 0 and not zero):  # type: ignore[operator]
        raise ConfigError(f"{what} must be {bound} {unit}, got {_shown(value)}")


def check_range(what: str, value: object, low: float, high: float, unit: str) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a number in ``low..high`` ``unit``."""
    if not (_real(value) and math.isfinite(value) and low <= value <= high):  # type: ignore
        raise ConfigError(
            f"{what} must be a number in {low:g}..{high:g} {unit}, got {_shown(value)}"
        )


def check_duration(
    what: str, value: object, unit: str, unit_s: float, *, zero: bool = False
) -> None:
    """A duration in ``unit`` (``unit_s`` seconds each): finite, > 0 (>= 0 with ``zero``) and at
    most :data:`MAX_TIME_S` (100 years)."""
    check_positive(what, value, unit, zero=zero)
    if value * unit_s > MAX_TIME_S:  # type: ignore[operator]
        raise ConfigError(
            f"{what} must be at most 100 years ({MAX_TIME_S / unit_s:g} {unit}), got {value:g}"
        )


def check_choice(what: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


def check_count(what: str, value: object, high: int) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an integer in ``0..high``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= high:
        raise ConfigError(f"{what} must be an integer in 0..{high:,}, got {value!r}")


def check_node_mtbf_hours(value: object) -> None:
    """0 (no failures), or a number of hours in ``MIN_NODE_MTBF_HOURS..MAX_NODE_MTBF_HOURS``."""
    if value == 0 and _real(value):
        return
    if not (_real(value) and math.isfinite(value)):  # type: ignore[arg-type]
        ok = False
    else:
        ok = MIN_NODE_MTBF_HOURS <= value <= MAX_NODE_MTBF_HOURS  # type: ignore[operator]
    if not ok:
        raise ConfigError(
            f"node MTBF must be 0 (no failures) or a number of hours in "
            f"{MIN_NODE_MTBF_HOURS:g}..{MAX_NODE_MTBF_HOURS:g}, got {_shown(value)}"
        )


@dataclass(frozen=True)
class ResilienceConfig:
    """What fails and how the job recovers (SI units; None = the documented default).

    ``node_mtbf_s`` None means no failures. ``checkpoint_time_s`` (a measured write time)
    replaces size / ``checkpoint_write_Bps``; ``checkpoint_bytes`` replaces the size computed
    from the model (:mod:`ddlsim.resilience.state`). ``interval_s`` is the training time between
    two checkpoints (``restart``) or two ``state.commit()`` calls (``elastic``); None = ``auto``,
    the minimum of the expected time-to-train. ``restart_s`` is a measured restart, load
    included; None = :data:`DEFAULT_RESTART_S` + the checkpoint load. ``replace_s`` is how long
    an elastic job runs without the failed node (default, and None: :data:`DEFAULT_RESTART_S`).
    ``mc_draws`` > 0 adds a Monte Carlo of that many runs, seeded by ``seed``.
    """

    node_mtbf_s: float | None = DEFAULT_NODE_MTBF_S
    recovery: str = "restart"
    optimizer: str = "momentum"
    checkpoint_write_Bps: float = DEFAULT_CHECKPOINT_WRITE_BPS
    checkpoint_time_s: float | None = None
    checkpoint_bytes: int | None = None
    interval_s: float | None = None
    restart_s: float | None = None
    rendezvous_s: float = DEFAULT_RENDEZVOUS_S
    replace_s: float | None = DEFAULT_RESTART_S
    mc_draws: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.node_mtbf_s is not None:
            check_positive("node MTBF", self.node_mtbf_s, "s (None: no failures)")
        check_choice("recovery", self.recovery, RECOVERIES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_positive("checkpoint write bandwidth", self.checkpoint_write_Bps, "B/s")
        if self.checkpoint_bytes is not None:
            check_positive("checkpoint size", self.checkpoint_bytes, "bytes")
        for what, value, zero in (
            ("checkpoint time", self.checkpoint_time_s, False),
            ("checkpoint interval", self.interval_s, False),
            ("restart time", self.restart_s, True),
            ("re-rendezvous time", self.rendezvous_s, True),
            ("node replacement time", self.replace_s, True),
        ):
            if value is not None:
                check_duration(what, value, "s", 1.0, zero=zero)
        check_count("Monte Carlo draws", self.mc_draws, MAX_MC_DRAWS)
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral):
            raise ConfigError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.seed < 0:
            raise ConfigError(f"seed must be a non-negative integer, got {self.seed!r}")

    @property
    def fails(self) -> bool:
        """Whether nodes fail at all."""
        return self.node_mtbf_s is not None
