"""Roofline estimate of per-layer compute time on a device.

Each layer's forward and backward pass is costed as
``max(FLOP / (peak · compute_efficiency), bytes / (memory_bandwidth · memory_efficiency))``
plus a fixed per-kernel launch overhead. This is used for two things only: to *split* a measured
single-GPU step time across layers (shipped calibrations are anchored to a measured throughput,
so the roofline's absolute level cancels), and to *transfer* a calibration to another batch size
or device by per-layer ratios. It is never presented as a measurement.

The efficiencies are round figures for cuDNN-era kernels (implicit-GEMM convolution reaches
about half of peak in fp32; tensor cores about a third of their fp16 peak for CNN shapes); the
anchor absorbs their absolute error, the per-layer split and batch trend keep the shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.cluster.specs import DeviceSpec
from ddlsim.errors import ConfigError
from ddlsim.workload.layers import Layer, LayerKind, ModelSpec

_MATMUL_KINDS = (LayerKind.CONV, LayerKind.FC)


@dataclass(frozen=True)
class RooflineParams:
    """Achieved fractions of peak, and the per-kernel fixed cost (seconds)."""

    matmul_efficiency_fp32: float = 0.55
    matmul_efficiency_fp16: float = 0.33
    other_compute_efficiency: float = 0.25
    memory_efficiency: float = 0.70
    kernel_overhead_s: float = 6e-6
    optimizer_bytes_per_param: float = 20.0  # momentum SGD: read w, g, m; write w, m (fp32)


DEFAULT_PARAMS = RooflineParams()


def _kernels(layer: Layer) -> int:
    """Kernels one forward pass of the layer launches (conv + bias/bn + activation, ...)."""
    return 3 if layer.kind in (LayerKind.CONV, LayerKind.DEPTHWISE_CONV, LayerKind.FC) else 1


def peak_flops(device: DeviceSpec, precision: str, layer_kind: LayerKind) -> float:
    """Peak FLOP/s a layer of ``layer_kind`` can use at ``precision`` (``fp32`` or ``amp``)."""
    if precision == "amp":
        if device.peak_fp16_flops is None:
            raise ConfigError(
                f"GPU {device.id!r} has no fast fp16 path; mixed precision (amp) is not modelled "
                "for it: use --precision fp32"
            )
        if layer_kind in _MATMUL_KINDS:
            return device.peak_fp16_flops
    return device.peak_fp32_flops


def layer_time_s(
    layer: Layer,
    device: DeviceSpec,
    batch: int,
    precision: str = "fp32",
    params: RooflineParams = DEFAULT_PARAMS,
) -> tuple[float, float]:
    """Forward and backward seconds of ``layer`` for ``batch`` samples on ``device``."""
    act_bytes = 2 if precision == "amp" else 4
    if layer.kind in _MATMUL_KINDS:
        eff = params.matmul_efficiency_fp16 if precision == "amp" else params.matmul_efficiency_fp32
    else:
        eff = params.other_compute_efficiency
    flops_per_s = peak_flops(device, precision, layer.kind) * eff
    bytes_per_s = device.mem_bandwidth_Bps * params.memory_efficiency
    weight_bytes = 4 * layer.n_params
    fwd_bytes = batch * (layer.input_elems + layer.output_elems) * act_bytes + weight_bytes
    # backward reads dY and X, writes dX; reads the weights, writes their gradient
    bwd_bytes = batch * (layer.output_elems + 2 * layer.input_elems) * act_bytes + 2 * weight_bytes
    overhead_s = _kernels(layer) * params.kernel_overhead_s
    fwd_s = max(batch * layer.fwd_flops / flops_per_s, fwd_bytes / bytes_per_s) + overhead_s
    bwd_s = max(batch * layer.bwd_flops / flops_per_s, bwd_bytes / bytes_per_s) + 2 * overhead_s
    return fwd_s, bwd_s


def optimizer_time_s(
    model: ModelSpec, device: DeviceSpec, params: RooflineParams = DEFAULT_PARAMS
) -> float:
    """Seconds of the momentum-SGD update of all parameters (memory bound, one kernel a tensor)."""
    nbytes = params.optimizer_bytes_per_param * model.n_params
    return nbytes / (device.mem_bandwidth_Bps * params.memory_efficiency) + len(
        model.tensors
    ) * params.kernel_overhead_s


def model_times_s(
    model: ModelSpec,
    device: DeviceSpec,
    batch: int,
    precision: str = "fp32",
    params: RooflineParams = DEFAULT_PARAMS,
) -> tuple[list[tuple[float, float]], float]:
    """Per-layer (forward, backward) seconds and the optimizer seconds for one step."""
    times = [layer_time_s(layer, device, batch, precision, params) for layer in model.layers]
    return times, optimizer_time_s(model, device, params)
