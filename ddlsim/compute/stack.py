"""The software stack a step is timed for: framework, memory layout, operator fusion.

Three choices of the training framework change what the GPU does in a step without changing
the network, and the per-layer model times each as named memory traffic
(:mod:`ddlsim.compute.passes`, docs/design.md "The software stack"), never as a factor:

- ``layout`` (``nchw`` | ``nhwc``): the memory format of the activations the framework hands
  cuDNN. cuDNN 8's tensor-core kernels read NHWC (:data:`~ddlsim.compute.kernel_routes.
  LIBRARIES`): an NCHW operand of a tensor-core convolution is transposed first, one read and
  one write of it; cuDNN's CUDA-core kernels read NCHW, so an NHWC operand pays the same there.
- ``fusion`` (``none`` | ``bn-act`` | ``xla``): which element-wise kernels run as one.
  ``none``: batch norm, bias, activation and residual add each a kernel, each a pass over
  memory (PyTorch's eager mode, TensorFlow without XLA); ``bn-act``: cuDNN's fused batch norm
  + ReLU (+ residual add) kernel (``cudnnBatchNormalizationForwardTrainingEx``: NHWC fp16
  only); ``xla``: XLA's fusions (every element-wise op into its neighbour).
- ``framework`` (``tensorflow`` | ``pytorch`` | ``mxnet``): the defaults of the two above as
  each framework ships (:func:`resolve`), documented in the README and docs/design.md.

The input pipeline (host CPUs or DALI on the GPUs) is the execution's ``input_pipeline``;
DALI's GPU work is :func:`ddlsim.compute.passes.dali_decode_s`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ddlsim.compute.kernels import LAYOUTS, has_tensor_cores
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system.specs import DeviceSpec

FRAMEWORKS = ("tensorflow", "pytorch", "mxnet")
#: frameworks measured rows name that have no modelled stack: their rows are predicted with the
#: default stack when a measured run anchors the compute, and skipped by ``--absolute``
UNMODELLED_FRAMEWORKS = ("oneflow", "paddle")
FUSIONS = ("none", "bn-act", "xla")
DEFAULT_FRAMEWORK = "tensorflow"
#: what each framework does when the user sets nothing (docs/design.md, "The software stack")
FRAMEWORK_DEFAULTS = {
    "tensorflow": (
        "layout NHWC where the convolutions run in fp16 on tensor cores (amp from Volta), else "
        "NCHW: grappler's layout optimizer (and XLA's layout assignment) choose NHWC for fp16 "
        "convolutions on tensor cores; fusion none: XLA is off by default"
    ),
    "pytorch": "layout NCHW (torch.contiguous_format); fusion none: eager mode, one kernel an op",
    "mxnet": "layout NCHW (the Gluon and symbol layers' default); fusion none",
}


@dataclass(frozen=True)
class Stack:
    """A resolved stack: the framework, the layout of its activations, its fusion."""

    framework: str = DEFAULT_FRAMEWORK
    layout: str = "nchw"
    fusion: str = "none"

    def to_dict(self) -> dict[str, str]:
        """The stack as recorded in a calibration's provenance (``stack``)."""
        return {"framework": self.framework, "layout": self.layout, "fusion": self.fusion}


def tensor_core_math(device: DeviceSpec, precision: str, tf32: bool = True) -> bool:
    """Whether ``device`` runs the convolutions of ``precision`` on tensor cores: amp from
    Volta on, fp32 as TF32 where the GPU has a TF32 peak (Ampere on) and ``tf32`` is on."""
    if device.sm_count is None or not has_tensor_cores(device):
        return False
    return precision == "amp" or (tf32 and device.peak_tf32_flops is not None)


def check_name(kind: str, value: str | None, valid: tuple[str, ...]) -> None:
    """An unknown framework, layout or fusion is an :class:`UnknownNameError` naming it."""
    if value is not None and value not in valid:
        raise UnknownNameError(kind, value, valid)


def check_stack_names(framework: str, layout: str | None, fusion: str | None) -> None:
    """The names of a stack's choices (None: the framework's default) are known ones."""
    check_name("framework", framework, FRAMEWORKS)
    check_name("layout", layout, LAYOUTS)
    check_name("fusion", fusion, FUSIONS)


def resolve(
    framework: str | None,
    layout: str | None,
    fusion: str | None,
    device: DeviceSpec,
    precision: str,
    tf32: bool = True,
) -> Stack:
    """The stack of a job: ``framework`` (None: tensorflow) with its defaults for what is left
    None; a combination the library cannot run is a :class:`ConfigError` naming it."""
    framework = DEFAULT_FRAMEWORK if framework is None else framework
    check_stack_names(framework, layout, fusion)
    if layout is None:
        fp16_tensor_cores = precision == "amp" and tensor_core_math(device, precision, tf32)
        layout = "nhwc" if framework == "tensorflow" and fp16_tensor_cores else "nchw"
    fusion = "none" if fusion is None else fusion
    stack = Stack(framework, layout, fusion)
    check_supported(stack, device, precision)
    return stack


def check_supported(stack: Stack, device: DeviceSpec, precision: str) -> None:
    """Refuse what the library cannot run: cuDNN's fused batch norm + activation kernels take
    NHWC fp16 tensors only (``bn-act`` needs ``--layout nhwc`` and amp on a GPU with fp16)."""
    if stack.fusion == "bn-act" and (stack.layout != "nhwc" or precision != "amp"):
        raise ConfigError(
            f"fusion 'bn-act' (cuDNN's fused batch norm + activation) runs on NHWC fp16 tensors "
            f"only, not layout {stack.layout!r} at {precision}: use --layout nhwc --precision "
            "amp, or --fusion none / xla"
        )
    if stack.fusion == "bn-act" and device.peak_fp16_flops is None:
        raise ConfigError(
            f"fusion 'bn-act' needs fp16, which GPU {device.id!r} has no fast path for"
        )


def of_provenance(provenance: Any) -> Stack | None:
    """The stack a calibration's provenance states (``stack``), searched through its ``base``
    chain; None where none is stated."""
    while isinstance(provenance, dict):
        found = provenance.get("stack")
        if isinstance(found, dict):
            try:
                stack = Stack(found["framework"], found["layout"], found["fusion"])
            except (KeyError, TypeError):
                return None
            ok = (
                stack.framework in FRAMEWORKS
                and stack.layout in LAYOUTS
                and stack.fusion in FUSIONS
            )
            return stack if ok else None
        provenance = provenance.get("base")
    return None


def calibration_stack(provenance: Any, device: DeviceSpec, precision: str) -> Stack:
    """The stack a calibration was timed for: the one its provenance states, else that of the
    framework it was profiled with (``ddlsim calibrate``'s ``framework``: torch -> pytorch),
    else TensorFlow's defaults (the tf_cnn_benchmarks runs the first calibrations rest on)."""
    stated = of_provenance(provenance)
    if stated is not None:
        return stated
    framework = DEFAULT_FRAMEWORK
    if isinstance(provenance, dict) and provenance.get("framework") in ("torch", "pytorch"):
        framework = "pytorch"
    return resolve(framework, None, None, device, precision)
