"""Real data: the host input pipeline's rate (per-image cost by preprocessing kind, a
per-process cap, host communication competing for the cores), DALI, and the override."""

from __future__ import annotations

import pytest

from ddlsim.api import job, predict, prepare
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.execution import input_pipeline as ip
from ddlsim.execution.dag import NodeKind, nodes_in_order
from ddlsim.system import catalog

DGX1V = dict(model="resnet50", gpu="v100-sxm2", batch=256, precision="amp", rank_sigma=0.0)


def test_default_rate_is_host_threads_times_the_per_thread_rate() -> None:
    setup = prepare(job("resnet50", 8, gpu="v100-sxm2", batch=128, data="real"))
    threads = catalog.device("v100-sxm2").host_cpu_threads
    assert threads == 80  # DGX-1V: 2 x 20-core Xeon E5-2698 v4
    # ResNet-50 reads 224 x 224 crops: crop-flip at the reference rate, 100 a thread
    rate = threads * ip.REFERENCE_IMAGES_PER_S_PER_THREAD
    assert setup.input_time_s == pytest.approx(8 * 128 / rate)


def test_per_image_cost_closed_form() -> None:
    small, large = ip.CORE_S_PER_IMAGE["inception"]
    assert ip.core_seconds_per_image("inception", 224 * 224) == pytest.approx(small)
    assert ip.core_seconds_per_image("inception", 380 * 380) == pytest.approx(large)
    mid = (224 * 224 + 380 * 380) / 2  # linear in the crop's pixels
    assert ip.core_seconds_per_image("inception", mid) == pytest.approx((small + large) / 2)
    # a tiny crop still decodes the whole JPEG
    for kind in ip.PREPROCESSING_KINDS:
        assert ip.core_seconds_per_image(kind, 1) >= ip.DECODE_CORE_S
    # relative to crop-flip at 224, on the reference thread
    ref = ip.CORE_S_PER_IMAGE["crop-flip"][0]
    assert ip.thread_seconds_per_image("inception", 224 * 224) == pytest.approx(
        small / ref / ip.REFERENCE_IMAGES_PER_S_PER_THREAD
    )


def test_preprocessing_costs_order_as_measured() -> None:
    px = 224 * 224
    crop, inception, auto = (ip.core_seconds_per_image(k, px) for k in ip.PREPROCESSING_KINDS)
    assert ip.DECODE_CORE_S < crop < auto < inception
    for kind in ip.PREPROCESSING_KINDS:  # a larger crop costs more
        assert ip.core_seconds_per_image(kind, 380 * 380) > ip.core_seconds_per_image(kind, px)


def test_auto_preprocessing_by_model_family() -> None:
    assert ip.preprocessing_kind("auto", "efficientnet-b4") == "autoaugment"
    assert ip.preprocessing_kind("auto", "resnet50") == "crop-flip"
    assert ip.preprocessing_kind("inception", "efficientnet-b0") == "inception"
    b4 = prepare(job("efficientnet-b4", 8, gpu="v100-sxm2", batch=32, data="real"))
    rate = 8 * 32 / b4.input_time_s / 80  # images/s a thread of the 80
    expected = 1 / ip.thread_seconds_per_image("autoaugment", 380 * 380)
    assert rate == pytest.approx(expected)
    assert rate < ip.REFERENCE_IMAGES_PER_S_PER_THREAD  # 380 px AutoAugment: ~1.6x crop-flip


def test_inception_distortions_slow_the_host() -> None:
    kw = dict(batch=128, data="real")
    plain = prepare(job("resnet50", 8, gpu="v100-sxm2", **kw))
    distorted = prepare(job("resnet50", 8, gpu="v100-sxm2", preprocessing="inception", **kw))
    ratio = ip.core_seconds_per_image("inception", 224 * 224) / ip.CORE_S_PER_IMAGE["crop-flip"][0]
    assert distorted.input_time_s == pytest.approx(plain.input_time_s * ratio)


def test_per_process_workers_cap_the_node() -> None:
    kw = dict(gpu="v100-sxm2", batch=128, data="real")
    # Horovod: one process per GPU, 2 workers each -> 16 of the DGX-1V's 80 threads
    capped = prepare(job("resnet50", 8, input_workers=2, **kw))
    assert capped.input_time_s == pytest.approx(8 * 128 / (16 * 100.0))
    # TensorFlow's in-graph replication: one process drives the node
    single = prepare(job("resnet50", 8, comm="replicated-nccl", input_workers=2, **kw))
    assert single.input_time_s == pytest.approx(8 * 128 / (2 * 100.0))
    # more workers than threads: the host's threads bind
    wide = prepare(job("resnet50", 8, input_workers=64, **kw))
    assert wide.input_time_s == pytest.approx(8 * 128 / (80 * 100.0))


def test_more_workers_or_threads_are_never_slower() -> None:
    times = [
        prepare(job("resnet50", 8, gpu="v100-sxm2", data="real", input_workers=w)).input_time_s
        for w in (1, 2, 4, 8, 16)
    ]
    assert times == sorted(times, reverse=True)
    for comm_threads in (0, 4, 8):
        batch = [ip.host_batch_s(512, 0.01, t, comm_threads, 0.05) for t in (8, 16, 32, 80)]
        assert batch == sorted(batch, reverse=True)


def test_host_communication_competes_with_a_decoding_host() -> None:
    kw = dict(gpu="v100-sxm2", batch=128, data="real")
    nccl = prepare(job("resnet50", 8, comm="horovod-nccl", **kw))
    mpi = prepare(job("resnet50", 8, comm="horovod-mpi", **kw))
    # MPI's host threads take 8 of 80 threads for the exchange's duration
    grad = mpi.workload.model.grad_bytes("fp32")
    extra = 8 * mpi.comm.time_s(grad) / 80
    assert extra > 0
    assert mpi.input_time_s == pytest.approx(nccl.input_time_s + extra)
    # NCCL inside a node runs on the GPUs: nothing on the host
    assert ip.host_comm_threads("horovod-nccl", "rdma", False, 8) == 0
    # NCCL over TCP sockets between nodes: its proxy threads are the host's
    assert ip.host_comm_threads("horovod-nccl", "tcp", True, 8) == 8
    assert ip.host_comm_threads("horovod-mpi", "rdma", True, 4) == 4


def test_host_communication_costs_nothing_when_the_gpus_bind() -> None:
    slow_gpu = dict(model="resnet50", gpu="k80", batch=32, precision="fp32", rank_sigma=0.0)
    real = predict(gpus=8, comm="horovod-mpi", data="real", **slow_gpu)
    synthetic = predict(gpus=8, comm="horovod-mpi", **slow_gpu)
    assert real.breakdown["input_stall_s"] == pytest.approx(0.0, abs=1e-9)
    assert real.images_per_sec == pytest.approx(synthetic.images_per_sec, rel=1e-9)


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
    assert main([*argv, "--preprocessing", "inception", "--input-workers", "4", "--json"]) == 0
    capsys.readouterr()
    assert main([*argv, "--preprocessing", "mixup"]) == 2
    assert "mixup" in capsys.readouterr().err
    assert main([*argv, "--input-workers", "0"]) == 2
    assert "input workers" in capsys.readouterr().err


def test_a_model_without_an_image_input_is_charged_the_reference_crop() -> None:
    assert ip.image_pixels((299, 299, 3)) == 299 * 299
    assert ip.image_pixels((512, 1, 1)) == 224 * 224  # a transformer's tokens
    assert ip.thread_seconds_per_image("crop-flip", ip.image_pixels((512, 1, 1))) == (
        pytest.approx(1 / ip.REFERENCE_IMAGES_PER_S_PER_THREAD)
    )
