"""Re-timing a calibration by per-layer roofline ratios (another batch size, GPU or stack).

Each layer's forward and backward time is multiplied by the ratio of its roofline times on the
new and the old (device, batch); the unattributed time by the optimizer's ratio (batch does not
change it); the step keeps the file's ratio of step time to attributed time (1 for roofline
files). Callers set the provenance: the result is never presented as measured.
"""

from __future__ import annotations

from dataclasses import replace

from ddlsim.calibration.profile import ModelProfile
from ddlsim.compute.roofline import layer_time_s, optimizer_time_s
from ddlsim.compute.stack import Stack
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.layers import ModelSpec


def roofline_retime(
    profile: ModelProfile,
    model: ModelSpec,
    src: DeviceSpec,
    dst: DeviceSpec,
    batch: int,
    src_stack: Stack | None = None,
    dst_stack: Stack | None = None,
) -> ModelProfile:
    """``profile`` (measured on ``src`` at its own batch, run by ``src_stack``) re-timed for
    ``dst`` at ``batch`` run by ``dst_stack`` (a stack None: TensorFlow's defaults on that
    device, :mod:`ddlsim.compute.stack`)."""
    layers = []
    for layer, timing in zip(model.layers, profile.layers, strict=True):
        f_old, b_old = layer_time_s(
            layer, src, profile.batch_per_gpu, profile.precision, stack=src_stack
        )
        f_new, b_new = layer_time_s(layer, dst, batch, profile.precision, stack=dst_stack)
        layers.append(
            replace(
                timing,
                fwd_time_s=timing.fwd_time_s * f_new / f_old,
                bwd_time_s=timing.bwd_time_s * b_new / b_old,
            )
        )
    unattributed_s = profile.unattributed_time_s
    if dst != src:
        unattributed_s *= optimizer_time_s(model, dst) / optimizer_time_s(model, src)
    moved = replace(
        profile,
        layers=tuple(layers),
        unattributed_time_s=unattributed_s,
        batch_per_gpu=batch,
        path=None,
    )
    ratio = profile.step_time_s / (profile.sum_layers_s + profile.unattributed_time_s)
    return replace(moved, step_time_s=ratio * (moved.sum_layers_s + moved.unattributed_time_s))
