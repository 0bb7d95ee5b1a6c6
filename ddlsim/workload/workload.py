"""A workload: a model from the zoo with the compute calibration of one device, batch, precision.

This is the "Workload" input of the three (workload, cluster, strategy). It checks that the
calibration describes the model it is paired with, layer for layer, so that the DAG's gradient
tensors are the model's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.calibration.profile import ModelProfile
from ddlsim.errors import CalibrationError
from ddlsim.workload.layers import Layer, ModelSpec


@dataclass(frozen=True)
class Workload:
    """One model with per-layer times for one GPU (``profile`` normalised to its step time)."""

    model: ModelSpec
    profile: ModelProfile

    @classmethod
    def build(cls, model: ModelSpec, profile: ModelProfile) -> Workload:
        """Pair ``model`` with ``profile``, normalising it and checking that the layers match."""
        if profile.model != model.name:
            raise CalibrationError(
                f"calibration {profile.describe()} is for model {profile.model!r}, "
                f"not {model.name!r}"
            )
        names = [la.name for la in model.layers]
        got = [la.name for la in profile.layers]
        if names != got:
            missing = sorted(set(names) - set(got))[:3]
            extra = sorted(set(got) - set(names))[:3]
            raise CalibrationError(
                f"calibration {profile.describe()} does not match the {model.name} layer list "
                f"({len(got)} rows vs {len(names)} layers; missing {missing}, unexpected {extra})"
            )
        for layer, timing in zip(model.layers, profile.layers, strict=True):
            if layer.grad_bytes("fp32") != timing.grad_bytes:
                raise CalibrationError(
                    f"calibration {profile.describe()}: layer {layer.name!r} has grad_bytes "
                    f"{timing.grad_bytes}, the model has {layer.grad_bytes('fp32')}"
                )
        return cls(model, profile.normalized())

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The model's layers in forward order."""
        return self.model.layers

    @property
    def batch_per_gpu(self) -> int:
        """Mini-batch per GPU the calibration was made at."""
        return self.profile.batch_per_gpu

    @property
    def precision(self) -> str:
        """Compute precision of the calibration (fp32 or amp)."""
        return self.profile.precision

    def tensor_bytes(self, dtype: str = "fp32") -> list[int]:
        """Bytes of every gradient tensor at ``dtype``, in variable-creation (forward) order."""
        return [t.nbytes(dtype) for t in self.model.tensors]
