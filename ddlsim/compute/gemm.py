"""Time of a matrix product ``C[m,n] = A[m,k] . B[k,n]`` (and of a batch of them) as cuBLAS runs it.

A transformer's linear layers and its attention's batched products are cuBLAS GEMMs, not cuDNN
convolutions, but they run on the same units in the same way, so this route reuses the pieces
of the convolution kernel model (:mod:`ddlsim.compute.kernel_routes`) rather than copying them:

* **tiles in waves** -- :func:`ddlsim.compute.kernel_routes.gemm_s`: output tiles of 128 rows x
  128/64 columns (tensor cores; CUTLASS's and cuBLAS's Volta-to-Ampere threadblock tiles) or
  128 x 128/64/32/16 (CUDA cores), the widest that does not waste the SMs; ``batch`` products
  share the waves (a batched GEMM is one launch); **split-K** of a long reduction with few tiles
  (1 to 64 slices of at least 64 steps, fp32 partial sums through memory); each tile costs its
  reduction plus the fixed *tile overhead* of the convolution model (``tile_overhead_steps`` /
  ``tc_tile_overhead_steps``: prologue and epilogue, the same on a GEMM's tiles);
* **the peak** of the precision's units from the catalog (:func:`unit_peak`): fp32 on the CUDA
  cores, TF32 / fp16 / bf16 on the tensor cores (Volta: fp16; Turing: fp16; Ampere+: TF32,
  fp16, bf16), fp8 on Hopper's at twice the fp16 rate; a Pascal P100's fp16 GEMM with fp32
  math (``cublasGemmEx``'s pseudo-fp16, DeepBench's P100 sheet) on its CUDA cores;
* **the memory roof**: A, B and C once through DRAM at the precision's width, at the convolution
  model's ``memory_efficiency`` of the bandwidth;
* **a floor per call** (``launch_s``, fitted): a kernel never takes less (launch, the first
  tile's latency, the tail);
* **the clock** the tiles run at: boost, until the board's power limit binds under a long dense
  load (:mod:`ddlsim.compute.gpu_clock`: the TDP against an energy per FLOP of the process
  node, never below the base clock; a measurement's back-to-back calls, or training's
  continuous load).

Main-loop efficiencies are fitted (``data/gemm_model.json``, ``scripts/fit_gemm_model.py``):
one for cuBLAS's CUDA-core kernels, one for its tensor-core kernels, on every generation. What a
measurement shows of the kernel time depends on how it was timed: :func:`as_measured_s`.
Transposes (cuBLAS's ``transa`` / ``transb``) are not modelled: the measured files do not
separate a transpose cost from a shape effect (docs/design.md, "Transformer kernels").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from ddlsim.compute import gpu_clock
from ddlsim.compute.kernel_routes import TC_TILE_COLS, TILE_COLS, Gpu, gemm_s
from ddlsim.compute.kernels import default_model, has_tensor_cores
from ddlsim.errors import CatalogError, ConfigError
from ddlsim.system.specs import DeviceSpec

MODEL_FILE = "gemm_model.json"
#: input precisions of a GEMM (what the operands are stored in and the products run at)
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
ELEM_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
#: architectures whose tensor cores take each reduced precision (NVIDIA's architecture
#: whitepapers: Volta and Turing fp16; Ampere adds TF32 and bf16; Hopper adds fp8; Blackwell
#: keeps them all and adds fp6 / fp4). Ada (sm_89) has them too, but is not an architecture of
#: the catalog.
TENSOR_PRECISION_ARCHS = {
    "fp16": ("volta", "turing", "ampere", "hopper", "blackwell"),
    "tf32": ("ampere", "hopper", "blackwell"),
    "bf16": ("ampere", "hopper", "blackwell"),
    "fp8": ("hopper", "blackwell"),
}
#: Hopper's dense fp8 tensor-core rate over its fp16 rate (H100 datasheet: 1,979 vs 989 TFLOPS)
FP8_OVER_FP16 = 2.0
#: the statistic a measurement reports -> the :class:`GemmModel` field of what its timing
#: method adds to the kernel time per call (None: pure kernel time). README of the measured
#: files: NeuSight's CUDA events around one PyTorch call include the host's dispatch of the op;
#: LLMCompass's host clock around one call and a synchronize includes launch and sync;
#: DeepBench's host clock over 400 back-to-back calls sees the GPU's time per call unless the
#: host issues calls more slowly than the GPU runs them (:data:`ISSUE_BOUND`: the larger of the
#: two, not their sum). ddlsim's own device measurements (``scripts/device_measure.py``):
#: ``graph10_median5`` replays 10 calls captured in one CUDA graph (no host between kernels:
#: kernel time); ``event10_median5`` times 10 eager back-to-back calls (the graph's fallback),
#: bounded like DeepBench's loop by the host's issue interval.
TIMINGS = {
    "event_min5of25": "event_dispatch_s",
    "host_mean400": "issue_interval_s",
    "host_median50": "host_sync_s",
    "kineto_median20": None,
    "cupti_median5": None,
    "best_shape_mean100": None,
    "graph10_median5": None,
    "event10_median5": "issue_interval_s",
}
#: statistics of back-to-back calls: per call, the kernel or the host's issue interval
ISSUE_BOUND = ("host_mean400", "event10_median5")
#: the statistic -> how many calls of the kernel run back to back in its measurement (the
#: README of the measured files: warm-ups plus timed calls), the load over which the GPU's clock
#: relaxes from boost (:mod:`ddlsim.compute.gpu_clock`)
TIMING_CALLS = {
    "event_min5of25": 25,
    "host_mean400": 401,
    "host_median50": 53,
    "kineto_median20": 21,
    "cupti_median5": 6,
    "best_shape_mean100": 150,
    "graph10_median5": 64,  # 3 warm-ups, 1 before capture, 1 warm-up replay + 5 timed of 10
    "event10_median5": 63,  # 3 warm-ups, then 6 windows of 10 (the first untimed)
}


@dataclass(frozen=True)
class GemmModel:
    """The GEMM route's fitted coefficients (``data/gemm_model.json`` says what each stands
    for): main-loop efficiencies of cuBLAS's CUDA-core and tensor-core kernels, the kernel
    floor per call, the element-wise kernels' DRAM efficiency and floor, what each timing
    method adds per call, what a ``torch.compile``'d call adds (``compiled_call_s``), and the
    power-limited clock's energies per FLOP per nm and time constant
    (:mod:`ddlsim.compute.gpu_clock`)."""

    cuda_efficiency: float
    tensor_efficiency: float
    launch_s: float
    stream_efficiency: float
    stream_launch_s: float
    event_dispatch_s: float
    issue_interval_s: float
    host_sync_s: float
    compiled_call_s: float
    cuda_pJ_per_flop_nm: float
    tensor_pJ_per_flop_nm: float
    power_window_s: float

    def with_values(self, **values: float) -> GemmModel:
        """A copy with some coefficients replaced (the fit's trial models)."""
        return GemmModel(**{**self.as_dict(), **values})

    def as_dict(self) -> dict[str, float]:
        """Coefficient name -> value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@lru_cache(maxsize=1)
def model_document() -> dict[str, Any]:
    """``data/gemm_model.json``: coefficients, their meaning, the fit and its check."""
    text = resources.files("ddlsim.compute").joinpath("data").joinpath(MODEL_FILE).read_text()
    doc = json.loads(text)
    values = {name: entry.get("value") for name, entry in doc.get("coefficients", {}).items()}
    names = {f.name for f in fields(GemmModel)}
    if set(values) != names or not all(
        isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values.values()
    ):
        raise CatalogError(f"{MODEL_FILE}: needs a value >= 0 for each of {sorted(names)}")
    return doc


def default_gemm_model() -> GemmModel:
    """The shipped, fitted GEMM model."""
    coefficients = model_document()["coefficients"]
    return GemmModel(**{k: float(v["value"]) for k, v in coefficients.items()})


def check_precision(device: DeviceSpec, precision: str) -> None:
    """Refuse a precision the device cannot run (:class:`ConfigError` naming the combination):
    TF32 and bf16 before Ampere, fp8 before Hopper, anything on a device without SMs."""
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if device.sm_count is None:
        raise ConfigError(f"device {device.id!r} has no SM count: the GEMM model is for GPUs")
    archs = TENSOR_PRECISION_ARCHS.get(precision)
    if precision in ("tf32", "bf16", "fp8") and device.arch not in archs:
        raise ConfigError(
            f"{precision} on {device.id} ({device.arch}): {precision} tensor cores are "
            f"{', '.join(archs)} only"
        )


def unit_peak(device: DeviceSpec, precision: str) -> tuple[float, bool]:
    """(peak FLOP/s, on tensor cores) of a GEMM at ``precision`` on ``device``: fp32 on the CUDA
    cores; TF32 at ``peak_tf32``; fp16 / bf16 at ``peak_fp16`` on tensor cores (fp16 without
    tensor cores: fp32 math on the CUDA cores, ``cublasGemmEx``'s compute type); fp8 at
    :data:`FP8_OVER_FP16` x ``peak_fp16``."""
    check_precision(device, precision)
    if precision == "fp32":
        return device.peak_fp32_flops, False
    if precision == "tf32":
        return float(device.peak_tf32_flops or 0.0), True
    if not has_tensor_cores(device):  # fp16 storage, fp32 math on the CUDA cores
        return device.peak_fp32_flops, False
    peak = float(device.peak_fp16_flops or 0.0)
    return (FP8_OVER_FP16 * peak if precision == "fp8" else peak), True


@dataclass(frozen=True)
class GemmParts:
    """The terms of one GEMM call (seconds): the tiles' waves at the clock the call runs at,
    the memory roof, the floor; the tiles at the boost clock and the clock's fraction of it."""

    compute_s: float
    memory_s: float
    launch_s: float
    boost_compute_s: float = 0.0
    clock: float = 1.0

    @property
    def total_s(self) -> float:
        """The call: its floor plus the slower of compute and memory."""
        return self.launch_s + max(self.compute_s, self.memory_s)


def _check_dims(batch: int, m: int, n: int, k: int) -> None:
    for name, value in (("batch", batch), ("m", m), ("n", n), ("k", k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"GEMM {name} must be an integer >= 1, got {value!r}")


@lru_cache(maxsize=65536)
def _parts(
    device: DeviceSpec,
    precision: str,
    dims: tuple[int, int, int, int],
    model: GemmModel,
    calls: int | None,
) -> GemmParts:
    batch, m, n, k = dims
    peak, tensor = unit_peak(device, precision)
    conv = default_model()
    gpu = Gpu(
        sms=device.sm_count or 1,
        mem_Bps=device.mem_bandwidth_Bps,
        elem_bytes=ELEM_BYTES[precision],
        cuda_flops=peak,
    )
    compute = gemm_s(
        gpu,
        peak,
        model.tensor_efficiency if tensor else model.cuda_efficiency,
        conv.tile_overhead(tensor),
        conv.memory_efficiency,
        m,
        n,
        k,
        split=True,
        count=batch,
        widths=TC_TILE_COLS if tensor else TILE_COLS,
    )
    moved = batch * (m * k + k * n + m * n) * ELEM_BYTES[precision]
    memory = moved / (device.mem_bandwidth_Bps * conv.memory_efficiency)
    clock = clock_fraction(device, peak, tensor, model, None if calls is None else calls * compute)
    return GemmParts(compute / clock, memory, model.launch_s, compute, clock)


def clock_fraction(
    device: DeviceSpec, peak: float, tensor: bool, model: GemmModel, load_s: float | None
) -> float:
    """The mean clock (fraction of boost) of a dense kernel on ``device``'s unit of ``peak``
    FLOP/s over a load of ``load_s`` seconds at boost (None: continuous):
    :mod:`ddlsim.compute.gpu_clock`."""
    energy = model.tensor_pJ_per_flop_nm if tensor else model.cuda_pJ_per_flop_nm
    budget = unit_power_budget(device, peak, tensor)
    floor = gpu_clock.base_fraction(device, tensor)
    sustained = gpu_clock.sustained_fraction(budget, floor, energy)
    return gpu_clock.mean_clock_fraction(sustained, load_s, model.power_window_s)


def unit_power_budget(device: DeviceSpec, peak: float, tensor: bool) -> float:
    """The board's TDP per FLOP/s of the unit a GEMM keeps busy, per nm
    (:func:`ddlsim.compute.gpu_clock.power_budget_pJ_per_flop_nm`). Tensor cores count at
    their fp16 rate whatever the precision: the same datapath busy at its full rate draws about
    the same power, twice the elements at half the width (fp8) or half at twice (TF32)."""
    rate = float(device.peak_fp16_flops or peak) if tensor else peak
    return gpu_clock.power_budget_pJ_per_flop_nm(device, rate)


def gemm_parts(
    m: int,
    n: int,
    k: int,
    device: DeviceSpec,
    precision: str = "fp32",
    *,
    batch: int = 1,
    model: GemmModel | None = None,
    calls: int | None = None,
) -> GemmParts:
    """The terms of ``batch`` products ``C[m,n] = A[m,k] . B[k,n]`` in one cuBLAS call, one of
    ``calls`` back-to-back calls (the load the clock sees; None: a continuous load, as in
    training, at the sustained clock)."""
    _check_dims(batch, m, n, k)
    check_precision(device, precision)
    return _parts(device, precision, (batch, m, n, k), model or default_gemm_model(), calls)


def gemm_time_s(
    m: int, n: int, k: int, device: DeviceSpec, precision: str = "fp32", **options: Any
) -> float:
    """Seconds of one cuBLAS call computing ``batch`` products ``C[m,n] = A[m,k] . B[k,n]`` at
    ``precision`` (:data:`PRECISIONS`) on the GPU ``device``: kernel time, no host overhead
    (``options``: ``batch``, ``model``, ``calls`` of :func:`gemm_parts`)."""
    return gemm_parts(m, n, k, device, precision, **options).total_s


def as_measured_s(
    kernel_s: float, time_stat: str, model: GemmModel | None = None, compiled: bool = False
) -> float:
    """What a measurement reported as ``time_stat`` (:data:`TIMINGS`) shows for one call of a
    kernel of ``kernel_s`` seconds: the kernel plus its timing method's overhead per call, or
    for back-to-back calls (:data:`ISSUE_BOUND`) the larger of the kernel and the interval at
    which the host issues calls. A host-timed call of a ``compiled`` (``torch.compile``)
    function also pays ``compiled_call_s``: Dynamo's guards and the compiled graph's wrapper."""
    if time_stat not in TIMINGS:
        raise ConfigError(f"unknown time_stat {time_stat!r}; valid: {', '.join(TIMINGS)}")
    name = TIMINGS[time_stat]
    if name is None:
        return kernel_s
    m = model or default_gemm_model()
    value = getattr(m, name) + (m.compiled_call_s if compiled else 0.0)
    return max(kernel_s, value) if time_stat in ISSUE_BOUND else kernel_s + value
