"""Time of one convolution (or fully connected) pass on a GPU: the per-layer kernel model.

cuDNN runs a convolution pass as an *implicit matrix product* (GEMM): an ``M x N`` output
reduced over ``K``, the operands gathered from the activations on the fly::

    pass        M (rows)        N (columns)   K (reduction)
    fwd         batch.P.Q       K_out         C.R.S
    bwd_data    batch.H.W       C             K_out.ceil(R/s_h).ceil(S/s_w)   (every input pixel)
    bwd_filter  C.R.S           K_out         batch.P.Q                       (split over SMs)

(input ``H x W x C``, output ``P x Q x K_out``, filter ``R x S``, stride ``s``). The output is cut
into tiles of ``128 x n``; the tiles run in *waves* over the GPU's SMs, each tile doing
``K + tile_overhead_steps`` steps of ``128 x n`` multiply-adds at ``efficiency x`` the SM's
share of the peak. A pass may also split its long reduction over more tiles to fill the SMs
(split-K: any count from 1 to 64, slices of at least 64 steps, the last one shorter, so more work
never takes less time), paying for the partial sums in memory. cuDNN's algorithm search picks the
fastest kernel, so the model takes the fastest of the tilings and of the routes of
:mod:`ddlsim.compute.kernel_routes`: on the CUDA cores the implicit GEMM, Winograd
``F(4x4, 3x3)`` / ``F(2x2, 5x5)`` and the col2im route of strided data gradients; on the tensor
cores (Volta and later: fp16 at ``amp``, TF32 at ``fp32`` from Ampere on) the implicit GEMM
with the tensor-core coefficients, its tile widths, channel padding and k-slices, and col2im.
Every route pays its library's fixed cost per call, conversions of operands in a layout its
kernels do not read or with channels to pad, and never beats the memory roof (operands once
through DRAM at ``memory_efficiency`` of the bandwidth).

The **library generation is an input** (``library``, :data:`LIBRARIES`): cuDNN 6.0 (measured on
a P100 in fp32: no tensor cores, split-K in the weight gradient only) or cuDNN 7.6 (measured on a
V100 in fp16: tensor-core kernels, split-K in the forward pass too, its own call cost), by
default the newest measured one of the GPU's era (:func:`default_library`). The coefficients are
fitted to the measured kernels of both (``scripts/fit_kernel_model.py``, ``data/kernel_model.json``:
what each stands for, what it was fitted on, the fit's check); ``ddlsim kernels`` checks the model
against a file of measured kernels.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from ddlsim.compute.kernel_routes import LIBRARIES, Gpu, pass_s, routes_s
from ddlsim.compute.kernel_terms import PASSES, ConvShape, KernelModel  # noqa: F401 (re-exported)
from ddlsim.errors import CatalogError, ConfigError
from ddlsim.system.specs import DeviceSpec

MODEL_FILE = "kernel_model.json"
#: tensor layouts a caller's tensors can be in (cuDNN's NCHW is the frameworks' default)
LAYOUTS = ("nchw", "nhwc")
DEFAULT_LAYOUT = "nchw"
PRECISIONS = ("fp32", "amp")
#: architectures with tensor cores (their peak_fp16 is a tensor-core peak)
TENSOR_CORE_ARCHS = ("volta", "turing", "ampere", "hopper", "blackwell")
#: how fp32 convolutions and matrix products are timed (recorded in every calibration)
FP32_MATH = (
    "TF32 tensor cores where the GPU has them (peak_tf32_TFLOPS: Ampere and later; TensorFlow "
    "2.4+ and PyTorch's cuDNN convolutions default) with the tensor-core kernels' coefficients; "
    "CUDA-core fp32 otherwise, and for Winograd and channels a tensor-core kernel would pad"
)


def _read_model_file() -> dict[str, Any]:
    text = resources.files("ddlsim.compute").joinpath("data").joinpath(MODEL_FILE).read_text()
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


def provenance(
    device: DeviceSpec | None = None, precision: str = "fp32", library: str | None = None
) -> dict[str, Any]:
    """What a calibration built with this model records: the model, its fit and coefficients;
    for a ``device`` and ``precision`` also the cuDNN generation assumed (``library``, default
    :func:`default_library`) and the families of kernels that time it (``kernels``: their peak
    and the measured file their coefficients were fitted on)."""
    doc = model_document()
    out: dict[str, Any] = {
        "model": doc["model"],
        "fitted_on": doc["fitted_on"],
        "coefficients": {k: v["value"] for k, v in doc["coefficients"].items()},
        "fp32_math": FP32_MATH,
    }
    if device is None or device.sm_count is None:
        return out
    gpu = _gpu(device, precision, library)
    families = {"cuda_core": gpu.cuda_flops}
    if gpu.tensor_flops:
        families["tensor_core"] = gpu.tensor_flops
    lib = doc["libraries"][gpu.library]
    out["library"] = {"id": gpu.library, **{k: lib[k] for k in ("library", "measured_on", "assumed")
                                            if k in lib}}  # fmt: skip
    out["kernels"] = {
        family: {
            "peak_TFLOPS": round(peak / 1e12, 4),
            "coefficients_from": doc["fitted_on"]["files"][family]["file"],
        }
        for family, peak in families.items()
    }
    return out


def has_tensor_cores(device: DeviceSpec) -> bool:
    """Whether ``device`` has tensor cores (Volta and later): its ``peak_fp16_flops`` is then a
    tensor-core peak, and its TF32 peak where it has one."""
    return device.arch in TENSOR_CORE_ARCHS


def without_tf32(device: DeviceSpec) -> DeviceSpec:
    """``device`` with TF32 off (``NVIDIA_TF32_OVERRIDE=0``): fp32 on the CUDA cores."""
    return replace(device, peak_tf32_flops=None)


def default_library(device: DeviceSpec) -> str:
    """The cuDNN generation a GPU's kernels are timed with unless the caller names one: the
    newest one measured (:data:`LIBRARIES`) that its architecture's era ran, cuDNN 7.6 from
    Volta on -- the library the kernel files were measured with (``ddlsim kernels``)."""
    return "cudnn-7.6" if has_tensor_cores(device) else "cudnn-6.0"


def step_library(device: DeviceSpec) -> str:
    """The cuDNN generation the per-layer model times a training step with: cuDNN 6.0 before
    Volta, cuDNN 8 from Volta on -- the library of every framework release since mid-2020 and
    the first to run Ampere and Hopper. Its kernels are cuDNN 7.6's (the newest measured), its
    tensor-core kernels read NHWC only (:data:`LIBRARIES`): the two agree wherever the tensors
    are in the layout those kernels read."""
    return "cudnn-8" if has_tensor_cores(device) else "cudnn-6.0"


def _gpu(device: DeviceSpec, precision: str, library: str | None = None) -> Gpu:
    """The device at ``precision`` (``fp32``: TF32 tensor cores where it has them; ``amp``:
    fp16 storage, tensor cores where it has them, else a Pascal's packed fp16) with the cuDNN
    ``library`` (default :func:`default_library`; a library without tensor-core kernels runs
    none)."""
    if device.sm_count is None:
        raise ConfigError(f"device {device.id!r} has no SM count: the kernel model is for GPUs")
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    library = default_library(device) if library is None else library
    if library not in LIBRARIES:
        raise ConfigError(f"unknown library {library!r}; valid: {', '.join(LIBRARIES)}")
    tensor = has_tensor_cores(device) and LIBRARIES[library].tensor_cores
    common = {"sms": device.sm_count, "mem_Bps": device.mem_bandwidth_Bps, "library": library}
    fp32 = device.peak_fp32_flops
    if precision == "amp":
        if device.peak_fp16_flops is None:
            raise ConfigError(
                f"GPU {device.id!r} has no fast fp16 path; mixed precision (amp) is not modelled "
                "for it: use --precision fp32"
            )
        if has_tensor_cores(device):  # fp16 x fp16 + fp32 sums; CUDA cores: fp32 math
            tc = device.peak_fp16_flops if tensor else 0.0
            return Gpu(**common, elem_bytes=2, cuda_flops=fp32, winograd_flops=fp32,
                       tensor_flops=tc)  # fmt: skip
        return Gpu(**common, elem_bytes=2, cuda_flops=device.peak_fp16_flops, winograd_flops=fp32)
    tf32 = device.peak_tf32_flops if tensor else None
    return Gpu(**common, elem_bytes=4, cuda_flops=fp32, winograd_flops=fp32,
               tensor_flops=tf32 or 0.0)  # fmt: skip


@lru_cache(maxsize=65536)
def _conv_s(shape: ConvShape, pass_: str, gpu: Gpu, model: KernelModel, layout: str) -> float:
    return pass_s(shape, pass_, gpu, model, layout)


def _check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
    return layout


def _resolved(
    device: DeviceSpec,
    precision: str,
    model: KernelModel | None,
    tf32: bool = True,
    layout: str = DEFAULT_LAYOUT,
    library: str | None = None,
) -> tuple[Gpu, KernelModel, str]:
    """The arguments of :func:`conv_pass_s` checked: the GPU at that arithmetic and library,
    the model, the layout."""
    gpu = _gpu(device if tf32 else without_tf32(device), precision, library)
    return gpu, model or default_model(), _check_layout(layout)


def conv_pass_s(
    shape: ConvShape,
    pass_: str,
    device: DeviceSpec,
    precision: str = "fp32",
    model: KernelModel | None = None,
    *,
    tf32: bool = True,
    layout: str = DEFAULT_LAYOUT,
    library: str | None = None,
) -> float:
    """Seconds of one ``pass_`` (``fwd``, ``bwd_data``, ``bwd_filter``) of ``shape`` on the GPU
    ``device`` at ``precision`` (``fp32``, or ``amp``: fp16 storage), tensors in ``layout``
    (``nchw``, cuDNN's and the frameworks' default, or ``nhwc``). On a GPU with tensor cores
    amp runs them (fp16 products, fp32 sums), and fp32 runs its TF32 tensor cores where it has
    them (Ampere and later), as TensorFlow's and PyTorch's cuDNN convolutions do by default,
    unless ``tf32`` is False (``NVIDIA_TF32_OVERRIDE=0``); the CUDA-core routes (Winograd,
    channels a tensor-core kernel would have to pad) stay candidates. ``library`` is the cuDNN
    generation (:data:`LIBRARIES`; default :func:`default_library`)."""
    gpu, m, lay = _resolved(device, precision, model, tf32, layout, library)
    return _conv_s(shape, pass_, gpu, m, lay)


def conv_routes_s(
    shape: ConvShape,
    pass_: str,
    device: DeviceSpec,
    precision: str = "fp32",
    model: KernelModel | None = None,
    **options: Any,
) -> dict[str, float]:
    """Seconds of the pass on each family of kernels (``cuda``, and ``tensor`` where the GPU
    runs this arithmetic on tensor cores), ``options`` those of :func:`conv_pass_s` (``tf32``,
    ``layout``, ``library``): :func:`conv_pass_s` is the fastest."""
    return routes_s(shape, pass_, *_resolved(device, precision, model, **options))


def dense_pass_s(
    batch: int,
    n_in: int,
    n_out: int,
    pass_: str,
    device: DeviceSpec,
    precision: str = "fp32",
    model: KernelModel | None = None,
    *,
    tf32: bool = True,
) -> float:
    """Seconds of one pass of a fully connected layer: a 1x1 convolution over a 1x1 input
    (channels last and first are the same layout there)."""
    shape = ConvShape(batch, 1, 1, n_in, n_out, 1, 1)
    return conv_pass_s(shape, pass_, device, precision, model, tf32=tf32)
