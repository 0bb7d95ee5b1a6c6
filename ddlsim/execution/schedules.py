"""When each gradient may start communicating: the scheduling policies of the S-SGD DAG.

The DAG model of synchronous SGD (Shi et al., "A DAG model of synchronous stochastic gradient
descent in distributed deep learning", ICPADS 2018) fixes what must happen in an iteration;
a *schedule* decides how the gradients are grouped into communication operations and when each
operation may start. The policies, all over the same DAG:

- ``horovod``: Horovod's tensor fusion. Gradients ready by the same ``HOROVOD_CYCLE_TIME`` tick
  are packed up to ``HOROVOD_FUSION_THRESHOLD`` (:func:`ddlsim.execution.horovod.fusion_plan`), and
  the
  coordinator fuses again what a long cycle leaves pending. Horovod methods only.
- ``bsp``: bulk-synchronous. Every exchange waits for the end of the backward pass; an
  all-reduce method exchanges all gradients in one operation (the HKBU benchmark's BSP:
  Horovod with a 512 MB fusion threshold), a parameter-server method pushes each layer's slice
  once backprop is over. No overlap: iteration = compute + all communication.
- ``wfbp``: wait-free backpropagation (Poseidon, Zhang et al. 2017): each gradient tensor is
  exchanged as soon as its layer's backward pass ends, no merging (Horovod with a fusion
  threshold of 0). Every tensor pays its own start-up cost.
- ``mg-wfbp``: merged-gradient WFBP (Shi, Chu and Li, "MG-WFBP: efficient data communication
  for distributed synchronous SGD algorithms", IEEE INFOCOM 2019). Walking the tensors in the
  order backprop produces them, the next tensor joins the pending group when it is ready
  before that group's communication could start plus one start-up time: merging then never
  delays the end of communication (the paper's merge conditions, Theorems 1 and 2, for the
  cost model ``a + b * bytes``; ``a`` here is the start-up of the method's own cost,
  ``2 c(4 B) - c(8 B)``, and group durations are the method's own cost). All-reduce methods
  only.
- ``bytescheduler``: priority scheduling with tensor partitioning (P3: Jayarajan et al.,
  SysML 2019; ByteScheduler: Peng et al., SOSP 2019). Tensors are cut into partitions of at
  most ``partition_bytes``; on each channel the partition of the layer nearest the input goes
  first; the next iteration's forward pass of a layer waits only for that layer's partitions
  (layer-wise update), so communication also overlaps the next forward pass. Horovod's
  coordinator still negotiates every partition (ByteScheduler submits them to Horovod one by
  one), without re-fusing them. For parameter-server methods the partitions are pushed and
  pulled in priority order, and the update still waits for every push.
- ``ddp``: PyTorch DistributedDataParallel's gradient buckets. After the first iteration the
  C++ reducer rebuilds its buckets in the order the gradients became ready, the first closed
  once it holds ``_DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB), the others once they hold
  ``bucket_cap_mb`` (25 MiB) -- a bucket closes with the tensor that reaches its cap
  (``torch/nn/parallel/distributed.py`` ``_DDPBucketAssignment``, ``reducer.cpp``
  ``compute_bucket_assignment_by_size``, PyTorch 2.x); a custom cap applies to the first bucket
  too. Each bucket's all-reduce is launched when its last gradient is ready, in bucket order,
  overlapping the rest of backprop; no negotiation, no cycle. All-reduce methods.
- ``auto``: the method's own: ``horovod`` for Horovod methods, ``ddp`` for ``--comm ddp``; for
  the others each layer's
  gradients as soon as its backward pass ends (one operation per layer, per PS shard); CPU
  workers, whose cores do the exchange, after the backward pass.

:func:`plan_buckets` turns a schedule and the per-tensor readiness into :class:`Bucket`
objects, which :func:`ddlsim.execution.dag.build_dag` turns into communication nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.execution.horovod import fusion_plan

SCHEDULES = ("auto", "horovod", "bsp", "wfbp", "mg-wfbp", "bytescheduler", "ddp")
#: BytePS's partition size (``BYTEPS_PARTITION_BYTES`` default, byteps/common/global.cc in
#: BytePS 0.2.4), also used for ByteScheduler's partitions
DEFAULT_PARTITION_BYTES = 4_096_000
#: PyTorch DDP's default bucket cap (``_DEFAULT_BUCKET_CAP_MB`` = 25, in MiB) and its smaller
#: first bucket (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``), PyTorch 2.x
DDP_BUCKET_CAP_BYTES = 25 * 1024 * 1024
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
#: bytes of the probe operations whose costs give MG-WFBP's start-up time ``a``
STARTUP_PROBE_BYTES = 4


@dataclass(frozen=True)
class Item:
    """A gradient tensor (or a layer's tensors) that becomes ready at once."""

    layer: int  # index of the layer in forward order
    tensors: tuple[str, ...]
    nbytes: int
    ready_s: float  # end of the layer's backward pass, from the start of the iteration


@dataclass(frozen=True)
class Bucket:
    """One communication operation a schedule forms.

    ``trigger`` is the layer whose backward pass makes the operation ready (``0``: the end of
    backprop); ``priority`` orders operations waiting on one channel (lower first; None: in
    the order they become ready); ``gates_next`` is the layer whose forward pass in the next
    iteration waits for the operation instead of the update of this one (None: the update
    waits)."""

    layers: tuple[int, ...]
    tensors: tuple[str, ...]
    nbytes: int
    trigger: int
    priority: int | None = None
    gates_next: int | None = None


def check_schedule(schedule: str, *, horovod: bool, parameter_server: bool) -> None:
    """ConfigError unless ``schedule`` exists and applies to the method."""
    if schedule not in SCHEDULES:
        raise UnknownNameError("schedule", schedule, SCHEDULES)
    if schedule == "horovod" and not horovod:
        raise ConfigError(
            "schedule 'horovod' (tensor fusion and cycles) needs a Horovod method "
            "(horovod-nccl, horovod-mpi, horovod-gloo)"
        )
    if schedule in ("mg-wfbp", "ddp") and parameter_server:
        raise ConfigError(
            f"schedule {schedule!r} merges all-reduce operations; parameter-server methods "
            "(ps, distributed-replicated, byteps) take bsp, wfbp or bytescheduler"
        )


def check_partition_bytes(nbytes: int) -> int:
    """``nbytes`` if it is a sensible partition size (1 KiB .. 1 GiB), else ConfigError."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 1024 <= nbytes <= 1 << 30:
        raise ConfigError(f"partition size must be 1 KiB .. 1 GiB, got {nbytes!r} bytes")
    return nbytes


def plan_buckets(
    schedule: str,
    layer_items: Sequence[Item],
    tensor_items: Sequence[Item],
    *,
    fusion_threshold_bytes: int = 0,
    cycle_time_s: float = 0.0,
    op_time_s: Callable[[int], float] | None = None,
    partition_bytes: int = DEFAULT_PARTITION_BYTES,
    bucket_caps_bytes: tuple[int, int] = (DDP_FIRST_BUCKET_BYTES, DDP_BUCKET_CAP_BYTES),
) -> list[Bucket]:
    """The all-reduce operations of ``schedule`` (not ``auto``: resolve it first).

    ``layer_items`` (one per layer with gradients) and ``tensor_items`` (one per gradient
    tensor) are in the order backprop makes them ready; ``op_time_s(nbytes)`` is the method's
    cost of one operation (``mg-wfbp``); ``bucket_caps_bytes`` DDP's (first, other) caps.
    """
    if schedule == "horovod":
        groups = fusion_plan(
            [i.ready_s for i in layer_items],
            [i.nbytes for i in layer_items],
            fusion_threshold_bytes,
            cycle_time_s,
        )
        return [_bucket([layer_items[j] for j in g]) for g in groups]
    if schedule == "bsp":
        return [_bucket(list(tensor_items), trigger=0)] if tensor_items else []
    if schedule == "wfbp":
        return [_bucket([item]) for item in tensor_items]
    if schedule == "mg-wfbp":
        if op_time_s is None:
            raise ValueError("mg-wfbp needs the method's operation cost")
        return [_bucket(g) for g in merge_groups(tensor_items, op_time_s)]
    if schedule == "bytescheduler":
        return [
            Bucket((i.layer,), i.tensors, part, i.layer, priority=i.layer, gates_next=i.layer)
            for i in tensor_items
            for part in partitions(i.nbytes, partition_bytes)
        ]
    if schedule == "ddp":
        return [_bucket(g) for g in ddp_buckets(tensor_items, *bucket_caps_bytes)]
    if schedule == "layer":
        return [_bucket([item]) for item in layer_items]
    raise UnknownNameError("schedule", schedule, SCHEDULES)


def _bucket(items: Sequence[Item], trigger: int | None = None) -> Bucket:
    layers = tuple(dict.fromkeys(i.layer for i in items))
    return Bucket(
        layers=layers,
        tensors=tuple(t for i in items for t in i.tensors),
        nbytes=sum(i.nbytes for i in items),
        trigger=items[-1].layer if trigger is None else trigger,
    )


def ddp_buckets(items: Sequence[Item], first_cap: int, cap: int) -> list[list[Item]]:
    """``items`` (in readiness order) in DDP's buckets: a bucket closes with the tensor that
    brings it to its cap (``first_cap`` for the first bucket, ``cap`` after)."""
    buckets: list[list[Item]] = []
    current: list[Item] = []
    size = 0
    for item in items:
        current.append(item)
        size += item.nbytes
        if size >= (first_cap if not buckets else cap):
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def partitions(nbytes: int, partition_bytes: int) -> list[int]:
    """``nbytes`` cut into pieces of ``partition_bytes`` (the last one shorter)."""
    full, rest = divmod(nbytes, partition_bytes)
    return [partition_bytes] * full + ([rest] if rest else [])


def merge_groups(items: Sequence[Item], op_time_s: Callable[[int], float]) -> list[list[Item]]:
    """MG-WFBP's merging of ``items`` (in readiness order) on one serial channel.

    The pending group's operation could start at ``start = max(channel free, its last item
    ready)``; the next item joins it when it is ready before ``start + a``: waiting for it
    costs less than the start-up ``a`` it saves, so the communication of everything so far
    ends no later. Otherwise the group is sent (the channel frees at
    ``start + op_time_s(group bytes)``) and the item starts a new group. ``a`` is the cost's
    start-up, ``2 c(P) - c(2P)`` for a tiny probe ``P`` (exact for a linear cost).
    """
    if not items:
        return []
    probe = STARTUP_PROBE_BYTES
    startup_s = max(0.0, 2 * op_time_s(probe) - op_time_s(2 * probe))
    groups: list[list[Item]] = [[items[0]]]
    free_s = 0.0
    start_s = items[0].ready_s
    for item in items[1:]:
        if item.ready_s < start_s + startup_s:
            groups[-1].append(item)
            start_s = max(start_s, item.ready_s)
        else:
            free_s = start_s + op_time_s(sum(i.nbytes for i in groups[-1]))
            groups.append([item])
            start_s = max(free_s, item.ready_s)
    return groups


def serial_finish_s(groups: Sequence[Sequence[Item]], op_time_s: Callable[[int], float]) -> float:
    """When the last of ``groups`` (operations in order on one serial channel, each ready with
    its last item) finishes: the closed form the schedules are compared on."""
    free_s = 0.0
    for group in groups:
        ready = max(i.ready_s for i in group)
        free_s = max(free_s, ready) + op_time_s(sum(i.nbytes for i in group))
    return free_s
