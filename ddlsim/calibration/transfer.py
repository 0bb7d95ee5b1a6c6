"""Deriving calibrations from a measured one: anchoring to a throughput, moving to another GPU.

* :func:`anchor_throughput` rescales every time of a profile by one factor so that one step
  takes ``batch / images_per_sec`` (a measured single-GPU throughput, e.g. from a
  tf_cnn_benchmarks log): the per-layer split stays the profiled one.
* :func:`transfer_device` re-times a profile measured on one catalog GPU for another by per-layer
  roofline ratios (:func:`ddlsim.compute.roofline.layer_time_s`; the unattributed time by the
  optimizer's ratio), keeping the measured step's ratio to its attributed time.

Both record what they did in the provenance (``throughput-anchored``,
``roofline-device-transfer``) with the source profile's provenance under ``base``; neither is
ever presented as measured.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ddlsim.calibration.profile import ModelProfile, check, check_images_per_sec
from ddlsim.calibration.retime import roofline_retime
from ddlsim.errors import CalibrationError, UnknownNameError
from ddlsim.system import catalog
from ddlsim.workload.zoo import get_model


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _source(profile: ModelProfile) -> dict[str, Any]:
    return {"file": profile.path, "step_time_s": profile.step_time_s, **profile.provenance}


def anchor_throughput(profile: ModelProfile, images_per_sec: float, source: str) -> ModelProfile:
    """``profile`` rescaled so that one GPU runs ``images_per_sec``; ``source`` says where that
    figure comes from (``--anchor-throughput`` or a log file and line)."""
    check_images_per_sec(images_per_sec, "anchor throughput")
    factor = (profile.batch_per_gpu / images_per_sec) / profile.step_time_s
    provenance = {
        "method": "throughput-anchored",
        "created": _now(),
        "images_per_sec": images_per_sec,
        "anchor_source": source,
        "scale_factor": factor,
        "base": _source(profile),
    }
    anchored = replace(profile.scaled(factor), provenance=provenance, path=None)
    return check(anchored, f"{profile.describe()} anchored to {images_per_sec:g} images/s")


def transfer_device(profile: ModelProfile, gpu: str, *, stamp: bool = True) -> ModelProfile:
    """``profile`` (measured on a catalog GPU) re-timed for catalog GPU ``gpu``. ``stamp``
    records when (a file ``--transfer-to`` writes); a re-timing done in memory for one
    prediction carries no time, so that the same prediction gives the same output."""
    try:
        src = catalog.device(profile.device)
    except UnknownNameError:
        raise CalibrationError(
            f"cannot transfer {profile.describe()}: its device {profile.device!r} is not a "
            "catalog GPU, and roofline ratios need the peaks of both devices"
        ) from None
    dst = catalog.device(gpu)
    spec = get_model(profile.model)
    if [la.name for la in spec.layers] != [t.name for t in profile.layers]:
        raise CalibrationError(f"{profile.describe()}: its layers are not the zoo's")
    moved = roofline_retime(profile, spec, src, dst, profile.batch_per_gpu)
    provenance = {
        "method": "roofline-device-transfer",
        **({"created": _now()} if stamp else {}),
        "from_device": src.id,
        "to_device": dst.id,
        "base": _source(profile),
    }
    moved = replace(
        moved,
        device=dst.id,
        provenance=provenance,
        device_info={"name": dst.name, "transferred_from": src.id},
        path=None,
    )
    return check(moved, f"{profile.describe()} re-timed for {dst.id}")
