"""The CUDA-core algorithms of cuDNN that are not an implicit GEMM, as routes of the kernel
model: what each does to a convolution pass, and what it costs.

cuDNN names its algorithms per pass (``cudnnConvolutionFwdAlgo_t``, ``...BwdDataAlgo_t``,
``...BwdFilterAlgo_t``; docs/design.md cites the documentation). Three are modelled here, each
only where the documentation says the algorithm applies (stride 1; the filter sizes below):

* ``WINOGRAD`` (**fused**, :func:`fused_winograd_s`): ``F(2x2, 3x3)`` in one kernel, forward and
  data gradient of 3x3 filters. 16 GEMMs over the transformed ``4 x 4`` input tiles, the
  transforms done in registers (no traffic beyond the operands), at its own main-loop
  efficiency ``winograd_efficiency`` and its own fixed cost per call
  ``winograd_call_overhead_s`` (one kernel: no separate transform or index kernels).
* ``WINOGRAD_NONFUSED`` (:func:`nonfused_winograd_s`): ``F(4x4, 3x3)`` / ``F(2x2, 5x5)`` as four
  kernels (input, filter and output transforms through memory around 36 batched GEMMs at the
  implicit GEMM's efficiency), all three passes.
* ``FFT_TILING`` (:func:`fft_tiling_s`): the image cut into ``32 x 32`` tiles overlapping by
  the filter's size less one, each tile and filter transformed to ``32 x 17`` complex bins, a
  complex product summed over the reduced channels per bin (a batched complex GEMM: 4 real
  multiply-adds per complex one, at ``fft_efficiency``), and the inverse transform of the
  outputs; the transformed tensors go through memory. Its cost does not grow with the filter's
  area, so it pays off for mid-size filters (5x5) that Winograd's ``F(2x2, 5x5)`` serves
  poorly. Forward and data gradient (both libraries), weight gradient (cuDNN 7 only).

The multi-kernel algorithms (non-fused Winograd, FFT tiling: four kernels each) pay
``transform_kernel_s`` for each kernel beyond the first, on top of the library's call cost.
"""

from __future__ import annotations

from ddlsim.compute.kernel_gemm import Gpu, ceil_div, gemm_s
from ddlsim.compute.kernel_terms import ConvShape, KernelModel

#: Winograd F(m x m, r x r) of the non-fused kernels by filter size r: output tile m
#: (alpha = m + r - 1 = 6: 36 GEMMs)
WINOGRAD_TILE = {3: 4, 5: 2}
#: the fused kernel's F(2x2, 3x3): output tile 2, alpha = 4 (16 GEMMs)
FUSED_WINOGRAD_TILE = 2
#: FFT tiling's tile edge (cuDNN's fft2d_r2c_32x32 / fft2d_c2r_32x32 kernels)
FFT_TILE = 32
#: kernels of a multi-kernel algorithm: input, filter and output transforms + the products
TRANSFORM_KERNELS = 4
#: real multiply-adds per complex one
COMPLEX_MACS = 4


def _tiles(shape: ConvShape, pass_: str, m: int) -> int:
    """Tiles of ``m x m`` outputs of a pass over the batch (data gradient: of the input)."""
    n = shape.batch
    if pass_ == "bwd_data":
        return n * ceil_div(shape.in_h, m) * ceil_div(shape.in_w, m)
    return n * ceil_div(shape.out_h, m) * ceil_div(shape.out_w, m)


def nonfused_winograd_s(shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel) -> float:
    """``WINOGRAD_NONFUSED``: 36 GEMMs over transformed tiles + the transforms through memory."""
    m = WINOGRAD_TILE[shape.filter_h]
    alpha2 = (m + shape.filter_h - 1) ** 2
    c, k = shape.in_c, shape.out_k
    tiles = _tiles(shape, pass_, m)
    args = (gpu, gpu.winograd_flops, model.efficiency(pass_), model.tile_overhead_steps)
    args = (*args, model.memory_efficiency)
    if pass_ == "fwd":
        t = gemm_s(*args, tiles, k, c, count=alpha2)
    elif pass_ == "bwd_data":
        t = gemm_s(*args, tiles, c, k, count=alpha2)
    else:
        t = gemm_s(*args, c, k, tiles, split=True, count=alpha2)
    moved = tiles * (c + k)
    # transformed data written once and read once, transformed filters once
    return t + 4.0 * alpha2 * (2 * moved + c * k) / (gpu.mem_Bps * model.memory_efficiency)


def fused_winograd_s(shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel) -> float:
    """``WINOGRAD`` (fused ``F(2x2, 3x3)``, forward and data gradient): 16 GEMMs over the
    transformed tiles in one kernel, at its own efficiency and fixed cost."""
    m = FUSED_WINOGRAD_TILE
    alpha2 = (m + shape.filter_h - 1) ** 2
    tiles = _tiles(shape, pass_, m)
    c, k = shape.in_c, shape.out_k
    rows, cols, reduced = (tiles, k, c) if pass_ == "fwd" else (tiles, c, k)
    args = (gpu, gpu.winograd_flops, model.winograd_efficiency, model.tile_overhead_steps)
    return gemm_s(*args, model.memory_efficiency, rows, cols, reduced, count=alpha2)


def fft_tiling_s(shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel) -> float:
    """``FFT_TILING``: the complex products of ``32 x 17`` bins per tile and the transformed
    tensors through memory (module docstring)."""
    r, s = shape.filter_h, shape.filter_w
    step_h, step_w = FFT_TILE - r + 1, FFT_TILE - s + 1
    n, c, k = shape.batch, shape.in_c, shape.out_k
    if pass_ == "bwd_data":  # the full correlation of dy with the flipped filter, per input tile
        tiles = n * ceil_div(shape.in_h, step_h) * ceil_div(shape.in_w, step_w)
    else:
        tiles = n * ceil_div(shape.out_h, step_h) * ceil_div(shape.out_w, step_w)
    bins = FFT_TILE * (FFT_TILE // 2 + 1)
    args = (gpu, gpu.winograd_flops, model.fft_efficiency, model.tile_overhead_steps)
    args = (*args, model.memory_efficiency)
    if pass_ == "fwd":
        t = gemm_s(*args, tiles, k, COMPLEX_MACS * c, count=bins)
    elif pass_ == "bwd_data":
        t = gemm_s(*args, tiles, c, COMPLEX_MACS * k, count=bins)
    else:
        t = gemm_s(*args, c, k, COMPLEX_MACS * tiles, split=True, count=bins)
    # transformed activations (2 floats a bin) written and read once, filters once
    moved = 2 * bins * (2 * tiles * (c + k) + c * k)
    return t + 4.0 * moved / (gpu.mem_Bps * model.memory_efficiency)


def algorithm_routes(
    shape: ConvShape,
    pass_: str,
    gpu: Gpu,
    model: KernelModel,
    call_s: float,
    fft_passes: tuple[str, ...],
) -> dict[str, tuple[float, float]]:
    """The algorithms of this module that apply to the pass (stride 1, square filters of their
    sizes, padding smaller than the filter; FFT tiling in ``fft_passes``), each as (compute
    seconds, fixed seconds per call), ``call_s`` being the library's cost of one call."""
    r = shape.filter_h
    if (
        not gpu.winograd_flops
        or shape.stride_h > 1
        or shape.stride_w > 1
        or r != shape.filter_w
        or r == 1
        or shape.pad_h >= r
        or shape.pad_w >= r
    ):
        return {}
    multi_call_s = call_s + (TRANSFORM_KERNELS - 1) * model.transform_kernel_s
    out = {}
    if r == 3 and pass_ != "bwd_filter":
        fused_s = fused_winograd_s(shape, pass_, gpu, model)
        out["winograd"] = (fused_s, model.winograd_call_overhead_s)
    if r in WINOGRAD_TILE:
        out["winograd_nonfused"] = (nonfused_winograd_s(shape, pass_, gpu, model), multi_call_s)
    if r < FFT_TILE and pass_ in fft_passes:
        out["fft_tiling"] = (fft_tiling_s(shape, pass_, gpu, model), multi_call_s)
    return out
