"""Scheduling policies of the S-SGD DAG (ddlsim.execution.schedules): closed forms, the order of the
policies, both engines, and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.api import job, predict, prepare
from ddlsim.engine.plan import plan_from_dag
from ddlsim.errors import ConfigError
from ddlsim.execution.schedules import Item, merge_groups, partitions, plan_buckets, serial_finish_s

#: every synchronisation term off: the closed forms hold exactly
QUIET = dict(rank_sigma=0.0, host_contention=0.0, interference=False)


def _items(ready: list[float], sizes: list[int]) -> list[Item]:
    return [
        Item(layer=len(ready) - k, tensors=(f"t{k}",), nbytes=n, ready_s=r)
        for k, (r, n) in enumerate(zip(ready, sizes, strict=True))
    ]


def _linear(startup_s: float, per_byte_s: float):
    return lambda nbytes: startup_s + per_byte_s * nbytes


@st.composite
def _ready_tensors(draw: st.DrawFn) -> list[Item]:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.floats(0, 5e-3), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(4, 50_000_000), min_size=n, max_size=n))
    ready, t = [], 0.01
    for g in gaps:
        t += g
        ready.append(t)
    return _items(ready, sizes)


@settings(max_examples=200, deadline=None)
@given(_ready_tensors(), st.floats(1e-9, 2e-9))
def test_wfbp_is_never_slower_than_bsp_when_operations_cost_no_start_up(items, per_byte_s):
    cost = _linear(0.0, per_byte_s)
    wfbp = serial_finish_s([[i] for i in items], cost)
    bsp = serial_finish_s([list(items)], cost)
    assert wfbp <= bsp * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(_ready_tensors(), st.floats(0, 1e-3), st.floats(1e-10, 2e-9))
def test_mg_wfbp_is_never_slower_than_wfbp(items, startup_s, per_byte_s):
    cost = _linear(startup_s, per_byte_s)
    merged = serial_finish_s(merge_groups(items, cost), cost)
    assert merged <= serial_finish_s([[i] for i in items], cost) * (1 + 1e-12)


def test_with_start_up_costs_wfbp_can_lose_to_bsp_and_mg_wfbp_wins():
    # 100 tensors ready together at the end of backprop: WFBP pays 100 start-ups, BSP one
    items = _items([1.0] * 100, [1000] * 100)
    cost = _linear(1e-3, 1e-9)
    wfbp = serial_finish_s([[i] for i in items], cost)
    bsp = serial_finish_s([list(items)], cost)
    mg = serial_finish_s(merge_groups(items, cost), cost)
    assert wfbp > bsp
    assert mg == pytest.approx(bsp)
    assert len(merge_groups(items, cost)) == 1


def test_mg_wfbp_keeps_apart_what_can_overlap_the_backward_pass():
    # tensors ready far apart compared with their cost: nothing to merge
    items = _items([0.1, 0.2, 0.3], [1000, 1000, 1000])
    assert [len(g) for g in merge_groups(items, _linear(1e-4, 1e-9))] == [1, 1, 1]


def test_partitions_cover_the_tensor():
    assert partitions(10, 4) == [4, 4, 2]
    assert partitions(8, 4) == [4, 4]
    assert partitions(3, 4) == [3]


def test_bsp_is_one_operation_triggered_by_the_end_of_backprop():
    items = _items([0.1, 0.2], [10, 20])
    (bucket,) = plan_buckets("bsp", items, items)
    assert bucket.nbytes == 30 and bucket.trigger == 0


@pytest.mark.parametrize("comm, gpus", [("replicated-nccl", 8), ("horovod-nccl", 16)])
def test_bsp_iteration_is_compute_plus_all_communication(comm, gpus):
    kwargs = dict(comm=comm, gpus_per_node=8, inter_node="25gbe", schedule="bsp", cycle_time_ms=0)
    if comm != "horovod-nccl":
        kwargs.pop("cycle_time_ms")
    setup = prepare(job("resnet50", gpus, **kwargs))
    plan = plan_from_dag(setup.dag)
    (op,) = plan.ops
    compute_s = sum(plan.fwd_s) + sum(plan.bwd_s) + plan.update_s
    comm_s = setup.comm.time_s(op.nbytes, "allreduce", 0)
    p = predict("resnet50", gpus, **kwargs, **QUIET)
    # Horovod adds its coordination: one negotiation of the one buffer (cycle time 0)
    coordination_s = p.breakdown["coordination_s"] if comm == "horovod-nccl" else 0.0
    assert p.iteration_time_s == pytest.approx(compute_s + comm_s + coordination_s, rel=1e-9)
    assert p.breakdown["comm_exposed_s"] == pytest.approx(comm_s, rel=1e-9)


CONFIGS = [
    dict(model="resnet50", gpus=16, gpus_per_node=4, inter_node="10gbe"),
    dict(model="vgg16", gpus=16, gpus_per_node=8, inter_node="25gbe"),
    dict(model="resnet50", gpus=8, comm="replicated-nccl"),
    dict(model="googlenet", gpus=16, comm="horovod-mpi", gpus_per_node=4, inter_node="25gbe"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(map(str, c.values())))
def test_the_schedules_order_as_their_physics_says(config):
    ips = {
        s: predict(schedule=s, **config, **QUIET).images_per_sec
        for s in ("bsp", "wfbp", "mg-wfbp", "bytescheduler")
    }
    # MG-WFBP merges where that helps: at least as fast as both extremes (within the
    # coordinator's ticks); whether WFBP beats BSP depends on start-up costs (tested above)
    assert ips["mg-wfbp"] >= max(ips["wfbp"], ips["bsp"]) * 0.99


SCHEDULE_CONFIGS = [
    dict(model="resnet50", gpus=16, gpus_per_node=4, inter_node="10gbe", schedule=s)
    for s in ("bsp", "wfbp", "mg-wfbp", "bytescheduler")
] + [
    dict(model="vgg16", gpus=8, comm="ps", gpus_per_node=4, ps_colocated=False, schedule=s)
    for s in ("bsp", "wfbp", "bytescheduler")
]


@pytest.mark.parametrize("config", SCHEDULE_CONFIGS, ids=lambda c: "-".join(map(str, c.values())))
def test_fast_and_detailed_engines_agree_within_3_percent_for_every_schedule(config):
    fast = predict(rank_sigma=0.0, **config)
    detailed = predict(engine="detailed", rank_sigma=0.0, **config)
    assert detailed.images_per_sec == pytest.approx(fast.images_per_sec, rel=0.03)


def test_bytescheduler_overlaps_communication_with_the_next_forward_pass():
    p = predict("vgg16", 16, gpus_per_node=4, inter_node="10gbe", schedule="bytescheduler")
    spans = p.sim.spans
    comm = [s for s in spans if s.stream.startswith("comm")]
    forward = [s for s in spans if s.kind == "forward"]
    overlapping = [
        c for c in comm for f in forward if f.iteration == c.iteration + 1 and c.end_s > f.start_s
    ]
    assert overlapping, "no partition of iteration k ran during the forward pass of k+1"
    # operations are numbered in the order backprop makes them ready, so the highest number is
    # the first layer's: it jumps the queue of the deep layers' partitions
    k = max(c.iteration for c in comm) - 1
    ops = {int(c.name.split(":")[1]): c for c in comm if c.iteration == k}
    first_layer = ops[max(ops)]
    assert first_layer.end_s < max(c.end_s for c in ops.values())
    assert first_layer.start_s < min(f.start_s for f in forward if f.iteration == k + 1)


def test_the_timeline_and_json_say_which_schedule_ran():
    p = predict("resnet50", 16, gpus_per_node=4, inter_node="25gbe", schedule="mg-wfbp")
    assert p.inputs["schedule"] == "mg-wfbp" and p.inputs["effective_schedule"] == "mg-wfbp"
    auto = predict("resnet50", 16, gpus_per_node=4, inter_node="25gbe")
    assert auto.inputs["effective_schedule"] == "horovod"
    assert predict("resnet50", 8, comm="ps").inputs["effective_schedule"] == "layer"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(comm="ps", schedule="horovod"), "needs a Horovod method"),
        (dict(comm="byteps", schedule="mg-wfbp"), "merges all-reduce operations"),
        (dict(schedule="priority"), "priority"),
        (dict(schedule="bytescheduler", partition_mb=0), "partition size"),
    ],
)
def test_a_schedule_that_cannot_apply_is_one_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        predict("resnet50", 16, **kwargs)


def test_the_cli_takes_the_schedule(cli):
    code, out, _ = cli("predict", "--gpus", "16", "--schedule", "wfbp", "--json")
    assert code == 0 and '"schedule": "wfbp"' in out
    code, _, err = cli("predict", "--gpus", "16", "--schedule", "nope")
    assert code == 2 and "nope" in err


# -- PyTorch DistributedDataParallel ---------------------------------------------------------


def test_ddp_buckets_close_at_their_cap_in_readiness_order():
    from ddlsim.execution.schedules import ddp_buckets

    items = _items([0.1, 0.2, 0.3, 0.4, 0.5], [600_000, 600_000, 10, 30_000_000, 5])
    buckets = ddp_buckets(items, 1 << 20, 25 << 20)
    # the first closes with the tensor that reaches 1 MiB, the next with the one reaching 25 MiB
    assert [[i.nbytes for i in b] for b in buckets] == [[600_000, 600_000], [10, 30_000_000], [5]]


def test_ddp_default_is_pytorchs_first_bucket_then_25_mib():
    setup = prepare(job("resnet50", 16, comm="ddp", inter_node="25gbe"))
    ops = plan_from_dag(setup.dag).ops
    assert ops[0].nbytes >= 1 << 20 and ops[0].nbytes < (1 << 20) + 10_000_000
    assert all(op.nbytes >= 25 << 20 for op in ops[1:-1])
    assert sum(op.nbytes for op in ops) == setup.workload.model.grad_bytes()
    assert setup.strategy.effective_schedule == "ddp" and not setup.strategy.is_horovod


def test_one_ddp_bucket_is_bsp_and_vanishing_buckets_are_wfbp():
    kwargs = dict(comm="ddp", inter_node="25gbe", **QUIET)
    one = predict("resnet50", 16, bucket_cap_mb=60000, **kwargs)
    bsp = predict("resnet50", 16, schedule="bsp", **kwargs)
    assert one.iteration_time_s == pytest.approx(bsp.iteration_time_s, rel=1e-12)
    tiny = predict("resnet50", 16, bucket_cap_mb=1e-6, **kwargs)
    wfbp = predict("resnet50", 16, schedule="wfbp", **kwargs)
    assert tiny.iteration_time_s == pytest.approx(wfbp.iteration_time_s, rel=1e-12)
    assert len(tiny.comm_ops) == len(prepare(job("resnet50", 1)).workload.model.tensors)


def test_ddp_has_no_horovod_coordination():
    p = predict("resnet50", 16, comm="ddp", inter_node="25gbe", **QUIET)
    assert p.breakdown["coordination_s"] == pytest.approx(0, abs=1e-12)
    assert not [s for s in p.sim.spans if s.stream == "coordinator"]
    hvd = predict("resnet50", 16, inter_node="25gbe", **QUIET)
    assert hvd.breakdown["coordination_s"] > 0


@pytest.mark.parametrize("bad", [0, -1, float("nan"), 1e9])
def test_a_bad_bucket_cap_is_one_error(bad):
    with pytest.raises(ConfigError, match="bucket cap"):
        predict("resnet50", 16, comm="ddp", bucket_cap_mb=bad)


def test_the_timeline_names_ddps_allreduces_as_ncclss(tmp_path, cli):
    out = tmp_path / "t.json"
    code, _, _ = cli("timeline", "--gpus", "16", "--comm", "ddp", "-o", str(out))
    assert code == 0 and "NCCL_ALLREDUCE" in out.read_text()
