"""``ddlsim validate RUNS.csv``: predict every measured multi-GPU row and report the errors.

Each multi-GPU row is predicted with the compute calibration anchored to its single-GPU
baseline's measured throughput (same source, model, GPU, batch, precision, data, framework) and
the row's cluster and method; rows ddlsim cannot predict are listed with the reason, and one bad
row never refuses the file. See :mod:`ddlsim.tools.validate.mapping` for the mapping decisions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from ddlsim.cli.args import integer as _int
from ddlsim.cli.args import output_file
from ddlsim.cli.config_args import add_overrides
from ddlsim.cli.progress import Bar
from ddlsim.comm.mpi import DEFAULT_MPI
from ddlsim.comm.nccl import DEFAULT_NCCL_VERSION
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION
from ddlsim.execution.horovod import DEFAULT_HOROVOD_VERSION
from ddlsim.execution.strategy import PRECISIONS
from ddlsim.tools.analysis.plot import FORMATS as FIGURE_FORMATS

T = TypeVar("T")

_EPILOG = """\
baseline: a 1-GPU row of the same source, model, gpu, batch, precision, data and framework;
among several, the one agreeing with a speedup stated in the note, then the same platform
(the note's text before the first ',' or ';'), variant, comm, intra_node. The compute is
anchored to the baseline's images/s.
rows validated on the efficiency: a row with only scaling_efficiency (no images_per_sec) is
compared on ddlsim's predicted efficiency, anchored to its baseline; without a baseline in the
file it is predicted from the shipped calibration (note "compute not anchored").
rows under a catalog assumption: a network whose bandwidth the source does not state (ib ->
FDR 56 Gb/s, azure-eth -> 10 Gb/s) is predicted with the catalog's figure; the row carries
"assumption" and is summarised on its own, outside the headline.
skipped rows, each with a code and a reason (a bad cell or row: its line, column and value):
  bad-fields, no-run-id, duplicate-run-id (the later row), missing-value (empty required cell:
  model, gpu, gpus), bad-number (not an integer / not a finite number), not-positive (zero or
  negative count or value), unknown-name (model, gpu, intra_node, inter_node, transport, comm,
  precision, data or framework ddlsim does not know); suspect (the note flags the row
  SUSPECT), suspect-baseline (its baseline is flagged); baseline-row (single-GPU rows),
  no-value, comm-not-stated, comm-not-modelled ('other'), no-batch, no-precision,
  network-unknown (multi-node row without inter_node), no-baseline (images/s rows),
  ambiguous-baseline, not-runnable (what the GPU or cuDNN cannot run: a tf32 row of a GPU
  without TF32, a fused batch norm on NCHW or fp32), framework-not-modelled (--absolute: oneflow,
  paddle), bad-version (a nccl_version, horovod_version, framework_version or mpi cell that
  does not parse), unknown-instance (an instance ddlsim does not know: the nearest names),
  predict-error (any error ddlsim raises for the row). The rest of the file is validated.
releases and instance (optional columns): a stated nccl_version / horovod_version is used for
the methods that run it (the row's cell wins over --nccl-version / --horovod-version, which
fill the rows that state none); an unstated one is noted with the default assumed; the summary
groups rows by how much of that stack was stated (by_stack). instance (p2.8xlarge, ...) fills
the row's empty gpus_per_node, intra_node, inter_node, transport and nics_per_node.
transformer runs (traces/measured/README_transformers.md; recognised by samples_per_sec /
tokens_per_sec): tokens/s rows are scored in samples/s (tokens/s / seq_len); the baseline
also shares task, seq_len and variant but grad-accum-N; variant grad-accum-N, act-ckpt,
flash-attn (else unfused attention), lamb (else adamw), xla, tf32 (fp32 without it: tf32
off), bf16 and fp8 (with amp) set the row's numerics; comm other -> ddp where the note names a
flat all-reduce. Skips of their own: sharded (fsdp, zero1), gpu-ambiguous (empty gpu),
no-seq-len; bf16 on a V100 and the like are not-runnable.
software stack: the framework column (tensorflow, pytorch, mxnet) and the variant tokens
channels_last (-> --layout nhwc), xla (-> --fusion xla), dali (-> --input-pipeline dali), tf32
and apex-ddp set the row's stack; the compute is re-timed for it by per-layer model ratios.
the whole file is refused (one error line, exit 2) when it is unreadable, not UTF-8, has
broken CSV quoting, is empty, or its header lacks a required column (run_id, model, gpu, gpus)
or both value columns, or names a column twice; so is a --source id absent from the file
(the error lists those present), and a bad option value.
filled cells: --assume-baseline-batch takes the baseline's batch; --assume-batch N fills
what neither the row nor its baseline states (the baseline is then looked up at batch N);
--assume-precision fills an empty precision (baselines too); --assume-inter-node NETWORK (and
--assume-nics-per-node N) the network of a multi-node row that states none, such a row then
summarised under that assumption, outside the headline. Each filled row says so.
empty cells otherwise take predict's defaults, listed in the row's notes (data: synthetic).
"""


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``validate`` sub-command."""
    p = sub.add_parser(
        "validate",
        help="compare predictions with measured runs (a CSV in the measured-runs schema)",
        description="Predict every multi-GPU row of a measured-runs CSV with the compute\n"
        "anchored to the row's single-GPU baseline, and report the errors by source, method,\n"
        "GPU and network.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_output_args(p)
    _add_override_args(p)
    _add_assumption_args(p)
    p.set_defaults(func=run)


def _add_input_output_args(p: argparse.ArgumentParser) -> None:
    """The runs file, the rows to validate and the output: RUNS.csv, --json, --plot, --source."""
    p.add_argument("csv", metavar="RUNS.csv", help="measured runs (traces/measured/runs.csv)")
    p.add_argument("--json", action="store_true", help="print one JSON object: rows, summary")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        type=output_file(*FIGURE_FORMATS),
        default=None,
        help="write a figure (matplotlib; .png or .svg): predicted against measured images/s, "
        "and the 12 configuration families of the largest errors, measured and predicted "
        "against GPUs",
    )
    p.add_argument(
        "--source",
        action="append",
        default=None,
        metavar="SOURCE_ID",
        help="validate only the rows of this source (repeatable); baselines come from all rows",
    )


def _add_override_args(p: argparse.ArgumentParser) -> None:
    """Knobs set for every row (engine, versions, Horovod, sync, network cal.); engine: fast."""
    add_overrides(
        p,
        {
            "engine": "default: fast",
            "nccl_version": "NCCL release for every row whose nccl_version cell is empty "
            f"(default: predict's, {DEFAULT_NCCL_VERSION})",
            "horovod_version": "Horovod release for every row whose horovod_version cell is "
            f"empty (default: predict's, {DEFAULT_HOROVOD_VERSION})",
            "mpi": "MPI release for every horovod-mpi row whose mpi cell is empty (default: "
            f"predict's, {DEFAULT_MPI})",
            "fusion_threshold_mb": "HOROVOD_FUSION_THRESHOLD for every Horovod row (default: the "
            "release's)",
            "cycle_time_ms": "HOROVOD_CYCLE_TIME for every Horovod row (default: the release's)",
            "rank_sigma": "per-rank speed variability for every row (default: predict's fitted "
            "value)",
            "host_contention": "compute slowdown of GPUs sharing a node, for every row "
            f"(default: predict's, {DEFAULT_HOST_CONTENTION:g})",
            "interference": "do not slow compute while collectives hold SMs, for every row",
            "network_calibration": "network calibration file ('ddlsim calibrate network'): rows "
            "on the network it measured use its fitted link terms (runs and collectives files)",
        },
    )
    p.set_defaults(engine="fast")


def _add_assumption_args(p: argparse.ArgumentParser) -> None:
    """What to assume where a row is silent (batch, precision, network), and --absolute."""
    p.add_argument(
        "--assume-baseline-batch",
        action="store_true",
        help="predict rows whose batch_per_gpu is empty with their baseline's batch",
    )
    p.add_argument(
        "--assume-batch",
        type=_positive_int,
        default=None,
        metavar="N",
        help="batch_per_gpu for rows where neither the row nor its baseline states one "
        "(after --assume-baseline-batch); noted on each row",
    )
    p.add_argument(
        "--absolute",
        action="store_true",
        help="predict every row, 1-GPU rows included, from ddlsim's own per-layer compute "
        "model (no measured anchor), grouped by GPU, precision and framework, beside the "
        "anchored (scaling) score of the same groups",
    )
    p.add_argument(
        "--assume-precision",
        default=None,
        choices=PRECISIONS,
        help="precision for rows that do not state one; noted on each row",
    )
    p.add_argument(
        "--assume-inter-node",
        default=None,
        metavar="NETWORK",
        help="network of multi-node rows that state none (e.g. ib-hdr for DGX A100 "
        "SuperPODs); noted on each row, and those rows are summarised under that assumption, "
        "outside the headline",
    )
    p.add_argument(
        "--assume-nics-per-node",
        type=_positive_int,
        default=None,
        metavar="N",
        help="with --assume-inter-node: its NICs per node (multi-rail; DGX A100 / H100: 8)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim validate``."""
    from ddlsim.errors import ConfigError
    from ddlsim.tools.validate.core import validate_file
    from ddlsim.tools.validate.mapping import ValidateOptions
    from ddlsim.tools.validate.report import format_report, format_side_by_side
    from ddlsim.tools.validate.runs import load_runs
    from ddlsim.tools.validate.stats import STACK_GROUP, summarise

    if _is_collectives(args.csv):
        return _run_collectives(args)
    options = ValidateOptions(  # checks every value before the file is read
        engine=args.engine,
        fusion_threshold_mb=args.fusion_threshold_mb,
        cycle_time_ms=args.cycle_time_ms,
        rank_sigma=args.rank_sigma,
        host_contention=args.host_contention,
        interference=not args.no_interference,
        nccl_version=args.nccl_version,
        horovod_version=args.horovod_version,
        mpi=args.mpi,
        assume_baseline_batch=args.assume_baseline_batch,
        assume_batch=args.assume_batch,
        assume_precision=args.assume_precision,
        assume_inter_node=args.assume_inter_node,
        assume_nics_per_node=args.assume_nics_per_node,
        absolute=args.absolute,
        network_calibration=args.network_calibration,
    )
    if args.plot:
        from ddlsim.tools.validate.plot import _matplotlib

        _matplotlib()  # fail before the run, not after it
    table = load_runs(args.csv)
    sources = None
    if args.source:
        sources = set(args.source)
        absent = sorted(sources - set(table.sources))
        if absent:
            present = ", ".join(table.sources) or "none (source_id is empty on every row)"
            raise ConfigError(
                f"--source {', '.join(absent)}: not in {args.csv}; sources present: {present}"
            )
    results = _with_progress(
        lambda bar: validate_file(table, options, sources=sources, progress=bar)
    )
    summary = summarise(results, absolute=args.absolute)
    if args.absolute:  # today's anchored (scaling) score of the same groups, beside it
        anchored = _with_progress(
            lambda bar: validate_file(
                table, replace(options, absolute=False), sources=sources, progress=bar
            )
        )
        summary["anchored_by_gpu_precision_framework"] = summarise(anchored, absolute=True)[
            STACK_GROUP
        ]
    if args.plot:
        from ddlsim.tools.validate.plot import plot_validation

        plot_validation(results, args.plot, title=args.csv)
    if args.json:
        doc = {"rows": [r.to_json() for r in results], "summary": summary}
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(args.csv, results, summary))
        if args.absolute:
            sys.stdout.write(format_side_by_side(summary))
    return 0


def _with_progress(work: Callable[[Bar], T]) -> T:
    """``work(bar)`` with a progress bar of rows on stderr: redrawn on a terminal, a line every
    10 s in a log (nothing for a run shorter than that)."""
    bar = Bar(unit="rows", quiet_log=True)
    try:
        return work(bar)
    finally:
        bar.close()


def _is_collectives(path: str) -> bool:
    """Whether ``path`` is a measured-collectives file (its header; unreadable: no)."""
    from ddlsim.errors import DdlsimError
    from ddlsim.inputs import RUNS_CSV_MAX_BYTES, check_input
    from ddlsim.tools.validate.collectives import is_collectives_header

    try:  # a FIFO or device is never opened: the runs reader refuses it with the reason
        check_input(path, "runs file", RUNS_CSV_MAX_BYTES)
    except DdlsimError:
        return False
    try:
        with open(path, encoding="utf-8-sig") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    return is_collectives_header(first.split(","))


#: validate options that mean nothing for a collectives file: (attribute, flag, default)
_RUNS_ONLY = (
    ("plot", "--plot", None),
    ("nccl_version", "--nccl-version", None),
    ("horovod_version", "--horovod-version", None),
    ("mpi", "--mpi", None),
    ("fusion_threshold_mb", "--fusion-threshold-mb", None),
    ("cycle_time_ms", "--cycle-time-ms", None),
    ("rank_sigma", "--rank-sigma", None),
    ("host_contention", "--host-contention", None),
    ("no_interference", "--no-interference", False),
    ("assume_baseline_batch", "--assume-baseline-batch", False),
    ("assume_batch", "--assume-batch", None),
    ("assume_precision", "--assume-precision", None),
    ("assume_inter_node", "--assume-inter-node", None),
    ("assume_nics_per_node", "--assume-nics-per-node", None),
    ("engine", "--engine", "fast"),
    ("absolute", "--absolute", False),
)


def _run_collectives(args: argparse.Namespace) -> int:
    """``ddlsim validate`` on a measured-collectives file
    (:mod:`ddlsim.tools.validate.collectives`):
    every row against the communication model predict builds; ``--source`` selects setups."""
    from ddlsim.errors import ConfigError
    from ddlsim.tools.validate import collective_report as report
    from ddlsim.tools.validate.collectives import read_collectives, validate_collectives

    for attr, flag, default in _RUNS_ONLY:
        if getattr(args, attr) != default:
            raise ConfigError(f"{flag} applies to measured runs, not to a collectives file")
    cal = None
    if args.network_calibration is not None:
        from ddlsim.calibration.network import load

        cal = load(args.network_calibration)
    rows = read_collectives(args.csv)
    if args.source:
        present = sorted({r.setup_id for r in rows})
        absent = sorted(set(args.source) - set(present))
        if absent:
            raise ConfigError(
                f"--source {', '.join(absent)}: no such setup_id in {args.csv}; present: "
                f"{', '.join(present)}"
            )
        rows = [r for r in rows if r.setup_id in args.source]
    results = validate_collectives(rows, cal)
    summary = report.summarise(results)
    if args.json:
        json.dump(
            {"rows": [r.to_json() for r in results], "summary": summary}, sys.stdout, indent=2
        )
        sys.stdout.write("\n")
    else:
        sys.stdout.write(report.format_report(args.csv, results, summary))
    return 0
