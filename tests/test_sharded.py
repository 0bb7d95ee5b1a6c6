"""Sharded data parallelism: NCCL's all-gather / reduce-scatter, FSDP's and ZeRO's calls in the
DAG, the memory per strategy, the CLI's checks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddlsim
from ddlsim.comm import make_comm_model
from ddlsim.comm.nccl import Topology, choose_half_ring
from ddlsim.comm.sharded import node_topology, replica_topology
from ddlsim.config.groups import JobConfig
from ddlsim.errors import ConfigError
from ddlsim.resolve.prepare import prepare
from ddlsim.system.catalog import build_cluster
from ddlsim.workload.transformers.memory import ShardedState, sharded_state

GB = 1e9


def _cluster(gpus: int = 16, per_node: int = 8):
    return build_cluster("a100-sxm4-80gb", gpus, per_node, inter_node="200gbe",
                         nics_per_node=8, nccl=True)  # fmt: skip


def test_gather_and_scatter_cost_nccls_half_ring() -> None:
    model = make_comm_model("fsdp", _cluster())
    size = 256 * 2**20
    ring = choose_half_ring(model.topology, model.version, float(size))
    assert model.time_s(size, "allgather") == pytest.approx(ring.time_s)
    assert model.time_s(size, "reducescatter") == pytest.approx(ring.time_s)
    # half an all-reduce's bytes per rank: a gather costs less than an all-reduce of the size
    assert model.time_s(size, "allgather") < model.time_s(size, "allreduce")


def test_a_large_gather_runs_at_the_bus_bandwidth() -> None:
    """nccl-tests' convention: busbw = algbw x (n-1)/n for all-gather; at a GiB the latency is
    noise, so the time is (n-1)/n S / bus (SIMPLE's full line)."""
    model = make_comm_model("fsdp", _cluster())
    topo = model.topology
    size = 2**30
    n = topo.n_ranks
    expect = (n - 1) / n * size / topo.bus_Bps
    assert model.time_s(size, "allgather") == pytest.approx(expect, rel=0.02)


def test_hybrid_calls_use_a_node_and_the_replicas() -> None:
    topo = Topology.of(_cluster(32, 8))
    node, replicas = node_topology(topo), replica_topology(topo)
    assert (node.n_ranks, node.n_nodes, node.bus_Bps) == (8, 1, topo.intra_Bps)
    assert (replicas.n_ranks, replicas.local) == (4, 1)
    assert replicas.bus_Bps == pytest.approx(topo.net_Bps / 8)
    one_node = make_comm_model("fsdp", _cluster(8, 8))
    with pytest.raises(ConfigError, match="HYBRID_SHARD"):
        one_node.time_s(2**20, "allgather-node")


@pytest.mark.parametrize(
    "op", ["allgather", "reducescatter", "allgather-node", "allreduce-replicas"]
)
def test_the_detailed_schedule_takes_the_closed_form(op: str) -> None:
    import numpy as np

    from ddlsim.comm.executor import execute

    model = make_comm_model("fsdp", _cluster(16, 8))
    size = 64 * 2**20
    ends = execute(model.schedule(size, op), np.zeros(16))
    assert float(ends.max()) == pytest.approx(model.time_s(size, op), rel=1e-6)


def _setup(**kw):
    base = dict(model="mpt-125m", gpus=16, gpu="a100-sxm4-80gb", inter_node="200gbe",
                nics_per_node=8, precision="bf16", batch=8, seq_len=1024, comm="fsdp")  # fmt: skip
    base.update(kw)
    return prepare(JobConfig.from_kwargs(**base))


def _ops(setup) -> list[str]:
    from ddlsim.execution.dag import NodeKind, nodes_in_order

    return [setup.dag.nodes[n]["op"] for n in nodes_in_order(setup.dag, NodeKind.COLLECTIVE)]


def test_full_shard_gathers_twice_and_scatters_once_per_unit() -> None:
    ops = _ops(_setup())
    units = 12 + 1  # mpt-125m: 12 blocks, and the root (embedding, head)
    assert ops.count("allgather") == units + 12  # forward: every unit; backward: the blocks
    assert ops.count("reducescatter") == units


def test_shard_grad_op_and_no_shard() -> None:
    assert _ops(_setup(sharding="shard_grad_op")).count("allgather") == 13
    ops = _ops(_setup(sharding="no_shard"))
    assert set(ops) == {"allreduce"} and len(ops) == 13


def test_every_micro_step_gathers_and_reduces_but_zero1_once() -> None:
    assert len(_ops(_setup(grad_accum=3))) == 3 * len(_ops(_setup()))
    one, three = _ops(_setup(comm="zero1")), _ops(_setup(comm="zero1", grad_accum=3))
    assert one == three  # ZeRO-1 reduces after the last micro-step only
    assert len(_ops(_setup(comm="zero2", grad_accum=3))) > len(_ops(_setup(comm="zero2")))


def test_units_of_several_blocks_make_fewer_calls() -> None:
    assert len(_ops(_setup(fsdp_unit_blocks=4))) < len(_ops(_setup()))


def test_hybrid_shard_adds_the_replicas_all_reduce() -> None:
    ops = _ops(_setup(sharding="hybrid_shard"))
    assert ops.count("allreduce-replicas") == 13 and "allgather" not in ops


def test_prefetch_never_slows_the_step() -> None:
    def step(**kw):
        return ddlsim.predict(model="mpt-1b", gpus=64, gpu="a100-sxm4-80gb", inter_node="25gbe",
                              precision="bf16", batch=2, seq_len=2048, comm="fsdp",
                              node_mtbf_hours=0, **kw).iteration_time_s  # fmt: skip

    pre, post, none = (step(backward_prefetch=p) for p in ("pre", "post", "none"))
    assert pre <= post * 1.001 and post <= none * 1.001 and none > pre


def test_the_optimizer_runs_on_the_shard() -> None:
    setup = _setup(gpus=64)
    update = setup.dag.nodes["update"]["duration_s"]
    assert update == pytest.approx(setup.workload.profile.unattributed_time_s / 64)


@given(st.integers(min_value=2, max_value=4096))
@settings(max_examples=40, deadline=None)
def test_zero_memory_per_stage_is_the_papers(n: int) -> None:
    psi = 1_000_000
    total = lambda sh: sum(sharded_state(sh, psi, 2, True, 8))  # noqa: E731
    assert total(ShardedState(1, n)) == pytest.approx(4 * psi + 12 * psi / n)
    assert total(ShardedState(2, n)) == pytest.approx(2 * psi + 14 * psi / n)
    assert total(ShardedState(3, n, param_bytes=2, in_flight_units=0)) == pytest.approx(
        16 * psi / n
    )
    assert total(ShardedState(0, n)) == pytest.approx(18 * psi)  # DDP-like, bucket copies
    assert total(ShardedState(3, n)) <= total(ShardedState(2, n)) <= total(ShardedState(1, n))


def test_a_model_that_fits_only_sharded() -> None:
    kw = dict(model="mpt-7b", gpu="a100-sxm4-80gb", gpus=64, inter_node="200gbe",
              nics_per_node=8, precision="bf16", batch=1, seq_len=2048,
              activation_checkpointing=True, node_mtbf_hours=0)  # fmt: skip
    with pytest.raises(ConfigError, match="does not fit"):
        ddlsim.predict(comm="ddp", **kw)
    p = ddlsim.predict(comm="fsdp", **kw)
    assert p.setup.memory.total_bytes < 40 * GB


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--model", "resnet50", "--comm", "fsdp"], "CNN"),
        (["--model", "mpt-125m", "--comm", "fsdp", "--fsdp-unit-blocks", "13"], "larger than"),
        (
            [
                "--model",
                "mpt-125m",
                "--comm",
                "fsdp",
                "--gpus",
                "16",
                "--gpus-per-node",
                "1",
                "--sharding",
                "hybrid_shard",
            ],
            "more than one GPU per node",
        ),
        (["--model", "mpt-125m", "--comm", "fsdp", "--sharding", "quarter"], "quarter"),
        (["--model", "mpt-125m", "--comm", "fsdp", "--fsdp-precision", "pure"], "amp or bf16"),
    ],
)
def test_bad_sharded_input_is_one_line_and_exit_2(cli, argv, words) -> None:
    code, _out, err = cli("predict", "--gpus", "8", "--gpu", "a100-sxm4-80gb", *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_a_sharded_knob_on_another_method_is_flagged(cli) -> None:
    code, _out, err = cli("predict", "--model", "mpt-125m", "--gpus", "8", "--gpu",
                         "a100-sxm4-80gb", "--precision", "bf16", "--comm", "ddp",
                         "--sharding", "shard_grad_op")  # fmt: skip
    assert code == 0 and "--sharding" in err and "fsdp" in err


def test_the_report_shows_the_sharding(cli) -> None:
    code, out, _ = cli("predict", "--model", "mpt-125m", "--gpus", "16", "--gpu",
                       "a100-sxm4-80gb", "--inter-node", "200gbe", "--nics-per-node", "8",
                       "--precision", "bf16", "--comm", "zero2", "--seq-len", "1024")  # fmt: skip
    assert code == 0
    assert "DeepSpeed ZeRO stage 2, overlap_comm off" in out and "state over 16 GPUs" in out
    assert math.isfinite(float(out.split("tokens/s")[1].split()[0].replace(",", "")))


def test_gpus_min_is_the_fewest_nodes_that_hold_the_step() -> None:
    kw = dict(model="mpt-30b", gpu="a100-sxm4-80gb", comm="fsdp", precision="bf16", batch=1,
              activation_checkpointing=True, inter_node="200gbe", nics_per_node=8,
              node_mtbf_hours=0)  # fmt: skip
    n = ddlsim.predict(gpus="min", **kw).setup.cluster.n_gpus
    assert n % 8 == 0 and n >= 8
    fits = ddlsim.predict(gpus=n, **kw)
    assert fits.setup.memory.fits
    if n > 8:
        with pytest.raises(ConfigError, match="does not fit"):
            ddlsim.predict(gpus=n - 8, **kw)


def test_gpus_min_inside_one_node_and_refusals(cli) -> None:
    p = ddlsim.predict(model="bert-large", gpus="min", gpu="v100", precision="amp", batch=8,
                       comm="ddp", node_mtbf_hours=0)  # fmt: skip
    assert p.setup.cluster.n_gpus == 1
    code, _, err = cli("predict", "--model", "mpt-70b", "--gpu", "a100-sxm4-80gb", "--gpus",
                       "min", "--comm", "zero2", "--precision", "bf16", "--batch", "1")  # fmt: skip
    assert code == 2 and "ZeRO-2 keeps the half-precision parameters whole" in err
    code, _, err = cli("predict", "--model", "resnet50", "--gpus", "min")
    assert code == 2 and "no memory model" in err
    code, _, err = cli("predict", "--model", "mpt-125m", "--gpus", "min", "--batch", "max")
    assert code == 2 and "give one of them a number" in err


@pytest.mark.parametrize("comm", ["ddp", "fsdp"])
def test_pytorchs_methods_run_pytorchs_stack(comm) -> None:
    """DDP and FSDP exist only in PyTorch: the job is timed with PyTorch's stack (its fused
    optimizer, FlashAttention for a causal decoder), not the default TensorFlow's per-tensor
    optimizer, whatever --framework says."""
    p = ddlsim.predict("gpt2", 8, gpu="a100", precision="bf16", batch=4, comm=comm)
    assert p.inputs["stack"]["framework"] == "pytorch"
    assert p.inputs["transformer"]["numerics"]["flash_attention"]
