"""``ddlsim calibrate``: a TensorFlow (or PyTorch) profiling pass that writes calibration files.

Profiles zoo models on the local GPU (``--gpu NAME``: it must be that catalog GPU) or device
(``--device cpu|gpu:N``) with the TensorFlow profiler, or with ``torch.profiler`` under
``--framework torch``, and writes one calibration file per (model, batch, precision) into the
user calibration directory, which ``ddlsim predict`` searches before the shipped files.
TensorFlow (the ``calibrate`` extra) or PyTorch (the ``torch`` extra; :mod:`ddlsim.extras`) is
imported only when this command runs. See :mod:`ddlsim.tools.calibrate`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ddlsim.cli import netcal
from ddlsim.cli.args import integer as _int
from ddlsim.cli.args import number as _number
from ddlsim.cli.args import output_folder
from ddlsim.tools.calibrate.defaults import (
    DEFAULT_CPU_BATCHES,
    DEFAULT_GPU_BATCHES,
    DEFAULT_STEPS,
    DEFAULT_WARMUP_STEPS,
)

_EPILOG = """\
examples:
  ddlsim calibrate --gpu p100                    every zoo model, batches 32 64 128, fp32
  ddlsim calibrate --device cpu --model resnet50 --batch 16
  ddlsim calibrate --framework torch --gpu h100 --model resnet50 --precision amp
  ddlsim calibrate --gpu v100 --model resnet50 --batch 64 --from-log tf_cnn_benchmarks.log
  ddlsim calibrate --calibration FILE --transfer-to v100 --transfer-to a100
  ddlsim calibrate network all_reduce_perf.log --inter-node ib-edr -o edr.json
                                                 (collectives: see 'calibrate network -h')

A CPU profile is recorded under the id 'cpu', an uncatalogued GPU under a slug of its name;
'ddlsim predict --gpu' knows neither. --catalog-id GPU records the files under a catalog GPU
instead (the real device stays in the file), for 'ddlsim predict --gpu GPU'. A throughput
anchor applies to the profiled calibration, before any --transfer-to.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` sub-command."""
    p = sub.add_parser(
        "calibrate",
        help="profile zoo models (TensorFlow or PyTorch) and write calibration files",
        description="Profile zoo models with the TensorFlow profiler (or torch.profiler) on a "
        "local GPU or the CPU and write per-layer calibration files that 'ddlsim predict' uses.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_target_args(p)
    _add_pass_args(p)
    _add_output_args(p)
    _add_anchor_args(p)
    p.set_defaults(func=run)
    targets = p.add_subparsers(dest="calibrate_target", metavar="{network}")
    targets.required = False
    netcal.register(targets)


def _add_target_args(p: argparse.ArgumentParser) -> None:
    """What to profile: --framework, --gpu, --device, --model, --batch, --precision."""
    p.add_argument(
        "--framework",
        choices=("tensorflow", "torch"),
        default="tensorflow",
        help="profiling backend: tensorflow (default; the calibrate extra) or torch "
        "(torch.profiler; the torch extra)",
    )
    p.add_argument("--gpu", help="catalog GPU to profile (e.g. p100, k80, v100); must be present")
    p.add_argument(
        "--device", help="device to profile: cpu or gpu:N (as the framework numbers them)"
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        help="zoo model, repeatable (default: all 12)",
    )
    p.add_argument(
        "--batch",
        action="append",
        type=_int,
        default=[],
        help="batch per device, repeatable (default: "
        f"{' '.join(map(str, DEFAULT_GPU_BATCHES))} on a GPU, "
        f"{' '.join(map(str, DEFAULT_CPU_BATCHES))} on the CPU)",
    )
    p.add_argument(
        "--precision",
        action="append",
        default=[],
        help="fp32 or amp, repeatable (default: fp32; amp needs a GPU with fast fp16)",
    )


def _add_pass_args(p: argparse.ArgumentParser) -> None:
    """How long each profiling pass runs: --steps, --warmup-steps."""
    p.add_argument(
        "--steps",
        type=_int,
        default=DEFAULT_STEPS,
        help=f"traced steps per pass (default: {DEFAULT_STEPS}; as many untraced ones are timed)",
    )
    p.add_argument(
        "--warmup-steps",
        type=_int,
        default=DEFAULT_WARMUP_STEPS,
        help=f"untimed steps first (default: {DEFAULT_WARMUP_STEPS})",
    )


def _add_output_args(p: argparse.ArgumentParser) -> None:
    """Where the files go and under which GPU: --output, --catalog-id."""
    p.add_argument(
        "--output",
        type=output_folder,
        default=None,
        metavar="DIR",
        help="an existing folder to write into, as <gpu>/<model>/b<batch>-<precision>.json "
        "(default: the user calibration directory predict searches, created if missing: "
        "$DDLSIM_CALIBRATION_DIR, else ~/.local/share/ddlsim/calibration)",
    )
    p.add_argument(
        "--catalog-id",
        default=None,
        metavar="GPU",
        help="record the files under this catalog GPU instead of the device's own id "
        "(the real device stays in the file)",
    )


def _add_anchor_args(p: argparse.ArgumentParser) -> None:
    """Anchoring and transfer: --anchor-throughput, --from-log, --transfer-to, --calibration."""
    p.add_argument(
        "--anchor-throughput",
        type=_number,
        default=None,
        metavar="IMG_PER_S",
        help="rescale the profile to this measured single-device throughput",
    )
    p.add_argument(
        "--from-log",
        type=Path,
        default=None,
        metavar="FILE",
        help="anchor to the throughput in a 1-GPU tf_cnn_benchmarks or Horovod benchmark log",
    )
    p.add_argument(
        "--transfer-to",
        action="append",
        default=[],
        metavar="GPU",
        help="also derive a calibration for this catalog GPU by roofline ratios, repeatable",
    )
    p.add_argument(
        "--calibration",
        type=Path,
        default=None,
        metavar="FILE",
        help="start from this calibration file instead of profiling (anchor / transfer it)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim calibrate``."""
    from ddlsim.calibration.store import user_dir
    from ddlsim.tools.calibrate.driver import Request, execute

    request = Request(
        output=args.output if args.output is not None else user_dir(),
        gpu=args.gpu,
        device=args.device,
        catalog_id=args.catalog_id,
        models=tuple(args.model),
        batches=tuple(args.batch),
        precisions=tuple(args.precision),
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        anchor_images_per_sec=args.anchor_throughput,
        from_log=args.from_log,
        transfer_to=tuple(args.transfer_to),
        calibration=args.calibration,
        framework=args.framework,
    )
    execute(request)
    return 0
