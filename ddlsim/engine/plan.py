"""The DAG flattened into what the engine replays: compute segments and communication ops.

Both engines run the same plan. A worker's forward and backward passes are split into segments
at the points where something external happens (a gradient bucket becomes ready, a layer waits
for a parameter pull), so the number of simulation events grows with communication operations,
not with layers or GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddlsim.execution.dag import DiGraph, EdgeKind, NodeKind, nodes_in_order


@dataclass
class CommOp:
    """One communication operation of one iteration (allreduce bucket, push or pull)."""

    name: str
    op: str
    channel: int
    nbytes: int
    layers: list[str]
    trigger: int = -1  # backward position after which the op is ready (allreduce / push)
    fwd_index: int = -1  # forward layer index that waits for it (pull)
    n_tensors: int = 1  # gradient tensors in it (Horovod negotiates tensor by tensor)
    priority: int | None = None  # order on its channel (lower first); None: when ready
    next_fwd_index: int = -1  # forward layer of the NEXT iteration that waits for it (>= 0:
    # the update of this iteration does not)
    # a sharded method's call (``issue_pos`` >= 0): registered before the compute position
    # ``issue_pos`` of the step's sequence (micro-step m's forward layers, then its backward
    # layers, m = 0..K-1) and awaited before position ``wait_pos`` (-1: by the update)
    issue_pos: int = -1
    wait_pos: int = -1

    @property
    def deferred(self) -> bool:
        """Whether the next iteration's forward pass, not this iteration's update, waits."""
        return self.next_fwd_index >= 0


@dataclass
class Plan:
    """Flattened iteration: per-layer durations and the communication ops hanging off them."""

    fwd_names: list[str]
    fwd_s: list[float]
    bwd_names: list[str]  # in backward (reverse layer) order
    bwd_s: list[float]
    update_s: float
    input_s: float | None
    ops: list[CommOp] = field(default_factory=list)
    #: micro-steps the forward / backward lists hold, one after the other (sharded methods)
    micro_steps: int = 1

    @property
    def pushes_and_allreduces(self) -> list[CommOp]:
        """Ops that follow the backward pass, in trigger order."""
        return sorted((o for o in self.ops if o.op != "pull"), key=lambda o: o.trigger)

    @property
    def pulls(self) -> list[CommOp]:
        """Parameter pulls, in forward order."""
        return sorted((o for o in self.ops if o.op == "pull"), key=lambda o: o.fwd_index)


def plan_from_dag(g: DiGraph, with_comm: bool = True) -> Plan:
    """Flatten ``g`` (from :func:`ddlsim.execution.dag.build_dag`); ``with_comm=False`` drops all
    communication (a single GPU exchanges nothing)."""
    fwd = nodes_in_order(g, NodeKind.FORWARD)
    bwd = nodes_in_order(g, NodeKind.BACKWARD)
    update = nodes_in_order(g, NodeKind.UPDATE)[0]
    inputs = nodes_in_order(g, NodeKind.INPUT)
    plan = Plan(
        fwd_names=[g.nodes[n]["layer"] for n in fwd],
        fwd_s=[g.nodes[n]["duration_s"] for n in fwd],
        bwd_names=[g.nodes[n]["layer"] for n in bwd],
        bwd_s=[g.nodes[n]["duration_s"] for n in bwd],
        update_s=g.nodes[update]["duration_s"],
        input_s=g.nodes[inputs[0]]["duration_s"] if inputs else None,
        micro_steps=g.graph.get("micro_steps", 1),
    )
    if not with_comm:
        return plan
    if plan.micro_steps > 1 or any(True for _ in nodes_in_order(g, NodeKind.COLLECTIVE)):
        plan.ops = _sequenced_ops(g, fwd, bwd, plan.micro_steps)
    bwd_pos = {n: i for i, n in enumerate(bwd)}
    fwd_pos = {n: i for i, n in enumerate(fwd)}
    for node in nodes_in_order(g, NodeKind.ALLREDUCE, NodeKind.PUSH, NodeKind.PULL):
        d = g.nodes[node]
        if d["nbytes"] <= 0:
            continue
        op = CommOp(node, d["op"], d["channel"], d["nbytes"], list(d["layers"]))
        op.n_tensors = max(1, len(d.get("tensors", ())))
        op.priority = d.get("priority")
        if d["kind"] is NodeKind.PULL:
            op.fwd_index = min(fwd_pos[s] for s in g.successors(node) if s in fwd_pos)
        else:
            op.trigger = max(bwd_pos[p] for p in g.predecessors(node) if p in bwd_pos)
            gated = [
                fwd_pos[s]
                for s in g.successors(node)
                if g.edges[node, s]["kind"] is EdgeKind.NEXT_ITERATION
            ]
            op.next_fwd_index = min(gated, default=-1)
        plan.ops.append(op)
    return plan


def _sequenced_ops(g: DiGraph, fwd: list[str], bwd: list[str], micro_steps: int) -> list[CommOp]:
    """A sharded method's calls with their issue and wait positions in the step's sequence."""
    nf, nb = len(fwd) // micro_steps, len(bwd) // micro_steps
    pos: dict[str, int] = {}
    for m in range(micro_steps):
        base = m * (nf + nb)
        pos.update((n, base + i) for i, n in enumerate(fwd[m * nf : (m + 1) * nf]))
        pos.update((n, base + nf + j) for j, n in enumerate(bwd[m * nb : (m + 1) * nb]))
    ops = []
    for node in nodes_in_order(g, NodeKind.COLLECTIVE):
        d = g.nodes[node]
        if d["nbytes"] <= 0:
            continue
        op = CommOp(node, d["op"], d["channel"], d["nbytes"], list(d["layers"]))
        op.issue_pos = pos[d["issue_after"]] + 1 if d["issue_after"] is not None else 0
        op.wait_pos = pos[d["wait_before"]] if d["wait_before"] is not None else -1
        ops.append(op)
    return ops


def merged(ops: list[CommOp]) -> CommOp:
    """One collective carrying the plan's ``ops`` (fused at run time)."""
    return CommOp(
        name=f"{ops[0].name}+{len(ops) - 1}",
        op=ops[0].op,
        channel=ops[0].channel,
        nbytes=sum(o.nbytes for o in ops),
        layers=[layer for o in ops for layer in o.layers],
        n_tensors=sum(o.n_tensors for o in ops),
    )
