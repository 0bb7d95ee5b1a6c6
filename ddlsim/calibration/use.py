"""Which calibration a configuration uses, and on which device: one rule for every command.

- ``model``, ``gpu``, ``batch`` and ``precision`` that the caller leaves out (None) take the
  calibration file's own values when a file is given, else :data:`DEFAULTS`
  (:func:`resolve_defaults`); a given model, batch or precision that contradicts the file is an
  error that names the file's value.
- **The device rule** (:func:`for_cluster`): a calibration file is used as measured on the GPU
  it names; for another catalog GPU it is re-timed by per-layer roofline ratios (the transfer
  of ``ddlsim calibrate --transfer-to``), which its provenance and the report say
  (:func:`device_rule`); a file for a device the catalog does not know (``cpu``, an
  uncatalogued GPU) is refused with the command that records a profile under a catalog device.
"""

from __future__ import annotations

from typing import Any

from ddlsim.calibration.profile import ModelProfile
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.system.specs import Cluster
from ddlsim.workload.zoo import get_model

#: what ``model``, ``gpu``, ``batch`` and ``precision`` are when neither the caller nor a
#: calibration file says
#: mini-batch per GPU when neither the user nor a calibration file says (tf_cnn_benchmarks' usual)
DEFAULT_BATCH_PER_GPU = 64
DEFAULTS = {"model": "resnet50", "gpu": "p100", "batch": DEFAULT_BATCH_PER_GPU, "precision": "fp32"}


def resolve_defaults(
    prof: ModelProfile | None, path: Any, **given: Any
) -> tuple[str, str, int, str]:
    """``model``, ``gpu``, ``batch``, ``precision``: the given value, else the calibration
    file's, else :data:`DEFAULTS`. A given model, batch or precision that contradicts the file
    is an error naming the file's value; a given GPU may differ (the file is re-timed)."""
    if prof is None:
        values = {k: DEFAULTS[k] if v is None else v for k, v in given.items()}
        return values["model"], values["gpu"], values["batch"], values["precision"]
    from_file = {
        "model": prof.model,
        "batch": prof.batch_per_gpu,
        "precision": prof.precision,
    }
    for key, theirs in from_file.items():
        mine = given[key]
        same = mine is None or (
            get_model(mine).name == theirs
            if key == "model" and isinstance(mine, str)
            else mine == theirs
        )
        if not same:
            raise ConfigError(
                f"{key} {mine!r} conflicts with calibration {path}, which is for {key} "
                f"{theirs!r}; omit --{key} ({key}=) to use the file's"
            )
    gpu = given["gpu"]
    if gpu is None:
        catalogued(prof, path)
        gpu = prof.device
    return prof.model, gpu, prof.batch_per_gpu, prof.precision


def catalogued(prof: ModelProfile, path: Any) -> None:
    """A calibration for a device the catalog does not know cannot be used: nothing can
    re-time it for a cluster's GPU, nor build a cluster of it."""
    if prof.device not in catalog.device_names():
        raise ConfigError(
            f"calibration {path} is for device {prof.device!r}, which is not in the device "
            "catalog, so ddlsim can neither build a cluster of it nor re-time it for another "
            "GPU; profile with 'ddlsim calibrate ... --catalog-id GPU' to record it under a "
            "catalog device"
        )


def for_cluster(prof: ModelProfile, path: Any, cluster: Cluster) -> ModelProfile:
    """The device rule, one for every command: a calibration file is used as measured on the
    GPU it names; for another catalog GPU it is re-timed by per-layer roofline ratios (the
    transfer of ``ddlsim calibrate --transfer-to``, labelled in the provenance and the
    report); a file for a device the catalog does not know is refused."""
    catalogued(prof, path)
    if catalog.device(prof.device).id == cluster.device.id:
        return prof
    from ddlsim.calibration.transfer import transfer_device

    return transfer_device(prof, cluster.device.id, stamp=False)


def device_rule(prof: ModelProfile) -> str:
    """Which side of the device rule (:func:`for_cluster`) the calibration is on."""
    provenance: Any = prof.provenance
    while isinstance(provenance, dict):
        if provenance.get("method") == "roofline-device-transfer":
            return (
                f"re-timed from {provenance.get('from_device')} to {provenance.get('to_device')} "
                "by per-layer roofline ratios"
            )
        provenance = provenance.get("base")
    return f"as calibrated for {prof.device}"
