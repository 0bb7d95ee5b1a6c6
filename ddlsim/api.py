"""``predict``: the one function that joins workload, cluster and strategy.

Everything else in ddlsim sees one input. ``predict`` resolves names against the catalogs,
finds the compute calibration, builds the DAG and the communication model, simulates the
configuration and the same job on one GPU, and returns a :class:`Prediction`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from ddlsim import reproduce
from ddlsim.analysis.ttt import (
    DEFAULT_EPOCHS,
    IMAGENET_1K_TRAIN_IMAGES,
    time_to_train_s,
    validate_ttt_inputs,
)
from ddlsim.cluster import catalog
from ddlsim.cluster.specs import Cluster, DeviceSpec
from ddlsim.comm import NCCL_METHODS, make_comm_model
from ddlsim.comm.base import CommModel
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION
from ddlsim.dag import build_dag
from ddlsim.engine.budget import DEFAULT_MAX_EVENTS, check_max_events
from ddlsim.engine.simulate import SimOptions, SimResult, simulate
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION, DEFAULT_RANK_SIGMA, SyncTerms
from ddlsim.errors import ConfigError
from ddlsim.horovod import DEFAULT_HOROVOD_VERSION, horovod_release
from ddlsim.netcal import calfile as netcal_file
from ddlsim.strategy import Strategy
from ddlsim.units import MiB
from ddlsim.workload import calibration_use
from ddlsim.workload import profile as profile_io
from ddlsim.workload.kernels import without_tf32
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.profile import ModelProfile
from ddlsim.workload.retime import roofline_retime
from ddlsim.workload.store import find_profile
from ddlsim.workload.workload import Workload
from ddlsim.workload.zoo import get_model

#: images/s one hardware thread of the host CPU decodes and augments (ImageNet JPEG, random crop,
#: resize, flip; Broadwell-class Xeon, tf.data or the framework's reader). Only used for real
#: data decoded on the host (no DALI). An estimate, see docs/design.md ("Input pipeline"): it is
#: the rate implied by the input-bound measured rows (DGX-1, 80 threads: 7,105-7,887 img/s).
HOST_DECODE_IMAGES_PER_S_PER_THREAD = 100.0

#: largest accepted log-normal sigma of the detailed engine's compute jitter (beyond it one
#: iteration's compute varies by orders of magnitude and the results become meaningless)
MAX_JITTER_SIGMA = 1.0
#: largest accepted straggler slowdown (compute-time multiplier of one rank)
MAX_SLOWDOWN = 100.0


@dataclass(frozen=True)
class Prediction:
    """Predicted steady-state throughput of one configuration and where its time goes."""

    images_per_sec: float
    iteration_time_s: float
    scaling_efficiency: float
    single_gpu_images_per_sec: float
    time_to_train_s: float
    breakdown: dict[str, float]
    inputs: dict[str, Any]
    comm_ops: list[dict[str, Any]]
    sim: SimResult = field(repr=False, compare=False)

    @property
    def track_record(self) -> dict[str, Any] | None:
        """ddlsim's measured error for this method at this node count
        (:func:`ddlsim.validate.track_record.lookup`); None for one GPU (nothing scales)."""
        if self.inputs["n_gpus"] == 1:
            return None
        from ddlsim.validate.track_record import lookup

        return lookup(self.inputs["comm"], self.inputs["nodes"])

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
        }


@dataclass(frozen=True)
class Setup:
    """Everything resolved for one configuration, ready to simulate."""

    workload: Workload
    cluster: Cluster
    strategy: Strategy
    comm: CommModel
    dag: nx.DiGraph
    input_time_s: float
    #: the calibration file the compute times were read from (given, found, or derived from)
    calibration_source: str | None = None

    def simulate(self, options: SimOptions | None = None) -> SimResult:
        """Run the engine on this configuration."""
        strategy = self.strategy
        return simulate(
            self.dag,
            self.cluster,
            self.comm,
            horovod=strategy.is_horovod,
            cycle_time_s=strategy.cycle_time_s,
            negotiation=strategy.negotiation,
            sleep_after_work=strategy.release.sleep_after_work,
            fusion_threshold_bytes=strategy.fusion_threshold_bytes,
            options=options,
        )


def prepare(
    model: str | None = None,
    gpus: int = 1,
    *,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    intra_node: str | None = None,
    inter_node: str | None = None,
    transport: str | None = None,
    nics_per_node: int = 1,
    comm: str = "horovod-nccl",
    n_ps: int | None = None,
    ps_colocated: bool = True,
    batch: int | None = None,
    precision: str | None = None,
    data: str = "synthetic",
    input_pipeline: str = "host",
    host_input_images_per_s: float | None = None,
    ps_placement: str = "cpu",
    fusion_threshold_mb: float | None = None,
    cycle_time_ms: float | None = None,
    hierarchical: bool = False,
    algorithm: str = "auto",
    nccl_version: str = DEFAULT_NCCL_VERSION,
    nccl_protocol: str = "auto",
    horovod_version: str = DEFAULT_HOROVOD_VERSION,
    response_cache: bool = True,
    fp16_allreduce: bool = False,
    tf32: bool = True,
    calibration: str | None = None,
    single_gpu_throughput: float | None = None,
    network_calibration: str | None = None,
) -> Setup:
    """Resolve names, find the calibration, build the cluster, DAG and communication model.

    ``model``, ``gpu``, ``batch`` and ``precision`` left at None take the ``calibration``
    file's own values, else resnet50, p100, 64, fp32; a given value that contradicts the file's
    model, batch or precision is an error, another catalog ``gpu`` re-times the file for that
    GPU (:mod:`ddlsim.workload.calibration_use`). ``nics_per_node`` NICs per node (multi-rail:
    DGX-1 4, DGX-2 and DGX A100/H100 8) add up their bandwidth. ``host_input_images_per_s`` is
    what one node's host CPUs decode per second with real data (default: the reference server's
    hardware threads x :data:`HOST_DECODE_IMAGES_PER_S_PER_THREAD`). ``horovod_version`` sets the
    negotiation scheme and the defaults of ``fusion_threshold_mb`` and ``cycle_time_ms``;
    ``nccl_version`` which (algorithm, protocol) NCCL picks per call (``algorithm`` /
    ``nccl_protocol`` ``auto``); with an NCCL method and no ``transport``, the transport NCCL
    picks on the network (RDMA where the NICs offer it). ``tf32`` False re-times an fp32
    calibration on a GPU with TF32 tensor cores (A100, H100) for true fp32 arithmetic
    (``NVIDIA_TF32_OVERRIDE=0``) by per-layer kernel-model ratios; elsewhere it changes nothing.
    ``network_calibration`` is a file of ``ddlsim calibrate network``: its fitted link terms
    replace the catalog's (:func:`ddlsim.netcal.calfile.apply`).
    """
    file_prof = profile_io.load(calibration) if calibration is not None else None
    model, gpu, batch, precision = calibration_use.resolve_defaults(
        file_prof, calibration, model=model, gpu=gpu, batch=batch, precision=precision
    )
    spec = get_model(model)
    cluster = catalog.build_cluster(
        gpu, gpus, gpus_per_node, intra_node, inter_node, transport, nics_per_node,
        nccl=comm in NCCL_METHODS,
    )  # fmt: skip
    if network_calibration is not None:
        cluster = netcal_file.apply(netcal_file.load(network_calibration), cluster)
    release = horovod_release(horovod_version)
    strategy_kwargs: dict[str, Any] = {
        "fusion_threshold_bytes": release.fusion_threshold_bytes,
        "cycle_time_s": release.cycle_time_s,
    }
    if fusion_threshold_mb is not None:
        if not 0 <= fusion_threshold_mb <= 65536:
            raise ConfigError(
                f"fusion threshold must be in 0..65536 MiB, got {fusion_threshold_mb:g} MiB"
            )
        strategy_kwargs["fusion_threshold_bytes"] = round(fusion_threshold_mb * MiB)
    if cycle_time_ms is not None:
        strategy_kwargs["cycle_time_s"] = cycle_time_ms / 1e3
    strategy = Strategy(
        comm=comm,
        batch_per_gpu=batch,
        precision=precision,
        data=data,
        input_pipeline=input_pipeline,
        ps_placement=ps_placement,
        hierarchical=hierarchical,
        algorithm=algorithm,
        nccl_version=nccl_version,
        nccl_protocol=nccl_protocol,
        horovod_version=horovod_version,
        response_cache=response_cache,
        fp16_allreduce=fp16_allreduce,
        n_ps=n_ps,
        ps_colocated=ps_colocated,
        # a CPU worker's own cores move and sum the gradients (Gloo / MPI on the host), so its
        # communication cannot hide behind backprop: it follows the backward pass
        wait_free_backprop=cluster.device.kind != "cpu",
        **strategy_kwargs,
    )
    if strategy.precision == "amp" and cluster.device.peak_fp16_flops is None:
        raise ConfigError(
            f"GPU {cluster.device.id!r} has no fast fp16 path; mixed precision (amp) is not "
            "modelled for it: use --precision fp32"
        )
    if file_prof is not None:
        prof = calibration_use.for_cluster(file_prof, calibration, cluster)
        source = str(calibration)
    else:
        prof = find_profile(spec, cluster.device, strategy.batch_per_gpu, strategy.precision)
        source = prof.path or prof.provenance.get("from_file")
    if not tf32 and tf32_applies(cluster.device, strategy.precision):
        prof = _without_tf32(prof, spec, cluster.device)
    workload = _workload(spec, strategy, prof, single_gpu_throughput)
    comm_model = make_comm_model(
        strategy.comm,
        cluster,
        hierarchical=strategy.hierarchical,
        algorithm=strategy.algorithm,
        nccl_version=strategy.nccl_version,
        nccl_protocol=strategy.nccl_protocol,
        n_ps=strategy.n_ps,
        ps_colocated=strategy.ps_colocated,
        ps_placement=strategy.ps_placement,
        tensor_bytes=workload.tensor_bytes(strategy.grad_dtype),
    )
    node_rate = _host_input_rate(cluster, host_input_images_per_s)
    input_s = batch * cluster.local_gpus / node_rate if strategy.host_decodes_input else 0.0
    dag = build_dag(workload, strategy, input_time_s=input_s, n_ps=comm_model.n_channels())
    return Setup(workload, cluster, strategy, comm_model, dag, input_s, source)


def tf32_applies(device: DeviceSpec, precision: str) -> bool:
    """Whether TF32 is in play: fp32 on a GPU with TF32 tensor cores (Ampere and later)."""
    return precision == "fp32" and device.peak_tf32_flops is not None


def _without_tf32(prof: ModelProfile, spec: ModelSpec, device: DeviceSpec) -> ModelProfile:
    """``prof`` (fp32 with TF32 convolutions) re-timed for CUDA-core fp32 on the same GPU."""
    retimed = roofline_retime(prof, spec, device, without_tf32(device), prof.batch_per_gpu)
    provenance = {
        "method": prof.provenance.get("method", "unknown"),
        "retimed": "TF32 off (NVIDIA_TF32_OVERRIDE=0): per-layer kernel-model ratios of "
        "CUDA-core fp32 to TF32 on the same GPU",
        "base": prof.provenance,
    }
    return replace(retimed, provenance=provenance, path=prof.path)


def predict(
    model: str | None = None,
    gpus: int = 1,
    *,
    engine: str = "fast",
    stragglers: dict[int, float] | None = None,
    jitter_sigma: float = 0.0,
    rank_sigma: float = DEFAULT_RANK_SIGMA,
    host_contention: float = DEFAULT_HOST_CONTENTION,
    interference: bool = True,
    seed: int = 0,
    max_events: float = DEFAULT_MAX_EVENTS,
    epochs: float = DEFAULT_EPOCHS,
    dataset_images: int = IMAGENET_1K_TRAIN_IMAGES,
    **config: Any,
) -> Prediction:
    """Predict one data-parallel training configuration.

    ``config`` takes the keyword arguments of :func:`prepare` (``gpu``, ``batch``, ``comm``,
    ...); ``engine`` is ``fast`` or ``detailed``; ``stragglers`` maps GPU ranks to compute
    slowdowns and ``jitter_sigma`` adds seeded log-normal compute noise (detailed engine);
    ``rank_sigma`` (each rank's per-iteration speed variability, charged as waiting for the
    slowest rank; 0: identical ranks), ``host_contention`` (compute slowdown of GPUs sharing a
    node) and ``interference`` (communication kernels holding SMs) are the synchronisation
    terms of :mod:`ddlsim.engine.sync`;
    ``max_events`` bounds the detailed engine's work (:mod:`ddlsim.engine.budget`);
    ``epochs`` passes over ``dataset_images`` images give ``time_to_train_s``.
    ``inputs["predict_kwargs"]`` records every keyword this call ran with
    (:mod:`ddlsim.reproduce`).
    """
    call = {**{k: v for k, v in locals().items() if k != "config"}, **config}  # first line
    options = sim_options(
        engine=engine,
        stragglers=stragglers,
        jitter_sigma=jitter_sigma,
        rank_sigma=rank_sigma,
        host_contention=host_contention,
        interference=interference,
        seed=seed,
        max_events=max_events,
    )
    validate_ttt_inputs(epochs, dataset_images)
    setup = prepare(model, gpus, **config)
    sim = setup.simulate(options)
    workload, strategy = setup.workload, setup.strategy
    batch = strategy.batch_per_gpu
    if setup.cluster.n_gpus == 1 and not stragglers and not jitter_sigma:
        single = sim  # the run is its own 1-GPU baseline: efficiency exactly 1
    else:
        per_gpu_input_s = setup.input_time_s / setup.cluster.local_gpus
        single = _single_gpu(workload, strategy, setup.cluster, per_gpu_input_s)
    ips = gpus * batch / sim.iteration_time_s
    single_ips = batch / single.iteration_time_s
    inputs = _inputs(workload.model.name, setup.cluster, strategy, workload, engine, setup.comm)
    inputs.update(
        rank_sigma=options.rank_sigma,
        host_contention=options.host_contention,
        interference=options.interference,
    )
    inputs.update(record(call, setup))
    inputs["network_calibration"] = netcal_file.inputs_of(config.get("network_calibration"))
    in_play = tf32_applies(setup.cluster.device, strategy.precision)
    inputs["tf32"] = bool(config.get("tf32", True)) if in_play else None
    if strategy.host_decodes_input:
        inputs["host_input_images_per_s"] = batch * setup.cluster.local_gpus / setup.input_time_s
    return Prediction(
        images_per_sec=ips,
        iteration_time_s=sim.iteration_time_s,
        scaling_efficiency=ips / (gpus * single_ips),
        single_gpu_images_per_sec=single_ips,
        time_to_train_s=time_to_train_s(ips, epochs, dataset_images),
        breakdown={**sim.breakdown.to_dict(), **sim.sync_s},
        inputs={**inputs, "epochs": epochs, "dataset_images": dataset_images},
        comm_ops=_comm_ops(sim, setup.comm),
        sim=sim,
    )


def record(call: dict[str, Any], setup: Setup) -> dict[str, Any]:
    """What re-runs a result of ``call`` (keywords of :func:`predict`) on ``setup``
    (:func:`ddlsim.reproduce.record`); the keywords left to the calibration file or
    their defaults are recorded with the values used, so that a record does not depend on later
    defaults."""
    used = {
        "model": setup.workload.model.name,
        "gpu": setup.cluster.device.id,
        "batch": setup.strategy.batch_per_gpu,
        "precision": setup.strategy.precision,
    }
    resolved = {**call, **{k: v for k, v in used.items() if call.get(k) is None}}
    return reproduce.record(resolved, setup.calibration_source)


def sim_options(
    *,
    engine: str = "fast",
    stragglers: dict[int, float] | None = None,
    jitter_sigma: float = 0.0,
    rank_sigma: float = DEFAULT_RANK_SIGMA,
    host_contention: float = DEFAULT_HOST_CONTENTION,
    interference: bool = True,
    seed: int = 0,
    max_events: float = DEFAULT_MAX_EVENTS,
) -> SimOptions:
    """The engine options of :func:`predict`'s keywords, checked (bad values: ConfigError)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if not 0 <= jitter_sigma <= MAX_JITTER_SIGMA:
        raise ConfigError(f"jitter sigma must be in 0..{MAX_JITTER_SIGMA:g}, got {jitter_sigma:g}")
    _check_stragglers(stragglers or {})
    sync = SyncTerms(rank_sigma, host_contention, bool(interference))  # checks the values
    return SimOptions(
        engine=engine,
        slowdown=dict(stragglers or {}),
        jitter_sigma=jitter_sigma,
        rank_sigma=sync.rank_sigma,
        host_contention=sync.host_contention,
        interference=sync.interference,
        seed=seed,
        max_events=check_max_events(max_events),
    )


def _check_stragglers(stragglers: dict[int, float]) -> None:
    """Ranks are non-negative integers; slowdowns finite and in (0, MAX_SLOWDOWN]."""
    for rank, factor in stragglers.items():
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
            raise ConfigError(f"straggler rank must be a non-negative integer, got {rank!r}")
        ok = isinstance(factor, numbers.Real) and not isinstance(factor, bool)
        if not ok or not math.isfinite(factor) or not 0 < factor <= MAX_SLOWDOWN:
            shown = f"{factor:g}" if ok else repr(factor)
            raise ConfigError(
                f"bad straggler {rank}:{shown}: a slowdown (compute-time multiplier) must be a "
                f"finite number in (0, {MAX_SLOWDOWN:g}]"
            )


def _workload(spec, strategy: Strategy, prof, single_ips) -> Workload:
    if single_ips is not None:
        if not 0 < single_ips < 1e7:
            raise ConfigError(f"single-GPU throughput must be in (0, 1e7) img/s, got {single_ips}")
        prof = prof.scaled((strategy.batch_per_gpu / single_ips) / prof.step_time_s)
        prof = _with_provenance(prof, single_ips)
    return Workload.build(spec, prof)


def _with_provenance(prof, single_ips: float):
    provenance = {
        "method": "anchored-by-user",
        "single_gpu_images_per_sec": single_ips,
        "base": prof.provenance,
    }
    return replace(prof, provenance=provenance)


def _host_input_rate(cluster: Cluster, override: float | None) -> float:
    """Images/s one node's host CPUs decode (real data without DALI)."""
    if override is not None:
        if isinstance(override, bool) or not isinstance(override, numbers.Real):
            raise ConfigError(f"host input rate must be a number, got {override!r}")
        if not 0 < override < 1e9:
            raise ConfigError(f"host input rate must be in (0, 1e9) images/s, got {override:g}")
        return float(override)
    threads = cluster.device.host_cpu_threads
    if threads < 1:
        raise ConfigError(
            f"device {cluster.device.id!r} states no host CPU threads; pass the host input rate"
        )
    return threads * HOST_DECODE_IMAGES_PER_S_PER_THREAD


def _single_gpu(
    workload: Workload, strategy: Strategy, cluster: Cluster, input_s: float
) -> SimResult:
    one = catalog.build_cluster(cluster.device.id, 1)
    dag = build_dag(workload, strategy, input_time_s=input_s)
    comm_model = make_comm_model("horovod-nccl", one)
    return simulate(dag, one, comm_model, options=SimOptions(measured_iterations=2))


def _inputs(model, cluster: Cluster, strategy: Strategy, workload, engine, comm_model):
    prof = workload.profile
    return {
        "model": model,
        **catalog.describe_cluster(cluster),
        "comm": strategy.comm,
        "comm_model": type(comm_model).__name__,
        "n_ps": comm_model.n_channels() if strategy.is_parameter_server else None,
        "batch_per_gpu": strategy.batch_per_gpu,
        "precision": strategy.precision,
        "data": strategy.data,
        "input_pipeline": strategy.input_pipeline,
        "ps_placement": strategy.ps_placement,
        "grad_dtype": strategy.grad_dtype,
        "fusion_threshold_mb": strategy.fusion_threshold_bytes / MiB,
        "cycle_time_ms": strategy.cycle_time_s * 1e3,
        "hierarchical": strategy.hierarchical,
        "algorithm": strategy.algorithm,
        "nccl_version": strategy.nccl_version,
        "nccl_protocol": strategy.nccl_protocol,
        "horovod_version": strategy.horovod_version,
        "response_cache": strategy.response_cache,
        "negotiation": strategy.negotiation,
        "engine": engine,
        "calibration": {
            "file": prof.path,
            "method": prof.provenance.get("method"),
            "device_rule": calibration_use.device_rule(prof),
            "step_time_s": prof.step_time_s,
            "provenance": prof.provenance,
        },
        "grad_bytes": workload.model.grad_bytes(strategy.grad_dtype),
    }


def _comm_ops(sim: SimResult, comm: CommModel) -> list[dict[str, Any]]:
    last = max((s.iteration for s in sim.spans), default=0)
    return [
        {
            "name": s.name,
            "op": s.kind,
            "nbytes": s.nbytes,
            "start_s": s.start_s,
            "duration_s": s.end_s - s.start_s,
            **comm.label(s.nbytes, s.kind),
        }
        for s in sim.spans
        if s.worker == 0 and s.iteration == last and s.stream.startswith("comm")
    ]
