"""The execution knobs: how it trains (rows of :mod:`ddlsim.config.knobs`)."""

from __future__ import annotations

from ddlsim.comm import METHODS as COMM_METHODS
from ddlsim.comm import PS_METHODS
from ddlsim.comm.mpi import DEFAULT_MPI, MpiRelease
from ddlsim.comm.nccl import (
    ALGORITHM_CHOICES,
    DEFAULT_NCCL_VERSION,
    PROTOCOL_CHOICES,
    NcclVersion,
)
from ddlsim.compute.kernels import LAYOUTS
from ddlsim.compute.stack import DEFAULT_FRAMEWORK, FRAMEWORKS, FUSIONS
from ddlsim.config.checks import Range, Vocabulary, optional
from ddlsim.config.knob import (
    ELASTIC,
    MAX_CYCLE_TIME_MS,
    MAX_FUSION_THRESHOLD_MB,
    MAX_PS,
    MIN_CYCLE_TIME_MS,
    RESTART,
    WITH_FAILURES,
    Applies,
    Knob,
    check_horovod_version,
    check_nccl_version,
    comm_in,
    ddp_buckets,
    horovod_only,
    nccl_call,
    nccl_release,
)
from ddlsim.execution.horovod import DEFAULT_HOROVOD_VERSION, horovod_release
from ddlsim.execution.input_pipeline import PREPROCESSING_CHOICES
from ddlsim.execution.schedules import DEFAULT_PARTITION_BYTES, SCHEDULES
from ddlsim.execution.strategy import INPUT_PIPELINES
from ddlsim.resilience import config as rc
from ddlsim.units import MiB

_MINUTE = rc.MINUTE_S
#: real data decoded by the host (not synthetic, not DALI)
_HOST_DECODES = Applies(
    lambda c: c.get("data") == "real" and c.get("input_pipeline") == "host",
    "it applies to --data real decoded by the host",
    ("data", "input_pipeline"),
)
#: the execution group's knobs, in field order
ROWS: tuple[Knob, ...] = (
    Knob(
        "comm",
        "execution",
        "horovod-nccl",
        "str",
        "--comm",
        "gradient exchange (default: horovod-nccl)",
        check=Vocabulary("comm method", lambda: COMM_METHODS),
        choices=lambda: COMM_METHODS,
    ),
    Knob(
        "schedule",
        "execution",
        "auto",
        "str",
        "--schedule",
        "when each gradient may start communicating: horovod (tensor fusion + cycle), bsp "
        "(all after backprop), wfbp (each tensor when ready), mg-wfbp (merged where merging "
        "shortens the iteration), bytescheduler (priority partitions), ddp (PyTorch DDP's "
        "buckets); auto = horovod for Horovod methods, ddp for --comm ddp, per layer for the "
        "others (default: auto)",
        check=Vocabulary("schedule", lambda: SCHEDULES),
        choices=lambda: SCHEDULES,
    ),
    Knob(
        "partition_mb",
        "execution",
        DEFAULT_PARTITION_BYTES / MiB,
        "float",
        "--partition-mb",
        "--schedule bytescheduler: partition size (default: BytePS's 4,096,000 bytes)",
        check=Range("partition size", 1e-3, 1024, text="in 0.001..1024 MiB"),
        unit="MiB",
        parse="number",
        metavar="MIB",
        applies=Applies(
            lambda c: c.get("schedule") == "bytescheduler",
            "it applies to --schedule bytescheduler",
            ("schedule",),
        ),
    ),
    Knob(
        "bucket_cap_mb",
        "execution",
        None,
        "float | None",
        "--bucket-cap-mb",
        "--comm ddp: DistributedDataParallel's bucket_cap_mb (default: PyTorch's 25, after a "
        "first bucket of 1 MiB; a given cap applies to the first bucket too)",
        check=optional(
            Range(
                "DDP bucket cap",
                1 / MiB,
                MAX_FUSION_THRESHOLD_MB,
                text=f"a number in 1 byte .. {MAX_FUSION_THRESHOLD_MB} MiB",
            )
        ),
        unit="MiB",
        parse="number",
        metavar="MIB",
        sweep=False,
        applies=Applies(
            ddp_buckets,
            "it applies to --comm ddp (PyTorch DDP's buckets)",
            ("comm", "schedule"),
        ),
    ),
    Knob(
        "n_ps",
        "execution",
        None,
        "int | None",
        "--n-ps",
        "parameter-server tasks (PS methods)",
        check=optional(Range("number of parameter servers", 1, MAX_PS, integer=True)),
        parse="int",
        applies=Applies(comm_in(*PS_METHODS), f"it applies to {', '.join(PS_METHODS)}", ("comm",)),
    ),
    Knob(
        "ps_colocated",
        "execution",
        True,
        "bool",
        "--ps-dedicated",
        "parameter servers on their own nodes (default: co-located with workers)",
        negate=True,
        dest="ps_dedicated",
        applies=Applies(comm_in("ps", "byteps"), "it applies to ps and byteps", ("comm",)),
    ),
    Knob(
        "ps_placement",
        "execution",
        "cpu",
        "str",
        "--ps-placement",
        "ps / replicated-cpu: the device holding the variables (default: cpu)",
        check=Vocabulary("ps placement", lambda: ("cpu", "gpu")),
        choices=lambda: ("cpu", "gpu"),
        sweep=False,
        applies=Applies(
            comm_in("ps", "replicated-cpu"), "it applies to ps and replicated-cpu", ("comm",)
        ),
    ),
    Knob(
        "input_pipeline",
        "execution",
        "host",
        "str",
        "--input-pipeline",
        "real data: decoded by the host CPUs (default) or on the GPUs by NVIDIA DALI (its "
        "decoded images, crops and normalised inputs through the GPU's memory)",
        check=Vocabulary("input pipeline", lambda: INPUT_PIPELINES),
        choices=lambda: INPUT_PIPELINES,
        sweep=False,
        applies=Applies(lambda c: c.get("data") == "real", "it applies to --data real", ("data",)),
    ),
    Knob(
        "preprocessing",
        "execution",
        "auto",
        "str",
        "--preprocessing",
        "real data decoded by the host: what each image costs its cores (crop-flip, inception "
        "colour distortions, autoaugment; auto: autoaugment for EfficientNets, else crop-flip)",
        check=Vocabulary("preprocessing", lambda: PREPROCESSING_CHOICES),
        choices=lambda: PREPROCESSING_CHOICES,
        sweep=False,
        applies=_HOST_DECODES,
    ),
    Knob(
        "input_workers",
        "execution",
        None,
        "int | None",
        "--input-workers",
        "real data decoded by the host: decode workers (cores) per training process, e.g. "
        "PyTorch's DataLoader num_workers (default: the node's cores shared out)",
        check=optional(Range("input workers", 1, 4096, integer=True)),
        parse="int",
        metavar="N",
        sweep=False,
        applies=_HOST_DECODES,
    ),
    Knob(
        "horovod_version",
        "execution",
        DEFAULT_HOROVOD_VERSION,
        "str",
        "--horovod-version",
        "Horovod release: its negotiation (<= 0.12 one MPI message per tensor through rank "
        "0; 0.13-0.15 gather/broadcast; 0.16+ response cache) and its defaults of the fusion "
        f"threshold and cycle time (default: {DEFAULT_HOROVOD_VERSION})",
        check=check_horovod_version,
        canonical=lambda v: horovod_release(str(v)).version,
        metavar="X.Y[.Z]",
        applies=horovod_only(),
    ),
    Knob(
        "fusion_threshold_mb",
        "execution",
        None,
        "float | None",
        "--fusion-threshold-mb",
        "HOROVOD_FUSION_THRESHOLD in MiB (default: the release's, 128 from 0.21, 64 before)",
        check=optional(
            Range(
                "fusion threshold",
                0,
                MAX_FUSION_THRESHOLD_MB,
                text=f"in 0..{MAX_FUSION_THRESHOLD_MB} MiB",
            )
        ),
        unit="MiB",
        parse="number",
        applies=horovod_only(),
    ),
    Knob(
        "cycle_time_ms",
        "execution",
        None,
        "float | None",
        "--cycle-time-ms",
        "HOROVOD_CYCLE_TIME in ms (default: the release's, 1 from 0.21, 5 before)",
        check=optional(
            Range(
                "cycle time",
                MIN_CYCLE_TIME_MS,
                MAX_CYCLE_TIME_MS,
                zero=True,
                text=f"0 or in {MIN_CYCLE_TIME_MS:g}..{MAX_CYCLE_TIME_MS:g} ms",
            )
        ),
        unit="ms",
        parse="number",
        applies=horovod_only(),
    ),
    Knob(
        "response_cache",
        "execution",
        True,
        "bool",
        "--no-response-cache",
        "HOROVOD_CACHE_CAPACITY=0 (0.16+): every cycle gathers the requests at rank 0",
        negate=True,
        sweep=False,
        applies=horovod_only(" (releases 0.16 and later)"),
    ),
    Knob(
        "hierarchical",
        "execution",
        False,
        "bool",
        "--hierarchical",
        "HOROVOD_HIERARCHICAL_ALLREDUCE=1",
        switch=True,
        applies=Applies(comm_in("horovod-nccl"), "it applies to horovod-nccl", ("comm",)),
    ),
    Knob(
        "fp16_allreduce",
        "execution",
        False,
        "bool",
        "--fp16-allreduce",
        "hvd.Compression.fp16: exchange gradients in fp16",
        switch=True,
    ),
    Knob(
        "nccl_version",
        "execution",
        DEFAULT_NCCL_VERSION,
        "str",
        "--nccl-version",
        "NCCL release: 2.0-2.3 rings only (LL for small calls), 2.4 adds trees, 2.5+ picks "
        "(algorithm, protocol) per call from its cost model (default: "
        f"{DEFAULT_NCCL_VERSION}, the NCCL of PyTorch 2.0's wheels, the newest framework "
        "Horovod 0.28.1 supports)",
        check=check_nccl_version,
        canonical=lambda v: str(NcclVersion.parse(v)),
        metavar="X.Y",
        applies=Applies(
            nccl_release,
            "it applies to horovod-nccl, ddp, fsdp and zero1-3 (replicated-nccl is TensorFlow's "
            "own NCCL 1)",
            ("comm",),
        ),
    ),
    Knob(
        "mpi",
        "execution",
        DEFAULT_MPI,
        "str",
        "--mpi",
        "MPI implementation and release of horovod-mpi (openmpi-X.Y, intel-mpi-X, mvapich2-X.Y): "
        "Open MPI sums with AVX kernels from 4.1, with plain loops before (default: "
        f"{DEFAULT_MPI})",
        check=MpiRelease.parse,
        canonical=lambda v: str(MpiRelease.parse(v)),
        metavar="IMPL-X.Y",
        applies=Applies(comm_in("horovod-mpi"), "it applies to horovod-mpi", ("comm",)),
    ),
    Knob(
        "algorithm",
        "execution",
        "auto",
        "str",
        "--algorithm",
        "NCCL_ALGO: auto = what that NCCL picks per call (default), ring, tree, nvls "
        "(NVLink SHARP, one node) or nvls_tree (across nodes)",
        check=Vocabulary("allreduce algorithm", lambda: ALGORITHM_CHOICES),
        choices=lambda: ALGORITHM_CHOICES,
        applies=Applies(
            nccl_call,
            "it applies to horovod-nccl without --hierarchical, ddp, fsdp and zero1-3",
            ("comm", "hierarchical"),
        ),
    ),
    Knob(
        "nccl_protocol",
        "execution",
        "auto",
        "str",
        "--nccl-protocol",
        "NCCL_PROTO: auto (default), LL, LL128 (2.5+, Volta+) or Simple",
        check=Vocabulary("NCCL protocol", lambda: PROTOCOL_CHOICES),
        choices=lambda: PROTOCOL_CHOICES,
        applies=Applies(
            nccl_call,
            "it applies to horovod-nccl without --hierarchical, ddp, fsdp and zero1-3",
            ("comm", "hierarchical"),
        ),
    ),
    Knob(
        "recovery",
        "execution",
        "restart",
        "str",
        "--recovery",
        "after a node fails: restart from the last checkpoint (default), or elastic (Horovod "
        "Elastic: the survivors roll back to the last commit and train on)",
        check=lambda v: rc.check_choice("recovery", v, rc.RECOVERIES),
        choices=lambda: rc.RECOVERIES,
        applies=WITH_FAILURES,
        failure=True,
    ),
    Knob(
        "checkpoint_interval_min",
        "execution",
        None,
        "float | None",
        "--checkpoint-interval-min",
        "training minutes between checkpoints (elastic: commits); default auto, the minimum "
        "of the expected time-to-train (Daly)",
        check=optional(lambda v: rc.check_duration("checkpoint interval", v, "min", _MINUTE)),
        unit="min",
        parse="minutes-or-auto",
        metavar="MIN|auto",
        words={"auto": None},
        applies=WITH_FAILURES,
        failure=True,
    ),
    Knob(
        "restart_min",
        "execution",
        None,
        "float | None",
        "--restart-min",
        "a measured restart, checkpoint load included (default: "
        f"{rc.DEFAULT_RESTART_S / _MINUTE:g} min assumed for detection, relaunch, rendezvous "
        "and warm-up, plus the load)",
        check=optional(lambda v: rc.check_duration("restart time", v, "min", _MINUTE, zero=True)),
        unit="min",
        parse="non-negative",
        metavar="MIN",
        applies=RESTART,
        failure=True,
    ),
    Knob(
        "rendezvous_s",
        "execution",
        rc.DEFAULT_RENDEZVOUS_S,
        "float",
        "--rendezvous-s",
        "elastic: detection and re-rendezvous after a failure (default: "
        f"{rc.DEFAULT_RENDEZVOUS_S:g}, assumed)",
        check=lambda v: rc.check_duration("re-rendezvous time", v, "s", 1.0, zero=True),
        unit="s",
        parse="non-negative",
        metavar="S",
        applies=ELASTIC,
        failure=True,
    ),
    Knob(
        "replace_min",
        "execution",
        rc.DEFAULT_REPLACE_MIN,
        "float",
        "--replace-min",
        "elastic: minutes until a failed node's replacement arrives (default: "
        f"{rc.DEFAULT_REPLACE_MIN:g}, the restart's relaunch)",
        check=lambda v: rc.check_duration("node replacement time", v, "min", _MINUTE, zero=True),
        unit="min",
        parse="non-negative",
        metavar="MIN",
        applies=ELASTIC,
        failure=True,
    ),
    Knob(
        "framework",
        "execution",
        DEFAULT_FRAMEWORK,
        "str",
        "--framework",
        "training framework, whose defaults set --layout and --fusion: tensorflow (NHWC for "
        "fp16 convolutions on tensor cores, else NCHW; no fusion: XLA off), pytorch (NCHW, "
        f"no fusion), mxnet (NCHW, no fusion) (default: {DEFAULT_FRAMEWORK}; ddp, fsdp and "
        "zero1-3 run pytorch's)",
        check=Vocabulary("framework", lambda: FRAMEWORKS),
        choices=lambda: FRAMEWORKS,
    ),
    Knob(
        "layout",
        "execution",
        None,
        "str | None",
        "--layout",
        "memory format of the activations (PyTorch's channels_last = nhwc): cuDNN's "
        "tensor-core kernels read NHWC, so NCHW tensors are transposed around them (default: "
        "the framework's)",
        check=optional(Vocabulary("layout", lambda: LAYOUTS)),
        choices=lambda: LAYOUTS,
    ),
    Knob(
        "fusion",
        "execution",
        None,
        "str | None",
        "--fusion",
        "operator fusion of the element-wise kernels (not Horovod's tensor fusion): none "
        "(each batch norm, activation and add its own pass over memory), bn-act (cuDNN's "
        "fused batch norm + ReLU + add; NHWC fp16 only), xla (default: the framework's: "
        "none)",
        check=optional(Vocabulary("fusion", lambda: FUSIONS)),
        choices=lambda: FUSIONS,
        extra=(("--xla", "xla", "= --fusion xla (TensorFlow's XLA compilation)"),),
    ),
)
