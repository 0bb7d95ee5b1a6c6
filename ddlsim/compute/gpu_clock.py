"""The clock a GPU holds under a dense GEMM: its boost clock until the board's power limit binds.

The catalog's peaks are at the boost clock (Hopper's tensor cores: below it, see below). A
dense matrix product keeps every lane of the unit it runs on busy, and a board whose power limit
(``max_power_w``, the datasheet's TDP) is small for its peak cannot hold that clock for long:
GPU Boost lowers the clock until the board's power is back at its limit. The kernel files show
it (docs/design.md, "Transformer kernels"): on the 70 W T4 the measured / predicted ratio of
compute-bound GEMMs is ~0.9 below 1 ms and ~1.9 from a few milliseconds on, on both NeuSight's
and DeepBench's rows; the 75 W P4's batched GEMMs settle at ~1.3, its boost / base clock; the
250-400 W V100s and A100s show no such step.

Three terms, each with what it stands for:

* **the power a dense kernel draws at boost** is the unit's peak FLOP/s times an energy per FLOP
  (board level: the SMs, register files, caches, the kernel's DRAM traffic, leakage), which
  scales with the process node's feature size (:data:`PROCESS_NM`, first-order Dennard scaling:
  the switched capacitance per operation is proportional to the feature size). One energy per
  FLOP per nanometre for CUDA-core kernels and one for tensor-core kernels are fitted
  (``data/gemm_model.json``: ``cuda_pJ_per_flop_nm``, ``tensor_pJ_per_flop_nm``); the catalog
  gives every board's TDP and peak;
* **the sustained clock** is the fraction of boost at which that power meets the TDP, taking the
  power as proportional to the clock (a throttled GPU sits at its lowest voltage, where dynamic
  power is C V^2 f with V fixed), never below the datasheet's base clock, the clock NVIDIA
  guarantees at the TDP under its worst-case load (:func:`sustained_fraction`);
* **how long the load lasts**: GPU Boost reacts to the board's power over a window, so a short
  load runs at boost; the clock relaxes from boost to the sustained clock with a time constant
  (``power_window_s``, fitted) and a call's mean clock is the mean over the load it belongs to
  (:func:`mean_clock_fraction`: a measurement's back-to-back calls, or a training step's
  continuous load).

Every fraction is of the clock the unit's catalogued peak is quoted at (:func:`peak_clock_hz`),
since it multiplies that peak: the budget is the TDP per peak FLOP/s, so ``budget / energy`` is
the sustained clock over the peak's clock. That is the boost clock for every catalogued peak
but Hopper's tensor cores, whose datasheet peaks are at a lower clock than the boost the fp32
peak is at: H100 SXM5 989.4 TFLOPS = 132 SMs x 4096 FLOP/clk x 1.83 GHz against 66.9 TFLOPS
fp32 = 132 x 256 x 1.98 GHz (boost); H100 PCIe 756.5 = 114 x 4096 x 1.62 against 51.2 = 114 x
256 x 1.755. The floor is then the base clock over the peak's clock (H100 SXM5 1590 / 1830 =
0.869 of 989 TFLOPS, not 1590 / 1980 = 0.803, which would put the floor 8 % too low), and the
cap stays at the peak's clock (fraction 1): the datasheet's tensor peak is the most the model
lets tensor cores deliver, not 989 x 1980 / 1830 = 1070 TFLOPS, which the measured H100 runs do
not support (docs/design.md, "Transformer kernels": llm-foundry's H100 rows are already too fast).

A board without a catalogued TDP (or an architecture without a node in :data:`PROCESS_NM`)
runs at boost: the model has no power to compare.
"""

from __future__ import annotations

import math

from ddlsim.system.specs import DeviceSpec

#: process node (nm) of each architecture's chips (NVIDIA's architecture whitepapers and
#: product briefs): Kepler GK110/GK210 and Maxwell GM200 TSMC 28 nm; Pascal GP100/GP102/GP104
#: TSMC 16 nm FinFET; Volta GV100 and Turing TU104 TSMC 12 nm FFN; Ampere GA100 TSMC 7 nm (the
#: GA102 of the A10 / A40 is Samsung 8 nm, taken at the architecture's 7); Ada AD10x, Hopper
#: GH100 and Blackwell TSMC 4N / 4NP, 5 nm-class processes
PROCESS_NM = {
    "kepler": 28.0,
    "maxwell": 28.0,
    "pascal": 16.0,
    "volta": 12.0,
    "turing": 12.0,
    "ampere": 7.0,
    "ada": 5.0,
    "hopper": 5.0,
    "blackwell": 5.0,
}
_PJ = 1e-12


def power_budget_pJ_per_flop_nm(device: DeviceSpec, peak_flops: float) -> float:
    """The board's TDP per peak FLOP/s of the unit a kernel runs on, per nanometre of its
    process node (pJ / FLOP / nm); ``inf`` where the catalog has no TDP or node."""
    node = PROCESS_NM.get(device.arch)
    if device.max_power_w is None or node is None or peak_flops <= 0:
        return math.inf
    return device.max_power_w / peak_flops / node / _PJ


def peak_clock_hz(device: DeviceSpec, tensor: bool) -> float | None:
    """The clock the catalog's peak of the unit is quoted at: the boost clock, but for the
    tensor cores of a GPU whose datasheet quotes them lower (``tensor_clock_hz``: H100 SXM5
    1830 MHz, H100 PCIe 1620 MHz; None where no clocks are catalogued)."""
    if tensor and device.tensor_clock_hz is not None:
        return device.tensor_clock_hz
    return device.boost_clock_hz


def base_fraction(device: DeviceSpec, tensor: bool = False) -> float:
    """The datasheet's base clock over the clock the unit's peak is quoted at (0 where not
    catalogued): the floor of the fraction of the peak a power-limited kernel keeps."""
    peak_hz = peak_clock_hz(device, tensor)
    if device.base_clock_hz is None or not peak_hz:
        return 0.0
    return device.base_clock_hz / peak_hz


def sustained_fraction(budget_pJ_per_flop_nm: float, floor: float, pJ_per_flop_nm: float) -> float:
    """The clock (fraction of boost) a dense kernel holds under a long load: the power limit
    over the kernel's power at boost (power proportional to the clock), at most 1, at least
    ``floor`` (the base clock's fraction)."""
    if pJ_per_flop_nm <= 0:
        return 1.0
    return max(floor, min(1.0, budget_pJ_per_flop_nm / pJ_per_flop_nm))


def mean_clock_fraction(sustained: float, load_s: float | None, window_s: float) -> float:
    """The mean clock (fraction of boost) over a load of ``load_s`` seconds (at boost) whose
    clock relaxes from boost to ``sustained`` with time constant ``window_s``: ``s + (1 - s)
    (1 - exp(-L / w)) w / L``. ``load_s`` None: a continuous load (the sustained clock)."""
    if sustained >= 1.0:
        return 1.0
    if load_s is None:
        return sustained
    if window_s <= 0:
        return sustained
    x = load_s / window_s
    if x <= 0:
        return 1.0
    return sustained + (1.0 - sustained) * (-math.expm1(-x)) / x
