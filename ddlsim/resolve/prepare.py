"""``prepare(job)``: a :class:`~ddlsim.config.groups.JobConfig` resolved into something to simulate.

The workload's model is looked up in the zoo and its compute calibration found (or read, and
re-timed for the GPU); the system's names become a :class:`~ddlsim.system.specs.Cluster`; the
execution becomes a :class:`~ddlsim.execution.strategy.Strategy` and a communication model; the DAG
of
one worker's iteration is built. The result, a :class:`Setup`, is what the engines run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ddlsim.calibration import network as netcal_file
from ddlsim.calibration import profile as profile_io
from ddlsim.calibration import restack
from ddlsim.calibration import use as calibration_use
from ddlsim.calibration.profile import ModelProfile
from ddlsim.calibration.store import Choice, find_profile_and_choice
from ddlsim.comm import NCCL_METHODS, make_comm_model
from ddlsim.comm.base import CommModel
from ddlsim.compute.stack import Stack
from ddlsim.compute.stack import resolve as resolve_stack
from ddlsim.config.groups import ExecutionConfig, JobConfig, SystemConfig, WorkloadConfig
from ddlsim.engine.simulate import SimOptions, SimResult, simulate
from ddlsim.errors import ConfigError
from ddlsim.execution.dag import DiGraph, build_dag
from ddlsim.execution.horovod import Coordination, horovod_release
from ddlsim.execution.strategy import Strategy
from ddlsim.system import catalog
from ddlsim.system.specs import Cluster, DeviceSpec
from ddlsim.units import MiB
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.workload import Workload
from ddlsim.workload.zoo import get_model

#: images/s one hardware thread of the host CPU decodes and augments (ImageNet JPEG, random crop,
#: resize, flip; Broadwell-class Xeon, tf.data or the framework's reader). Only used for real
#: data decoded on the host (no DALI). An estimate, see docs/design.md ("Input pipeline"): it is
#: the rate implied by the input-bound measured rows (DGX-1, 80 threads: 7,105-7,887 img/s).
HOST_DECODE_IMAGES_PER_S_PER_THREAD = 100.0


@dataclass(frozen=True)
class Setup:
    """Everything resolved for one configuration, ready to simulate."""

    workload: Workload
    cluster: Cluster
    strategy: Strategy
    comm: CommModel
    dag: DiGraph
    input_time_s: float
    #: the calibration file the compute times were read from (given, found, or derived from)
    calibration_source: str | None = None
    #: how the search chose that file over the user's or the shipped one (None: given with
    #: ``--calibration``; :mod:`ddlsim.calibration.store`)
    calibration_choice: Choice | None = None
    #: the software stack the compute is timed for (:mod:`ddlsim.compute.stack`)
    stack: Stack | None = None

    def simulate(self, options: SimOptions | None = None) -> SimResult:
        """Run the engine on this configuration."""
        return simulate(
            self.dag, self.cluster, self.comm, options=options, coordination=self.coordination()
        )

    def coordination(self) -> Coordination:
        """Horovod's coordinator for this strategy (:class:`Coordination`)."""
        return self.strategy.coordination()


def prepare(job: JobConfig) -> Setup:
    """Resolve names, find the calibration, build the cluster, DAG and communication model of
    ``job``'s workload, system and execution (its simulation settings are the engine's:
    :meth:`Setup.simulate`)."""
    return _prepare(job.workload, job.system, job.execution)


def _prepare(w: WorkloadConfig, s: SystemConfig, x: ExecutionConfig) -> Setup:
    file_prof = profile_io.load(w.calibration) if w.calibration is not None else None
    model, gpu, batch, precision = calibration_use.resolve_defaults(
        file_prof, w.calibration, model=w.model, gpu=s.gpu, batch=w.batch, precision=w.precision
    )
    spec = get_model(model)
    cluster = catalog.build_cluster(
        gpu, s.gpus, s.gpus_per_node, s.intra_node, s.inter_node, s.transport, s.nics_per_node,
        nccl=x.comm in NCCL_METHODS,
    )  # fmt: skip
    if s.network_calibration is not None:
        cluster = netcal_file.apply(netcal_file.load(s.network_calibration), cluster)
    strategy = _strategy(x, cluster, batch=batch, precision=precision, data=w.data)
    if strategy.precision == "amp" and cluster.device.peak_fp16_flops is None:
        raise ConfigError(
            f"GPU {cluster.device.id!r} has no fast fp16 path; mixed precision (amp) is not "
            "modelled for it: use --precision fp32"
        )
    choice = None
    if file_prof is not None:
        prof = calibration_use.for_cluster(file_prof, w.calibration, cluster)
        source = str(w.calibration)
    else:
        prof, choice = find_profile_and_choice(
            spec, cluster.device, strategy.batch_per_gpu, strategy.precision
        )
        source = prof.path or prof.provenance.get("from_file")
    stack = job_stack(x, cluster.device, strategy.precision, w.tf32)
    tf32_off = not w.tf32 and tf32_applies(cluster.device, strategy.precision)
    prof = restack.for_job(prof, spec, cluster.device, stack, tf32_off)
    if strategy.data == "real" and strategy.input_pipeline == "dali":
        dali_s = restack.dali_gpu_s(cluster.device, batch, strategy.precision)
        prof = restack.with_dali(prof, dali_s)
    workload = _workload(spec, strategy, prof, w.single_gpu_throughput)
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
    node_rate = host_input_rate(cluster, s.host_input_images_per_s)
    input_s = batch * cluster.local_gpus / node_rate if strategy.host_decodes_input else 0.0
    dag = build_dag(
        workload,
        strategy,
        input_time_s=input_s,
        n_ps=comm_model.n_channels(),
        op_time_s=lambda nbytes: comm_model.time_s(nbytes, "allreduce", 0),
    )
    return Setup(workload, cluster, strategy, comm_model, dag, input_s, source, choice, stack)


def _strategy(
    x: ExecutionConfig, cluster: Cluster, *, batch: int, precision: str, data: str
) -> Strategy:
    """The execution's :class:`Strategy` for the resolved batch and precision; the Horovod
    release gives the fusion threshold and cycle time unless ``x`` sets them."""
    release = horovod_release(x.horovod_version)
    fusion_bytes = release.fusion_threshold_bytes
    if x.fusion_threshold_mb is not None:
        fusion_bytes = round(x.fusion_threshold_mb * MiB)
    cycle_s = release.cycle_time_s if x.cycle_time_ms is None else x.cycle_time_ms / 1e3
    return Strategy(
        comm=x.comm,
        batch_per_gpu=batch,
        precision=precision,
        data=data,
        input_pipeline=x.input_pipeline,
        ps_placement=x.ps_placement,
        hierarchical=x.hierarchical,
        algorithm=x.algorithm,
        nccl_version=x.nccl_version,
        nccl_protocol=x.nccl_protocol,
        horovod_version=x.horovod_version,
        response_cache=x.response_cache,
        fp16_allreduce=x.fp16_allreduce,
        n_ps=x.n_ps,
        ps_colocated=x.ps_colocated,
        # a CPU worker's own cores move and sum the gradients (Gloo / MPI on the host), so its
        # communication cannot hide behind backprop: it follows the backward pass
        wait_free_backprop=cluster.device.kind != "cpu",
        fusion_threshold_bytes=fusion_bytes,
        cycle_time_s=cycle_s,
        schedule=x.schedule,
        partition_bytes=round(x.partition_mb * MiB),
        **_ddp_caps(x.bucket_cap_mb),
    )


def _ddp_caps(bucket_cap_mb: float | None) -> dict[str, int]:
    """DDP's (first, other) bucket caps: PyTorch's defaults, or the given cap for both."""
    if bucket_cap_mb is None:
        return {}
    cap = max(1, round(bucket_cap_mb * MiB))
    return {"bucket_cap_bytes": cap, "first_bucket_bytes": cap}


def tf32_applies(device: DeviceSpec, precision: str) -> bool:
    """Whether TF32 is in play: fp32 on a GPU with TF32 tensor cores (Ampere and later)."""
    return precision == "fp32" and device.peak_tf32_flops is not None


def job_stack(x: ExecutionConfig, device: DeviceSpec, precision: str, tf32: bool) -> Stack:
    """The software stack of the execution on ``device`` at ``precision``: the framework's
    defaults for the layout and fusion it leaves None; a combination the library cannot run
    is a :class:`ConfigError` (:func:`ddlsim.compute.stack.resolve`)."""
    return resolve_stack(x.framework, x.layout, x.fusion, device, precision, tf32)


def _workload(
    spec: ModelSpec, strategy: Strategy, prof: ModelProfile, single_ips: float | None
) -> Workload:
    if single_ips is not None:
        prof = prof.scaled((strategy.batch_per_gpu / single_ips) / prof.step_time_s)
        prof = _with_provenance(prof, single_ips)
        profile_io.check(prof, f"the calibration rescaled to {single_ips:g} images/s on 1 GPU")
    return Workload.build(spec, prof)


def _with_provenance(prof: ModelProfile, single_ips: float) -> ModelProfile:
    provenance: dict[str, Any] = {
        "method": "anchored-by-user",
        "single_gpu_images_per_sec": single_ips,
        "base": prof.provenance,
    }
    return replace(prof, provenance=provenance)


def host_input_rate(cluster: Cluster, override: float | None) -> float:
    """Images/s one node's host CPUs decode (real data without DALI): ``override``, else the
    node's hardware threads x :data:`HOST_DECODE_IMAGES_PER_S_PER_THREAD`."""
    if override is not None:
        return float(override)
    threads = cluster.device.host_cpu_threads
    if threads < 1:
        raise ConfigError(
            f"device {cluster.device.id!r} states no host CPU threads; pass the host input rate"
        )
    return threads * HOST_DECODE_IMAGES_PER_S_PER_THREAD
