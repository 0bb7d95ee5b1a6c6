"""Parameter servers as tf_cnn_benchmarks runs them: least-loaded variable placement and the
PS task's gRPC throughput across nodes."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ddlsim
from ddlsim.comm import make_comm_model
from ddlsim.comm.placement import hottest, place, shard_bytes
from ddlsim.comm.ps import GRPC_TASK_Bps
from ddlsim.errors import UnknownNameError
from ddlsim.system.catalog import build_cluster
from ddlsim.workload.zoo import get_model

ROOT = Path(__file__).resolve().parents[1]


def test_greedy_puts_each_variable_on_the_least_loaded_shard() -> None:
    assert place([10, 1, 1, 1], 2) == [0, 1, 1, 1]
    assert place([10, 1, 1, 1], 2, "round-robin") == [0, 1, 0, 1]
    assert place([4, 4, 4], 3) == [0, 1, 2]  # ties: lowest index
    with pytest.raises(UnknownNameError, match="placement rule 'random'"):
        place([1], 2, "random")


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=60), st.integers(1, 16))
def test_greedy_load_is_within_one_variable_of_the_mean(sizes: list[int], k: int) -> None:
    loads = shard_bytes(sizes, k)
    assert sum(loads) == sum(sizes)
    assert max(loads) <= sum(sizes) / k + max(sizes)  # list scheduling's bound


@pytest.mark.parametrize("model", ["inception3", "resnet50", "resnet101", "vgg16"])
def test_greedy_never_loads_a_shard_more_than_round_robin(model: str) -> None:
    sizes = [t.nbytes("fp32") for t in get_model(model).tensors]
    for k in (2, 4, 8):
        assert max(shard_bytes(sizes, k)) <= max(shard_bytes(sizes, k, "round-robin"))


def test_vgg16_fc6_still_loads_one_shard() -> None:
    sizes = [t.nbytes("fp32") for t in get_model("vgg16").tensors]
    assert max(shard_bytes(sizes, 4)) >= max(sizes) > 0.7 * sum(sizes)


def test_the_grpc_figure_is_the_measured_median() -> None:
    doc = json.loads((ROOT / "traces" / "grpc" / "transfer.json").read_text(encoding="utf-8"))
    large = [v for k, v in doc["rate_Bps"].items() if not k.startswith("4MiB")]
    assert GRPC_TASK_Bps == pytest.approx(statistics.median(large), rel=0.01)


def _ps(n_gpus: int, **kw):
    c = build_cluster("p100-pcie", n_gpus, 4, inter_node="100gbe", transport="rdma")
    return make_comm_model("ps", c, **kw)


def test_across_nodes_a_ps_task_moves_no_more_than_its_grpc_rate() -> None:
    ps = _ps(64, n_ps=16)  # 64 workers, 16 co-located PS tasks
    nbytes = 50e6
    for op in ps.ops:
        assert ps.time_s(nbytes, op) >= 64 * nbytes / GRPC_TASK_Bps
    assert ps.server_rpc_Bps == GRPC_TASK_Bps


def test_on_one_node_there_is_no_grpc() -> None:
    one = _ps(4)
    assert one.server_rpc_Bps == float("inf")
    assert one.time_s(50e6, "pull") < 4 * 50e6 / GRPC_TASK_Bps


def test_grpc_binds_where_the_network_would_not_and_ps_scales_worse_with_workers() -> None:
    eff = [
        ddlsim.predict(
            "resnet101",
            n,
            gpu="p100-pcie",
            gpus_per_node=4,
            inter_node="100gbe",
            comm="ps",
            batch=64,
        ).scaling_efficiency
        for n in (16, 64, 256)
    ]
    assert eff == sorted(eff, reverse=True)
    assert eff[-1] < 0.5  # every shard's gRPC load grows with the workers


def test_tensorflow_placement_closed_forms_on_a_conv_bn_pattern() -> None:
    # a kernel and its batch norm's gamma and beta, three times: TF's _RoundRobinStrategy
    # puts every kernel on task 0 with k = 3; GreedyLoadBalancingStrategy (np.argmin of the
    # loads so far, byte_size_load_fn) spreads them
    sizes = [900, 3, 3] * 3
    assert place(sizes, 3, "round-robin") == [0, 1, 2] * 3
    assert shard_bytes(sizes, 3, "round-robin") == [2700, 9, 9]
    assert place(sizes, 3) == [0, 1, 2, 1, 2, 2, 2, 0, 0]  # ties to the lowest task
    assert shard_bytes(sizes, 3) == [906, 903, 909]
    assert hottest(sizes, 3, "round-robin") == 2700 and hottest(sizes, 3) == 909
    assert hottest([], 4) == 0


@pytest.mark.parametrize("model", ["vgg16", "resnet50"])
def test_no_iteration_beats_the_hottest_shard(model: str) -> None:
    sizes = [t.nbytes("fp32") for t in get_model(model).tensors]
    for n in (16, 64):
        c = build_cluster("p100-pcie", n, 4, inter_node="25gbe", transport="tcp")
        ps = make_comm_model("ps", c, tensor_bytes=sizes)
        bound = ps.hottest_shard_s()
        # its task takes W x its bytes through one gRPC server
        assert bound >= n * max(ps.shard_bytes) / GRPC_TASK_Bps
        pred = ddlsim.predict(
            model, n, gpu="p100-pcie", gpus_per_node=4, inter_node="25gbe", transport="tcp",
            comm="ps", batch=64,
        )  # fmt: skip
        assert pred.iteration_time_s >= bound
