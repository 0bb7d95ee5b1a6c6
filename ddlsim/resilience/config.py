"""Inputs of the failure model: what fails how often, what a checkpoint costs, how a job recovers.

Every default below is either derived from a published measurement (the derivation is spelled
out) or an assumption, named as such; each one is a flag of ``ddlsim predict``.

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
#: Kokolis et al. (2024): ~8 h MTTF of 1,024-GPU (128-node) jobs -> 1,024 h per node
KOKOLIS_NODE_MTBF_S = 8 * HOUR_S * 128
#: Llama 3's checkpoint store: 2 TB/s sustained over 2,048 nodes, rounded to 1 GB/s per node
DEFAULT_CHECKPOINT_WRITE_BPS = 1e9
#: assumption: detection + requeue on a spare node + start + rendezvous + warm-up
DEFAULT_RESTART_S = 10 * MINUTE_S
#: assumption: Horovod Elastic's detection + re-rendezvous + NCCL re-initialisation
DEFAULT_RENDEZVOUS_S = 1 * MINUTE_S
#: Monte Carlo draws and time bounds beyond which an input is certainly a mistake
MAX_MC_DRAWS = 10_000_000
MAX_TIME_S = 100 * 365 * 24 * HOUR_S

RECOVERIES = ("restart", "elastic")
OPTIMIZERS = ("sgd", "momentum", "adam")


def _real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive(what: str, value: object, unit: str, *, zero: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite number > 0 (>= 0 with ``zero``);
    the one-line message names ``what``, the value and the unit."""
    ok = _real(value) and math.isfinite(value)  # type: ignore[arg-type]
    bound = "a finite number >= 0" if zero else "a finite number > 0"
    if not ok or value < 0 or (value == 0 and not zero):  # type: ignore[operator]
        shown = f"{value:g}" if _real(value) else repr(value)
        raise ConfigError(f"{what} must be {bound} {unit}, got {shown}")


@dataclass(frozen=True)
class ResilienceConfig:
    """What fails and how the job recovers (SI units; None = the documented default).

    ``node_mtbf_s`` None means no failures. ``checkpoint_time_s`` (a measured write time)
    replaces size / ``checkpoint_write_Bps``; ``checkpoint_bytes`` replaces the size computed
    from the model (:mod:`ddlsim.resilience.state`). ``interval_s`` is the training time between
    two checkpoints (``restart``) or two ``state.commit()`` calls (``elastic``); None = ``auto``,
    the minimum of the expected time-to-train. ``restart_s`` is a measured restart, load
    included; None = :data:`DEFAULT_RESTART_S` + the checkpoint load. ``replace_s`` is how long
    an elastic job runs without the failed node (None = :data:`DEFAULT_RESTART_S`).
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
    replace_s: float | None = None
    mc_draws: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.node_mtbf_s is not None:
            check_positive("node MTBF", self.node_mtbf_s, "s (None: no failures)")
        if self.recovery not in RECOVERIES:
            raise ConfigError(
                f"recovery must be one of {', '.join(RECOVERIES)}, got {self.recovery!r}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}"
            )
        check_positive("checkpoint write bandwidth", self.checkpoint_write_Bps, "B/s")
        if self.checkpoint_time_s is not None:
            check_positive("checkpoint time", self.checkpoint_time_s, "s")
        if self.checkpoint_bytes is not None:
            check_positive("checkpoint size", self.checkpoint_bytes, "bytes")
        if self.interval_s is not None:
            check_positive("checkpoint interval", self.interval_s, "s (None: auto)")
        if self.restart_s is not None:
            check_positive("restart time", self.restart_s, "s", zero=True)
        check_positive("re-rendezvous time", self.rendezvous_s, "s", zero=True)
        if self.replace_s is not None:
            check_positive("node replacement time", self.replace_s, "s", zero=True)
        for what, value in (
            ("restart time", self.restart_s),
            ("re-rendezvous time", self.rendezvous_s),
            ("node replacement time", self.replace_s),
            ("checkpoint time", self.checkpoint_time_s),
            ("checkpoint interval", self.interval_s),
        ):
            if value is not None and value > MAX_TIME_S:
                raise ConfigError(f"{what} must be at most 100 years, got {value:g} s")
        if (
            isinstance(self.mc_draws, bool)
            or not isinstance(self.mc_draws, numbers.Integral)
            or not 0 <= self.mc_draws <= MAX_MC_DRAWS
        ):
            raise ConfigError(
                f"Monte Carlo draws must be an integer in 0..{MAX_MC_DRAWS:,}, got "
                f"{self.mc_draws!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral):
            raise ConfigError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.seed < 0:
            raise ConfigError(f"seed must be a non-negative integer, got {self.seed!r}")

    @property
    def fails(self) -> bool:
        """Whether nodes fail at all."""
        return self.node_mtbf_s is not None
