"""The routes of the per-layer kernel model: how one convolution pass runs on a GPU's units.

:func:`pass_s` times a pass as the fastest of the routes cuDNN's algorithm search can take
(the model of :mod:`ddlsim.compute.kernels`, which documents the GEMM of each pass):

* **CUDA-core routes** (the kernels of the library measured on CUDA cores, cuDNN 6.0 on a P100
  in fp32): cuDNN's algorithms, each where its documentation says it applies
  (:func:`cuda_core_algorithms_s`): the implicit GEMM in tiles of ``128 x n`` that run in waves
  over the SMs, split-K for the weight gradient only (cuDNN 6's kernels split no other pass;
  a long reduction over few tiles is split until it fills the GPU), the col2im route of a
  strided data gradient and the disjoint route of a filter no longer than its stride; and
  the transform algorithms of :mod:`ddlsim.compute.kernel_algos` (fused Winograd
  ``F(2x2, 3x3)``, non-fused Winograd ``F(4x4, 3x3)`` / ``F(2x2, 5x5)``, FFT tiling). They
  read NCHW natively.
* **Tensor-core routes** (the kernels of the library measured on tensor cores, cuDNN 7.6 on a
  V100 in fp16): the same implicit GEMM at the tensor-core peak with the tensor-core
  coefficients, split-K in *every* pass (cuDNN 7's implicit-GEMM kernels split the reduction
  of a forward or data-gradient pass too: a V100 ran a 7x7x832 -> 128 5x5 forward, whose 7
  output tiles would fill 7 of 80 SMs, at 41 TFLOP/s), the reduction of each filter tap
  rounded up to the main loop's ``k``-slice of :data:`TC_K_SLICE_BYTES`, channel counts padded
  to a multiple of :data:`TC_ALIGN_BYTES` / element size (16-byte vector loads: 8 fp16 or 4
  TF32 channels), and the col2im route. They read NHWC natively; no Winograd or FFT (cuDNN
  7.6's tensor-core Winograd is not modelled: no measured pass needs it).

A route reading an operand in a layout other than its native one, or with channels to pad,
first converts it with a separate kernel that reads it and writes the converted copy
(:func:`conversion_bytes`); the output is written in the caller's layout by the GEMM's
epilogue. Every route adds its fixed call cost (the library's; the fused Winograd kernel's
own; the library's plus the extra kernels of a multi-kernel algorithm) and never beats the
memory roof (its operands once through DRAM at ``memory_efficiency`` of the bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.compute.kernel_algos import algorithm_routes
from ddlsim.compute.kernel_gemm import (  # noqa: F401 (re-exported: the GEMM model's tiles)
    MIN_SPLIT_STEPS,
    SPLITS,
    TC_TILE_COLS,
    TILE_COLS,
    TILE_ROWS,
    Gpu,
    ceil_div,
    gemm_s,
    pad_to,
)
from ddlsim.compute.kernel_terms import PASSES, ConvShape, KernelModel
from ddlsim.errors import ConfigError

#: bytes of one vector load of a tensor-core kernel: channel counts are padded to a multiple
#: of this over the element size (NVIDIA, "Convolutional Layers User's Guide": channels a
#: multiple of 8 for fp16, 4 for TF32)
TC_ALIGN_BYTES = 16
#: bytes of the reduction slice one main-loop iteration of a tensor-core kernel loads per
#: operand row (the k of a 128 x 128 x 32 fp16 / 128 x 128 x 16 TF32 threadblock tile)
TC_K_SLICE_BYTES = 64
#: the layouts each family of kernels of the measured libraries reads without a conversion
#: kernel: cuDNN 6's CUDA-core kernels NCHW; cuDNN 7.6's tensor-core kernels both (its V100
#: fp16 passes on NCHW tensors show no conversion traffic: a 1x1 112x112x64 -> 64 weight
#: gradient of 16 images took 82 us, reading x and dy once at 627 GB/s, where converting both
#: would add another 103 MB; its 3x3 passes fit the model as well as its 1x1 ones, where
#: transposes would make them 20-26% slower). A library's own :attr:`Library.tensor_layouts`
#: say what its tensor-core kernels read.
NATIVE_LAYOUTS = {"cuda": ("nchw",), "tensor": ("nchw", "nhwc")}


@dataclass(frozen=True)
class Library:
    """A cuDNN generation: whether it has tensor-core kernels, the passes whose reduction its
    implicit-GEMM kernels split over more tiles (split-K), the :class:`KernelModel`
    coefficient of its fixed cost per call, the layouts its tensor-core kernels read
    without a conversion (``tensor_layouts``), the passes it has FFT tiling for
    (``fft_passes``: ``CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING`` is cuDNN 7's) and whether
    its data-gradient kernels run a strided gradient over the touched input pixels only
    (``disjoint_dgrad``: cuDNN 7.6's V100 ran 1x1 stride-2 data gradients at up to 155 TFLOP/s
    counted over every input pixel, above the 125 peak; cuDNN 6's P100 ran most of them at
    58-92% of its peak counted so, 15-25% counted over the quarter it touches)."""

    name: str
    tensor_cores: bool
    split_k: tuple[str, ...]
    call_overhead: str
    tensor_layouts: tuple[str, ...] = NATIVE_LAYOUTS["tensor"]
    fft_passes: tuple[str, ...] = PASSES
    disjoint_dgrad: bool = True


#: the libraries (docs/design.md: what changed between them). cuDNN 6 splits only the weight
#: gradient; cuDNN 7.6 also the forward pass (a V100 ran a 7x7x832 -> 128 5x5 forward, whose 7
#: output tiles would fill 7 of 80 SMs, at 41 TFLOP/s), not the data gradient (a 7x7x256 ->
#: 512 3x3 data gradient of 8 images took 134 us: its 8 tiles unsplit). Both were measured.
#: cuDNN 8 (the library of every framework release since mid-2020, and the first to run
#: Ampere) was not: it is cuDNN 7.6's kernels and coefficients, except that its tensor-core
#: kernels read NHWC only, so an NCHW operand is transposed first (NVIDIA's performance
#: guide: NCHW tensors are transposed for tensor-core convolutions; measured NCHW / NHWC
#: training pairs of the same GPU and release: docs/design.md, "The software stack").
LIBRARIES = {
    "cudnn-6.0": Library(
        "cuDNN 6.0.21",
        False,
        ("bwd_filter",),
        "call_overhead_s",
        fft_passes=("fwd", "bwd_data"),
        disjoint_dgrad=False,
    ),
    "cudnn-7.6": Library("cuDNN 7.6.2", True, ("fwd", "bwd_filter"), "cudnn7_call_overhead_s"),
    "cudnn-8": Library("cuDNN 8", True, ("fwd", "bwd_filter"), "cudnn7_call_overhead_s", ("nhwc",)),
}


def _operands(shape: ConvShape, pass_: str) -> tuple[tuple[int, int, int], ...]:
    """(channels, images, pixels per image) of the activations a pass reads: fwd x,
    bwd_data dy, bwd_filter x and dy."""
    n = shape.batch
    x = (shape.in_c, n, shape.in_h * shape.in_w)
    dy = (shape.out_k, n, shape.out_h * shape.out_w)
    return {"fwd": (x,), "bwd_data": (dy,), "bwd_filter": (x, dy)}[pass_]


def _outputs(shape: ConvShape, pass_: str) -> tuple[tuple[int, int, int], ...]:
    """(channels, images, pixels per image) of the activation a pass writes: fwd y, bwd_data
    dx (the weight gradient is a filter)."""
    n = shape.batch
    x = (shape.in_c, n, shape.in_h * shape.in_w)
    y = (shape.out_k, n, shape.out_h * shape.out_w)
    return {"fwd": (y,), "bwd_data": (x,), "bwd_filter": ()}[pass_]


def conversion_bytes(
    shape: ConvShape, pass_: str, native: tuple[str, ...], layout: str, align: int
) -> float:
    """Elements moved by the conversion kernels of a pass whose kernels read and write the
    layouts ``native`` and channels in multiples of ``align``, given tensors in ``layout``:
    each operand that needs it is read once and written once (padded) before the pass, and an
    output in a layout the caller does not hold is read and written once more after it (the
    NCHW <-> NHWC transposes around a kernel that runs the other layout). One pixel per image
    (a fully connected layer) is the same in both layouts, and so is a 1x1 filter; a filter
    that needs it is converted too (forward and data gradient; its gradient after the weight
    gradient)."""
    moved = 0.0
    for channels, images, pixels in _operands(shape, pass_):
        padded = pad_to(channels, align)
        if (layout not in native and pixels > 1) or padded != channels:
            moved += images * pixels * (channels + padded)
    if layout not in native:
        for channels, images, pixels in _outputs(shape, pass_):
            if pixels > 1:
                moved += 2 * images * pixels * channels
    taps = shape.filter_h * shape.filter_w
    padded_c = pad_to(shape.in_c, align)
    transposed = layout not in native and taps > 1
    if (pass_ != "bwd_filter" and (transposed or padded_c != shape.in_c)) or (
        pass_ == "bwd_filter" and transposed
    ):
        moved += taps * shape.out_k * (shape.in_c + padded_c)
    return moved


def _memory_roof_s(shape: ConvShape, gpu: Gpu, model: KernelModel, c: int, k: int) -> float:
    """Operands once through DRAM: the output, the filter, and the input rows the filter
    touches (a strided filter shorter than its stride skips rows: a 1x1 stride-2 convolution
    reads half the input's DRAM sectors; a row's sectors are all read)."""
    n, r, s = shape.batch, shape.filter_h, shape.filter_w
    rows = min(1.0, r / shape.stride_h)
    elems = n * c * shape.in_h * shape.in_w * rows + n * k * shape.out_h * shape.out_w
    return gpu.elem_bytes * (elems + k * c * r * s) / (gpu.mem_Bps * model.memory_efficiency)


def _gemm_routes_s(
    shape: ConvShape,
    pass_: str,
    gpu: Gpu,
    model: KernelModel,
    tensor: bool,
    c: int,
    k: int,
    k_slice: int,
) -> float:
    """The implicit GEMM of a pass on one family of units, channels ``c`` / ``k`` as the kernels
    see them, each tap's reduction rounded up to ``k_slice``. A strided data gradient may also
    run as a GEMM over the output pixels plus a scatter-add (col2im), and, where the filter is
    no longer than the stride (a 1x1 stride-2 shortcut), as one GEMM per tap over the output
    pixels (the input pixels it touches: a quarter of them for 1x1 stride 2), the untouched
    rest of the gradient written as zeros (cuDNN 7 and later: :class:`Library`). The weight
    gradient's split-K may fill the GPU (cuDNN's wgrad kernels spread a long ``N.P.Q``
    reduction over every SM)."""
    peak = gpu.tensor_flops if tensor else gpu.cuda_flops
    eff = model.efficiency(pass_, tensor)
    split = pass_ in LIBRARIES[gpu.library].split_k

    def gemm(efficiency: float, m: float, n_: float, k_: float, count: int = 1) -> float:
        return gemm_s(
            gpu, peak, efficiency, model.tile_overhead(tensor), model.memory_efficiency,
            m, n_, k_, split=split, widths=TC_TILE_COLS if tensor else TILE_COLS,
            count=count, fill=pass_ == "bwd_filter",
        )  # fmt: skip

    n, r, s = shape.batch, shape.filter_h, shape.filter_w
    p, q = shape.out_h, shape.out_w
    if pass_ == "fwd":
        return gemm(eff, n * p * q, k, r * s * pad_to(c, k_slice))
    if pass_ == "bwd_data":
        taps = ceil_div(r, shape.stride_h) * ceil_div(s, shape.stride_w)
        t = gemm(eff, n * shape.in_h * shape.in_w, c, taps * pad_to(k, k_slice))
        if shape.stride_h > 1 or shape.stride_w > 1:
            col2im = 2 * 4.0 * n * p * q * c * r * s / (gpu.mem_Bps * model.memory_efficiency)
            gemm_s_ = gemm(eff * model.col2im(tensor), n * p * q, c * r * s, pad_to(k, k_slice))
            t = min(t, gemm_s_ + col2im)
        disjoint = r <= shape.stride_h and s <= shape.stride_w
        if (
            LIBRARIES[gpu.library].disjoint_dgrad
            and disjoint
            and (shape.stride_h > 1 or shape.stride_w > 1)
        ):  # each input pixel gets at most one tap of one output pixel: no overlap to add up
            per_tap = gemm(eff, n * p * q, c, pad_to(k, k_slice), count=r * s)
            untouched = n * c * (shape.in_h * shape.in_w - p * q * r * s)
            zero_s = gpu.elem_bytes * max(untouched, 0) / (gpu.mem_Bps * model.memory_efficiency)
            t = min(t, per_tap + zero_s)
        return t
    if pass_ == "bwd_filter":
        return gemm(eff, c * r * s, k, n * p * q)
    raise ConfigError(f"unknown pass {pass_!r}; valid: {', '.join(PASSES)}")


def cuda_core_algorithms_s(
    shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel, layout: str
) -> dict[str, float]:
    """Seconds of each CUDA-core algorithm that applies to the pass (``"gemm"``: the implicit
    GEMM and its strided data-gradient routes; the transform algorithms of
    :func:`~ddlsim.compute.kernel_algos.algorithm_routes`), each bounded by the memory roof,
    with its fixed cost per call and the layout conversions."""
    c, k = shape.in_c, shape.out_k
    library = LIBRARIES[gpu.library]
    call_s = getattr(model, library.call_overhead)
    routes = {"gemm": (_gemm_routes_s(shape, pass_, gpu, model, False, c, k, 1), call_s)}
    routes.update(algorithm_routes(shape, pass_, gpu, model, call_s, library.fft_passes))
    roof_s = _memory_roof_s(shape, gpu, model, c, k)
    moved = conversion_bytes(shape, pass_, NATIVE_LAYOUTS["cuda"], layout, 1)
    convert_s = gpu.elem_bytes * moved / (gpu.mem_Bps * model.memory_efficiency)
    return {name: max(t, roof_s) + fixed + convert_s for name, (t, fixed) in routes.items()}


def _cuda_core_s(shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel, layout: str) -> float:
    return min(cuda_core_algorithms_s(shape, pass_, gpu, model, layout).values())


def _tensor_core_s(
    shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel, layout: str
) -> float:
    align = max(1, TC_ALIGN_BYTES // gpu.elem_bytes)
    k_slice = max(1, TC_K_SLICE_BYTES // gpu.elem_bytes)
    c, k = pad_to(shape.in_c, align), pad_to(shape.out_k, align)
    t = _gemm_routes_s(shape, pass_, gpu, model, True, c, k, k_slice)
    t = max(t, _memory_roof_s(shape, gpu, model, c, k))
    native = LIBRARIES[gpu.library].tensor_layouts
    moved = conversion_bytes(shape, pass_, native, layout, align)
    convert_s = gpu.elem_bytes * moved / (gpu.mem_Bps * model.memory_efficiency)
    return getattr(model, LIBRARIES[gpu.library].call_overhead) + t + convert_s


def tensor_core_kernels_apply(shape: ConvShape) -> bool:
    """Whether the tensor-core kernels take the shape: padding smaller than the filter (every
    output pixel sees the image). cuDNN 7.6 ran a 1x1 convolution padded by 3 on its CUDA-core
    kernels: all six of its V100 fp16 passes took 0.8-1.2x the P100's fp32 time."""
    return shape.pad_h < shape.filter_h and shape.pad_w < shape.filter_w


def pass_s(shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel, layout: str) -> float:
    """Seconds of ``pass_`` of ``shape``: the fastest route of :func:`routes_s`."""
    return min(routes_s(shape, pass_, gpu, model, layout).values())


def routes_s(
    shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel, layout: str
) -> dict[str, float]:
    """Seconds of each family of routes (``"cuda"``; ``"tensor"`` where the GPU has tensor
    cores for this arithmetic), call cost and conversions included."""
    if pass_ not in PASSES:
        raise ConfigError(f"unknown pass {pass_!r}; valid: {', '.join(PASSES)}")
    out = {"cuda": _cuda_core_s(shape, pass_, gpu, model, layout)}
    if gpu.tensor_flops:
        out["tensor"] = _tensor_core_s(shape, pass_, gpu, model, layout)
    return out
