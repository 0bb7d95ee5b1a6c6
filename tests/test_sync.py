"""Waiting for the slowest rank: the expectation, both engines, the options."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.api import job, predict, prepare
from ddlsim.cli.main import main
from ddlsim.engine.simulate import SimOptions
from ddlsim.engine.sync import DEFAULT_RANK_SIGMA, expected_slowest_factor, rank_factors
from ddlsim.errors import ConfigError


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("sigma", [0.01, 0.06, 0.3])
def test_two_ranks_match_the_closed_form(sigma: float) -> None:
    # iid mean-1 log-normals: E[max(X1, X2)] = 2 * Phi(sigma / sqrt(2))
    assert expected_slowest_factor(2, sigma) == pytest.approx(
        2 * normal_cdf(sigma / math.sqrt(2)), rel=1e-6
    )


def test_one_rank_or_no_variability_costs_nothing() -> None:
    assert expected_slowest_factor(1, 0.5) == 1.0
    assert expected_slowest_factor(4096, 0.0) == 1.0


@pytest.mark.parametrize("n", [4, 64])
def test_expectation_matches_sampling(n: int) -> None:
    rng = np.random.default_rng(7)
    samples = rank_factors(rng, 0.06, 40_000 * n).reshape(40_000, n)
    assert samples.mean() == pytest.approx(1.0, abs=1e-3)  # mean-1 factors
    assert expected_slowest_factor(n, 0.06) == pytest.approx(samples.max(axis=1).mean(), rel=2e-3)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 5000),
    extra=st.integers(1, 5000),
    sigma=st.floats(0.0, 0.5),
    more=st.floats(0.001, 0.5),
)
def test_expectation_grows_with_ranks_and_sigma(n, extra, sigma, more) -> None:
    f = expected_slowest_factor(n, sigma)
    assert f >= 1.0
    assert expected_slowest_factor(n + extra, sigma) >= f - 1e-12
    assert expected_slowest_factor(n, sigma + more) >= f - 1e-12


def test_fast_engine_charges_the_wait_as_coordination() -> None:
    config = dict(model="resnet50", gpus=8, gpu="p100", comm="horovod-nccl")
    ideal = predict(rank_sigma=0.0, **config)
    real = predict(**config)
    factor = expected_slowest_factor(8, DEFAULT_RANK_SIGMA)
    compute = real.breakdown["compute_s"]
    assert compute == pytest.approx(ideal.breakdown["compute_s"], rel=0.01)  # interference
    wait = real.breakdown["straggler_wait_s"]
    assert wait == pytest.approx((factor - 1) * compute, rel=0.02)
    # the wait is idle on the compute stream: coordination (or exposed communication)
    idle = lambda p: p.breakdown["coordination_s"] + p.breakdown["comm_exposed_s"]  # noqa: E731
    assert idle(real) - idle(ideal) == pytest.approx(wait, rel=0.1)
    assert real.iteration_time_s > ideal.iteration_time_s
    assert real.single_gpu_images_per_sec == ideal.single_gpu_images_per_sec
    assert real.inputs["rank_sigma"] == DEFAULT_RANK_SIGMA


def test_one_gpu_is_unaffected() -> None:
    assert (
        predict("resnet50", 1).iteration_time_s
        == predict("resnet50", 1, rank_sigma=0.3).iteration_time_s
    )


def test_detailed_engine_samples_what_the_fast_engine_expects() -> None:
    setup = prepare(job("resnet50", 8, gpu="p100", comm="horovod-nccl"))
    fast = setup.simulate(SimOptions(rank_sigma=0.1))
    detailed = setup.simulate(
        SimOptions(engine="detailed", rank_sigma=0.1, measured_iterations=60, seed=3)
    )
    assert detailed.iteration_time_s == pytest.approx(fast.iteration_time_s, rel=0.02)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_sigma_is_refused(bad: float) -> None:
    with pytest.raises(ConfigError, match="rank sigma"):
        predict("resnet50", 8, rank_sigma=bad)


def test_cli_flag(capsys) -> None:
    assert (
        main(["predict", "--model", "resnet50", "--gpus", "8", "--rank-sigma", "0", "--json"]) == 0
    )
    capsys.readouterr()
    assert main(["predict", "--model", "resnet50", "--gpus", "8", "--rank-sigma", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank sigma" in err
