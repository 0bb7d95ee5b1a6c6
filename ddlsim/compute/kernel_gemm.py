"""The tiled GEMM every route of the kernel model is built from (:func:`gemm_s`), and what the
model needs of a GPU (:class:`Gpu`).

A GEMM's ``m x n`` output is cut into tiles of ``128 x cols`` that run in *waves* over the SMs
(``128 / cols`` narrow tiles share an SM), each tile doing ``k + overhead`` steps of ``128 x 128``
multiply-adds at ``efficiency`` of the SM's share of the peak. A pass may split its reduction
over more tiles (split-K), paying for the fp32 partial sums in memory: by default into 1 to 64
parts (:data:`SPLITS`); with ``fill`` also into as many as fill every resident tile slot of the
GPU in one wave (cuDNN's weight-gradient kernels cut the ``N.P.Q`` reduction of a layer with a
tiny filter -- a first layer's 3 x 7 x 7 x 64 -- over the whole GPU and add the parts up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TILE_ROWS = 128
TILE_COLS = (128, 64, 32, 16)
#: tile widths of the tensor-core kernels: none narrower than 64 (cuDNN 7's Volta kernels are
#: 256 x 128, 128 x 128, 256 x 64 and 128 x 64 threadblock tiles)
TC_TILE_COLS = (128, 64)
SPLITS = tuple(range(1, 65))  # split-K part counts
#: a split slice keeps at least this many reduction steps (the last slice takes the remainder,
#: so a longer reduction never gets shorter slices: time is monotone in the reduction)
MIN_SPLIT_STEPS = 64


@dataclass(frozen=True)
class Gpu:
    """What the model needs of a device at one arithmetic (hashable, for the cache).

    ``cuda_flops``: peak of the CUDA-core GEMM routes (fp32, or a Pascal P100's packed fp16);
    ``winograd_flops``: CUDA-core fp32 peak of the transform routes (Winograd, FFT tiling; 0:
    none); ``tensor_flops``: tensor-core peak of this arithmetic (0: the device has no tensor
    cores for it); ``elem_bytes``: bytes of one stored element (4 fp32 / TF32, 2 fp16);
    ``library``: the key of the cuDNN whose kernels run (``kernel_routes.LIBRARIES``)."""

    sms: int
    mem_Bps: float
    elem_bytes: int
    cuda_flops: float
    winograd_flops: float = 0.0
    tensor_flops: float = 0.0
    library: str = "cudnn-6.0"


def ceil_div(a: float, b: float) -> int:
    """``ceil(a / b)`` for positive numbers."""
    return -int(-a // b)


def pad_to(channels: int, multiple: int) -> int:
    """``channels`` rounded up to a multiple of ``multiple``."""
    return ceil_div(channels, multiple) * multiple


def _parts(tiles: int, slots: int, k: float, fill: bool, wave_s: float, sum_s: float):
    """The split-K part counts worth trying: 1-64, and with ``fill`` the counts above 64 that
    still run in one wave (``tiles x parts <= slots``). Among those the time ``wave_s x (k /
    parts + ...) + sum_s x parts`` is convex in ``parts``, so its best is the bound, the
    stationary point or where slices reach :data:`MIN_SPLIT_STEPS` (floor and ceiling)."""
    top = slots // tiles if fill else 0
    if top <= len(SPLITS):
        return SPLITS
    best = math.sqrt(wave_s * k / sum_s) if sum_s > 0 else top
    extra = {top, k // MIN_SPLIT_STEPS, ceil_div(k, MIN_SPLIT_STEPS), int(best), int(best) + 1}
    return (*SPLITS, *sorted(p for p in extra if len(SPLITS) < p <= top))


def gemm_s(
    gpu: Gpu,
    peak_flops: float,
    efficiency: float,
    overhead_steps: float,
    memory_efficiency: float,
    m: float,
    n: float,
    k: float,
    *,
    split: bool = False,
    count: int = 1,
    widths: tuple[int, ...] = TILE_COLS,
    fill: bool = False,
) -> float:
    """Fastest tiling of ``count`` independent ``m x n`` GEMMs reduced over ``k`` steps, at
    ``efficiency`` of ``peak_flops``; with ``split``, the reduction may be split (split-K), with
    ``fill`` into as many parts as fill the GPU's tile slots in one wave."""
    per_sm_flops = peak_flops / gpu.sms
    mem_Bps = gpu.mem_Bps * memory_efficiency
    step_s = 2.0 * TILE_ROWS * TILE_COLS[0] / (per_sm_flops * efficiency)
    sum_s = 2 * 4.0 * count * m * n / mem_Bps  # fp32 partial sums of one part, written + read
    best = math.inf
    for cols in widths:
        resident = TILE_ROWS * TILE_COLS[0] // (TILE_ROWS * cols)  # tiles an SM runs at once
        tiles = count * ceil_div(m, TILE_ROWS) * ceil_div(n, cols)
        slots = gpu.sms * resident
        for parts in _parts(tiles, slots, k, fill and split, step_s, sum_s) if split else (1,):
            slice_steps, used = k / parts, parts
            last = parts > 1 and slice_steps <= MIN_SPLIT_STEPS
            if last:  # slices of the minimum length, the last one shorter: more are not used
                if k <= MIN_SPLIT_STEPS:
                    break
                slice_steps, used = MIN_SPLIT_STEPS, ceil_div(k, MIN_SPLIT_STEPS)
            waves = ceil_div(tiles * used, slots)
            t = waves * step_s * (slice_steps + overhead_steps)
            if used > 1:  # fp32 partial sums written and read back
                t += sum_s * used
            best = min(best, t)
            if last:
                break
    return best
