"""One measured row and its baseline -> keyword arguments of :func:`ddlsim.predict`.

Decisions (documented in ``ddlsim validate --help`` and the README):

- The compute calibration is anchored to the baseline's measured throughput
  (``single_gpu_throughput``), so the comparison isolates the scaling model.
- A row with only ``scaling_efficiency`` is validated on the efficiency (ddlsim's predicted
  efficiency against the stated one); the anchor still sets the compute/communication ratio.
- Rows are skipped, with a reason and a short ``code``, when ddlsim cannot predict them: a
  single-GPU row (a baseline), no measured value, ``comm`` empty or not modelled (``other``),
  ``batch_per_gpu`` or ``precision`` not stated, a multi-node row without a network, a network
  whose bandwidth the catalog only assumes (``ib``, ``azure-eth``), no single-GPU baseline.
  The framework is not a reason: Horovod, parameter servers and BytePS are modelled as
  exchanges, and the anchor carries the framework's compute speed.
- Empty cells left to predict's defaults are listed in the row's notes: ``data`` (synthetic
  assumed), ``intra_node`` (the GPU's usual server), ``gpus_per_node``, ``transport``.
- ``variant`` tokens map onto predict's options where one exists: ``ps-colocated`` ->
  ``ps_colocated=True``; the parameter device (``ps-vars-on-cpu`` / ``ps-vars-on-gpu`` /
  ``local_parameter_device=gpu``) -> ``ps_placement``; ``dali`` (GPU input pipeline) ->
  ``input_pipeline="dali"``. The others are listed in the notes as not mapped: ``xla`` and the
  implementation tokens (``ngc-dle``, ``gluon-cv``, ...) change compute, which the baseline
  anchor carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddlsim.cluster import catalog
from ddlsim.errors import DdlsimError
from ddlsim.strategy import COMM_METHODS
from ddlsim.validate.baseline import BaselineIndex
from ddlsim.validate.runs import Run

METRIC_IPS = "images_per_sec"
METRIC_EFFICIENCY = "scaling_efficiency"

#: variant tokens that set a predict option
VARIANT_OPTIONS: dict[str, dict[str, Any]] = {
    "ps-colocated": {"ps_colocated": True},
    "ps-vars-on-cpu": {"ps_placement": "cpu"},
    "ps-vars-on-gpu": {"ps_placement": "gpu"},
    "local_parameter_device=gpu": {"ps_placement": "gpu"},
    "dali": {"input_pipeline": "dali"},
}


@dataclass(frozen=True)
class ValidateOptions:
    """Settings applied to every row (Horovod knobs, engine, opt-in assumptions)."""

    engine: str = "fast"
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    rank_sigma: float | None = None
    assume_baseline_batch: bool = False
    allow_assumed_bandwidth: bool = False


@dataclass(frozen=True)
class RowPlan:
    """How to predict one row (``kwargs``), or why it cannot be (``code``, ``reason``)."""

    kwargs: dict[str, Any] | None
    metric: str | None = None
    baseline: Run | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    code: str = ""
    reason: str = ""


def _skip(code: str, reason: str, baseline: Run | None = None) -> RowPlan:
    return RowPlan(None, code=code, reason=reason, baseline=baseline)


def plan_row(run: Run, index: BaselineIndex, options: ValidateOptions) -> RowPlan:
    """Map ``run`` onto predict's keyword arguments, or say why it cannot be predicted."""
    if run.is_single_gpu:
        return _skip("baseline-row", "single-GPU row (a baseline; nothing to scale)")
    if run.images_per_sec is not None:
        metric = METRIC_IPS
    elif run.scaling_efficiency is not None:
        metric = METRIC_EFFICIENCY
    else:
        return _skip("no-value", "neither images_per_sec nor scaling_efficiency is stated")
    if not run.comm:
        return _skip("comm-not-stated", "comm method not stated")
    if run.comm not in COMM_METHODS:
        return _skip(
            "comm-not-modelled",
            f"comm {run.comm!r} is not a modelled method ({', '.join(COMM_METHODS)})",
        )
    notes: list[str] = []
    fill_batch = run.batch_per_gpu is None and options.assume_baseline_batch
    if run.batch_per_gpu is None and not fill_batch:
        return _skip("no-batch", "batch_per_gpu not stated (ddlsim needs the per-GPU batch)")
    if not run.precision:
        return _skip("no-precision", "precision not stated (fp32 or amp)")
    multi_node = run.multi_node
    if multi_node and run.inter_node in ("", "none"):
        return _skip("network-unknown", "multi-node run without a stated network (inter_node)")
    if multi_node and not options.allow_assumed_bandwidth:
        assumed = _assumed_bandwidth(run)
        if assumed:
            return _skip("network-bandwidth-unknown", assumed)
    choice = index.choose(run, any_batch=fill_batch)
    if choice.run is None:
        return _skip(choice.code, choice.reason)
    baseline = choice.run
    batch = run.batch_per_gpu
    if batch is None:
        if baseline.batch_per_gpu is None:
            return _skip("no-batch", "batch_per_gpu stated neither by the row nor its baseline")
        batch = baseline.batch_per_gpu
        notes.append(f"batch_per_gpu not stated: the baseline's {batch} assumed")
    kwargs: dict[str, Any] = {
        "model": run.model,
        "gpus": run.gpus,
        "gpu": run.gpu,
        "gpus_per_node": run.gpus_per_node,
        "intra_node": run.intra_node or None,
        "inter_node": run.inter_node or None,
        "transport": (run.transport or None) if multi_node else None,
        "comm": run.comm,
        "n_ps": run.n_ps,
        "batch": batch,
        "precision": run.precision,
        "data": run.data or "synthetic",
        "single_gpu_throughput": baseline.images_per_sec,
        "engine": options.engine,
    }
    if options.fusion_threshold_mb is not None:
        kwargs["fusion_threshold_mb"] = options.fusion_threshold_mb
    if options.cycle_time_ms is not None:
        kwargs["cycle_time_ms"] = options.cycle_time_ms
    if options.rank_sigma is not None:
        kwargs["rank_sigma"] = options.rank_sigma
    notes.extend(_defaults_notes(run, multi_node))
    unmapped = []
    for token in run.variant:
        if token in VARIANT_OPTIONS:
            kwargs.update(VARIANT_OPTIONS[token])
        else:
            unmapped.append(token)
    if unmapped:
        notes.append(f"variant not mapped: {', '.join(unmapped)}")
    return RowPlan(kwargs, metric, baseline, tuple(notes))


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
    return notes


def _assumed_bandwidth(run: Run) -> str:
    """A skip reason when the catalog's bandwidth of the row's network is an assumption."""
    try:
        net = catalog.network(run.inter_node, run.gpu)
    except DdlsimError:  # an unknown name: predict reports it as the row's reason
        return ""
    if "assumption:" in net.sources.get("bandwidth_Gbps", ""):
        gbps = net.nominal_bandwidth_Bps * 8 / 1e9
        return (
            f"network {run.inter_node!r}: bandwidth not stated by its source (the catalog "
            f"assumes {gbps:g} Gb/s; --allow-assumed-bandwidth predicts it anyway)"
        )
    return ""
