"""A calibration re-timed for the job's software stack, and DALI's GPU work.

A calibration states the stack it was timed for (``provenance.stack``: framework, layout,
fusion; :func:`ddlsim.compute.stack.calibration_stack` for files that do not). A job asking
for another stack -- or for fp32 without TF32 on a GPU that has it -- gets the file re-timed
layer by layer by the per-layer model's ratio of the two (:func:`for_job`), as
:func:`ddlsim.calibration.retime.roofline_retime` re-times for another GPU: the file's measured
level is kept, only what the options change is moved. The provenance says so.
"""

from __future__ import annotations

from dataclasses import replace

from ddlsim.calibration.profile import ModelProfile
from ddlsim.calibration.retime import roofline_retime
from ddlsim.compute.kernels import without_tf32
from ddlsim.compute.passes import dali_decode_bytes
from ddlsim.compute.roofline import memory_Bps
from ddlsim.compute.stack import Stack, calibration_stack
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.layers import ModelSpec

#: the network's input element as DALI writes it: fp16 at amp, fp32 otherwise
INPUT_ELEM_BYTES = {"amp": 2, "fp32": 4}


def for_job(
    prof: ModelProfile, spec: ModelSpec, device: DeviceSpec, stack: Stack, tf32_off: bool
) -> ModelProfile:
    """``prof`` (for ``device``) re-timed for ``stack`` and, with ``tf32_off``, for CUDA-core
    fp32 on a GPU with TF32: per-layer model ratios on the same GPU; unchanged when the file
    is already for that stack and arithmetic."""
    own = calibration_stack(prof.provenance, device, prof.precision)
    if own == stack and not tf32_off:
        return prof
    dst = without_tf32(device) if tf32_off else device
    retimed = roofline_retime(prof, spec, device, dst, prof.batch_per_gpu, own, stack)
    what = []
    if tf32_off:
        what.append(
            "TF32 off (NVIDIA_TF32_OVERRIDE=0): per-layer kernel-model ratios of CUDA-core "
            "fp32 to TF32 on the same GPU"
        )
    if own != stack:
        what.append(
            f"stack {_describe(own)} -> {_describe(stack)}: per-layer model ratios (layout "
            "conversions, element-wise passes) on the same GPU"
        )
    provenance = {
        "method": prof.provenance.get("method", "unknown"),
        "retimed": "; ".join(what),
        "stack": stack.to_dict(),
        "base": prof.provenance,
    }
    return replace(retimed, provenance=provenance, path=prof.path)


def _describe(stack: Stack) -> str:
    return f"{stack.framework}/{stack.layout}/{stack.fusion}"


def dali_gpu_s(device: DeviceSpec, batch: int, precision: str) -> float:
    """Seconds of DALI's GPU work for one batch: its decoded images, crops and normalised
    inputs through DRAM (:func:`ddlsim.compute.passes.dali_decode_bytes`) at the achieved
    bandwidth. The JPEG entropy decoding runs on the host's threads (nvJPEG's hybrid decoder)
    or on the A100's / H100's hardware decoder, neither on the SMs."""
    return batch * dali_decode_bytes(INPUT_ELEM_BYTES[precision]) / memory_Bps(device)


def with_dali(prof: ModelProfile, seconds: float) -> ModelProfile:
    """``prof`` with DALI's GPU work added to the time no layer owns (and to the step)."""
    provenance = {**prof.provenance, "dali_gpu_s": seconds}
    return replace(
        prof,
        unattributed_time_s=prof.unattributed_time_s + seconds,
        step_time_s=prof.step_time_s + seconds,
        provenance=provenance,
    )
