"""The per-iteration DAG of one data-parallel worker: ``build_dag(workload, strategy)``.

Pure function, no side effects. Nodes carry a closed :class:`NodeKind`, a stream, a duration in
seconds (compute) or bytes (communication); edges are :class:`EdgeKind` ``data`` (a tensor flows)
or ``control`` (ordering only). One iteration::

    input -> fwd:L0 -> ... -> fwd:Ln -> bwd:Ln -> ... -> bwd:L0 -> update
                                          |                |
                                      allreduce:k ... allreduce:0 ------^   (Horovod, fused)
    pull:L:s -> fwd:L      bwd:L -> push:L:s -> update                      (parameter servers)

Horovod fusion buffers are formed here, statically, from the calibrated backward timeline: a
layer's gradients are ready when its backward pass ends; layers ready by the same
``HOROVOD_CYCLE_TIME`` tick are packed up to ``HOROVOD_FUSION_THRESHOLD``
(:func:`ddlsim.horovod.fusion_plan`). Other allreduce methods reduce layer by layer;
parameter-server methods push and pull each layer's slice on each shard it lives on.
"""

from __future__ import annotations

import enum
import itertools

import networkx as nx

from ddlsim.comm.placement import place, rule_for
from ddlsim.horovod import fusion_plan
from ddlsim.strategy import Strategy
from ddlsim.workload.workload import Workload


class NodeKind(enum.Enum):
    """Closed set of DAG node kinds (never inferred from a node's name)."""

    INPUT = "input"  # host input pipeline delivers one batch (real data only)
    FORWARD = "forward"
    BACKWARD = "backward"
    ALLREDUCE = "allreduce"  # one (fused) collective
    PUSH = "push"  # gradients to a parameter-server shard
    PULL = "pull"  # parameters from a parameter-server shard
    UPDATE = "update"  # optimizer, loss and other time no layer owns


class EdgeKind(enum.Enum):
    """Data dependency (a tensor flows) or control dependency (ordering only)."""

    DATA = "data"
    CONTROL = "control"


COMPUTE_KINDS = (NodeKind.FORWARD, NodeKind.BACKWARD, NodeKind.UPDATE)
COMM_KINDS = (NodeKind.ALLREDUCE, NodeKind.PUSH, NodeKind.PULL)


def build_dag(
    workload: Workload, strategy: Strategy, *, input_time_s: float = 0.0, n_ps: int = 1
) -> nx.DiGraph:
    """One iteration of one worker as a DiGraph.

    ``input_time_s`` is the host input pipeline's time per batch (used when the host decodes
    the input: ``strategy.data`` is ``real`` and the input pipeline is not DALI); ``n_ps`` the
    number of parameter-server shards (PS methods). Graph attributes: ``model``,
    ``batch_per_gpu``, ``comm``; ``order`` on every node gives a deterministic topological
    order.
    """
    g = nx.DiGraph(
        model=workload.model.name, batch_per_gpu=workload.batch_per_gpu, comm=strategy.comm
    )
    order = itertools.count()
    layers = workload.layers
    timings = workload.profile.layers
    grad_dtype = strategy.grad_dtype

    def add(node: str, kind: NodeKind, **attrs: object) -> str:
        g.add_node(node, kind=kind, order=next(order), **attrs)
        return node

    prev: str | None = None
    if strategy.host_decodes_input:
        prev = add("input", NodeKind.INPUT, stream="input", duration_s=input_time_s)
    fwd = []
    for layer, timing in zip(layers, timings, strict=True):
        node = add(
            f"fwd:{layer.name}",
            NodeKind.FORWARD,
            stream="compute",
            duration_s=timing.fwd_time_s,
            layer=layer.name,
        )
        if prev is not None:
            g.add_edge(prev, node, kind=EdgeKind.DATA)
        fwd.append(node)
        prev = node
    bwd: dict[int, str] = {}
    for idx in reversed(range(len(layers))):
        layer, timing = layers[idx], timings[idx]
        node = add(
            f"bwd:{layer.name}",
            NodeKind.BACKWARD,
            stream="compute",
            duration_s=timing.bwd_time_s,
            layer=layer.name,
        )
        g.add_edge(prev, node, kind=EdgeKind.DATA)
        bwd[idx] = node
        prev = node
    update = add(
        "update", NodeKind.UPDATE, stream="compute", duration_s=workload.profile.unattributed_time_s
    )
    g.add_edge(prev, update, kind=EdgeKind.CONTROL)

    weighted = [i for i in reversed(range(len(layers))) if layers[i].tensors]
    if strategy.is_parameter_server:
        _add_ps_nodes(g, add, workload, strategy, n_ps, fwd, bwd, update)
    else:
        if strategy.is_horovod:
            ready, t = [], sum(t.fwd_time_s for t in timings)
            for i in reversed(range(len(layers))):
                t += timings[i].bwd_time_s
                if layers[i].tensors:
                    ready.append(t)
            sizes = [layers[i].grad_bytes(grad_dtype) for i in weighted]
            groups = fusion_plan(
                ready, sizes, strategy.fusion_threshold_bytes, strategy.cycle_time_s
            )
            buckets = [[weighted[j] for j in group] for group in groups]
        else:
            buckets = [[i] for i in weighted]
        for k, bucket in enumerate(buckets):
            node = add(
                f"allreduce:{k}",
                NodeKind.ALLREDUCE,
                stream="comm",
                channel=0,
                op="allreduce",
                nbytes=sum(layers[i].grad_bytes(grad_dtype) for i in bucket),
                layers=[layers[i].name for i in bucket],
                tensors=[t.name for i in bucket for t in layers[i].tensors],
            )
            for i in bucket:
                g.add_edge(bwd[i], node, kind=EdgeKind.DATA)
            g.add_edge(node, update, kind=EdgeKind.DATA)
    if not strategy.wait_free_backprop and bwd:
        # no overlap: every exchange waits for the end of the backward pass
        last_bwd = bwd[min(bwd)]
        for node, data in list(g.nodes(data=True)):
            if data["kind"] in (NodeKind.ALLREDUCE, NodeKind.PUSH):
                g.add_edge(last_bwd, node, kind=EdgeKind.CONTROL)
    return g


def _add_ps_nodes(g, add, workload, strategy, n_ps, fwd, bwd, update) -> None:
    """Per layer and shard: pull before the layer's forward, push after its backward."""
    layers = workload.layers
    tensors = workload.model.tensors
    if strategy.comm == "byteps":
        shard_of = [0] * len(tensors)  # BytePS partitions every tensor across all servers
    else:
        sizes = [t.nbytes(strategy.grad_dtype) for t in tensors]
        shard_of = place(sizes, n_ps, rule_for(strategy.comm))
    grad_dtype = strategy.grad_dtype
    t_index = 0
    per_layer: list[dict[int, tuple[int, list[str]]]] = []
    for layer in layers:
        by_shard: dict[int, tuple[int, list[str]]] = {}
        for t in layer.tensors:
            shard = shard_of[t_index]
            nbytes, names = by_shard.get(shard, (0, []))
            by_shard[shard] = (nbytes + t.nbytes(grad_dtype), [*names, t.name])
            t_index += 1
        per_layer.append(by_shard)

    def ps_node(kind: NodeKind, idx: int, shard: int, nbytes: int, names: list[str]) -> str:
        op = kind.value
        return add(
            f"{op}:{layers[idx].name}:{shard}",
            kind,
            stream="comm",
            channel=shard,
            op=op,
            nbytes=nbytes,
            layers=[layers[idx].name],
            tensors=names,
        )

    for idx in range(len(layers)):
        for shard, (nbytes, names) in sorted(per_layer[idx].items()):
            g.add_edge(
                ps_node(NodeKind.PULL, idx, shard, nbytes, names), fwd[idx], kind=EdgeKind.DATA
            )
    for idx in reversed(range(len(layers))):
        for shard, (nbytes, names) in sorted(per_layer[idx].items()):
            push = ps_node(NodeKind.PUSH, idx, shard, nbytes, names)
            g.add_edge(bwd[idx], push, kind=EdgeKind.DATA)
            g.add_edge(push, update, kind=EdgeKind.DATA)


def nodes_in_order(g: nx.DiGraph, *kinds: NodeKind) -> list[str]:
    """Nodes of the given kinds (all if none given), in the DAG's deterministic order."""
    selected = [n for n, d in g.nodes(data=True) if not kinds or d["kind"] in kinds]
    return sorted(selected, key=lambda n: g.nodes[n]["order"])
