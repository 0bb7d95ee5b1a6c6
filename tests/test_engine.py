"""The engines: fast vs detailed agreement, 1-GPU exactness, bounds and monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.api import job, predict, prepare
from ddlsim.calibration.store import find_profile
from ddlsim.engine.plan import plan_from_dag
from ddlsim.engine.simulate import SimOptions
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.workload.zoo import get_model

# Homogeneous configurations: every worker is in the same position (co-located parameter
# servers are not: workers next to a shard are faster; see docs/design.md).
HOMOGENEOUS = [
    dict(model="resnet50", gpus=16),
    dict(model="resnet50", gpus=64, inter_node="25gbe", transport="rdma"),
    dict(model="alexnet", gpus=32, inter_node="10gbe"),
    dict(model="googlenet", gpus=24, gpus_per_node=8, gpu="k80"),
    dict(model="resnet50", gpus=16, hierarchical=True),
    dict(model="inception3", gpus=32, algorithm="tree", gpu="v100"),
    dict(model="resnet50", gpus=16, fusion_threshold_mb=0, cycle_time_ms=5),
    dict(model="vgg16", gpus=8, gpus_per_node=2, fp16_allreduce=True, inter_node="ib-fdr"),
    dict(model="googlenet", gpus=8, comm="horovod-mpi", gpus_per_node=4, inter_node="25gbe"),
    dict(model="resnet101", gpus=16, comm="horovod-mpi", gpus_per_node=4, inter_node="40gbe"),
    dict(model="inception3", gpus=16, comm="ps", gpus_per_node=4, ps_colocated=False),
    dict(model="vgg16", gpus=8, comm="ps", n_ps=2, gpus_per_node=4, ps_colocated=False),
    dict(model="resnet50", gpus=8, comm="ps", gpus_per_node=8),
    dict(model="resnet50", gpus=16, comm="byteps", gpus_per_node=4, ps_colocated=False),
    dict(model="resnet50", gpus=16, comm="distributed-replicated", gpu="k80", inter_node="ec2"),
    dict(model="vgg16", gpus=8, comm="replicated-nccl"),
    dict(model="vgg16", gpus=8, comm="replicated-cpu", gpu="k80"),
    dict(model="mobilenet", gpus=4, gpu="p100-pcie", batch=32),
    dict(model="alexnet", gpus=16, gpus_per_node=4, data="real", batch=256),
]


@pytest.mark.parametrize("config", HOMOGENEOUS, ids=lambda c: "-".join(map(str, c.values())))
def test_fast_and_detailed_engines_agree_within_3_percent_on_homogeneous_jobs(config):
    # identical ranks: the rank-variability model is compared on its own below
    fast = predict(rank_sigma=0.0, **config)
    detailed = predict(engine="detailed", rank_sigma=0.0, **config)
    assert detailed.images_per_sec == pytest.approx(fast.images_per_sec, rel=0.03)
    assert detailed.sim.n_workers_simulated == config["gpus"]
    assert fast.sim.n_workers_simulated == 1


@pytest.mark.parametrize(
    "model, gpu, batch, precision",
    [
        ("resnet50", "p100", 64, "fp32"),
        ("alexnet", "k80", 512, "fp32"),
        ("vgg16", "v100", 32, "amp"),
    ],
)
def test_one_gpu_has_no_communication_and_reproduces_the_calibration(model, gpu, batch, precision):
    p = predict(model, 1, gpu=gpu, batch=batch, precision=precision)
    prof = find_profile(get_model(model), catalog.device(gpu), batch, precision)
    assert p.iteration_time_s == pytest.approx(prof.step_time_s, rel=1e-12)
    assert p.images_per_sec == pytest.approx(batch / prof.step_time_s, rel=1e-12)
    assert p.scaling_efficiency == pytest.approx(1.0, rel=1e-12)
    assert p.comm_ops == []
    assert p.breakdown["comm_exposed_s"] == 0 and p.breakdown["comm_hidden_s"] == 0


def test_single_gpu_throughput_flag_sets_the_one_gpu_rate_exactly():
    p = predict("resnet50", 1, single_gpu_throughput=250.0)
    assert p.images_per_sec == pytest.approx(250.0, rel=1e-12)
    q = predict("resnet50", 64, single_gpu_throughput=250.0)
    assert q.single_gpu_images_per_sec == pytest.approx(250.0, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    model=st.sampled_from(["alexnet", "resnet50", "googlenet", "vgg16"]),
    gpus=st.sampled_from([2, 4, 8, 16, 64, 256]),
    comm=st.sampled_from(["horovod-nccl", "horovod-mpi", "ps", "byteps"]),
    network=st.sampled_from(["10gbe", "25gbe", "ib-edr"]),
)
def test_scaling_efficiency_never_exceeds_one_and_breakdown_adds_up(model, gpus, comm, network):
    """Efficiency <= 1; compute + exposed comm + stalls + coordination == iteration time."""
    p = predict(model, gpus, comm=comm, inter_node=network)
    assert 0 < p.scaling_efficiency <= 1 + 1e-9
    b = p.breakdown
    total = b["compute_s"] + b["comm_exposed_s"] + b["input_stall_s"] + b["coordination_s"]
    assert total == pytest.approx(p.iteration_time_s, rel=1e-6)
    assert b["comm_hidden_s"] <= b["compute_s"] + 1e-12


@pytest.mark.parametrize("model", ["alexnet", "resnet50"])
def test_a_faster_network_is_never_slower(model):
    rates = [
        predict(model, 64, inter_node=net).images_per_sec
        for net in ("10gbe", "25gbe", "40gbe", "ib-edr", "ib-hdr")
    ]
    assert rates == sorted(rates)


def test_fp16_compression_halves_the_bytes_and_helps_a_network_bound_job():
    base = predict("vgg16", 32, inter_node="10gbe")
    half = predict("vgg16", 32, inter_node="10gbe", fp16_allreduce=True)
    assert half.inputs["grad_bytes"] * 2 == base.inputs["grad_bytes"]
    assert half.images_per_sec > 1.5 * base.images_per_sec


def test_parameter_servers_scale_worse_than_ring_allreduce():
    ring = predict("resnet50", 64, inter_node="25gbe", gpus_per_node=4)
    ps = predict("resnet50", 64, comm="ps", inter_node="25gbe", gpus_per_node=4)
    assert ps.scaling_efficiency < ring.scaling_efficiency


def test_disabling_fusion_launches_one_collective_per_layer():
    setup = prepare(job("resnet50", 16, fusion_threshold_mb=0))
    fused = prepare(job("resnet50", 16, cycle_time_ms=20))
    slower_cycle = prepare(job("resnet50", 16, cycle_time_ms=100))
    weighted = sum(1 for layer in get_model("resnet50").layers if layer.tensors)
    assert len(plan_from_dag(setup.dag).ops) == weighted
    assert len(plan_from_dag(slower_cycle.dag).ops) < len(plan_from_dag(fused.dag).ops) < weighted


def test_a_straggler_slows_everyone_down_by_about_its_slowdown():
    # identical ranks otherwise, so the one slow rank sets the pace alone
    base = predict("resnet50", 16, engine="detailed", rank_sigma=0.0)
    slow = predict("resnet50", 16, engine="detailed", rank_sigma=0.0, stragglers={5: 1.25})
    compute = base.breakdown["compute_s"]
    assert slow.iteration_time_s >= base.iteration_time_s + 0.2 * compute


def test_jitter_is_reproducible_with_a_seed_and_changes_with_another():
    a = predict("resnet50", 8, engine="detailed", jitter_sigma=0.05, seed=1)
    b = predict("resnet50", 8, engine="detailed", jitter_sigma=0.05, seed=1)
    c = predict("resnet50", 8, engine="detailed", jitter_sigma=0.05, seed=2)
    assert a.iteration_time_s == b.iteration_time_s != c.iteration_time_s


def test_stragglers_need_the_detailed_engine():
    with pytest.raises(ConfigError, match="detailed engine"):
        predict("resnet50", 8, stragglers={1: 1.5})


def test_steady_state_is_reached():
    p = prepare(job("resnet50", 256)).simulate(
        SimOptions(warmup_iterations=2, measured_iterations=4)
    )
    measured = p.iteration_times_s[2:]
    assert max(measured) - min(measured) <= 0.01 * p.iteration_time_s


def test_jitter_needs_the_detailed_engine():
    with pytest.raises(ConfigError, match="detailed engine"):
        predict("resnet50", 8, jitter_sigma=0.1)


def test_a_calibration_file_for_another_gpu_is_re_timed_and_says_so(tmp_path):
    from ddlsim.calibration.profile import save
    from ddlsim.calibration.transfer import transfer_device

    prof = find_profile(get_model("resnet50"), catalog.device("p100"), 64, "fp32")
    path = save(prof, tmp_path / "p100.json")
    p = predict("resnet50", 8, gpu="v100", calibration=str(path))
    rule = p.inputs["calibration"]["device_rule"]
    assert rule == "re-timed from p100-sxm2 to v100-sxm2 by per-layer roofline ratios"
    moved = transfer_device(prof, "v100")
    assert p.single_gpu_images_per_sec == pytest.approx(moved.images_per_sec, rel=1e-9)
