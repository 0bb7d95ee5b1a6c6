"""Shipped calibrations: the per-layer model's step, anchored to a measured single-GPU run
where one of the exact configuration exists.

``roofline_profile`` times a step layer by layer with the per-layer model;
``anchored_profile`` produces the shipped calibration for one (model, device, batch,
precision):

- ``roofline-anchored``: a measured single-GPU run of this exact configuration (model, GPU,
  batch, precision) exists; the step time is the measured one (median if several), the model
  only splits it across layers, and the provenance names the runs (the *anchor*);
- ``per-layer-model``: no such run; the step is the per-layer model's own, with no factor. A
  measured/model ratio of *other* configurations (another model, batch or GPU) is never applied:
  it would stand in for physics the model lacks and travel to GPUs it was not measured on.
  :func:`measured_over_model` reports those ratios as a check instead.

"Roofline" here is the whole per-layer model of :mod:`ddlsim.compute.roofline`: its
convolutions and matrix products are timed by the kernel model fitted to measured cuDNN kernels
(:mod:`ddlsim.compute.kernels`), which every file's provenance names (``per_layer_model``:
the model, the kernel files, libraries and GPUs it was fitted on, its coefficients, and which
kernel families time this GPU at this precision).
"""

from __future__ import annotations

import csv
import datetime as _dt
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ddlsim.calibration.profile import LayerTiming, ModelProfile
from ddlsim.compute import kernels
from ddlsim.compute.roofline import model_times_s
from ddlsim.compute.stack import Stack
from ddlsim.compute.stack import resolve as resolve_stack
from ddlsim.system.specs import DeviceSpec
from ddlsim.version import __version__
from ddlsim.workload.layers import ModelSpec


@dataclass(frozen=True)
class Anchor:
    """A measured single-GPU throughput usable as an anchor."""

    run_id: str
    model: str
    gpu: str
    batch_per_gpu: int
    precision: str
    data: str
    images_per_sec: float


def read_anchors(csv_path: str | Path) -> list[Anchor]:
    """Single-GPU TensorFlow rows with a throughput and a batch size, XLA runs excluded (XLA
    fuses kernels and changes the per-layer split the roofline models)."""
    anchors = []
    with open(csv_path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["gpus"] != "1" or row["framework"] != "tensorflow":
                continue
            if not row["images_per_sec"] or not row["batch_per_gpu"] or not row["precision"]:
                continue
            if "xla" in row["variant"].split(";"):
                continue
            anchors.append(
                Anchor(
                    row["run_id"],
                    row["model"],
                    row["gpu"],
                    int(row["batch_per_gpu"]),
                    row["precision"],
                    row["data"] or "unknown",
                    float(row["images_per_sec"]),
                )
            )
    return anchors


def roofline_profile(
    model: ModelSpec, device: DeviceSpec, batch: int, precision: str, stack: Stack | None = None
) -> ModelProfile:
    """Unanchored roofline calibration (absolute level not trustworthy on its own) for the
    software ``stack`` (None: TensorFlow's defaults on this device and precision)."""
    stack = stack or resolve_stack(None, None, None, device, precision)
    times, optimizer_s = model_times_s(model, device, batch, precision, stack=stack)
    layers = tuple(
        LayerTiming(layer.name, f, b, layer.grad_bytes("fp32"))
        for layer, (f, b) in zip(model.layers, times, strict=True)
    )
    step_s = sum(f + b for f, b in times) + optimizer_s
    return ModelProfile(
        model=model.name,
        device=device.id,
        batch_per_gpu=batch,
        precision=precision,
        layers=layers,
        unattributed_time_s=optimizer_s,
        step_time_s=step_s,
        provenance={"method": "roofline", "stack": stack.to_dict()},
    )


def _matching(anchors: Iterable[Anchor], model: str, gpu: str, batch: int, precision: str):
    found = [
        a
        for a in anchors
        if (a.model, a.gpu, a.batch_per_gpu, a.precision) == (model, gpu, batch, precision)
    ]
    synthetic = [a for a in found if a.data == "synthetic"]
    return synthetic or found


def measured_over_model(
    anchors: list[Anchor], models: dict[str, ModelSpec], devices: dict[str, DeviceSpec]
) -> dict[tuple[str, str], tuple[float, list[str]]]:
    """Measured / model step-time ratio per (device, precision): the median over the anchored
    configurations, with the run ids. A check of the per-layer model (1 = it matches the
    measured runs), never applied to a calibration."""
    ratios: dict[tuple[str, str], list[tuple[float, str]]] = {}
    seen = set()
    for a in anchors:
        key = (a.model, a.gpu, a.batch_per_gpu, a.precision)
        if key in seen or a.model not in models or a.gpu not in devices:
            continue
        seen.add(key)
        group = _matching(anchors, *key)
        measured_s = a.batch_per_gpu / statistics.median(g.images_per_sec for g in group)
        model_s = roofline_profile(models[a.model], devices[a.gpu], a.batch_per_gpu, a.precision)
        ids = ",".join(g.run_id for g in group)
        ratios.setdefault((a.gpu, a.precision), []).append((measured_s / model_s.step_time_s, ids))
    return {
        k: (statistics.median(r for r, _ in v), sorted({i for _, ids in v for i in ids.split(",")}))
        for k, v in ratios.items()
    }


def anchored_profile(
    model: ModelSpec,
    device: DeviceSpec,
    batch: int,
    precision: str,
    anchors: list[Anchor],
    created: str | None = None,
) -> ModelProfile:
    """The shipped calibration for one configuration (see the module docstring), timed for
    TensorFlow's default stack (the anchors are TensorFlow runs without XLA)."""
    base = roofline_profile(model, device, batch, precision)
    created = created or _dt.date.today().isoformat()
    group = _matching(anchors, model.name, device.id, batch, precision)
    provenance: dict = {
        "method": "roofline-anchored" if group else "per-layer-model",
        "anchor": None,
        "created": created,
        "ddlsim_version": __version__,
        "schema_note": "roofline split",
        "per_layer_model": {
            "conv_and_fc": kernels.provenance(device, precision, kernels.step_library(device)),
            "elementwise": "batch norm, bias, activation and residual add: passes over memory "
            "by the stack's fusion (ddlsim.workload.passes) at the kernel model's DRAM "
            "efficiency",
            "other_layers": "roofline: FLOPs and bytes against the catalog's peaks",
        },
        "stack": base.provenance["stack"],
    }
    factor = 1.0
    if group:
        ips = statistics.median(a.images_per_sec for a in group)
        factor = (batch / ips) / base.step_time_s
        provenance["anchor"] = {
            "run_ids": [a.run_id for a in group],
            "images_per_sec": ips,
            "data": sorted({a.data for a in group}),
            "source": "traces/measured/runs.csv",
            "measured_over_model": round(factor, 4),
        }
    scaled = base.scaled(factor)
    return ModelProfile(
        model=scaled.model,
        device=scaled.device,
        batch_per_gpu=batch,
        precision=precision,
        layers=scaled.layers,
        unattributed_time_s=scaled.unattributed_time_s,
        step_time_s=scaled.step_time_s,
        provenance=provenance,
        device_info={"reported_name": None, "catalog_name": device.name},
    )
