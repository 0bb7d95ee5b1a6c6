"""The job the failure model is applied to, and the costs its inputs resolve to.

:class:`Job` is what the failure model needs of a prediction: the failure-free time-to-train,
the node count, the iteration time, the training state's size and where it can go (GPU memory,
the GPU<->host link, the node's network). :func:`resolve` turns a
:class:`~ddlsim.resilience.config.ResilienceConfig` into :class:`Costs` for that job, refusing
what cannot be: a state larger than a GPU's memory, an interval shorter than one checkpoint
write or one iteration, elastic recovery of a single node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddlsim.errors import ConfigError
from ddlsim.resilience.config import DEFAULT_RESTART_S, ResilienceConfig
from ddlsim.resilience.daly import auto_segments, optimal_interval_s
from ddlsim.resilience.elastic import auto_interval_s

_GB = 1e9


@dataclass(frozen=True)
class Job:
    """A data-parallel training run as the failure model sees it (SI units).

    ``work_s`` is the failure-free time-to-train, ``state_bytes`` one replica's weights and
    optimizer state (what a checkpoint holds), ``gpu_memory_bytes`` one GPU's memory (every
    replica holds the whole state), ``host_Bps`` the GPU<->host link (an elastic commit copies
    the state over it), ``network_Bps`` a node's network bandwidth (the state broadcast to an
    admitted node; None on one node). ``label`` names the state for reports.
    """

    work_s: float
    nodes: int
    iteration_time_s: float
    state_bytes: float
    gpu_memory_bytes: float
    host_Bps: float
    network_Bps: float | None = None
    label: str = ""
    #: the GPUs one copy of the state is split over (sharded data parallelism; 1: every
    #: replica holds it whole)
    shards: int = 1


@dataclass(frozen=True)
class Costs:
    """What one recovery point and one recovery cost, and the interval between recovery points.

    ``save_s``: one checkpoint write (restart) or ``state.commit()`` (elastic);
    ``recover_s``: a restart, checkpoint load included (restart), or a re-rendezvous
    (elastic); ``admit_s``: re-admitting a replaced node (elastic: a rendezvous and the state
    broadcast); ``replace_s``: how long an elastic job runs without a failed node;
    ``interval_s``: training between recovery points (None: none is written);
    ``optimum_s``: the interval minimising Daly's expected time (None without failures).
    """

    recovery: str
    node_mtbf_s: float | None
    save_s: float
    recover_s: float
    admit_s: float
    replace_s: float
    interval_s: float | None
    interval_auto: bool
    optimum_s: float | None


def job_mtbf_s(job: Job, config: ResilienceConfig) -> float | None:
    """The whole job's MTBF (node MTBF / nodes; None without failures)."""
    return None if config.node_mtbf_s is None else config.node_mtbf_s / job.nodes


def resolve(job: Job, config: ResilienceConfig) -> Costs:
    """The costs of ``config`` on ``job``; :class:`ConfigError` for what cannot be."""
    state = config.checkpoint_bytes if config.checkpoint_bytes is not None else job.state_bytes
    if state / job.shards > job.gpu_memory_bytes:
        split = f" over {job.shards} GPUs" if job.shards > 1 else ""
        raise ConfigError(
            f"checkpoint of {state / _GB:.3g} GB{split} is larger than one GPU's memory "
            f"({job.gpu_memory_bytes / 2**30:.3g} GiB): every data-parallel replica holds "
            f"{'its shard of ' if split else ''}the whole training state"
        )
    mtbf = job_mtbf_s(job, config)
    rate = 0.0 if mtbf is None else 1 / mtbf
    if config.recovery == "elastic":
        if job.nodes < 2 or job.network_Bps is None:
            raise ConfigError(
                f"elastic recovery needs at least 2 nodes, got {job.nodes}: the survivors of a "
                "failure hold the state it resumes from"
            )
        save = state / job.host_Bps
        recover = config.rendezvous_s
        admit = config.rendezvous_s + state / job.network_Bps
        replace = DEFAULT_RESTART_S if config.replace_s is None else config.replace_s
    else:
        write = config.checkpoint_write_Bps
        save = state / write if config.checkpoint_time_s is None else config.checkpoint_time_s
        recover = config.restart_s
        if recover is None:  # relaunch etc. (assumed) + reading the checkpoint back
            recover = DEFAULT_RESTART_S + state / write
        admit = replace = 0.0
    optimum = None if mtbf is None else optimal_interval_s(save, mtbf)
    interval = config.interval_s
    if interval is not None and interval < save:
        what = "commit" if config.recovery == "elastic" else "checkpoint write"
        raise ConfigError(
            f"checkpoint interval {interval:g} s is shorter than one {what} ({save:.3g} s)"
        )
    if interval is not None and interval < job.iteration_time_s:
        raise ConfigError(
            f"checkpoint interval {interval:g} s is shorter than one iteration "
            f"({job.iteration_time_s:.3g} s): a checkpoint is written between iterations"
        )
    auto = interval is None and mtbf is not None
    if auto:
        if config.recovery == "elastic":
            interval = auto_interval_s(
                job.work_s, job.nodes, rate / job.nodes, save, recover, admit, replace,
                job.iteration_time_s,
            )  # fmt: skip
        else:
            interval = auto_segments(job.work_s, save, recover, rate, job.iteration_time_s)
    if interval is not None and not math.isfinite(interval):
        interval = None
    return Costs(
        recovery=config.recovery,
        node_mtbf_s=config.node_mtbf_s,
        save_s=save,
        recover_s=recover,
        admit_s=admit,
        replace_s=replace,
        interval_s=interval,
        interval_auto=auto,
        optimum_s=optimum,
    )
