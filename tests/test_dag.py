"""build_dag: node and edge kinds, bytes conservation, structure per method."""

from __future__ import annotations

import networkx as nx
import pytest

from ddlsim.api import job, prepare
from ddlsim.comm.placement import place
from ddlsim.execution.dag import COMM_KINDS, DiGraph, EdgeKind, NodeKind, build_dag, nodes_in_order
from ddlsim.workload.zoo import get_model


def _kinds(g: DiGraph) -> set[NodeKind]:
    return {d["kind"] for _, d in g.nodes(data=True)}


@pytest.mark.parametrize("comm", ["horovod-nccl", "ps", "byteps", "distributed-replicated"])
def test_dag_is_acyclic_with_closed_kinds_and_conserves_gradient_bytes(comm):
    setup = prepare(job("resnet50", 16, comm=comm, gpus_per_node=4))
    g = setup.dag
    assert nx.is_directed_acyclic_graph(g.to_networkx())
    assert all(isinstance(d["kind"], NodeKind) for _, d in g.nodes(data=True))
    assert all(isinstance(d["kind"], EdgeKind) for *_, d in g.edges(data=True))
    grad_bytes = get_model("resnet50").grad_bytes()
    ops = [d for _, d in g.nodes(data=True) if d["kind"] in COMM_KINDS]
    if comm == "horovod-nccl":
        assert sum(d["nbytes"] for d in ops) == grad_bytes
    else:
        assert sum(d["nbytes"] for d in ops if d["op"] == "push") == grad_bytes
        assert sum(d["nbytes"] for d in ops if d["op"] == "pull") == grad_bytes


def test_forward_then_backward_in_reverse_layer_order_then_update():
    setup = prepare(job("alexnet", 8))
    g = setup.dag
    layers = [la.name for la in get_model("alexnet").layers]
    fwd = [g.nodes[n]["layer"] for n in nodes_in_order(g, NodeKind.FORWARD)]
    bwd = [g.nodes[n]["layer"] for n in nodes_in_order(g, NodeKind.BACKWARD)]
    assert fwd == layers and bwd == layers[::-1]
    order = list(nx.topological_sort(g.to_networkx()))
    assert order.index(f"fwd:{layers[-1]}") < order.index(f"bwd:{layers[-1]}")
    assert order[-1] == "update"
    assert g.edges[f"bwd:{layers[0]}", "update"]["kind"] is EdgeKind.CONTROL


def test_each_allreduce_depends_on_the_backward_of_its_layers_by_data_edges():
    g = prepare(job("googlenet", 8, cycle_time_ms=10)).dag
    for node in nodes_in_order(g, NodeKind.ALLREDUCE):
        preds = {g.nodes[p]["layer"] for p in g.predecessors(node)}
        assert preds == set(g.nodes[node]["layers"])
        assert all(g.edges[p, node]["kind"] is EdgeKind.DATA for p in g.predecessors(node))


def test_input_node_only_with_real_data():
    assert NodeKind.INPUT not in _kinds(prepare(job("resnet50", 8)).dag)
    g = prepare(job("resnet50", 8, data="real")).dag
    assert NodeKind.INPUT in _kinds(g)
    assert next(g.successors("input")) == "fwd:conv0"


def test_parameter_server_pulls_feed_forward_and_pushes_follow_backward():
    g = prepare(job("vgg16", 8, comm="ps", n_ps=3, gpus_per_node=4)).dag
    pulls = nodes_in_order(g, NodeKind.PULL)
    pushes = nodes_in_order(g, NodeKind.PUSH)
    model = get_model("vgg16")
    shard_of = place([t.nbytes("fp32") for t in model.tensors], 3)  # least-loaded shard
    pairs, i = set(), 0
    for layer in model.layers:
        for _ in layer.tensors:
            pairs.add((layer.name, shard_of[i]))
            i += 1
    assert len(pulls) == len(pushes) == len(pairs)  # one op per layer and shard it lives on
    assert sum(g.nodes[n]["nbytes"] for n in pulls) == model.grad_bytes("fp32")
    assert {g.nodes[n]["channel"] for n in pulls} == {0, 1, 2}
    for n in pulls:
        assert all(g.nodes[s]["kind"] is NodeKind.FORWARD for s in g.successors(n))


def test_build_dag_is_pure():
    setup = prepare(job("resnet50", 8))
    a = build_dag(setup.workload, setup.strategy)
    b = build_dag(setup.workload, setup.strategy)
    assert nx.utils.graphs_equal(a.to_networkx(), b.to_networkx())


@pytest.mark.parametrize("comm", ["horovod-nccl", "ps"])
def test_without_wait_free_backprop_every_exchange_follows_the_backward_pass(comm):
    setup = prepare(job("resnet50", 8, comm=comm))
    g = build_dag(setup.workload, setup.strategy.with_(wait_free_backprop=False), n_ps=2)
    last_bwd = nodes_in_order(g, NodeKind.BACKWARD)[-1]
    exchanges = nodes_in_order(g, NodeKind.ALLREDUCE, NodeKind.PUSH)
    nxg = g.to_networkx()
    assert exchanges and all(nx.has_path(nxg, last_bwd, n) for n in exchanges)
    assert nx.is_directed_acyclic_graph(nxg)


def test_cpu_workers_do_not_overlap_communication():
    from ddlsim import predict

    pred = predict("alexnet", 2, gpu="epyc-zen4-core", comm="horovod-gloo", batch=16)
    assert pred.breakdown["comm_hidden_s"] == 0.0
    assert pred.breakdown["comm_exposed_s"] > 0.0


def test_the_dag_reads_like_networkx_and_converts_to_it():
    g = prepare(job("resnet50", 16, comm="ps", n_ps=2)).dag
    nxg = g.to_networkx()
    assert list(g.nodes) == list(nxg.nodes) and g.number_of_nodes() == nxg.number_of_nodes()
    assert dict(g.nodes(data=True)) == dict(nxg.nodes(data=True))
    assert sorted(g.edges) == sorted(nxg.edges) and len(g.edges) == nxg.number_of_edges()
    for u, v, d in g.edges(data=True):
        assert d is g.edges[u, v] and d == nxg.edges[u, v]
    for n in g.nodes:
        assert list(g.successors(n)) == list(nxg.successors(n))
        assert list(g.predecessors(n)) == list(nxg.predecessors(n))
    assert g.graph == nxg.graph and g.graph["comm"] == "ps"
