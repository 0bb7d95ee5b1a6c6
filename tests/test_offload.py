"""CPU offload of sharded data parallelism (FSDP ``CPUOffload``, DeepSpeed ZeRO-Offload): the
copies' and the host step's closed forms, their place in the DAG, the memory moved to the
host, the report, the CLI's refusals."""

from __future__ import annotations

import dataclasses
import json

import pytest

import ddlsim
from ddlsim.comm import make_comm_model
from ddlsim.comm.sharded import COPY_OPS
from ddlsim.errors import ConfigError
from ddlsim.execution.dag import NodeKind
from ddlsim.execution.offload import (
    TORCH_CPU_STEP_BYTES,
    copy_Bps,
    fused_step_bytes,
    host_step_Bps,
    host_step_bytes_per_param,
)
from ddlsim.execution.sharded import Sharding, host_step_s
from ddlsim.system.catalog import build_cluster, host_link
from ddlsim.system.hosts import default_host_cpu, host_cpu

GB = 1e9
#: a small job (GPT-2 124M on 8 A100 40 GB) for the DAG and the engines
SMALL = dict(model="gpt2", gpus=8, gpu="a100", precision="bf16", batch=4, node_mtbf_hours=0)
#: llama2-13b on 8 A100 40 GB: ZeRO-2 keeps 26 GB of 16-bit weights whole on every GPU
BIG = dict(model="llama2-13b", gpus=8, gpu="a100", comm="zero2", precision="bf16", batch=1,
           activation_checkpointing=True, node_mtbf_hours=0)  # fmt: skip


def test_a_copy_is_its_bytes_over_the_gpus_share_of_the_switch() -> None:
    cluster = build_cluster("a100", 8, nccl=True)
    model = make_comm_model("zero3", cluster)
    share = cluster.host.bandwidth_Bps / cluster.gpus_per_pcie_switch
    assert cluster.gpus_per_pcie_switch == 2  # DGX A100: 2 GPUs per PCIe switch
    for op in ("h2d", "d2h"):  # pinned: the host link's DMA rate
        expect = cluster.host.latency_s + 2**30 / share
        assert model.time_s(2**30, op) == pytest.approx(expect)
    pageable = host_link("pcie4").bandwidth_Bps("tcp") / 2  # the catalog's pageable rate
    assert pageable < share
    for op in ("h2d-pageable", "d2h-pageable"):
        expect = cluster.host.latency_s + 2**30 / pageable
        assert model.time_s(2**30, op) == pytest.approx(expect)
    assert set(COPY_OPS) <= set(model.ops)
    assert copy_Bps(25.2e9, 2) == pytest.approx(12.6e9)
    # one GPU still copies (no collective, but the DMA to its host)
    one = make_comm_model("zero2", build_cluster("a100", 1, nccl=True))
    assert one.time_s(2**30, "d2h") == pytest.approx(one.cluster.host.latency_s + 2**30 /
                                                     one.cluster.host.bandwidth_Bps)  # fmt: skip
    assert one.time_s(2**30, "allgather") == 0.0


def test_the_detailed_schedule_of_a_copy_takes_the_closed_form() -> None:
    import numpy as np

    from ddlsim.comm.executor import execute

    for gpus in (1, 8):
        model = make_comm_model("fsdp", build_cluster("a100", gpus, nccl=True))
        for op in COPY_OPS:
            ends = execute(model.schedule(2**28, op), np.zeros(gpus))
            assert ends.max() == pytest.approx(model.time_s(2**28, op), rel=1e-9)


def test_one_shard_host_step_is_its_bytes_over_the_rate() -> None:
    sh = Sharding("zero2", shards=1, offload="optimizer", host_step_bytes=28.0,
                  host_step_Bps=1e10)  # fmt: skip
    assert host_step_s(sh, 10**9) == pytest.approx(10**9 * 28 / 1e10)
    eight = dataclasses.replace(sh, shards=8)
    assert host_step_s(eight, 10**9) == pytest.approx(host_step_s(sh, 10**9) / 8)
    assert host_step_s(dataclasses.replace(sh, offload="none"), 10**9) == 0.0


def test_the_host_steps_bytes_per_parameter() -> None:
    assert fused_step_bytes("adam") == 28  # fp32 p, m, v read + written, g read
    assert fused_step_bytes("sgd") == 12 and fused_step_bytes("momentum") == 20
    assert host_step_bytes_per_param("zero2", "adamw", "fp32") == 28
    assert host_step_bytes_per_param("zero2", "adamw", "bf16") == 28 + 6  # the 16-bit copy
    assert host_step_bytes_per_param("zero3", "adamw", "amp") == 28 + 6 + 8  # and unscale
    assert host_step_bytes_per_param("fsdp", "adam", "bf16") == TORCH_CPU_STEP_BYTES["adam"] == 72


def test_the_host_rate_deepspeed_shares_the_node_fsdp_runs_one_core() -> None:
    node, core = 400e9, 20e9
    assert host_step_Bps("zero2", node, core, 8) == pytest.approx(50e9)
    assert host_step_Bps("fsdp", node, core, 8) == pytest.approx(20e9)  # OMP_NUM_THREADS=1
    assert host_step_Bps("fsdp", node, core, 32) == pytest.approx(12.5e9)  # the node's share
    assert host_step_Bps("fsdp", node, core, 1) == pytest.approx(400e9)
    zen2 = host_cpu("zen2")  # DGX A100: 2 x 8 ch DDR4-3200 at 0.8, 1 TB
    assert zen2.node_mem_Bps == pytest.approx(409.6e9 * 0.8)
    assert zen2.node_dram_bytes == pytest.approx(1024e9)


def test_thirteen_b_on_8_a100_40gb_fails_without_offload_and_fits_with_it() -> None:
    with pytest.raises(ConfigError, match="--offload"):
        ddlsim.predict(**BIG)
    p = ddlsim.predict(**BIG, offload="optimizer")
    need = p.setup.memory
    assert need.fits and need.optimizer_bytes == 0 and need.grads_bytes == 0
    n = p.setup.workload.model.n_params
    # fp32 master 4 + fp32 gradient 4 + AdamW's moments 8, each rank's 1/8, 8 ranks a node
    assert need.host_bytes == pytest.approx(n * 16)
    mem = p.inputs["transformer"]["memory"]
    assert mem["host_per_node_GB"] == pytest.approx(n * 16 / GB)
    assert mem["host_capacity_GB"] == pytest.approx(1024)
    # the step: the rank's shard of bytes over its share of the node's DRAM
    sh = p.setup.strategy.sharding
    rate = default_host_cpu(p.setup.cluster.device).node_mem_Bps / 8
    assert p.breakdown["cpu_optimizer_s"] == pytest.approx(n / 8 * (28 + 6) / rate)
    assert sh.host_step_Bps == pytest.approx(rate)


def test_params_offload_moves_the_parameter_shard_off_the_gpu() -> None:
    kw = {**BIG, "comm": "zero3"}
    on_gpu = ddlsim.predict(**kw).setup.memory
    off = ddlsim.predict(**kw, offload="params").setup.memory
    opt = ddlsim.predict(**kw, offload="optimizer").setup.memory
    assert off.params_bytes < opt.params_bytes == on_gpu.params_bytes
    assert off.optimizer_bytes == opt.optimizer_bytes == 0 < on_gpu.optimizer_bytes
    assert off.host_bytes > opt.host_bytes  # ZeRO-Infinity's 16-bit partition too


def test_more_host_bandwidth_is_faster(monkeypatch) -> None:
    import ddlsim.resolve.execution as rx

    times = []
    for scale in (0.5, 1.0, 2.0):
        host = default_host_cpu(build_cluster("a100", 1).device)
        fast = dataclasses.replace(host, node_mem_Bps=host.node_mem_Bps * scale)
        monkeypatch.setattr(rx, "default_host_cpu", lambda device, h=fast: h)
        p = ddlsim.predict(**SMALL, comm="zero2", offload="optimizer")
        times.append((p.breakdown["cpu_optimizer_s"], p.iteration_time_s))
    assert times[0][0] > times[1][0] > times[2][0]
    assert times[0][1] > times[1][1] > times[2][1]


def test_the_dag_copies_each_gathered_and_reduced_shard() -> None:
    p = ddlsim.predict(**SMALL, comm="fsdp", offload="params")
    nodes = [d for _, d in p.setup.dag.nodes(data=True) if d["kind"] is NodeKind.COLLECTIVE]
    ops = [d["op"] for d in nodes]
    assert ops.count("h2d") == ops.count("allgather") > 0
    assert ops.count("d2h") == ops.count("reducescatter") > 0
    for k, d in enumerate(nodes):  # each copy just before its gather / after its scatter
        if d["op"] == "h2d":
            gather = nodes[k + 1]
            assert gather["op"] == "allgather"
            assert d["nbytes"] == pytest.approx(gather["nbytes"] / 2 / 8 * 4, abs=4)
            assert (d["issue_after"], d["wait_before"]) == (
                gather["issue_after"], gather["wait_before"])  # fmt: skip
        if d["op"] == "d2h":
            assert nodes[k - 1]["op"] == "reducescatter"
    plain = ddlsim.predict(**SMALL, comm="fsdp")
    assert p.iteration_time_s > plain.iteration_time_s
    assert "cpu_optimizer_s" not in plain.breakdown


def test_deepspeed_copies_pageable_memory_unless_pinned_fsdp_always_pins() -> None:
    def copies(**kw):
        p = ddlsim.predict(**SMALL, **kw)
        dag = p.setup.dag
        return p, {d["op"] for _, d in dag.nodes(data=True) if d.get("op") in COPY_OPS}

    pageable, ops = copies(comm="zero3", offload="params")
    assert ops == {"h2d-pageable", "d2h-pageable"}
    pinned, ops = copies(comm="zero3", offload="params", pin_memory=True)
    assert ops == {"h2d", "d2h"}
    assert pinned.breakdown["offload_copy_s"] < pageable.breakdown["offload_copy_s"]
    assert copies(comm="fsdp", offload="params")[1] == {"h2d", "d2h"}


def test_fast_and_detailed_engines_agree_with_offload() -> None:
    for gpus in (1, 8):
        kw = {**SMALL, "gpus": gpus, "comm": "zero2", "offload": "optimizer"}
        fast = ddlsim.predict(**kw, engine="fast", rank_sigma=0)
        detailed = ddlsim.predict(**kw, engine="detailed", rank_sigma=0)
        assert detailed.iteration_time_s == pytest.approx(fast.iteration_time_s, rel=0.02)
        assert fast.breakdown["offload_copy_s"] > 0  # one GPU copies too


def test_a_host_too_small_is_refused(monkeypatch) -> None:
    import ddlsim.resolve.transformer as rt

    host = default_host_cpu(build_cluster("a100", 1).device)
    small = dataclasses.replace(host, node_dram_bytes=64e9)
    monkeypatch.setattr(rt, "default_host_cpu", lambda device: small)
    with pytest.raises(ConfigError, match="host memory per node"):
        ddlsim.predict(**BIG, offload="optimizer")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--comm", "ddp", "--offload", "optimizer"], "--offload optimizer with --comm ddp"),
        (["--comm", "horovod-nccl", "--offload", "params"], "--comm horovod-nccl"),
        (["--comm", "zero1", "--offload", "params"], "stage 3 only"),
        (["--comm", "zero2", "--offload", "params"], "stage 3 only"),
        (["--comm", "fsdp", "--offload", "optimizer"], "--offload params"),
        (["--comm", "fsdp", "--sharding", "no_shard", "--offload", "params"], "no_shard"),
        (["--comm", "zero3", "--offload", "disk"], "disk"),
    ],
)
def test_bad_offload_is_one_line_and_exit_2(cli, argv, words) -> None:
    code, _out, err = cli("predict", "--model", "gpt2", "--gpus", "8", "--gpu", "a100",
                          "--precision", "bf16", *argv)  # fmt: skip
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_the_report_and_json_show_the_offload(cli) -> None:
    argv = ["predict", "--model", "gpt2", "--gpus", "8", "--gpu", "a100", "--precision",
            "bf16", "--comm", "zero3", "--offload", "params", "--node-mtbf-hours", "0"]  # fmt: skip
    code, out, _ = cli(*argv)
    assert code == 0
    assert "cpu optimizer step" in out and "offload copies" in out
    assert "host / node" in out and "offload        params on the host" in out
    code, out, _ = cli(*argv, "--json")
    doc = json.loads(out)
    assert doc["breakdown"]["cpu_optimizer_s"] > 0 and doc["breakdown"]["offload_copy_s"] > 0
    assert doc["inputs"]["transformer"]["memory"]["host_per_node_GB"] > 0
    assert doc["inputs"]["sharding"]["offload"] == "params"
