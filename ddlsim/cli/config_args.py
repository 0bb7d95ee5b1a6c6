"""The flags that describe one configuration, shared by predict, timeline, traces and sweep.

They are grouped in ``--help`` as the job is (:mod:`ddlsim.config.groups`): workload, system,
execution
and simulation. The names a flag accepts (models, GPUs, links, networks) are listed from the zoo
and the catalogs themselves, so the help never goes stale. :func:`predict_kwargs` turns the
parsed flags into the keyword arguments of :func:`ddlsim.predict`; the names differ only where
a flag switches a default off (``--no-tf32`` -> ``tf32=False``) or names its unit
(``--host-input-rate`` -> ``host_input_images_per_s``). The failure model's flags
(:mod:`ddlsim.cli.failure_args`) are in the same groups.
"""

from __future__ import annotations

import argparse
from typing import Any

from ddlsim.cli import failure_args
from ddlsim.cli.args import integer, number
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION
from ddlsim.compute.kernels import LAYOUTS
from ddlsim.compute.stack import DEFAULT_FRAMEWORK, FRAMEWORKS, FUSIONS
from ddlsim.engine.budget import DEFAULT_MAX_EVENTS
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION, DEFAULT_RANK_SIGMA
from ddlsim.errors import ConfigError
from ddlsim.execution.horovod import DEFAULT_HOROVOD_VERSION
from ddlsim.execution.schedules import DEFAULT_PARTITION_BYTES, SCHEDULES
from ddlsim.execution.strategy import (
    ALGORITHMS,
    COMM_METHODS,
    DATA_KINDS,
    DEFAULT_BATCH_PER_GPU,
    INPUT_PIPELINES,
    NCCL_PROTOCOLS,
    PRECISIONS,
)
from ddlsim.system import catalog
from ddlsim.units import MiB
from ddlsim.workload.ttt import DEFAULT_EPOCHS, IMAGENET_1K_TRAIN_IMAGES
from ddlsim.workload.zoo import MODEL_NAMES


def _stragglers(text: str) -> dict[int, float]:
    """``RANK:SLOWDOWN[,RANK:SLOWDOWN...]``: distinct ranks, finite slowdowns (checked again,
    with their ranges, by :class:`ddlsim.config.groups.SimulationConfig`)."""
    out: dict[int, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        rank, _, factor = item.partition(":")
        try:
            r, f = int(rank), float(factor)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected RANK:SLOWDOWN[,RANK:SLOWDOWN...], got {text!r}"
            ) from None
        if r in out:
            raise argparse.ArgumentTypeError(f"rank {r} is given twice in {text!r}")
        out[r] = f
    if not out:
        raise argparse.ArgumentTypeError(f"expected RANK:SLOWDOWN[,...], got {text!r}")
    return out


def _gpu_names() -> str:
    """The catalog's GPUs, each with its aliases: ``p100-sxm2 (= p100), ...``."""
    aliases: dict[str, list[str]] = {}
    for alias, target in catalog.device_aliases().items():
        aliases.setdefault(target, []).append(alias)
    return ", ".join(
        name + (f" (= {', '.join(aliases[name])})" if name in aliases else "")
        for name in catalog.device_names()
        if name not in catalog.device_aliases()
    )


def add_config_arguments(p: argparse.ArgumentParser, *, title: str = "") -> None:
    """Add the configuration flags to ``p``, in one argument group per part of the job
    (``title`` prefixes the groups' titles)."""
    _add_workload(p.add_argument_group(f"{title}workload (what is trained)"))
    _add_system(p.add_argument_group(f"{title}system (what it runs on)"))
    _add_execution(p.add_argument_group(f"{title}execution (how it trains)"))
    _add_simulation(p.add_argument_group(f"{title}simulation (how ddlsim simulates it)"))


def _add_workload(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--model",
        default=None,
        help=f"zoo model: {', '.join(MODEL_NAMES)} (default: the --calibration file's, else "
        "resnet50)",
    )
    g.add_argument(
        "--batch",
        type=integer,
        default=None,
        help="mini-batch per GPU (default: the --calibration file's, else "
        f"{DEFAULT_BATCH_PER_GPU})",
    )
    g.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="default: the --calibration file's, else fp32",
    )
    g.add_argument(
        "--no-tf32",
        action="store_true",
        help="fp32 on a GPU with TF32 tensor cores (a100, h100) as true fp32 "
        "(NVIDIA_TF32_OVERRIDE=0); by default fp32 convolutions run on TF32, as TensorFlow 2.4+ "
        "and PyTorch do",
    )
    g.add_argument("--data", default="synthetic", choices=DATA_KINDS, help="default: synthetic")
    g.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="calibration file; gives the default model, batch, precision and GPU (another "
        "catalog --gpu re-times it by roofline ratios)",
    )
    g.add_argument(
        "--single-gpu-throughput",
        type=number,
        default=None,
        metavar="IMG_PER_S",
        help="scale the compute calibration so that 1 GPU runs at this many images/s",
    )
    g.add_argument(
        "--epochs",
        type=number,
        default=DEFAULT_EPOCHS,
        help=f"epochs of the time-to-train figure (default: {DEFAULT_EPOCHS})",
    )
    g.add_argument(
        "--dataset-images",
        type=integer,
        default=IMAGENET_1K_TRAIN_IMAGES,
        help=f"images per epoch (default: ImageNet-1k, {IMAGENET_1K_TRAIN_IMAGES:,})",
    )
    failure_args.add_workload(g)


def _add_system(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--gpus", type=integer, default=1, help="total GPUs (default: 1)")
    g.add_argument(
        "--gpu",
        default=None,
        help=f"GPU type: {_gpu_names()} (default: the --calibration file's, else p100 = "
        "p100-sxm2, DGX-1)",
    )
    g.add_argument(
        "--gpus-per-node",
        type=integer,
        default=None,
        help="GPUs per node (default: min(gpus, 8))",
    )
    g.add_argument(
        "--intra-node",
        default=None,
        help=f"GPU-to-GPU fabric: {', '.join(catalog.intra_link_names())} (default: the GPU's "
        "usual server)",
    )
    g.add_argument(
        "--inter-node",
        default=None,
        help=f"network: {', '.join(catalog.inter_link_names())} (default: ib-edr when multi-node)",
    )
    g.add_argument(
        "--transport", default=None, help="tcp or rdma (default: the network's usual one)"
    )
    g.add_argument(
        "--nics-per-node",
        type=integer,
        default=1,
        metavar="N",
        help="network adapters per node, their bandwidth added up (multi-rail; DGX-1 4, DGX-2 "
        "and DGX A100/H100 8; default: 1)",
    )
    g.add_argument(
        "--network-calibration",
        default=None,
        metavar="FILE",
        help="network calibration file ('ddlsim calibrate network'): its fitted link "
        "bandwidth and latency replace the catalog's on the network (and fabric) it measured",
    )
    g.add_argument(
        "--host-input-rate",
        type=number,
        default=None,
        metavar="IMG_PER_S",
        help="real data: images/s one node's host CPUs decode (default: the reference "
        "server's hardware threads x 100)",
    )
    failure_args.add_system(g)


def _add_execution(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--comm",
        default="horovod-nccl",
        choices=COMM_METHODS,
        help="gradient exchange (default: horovod-nccl)",
    )
    g.add_argument(
        "--schedule",
        default="auto",
        choices=SCHEDULES,
        help="when each gradient may start communicating: horovod (tensor fusion + cycle), bsp "
        "(all after backprop), wfbp (each tensor when ready), mg-wfbp (merged where merging "
        "shortens the iteration), bytescheduler (priority partitions), ddp (PyTorch DDP's "
        "buckets); auto = horovod for Horovod methods, ddp for --comm ddp, per layer for the "
        "others (default: auto)",
    )
    g.add_argument(
        "--bucket-cap-mb",
        type=number,
        default=None,
        metavar="MIB",
        help="--comm ddp: DistributedDataParallel's bucket_cap_mb (default: PyTorch's 25, after a "
        "first bucket of 1 MiB; a given cap applies to the first bucket too)",
    )
    g.add_argument(
        "--partition-mb",
        type=number,
        default=DEFAULT_PARTITION_BYTES / MiB,
        metavar="MIB",
        help="--schedule bytescheduler: partition size (default: BytePS's 4,096,000 bytes)",
    )
    g.add_argument("--n-ps", type=integer, default=None, help="parameter-server tasks (PS methods)")
    g.add_argument(
        "--ps-dedicated",
        action="store_true",
        help="parameter servers on their own nodes (default: co-located with workers)",
    )
    g.add_argument(
        "--ps-placement",
        default="cpu",
        choices=("cpu", "gpu"),
        help="ps / replicated-cpu: the device holding the variables (default: cpu)",
    )
    g.add_argument(
        "--framework",
        default=DEFAULT_FRAMEWORK,
        choices=FRAMEWORKS,
        help="training framework, whose defaults set --layout and --fusion: tensorflow (NHWC "
        "for fp16 convolutions on tensor cores, else NCHW; no fusion: XLA off), pytorch (NCHW, "
        f"no fusion), mxnet (NCHW, no fusion) (default: {DEFAULT_FRAMEWORK})",
    )
    g.add_argument(
        "--layout",
        default=None,
        choices=LAYOUTS,
        help="memory format of the activations (PyTorch's channels_last = nhwc): cuDNN's "
        "tensor-core kernels read NHWC, so NCHW tensors are transposed around them (default: "
        "the framework's)",
    )
    g.add_argument(
        "--fusion",
        default=None,
        choices=FUSIONS,
        help="operator fusion of the element-wise kernels (not Horovod's tensor fusion): none "
        "(each batch norm, activation and add its own pass over memory), bn-act (cuDNN's fused "
        "batch norm + ReLU + add; NHWC fp16 only), xla (default: the framework's: none)",
    )
    g.add_argument(
        "--xla",
        dest="fusion",
        action="store_const",
        const="xla",
        help="= --fusion xla (TensorFlow's XLA compilation)",
    )
    g.add_argument(
        "--input-pipeline",
        default="host",
        choices=INPUT_PIPELINES,
        help="real data: decoded by the host CPUs (default) or on the GPUs by NVIDIA DALI "
        "(its decoded images, crops and normalised inputs through the GPU's memory)",
    )
    g.add_argument(
        "--horovod-version",
        default=DEFAULT_HOROVOD_VERSION,
        metavar="X.Y[.Z]",
        help="Horovod release: its negotiation (<= 0.12 one MPI message per tensor through "
        "rank 0; 0.13-0.15 gather/broadcast; 0.16+ response cache) and its defaults of the "
        f"fusion threshold and cycle time (default: {DEFAULT_HOROVOD_VERSION})",
    )
    g.add_argument(
        "--fusion-threshold-mb",
        type=number,
        default=None,
        help="HOROVOD_FUSION_THRESHOLD in MiB (default: the release's, 128 from 0.21, 64 before)",
    )
    g.add_argument(
        "--cycle-time-ms",
        type=number,
        default=None,
        help="HOROVOD_CYCLE_TIME in ms (default: the release's, 1 from 0.21, 5 before)",
    )
    g.add_argument(
        "--no-response-cache",
        action="store_true",
        help="HOROVOD_CACHE_CAPACITY=0 (0.16+): every cycle gathers the requests at rank 0",
    )
    g.add_argument("--hierarchical", action="store_true", help="HOROVOD_HIERARCHICAL_ALLREDUCE=1")
    g.add_argument(
        "--fp16-allreduce",
        action="store_true",
        help="hvd.Compression.fp16: exchange gradients in fp16",
    )
    g.add_argument(
        "--nccl-version",
        default=DEFAULT_NCCL_VERSION,
        metavar="X.Y",
        help="NCCL release: 2.0-2.3 rings only (LL for small calls), 2.4 adds trees, 2.5+ picks "
        f"(algorithm, protocol) per call from its cost model (default: {DEFAULT_NCCL_VERSION}, "
        "the NCCL of PyTorch 2.0's wheels, the newest framework Horovod 0.28.1 supports)",
    )
    g.add_argument(
        "--algorithm",
        default="auto",
        choices=ALGORITHMS,
        help="NCCL_ALGO: auto = what that NCCL picks per call (default), ring or tree",
    )
    g.add_argument(
        "--nccl-protocol",
        default="auto",
        choices=NCCL_PROTOCOLS,
        help="NCCL_PROTO: auto (default), LL, LL128 (2.5+, Volta+) or Simple",
    )
    failure_args.add_execution(g)


def _add_simulation(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--engine", default="fast", choices=("fast", "detailed"), help="default: fast")
    g.add_argument(
        "--rank-sigma",
        type=number,
        default=DEFAULT_RANK_SIGMA,
        help="per-rank, per-iteration speed variability (log-normal sigma) charged as waiting "
        f"for the slowest rank; 0 = identical ranks (default: {DEFAULT_RANK_SIGMA:g}, fitted)",
    )
    g.add_argument(
        "--host-contention",
        type=number,
        default=DEFAULT_HOST_CONTENTION,
        metavar="FRACTION",
        help="compute slowdown of each GPU when a node runs several (shared CPUs, PCIe root, "
        f"power); 0 = none (default: {DEFAULT_HOST_CONTENTION:g}, fitted on single-node runs)",
    )
    g.add_argument(
        "--no-interference",
        action="store_true",
        help="do not slow compute while collectives hold SMs (NCCL: one SM per channel)",
    )
    g.add_argument(
        "--stragglers",
        type=_stragglers,
        default=None,
        metavar="RANK:SLOWDOWN,...",
        help="detailed engine: slow GPUs, e.g. 3:1.2 = rank 3 computes 20%% slower",
    )
    g.add_argument(
        "--jitter", type=number, default=0.0, help="detailed engine: log-normal compute noise"
    )
    g.add_argument("--seed", type=integer, default=0, help="seed of the jitter")
    g.add_argument(
        "--max-events",
        type=number,
        default=DEFAULT_MAX_EVENTS,
        metavar="N",
        help="detailed engine: refuse a run estimated at more events (its work weighted by "
        "cost: a flow transfer 4, a worker's share of a worker step 80, a worker step, loop "
        f"event or executor step 1,600; default: {DEFAULT_MAX_EVENTS:.0e}, about half a minute "
        "on 2 cores) or at more than 80%% of the available memory",
    )
    failure_args.add_simulation(g)


def predict_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`ddlsim.predict` from parsed flags, in the job's group order."""
    if args.gpus < 1:
        raise ConfigError(f"--gpus must be >= 1, got {args.gpus}")
    if args.batch is not None and args.batch < 1:
        raise ConfigError(f"--batch must be >= 1, got {args.batch}")
    return {
        # workload
        "model": args.model,
        "batch": args.batch,
        "precision": args.precision,
        "tf32": not args.no_tf32,
        "data": args.data,
        "calibration": args.calibration,
        "single_gpu_throughput": args.single_gpu_throughput,
        "epochs": args.epochs,
        "dataset_images": args.dataset_images,
        **failure_args.failure_kwargs(args, "workload"),
        # system
        "gpus": args.gpus,
        "gpu": args.gpu,
        "gpus_per_node": args.gpus_per_node,
        "intra_node": args.intra_node,
        "inter_node": args.inter_node,
        "transport": args.transport,
        "nics_per_node": args.nics_per_node,
        "host_input_images_per_s": args.host_input_rate,
        "network_calibration": args.network_calibration,
        **failure_args.failure_kwargs(args, "system"),
        # execution
        "comm": args.comm,
        "schedule": args.schedule,
        "partition_mb": args.partition_mb,
        "bucket_cap_mb": args.bucket_cap_mb,
        "n_ps": args.n_ps,
        "ps_colocated": not args.ps_dedicated,
        "ps_placement": args.ps_placement,
        "input_pipeline": args.input_pipeline,
        "framework": args.framework,
        "layout": args.layout,
        "fusion": args.fusion,
        "horovod_version": args.horovod_version,
        "fusion_threshold_mb": args.fusion_threshold_mb,
        "cycle_time_ms": args.cycle_time_ms,
        "response_cache": not args.no_response_cache,
        "hierarchical": args.hierarchical,
        "fp16_allreduce": args.fp16_allreduce,
        "nccl_version": args.nccl_version,
        "algorithm": args.algorithm,
        "nccl_protocol": args.nccl_protocol,
        **failure_args.failure_kwargs(args, "execution"),
        # simulation
        "engine": args.engine,
        "rank_sigma": args.rank_sigma,
        "host_contention": args.host_contention,
        "interference": not args.no_interference,
        "stragglers": args.stragglers,
        "jitter_sigma": args.jitter,
        "seed": args.seed,
        "max_events": args.max_events,
        **failure_args.failure_kwargs(args, "simulation"),
    }
