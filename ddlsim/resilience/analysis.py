"""A job with failures: the closed form, the optional Monte Carlo, and the result as JSON.

:func:`analyse` takes a :class:`~ddlsim.resilience.job.Job` and a
:class:`~ddlsim.resilience.config.ResilienceConfig`; :func:`from_prediction` builds the job
from a :class:`ddlsim.api.Prediction` (its failure-free time-to-train, node count, iteration
time, model, precision and GPU) and analyses it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.resilience import montecarlo
from ddlsim.resilience.config import ResilienceConfig
from ddlsim.resilience.daly import (
    Expectation,
    daly_interval_s,
    restart_expectation,
    young_interval_s,
)
from ddlsim.resilience.elastic import elastic_expectation
from ddlsim.resilience.job import Costs, Job, job_mtbf_s, resolve
from ddlsim.resilience.state import OPTIMIZER_STATE_WORDS, bytes_per_param, checkpoint_bytes


@dataclass(frozen=True)
class ResilienceResult:
    """The expected run with failures (closed form) and, if asked, its Monte Carlo summary."""

    config: ResilienceConfig
    job: Job
    costs: Costs
    expected: Expectation
    monte_carlo: dict[str, float] | None = None

    @property
    def job_mtbf_s(self) -> float | None:
        """The job's MTBF (None without failures)."""
        return job_mtbf_s(self.job, self.config)

    @property
    def nodes_present(self) -> float:
        """Mean fraction of the nodes training: ``W / (W + degraded)`` (1 for restart, which
        always trains on all of them; elastic trains on the survivors until replacements)."""
        e = self.expected
        return e.work_s / (e.work_s + e.degraded_s) if math.isfinite(e.degraded_s) else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``resilience`` field of ``predict --json``)."""
        c, e, mtbf = self.costs, self.expected, self.job_mtbf_s
        return {
            "recovery": c.recovery,
            "node_mtbf_s": c.node_mtbf_s,
            "job_mtbf_s": mtbf,
            "nodes": self.job.nodes,
            "optimizer": self.config.optimizer,
            "checkpoint_bytes": self._state_bytes,
            "save_s": c.save_s,
            "recover_s": c.recover_s,
            "admit_s": c.admit_s if c.recovery == "elastic" else None,
            "replace_s": c.replace_s if c.recovery == "elastic" else None,
            "interval_s": c.interval_s,
            "interval_auto": c.interval_auto,
            "optimum_interval_s": c.optimum_s,
            "young_interval_s": None if mtbf is None else young_interval_s(c.save_s, mtbf),
            "daly_interval_s": None if mtbf is None else daly_interval_s(c.save_s, mtbf),
            "nodes_present": self.nodes_present,
            "failure_free_time_to_train_s": e.work_s,
            "expected": {
                "time_to_train_s": finite_or_none(e.time_s),
                "failures": finite_or_none(e.failures),
                "checkpoint_s": finite_or_none(e.checkpoint_s),
                "lost_s": finite_or_none(e.lost_s),
                "recovery_s": finite_or_none(e.recovery_s),
                "degraded_s": finite_or_none(e.degraded_s),
                "goodput": e.goodput,
            },
            "monte_carlo": self.monte_carlo,
            "config": dataclasses.asdict(self.config),
        }

    @property
    def _state_bytes(self) -> float:
        override = self.config.checkpoint_bytes
        return self.job.state_bytes if override is None else override


def expectation(job: Job, costs: Costs) -> Expectation:
    """The closed-form expected run of ``job`` at ``costs``."""
    if costs.recovery == "elastic":
        if costs.node_mtbf_s is None and costs.interval_s is None:  # no failure, no commit
            return restart_expectation(job.work_s, None, 0.0, 0.0, 0.0)
        rate = 0.0 if costs.node_mtbf_s is None else 1 / costs.node_mtbf_s
        return elastic_expectation(
            job.work_s,
            job.nodes,
            rate,
            costs.interval_s,
            costs.save_s,
            costs.recover_s,
            costs.admit_s,
            costs.replace_s,
        )
    rate = 0.0 if costs.node_mtbf_s is None else job.nodes / costs.node_mtbf_s
    return restart_expectation(job.work_s, costs.interval_s, costs.save_s, costs.recover_s, rate)


def simulate(job: Job, costs: Costs, draws: int, seed: int) -> montecarlo.Draws:
    """``draws`` Monte Carlo runs of ``job`` at ``costs`` (failures required)."""
    mtbf = costs.node_mtbf_s
    if mtbf is None:
        raise ConfigError("a Monte Carlo of failures needs a node MTBF, got none (no failures)")
    if costs.recovery == "elastic":
        return montecarlo.run_elastic(
            job.work_s,
            job.nodes,
            mtbf,
            math.inf if costs.interval_s is None else costs.interval_s,  # inf: no commit
            costs.save_s,
            costs.recover_s,
            costs.admit_s,
            costs.replace_s,
            draws,
            seed,
        )
    return montecarlo.run_restart(
        job.work_s,
        costs.interval_s,
        costs.save_s,
        costs.recover_s,
        job.nodes,
        mtbf,
        draws,
        seed,
    )


def analyse(job: Job, config: ResilienceConfig) -> ResilienceResult:
    """The expected run of ``job`` under ``config``, plus ``config.mc_draws`` Monte Carlo runs
    (none without failures: every run then takes the closed form's time)."""
    costs = resolve(job, config)
    expected = expectation(job, costs)
    summary = None
    if config.mc_draws and costs.node_mtbf_s is not None:
        montecarlo.check_events(expected.failures)
        summary = simulate(job, costs, config.mc_draws, config.seed).summary()
    return ResilienceResult(config, job, costs, expected, summary)


def job_from_prediction(prediction: Any, optimizer: str = "momentum") -> Job:
    """The :class:`Job` of a :class:`ddlsim.api.Prediction`: its failure-free time-to-train,
    nodes, iteration time, and the state of its model at its precision with ``optimizer``.

    An elastic commit copies the state to host memory over the GPU's host link; a CPU worker
    (host link ``none``) copies it within its memory, reading and writing each byte: at half
    the memory bandwidth."""
    from ddlsim.system import catalog

    i = prediction.inputs
    setup = getattr(prediction, "setup", None)
    if setup is not None:  # the resolved cluster, as typed values
        cluster = setup.cluster
        nodes, device = cluster.n_nodes, cluster.device
        nic = cluster.nic if nodes > 1 else None
        network = nic.bandwidth_Bps * cluster.nics_per_node if nic else None
        host = cluster.host.bandwidth_Bps
        host_Bps = host if math.isfinite(host) else device.mem_bandwidth_Bps / 2
    else:  # a result read back from its JSON: its inputs in the report's units
        nodes = int(i["nodes"])
        nic_Gbps = i.get("nic_bandwidth_Gbps")
        network = None
        if nodes > 1 and nic_Gbps:
            network = nic_Gbps * (i.get("nics_per_node") or 1) * 1e9 / 8
        device = catalog.device(i["gpu"])
        host_GBps = i.get("host_bandwidth_GBps")
        host_Bps = device.mem_bandwidth_Bps / 2 if host_GBps is None else host_GBps * 1e9
    shards = 1
    if setup is not None:  # the resolved model (a CNN of the zoo or a transformer)
        state = setup.workload.model.n_params * bytes_per_param(optimizer, i["precision"])
        sharding = setup.strategy.sharding
        shards = sharding.shards if sharding is not None else 1
    else:
        state = checkpoint_bytes(i["model"], i["precision"], optimizer)
        shards = int(i.get("state_shards") or 1)
    return Job(
        work_s=prediction.time_to_train_s,
        nodes=nodes,
        iteration_time_s=prediction.iteration_time_s,
        state_bytes=state,
        gpu_memory_bytes=device.memory_bytes,
        host_Bps=host_Bps,
        network_Bps=network,
        label=OPTIMIZER_STATE_WORDS[optimizer],
        shards=shards,
    )


def from_prediction(prediction: Any, config: ResilienceConfig) -> ResilienceResult:
    """:func:`analyse` the job of ``prediction`` (a :class:`ddlsim.api.Prediction`)."""
    return analyse(job_from_prediction(prediction, config.optimizer), config)


def finite_or_none(value: float) -> float | None:
    """``value``, or None where it is infinite (JSON has no infinity)."""
    return value if math.isfinite(value) else None
