"""One measured row and its baseline -> keyword arguments of :func:`ddlsim.predict`.

Decisions (documented in ``ddlsim validate --help``, the README and docs/design.md):

- The compute calibration is anchored to the baseline's measured throughput
  (``single_gpu_throughput``), so the comparison isolates the scaling model.
- A row with only ``scaling_efficiency`` is validated on the efficiency (ddlsim's predicted
  efficiency against the stated one); the anchor still sets the compute/communication ratio.
  Without a single-GPU baseline in the file such a row is predicted from the shipped
  calibration (not anchored) and says so in its notes; a row with ``images_per_sec`` and no
  baseline is skipped (``no-baseline``).
- A name ddlsim does not know (``model``, ``gpu``, ``intra_node``, ``inter_node``,
  ``transport``, ``comm``, ``precision``, ``data``) skips the row (``unknown-name``), naming
  the column and the cell.
- Rows are also skipped, with a reason and a short ``code``, when ddlsim cannot predict them: a
  single-GPU row (a baseline), no measured value, ``comm`` empty or not modelled (``other``),
  ``batch_per_gpu`` or ``precision`` not stated (unless an ``assume_*`` option fills it), a
  multi-node row without a network, an ambiguous baseline. The framework is not a reason:
  Horovod, parameter servers and BytePS are modelled as exchanges, and the anchor carries the
  framework's compute speed.
- A network whose bandwidth the catalog marks as an assumption (``ib`` -> FDR 56 Gb/s,
  ``azure-eth`` -> 10 Gb/s) is predicted under that assumption; the plan carries it
  (``assumption``) so that reports keep such rows out of the headline.
- Empty cells left to predict's defaults are listed in the row's notes: ``data`` (synthetic
  assumed), ``intra_node`` (the GPU's usual server), ``gpus_per_node``, ``transport``, and on
  multi-node rows ``nics_per_node`` (1 assumed).
- ``variant`` tokens map onto predict's options where one exists: ``ps-colocated`` ->
  ``ps_colocated=True``; the parameter device (``ps-vars-on-cpu`` / ``ps-vars-on-gpu`` /
  ``local_parameter_device=gpu``) -> ``ps_placement``; ``dali`` (GPU input pipeline) ->
  ``input_pipeline="dali"``; the software stack: ``channels_last`` -> ``layout="nhwc"``,
  ``xla`` -> ``fusion="xla"``, ``tf32`` -> ``tf32=True``; ``apex-ddp`` -> apex's bucket size.
  The ``framework`` column -> ``framework`` (tensorflow, pytorch, mxnet; a framework with no
  modelled stack, oneflow or paddle, keeps TensorFlow's where a baseline anchors the compute,
  and is skipped by ``--absolute``, ``framework-not-modelled``). The others are listed in the
  notes as not mapped: the implementation tokens (``ngc-dle``, ``gluon-cv``, ...).
- A combination the hardware or library cannot run (a ``tf32`` row on a GPU without TF32
  tensor cores, cuDNN's fused batch norm on NCHW or fp32 tensors) is skipped with the reason
  (``not-runnable``), never timed on another path.
- The releases the row states (``nccl_version``, ``horovod_version``; ``framework_version`` and
  ``mpi`` are checked and noted) are the ones it is predicted with, an unparseable cell skips
  it (``bad-version``), an unstated one is noted with its default
  (:mod:`~ddlsim.tools.validate.stack_cells`); a named ``instance`` fills the empty system
  cells, an unknown one skips the row (``unknown-instance``;
  :mod:`~ddlsim.tools.validate.instance_cells`).
- A row whose ``note`` flags it ``SUSPECT`` (the measured files' convention: its stated
  scaling exceeds the GPU count, or a 1-GPU cell is implausibly low) is skipped
  (``suspect``), and so is a row whose baseline is flagged (``suspect-baseline``): an anchor
  the source itself doubts would put its error on the scaling model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ddlsim.calibration.network import network_calibration_kwargs
from ddlsim.compute.stack import FRAMEWORKS, UNMODELLED_FRAMEWORKS
from ddlsim.compute.stack import resolve as resolve_stack
from ddlsim.errors import DdlsimError, UnknownNameError
from ddlsim.execution.strategy import COMM_METHODS, DATA_KINDS, PRECISIONS
from ddlsim.system import catalog
from ddlsim.system.specs import TRANSPORTS
from ddlsim.tools.validate.baseline import BaselineChoice, BaselineIndex
from ddlsim.tools.validate.instance_cells import UNKNOWN_INSTANCE, with_instance
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import Run
from ddlsim.tools.validate.stack_cells import BAD_VERSION, stack_plan
from ddlsim.units import MiB
from ddlsim.workload.zoo import MODEL_NAMES

__all__ = ["METRIC_EFFICIENCY", "METRIC_IPS", "RowPlan", "ValidateOptions", "plan_row"]

METRIC_IPS = "images_per_sec"
METRIC_EFFICIENCY = "scaling_efficiency"
UNKNOWN_NAME = "unknown-name"
#: the measured files' flag, in ``note``, of a row its compiler doubts
SUSPECT = "SUSPECT"
#: ``comm`` values of the schema that are not exchange methods ddlsim models
SCHEMA_ONLY_COMMS = ("single", "other")

#: variant tokens that set a predict option
#: apex DDP's default ``message_size`` (elements per all-reduce bucket)
APEX_MESSAGE_ELEMENTS = 10_000_000
VARIANT_OPTIONS: dict[str, dict[str, Any]] = {
    "ps-colocated": {"ps_colocated": True},
    "ps-vars-on-cpu": {"ps_placement": "cpu"},
    "ps-vars-on-gpu": {"ps_placement": "gpu"},
    "local_parameter_device=gpu": {"ps_placement": "gpu"},
    "dali": {"input_pipeline": "dali"},
    # the scheduling policies the HKBU benchmark names (README of traces/measured)
    "bsp": {"schedule": "bsp"},
    "wfbp": {"schedule": "wfbp"},
    "mg-wfbp": {"schedule": "mg-wfbp"},
    "bytescheduler": {"schedule": "bytescheduler"},
    # TF32 tensor-core math on (fp32 rows of Ampere and later): predict's default; a row of a
    # GPU without TF32 tensor cores is not runnable (:func:`_not_runnable`)
    "tf32": {"tf32": True},
    # the software stack (ddlsim.compute.stack): PyTorch's channels_last memory format, XLA
    "channels_last": {"layout": "nhwc"},
    "xla": {"fusion": "xla"},
    # NVIDIA apex's DistributedDataParallel: buckets of message_size = 10,000,000 elements
    # (apex/parallel/distributed.py default) of fp32 gradients, no smaller first bucket
    "apex-ddp": {"bucket_cap_mb": APEX_MESSAGE_ELEMENTS * 4 / MiB},
}


@dataclass(frozen=True)
class RowPlan:
    """How to predict one row (``kwargs``), or why it cannot be (``code``, ``reason``, and
    the ``column`` / ``value`` at fault where one is). ``anchored``: the compute is scaled to
    the baseline's throughput; ``assumption``: the catalog assumption the prediction rests on."""

    kwargs: dict[str, Any] | None
    metric: str | None = None
    baseline: Run | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    code: str = ""
    reason: str = ""
    column: str | None = None
    value: str | None = None
    anchored: bool = False
    assumption: str | None = None
    #: how much of the release stack its method uses the row states
    #: (:data:`~ddlsim.tools.validate.stack_cells.STACK_LABELS`)
    stack: str = ""


def _skip(code: str, reason: str, baseline: Run | None = None) -> RowPlan:
    return RowPlan(None, code=code, reason=reason, baseline=baseline)


def _cell_skip(code: str, reason: str, column: str, value: str) -> RowPlan:
    """A row skipped for one cell (listed on its own line by the report)."""
    return RowPlan(None, code=code, reason=reason, column=column, value=value)


def plan_row(run: Run, index: BaselineIndex, options: ValidateOptions) -> RowPlan:
    """Map ``run`` onto predict's keyword arguments, or say why it cannot be predicted."""
    unknown = unknown_name(run)
    if unknown is not None:
        column, message = unknown
        return _cell_skip(
            UNKNOWN_NAME, f"column {column!r}: {message}", column, getattr(run, column)
        )
    if SUSPECT in run.note:
        return _skip("suspect", "the file flags the row SUSPECT (see its note)")
    if run.is_single_gpu and not options.absolute:
        return _skip("baseline-row", "single-GPU row (a baseline; nothing to scale)")
    if options.absolute and run.framework in UNMODELLED_FRAMEWORKS:
        return _skip(
            "framework-not-modelled",
            f"framework {run.framework!r} has no modelled software stack (--absolute times "
            f"the compute with one: {', '.join(FRAMEWORKS)})",
        )
    if run.images_per_sec is not None:
        metric = METRIC_IPS
    elif run.scaling_efficiency is not None:
        metric = METRIC_EFFICIENCY
    else:
        return _skip("no-value", "neither images_per_sec nor scaling_efficiency is stated")
    comm = run.comm
    if run.is_single_gpu and comm not in COMM_METHODS:
        comm = "horovod-nccl"  # one GPU exchanges nothing: any method predicts the same
    elif not comm:
        return _skip("comm-not-stated", "comm method not stated")
    if comm not in COMM_METHODS:
        return _skip(
            "comm-not-modelled",
            f"comm {run.comm!r} is not a modelled method ({', '.join(COMM_METHODS)})",
        )
    notes: list[str] = []
    filled = with_instance(run)
    if isinstance(filled, str):
        return _cell_skip(UNKNOWN_INSTANCE, filled, "instance", run.instance)
    run, instance_notes = filled
    notes.extend(instance_notes)
    stack = stack_plan(run, comm, options)
    if stack.column is not None:
        return _cell_skip(BAD_VERSION, stack.reason, stack.column, getattr(run, stack.column))
    if not run.precision:
        if options.assume_precision is None:
            return _skip("no-precision", "precision not stated (fp32 or amp)")
        run = with_assumed_cells(run, options)
        notes.append(f"precision not stated: {run.precision} assumed (--assume-precision)")
    multi_node = run.multi_node
    network = assume_network(run, options)
    if isinstance(network, RowPlan):
        return network
    run, network_assumed = network
    notes.extend([network_assumed] if network_assumed else [])
    batch, choice, batch_notes = _batch_and_baseline(run, index, options)
    if batch is None:
        if choice.run is not None:
            reason = "batch_per_gpu stated neither by the row nor its single-GPU baseline"
        else:
            reason = "batch_per_gpu not stated (ddlsim needs the per-GPU batch)"
        return _skip("no-batch", reason, choice.run)
    notes.extend(batch_notes)
    baseline = choice.run
    if baseline is not None and SUSPECT in baseline.note:
        return _skip(
            "suspect-baseline",
            f"its baseline {baseline.run_id} is flagged SUSPECT by the file (see its note)",
            baseline,
        )
    if options.absolute:
        baseline = None
        notes.append("compute not anchored: ddlsim's own per-layer model (--absolute)")
    elif baseline is None:
        if metric != METRIC_EFFICIENCY or choice.code != "no-baseline":
            return _skip(choice.code, choice.reason)
        notes.append(f"compute not anchored: {_no_anchor(choice)}")
    kwargs = cluster_kwargs(run, comm, baseline, options)
    kwargs.update(n_ps=run.n_ps, batch=batch, precision=run.precision, **stack.kwargs)
    notes.extend([*_defaults_notes(run, multi_node), *stack.notes])
    unmapped = []
    for token in run.variant:
        if token in VARIANT_OPTIONS:
            kwargs.update(VARIANT_OPTIONS[token])
        else:
            unmapped.append(token)
    if unmapped:
        notes.append(f"variant not mapped: {', '.join(unmapped)}")
    if run.framework in FRAMEWORKS:
        kwargs["framework"] = run.framework
    elif run.framework:
        notes.append(
            f"framework {run.framework!r} has no modelled stack: TensorFlow's assumed (the "
            "anchor carries its compute)"
        )
    problem = _not_runnable(run, kwargs)
    if problem is not None:
        return _skip("not-runnable", problem, baseline)
    assumption = network_assumed or (assumed_bandwidth(run) if multi_node else None)
    if options.network_calibration is not None and multi_node:
        notes.extend(network_calibration_kwargs(options.network_calibration, run, kwargs))
    return RowPlan(
        kwargs,
        metric,
        baseline,
        tuple(notes),
        anchored=baseline is not None,
        assumption=assumption,
        stack=stack.label,
    )


#: a GPU whose memory size the source states in its note, when the catalog keeps that size
#: apart: (the row's gpu, the note's words) -> the catalog part (the DGX-1 with V100 32GB of
#: 2018, "8x V100 32GB"; Lambda's "V100 32GB" label)
STATED_MEMORY_PARTS = {("v100-sxm2", "32gb"): "v100-sxm2-32gb", ("v100", "32gb"): "v100-sxm2-32gb"}
_MEMORY_WORDS = re.compile(r"V100[- ]?(\d+) ?GB", re.IGNORECASE)


def stated_gpu(run: Run) -> str:
    """The row's GPU, as the catalog part of the memory size its note states where the
    catalog keeps that size apart (:data:`STATED_MEMORY_PARTS`), else its ``gpu`` cell."""
    match = _MEMORY_WORDS.search(run.note or "")
    if match is None:
        return run.gpu
    return STATED_MEMORY_PARTS.get((run.gpu, f"{match.group(1)}gb"), run.gpu)


def cluster_kwargs(
    run: Run, comm: str, baseline: Run | None, options: ValidateOptions
) -> dict[str, Any]:
    """predict's keywords of the row's cluster, method, data and anchor (the baseline's
    throughput), and the options every row takes."""
    return {
        "model": run.model,
        "gpus": run.gpus,
        "gpu": stated_gpu(run),
        "gpus_per_node": run.gpus_per_node,
        "intra_node": run.intra_node or None,
        "inter_node": run.inter_node or None,
        "transport": (run.transport or None) if run.multi_node else None,
        "nics_per_node": run.nics_per_node or 1,
        "comm": comm,
        "data": run.data or "synthetic",
        "single_gpu_throughput": baseline.images_per_sec if baseline else None,
        **options.predict_kwargs(),
    }


def assume_network(run: Run, options: ValidateOptions) -> tuple[Run, str | None] | RowPlan:
    """``run`` with the network ``--assume-inter-node`` gives a multi-node row that states
    none, and the note saying so (None: nothing assumed); the skip when there is none to
    give (``network-unknown``)."""
    if not run.multi_node or run.inter_node not in ("", "none"):
        return run, None
    if options.assume_inter_node is None:
        return _skip("network-unknown", "multi-node run without a stated network (inter_node)")
    nics = options.assume_nics_per_node or run.nics_per_node or 1
    run = replace(run, inter_node=options.assume_inter_node, nics_per_node=nics)
    return run, (
        f"inter_node not stated: {options.assume_inter_node} with {nics} NIC(s) per node "
        "assumed (--assume-inter-node)"
    )


def _not_runnable(run: Run, kwargs: dict[str, Any]) -> str | None:
    """Why the row's GPU or library cannot run what it states (TF32 on a GPU without TF32
    tensor cores; a stack cuDNN cannot run), or None."""
    try:
        device = catalog.device(run.gpu)
        if "tf32" in run.variant and device.peak_tf32_flops is None:
            return f"variant 'tf32': GPU {run.gpu!r} has no TF32 tensor cores"
        resolve_stack(
            kwargs.get("framework"),
            kwargs.get("layout"),
            kwargs.get("fusion"),
            device,
            run.precision,
        )
    except DdlsimError as exc:
        return str(exc)
    return None


def with_assumed_cells(run: Run, options: ValidateOptions) -> Run:
    """``run`` with the cells ``options`` fill for every row (the precision) filled in; the
    baselines are looked up among rows filled the same way."""
    if not run.precision and options.assume_precision is not None:
        return replace(run, precision=options.assume_precision)
    return run


def _batch_and_baseline(
    run: Run, index: BaselineIndex, options: ValidateOptions
) -> tuple[int | None, BaselineChoice, list[str]]:
    """The per-GPU batch (``None``: not stated and not filled), the baseline choice, notes.

    The row's batch, else (``assume_baseline_batch``) the batch of a baseline found ignoring
    the batch, else (``assume_batch``) the assumed one, which then keys the baseline look-up
    unless a baseline that also leaves the batch empty was found.
    """
    if run.batch_per_gpu is not None:
        return run.batch_per_gpu, index.choose(run), []
    choice = index.choose(run)  # a baseline that leaves the batch empty as well
    if choice.run is None and options.assume_baseline_batch:
        loose = index.choose(run, any_batch=True)
        if loose.run is not None and loose.run.batch_per_gpu is not None:
            batch = loose.run.batch_per_gpu
            return batch, loose, [f"batch_per_gpu not stated: the baseline's {batch} assumed"]
        if loose.code != "no-baseline":
            choice = loose
    if options.assume_batch is None:
        return None, choice, []
    batch = options.assume_batch
    if choice.run is None and choice.code == "no-baseline":
        choice = index.choose(replace(run, batch_per_gpu=batch))
    return batch, choice, [f"batch_per_gpu not stated: {batch} assumed (--assume-batch)"]


def _no_anchor(choice: BaselineChoice) -> str:
    if "state no images_per_sec" in choice.reason:
        return f"{choice.reason} (shipped calibration used)"
    return "no single-GPU baseline in the file (shipped calibration used)"


#: columns naming something from a closed vocabulary: column -> (what, valid names)
_CLOSED_NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "model": ("model", MODEL_NAMES),
    "transport": ("transport", TRANSPORTS),
    "comm": ("comm method", (*COMM_METHODS, *SCHEMA_ONLY_COMMS)),
    "precision": ("precision", PRECISIONS),
    "data": ("data", DATA_KINDS),
    "framework": ("framework", (*FRAMEWORKS, *UNMODELLED_FRAMEWORKS)),
}
#: columns naming a catalog entry: column -> look-up (raises UnknownNameError)
_CATALOG_NAMES: dict[str, Callable[[str], object]] = {
    "gpu": catalog.device,
    "intra_node": catalog.intra_link,
    "inter_node": catalog.network,
}
#: the columns :func:`unknown_name` checks, in that order
NAME_COLUMNS = (
    "model",
    "gpu",
    "intra_node",
    "inter_node",
    "transport",
    "comm",
    "precision",
    "data",
    "framework",
)


def unknown_name(run: Run) -> tuple[str, str] | None:
    """``(column, message)`` for the first non-empty cell naming something ddlsim does not
    know (names are compared as predict compares them: catalog names and transports ignore
    case)."""
    for column in NAME_COLUMNS:
        value = getattr(run, column)
        if not value:
            continue
        if column in _CATALOG_NAMES:
            try:
                _CATALOG_NAMES[column](value)
            except UnknownNameError as exc:
                return column, str(exc)
            continue
        what, valid = _CLOSED_NAMES[column]
        if (value.lower() if column == "transport" else value) not in valid:
            return column, str(UnknownNameError(what, value, valid))
    return None


def _defaults_notes(run: Run, multi_node: bool) -> list[str]:
    notes = []
    if not run.data:
        notes.append("data not stated: synthetic assumed")
    if not run.intra_node:
        notes.append("intra_node not stated: the GPU's usual server assumed")
    if run.gpus_per_node is None:
        notes.append("gpus_per_node not stated: predict's default")
    if multi_node and not run.transport:
        notes.append("transport not stated: the network's default")
    if multi_node and run.nics_per_node is None:
        notes.append("nics_per_node not stated: 1 NIC per node assumed")
    return notes


def assumed_bandwidth(run: Run) -> str | None:
    """The catalog assumption behind the bandwidth of the row's network, if it is one."""
    try:
        net = catalog.network(run.inter_node, run.gpu)
    except DdlsimError:  # an unknown name is the row's skip reason, found earlier
        return None
    if "assumption:" not in net.sources.get("bandwidth_Gbps", ""):
        return None
    gbps = net.nominal_bandwidth_Bps * 8 / 1e9
    return (
        f"inter_node {run.inter_node!r}: bandwidth not stated by the source; the catalog "
        f"assumes {gbps:g} Gb/s"
    )
