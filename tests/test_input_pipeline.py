"""Real data: the host input pipeline's rate, DALI, and the override."""

from __future__ import annotations

import pytest

from ddlsim.api import job, predict, prepare
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.execution.dag import NodeKind, nodes_in_order
from ddlsim.resolve.prepare import HOST_DECODE_IMAGES_PER_S_PER_THREAD
from ddlsim.system import catalog

DGX1V = dict(model="resnet50", gpu="v100-sxm2", batch=256, precision="amp", rank_sigma=0.0)


def test_default_rate_is_host_threads_times_the_per_thread_rate() -> None:
    setup = prepare(job("resnet50", 8, gpu="v100-sxm2", batch=128, data="real"))
    threads = catalog.device("v100-sxm2").host_cpu_threads
    assert threads == 80  # DGX-1V: 2 x 20-core Xeon E5-2698 v4
    rate = threads * HOST_DECODE_IMAGES_PER_S_PER_THREAD
    assert setup.input_time_s == pytest.approx(8 * 128 / rate)


def test_an_input_bound_node_runs_at_the_host_rate() -> None:
    pred = predict(gpus=8, data="real", host_input_images_per_s=3000.0, **DGX1V)
    assert pred.images_per_sec == pytest.approx(3000.0, rel=1e-6)
    assert pred.breakdown["input_stall_s"] > 0
    assert pred.inputs["host_input_images_per_s"] == pytest.approx(3000.0)
    # one GPU has the node's host to itself: the baseline is not input bound
    assert pred.single_gpu_images_per_sec == pytest.approx(
        predict(gpus=1, **DGX1V).single_gpu_images_per_sec
    )


def test_dali_decodes_on_the_gpus_so_the_host_rate_does_not_bind() -> None:
    host = prepare(job("resnet50", 8, gpu="v100-sxm2", data="real", host_input_images_per_s=10.0))
    dali = prepare(job(
        "resnet50", 8, gpu="v100-sxm2", data="real", input_pipeline="dali",
        host_input_images_per_s=10.0,
    ))  # fmt: skip
    assert nodes_in_order(host.dag, NodeKind.INPUT)
    assert not nodes_in_order(dali.dag, NodeKind.INPUT)
    synthetic = predict(gpus=8, **DGX1V)
    gpu_decode = predict(gpus=8, data="real", input_pipeline="dali", **DGX1V)
    # only DALI's own GPU work (a fraction of a percent of the step) separates the two
    assert gpu_decode.images_per_sec < synthetic.images_per_sec
    assert gpu_decode.images_per_sec == pytest.approx(synthetic.images_per_sec, rel=0.01)


@pytest.mark.parametrize("bad", [0.0, -5.0, float("inf")])
def test_bad_rate_is_refused(bad: float) -> None:
    with pytest.raises(ConfigError, match="host input rate"):
        prepare(job("resnet50", 8, data="real", host_input_images_per_s=bad))


def test_cli_flags(capsys) -> None:
    argv = ["predict", "--model", "resnet50", "--gpus", "8", "--data", "real"]
    assert main([*argv, "--input-pipeline", "dali", "--json"]) == 0
    assert main([*argv, "--host-input-rate", "2000", "--json"]) == 0
    capsys.readouterr()
    assert main([*argv, "--input-pipeline", "gpu"]) == 2
    assert "invalid choice" in capsys.readouterr().err
