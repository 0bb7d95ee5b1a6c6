"""Time of one convolution (or fully connected) pass on a GPU: the per-layer kernel model.

cuDNN runs a convolution pass as an *implicit matrix product* (GEMM): an ``M x N`` output
reduced over ``K``, the operands gathered from the activations on the fly::

    pass        M (rows)        N (columns)   K (reduction)
    fwd         batch.P.Q       K_out         C.R.S
    bwd_data    batch.H.W       C             K_out.ceil(R/s_h).ceil(S/s_w)   (every input pixel)
    bwd_filter  C.R.S           K_out         batch.P.Q                       (split over SMs)

(input ``H x W x C``, output ``P x Q x K_out``, filter ``R x S``, stride ``s``). The output is cut
into tiles of ``128 x n`` (``n`` = 128, 64, 32 or 16; a narrower tile wastes less on few
columns, and ``128/n`` of them share an SM); the tiles run in *waves* over the GPU's SMs, each
tile doing ``K + tile_overhead_steps`` steps of ``128 x n`` multiply-adds at
``efficiency x`` the SM's share of the peak. A weight-gradient pass may also split its long
reduction into ``s`` parts to fill the SMs (cuDNN's split-K kernels), paying for the partial
sums in memory. ``s`` is any count from 1 to 64, not only a power of two, and the reduction is
cut into slices of at least 64 steps, the last one shorter, so more work never takes less time.
Powers of two left a 56-SM P100 up to 43% idle (four tiles split 8 ways fill 32 SMs) and made
the fitted efficiency carry that one GPU's wave pattern.
cuDNN's algorithm search picks the fastest kernel, so the model takes the fastest
of the tile widths and splits, and of three algorithms:

* the implicit GEMM above;
* Winograd (3x3 and 5x5 filters, stride 1, fp32): ``F(4x4, 3x3)`` / ``F(2x2, 5x5)``, 36
  independent GEMMs over transformed tiles with reduction ``C`` (fwd) or ``K_out`` (bwd_data) or
  the tiles (bwd_filter), plus the transforms' trip through memory;
* for the data gradient of a strided convolution, a GEMM over the *output* pixels
  (``batch.P.Q x C.R.S``, reduction ``K_out``) followed by a scatter-add (col2im), at
  ``col2im_efficiency`` of the GEMM efficiency.

Every pass also costs ``call_overhead_s`` and never beats the memory roof (activations and
weights once through DRAM at ``memory_efficiency`` of the bandwidth). The coefficients are fitted
to measured cuDNN kernels (``scripts/fit_kernel_model.py``, ``data/kernel_model.json``: what each
stands for and what it was fitted on); ``ddlsim kernels`` checks the model against a file of
measured kernels.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from ddlsim.cluster.specs import DeviceSpec
from ddlsim.errors import CatalogError, ConfigError

PASSES = ("fwd", "bwd_data", "bwd_filter")
TILE_ROWS = 128
TILE_COLS = (128, 64, 32, 16)
SPLITS = tuple(range(1, 65))  # split-K part counts
#: a split slice keeps at least this many reduction steps (the last slice takes the remainder,
#: so a longer reduction never gets shorter slices: time is monotone in the reduction)
MIN_SPLIT_STEPS = 64
# Winograd F(m x m, r x r) by filter size r: output tile m; alpha = m + r - 1 = 6 (36 GEMMs)
WINOGRAD_TILE = {3: 4, 5: 2}
MODEL_FILE = "kernel_model.json"
#: how fp32 convolutions and matrix products are timed (recorded in every calibration)
FP32_MATH = (
    "TF32 tensor cores where the GPU has them (peak_tf32_TFLOPS: Ampere and later; TensorFlow "
    "2.4+ and PyTorch's cuDNN convolutions default), at tensor_core_efficiency_ratio; CUDA-core "
    "fp32 otherwise, and for Winograd"
)


@dataclass(frozen=True)
class ConvShape:
    """One convolution: NCHW input ``batch x in_c x in_h x in_w``, ``out_k`` filters of
    ``filter_h x filter_w``, zero padding and stride per side (cuDNN's description)."""

    batch: int
    in_h: int
    in_w: int
    in_c: int
    out_k: int
    filter_h: int
    filter_w: int
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            low = 0 if f.name.startswith("pad") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"{f.name} must be an integer >= {low}, got {value!r}")
        if self.out_h < 1 or self.out_w < 1:
            raise ConfigError(
                f"a {self.filter_h}x{self.filter_w} filter does not fit a padded "
                f"{self.in_h}x{self.in_w} input"
            )

    @property
    def out_h(self) -> int:
        """Output rows ``P``."""
        return (self.in_h + 2 * self.pad_h - self.filter_h) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        """Output columns ``Q``."""
        return (self.in_w + 2 * self.pad_w - self.filter_w) // self.stride_w + 1

    @property
    def flops(self) -> float:
        """Useful FLOPs of one pass (a multiply-add counts 2; the three passes are equal)."""
        n, c, k = self.batch, self.in_c, self.out_k
        return 2.0 * n * k * self.out_h * self.out_w * c * self.filter_h * self.filter_w


@dataclass(frozen=True)
class KernelModel:
    """The model's coefficients (see ``data/kernel_model.json`` for what each stands for)."""

    fwd_efficiency: float
    bwd_data_efficiency: float
    bwd_filter_efficiency: float
    tile_overhead_steps: float
    call_overhead_s: float
    col2im_efficiency: float
    memory_efficiency: float
    tensor_core_efficiency_ratio: float

    def efficiency(self, pass_: str) -> float:
        """Main-loop fraction of peak of the kernels of ``pass_``."""
        return {
            "fwd": self.fwd_efficiency,
            "bwd_data": self.bwd_data_efficiency,
            "bwd_filter": self.bwd_filter_efficiency,
        }[pass_]

    def with_values(self, **values: float) -> KernelModel:
        """A copy with some coefficients replaced (the fitting script's trial models)."""
        return KernelModel(**{**self.as_dict(), **values})

    def as_dict(self) -> dict[str, float]:
        """Coefficient name -> value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _read_model_file() -> dict[str, Any]:
    text = resources.files("ddlsim.workload").joinpath("data").joinpath(MODEL_FILE).read_text()
    return json.loads(text)


@lru_cache(maxsize=1)
def model_document() -> dict[str, Any]:
    """``data/kernel_model.json``: coefficients, their meaning, the fit and its check."""
    doc = _read_model_file()
    values = {name: entry.get("value") for name, entry in doc.get("coefficients", {}).items()}
    names = {f.name for f in fields(KernelModel)}
    if set(values) != names or not all(
        isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values.values()
    ):
        raise CatalogError(f"{MODEL_FILE}: needs a positive value for each of {sorted(names)}")
    return doc


def default_model() -> KernelModel:
    """The shipped, fitted model."""
    doc = model_document()
    return KernelModel(**{k: float(v["value"]) for k, v in doc["coefficients"].items()})


def provenance() -> dict[str, Any]:
    """What a calibration built with this model records: the model, its fit and coefficients."""
    doc = model_document()
    return {
        "model": doc["model"],
        "fitted_on": doc["fitted_on"],
        "coefficients": {k: v["value"] for k, v in doc["coefficients"].items()},
        "fp32_math": FP32_MATH,
    }


def _ceil(a: float, b: float) -> int:
    return -int(-a // b)


@dataclass(frozen=True)
class _Gpu:
    """What the model needs of a device (hashable, for the cache): the peak of the GEMM routes,
    whether that is a tensor-core peak, and the CUDA-core fp32 peak of the Winograd route
    (0: no Winograd, as for fp16)."""

    peak_flops: float
    mem_Bps: float
    sms: int
    tensor_cores: bool = False
    winograd_flops: float = 0.0


def without_tf32(device: DeviceSpec) -> DeviceSpec:
    """``device`` with TF32 off (``NVIDIA_TF32_OVERRIDE=0``): fp32 on the CUDA cores."""
    return replace(device, peak_tf32_flops=None)


def _gpu(device: DeviceSpec, precision: str) -> _Gpu:
    if device.sm_count is None:
        raise ConfigError(f"device {device.id!r} has no SM count: the kernel model is for GPUs")
    mem, sms = device.mem_bandwidth_Bps, device.sm_count
    if precision == "amp":
        if device.peak_fp16_flops is None:
            raise ConfigError(
                f"GPU {device.id!r} has no fast fp16 path; mixed precision (amp) is not modelled "
                "for it: use --precision fp32"
            )
        return _Gpu(device.peak_fp16_flops, mem, sms, tensor_cores=True)
    fp32 = device.peak_fp32_flops
    if device.peak_tf32_flops is not None:
        return _Gpu(device.peak_tf32_flops, mem, sms, tensor_cores=True, winograd_flops=fp32)
    return _Gpu(fp32, mem, sms, winograd_flops=fp32)


def _gemm_s(
    gpu: _Gpu,
    model: KernelModel,
    efficiency: float,
    m: float,
    n: float,
    k: float,
    *,
    split: bool = False,
    count: int = 1,
) -> float:
    """Fastest tiling of ``count`` independent ``m x n`` GEMMs reduced over ``k``."""
    per_sm_flops = gpu.peak_flops / gpu.sms
    mem_Bps = gpu.mem_Bps * model.memory_efficiency
    best = math.inf
    for cols in TILE_COLS:
        resident = TILE_ROWS * TILE_COLS[0] // (TILE_ROWS * cols)  # tiles an SM runs at once
        tiles = count * _ceil(m, TILE_ROWS) * _ceil(n, cols)
        for parts in SPLITS if split else (1,):
            slice_steps, used = k / parts, parts
            last = parts > 1 and slice_steps <= MIN_SPLIT_STEPS
            if last:  # slices of the minimum length, the last one shorter: more are not used
                if k <= MIN_SPLIT_STEPS:
                    break
                slice_steps, used = MIN_SPLIT_STEPS, _ceil(k, MIN_SPLIT_STEPS)
            waves = _ceil(tiles * used, gpu.sms * resident)
            steps = slice_steps + model.tile_overhead_steps
            t = waves * 2.0 * TILE_ROWS * TILE_COLS[0] * steps / (per_sm_flops * efficiency)
            if used > 1:  # partial sums written and read back
                t += 2 * 4.0 * used * count * m * n / mem_Bps
            best = min(best, t)
            if last:
                break
    return best


def _winograd_s(
    shape: ConvShape, pass_: str, gpu: _Gpu, model: KernelModel, efficiency: float
) -> float:
    """Winograd ``F(m x m, r x r)``: 36 GEMMs over transformed tiles + transforms in memory."""
    m = WINOGRAD_TILE[shape.filter_h]
    alpha2 = (m + shape.filter_h - 1) ** 2
    n, c, k = shape.batch, shape.in_c, shape.out_k
    out_tiles = n * _ceil(shape.out_h, m) * _ceil(shape.out_w, m)
    in_tiles = n * _ceil(shape.in_h, m) * _ceil(shape.in_w, m)
    if pass_ == "fwd":
        t = _gemm_s(gpu, model, efficiency, out_tiles, k, c, count=alpha2)
        moved = out_tiles * (c + k)
    elif pass_ == "bwd_data":
        t = _gemm_s(gpu, model, efficiency, in_tiles, c, k, count=alpha2)
        moved = in_tiles * (c + k)
    else:
        t = _gemm_s(gpu, model, efficiency, c, k, out_tiles, split=True, count=alpha2)
        moved = out_tiles * (c + k)
    # transformed data written once and read once, transformed filters once
    return t + 4.0 * alpha2 * (2 * moved + c * k) / (gpu.mem_Bps * model.memory_efficiency)


@lru_cache(maxsize=65536)
def _conv_s(shape: ConvShape, pass_: str, gpu: _Gpu, precision: str, model: KernelModel) -> float:
    n, c, k = shape.batch, shape.in_c, shape.out_k
    r, s = shape.filter_h, shape.filter_w
    p, q = shape.out_h, shape.out_w
    eff = model.efficiency(pass_)
    if gpu.tensor_cores:
        eff *= model.tensor_core_efficiency_ratio
    strided = shape.stride_h > 1 or shape.stride_w > 1
    if pass_ == "fwd":
        t = _gemm_s(gpu, model, eff, n * p * q, k, c * r * s)
    elif pass_ == "bwd_data":
        taps = _ceil(r, shape.stride_h) * _ceil(s, shape.stride_w)
        t = _gemm_s(gpu, model, eff, n * shape.in_h * shape.in_w, c, k * taps)
        if strided:
            col2im = 2 * 4.0 * n * p * q * c * r * s / (gpu.mem_Bps * model.memory_efficiency)
            gemm = _gemm_s(gpu, model, eff * model.col2im_efficiency, n * p * q, c * r * s, k)
            t = min(t, gemm + col2im)
    elif pass_ == "bwd_filter":
        t = _gemm_s(gpu, model, eff, c * r * s, k, n * p * q, split=True)
    else:
        raise ConfigError(f"unknown pass {pass_!r}; valid: {', '.join(PASSES)}")
    if gpu.winograd_flops and r == s and r in WINOGRAD_TILE and not strided:
        cuda_cores = replace(gpu, peak_flops=gpu.winograd_flops, tensor_cores=False)
        t = min(t, _winograd_s(shape, pass_, cuda_cores, model, model.efficiency(pass_)))
    act_bytes = 2 if precision == "amp" else 4
    nbytes = act_bytes * (n * c * shape.in_h * shape.in_w + n * k * p * q + k * c * r * s)
    return model.call_overhead_s + max(t, nbytes / (gpu.mem_Bps * model.memory_efficiency))


def conv_pass_s(
    shape: ConvShape,
    pass_: str,
    device: DeviceSpec,
    precision: str = "fp32",
    model: KernelModel | None = None,
    *,
    tf32: bool = True,
) -> float:
    """Seconds of one ``pass_`` (``fwd``, ``bwd_data``, ``bwd_filter``) of ``shape`` on the GPU
    ``device`` at ``precision`` (``fp32``, or ``amp``: tensor cores / fp16, no Winograd). On a
    GPU with TF32 tensor cores (Ampere and later) fp32 GEMMs run on them, as TensorFlow's and
    PyTorch's cuDNN convolutions do by default, unless ``tf32`` is False (``NVIDIA_TF32_OVERRIDE
    =0``); the Winograd route stays on the CUDA cores."""
    gpu = _gpu(device if tf32 else without_tf32(device), precision)
    return _conv_s(shape, pass_, gpu, precision, model or default_model())


def dense_pass_s(
    batch: int,
    n_in: int,
    n_out: int,
    pass_: str,
    device: DeviceSpec,
    precision: str = "fp32",
    model: KernelModel | None = None,
) -> float:
    """Seconds of one pass of a fully connected layer: a 1x1 convolution over a 1x1 input."""
    shape = ConvShape(batch, 1, 1, n_in, n_out, 1, 1)
    return conv_pass_s(shape, pass_, device, precision, model)
