"""``predict``: the one function that joins workload, system and execution.

Everything else in ddlsim sees one input. :func:`predict_job` resolves a
:class:`~ddlsim.config.groups.JobConfig` (:func:`ddlsim.resolve.prepare.prepare`), simulates it and
the
same job
on one GPU, and returns a :class:`Prediction`; :func:`predict` takes the job as flat keywords.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddlsim.calibration import network as netcal_file
from ddlsim.calibration import use as calibration_use
from ddlsim.comm.base import CommModel
from ddlsim.comm.sharded import COPY_OPS
from ddlsim.config import record as reproduce
from ddlsim.config.groups import JobConfig, SimulationConfig, SystemConfig, job
from ddlsim.engine.simulate import SimOptions, SimResult, simulate
from ddlsim.errors import ConfigError
from ddlsim.execution.dag import build_dag
from ddlsim.execution.input_pipeline import preprocessing_kind
from ddlsim.execution.strategy import Strategy
from ddlsim.resilience.analysis import ResilienceResult, from_prediction
from ddlsim.resolve.execution import resolve_comm
from ddlsim.resolve.prepare import Setup, prepare, tf32_applies
from ddlsim.resolve.system import resolve_system
from ddlsim.system import catalog
from ddlsim.units import MiB
from ddlsim.workload.ttt import time_to_train_s, tokens_time_to_train_s, train_tokens

__all__ = [
    "JobConfig",
    "Prediction",
    "Setup",
    "SimulationConfig",
    "describe",
    "job",
    "predict",
    "predict_job",
    "prepare",
    "rerun",
]


@dataclass(frozen=True)
class Prediction:
    """Predicted steady-state throughput of one configuration and where its time goes.

    ``time_to_train_s`` is the failure-free time-to-train; ``resilience`` is the failure model
    applied to it (:mod:`ddlsim.resilience`: the expected time-to-train with failures,
    checkpoints and restarts, the goodput, the interval used, ...), None when the job's
    ``node_mtbf_hours`` is 0 (no failures)."""

    images_per_sec: float
    iteration_time_s: float
    scaling_efficiency: float
    single_gpu_images_per_sec: float
    time_to_train_s: float
    breakdown: dict[str, float]
    inputs: dict[str, Any]
    comm_ops: list[dict[str, Any]]
    sim: SimResult = field(repr=False, compare=False)
    resilience: ResilienceResult | None = None
    #: the resolved job (cluster, strategy, workload, communication model, DAG): what the
    #: failure model and the report read as typed values (None for a result read from JSON)
    setup: Setup | None = field(default=None, repr=False, compare=False)

    @property
    def track_record(self) -> dict[str, Any] | None:
        """ddlsim's measured error for this method at this node count
        (:func:`ddlsim.config.track_record.lookup`); None for one GPU (nothing scales)."""
        if self.inputs["n_gpus"] == 1:
            return None
        from ddlsim.config.track_record import lookup

        transformer = bool(self.inputs.get("transformer"))
        return lookup(self.inputs["comm"], self.inputs["nodes"], transformer=transformer)

    @property
    def compute_record(self) -> dict[str, Any]:
        """ddlsim's measured error for one GPU of this type at this precision (and framework,
        where its runs were measured), from its own compute model with no anchor
        (:func:`ddlsim.config.track_record.lookup_absolute`)."""
        from ddlsim.config.track_record import lookup_absolute

        stack = self.inputs.get("stack") or {}
        transformer = bool(self.inputs.get("transformer"))
        return lookup_absolute(
            self.inputs["gpu"], self.inputs["precision"], stack.get("framework"),
            transformer=transformer,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``--json`` output)."""
        return {
            "images_per_sec": self.images_per_sec,
            "iteration_time_s": self.iteration_time_s,
            "scaling_efficiency": self.scaling_efficiency,
            "single_gpu_images_per_sec": self.single_gpu_images_per_sec,
            "time_to_train_s": self.time_to_train_s,
            "breakdown": self.breakdown,
            "inputs": self.inputs,
            "comm_ops": self.comm_ops,
            "track_record": self.track_record,
            "compute_record": self.compute_record,
            "resilience": None if self.resilience is None else self.resilience.to_dict(),
        }


def predict(model: str | None = None, gpus: int = 1, **settings: Any) -> Prediction:
    """Predict one data-parallel training configuration given as flat keywords.

    ``settings`` are the fields of the job's four groups (:mod:`ddlsim.config.groups`): the workload
    (``batch``, ``precision``, ``data``, ``calibration``, ``single_gpu_throughput``, ``epochs``,
    ...), the system (``gpu``, ``gpus_per_node``, ``intra_node``, ``inter_node``,
    ``transport``, ``nics_per_node``, ...), the execution (``comm``, ``n_ps``,
    ``horovod_version``, ``fusion_threshold_mb``, ``nccl_version``, ``algorithm``, ...) and the
    simulation (``engine``, ``rank_sigma``, ``host_contention``, ``stragglers``, ``seed``,
    ...); the failure model's inputs among them (``optimizer``, ``node_mtbf_hours``,
    ``checkpoint_write_GBps``, ``recovery``, ``checkpoint_interval_min``, ``restart_min``,
    ``mc_draws``, ...). An unknown keyword is a :class:`~ddlsim.errors.ConfigError`.
    ``inputs["predict_kwargs"]`` records every keyword the prediction ran with
    (:mod:`ddlsim.config.record`).
    """
    return predict_job(JobConfig.from_kwargs(model=model, gpus=gpus, **settings))


def predict_job(job: JobConfig) -> Prediction:
    """Predict ``job``: simulate it and the same workload on one GPU, and apply the failure
    model to its failure-free time-to-train (closed form; a Monte Carlo if ``mc_draws``)."""
    options = sim_options(job.simulation)
    setup = prepare(job)
    sim = setup.simulate(options)
    batch = setup.strategy.batch_per_gpu * job.execution.grad_accum  # samples per step
    if setup.cluster.n_gpus == 1 and not options.slowdown and not options.jitter_sigma:
        single = sim  # the run is its own 1-GPU baseline: efficiency exactly 1
    else:
        per_gpu_input_s = setup.input_time_s / setup.cluster.local_gpus
        single = _single_gpu(setup, per_gpu_input_s)
    gpus = setup.cluster.n_gpus
    ips = gpus * batch / sim.iteration_time_s
    single_ips = batch / single.iteration_time_s
    w = job.workload
    ttt_s, ttt_inputs = _time_to_train(w, setup, ips)
    prediction = Prediction(
        images_per_sec=ips,
        iteration_time_s=sim.iteration_time_s,
        scaling_efficiency=ips / (gpus * single_ips),
        single_gpu_images_per_sec=single_ips,
        time_to_train_s=ttt_s,
        breakdown={**sim.breakdown.to_dict(), **sim.sync_s, **_offload_parts(sim, setup)},
        inputs={
            **describe(job, setup, options),
            **ttt_inputs,
            **_transformer_inputs(job, setup, ips),
        },
        comm_ops=_comm_ops(sim, setup.comm),
        sim=sim,
        setup=setup,
    )
    failures = job.resilience(setup.optimizer)
    if failures is None:
        return prediction
    return dataclasses.replace(prediction, resilience=from_prediction(prediction, failures))


def _time_to_train(w: Any, setup: Setup, samples_per_s: float) -> tuple[float, dict[str, Any]]:
    """A CNN's epochs over its dataset, or a transformer's token budget (given, else 20 a
    parameter: :func:`ddlsim.workload.ttt.train_tokens`), at the predicted rate: seconds and
    the inputs that say what was counted."""
    if setup.transformer is None:
        ttt_s = time_to_train_s(samples_per_s, w.epochs, w.dataset_images)
        return ttt_s, {"epochs": w.epochs, "dataset_images": w.dataset_images}
    tokens = train_tokens(setup.workload.model.n_params, w.train_tokens)
    ttt_s = tokens_time_to_train_s(samples_per_s * setup.transformer.seq, tokens)
    return ttt_s, {"train_tokens": tokens, "train_tokens_stated": w.train_tokens is not None}


def sim_options(simulation: SimulationConfig) -> SimOptions:
    """The engine options of the job's (checked) simulation settings."""
    return SimOptions(
        engine=simulation.engine,
        slowdown=dict(simulation.stragglers or {}),
        jitter_sigma=simulation.jitter_sigma,
        rank_sigma=float(simulation.rank_sigma),
        host_contention=float(simulation.host_contention),
        interference=bool(simulation.interference),
        seed=simulation.seed,
        max_events=float(simulation.max_events),
    )


def _nccl1_ring(strategy: Strategy, setup: Setup) -> dict[str, Any]:
    """``replicated-nccl``: the bus bandwidth of NCCL 1's one ring in device order (GB/s) and
    whether a hop of it is staged through host memory; nothing for the other methods."""
    topology, intra = getattr(setup.comm, "topology", None), setup.cluster.intra
    if strategy.comm != "replicated-nccl" or topology is None or intra is None:
        return {}
    staged = topology.bus_Bps < intra.bandwidth_Bps
    return {"nccl1_ring_GBps": topology.bus_Bps / 1e9, "nccl1_ring_staged": staged}


def describe(job: JobConfig, setup: Setup, options: SimOptions) -> dict[str, Any]:
    """The resolved inputs of ``job`` on ``setup`` (the ``inputs`` of a result): the cluster,
    method and knobs as resolved, the calibration used, the synchronisation terms, and what
    re-runs it (:func:`record`)."""
    cluster, strategy, workload = setup.cluster, setup.strategy, setup.workload
    prof = workload.profile
    inputs: dict[str, Any] = {
        "model": workload.model.name,
        **catalog.describe_cluster(cluster),
        "comm": strategy.comm,
        "comm_model": type(setup.comm).__name__,
        "n_ps": setup.comm.n_channels() if strategy.is_parameter_server else None,
        "batch_per_gpu": strategy.batch_per_gpu,
        "precision": strategy.precision,
        "data": strategy.data,
        "input_pipeline": strategy.input_pipeline,
        "ps_placement": strategy.ps_placement,
        "grad_dtype": strategy.grad_dtype,
        "schedule": strategy.schedule,
        "effective_schedule": strategy.effective_schedule,
        "partition_mb": strategy.partition_bytes / MiB,
        "bucket_cap_mb": strategy.bucket_cap_bytes / MiB,
        "first_bucket_mb": strategy.first_bucket_bytes / MiB,
        "fusion_threshold_mb": strategy.fusion_threshold_bytes / MiB,
        "cycle_time_ms": strategy.cycle_time_s * 1e3,
        "hierarchical": strategy.hierarchical,
        "algorithm": strategy.algorithm,
        "nccl_version": strategy.nccl_version,
        "nccl_protocol": strategy.nccl_protocol,
        **_nccl1_ring(strategy, setup),
        "horovod_version": strategy.horovod_version,
        "response_cache": strategy.response_cache,
        "negotiation": strategy.negotiation,
        "engine": options.engine,
        "calibration": {
            "file": prof.path,
            "method": prof.provenance.get("method"),
            "device_rule": calibration_use.device_rule(prof),
            "step_time_s": prof.step_time_s,
            "provenance": prof.provenance,
            **_user_calibration(setup),
        },
        "grad_bytes": workload.model.grad_bytes(strategy.grad_dtype),
        "sharding": dataclasses.asdict(strategy.sharding) if strategy.sharding else None,
        "state_shards": strategy.sharding.shards if strategy.sharding else 1,
        "rank_sigma": options.rank_sigma,
        "host_contention": options.host_contention,
        "interference": options.interference,
    }
    inputs.update(record(job, setup))
    inputs["one_gpu_nodes"] = one_gpu_nodes(inputs["predict_kwargs"], inputs)
    inputs["network_calibration"] = netcal_file.inputs_of(job.system.network_calibration)
    in_play = tf32_applies(cluster.device, strategy.precision)
    inputs["tf32"] = bool(job.workload.tf32) if in_play else None
    inputs["stack"] = setup.stack.to_dict() if setup.stack is not None else None
    if strategy.host_decodes_input:
        per_node = strategy.batch_per_gpu * cluster.local_gpus
        inputs["host_input_images_per_s"] = per_node / setup.input_time_s
        inputs["preprocessing_kind"] = preprocessing_kind(
            job.execution.preprocessing, workload.model.name
        )
    return inputs


def one_gpu_nodes(given: Mapping[str, Any], resolved: Mapping[str, Any]) -> str | None:
    """What ``--intra-node none`` made of several GPUs with no ``--gpus-per-node`` (``given``:
    the job's keywords; ``resolved``: its inputs or a sweep row): the fabric connects no GPUs,
    so each GPU is a node of its own over the network (no host, PCIe switch or NIC shared with
    another GPU); None otherwise."""
    if given.get("intra_node") != "none" or given.get("gpus_per_node") is not None:
        return None
    gpus = resolved.get("n_gpus", resolved.get("gpus", 1))
    nodes = resolved.get("nodes", gpus)
    if resolved.get("intra_node") != "none" or not gpus or nodes <= 1:
        return None
    return (
        f"one GPU per node: the {gpus} GPUs became {nodes} nodes x 1 GPU over "
        f"{resolved.get('inter_node')}, no host or NIC shared between GPUs"
    )


def _user_calibration(setup: Setup) -> dict[str, Any]:
    """``{"user": ...}`` when the user calibration directory has a file for this configuration
    (used, shadowing a shipped one, or passed over: :class:`ddlsim.calibration.store.Choice`)."""
    choice = setup.calibration_choice
    user = choice.to_dict() if choice is not None else None
    return {} if user is None else {"user": user}


def record(job: JobConfig, setup: Setup) -> dict[str, Any]:
    """What re-runs a result of ``job`` on ``setup`` (:func:`ddlsim.config.record.record`); the
    keywords left to the calibration file or their defaults are recorded with the values used,
    so that a record does not depend on later defaults."""
    call = job.kwargs()
    used = {
        "model": setup.workload.model.name,
        "gpu": setup.cluster.device.id,
        "batch": setup.strategy.batch_per_gpu,
        "precision": setup.strategy.precision,
    }
    resolved = {**call, **{k: v for k, v in used.items() if call.get(k) is None}}
    return reproduce.record(resolved, setup.calibration_source)


def rerun(path: str | os.PathLike[str]) -> Prediction:
    """:func:`predict` of the record in the JSON result at ``path``
    (:func:`ddlsim.config.record.load`),
    checked to read the same calibration file. A hand-edited value predict cannot take (a list
    where a number belongs) is a :class:`ConfigError` naming the file, not a traceback."""
    kwargs, rec = reproduce.load(path)
    try:
        result = predict(**kwargs)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        # a KeyError's text is the key's repr alone: say what it is
        words = f"no value for {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
        reason = " ".join(words.split())[:200]
        raise ConfigError(
            f"--from-json: {path} records arguments predict cannot take ({reason})"
        ) from None
    reproduce.check_same_source(rec, result.inputs, path)
    return result


def _single_gpu(setup: Setup, input_s: float) -> SimResult:
    """The same workload and strategy on one GPU of the same type (the efficiency's base):
    the system wing's cluster of one GPU, the execution wing's model of the default method
    (one GPU exchanges nothing)."""
    one = resolve_system(SystemConfig(gpus=1), setup.cluster.device.id)
    alone = setup.strategy.with_(schedule="auto")
    dag = build_dag(setup.workload, alone, input_time_s=input_s, with_comm=False)
    comm_model = resolve_comm(Strategy(), one)
    return simulate(dag, one, comm_model, options=SimOptions(measured_iterations=2))


def _transformer_inputs(job: JobConfig, setup: Setup, samples_per_s: float) -> dict[str, Any]:
    """A transformer's own inputs and figures: sequence length, micro-steps, numerics, the
    optimizer, tokens/s, MFU / HFU and the memory per GPU (empty for a CNN)."""
    cfg, need = setup.transformer, setup.memory
    if cfg is None or need is None:
        return {}
    from ddlsim.compute.utilization import (  # the transformer's figures only
        hardware_flops_per_token,
        model_flops_per_token,
        utilization,
    )
    from ddlsim.workload.transformers.structure import mfu_params

    spec = setup.workload.model
    numerics = _model_provenance(setup).get("numerics", {})
    tokens_per_gpu_s = samples_per_s * cfg.seq / setup.cluster.n_gpus
    blocks = cfg.layers + cfg.decoder_layers
    n_mfu = mfu_params(cfg, spec.n_params)
    model_fpt = model_flops_per_token(n_mfu, blocks, cfg.hidden, cfg.seq)
    recompute = bool(numerics.get("activation_checkpointing"))
    hw_fpt = hardware_flops_per_token(n_mfu, blocks, cfg.hidden, cfg.seq, recompute=recompute)
    gemm = numerics.get("gemm_precision", "fp32")
    device = setup.cluster.device
    return {
        "transformer": {
            "seq_len": cfg.seq,
            "params": spec.n_params,
            "grad_accum": job.execution.grad_accum,
            "micro_batch": setup.strategy.batch_per_gpu,
            "micro_batch_fitted": job.workload.batch == "max",
            "optimizer": setup.optimizer,
            "numerics": numerics,
            "tokens_per_sec": samples_per_s * cfg.seq,
            "model_flops_per_token": model_fpt,
            "mfu": utilization(tokens_per_gpu_s, model_fpt, device, gemm),
            "hfu": utilization(tokens_per_gpu_s, hw_fpt, device, gemm),
            "memory": need.to_dict(),
            "compute_terms_s": _compute_terms(setup),
        }
    }


def _model_provenance(setup: Setup) -> dict[str, Any]:
    """The per-layer model's provenance of a transformer's profile, through an anchor (an
    anchored profile keeps the model's under ``base``)."""
    provenance = setup.workload.profile.provenance
    return provenance.get("base", provenance)


def _compute_terms(setup: Setup) -> dict[str, float]:
    """One GPU's compute of an optimizer step by term (the per-layer model's
    ``compute_terms_s``), as the simulation runs it: the stages at the profile's times (an
    anchor rescales them) and the optimizer step the DAG runs (a shard's, or the host's under
    offload)."""
    prof = setup.workload.profile
    terms = dict(_model_provenance(setup).get("compute_terms_s") or {})
    if not terms:
        return {}
    model_s = sum(v for k, v in terms.items() if k != "optimizer")
    stages_s = sum(la.fwd_time_s + la.bwd_time_s for la in prof.layers)
    factor = stages_s / model_s if model_s > 0 else 1.0
    out = {k: v * factor for k, v in terms.items() if k != "optimizer"}
    out["optimizer"] = float(setup.dag.nodes["update"]["duration_s"])
    return out


def _offload_parts(sim: SimResult, setup: Setup) -> dict[str, float]:
    """A CPU offload's named parts of the iteration (none without one): the host's optimizer
    step (``cpu_optimizer_s``, the update on the compute stream: part of ``compute_s``) and
    the PCIe copies in flight (``offload_copy_s``, on the communication stream: within
    ``comm_hidden_s`` + ``comm_exposed_s``), worker 0's last iteration."""
    sh = setup.strategy.sharding
    if sh is None or sh.offload == "none":
        return {}
    last = len(sim.iteration_times_s) - 1
    copies = [s for s in sim.comm_spans if s.worker == 0 and s.iteration == last]
    return {
        "cpu_optimizer_s": setup.dag.nodes["update"]["duration_s"],
        "offload_copy_s": sum(s.end_s - s.start_s for s in copies if s.kind in COPY_OPS),
    }


def _comm_ops(sim: SimResult, comm: CommModel) -> list[dict[str, Any]]:
    last = len(sim.iteration_times_s) - 1
    return [
        {
            "name": s.name,
            "op": s.kind,
            "nbytes": s.nbytes,
            "start_s": s.start_s,
            "duration_s": s.end_s - s.start_s,
            **comm.label(s.nbytes, s.kind),
        }
        for s in sim.comm_spans
        if s.worker == 0 and s.iteration == last
    ]
