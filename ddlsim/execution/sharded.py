"""Sharded data parallelism in the DAG: PyTorch FSDP and DeepSpeed ZeRO stages 1-3.

Each GPU keeps 1/N of the parameters, gradients and optimizer state; a step gathers
parameters and scatters gradients with NCCL calls (:mod:`ddlsim.comm.sharded`) that run on
one communicator, in the order the framework issues them (NCCL runs the calls of one
communicator in issue order, whatever stream issued them: the reason FSDP's backward prefetch
exists). A *unit* is what one call moves: an FSDP unit (``--fsdp-unit-blocks`` transformer
blocks, the auto-wrap policy's ``transformer_layer_cls``; the embedding and the head form the
root unit) or a DeepSpeed bucket.

FSDP (``torch.distributed.fsdp``: ``FullyShardedDataParallel``, ``_runtime_utils``), per
micro-step (Composer's trainer does not wrap FSDP in ``no_sync``: every micro-step gathers and
reduces):

- forward: unit u's parameters all-gathered before its forward (``FULL_SHARD``,
  ``SHARD_GRAD_OP``, ``HYBRID_SHARD``). With ``limit_all_gathers`` (the default; at most two
  gathers in flight) or ``forward_prefetch`` the gather of u is issued when unit u-1's forward
  starts; without either the CPU runs ahead and issues every gather at the start of the pass;
- backward (``FULL_SHARD``, ``HYBRID_SHARD`` reshard after forward, so gather again; the root
  unit is never resharded): the gather of unit u-1 issued when unit u's backward starts
  (``BACKWARD_PRE``, the default), when it ends but before its reduce-scatter
  (``BACKWARD_POST``), or when unit u-1's backward starts (``none``: behind the reduce-scatter);
- the gradient reduce-scatter of unit u issued when its backward ends (``HYBRID_SHARD``: inside
  the node, then an all-reduce of the 1/g shard across the nodes; ``NO_SHARD``: an all-reduce);
- the optimizer on the 1/N shard (:attr:`Sharding.shards`) after the last reduce-scatter.

DeepSpeed (``deepspeed/runtime/zero``: ``config.py`` defaults, ``stage_1_and_2.py``,
``stage3.py``): ZeRO-3 gathers and reduces as ``FULL_SHARD`` with backward prefetch (its
``stage3_prefetch_bucket_size``) and ``overlap_comm`` on; ZeRO-2 reduce-scatters gradient
buckets of ``reduce_bucket_size`` elements in backward hooks every micro-step, ZeRO-1 once, after
the last micro-step's backward; both all-gather the updated parameters in buckets of
``allgather_bucket_size`` elements after the optimizer step (before the next forward).
Without ``overlap_comm`` (DeepSpeed's default for stages 1 and 2) a reduction runs on the
compute stream: the backward waits for it. ZeRO-1/2's gradient hooks copy on the compute stream
(``stage_1_and_2.py``, ``reduce_independent_p_g_buckets_and_remove_grads``): with
``contiguous_gradients`` (the default) each gradient into the ``reduce_bucket_size`` buffer
and, after the reduction, this rank's partition into ``grads_in_partition``; without it the
bucket's gradients are flattened for the reduction and copied back
(``buffered_reduce_fallback``). :attr:`Sharding.grad_copy_bytes_per_param` is what each moves,
added to the backward of the layer whose gradients they are; ZeRO-3's copy into its flat
buffer runs on its reduction stream and is not timed.

CPU offload (:mod:`ddlsim.execution.offload`) adds copies to the calls (:func:`with_copies`),
each on the stream of the call it belongs to, so it overlaps compute where that call does and
serialises with it: an ``h2d`` of the unit's shard before each gather (``params``), a ``d2h``
of the reduced gradient shard after each reduction, and (``optimizer``) an ``h2d`` of the
updated 16-bit partition before the next forward's first gather; the optimizer step runs on
the host (:func:`host_step_s`), after the last gradient arrives and before the next forward.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ddlsim.comm import SHARDED_METHODS
from ddlsim.errors import ConfigError
from ddlsim.execution.offload import OFFLOADS
from ddlsim.workload.layers import LayerKind, ModelSpec
from ddlsim.workload.workload import Workload

#: FSDP's ``ShardingStrategy`` members (``torch.distributed.fsdp.api``), lower-cased
SHARDINGS = ("full_shard", "shard_grad_op", "hybrid_shard", "no_shard")
#: FSDP's ``BackwardPrefetch``: BACKWARD_PRE, BACKWARD_POST, or None
BACKWARD_PREFETCH = ("pre", "post", "none")
#: Composer's FSDP mixed-precision presets (``composer.distributed``: parameter and reduce
#: dtypes): FULL (fp32, PyTorch's ``mixed_precision=None``), DEFAULT (half parameters, fp32
#: reduction), PURE (half both)
FSDP_PRECISIONS = ("auto", "full", "default", "pure")
#: DeepSpeed's ``reduce_bucket_size`` and ``allgather_bucket_size`` default, elements
ZERO_BUCKET_ELEMENTS = 500_000_000


@dataclass(frozen=True)
class Sharding:
    """How a sharded method runs (see module). ``shards``: the GPUs one copy of the state is
    split over (N; a node's g for ``hybrid_shard``); ``param_bytes`` / ``reduce_bytes``: bytes
    per element of the gathered parameters and of the reduced gradients. ``offload``: what
    lives in host memory (:data:`~ddlsim.execution.offload.OFFLOADS`); ``host_step_bytes``
    the DRAM bytes per parameter of the host's optimizer step and ``host_step_Bps`` the rate
    one rank streams them at; ``pin_memory``: the host buffers are pinned (FSDP's always are,
    DeepSpeed's with ``pin_memory: true``), else copies are pageable."""

    method: str
    shards: int
    sharding: str = "full_shard"
    unit_blocks: int = 1
    backward_prefetch: str = "pre"
    forward_prefetch: bool = False
    limit_all_gathers: bool = True
    param_bytes: int = 2
    reduce_bytes: int = 4
    overlap_comm: bool = True
    reduce_bucket_elements: int = ZERO_BUCKET_ELEMENTS
    allgather_bucket_elements: int = ZERO_BUCKET_ELEMENTS
    offload: str = "none"
    host_step_bytes: float = 0.0
    host_step_Bps: float = 0.0
    pin_memory: bool = True
    #: DeepSpeed's ``contiguous_gradients`` (:data:`ddlsim.config` default: on)
    contiguous_gradients: bool = True
    #: the DRAM rate a gradient copy streams at (0: copies not timed)
    copy_Bps: float = 0.0

    def __post_init__(self) -> None:
        if self.method not in SHARDED_METHODS:
            raise ConfigError(f"{self.method!r} is not a sharded method ({SHARDED_METHODS})")
        if self.sharding not in SHARDINGS:
            raise ConfigError(f"sharding {self.sharding!r}: expected one of {SHARDINGS}")
        if self.backward_prefetch not in BACKWARD_PREFETCH:
            raise ConfigError(f"backward prefetch {self.backward_prefetch!r}: {BACKWARD_PREFETCH}")
        if self.offload not in OFFLOADS:
            raise ConfigError(f"--offload {self.offload!r}: expected one of {OFFLOADS}")
        if self.offload == "params" and self.method in ("zero1", "zero2"):
            raise ConfigError(
                f"--offload params with --comm {self.method}: DeepSpeed offloads parameters "
                "(offload_param) at ZeRO stage 3 only; use --offload optimizer or --comm zero3"
            )
        if self.offload == "params" and self.sharding == "no_shard":
            raise ConfigError(
                "--offload params with --sharding no_shard: FSDP then copies the whole model "
                "to the GPU every forward; not modelled (use a sharded strategy)"
            )
        if self.offload == "optimizer" and self.method == "fsdp":
            raise ConfigError(
                "--offload optimizer with --comm fsdp: FSDP's CPUOffload moves the parameters, "
                "their gradients and the optimizer step to the host together: --offload params"
            )

    @property
    def host_param_bytes(self) -> int:
        """Bytes per element of a parameter shard kept on the host (``params``): FSDP's fp32
        flat parameter, ZeRO-Infinity's 16-bit partition."""
        return 4 if self.method == "fsdp" else self.param_bytes

    @property
    def per_micro_step(self) -> bool:
        """Whether every micro-step gathers and reduces (all but ZeRO-1)."""
        return self.method != "zero1"

    @property
    def gathers_in_backward(self) -> bool:
        """Parameters resharded after forward, gathered again for backward."""
        full = self.sharding in ("full_shard", "hybrid_shard")
        return self.method == "zero3" or (self.method == "fsdp" and full)

    @property
    def gathers_in_forward(self) -> bool:
        """Parameters gathered unit by unit in the forward pass (ZeRO-3, FSDP but NO_SHARD)."""
        return self.method == "zero3" or (self.method == "fsdp" and self.sharding != "no_shard")

    @property
    def hybrid(self) -> bool:
        """FSDP's HYBRID_SHARD: sharded inside a node, replicated across nodes."""
        return self.method == "fsdp" and self.sharding == "hybrid_shard"

    @property
    def grad_copy_bytes_per_param(self) -> float:
        """DRAM bytes per parameter ZeRO-1/2's backward hooks copy on the compute stream (see
        module; 0 for FSDP and ZeRO-3): with contiguous gradients each gradient read and
        written into the bucket buffer once, and this rank's 1/N again into its partition;
        without, flattened for the reduction and copied back (twice read and written).
        Gradients are in the model's dtype (``param_bytes``)."""
        if self.method not in ("zero1", "zero2"):
            return 0.0
        moved = 2.0 * self.param_bytes
        if self.contiguous_gradients:
            return moved + moved / self.shards
        return 2.0 * moved

    @property
    def optimizer_fraction(self) -> float:
        """The share of the optimizer step one GPU runs (its shard)."""
        if self.method == "fsdp" and self.sharding == "no_shard":
            return 1.0
        return 1.0 / self.shards


@dataclass
class _Call:
    """One collective before it becomes a DAG node."""

    op: str
    nbytes: int
    layers: list[str]
    issue_after: str | None  # compute node after which it is issued (None: the step's start)
    wait_before: str | None  # compute node that waits for it (None: the optimizer step)


def units_of(spec: ModelSpec, unit_blocks: int) -> list[list[int]]:
    """Layer indices of each unit in forward order: the root unit (embedding, head, anything
    that is not a block) first, then ``unit_blocks`` consecutive blocks per unit."""
    root = [i for i, x in enumerate(spec.layers) if x.kind is not LayerKind.BLOCK]
    blocks = [i for i, x in enumerate(spec.layers) if x.kind is LayerKind.BLOCK]
    if not blocks:
        raise ConfigError(f"{spec.name}: sharded methods wrap transformer blocks; it has none")
    if unit_blocks > len(blocks):
        raise ConfigError(
            f"--fsdp-unit-blocks {unit_blocks}: a unit larger than the model ({spec.name} has "
            f"{len(blocks)} blocks)"
        )
    return [root] + [blocks[i : i + unit_blocks] for i in range(0, len(blocks), unit_blocks)]


def sharded_calls(
    workload: Workload,
    sh: Sharding,
    fwd: Callable[[int, int], str],
    bwd: Callable[[int, int], str],
    micro_steps: int,
) -> list[_Call]:
    """The collectives of one optimizer step, in issue order; ``fwd(m, i)`` / ``bwd(m, i)``
    name layer i's compute nodes in micro-step m."""
    layers = workload.layers
    n_params = [x.grad_bytes("fp32") // 4 for x in layers]
    if sh.method in ("zero1", "zero2"):
        return _zero12_calls(workload, sh, fwd, bwd, micro_steps, n_params)
    groups = units_of(workload.model, sh.unit_blocks)
    calls: list[_Call] = []
    for m in range(micro_steps):
        start = bwd(m - 1, 0) if m > 0 else None  # the previous micro-step's last node
        calls += _forward_gathers(sh, groups, n_params, layers, m, fwd, start)
        calls += _backward_calls(sh, groups, n_params, layers, m, fwd, bwd)
    return with_copies(calls, sh, sum(n_params), fwd)


def with_copies(calls: list[_Call], sh: Sharding, n_params: int, fwd) -> list[_Call]:
    """``calls`` with CPU offload's copies (module docstring), in issue order: a copy rides on
    the stream (issue and wait points) of the call it precedes or follows. Bytes per GPU:
    the shard's elements (a gather's or a reduce-scatter's buffer over ``shards``) at
    :attr:`Sharding.host_param_bytes` going up, fp32 gradients (4 bytes) coming down."""
    if sh.offload == "none":
        return calls
    up, down = ("h2d", "d2h") if sh.pin_memory else ("h2d-pageable", "d2h-pageable")
    out: list[_Call] = []
    if sh.offload == "optimizer":  # the updated partition, before the first gather
        nbytes = math.ceil(n_params / sh.shards) * sh.param_bytes
        every = list(dict.fromkeys(name for c in calls for name in c.layers))
        out.append(_Call(up, nbytes, every, None, fwd(0, 0)))
    for c in calls:
        if sh.offload == "params" and c.op in ("allgather", "allgather-node"):
            shard = math.ceil(c.nbytes / sh.param_bytes / sh.shards)
            out.append(_Call(up, shard * sh.host_param_bytes, c.layers, c.issue_after,
                             c.wait_before))  # fmt: skip
        out.append(c)
        if c.op in ("reducescatter", "allreduce", "allreduce-replicas"):
            elements = c.nbytes / sh.reduce_bytes
            if c.op == "reducescatter":
                elements /= sh.shards
            out.append(_Call(down, math.ceil(elements) * 4, c.layers, c.issue_after,
                             c.wait_before))  # fmt: skip
    return out


def _names(layers, idx: list[int]) -> list[str]:
    return [layers[i].name for i in idx]


def _forward_gathers(sh, groups, n_params, layers, m, fwd, start) -> list[_Call]:
    if not sh.gathers_in_forward:
        return []
    ahead = sh.limit_all_gathers or sh.forward_prefetch or sh.method == "zero3"
    op = "allgather-node" if sh.hybrid else "allgather"
    calls = []
    # the root unit first (its embedding runs first), then the blocks in forward order
    order = sorted(range(len(groups)), key=lambda u: min(groups[u]))
    for k, u in enumerate(order):
        first = min(groups[u])
        if ahead and k >= 2:  # issued as the unit before this one starts its forward
            prev_first = min(groups[order[k - 1]])
            issue = fwd(m, prev_first - 1) if prev_first > 0 else start
        else:
            issue = start
        nbytes = sum(n_params[i] for i in groups[u]) * sh.param_bytes
        calls.append(_Call(op, nbytes, _names(layers, groups[u]), issue, fwd(m, first)))
    return calls


def _backward_calls(sh, groups, n_params, layers, m, fwd, bwd) -> list[_Call]:
    """Backward gathers and gradient reductions of micro-step ``m``, in issue order."""
    n = len(layers)
    blocks = sorted(groups[1:], key=lambda g: -max(g))  # backward order
    root = groups[0]
    gather = "allgather-node" if sh.hybrid else "allgather"
    calls: list[_Call] = []

    def last_bwd(unit):  # the unit's last backward node (its lowest layer)
        return bwd(m, min(unit))

    def first_bwd(unit):
        return bwd(m, max(unit))

    def node_before(unit):  # the compute node just before the unit's backward
        top = max(unit)
        return bwd(m, top + 1) if top + 1 < n else None

    def next_bwd(unit):  # the compute node after the unit's backward (None: the last one)
        low = min(unit)
        return bwd(m, low - 1) if low > 0 else None

    def reduce(unit) -> list[_Call]:
        grads = sum(n_params[i] for i in unit) * sh.reduce_bytes
        names, issue = _names(layers, unit), last_bwd(unit)
        wait = None if sh.overlap_comm else next_bwd(unit)
        if sh.method == "fsdp" and sh.sharding == "no_shard":
            return [_Call("allreduce", grads, names, issue, wait)]
        if sh.hybrid:
            return [
                _Call("reducescatter-node", grads, names, issue, wait),
                _Call("allreduce-replicas", grads // sh.shards, names, issue, wait),
            ]
        return [_Call("reducescatter", grads, names, issue, wait)]

    def gather_of(unit, issue) -> _Call:
        nbytes = sum(n_params[i] for i in unit) * sh.param_bytes
        return _Call(gather, nbytes, _names(layers, unit), issue, first_bwd(unit))

    regather = sh.gathers_in_backward
    if regather and blocks:  # the first block's gather: when backward starts (the root's
        # pre-backward hook prefetches it), behind the head's backward
        calls.append(gather_of(blocks[0], fwd(m, n - 1)))
    for unit, nxt in zip(blocks, [*blocks[1:], None], strict=True):
        prefetch = sh.backward_prefetch if regather and nxt is not None else ""
        if prefetch == "pre":
            calls.append(gather_of(nxt, node_before(unit)))
        elif prefetch == "post":
            calls.append(gather_of(nxt, last_bwd(unit)))
        calls += reduce(unit)
        if prefetch == "none":  # behind the reduce-scatter
            calls.append(gather_of(nxt, last_bwd(unit)))
    calls += reduce(root)  # the root unit's post-backward runs last
    return calls


def _zero12_calls(workload, sh, fwd, bwd, micro_steps, n_params) -> list[_Call]:
    """ZeRO-1 / 2: gradient buckets of ``reduce_bucket_size`` elements reduce-scattered in
    backward order (every micro-step for ZeRO-2, after the last for ZeRO-1), then the updated
    parameters all-gathered in buckets of ``allgather_bucket_size`` before the next forward."""
    layers = workload.layers
    calls: list[_Call] = []
    steps = range(micro_steps) if sh.per_micro_step else [micro_steps - 1]
    order = [i for i in reversed(range(len(layers))) if n_params[i] > 0]
    for m in steps:
        for bucket in _buckets(order, n_params, sh.reduce_bucket_elements):
            low = min(bucket)
            issue, wait = bwd(m, low), None
            if not sh.per_micro_step:  # ZeRO-1: the reduction follows the backward pass
                issue = bwd(m, 0)
            elif not sh.overlap_comm:  # on the compute stream: the next layer waits
                wait = bwd(m, low - 1) if low > 0 else None
            nbytes = sum(n_params[i] for i in bucket) * sh.reduce_bytes
            calls.append(_Call("reducescatter", nbytes, _names(layers, bucket), issue, wait))
    for bucket in _buckets(sorted(order), n_params, sh.allgather_bucket_elements):
        nbytes = sum(n_params[i] for i in bucket) * sh.param_bytes
        calls.append(_Call("allgather", nbytes, _names(layers, bucket), None, fwd(0, 0)))
    return with_copies(calls, sh, sum(n_params), fwd)


def host_step_s(sh: Sharding, n_params: int) -> float:
    """Seconds of the host's optimizer step on one rank's shard of ``n_params`` parameters:
    :attr:`Sharding.host_step_bytes` per parameter streamed at :attr:`Sharding.host_step_Bps`
    (0 without offload)."""
    if sh.offload == "none":
        return 0.0
    return n_params * sh.optimizer_fraction * sh.host_step_bytes / sh.host_step_Bps


def _buckets(order: list[int], n_params: list[int], cap: int) -> list[list[int]]:
    """Consecutive layers of ``order`` packed up to ``cap`` elements (a larger layer alone)."""
    out: list[list[int]] = []
    size = 0
    for i in order:
        if out and size + n_params[i] <= cap:
            out[-1].append(i)
            size += n_params[i]
        else:
            out.append([i])
            size = n_params[i]
    return out
