"""``ddlsim calibrate network LOG...``: fit the link terms of ddlsim's collective models to
measured collectives and write a network calibration file (:mod:`ddlsim.tools.netcal`).

It sits beside ``ddlsim calibrate``'s compute profiling as a sub-command of its own:
``ddlsim calibrate --gpu ...`` profiles compute as before, ``ddlsim calibrate network ...``
reads collective benchmark logs; the two share no flags.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ddlsim.cli.args import int_at_least, output_file
from ddlsim.tools.netcal.logs import COLLECTIVES

_EPILOG = """\
examples:
  ddlsim calibrate network all_reduce_perf.log --inter-node ib-edr -o edr.json
  ddlsim calibrate network ar_2nodes.log ar_4nodes.log --inter-node 25gbe --transport tcp \\
      -o 25gbe-tcp.json
  ddlsim calibrate network osu_allreduce.txt --gpus 16 --gpus-per-node 8 --gpu v100 \\
      --inter-node 100gbe -o mpi.json
  ddlsim calibrate network traces/horovod/allreduce_sweep.json --gpu epyc-zen4-core \\
      --intra-node loopback -o loopback.json
  ddlsim predict --gpus 64 --inter-node ib-edr --network-calibration edr.json

formats: nccl-tests all_reduce_perf / all_gather_perf / reduce_scatter_perf output as printed
(rank lines, NCCL version, size table and footer), OSU osu_allreduce, ddlsim's host sweeps
(JSON). What the log states wins; a flag may fill what it does not state and may not
contradict it. A log with no size rows, two collectives or a truncated table is refused.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``calibrate network`` to ``calibrate``'s sub-commands."""
    p = sub.add_parser(
        "network",
        help="fit link bandwidth and latency to measured collectives (nccl-tests, OSU)",
        description="Fit the network (or intra-node) link terms of ddlsim's collective models "
        "to measured collective benchmark output and write a network calibration file for "
        "'ddlsim predict --network-calibration'.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="benchmark output files")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file(".json"),
        metavar="FILE.json",
        help="the calibration file to write",
    )
    p.add_argument("--gpu", default=None, help="catalog GPU, where the log names none or another")
    p.add_argument("--gpus", type=int_at_least(2), default=None, help="ranks (OSU logs)")
    p.add_argument(
        "--gpus-per-node", type=int_at_least(1), default=None, help="ranks per node (OSU logs)"
    )
    p.add_argument(
        "--intra-node", default=None, help="intra-node fabric (default: the GPU's usual server)"
    )
    p.add_argument(
        "--inter-node", default=None, help="the catalog network the logs measured (multi-node)"
    )
    p.add_argument(
        "--transport", default=None, choices=("tcp", "rdma"), help="default: the log's, else NCCL's"
    )
    p.add_argument(
        "--nics-per-node",
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="network adapters per node in the measured cluster (default: 1); the file keeps "
        "the bandwidth per adapter too",
    )
    p.add_argument("--nccl-version", default=None, metavar="X.Y", help="where the log prints none")
    p.add_argument(
        "--collective", default=None, choices=COLLECTIVES, help="where the log says none"
    )
    p.add_argument("--json", action="store_true", help="print the calibration file's content")
    p.set_defaults(func=run)


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this calibration (logs, then the flags given)."""
    words = ["ddlsim", "calibrate", "network", *map(str, args.logs), "-o", str(args.output)]
    for flag in ("gpu", "gpus", "gpus_per_node", "intra_node", "inter_node", "transport"):
        if getattr(args, flag) is not None:
            words += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if args.nics_per_node != 1:
        words += ["--nics-per-node", str(args.nics_per_node)]
    for flag in ("nccl_version", "collective"):
        if getattr(args, flag) is not None:
            words += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim calibrate network``."""
    from ddlsim.tools.netcal.run import Request, calibrate, format_summary

    request = Request(
        files=tuple(args.logs),
        output=Path(args.output),
        gpu=args.gpu,
        gpus=args.gpus,
        gpus_per_node=args.gpus_per_node,
        intra_node=args.intra_node,
        inter_node=args.inter_node,
        transport=args.transport,
        nics_per_node=args.nics_per_node,
        nccl_version=args.nccl_version,
        collective=args.collective,
        command=_command(args),
    )
    doc = calibrate(request)
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_summary(doc, request.output))
    return 0
