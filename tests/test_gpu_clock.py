"""The clock a GPU holds under a dense GEMM (:mod:`ddlsim.compute.gpu_clock`): boost until the
board's power limit binds, never under the base clock, relaxing over the load."""

from __future__ import annotations

import dataclasses
import math

import pytest

from ddlsim.compute import gemm_fit, gpu_clock
from ddlsim.compute.gemm import clock_fraction, default_gemm_model, gemm_parts, unit_power_budget
from ddlsim.compute.gemm_check import read_transformer_csv
from ddlsim.system import catalog

MODEL = default_gemm_model()
SAMPLE = "traces/measured/kernels/transformer/gemm.csv"


def test_mean_clock_runs_from_boost_to_the_sustained_clock():
    s, w = 0.5, 0.01
    assert gpu_clock.mean_clock_fraction(s, 1e-9, w) == pytest.approx(1.0, abs=1e-6)
    assert gpu_clock.mean_clock_fraction(s, 1e3, w) == pytest.approx(s, abs=1e-4)
    assert gpu_clock.mean_clock_fraction(s, None, w) == s  # a continuous load
    # closed form at one window: s + (1 - s)(1 - 1/e)
    assert gpu_clock.mean_clock_fraction(s, w, w) == pytest.approx(s + (1 - s) * (1 - 1 / math.e))
    loads = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    clocks = [gpu_clock.mean_clock_fraction(s, x, w) for x in loads]
    assert clocks == sorted(clocks, reverse=True)
    assert gpu_clock.mean_clock_fraction(1.0, 1.0, w) == 1.0


def test_sustained_clock_is_the_power_ratio_between_base_and_boost():
    assert gpu_clock.sustained_fraction(2.0, 0.3, 1.0) == 1.0  # budget above the kernel's draw
    assert gpu_clock.sustained_fraction(0.5, 0.3, 1.0) == 0.5  # power proportional to clock
    assert gpu_clock.sustained_fraction(0.1, 0.3, 1.0) == 0.3  # never under the base clock
    assert gpu_clock.sustained_fraction(0.1, 0.3, 0.0) == 1.0  # no energy: no limit


def test_budget_is_tdp_over_peak_per_nm():
    t4 = catalog.kernel_device("t4")
    budget = gpu_clock.power_budget_pJ_per_flop_nm(t4, t4.peak_fp32_flops)
    assert budget == pytest.approx(70 / 8.1e12 / 12 / 1e-12)
    assert gpu_clock.base_fraction(t4) == pytest.approx(585 / 1590)
    v100 = catalog.kernel_device("v100")  # no catalogued TDP: no power model, boost
    assert gpu_clock.power_budget_pJ_per_flop_nm(v100, v100.peak_fp32_flops) == math.inf
    assert gpu_clock.base_fraction(v100) == 0.0
    # tensor cores count at their fp16 rate whatever the precision (TF32, bf16, fp8)
    h100 = catalog.kernel_device("h100")
    fp8 = unit_power_budget(h100, 2 * h100.peak_fp16_flops, True)
    assert fp8 == pytest.approx(unit_power_budget(h100, h100.peak_fp16_flops, True))


def test_a_t4_holds_boost_for_a_short_load_and_throttles_under_a_long_one():
    t4 = catalog.kernel_device("t4")
    peak = t4.peak_fp32_flops
    short = clock_fraction(t4, peak, False, MODEL, 1e-5)
    long = clock_fraction(t4, peak, False, MODEL, None)
    assert short > 0.99
    sustained = max(585 / 1590, 70 / 8.1e12 / 12 / 1e-12 / MODEL.cuda_pJ_per_flop_nm)
    assert long == pytest.approx(sustained)
    assert 585 / 1590 <= long < 0.7
    big = gemm_parts(4096, 4096, 4096, t4, "fp32")
    assert big.compute_s == pytest.approx(big.boost_compute_s / long)
    one_call = gemm_parts(4096, 4096, 4096, t4, "fp32", calls=1)
    assert big.boost_compute_s == one_call.boost_compute_s
    assert one_call.clock > long


def test_boards_with_power_to_spare_run_at_boost():
    for gpu in ("a100", "a100-sxm4-80gb", "h100", "p100-sxm2"):
        device = catalog.kernel_device(gpu)
        for precision in ("fp32", "fp16"):
            parts = gemm_parts(8192, 8192, 8192, device, precision)
            assert parts.clock == 1.0, (gpu, precision)
    v100 = catalog.kernel_device("v100")  # no TDP catalogued
    assert gemm_parts(8192, 8192, 8192, v100, "fp16").clock == 1.0


def test_a_low_power_board_sits_at_its_base_clock():
    for gpu, base in (("p4", 810 / 1063), ("l4", 795 / 2040)):
        device = catalog.kernel_device(gpu)
        assert gemm_parts(8192, 8192, 8192, device, "fp32").clock == pytest.approx(base), gpu


@pytest.mark.parametrize(
    "gpu, lanes",
    [("t4", 64), ("p4", 128), ("l4", 128), ("m40", 128), ("titanx-maxwell", 128),
     ("titanx-pascal", 128), ("p100-pcie", 64), ("p100-sxm2", 64), ("gtx-1080ti", 128),
     ("titan-xp", 128)],
)  # fmt: skip
def test_catalogued_clocks_give_the_fp32_peak(gpu, lanes):
    """fp32 peak = SMs x FP32 lanes per SM x 2 x boost clock (datasheets), base below boost."""
    d = catalog.kernel_device(gpu)
    assert d.sm_count * lanes * 2 * d.boost_clock_hz == pytest.approx(d.peak_fp32_flops, rel=0.015)
    assert d.base_clock_hz < d.boost_clock_hz and d.max_power_w > 0
    assert d.arch in gpu_clock.PROCESS_NM
    for key in ("base_clock_MHz", "boost_clock_MHz", "max_power_W"):
        assert key in d.sources


def test_mamf_best_shape_rows_are_checked_not_fitted():
    rows, _, _ = read_transformer_csv(SAMPLE)
    mamf = [r for r in rows if r.time_stat == "best_shape_mean100"]
    assert mamf and not any(gemm_fit.fitted_row(r) for r in mamf)
    assert all(gemm_fit.fitted_row(r) for r in rows if r.source == "vidur")


@pytest.mark.parametrize("gpu, sms", [("h100", 132), ("h100-pcie", 114)])
def test_hopper_tensor_peaks_are_at_their_own_clock(gpu, sms):
    """H100 datasheets quote the dense tensor peaks at 1830 / 1620 MHz (SMs x 4096 FLOP/clk),
    the fp32 peak at the 1980 / 1755 MHz boost: the power-limited floor is base / that clock."""
    d = catalog.device(gpu)
    assert sms * 4096 * d.tensor_clock_hz == pytest.approx(d.peak_fp16_flops, rel=0.002)
    assert sms * 256 * d.boost_clock_hz == pytest.approx(d.peak_fp32_flops, rel=0.005)
    assert gpu_clock.base_fraction(d, True) == pytest.approx(d.base_clock_hz / d.tensor_clock_hz)
    assert gpu_clock.base_fraction(d) == pytest.approx(d.base_clock_hz / d.boost_clock_hz)
    assert gpu_clock.peak_clock_hz(catalog.device("a100"), True) == 1.41e9  # A100: at boost


def test_a_hopper_tensor_kernel_never_sits_under_its_base_clock():
    h100 = catalog.device("h100")
    starved = dataclasses.replace(MODEL, tensor_pJ_per_flop_nm=1.0)  # far above the budget
    clock = clock_fraction(h100, h100.peak_fp16_flops, True, starved, None)
    assert clock == pytest.approx(1590 / 1830)
