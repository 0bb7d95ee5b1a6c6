"""``ddlsim predict``: simulate one configuration and report throughput and where time goes.

Flag names and values are a contract (the vocabulary of the measured-runs schema); see
``ddlsim predict --help`` for defaults.
"""

from __future__ import annotations

import argparse
import json
import sys

from ddlsim.analysis.ttt import DEFAULT_EPOCHS, IMAGENET_1K_TRAIN_IMAGES
from ddlsim.cli.applies import warn_inapplicable
from ddlsim.cli.args import integer as _int
from ddlsim.cli.args import number as _number
from ddlsim.cli.report import format_prediction
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION
from ddlsim.engine.budget import DEFAULT_MAX_EVENTS
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION, DEFAULT_RANK_SIGMA
from ddlsim.errors import ConfigError
from ddlsim.horovod import DEFAULT_HOROVOD_VERSION
from ddlsim.resilience import cli as resilience_cli
from ddlsim.resilience.report import format_resilience
from ddlsim.strategy import (
    ALGORITHMS,
    COMM_METHODS,
    DATA_KINDS,
    DEFAULT_BATCH_PER_GPU,
    INPUT_PIPELINES,
    NCCL_PROTOCOLS,
    PRECISIONS,
)


def _stragglers(text: str) -> dict[int, float]:
    """``RANK:SLOWDOWN[,RANK:SLOWDOWN...]``: distinct ranks, finite slowdowns (checked again,
    with their ranges, by :func:`ddlsim.api.sim_options`)."""
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


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that describe one configuration (shared by predict-like commands)."""
    p.add_argument(
        "--model",
        default=None,
        help="zoo model (default: the --calibration file's, else resnet50)",
    )
    p.add_argument(
        "--gpu",
        default=None,
        help="GPU type (default: the --calibration file's, else p100 = p100-sxm2, DGX-1)",
    )
    p.add_argument("--gpus", type=_int, default=1, help="total GPUs (default: 1)")
    p.add_argument(
        "--gpus-per-node",
        type=_int,
        default=None,
        help="GPUs per node (default: min(gpus, 8))",
    )
    p.add_argument(
        "--intra-node",
        default=None,
        help="GPU-to-GPU fabric: none, pcie3, nvlink-p100, nvlink-v100, nvswitch, ... "
        "(default: the GPU's usual server)",
    )
    p.add_argument(
        "--inter-node",
        default=None,
        help="network: 10gbe, 25gbe, 40gbe, 50gbe, 100gbe, 200gbe, ib-fdr, ib-edr, ib-hdr, "
        "ib-ndr, ib, aries, ec2, azure-eth (default: ib-edr when multi-node)",
    )
    p.add_argument(
        "--transport", default=None, help="tcp or rdma (default: the network's usual one)"
    )
    p.add_argument(
        "--nics-per-node",
        type=_int,
        default=1,
        metavar="N",
        help="network adapters per node, their bandwidth added up (multi-rail; DGX-1 4, DGX-2 "
        "and DGX A100/H100 8; default: 1)",
    )
    p.add_argument(
        "--comm",
        default="horovod-nccl",
        choices=COMM_METHODS,
        help="gradient exchange (default: horovod-nccl)",
    )
    p.add_argument("--n-ps", type=_int, default=None, help="parameter-server tasks (PS methods)")
    p.add_argument(
        "--ps-dedicated",
        action="store_true",
        help="parameter servers on their own nodes (default: co-located with workers)",
    )
    p.add_argument(
        "--batch",
        type=_int,
        default=None,
        help="mini-batch per GPU (default: the --calibration file's, else "
        f"{DEFAULT_BATCH_PER_GPU})",
    )
    p.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="default: the --calibration file's, else fp32",
    )
    p.add_argument("--data", default="synthetic", choices=DATA_KINDS, help="default: synthetic")
    p.add_argument(
        "--input-pipeline",
        default="host",
        choices=INPUT_PIPELINES,
        help="real data: decoded by the host CPUs (default) or on the GPUs by NVIDIA DALI",
    )
    p.add_argument(
        "--host-input-rate",
        type=_number,
        default=None,
        metavar="IMG_PER_S",
        help="real data: images/s one node's host CPUs decode (default: the reference "
        "server's hardware threads x 100)",
    )
    p.add_argument(
        "--ps-placement",
        default="cpu",
        choices=("cpu", "gpu"),
        help="ps / replicated-cpu: the device holding the variables (default: cpu)",
    )
    p.add_argument(
        "--horovod-version",
        default=DEFAULT_HOROVOD_VERSION,
        metavar="X.Y[.Z]",
        help="Horovod release: its negotiation (<= 0.12 one MPI message per tensor through "
        "rank 0; 0.13-0.15 gather/broadcast; 0.16+ response cache) and its defaults of the "
        f"fusion threshold and cycle time (default: {DEFAULT_HOROVOD_VERSION})",
    )
    p.add_argument(
        "--fusion-threshold-mb",
        type=_number,
        default=None,
        help="HOROVOD_FUSION_THRESHOLD in MiB (default: the release's, 128 from 0.21, 64 before)",
    )
    p.add_argument(
        "--cycle-time-ms",
        type=_number,
        default=None,
        help="HOROVOD_CYCLE_TIME in ms (default: the release's, 1 from 0.21, 5 before)",
    )
    p.add_argument(
        "--no-response-cache",
        action="store_true",
        help="HOROVOD_CACHE_CAPACITY=0 (0.16+): every cycle gathers the requests at rank 0",
    )
    p.add_argument("--hierarchical", action="store_true", help="HOROVOD_HIERARCHICAL_ALLREDUCE=1")
    p.add_argument(
        "--nccl-version",
        default=DEFAULT_NCCL_VERSION,
        metavar="X.Y",
        help="NCCL release: 2.0-2.3 rings only (LL for small calls), 2.4 adds trees, 2.5+ picks "
        f"(algorithm, protocol) per call from its cost model (default: {DEFAULT_NCCL_VERSION}, "
        "the NCCL of PyTorch 2.0's wheels, the newest framework Horovod 0.28.1 supports)",
    )
    p.add_argument(
        "--algorithm",
        default="auto",
        choices=ALGORITHMS,
        help="NCCL_ALGO: auto = what that NCCL picks per call (default), ring or tree",
    )
    p.add_argument(
        "--nccl-protocol",
        default="auto",
        choices=NCCL_PROTOCOLS,
        help="NCCL_PROTO: auto (default), LL, LL128 (2.5+, Volta+) or Simple",
    )
    p.add_argument(
        "--fp16-allreduce",
        action="store_true",
        help="hvd.Compression.fp16: exchange gradients in fp16",
    )
    p.add_argument(
        "--no-tf32",
        action="store_true",
        help="fp32 on a GPU with TF32 tensor cores (a100, h100) as true fp32 "
        "(NVIDIA_TF32_OVERRIDE=0); by default fp32 convolutions run on TF32, as TensorFlow 2.4+ "
        "and PyTorch do",
    )
    p.add_argument("--engine", default="fast", choices=("fast", "detailed"), help="default: fast")
    p.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="calibration file; gives the default model, batch, precision and GPU (another "
        "catalog --gpu re-times it by roofline ratios)",
    )
    p.add_argument(
        "--single-gpu-throughput",
        type=_number,
        default=None,
        metavar="IMG_PER_S",
        help="scale the compute calibration so that 1 GPU runs at this many images/s",
    )
    p.add_argument(
        "--stragglers",
        type=_stragglers,
        default=None,
        metavar="RANK:SLOWDOWN,...",
        help="detailed engine: slow GPUs, e.g. 3:1.2 = rank 3 computes 20%% slower",
    )
    p.add_argument(
        "--jitter", type=_number, default=0.0, help="detailed engine: log-normal compute noise"
    )
    p.add_argument(
        "--rank-sigma",
        type=_number,
        default=DEFAULT_RANK_SIGMA,
        help="per-rank, per-iteration speed variability (log-normal sigma) charged as waiting "
        f"for the slowest rank; 0 = identical ranks (default: {DEFAULT_RANK_SIGMA:g}, fitted)",
    )
    p.add_argument(
        "--host-contention",
        type=_number,
        default=DEFAULT_HOST_CONTENTION,
        metavar="FRACTION",
        help="compute slowdown of each GPU when a node runs several (shared CPUs, PCIe root, "
        f"power); 0 = none (default: {DEFAULT_HOST_CONTENTION:g}, fitted on single-node runs)",
    )
    p.add_argument(
        "--no-interference",
        action="store_true",
        help="do not slow compute while collectives hold SMs (NCCL: one SM per channel)",
    )
    p.add_argument("--seed", type=_int, default=0, help="seed of the jitter")
    p.add_argument(
        "--max-events",
        type=_number,
        default=DEFAULT_MAX_EVENTS,
        metavar="N",
        help="detailed engine: refuse a run estimated at more events (flow transfers, each "
        "SimPy event or executor step counted 1,000; default: "
        f"{DEFAULT_MAX_EVENTS:.0e}, a few minutes on 2 cores) or at more than 80%% of the "
        "available memory",
    )


def predict_kwargs(args: argparse.Namespace) -> dict:
    """Keyword arguments of :func:`ddlsim.predict` from parsed flags."""
    if args.gpus < 1:
        raise ConfigError(f"--gpus must be >= 1, got {args.gpus}")
    if args.batch is not None and args.batch < 1:
        raise ConfigError(f"--batch must be >= 1, got {args.batch}")
    return {
        "model": args.model,
        "gpus": args.gpus,
        "gpu": args.gpu,
        "gpus_per_node": args.gpus_per_node,
        "intra_node": args.intra_node,
        "inter_node": args.inter_node,
        "transport": args.transport,
        "nics_per_node": args.nics_per_node,
        "comm": args.comm,
        "n_ps": args.n_ps,
        "ps_colocated": not args.ps_dedicated,
        "batch": args.batch,
        "precision": args.precision,
        "data": args.data,
        "input_pipeline": args.input_pipeline,
        "host_input_images_per_s": args.host_input_rate,
        "ps_placement": args.ps_placement,
        "fusion_threshold_mb": args.fusion_threshold_mb,
        "cycle_time_ms": args.cycle_time_ms,
        "hierarchical": args.hierarchical,
        "algorithm": args.algorithm,
        "nccl_version": args.nccl_version,
        "nccl_protocol": args.nccl_protocol,
        "horovod_version": args.horovod_version,
        "response_cache": not args.no_response_cache,
        "fp16_allreduce": args.fp16_allreduce,
        "tf32": not args.no_tf32,
        "engine": args.engine,
        "calibration": args.calibration,
        "single_gpu_throughput": args.single_gpu_throughput,
        "stragglers": args.stragglers,
        "jitter_sigma": args.jitter,
        "rank_sigma": args.rank_sigma,
        "host_contention": args.host_contention,
        "interference": not args.no_interference,
        "seed": args.seed,
        "max_events": args.max_events,
    }


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    p = sub.add_parser(
        "predict",
        help="predict throughput and scaling of one configuration",
        description="Simulate one data-parallel training configuration and report images/s, "
        "iteration time, scaling efficiency against 1 GPU and where the time goes.",
    )
    add_config_arguments(p)
    resilience_cli.add_arguments(p)
    p.add_argument(
        "--epochs",
        type=_number,
        default=DEFAULT_EPOCHS,
        help=f"epochs of the time-to-train figure (default: {DEFAULT_EPOCHS})",
    )
    p.add_argument(
        "--dataset-images",
        type=_int,
        default=IMAGENET_1K_TRAIN_IMAGES,
        help=f"images per epoch (default: ImageNet-1k, {IMAGENET_1K_TRAIN_IMAGES:,})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--from-json",
        metavar="RESULT.json",
        default=None,
        help="re-run exactly the configuration recorded in a 'predict --json' output (or a "
        "timeline's): no other configuration flag with it; refused if its calibration file "
        "changed",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim predict``."""
    from ddlsim.api import predict

    if args.from_json is not None:
        from ddlsim import reproduce

        _only_from_json(args)
        result = reproduce.rerun(args.from_json)
    else:
        kwargs = predict_kwargs(args)
        result = predict(**kwargs, epochs=args.epochs, dataset_images=args.dataset_images)
        warn_inapplicable(kwargs)  # once the configuration is known to be valid
    failures = resilience_cli.analyse_args(args, result)
    if args.json:
        doc = result.to_dict()
        if failures is not None:
            doc["resilience"] = failures.to_dict()
        json.dump(doc, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_prediction(result))
        if failures is not None:
            sys.stdout.write(format_resilience(failures))
    return 0


def _only_from_json(args: argparse.Namespace) -> None:
    """``--from-json`` takes the whole configuration from the file: no configuration flag."""
    from ddlsim.cli.main import build_parser

    defaults = vars(build_parser().parse_args(["predict"]))
    for key, value in vars(args).items():
        exempt = ("from_json", "json", "func", *resilience_cli.DESTS)  # applied to the result
        if key not in exempt and value != defaults.get(key):
            raise ConfigError(
                f"--from-json takes the whole configuration from {args.from_json}; drop "
                f"--{key.replace('_', '-')}"
            )
