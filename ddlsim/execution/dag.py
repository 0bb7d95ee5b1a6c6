"""The per-iteration DAG of one data-parallel worker: ``build_dag(workload, strategy)``.

Pure function, no side effects. Nodes carry a closed :class:`NodeKind`, a stream, a duration in
seconds (compute) or bytes (communication); edges are :class:`EdgeKind` ``data`` (a tensor flows)
or ``control`` (ordering only). One iteration::

    input -> fwd:L0 -> ... -> fwd:Ln -> bwd:Ln -> ... -> bwd:L0 -> update
                                          |                |
                                      allreduce:k ... allreduce:0 ------^   (Horovod, fused)
    pull:L:s -> fwd:L      bwd:L -> push:L:s -> update                      (parameter servers)

The strategy's schedule (:mod:`ddlsim.execution.schedules`) forms the communication operations
statically, from the calibrated backward timeline (a layer's gradients are ready when its
backward pass ends): Horovod's fusion buffers (layers ready by the same ``HOROVOD_CYCLE_TIME``
tick packed up to ``HOROVOD_FUSION_THRESHOLD``), one operation per layer or per tensor, one
after backprop (BSP), MG-WFBP's merged groups, or ByteScheduler's partitions. An operation
whose ``gates_next`` is set feeds the next iteration's forward pass of a layer (a
``next_iteration`` edge) instead of this iteration's update. Parameter-server methods push and
pull each layer's (or tensor's, or partition's) slice on each shard it lives on.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from ddlsim.comm.placement import place, rule_for
from ddlsim.execution.schedules import Item, partitions, plan_buckets
from ddlsim.execution.sharded import host_step_s, sharded_calls
from ddlsim.execution.strategy import Strategy
from ddlsim.workload.workload import Workload


class NodeKind(enum.Enum):
    """Closed set of DAG node kinds (never inferred from a node's name)."""

    INPUT = "input"  # host input pipeline delivers one batch (real data only)
    FORWARD = "forward"
    BACKWARD = "backward"
    ALLREDUCE = "allreduce"  # one (fused) collective
    COLLECTIVE = "collective"  # a sharded method's gather / scatter, issued and awaited
    PUSH = "push"  # gradients to a parameter-server shard
    PULL = "pull"  # parameters from a parameter-server shard
    UPDATE = "update"  # optimizer, loss and other time no layer owns


class EdgeKind(enum.Enum):
    """Data dependency (a tensor flows) or control dependency (ordering only)."""

    DATA = "data"
    CONTROL = "control"
    #: the next iteration's node waits for this one (a layer-wise update: the forward pass of a
    #: layer needs only that layer's synchronised gradients)
    NEXT_ITERATION = "next_iteration"


COMPUTE_KINDS = (NodeKind.FORWARD, NodeKind.BACKWARD, NodeKind.UPDATE)
COMM_KINDS = (NodeKind.ALLREDUCE, NodeKind.PUSH, NodeKind.PULL, NodeKind.COLLECTIVE)


class _NodeView:
    """``g.nodes``: ``g.nodes[n]`` is node ``n``'s attributes, ``g.nodes(data=True)`` yields
    ``(n, attributes)``, iterating yields the nodes (in the order they were added)."""

    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self._nodes = nodes

    def __call__(self, data: bool = False) -> Iterator[Any]:
        return iter(self._nodes.items()) if data else iter(self._nodes)

    def __getitem__(self, node: str) -> dict[str, Any]:
        return self._nodes[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes


class _EdgeView:
    """``g.edges``: ``g.edges[u, v]`` is the edge's attributes, ``g.edges(data=True)`` yields
    ``(u, v, attributes)``, iterating yields ``(u, v)``."""

    def __init__(self, succ: dict[str, dict[str, dict[str, Any]]]) -> None:
        self._succ = succ

    def __call__(self, data: bool = False) -> Iterator[Any]:
        for u, out in self._succ.items():
            for v, attrs in out.items():
                yield (u, v, attrs) if data else (u, v)

    def __getitem__(self, edge: tuple[str, str]) -> dict[str, Any]:
        u, v = edge
        return self._succ[u][v]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return self()

    def __len__(self) -> int:
        return sum(len(out) for out in self._succ.values())


class DiGraph:
    """A directed graph with attributes on the graph, its nodes and its edges: the part of
    networkx's ``DiGraph`` the DAG of an iteration needs (the same reading API: ``nodes``,
    ``edges``, ``successors``, ``predecessors``, ``graph``), without importing networkx, which
    costs a tenth of a second (``to_networkx()`` converts, for its algorithms)."""

    def __init__(self, **attrs: Any) -> None:
        self.graph: dict[str, Any] = dict(attrs)
        self._nodes: dict[str, dict[str, Any]] = {}
        self._succ: dict[str, dict[str, dict[str, Any]]] = {}
        self._pred: dict[str, dict[str, dict[str, Any]]] = {}
        self.nodes = _NodeView(self._nodes)
        self.edges = _EdgeView(self._succ)

    def add_node(self, node: str, **attrs: Any) -> None:
        """Add ``node`` (or update its attributes)."""
        got = self._nodes.get(node)
        if got is None:
            self._nodes[node] = attrs
            self._succ[node] = {}
            self._pred[node] = {}
        else:
            got.update(attrs)

    def add_edge(self, u: str, v: str, **attrs: Any) -> None:
        """Add the edge ``u -> v`` (and its nodes if new), or update its attributes."""
        if u not in self._nodes:
            self.add_node(u)
        if v not in self._nodes:
            self.add_node(v)
        edge = self._succ[u].get(v)
        if edge is None:
            self._succ[u][v] = self._pred[v][u] = attrs
        else:
            edge.update(attrs)

    def successors(self, node: str) -> Iterator[str]:
        """The nodes ``node`` has an edge to."""
        return iter(self._succ[node])

    def predecessors(self, node: str) -> Iterator[str]:
        """The nodes with an edge to ``node``."""
        return iter(self._pred[node])

    def number_of_nodes(self) -> int:
        """How many nodes the graph has."""
        return len(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def to_networkx(self) -> Any:
        """The same graph as a ``networkx.DiGraph`` (imported here, on first use)."""
        import networkx as nx

        g = nx.DiGraph(**self.graph)
        g.add_nodes_from(self._nodes.items())
        g.add_edges_from((u, v, d) for u, out in self._succ.items() for v, d in out.items())
        return g


#: ``add(node, kind, **attrs)`` adds a node to the DAG in the next deterministic order and
#: returns its name
_AddNode = Callable[..., str]


def build_dag(
    workload: Workload,
    strategy: Strategy,
    *,
    input_time_s: float = 0.0,
    n_ps: int = 1,
    op_time_s: Callable[[int], float] | None = None,
    with_comm: bool = True,
) -> DiGraph:
    """One iteration of one worker as a :class:`DiGraph` (``with_comm=False``: its compute only,
    what a single GPU runs).

    ``input_time_s`` is the host input pipeline's time per batch (used when the host decodes
    the input: ``strategy.data`` is ``real`` and the input pipeline is not DALI); ``n_ps`` the
    number of parameter-server shards (PS methods); ``op_time_s(nbytes)`` the method's cost of
    one all-reduce (the ``mg-wfbp`` schedule merges by it). Graph attributes: ``model``,
    ``batch_per_gpu``, ``comm``, ``schedule``; ``order`` on every node gives a deterministic
    topological order.
    """
    g = DiGraph(
        model=workload.model.name,
        batch_per_gpu=workload.batch_per_gpu,
        comm=strategy.comm,
        schedule=strategy.effective_schedule,
        micro_steps=strategy.micro_steps,
    )
    order = itertools.count()

    def add(node: str, kind: NodeKind, **attrs: object) -> str:
        g.add_node(node, kind=kind, order=next(order), **attrs)
        return node

    fwd, bwd, update = _add_compute_nodes(g, add, workload, strategy, input_time_s, with_comm)
    if not with_comm:
        return g
    if strategy.sharding is not None:
        _add_sharded_nodes(g, add, workload, strategy, update)
    elif strategy.is_parameter_server:
        _add_ps_nodes(g, add, workload, strategy, n_ps, fwd, bwd, update)
    else:
        _add_allreduce_nodes(g, add, workload, strategy, op_time_s, fwd, bwd, update)
    _wait_for_backprop(g, strategy, bwd)
    return g


def compute_node(kind: NodeKind, micro_step: int, layer: str) -> str:
    """The name of a layer's forward or backward node in a micro-step (``fwd:L``, ``bwd:L``;
    ``fwd:m1:L`` from the second micro-step of a sharded method's unrolled accumulation)."""
    tag = f"m{micro_step}:" if micro_step else ""
    return f"{'fwd' if kind is NodeKind.FORWARD else 'bwd'}:{tag}{layer}"


def _add_compute_nodes(
    g: DiGraph,
    add: _AddNode,
    workload: Workload,
    strategy: Strategy,
    input_time_s: float,
    with_comm: bool = True,
) -> tuple[list[str], dict[int, str], str]:
    """The input (host decode), forward, backward and update nodes, chained in that order
    (the update a sharded method's, on one GPU's shard, where it communicates)."""
    layers = workload.layers
    timings = workload.profile.layers
    prev: str | None = None
    if strategy.host_decodes_input:
        prev = add("input", NodeKind.INPUT, stream="input", duration_s=input_time_s)
    for m in range(strategy.micro_steps):  # gradient accumulation unrolled (sharded methods)
        fwd = []
        for layer, timing in zip(layers, timings, strict=True):
            node = add(
                compute_node(NodeKind.FORWARD, m, layer.name),
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
            copies_s = _grad_copy_s(strategy, layer.grad_bytes("fp32"), with_comm)
            node = add(
                compute_node(NodeKind.BACKWARD, m, layer.name),
                NodeKind.BACKWARD,
                stream="compute",
                duration_s=timing.bwd_time_s + copies_s,
                layer=layer.name,
            )
            g.add_edge(prev, node, kind=EdgeKind.DATA)
            bwd[idx] = node
            prev = node
    update_s = workload.profile.unattributed_time_s
    sh = strategy.sharding
    if sh is not None and with_comm:  # the optimizer on this GPU's shard (offload: the host's)
        update_s *= sh.optimizer_fraction
        if sh.offload != "none":
            update_s = host_step_s(sh, workload.model.n_params)
    update = add("update", NodeKind.UPDATE, stream="compute", duration_s=update_s)
    g.add_edge(prev, update, kind=EdgeKind.CONTROL)
    return fwd, bwd, update


def _grad_copy_s(strategy: Strategy, fp32_grad_bytes: int, with_comm: bool) -> float:
    """Seconds of the gradient copies ZeRO-1/2's backward hooks make on the compute stream for
    a layer with ``fp32_grad_bytes`` of gradients
    (:attr:`~ddlsim.execution.sharded.Sharding.grad_copy_bytes_per_param`; 0 for every other
    method, or alone on one GPU)."""
    sh = strategy.sharding
    if sh is None or not with_comm or sh.copy_Bps <= 0:
        return 0.0
    return fp32_grad_bytes / 4 * sh.grad_copy_bytes_per_param / sh.copy_Bps


def _add_allreduce_nodes(
    g: DiGraph,
    add: _AddNode,
    workload: Workload,
    strategy: Strategy,
    op_time_s: Callable[[int], float] | None,
    fwd: list[str],
    bwd: dict[int, str],
    update: str,
) -> None:
    """One all-reduce node per bucket the schedule plans, after the backward nodes it needs and
    before the update (or the next iteration's forward pass of the layer it gates)."""
    layers = workload.layers
    items = _ready_items(workload, strategy)
    buckets = plan_buckets(
        strategy.effective_schedule,
        *items,
        fusion_threshold_bytes=strategy.fusion_threshold_bytes,
        cycle_time_s=strategy.cycle_time_s,
        op_time_s=op_time_s,
        partition_bytes=strategy.partition_bytes,
        bucket_caps_bytes=(strategy.first_bucket_bytes, strategy.bucket_cap_bytes),
    )
    for k, bucket in enumerate(buckets):
        node = add(
            f"allreduce:{k}",
            NodeKind.ALLREDUCE,
            stream="comm",
            channel=0,
            op="allreduce",
            nbytes=bucket.nbytes,
            layers=[layers[i].name for i in bucket.layers],
            tensors=list(bucket.tensors),
            priority=bucket.priority,
        )
        for i in bucket.layers:
            g.add_edge(bwd[i], node, kind=EdgeKind.DATA)
        if bucket.trigger not in bucket.layers:
            g.add_edge(bwd[bucket.trigger], node, kind=EdgeKind.CONTROL)
        if bucket.gates_next is None:
            g.add_edge(node, update, kind=EdgeKind.DATA)
        else:
            g.add_edge(node, fwd[bucket.gates_next], kind=EdgeKind.NEXT_ITERATION)


def _add_sharded_nodes(
    g: DiGraph, add: _AddNode, workload: Workload, strategy: Strategy, update: str
) -> None:
    """A sharded method's collectives (:mod:`ddlsim.execution.sharded`): each node issued
    after the compute node ``issue_after`` (a control edge; none: at the step's start) and
    awaited by ``wait_before`` (a data edge; none: the optimizer step)."""
    sh = strategy.sharding
    assert sh is not None

    def fwd(m: int, i: int) -> str:
        return compute_node(NodeKind.FORWARD, m, workload.layers[i].name)

    def bwd(m: int, i: int) -> str:
        return compute_node(NodeKind.BACKWARD, m, workload.layers[i].name)

    for k, call in enumerate(sharded_calls(workload, sh, fwd, bwd, strategy.micro_steps)):
        node = add(
            f"{call.op}:{k}",
            NodeKind.COLLECTIVE,
            stream="comm",
            channel=0,
            op=call.op,
            nbytes=call.nbytes,
            layers=call.layers,
            issue_after=call.issue_after,
            wait_before=call.wait_before,
        )
        if call.issue_after is not None:
            g.add_edge(call.issue_after, node, kind=EdgeKind.CONTROL)
        g.add_edge(node, call.wait_before or update, kind=EdgeKind.DATA)


def _wait_for_backprop(g: DiGraph, strategy: Strategy, bwd: dict[int, str]) -> None:
    """Without overlap (BSP, a CPU worker's cores doing the exchange, or a backward compiled
    into XLA clusters), every all-reduce and push waits for the end of the backward pass (a
    control edge from its last node)."""
    bsp = strategy.effective_schedule == "bsp"
    if (bsp or not strategy.wait_free_backprop or strategy.compiled_backward) and bwd:
        last_bwd = bwd[min(bwd)]
        for node, data in list(g.nodes(data=True)):
            if data["kind"] in (NodeKind.ALLREDUCE, NodeKind.PUSH):
                g.add_edge(last_bwd, node, kind=EdgeKind.CONTROL)


def _ready_items(workload: Workload, strategy: Strategy) -> tuple[list[Item], list[Item]]:
    """Per layer with gradients and per gradient tensor, in the order backprop makes them
    ready, with the calibrated time each becomes ready (end of its layer's backward pass; of
    the whole backward when it is compiled: :attr:`Strategy.compiled_backward`)."""
    layers, timings = workload.layers, workload.profile.layers
    dtype = strategy.grad_dtype
    by_layer: list[Item] = []
    by_tensor: list[Item] = []
    t = sum(x.fwd_time_s for x in timings)
    end = t + sum(x.bwd_time_s for x in timings)  # a compiled backward's gradients: all at once
    for i in reversed(range(len(layers))):
        t = end if strategy.compiled_backward else t + timings[i].bwd_time_s
        layer = layers[i]
        if not layer.tensors:
            continue
        names = tuple(x.name for x in layer.tensors)
        by_layer.append(Item(i, names, layer.grad_bytes(dtype), t))
        by_tensor.extend(Item(i, (x.name,), x.nbytes(dtype), t) for x in layer.tensors)
    return by_layer, by_tensor


def _add_ps_nodes(g, add, workload, strategy, n_ps, fwd, bwd, update) -> None:
    """Per layer and shard (``wfbp`` / ``bytescheduler``: per tensor, or per partition of a
    tensor): pull before the layer's forward, push after its backward."""
    layers = workload.layers
    tensors = workload.model.tensors
    if strategy.comm == "byteps":
        shard_of = [0] * len(tensors)  # BytePS partitions every tensor across all servers
    else:
        sizes = [t.nbytes(strategy.grad_dtype) for t in tensors]
        shard_of = place(sizes, n_ps, rule_for(strategy.comm))
    schedule = strategy.effective_schedule
    per_tensor = schedule in ("wfbp", "bytescheduler")
    grad_dtype = strategy.grad_dtype
    t_index = 0
    # per layer: (shard, nbytes, tensor names, part) of each push / pull
    per_layer: list[list[tuple[int, int, list[str], int]]] = []
    for layer in layers:
        by_shard: dict[int, tuple[int, list[str]]] = {}
        units: list[tuple[int, int, list[str], int]] = []
        for t in layer.tensors:
            shard = shard_of[t_index]
            t_index += 1
            if per_tensor:
                sizes = [t.nbytes(grad_dtype)]
                if schedule == "bytescheduler":
                    sizes = partitions(sizes[0], strategy.partition_bytes)
                units.extend((shard, n, [t.name], k) for k, n in enumerate(sizes))
            else:
                nbytes, names = by_shard.get(shard, (0, []))
                by_shard[shard] = (nbytes + t.nbytes(grad_dtype), [*names, t.name])
        if not per_tensor:
            units = [(shard, n, names, 0) for shard, (n, names) in sorted(by_shard.items())]
        per_layer.append(units)
    priority = schedule == "bytescheduler"

    def ps_node(kind: NodeKind, idx: int, unit: tuple[int, int, list[str], int]) -> str:
        shard, nbytes, names, part = unit
        op = kind.value
        suffix = f":{names[0]}:{part}" if per_tensor else ""
        return add(
            f"{op}:{layers[idx].name}:{shard}{suffix}",
            kind,
            stream="comm",
            channel=shard,
            op=op,
            nbytes=nbytes,
            layers=[layers[idx].name],
            tensors=names,
            priority=idx if priority else None,
        )

    for idx in range(len(layers)):
        for unit in per_layer[idx]:
            g.add_edge(ps_node(NodeKind.PULL, idx, unit), fwd[idx], kind=EdgeKind.DATA)
    for idx in reversed(range(len(layers))):
        for unit in per_layer[idx]:
            push = ps_node(NodeKind.PUSH, idx, unit)
            g.add_edge(bwd[idx], push, kind=EdgeKind.DATA)
            g.add_edge(push, update, kind=EdgeKind.DATA)


def nodes_in_order(g: DiGraph, *kinds: NodeKind) -> list[str]:
    """Nodes of the given kinds (all if none given), in the DAG's deterministic order."""
    selected = [n for n, d in g.nodes(data=True) if not kinds or d["kind"] in kinds]
    return sorted(selected, key=lambda n: g.nodes[n]["order"])
