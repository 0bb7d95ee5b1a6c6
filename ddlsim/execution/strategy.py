"""How the job trains: gradient-exchange method, Horovod and NCCL versions and knobs, batch.

Defaults follow Horovod 0.28.1 (the last release, ``horovod/common/operations.cc``):
``HOROVOD_FUSION_THRESHOLD`` = 128 MiB, ``HOROVOD_CYCLE_TIME`` = 1 ms, response cache enabled,
hierarchical allreduce off; NCCL :data:`~ddlsim.comm.nccl.DEFAULT_NCCL_VERSION` choosing the
algorithm and protocol per call. Older releases (0.9-0.20, 2017-2020, behind the published
Horovod tables) used 64 MiB and 5 ms and negotiated differently: ``horovod_version`` selects
them (:func:`ddlsim.execution.horovod.horovod_release`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ddlsim.calibration.use import DEFAULT_BATCH_PER_GPU
from ddlsim.comm import HOROVOD_METHODS, PS_METHODS
from ddlsim.comm import METHODS as COMM_METHODS
from ddlsim.comm.mpi import DEFAULT_MPI
from ddlsim.comm.nccl import (
    ALGORITHM_CHOICES,
    DEFAULT_NCCL_VERSION,
    PROTOCOL_CHOICES,
    NcclVersion,
)
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.execution.horovod import (
    DEFAULT_HOROVOD_VERSION,
    GATHER,
    Coordination,
    HorovodRelease,
    horovod_release,
)
from ddlsim.execution.schedules import (
    DDP_BUCKET_CAP_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    DEFAULT_PARTITION_BYTES,
    check_partition_bytes,
    check_schedule,
)
from ddlsim.execution.sharded import Sharding
from ddlsim.units import MiB

#: compute precisions: fp32 (TF32 on Ampere+ unless tf32 is off), amp (fp16 mixed
#: precision), bf16 (bf16 mixed precision: Ampere+), fp8 (fp8 GEMMs, Transformer Engine:
#: Hopper+); bf16 and fp8 are modelled for transformers
PRECISIONS = ("fp32", "amp", "bf16", "fp8")
DATA_KINDS = ("synthetic", "real")
#: who decodes real data: the host CPUs (tf.data / framework readers) or the GPUs (NVIDIA DALI)
INPUT_PIPELINES = ("host", "dali")
ALGORITHMS = ALGORITHM_CHOICES
NCCL_PROTOCOLS = PROTOCOL_CHOICES

HOROVOD_VERSION = DEFAULT_HOROVOD_VERSION
DEFAULT_FUSION_THRESHOLD_BYTES = 128 * MiB
DEFAULT_CYCLE_TIME_S = 1e-3


@dataclass(frozen=True)
class Strategy:
    """One data-parallel training strategy.

    ``fusion_threshold_bytes`` and ``cycle_time_s`` are Horovod's ``HOROVOD_FUSION_THRESHOLD``
    and ``HOROVOD_CYCLE_TIME``; ``fp16_allreduce`` is ``hvd.Compression.fp16`` (gradients cast
    to fp16 for the exchange, halving the bytes). ``n_ps`` is the number of parameter-server
    tasks (None: the method's default), ``ps_colocated`` whether they share the worker nodes,
    ``ps_placement`` where the variables live (``cpu`` or ``gpu``). ``input_pipeline`` says who
    decodes real data: the host CPUs (``host``) or the GPUs (``dali``, whose decode cost is part
    of the calibrated compute). ``wait_free_backprop`` overlaps each exchange with the rest of
    the backward pass; without it every exchange waits for the end of backprop (CPU workers).
    ``compiled_backward``: the backward runs as one compiled cluster whose gradients all leave
    it at its end (TensorFlow's XLA auto-clustering around collectives it cannot compile):
    every exchange waits for the end of backprop, and all gradients are ready at once.
    ``algorithm`` (``auto`` = what ``nccl_version`` picks per call, ``ring``, ``tree``) and
    ``nccl_protocol`` are ``NCCL_ALGO`` / ``NCCL_PROTO``; ``horovod_version`` selects the
    release's negotiation; ``response_cache`` is ``HOROVOD_CACHE_CAPACITY`` > 0 (0.16+).
    ``schedule`` groups the gradients into operations and says when each may start
    (:mod:`ddlsim.execution.schedules`); ``partition_bytes`` is the partition size of
    ``bytescheduler``,
    ``bucket_cap_bytes`` and ``first_bucket_bytes`` PyTorch DDP's bucket caps.
    """

    comm: str = "horovod-nccl"
    batch_per_gpu: int = DEFAULT_BATCH_PER_GPU
    precision: str = "fp32"
    data: str = "synthetic"
    input_pipeline: str = "host"
    fusion_threshold_bytes: int = DEFAULT_FUSION_THRESHOLD_BYTES
    cycle_time_s: float = DEFAULT_CYCLE_TIME_S
    hierarchical: bool = False
    algorithm: str = "auto"
    nccl_version: str = DEFAULT_NCCL_VERSION
    nccl_protocol: str = "auto"
    mpi: str = DEFAULT_MPI
    horovod_version: str = DEFAULT_HOROVOD_VERSION
    response_cache: bool = True
    fp16_allreduce: bool = False
    n_ps: int | None = None
    ps_colocated: bool = True
    ps_placement: str = "cpu"
    wait_free_backprop: bool = True
    compiled_backward: bool = False
    schedule: str = "auto"
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    bucket_cap_bytes: int = DDP_BUCKET_CAP_BYTES
    first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES
    #: a sharded method's settings (:mod:`ddlsim.execution.sharded`); None for the others
    sharding: Sharding | None = None
    #: micro-steps unrolled in the DAG (sharded methods gather and reduce in every one; the
    #: others fold the K - 1 before the last into one compute stage)
    micro_steps: int = 1

    def __post_init__(self) -> None:
        if self.comm not in COMM_METHODS:
            raise UnknownNameError("comm method", self.comm, COMM_METHODS)
        if self.precision not in PRECISIONS:
            raise UnknownNameError("precision", self.precision, PRECISIONS)
        if self.data not in DATA_KINDS:
            raise UnknownNameError("data", self.data, DATA_KINDS)
        if self.input_pipeline not in INPUT_PIPELINES:
            raise UnknownNameError("input pipeline", self.input_pipeline, INPUT_PIPELINES)
        if self.algorithm not in ALGORITHMS:
            raise UnknownNameError("allreduce algorithm", self.algorithm, ALGORITHMS)
        if self.nccl_protocol not in NCCL_PROTOCOLS:
            raise UnknownNameError("NCCL protocol", self.nccl_protocol, NCCL_PROTOCOLS)
        NcclVersion.parse(self.nccl_version)
        horovod_release(self.horovod_version)  # refuses an unknown release
        if self.ps_placement not in ("cpu", "gpu"):
            raise UnknownNameError("ps placement", self.ps_placement, ("cpu", "gpu"))
        if not 1 <= self.batch_per_gpu <= 65536:
            raise ConfigError(f"batch per GPU must be in 1..65536, got {self.batch_per_gpu}")
        if not 0 <= self.fusion_threshold_bytes <= 64 * 1024 * MiB:
            raise ConfigError(
                f"fusion threshold must be in 0..65536 MiB, got "
                f"{self.fusion_threshold_bytes / MiB:g} MiB"
            )
        if not 0 <= self.cycle_time_s <= 10.0:
            raise ConfigError(
                f"cycle time must be in 0..10000 ms, got {self.cycle_time_s * 1e3:g} ms"
            )
        if self.n_ps is not None and not 1 <= self.n_ps <= 100_000:
            raise ConfigError(f"number of parameter servers must be in 1..100000, got {self.n_ps}")
        check_schedule(
            self.schedule, horovod=self.is_horovod, parameter_server=self.is_parameter_server
        )
        check_partition_bytes(self.partition_bytes)
        if not 1 <= self.first_bucket_bytes <= self.bucket_cap_bytes <= 64 * 1024 * MiB:
            raise ConfigError(
                f"DDP buckets must be 1 byte .. 65536 MiB with the first no larger than the "
                f"others, got {self.first_bucket_bytes} and {self.bucket_cap_bytes} bytes"
            )

    @property
    def is_horovod(self) -> bool:
        """Whether Horovod's coordinator (cycle, negotiation, fusion) applies."""
        return self.comm in HOROVOD_METHODS

    @property
    def is_parameter_server(self) -> bool:
        """Whether gradients are pushed to and parameters pulled from servers."""
        return self.comm in PS_METHODS

    @property
    def host_decodes_input(self) -> bool:
        """Whether the host CPUs decode every batch (real data without DALI)."""
        return self.data == "real" and self.input_pipeline == "host"

    @property
    def release(self) -> HorovodRelease:
        """The Horovod release's coordination behaviour."""
        return horovod_release(self.horovod_version)

    @property
    def negotiation(self) -> str:
        """Horovod's negotiation scheme for this release and cache setting."""
        release = self.release
        if release.has_response_cache and not self.response_cache:
            return GATHER  # HOROVOD_CACHE_CAPACITY=0: every cycle gathers the requests
        return release.negotiation

    @property
    def effective_schedule(self) -> str:
        """The schedule that forms the operations (:mod:`ddlsim.execution.schedules`): ``auto`` is
        ``horovod`` for Horovod methods, ``ddp`` (gradient buckets) for PyTorch DDP, ``wfbp``
        (each gradient tensor alone when its layer's backward pass ends) for ``replicated-nccl``,
        else ``layer`` (each layer's gradients when its backward pass ends)."""
        if self.schedule != "auto":
            return self.schedule
        if self.comm == "ddp":
            return "ddp"
        if self.comm == "replicated-nccl":
            return "wfbp"  # tf_cnn_benchmarks (2017): one nccl.all_sum per variable
        return "horovod" if self.is_horovod else "layer"

    @property
    def runtime_fusion_bytes(self) -> int:
        """What Horovod's coordinator may fuse at run time: the threshold under Horovod's own
        schedule; 0 (each operation alone) under the others, whose operations are formed by the
        schedule (a ByteScheduler partition, an MG-WFBP group)."""
        return self.fusion_threshold_bytes if self.effective_schedule == "horovod" else 0

    def coordination(self) -> Coordination:
        """Horovod's coordinator as this strategy runs it (cycle, negotiation, sleep, run-time
        fusion threshold); off for the other methods."""
        return Coordination(
            horovod=self.is_horovod,
            cycle_time_s=self.cycle_time_s,
            negotiation=self.negotiation,
            sleep_after_work=self.release.sleep_after_work,
            fusion_threshold_bytes=self.runtime_fusion_bytes,
        )

    @property
    def grad_dtype(self) -> str:
        """Element type of the exchanged gradients (fp16 only with fp16 compression)."""
        return "fp16" if self.fp16_allreduce else "fp32"

    def with_(self, **changes: object) -> Strategy:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)
