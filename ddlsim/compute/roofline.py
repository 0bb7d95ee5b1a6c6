"""The per-layer compute model: time of each layer's forward and backward pass on a device.

On a GPU, a convolution's or fully connected layer's matrix products are timed by the kernel
model fitted to measured cuDNN convolutions (:mod:`ddlsim.compute.kernels`: tiles in waves over
the SMs, split-K, Winograd, col2im; forward, data-gradient -- skipped for a layer fed by the
image -- and weight-gradient passes), plus memory-bound passes of their bias / batch norm /
ReLU kernels. Every other layer (pooling, LRN, residual adds, depthwise and grouped
convolutions, squeeze-excitation, loss) and every layer of a device without an SM count (a CPU
worker) is costed as
``max(FLOP / (peak · compute_efficiency), bytes / (memory_bandwidth · memory_efficiency))``
plus a fixed per-kernel launch overhead.

This is used to *split* a measured single-GPU step time across layers (shipped calibrations are
anchored to a measured throughput where one exists), to *correct* unanchored ones, and to
*transfer* a calibration to another batch size or device by per-layer ratios. It is never
presented as a measurement. The efficiencies of the non-matmul layers are round figures; the
matmul ones are fitted (``ddlsim kernels`` shows the fit against measured kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.compute.kernels import ConvShape, conv_pass_s, default_model, dense_pass_s, step_library
from ddlsim.compute.passes import passes as elementwise_passes
from ddlsim.compute.stack import Stack
from ddlsim.compute.stack import resolve as resolve_stack
from ddlsim.errors import ConfigError
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.layers import Layer, LayerKind, ModelSpec

_MATMUL_KINDS = (LayerKind.CONV, LayerKind.FC)
#: layers that are nothing but element-wise passes (:mod:`ddlsim.compute.passes`)
_ELEMENTWISE_KINDS = (LayerKind.ADD, LayerKind.BATCHNORM, LayerKind.ACTIVATION)


@dataclass(frozen=True)
class RooflineParams:
    """Achieved fractions of peak, and the per-kernel fixed cost (seconds). The ``matmul_*``,
    Winograd and FFT figures apply only where the kernel model does not (devices without an SM
    count, depthwise and grouped convolutions). ``memory_efficiency`` None is the kernel
    model's DRAM efficiency, fitted on measured memory-bound convolution passes (V100 fp16):
    the element-wise passes (batch norm, ReLU, adds) stream the same DRAM."""

    matmul_efficiency_fp32: float = 0.55
    matmul_efficiency_fp16: float = 0.33
    other_compute_efficiency: float = 0.25
    memory_efficiency: float | None = None
    kernel_overhead_s: float = 6e-6
    winograd_3x3_speedup: float = 2.25  # F(2x2,3x3): 16 instead of 36 multiplies per tile
    fft_5x5_speedup: float = 2.0  # cuDNN FFT/Winograd for 5x5 stride-1 convolutions
    optimizer_bytes_per_param: float = 20.0  # momentum SGD: read w, g, m; write w, m (fp32)


DEFAULT_PARAMS = RooflineParams()


def memory_Bps(device: DeviceSpec, params: RooflineParams = DEFAULT_PARAMS) -> float:
    """The DRAM bandwidth a streaming kernel achieves on ``device`` (bytes/s)."""
    eff = params.memory_efficiency
    return device.mem_bandwidth_Bps * (default_model().memory_efficiency if eff is None else eff)


def _kernels(layer: Layer) -> int:
    """Kernels one forward pass of the layer launches (conv + bias/bn + activation, ...;
    squeeze-excitation: pool, matmul, bias + activation, matmul, bias + sigmoid, scaling)."""
    if layer.kind is LayerKind.SQUEEZE_EXCITE:
        return 6
    weighted = (LayerKind.CONV, LayerKind.GROUPED_CONV, LayerKind.DEPTHWISE_CONV, LayerKind.FC)
    return 3 if layer.kind in weighted else 1


def algorithm_speedup(
    layer: Layer, precision: str, params: RooflineParams = DEFAULT_PARAMS
) -> float:
    """Multiply savings of cuDNN's fast convolution algorithms for a stride-1 3x3 or 5x5 conv
    in fp32 (Winograd / FFT); tensor-core (amp) kernels use implicit GEMM, so 1 there."""
    if layer.kind is not LayerKind.CONV or precision == "amp" or not layer.tensors:
        return 1.0
    shape = layer.tensors[0].shape
    if len(shape) != 4:
        return 1.0
    kh, kw, cin, cout = shape
    spatial_in = layer.input_elems / cin
    spatial_out = layer.output_elems / cout
    if spatial_in > 2 * spatial_out or kh != kw:  # strided
        return 1.0
    return {3: params.winograd_3x3_speedup, 5: params.fft_5x5_speedup}.get(kh, 1.0)


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


def matmul_flops(layer: Layer) -> float:
    """Forward multiply-add FLOPs (x2) of the layer's convolution / matrix product, per sample
    (a grouped convolution's kernel holds ``c_in/groups`` input channels: 1/groups of the dense
    convolution's FLOPs)."""
    kinds = (*_MATMUL_KINDS, LayerKind.DEPTHWISE_CONV, LayerKind.GROUPED_CONV)
    if layer.kind not in kinds or not layer.tensors:
        return 0.0
    kernel = layer.tensors[0].shape
    if layer.kind is LayerKind.FC:
        return 2.0 * kernel[0] * kernel[1]
    conv = layer.kind in (LayerKind.CONV, LayerKind.GROUPED_CONV)
    spatial_out = layer.output_elems / kernel[-1] if conv else 1
    if layer.kind is LayerKind.DEPTHWISE_CONV:
        return 2.0 * kernel[0] * kernel[1] * layer.output_elems
    return 2.0 * kernel[0] * kernel[1] * kernel[2] * kernel[3] * spatial_out


def depthwise_backward_elems(layer: Layer) -> float:
    """Activation elements one sample's depthwise backward pass moves: the data gradient
    reads dy and writes dx (as the forward pass reads x and writes y), and the weight gradient
    reduces, for each filter tap, dy times the input at that tap over every output pixel of
    the channel: one reduction per tap, each reading dy and the tap's inputs (one thread block
    per channel and tap in PyTorch's kernels, aten/src/ATen/native/cuda/DepthwiseConv2d.cu),
    with no reuse between taps: ``2 * taps`` passes over the output's size."""
    kh, kw = layer.tensors[0].shape[:2]
    return layer.input_elems + layer.output_elems + 2 * kh * kw * layer.output_elems


def conv_shape(layer: Layer, batch: int) -> ConvShape:
    """The cuDNN description of a convolution layer for ``batch`` samples: TensorFlow's SAME
    padding as a symmetric pad that gives the same output size (VALID: none)."""
    kh, kw, cin, cout = layer.tensors[0].shape
    h, w, _ = layer.input_shape
    ho, wo, _ = layer.output_shape
    s = layer.stride
    pad_h = (max((ho - 1) * s + kh - h, 0) + 1) // 2
    pad_w = (max((wo - 1) * s + kw - w, 0) + 1) // 2
    return ConvShape(batch, h, w, cin, cout, kh, kw, pad_h, pad_w, s, s)


def _input_grad(layer: Layer, mm: float) -> bool:
    """Whether the backward pass computes the gradient of the layer's input (not for a layer
    fed by the image: the zoo then charges the matmul once in ``bwd_flops``)."""
    return layer.bwd_flops - (layer.fwd_flops - mm) > 1.5 * mm


def _kernel_matmul_s(
    layer: Layer, device: DeviceSpec, batch: int, precision: str, layout: str = "nchw"
):
    """(forward, backward) seconds of a conv / FC layer's matrix products by the kernel model
    on activations in ``layout``, or None where the kernel model does not apply (no SM count,
    depthwise, no geometry)."""
    if device.sm_count is None or layer.kind not in _MATMUL_KINDS:
        return None
    mm = matmul_flops(layer)
    passes = ("bwd_data", "bwd_filter") if _input_grad(layer, mm) else ("bwd_filter",)
    if layer.kind is LayerKind.FC:
        n_in, n_out = layer.tensors[0].shape
        fwd = dense_pass_s(batch, n_in, n_out, "fwd", device, precision)
        bwd = sum(dense_pass_s(batch, n_in, n_out, p, device, precision) for p in passes)
        return fwd, bwd
    if len(layer.input_shape) != 3 or len(layer.tensors[0].shape) != 4:
        return None
    shape = conv_shape(layer, batch)
    lib = step_library(device)
    fwd = conv_pass_s(shape, "fwd", device, precision, layout=layout, library=lib)
    bwd = sum(conv_pass_s(shape, p, device, precision, layout=layout, library=lib) for p in passes)
    return fwd, bwd


def _stack(stack: Stack | None, device: DeviceSpec, precision: str) -> Stack:
    """``stack``, else the default one (TensorFlow's) for this device and precision."""
    return stack if stack is not None else resolve_stack(None, None, None, device, precision)


def layer_time_s(
    layer: Layer,
    device: DeviceSpec,
    batch: int,
    precision: str = "fp32",
    params: RooflineParams = DEFAULT_PARAMS,
    stack: Stack | None = None,
) -> tuple[float, float]:
    """Forward and backward seconds of ``layer`` for ``batch`` samples on ``device``, run by
    the software ``stack`` (:mod:`ddlsim.compute.stack`; None: TensorFlow's defaults).

    Weighted layers: the matmul part by the kernel model on a GPU, on activations in the
    stack's layout (else on the compute roof with cuDNN's fast-algorithm savings, or the
    memory roof, whichever binds), plus the memory-bound passes of their bias / batch norm /
    activation kernels under the stack's fusion (:mod:`ddlsim.compute.passes`). Residual
    adds, stand-alone batch norms and activations: their passes. Other layers: one roofline
    over their own FLOPs and bytes.
    """
    stack = _stack(stack, device, precision)
    act_bytes = 2 if precision == "amp" else 4
    bytes_per_s = memory_Bps(device, params)
    weight_bytes = 4 * layer.n_params
    overhead_s = _kernels(layer) * params.kernel_overhead_s
    io_fwd = batch * (layer.input_elems + layer.output_elems) * act_bytes + weight_bytes
    io_bwd = batch * (layer.output_elems + 2 * layer.input_elems) * act_bytes + 2 * weight_bytes
    mm = matmul_flops(layer)
    pf, pb = elementwise_passes(layer, stack.fusion)
    out_bytes = batch * layer.output_elems * act_bytes
    epilogue_fwd, epilogue_bwd = pf * out_bytes / bytes_per_s, pb * out_bytes / bytes_per_s
    if mm > 0:
        kernel = _kernel_matmul_s(layer, device, batch, precision, stack.layout)
        if kernel is not None:  # the conv / matmul call's fixed cost is in the kernel model
            fwd_mm_s, bwd_mm_s = kernel
            epilogue_kernels_s = overhead_s - params.kernel_overhead_s
            return (
                fwd_mm_s + epilogue_fwd + epilogue_kernels_s,
                bwd_mm_s + epilogue_bwd + 2 * epilogue_kernels_s,
            )
        # grouped convolutions (ResNeXt: 4-32 channels per group) are given the CUDA cores'
        # fp32 rate and efficiency in both precisions: no tensor-core speed-up is claimed for
        # them (no measured grouped kernels to fit one); fp16 halves their bytes only
        tensor_rate = precision == "amp" and layer.kind is not LayerKind.GROUPED_CONV
        eff = params.matmul_efficiency_fp16 if tensor_rate else params.matmul_efficiency_fp32
        rate = peak_flops(device, precision, layer.kind) * eff
        rate *= algorithm_speedup(layer, precision, params)
        bwd_mm = max(layer.bwd_flops - (layer.fwd_flops - mm), 0.0)
        if layer.kind is LayerKind.DEPTHWISE_CONV:
            io_bwd = batch * depthwise_backward_elems(layer) * act_bytes + 2 * weight_bytes
        fwd_s = max(batch * mm / rate, io_fwd / bytes_per_s) + epilogue_fwd
        bwd_s = max(batch * bwd_mm / rate, io_bwd / bytes_per_s) + epilogue_bwd
    elif layer.kind in _ELEMENTWISE_KINDS:
        rate = peak_flops(device, precision, layer.kind) * params.other_compute_efficiency
        fwd_s = max(batch * layer.fwd_flops / rate, epilogue_fwd)
        bwd_s = max(batch * layer.bwd_flops / rate, epilogue_bwd)
    else:
        rate = peak_flops(device, precision, layer.kind) * params.other_compute_efficiency
        fwd_s = max(batch * layer.fwd_flops / rate, io_fwd / bytes_per_s)
        bwd_s = max(batch * layer.bwd_flops / rate, io_bwd / bytes_per_s)
    return fwd_s + overhead_s, bwd_s + 2 * overhead_s


def optimizer_time_s(
    model: ModelSpec, device: DeviceSpec, params: RooflineParams = DEFAULT_PARAMS
) -> float:
    """Seconds of the momentum-SGD update of all parameters (memory bound, one kernel a tensor)."""
    nbytes = params.optimizer_bytes_per_param * model.n_params
    return nbytes / memory_Bps(device, params) + len(model.tensors) * params.kernel_overhead_s


def model_times_s(
    model: ModelSpec,
    device: DeviceSpec,
    batch: int,
    precision: str = "fp32",
    params: RooflineParams = DEFAULT_PARAMS,
    stack: Stack | None = None,
) -> tuple[list[tuple[float, float]], float]:
    """Per-layer (forward, backward) seconds and the optimizer seconds for one step run by
    ``stack`` (None: TensorFlow's defaults)."""
    stack = _stack(stack, device, precision)
    times = [layer_time_s(layer, device, batch, precision, params, stack) for layer in model.layers]
    return times, optimizer_time_s(model, device, params)
