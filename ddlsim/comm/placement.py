"""Where parameter-server variables live, as tf_cnn_benchmarks places them.

- ``greedy`` (``variable_update=parameter_server``): every variable, in creation order, goes to
  the parameter-server device holding the fewest bytes so far -- ``ParamServerDeviceSetter``
  for GPUs as local parameter devices, ``tf.train.replica_device_setter`` with
  ``GreedyLoadBalancingStrategy`` and ``byte_size_load_fn`` across PS tasks; ties go to the
  lowest index.
- ``round-robin`` (``distributed_replicated``, whose global copies are created under a plain
  ``replica_device_setter``): variable i on shard i mod k, whatever its size.

A variable is never split, so a model with one huge tensor (VGG-16's fc6: 411 MB of 553 MB)
loads one shard far more than the others under either rule; many similar tensors (Inception V3,
the ResNets) spread evenly under ``greedy`` but can pile up under ``round-robin`` (every other
variable of a conv + batch-norm pair on the same shard).
"""

from __future__ import annotations

from collections.abc import Sequence

from ddlsim.errors import UnknownNameError

RULES = ("greedy", "round-robin")
#: the rule of each parameter-server method that is not ``greedy``
_RULE_OF_METHOD = {"distributed-replicated": "round-robin"}


def rule_for(method: str) -> str:
    """The placement rule tf_cnn_benchmarks uses for communication method ``method``."""
    return _RULE_OF_METHOD.get(method, "greedy")


def place(tensor_bytes: Sequence[int], n_shards: int, rule: str = "greedy") -> list[int]:
    """Shard index of each variable (sizes in creation order) under ``rule``."""
    if n_shards < 1:
        raise ValueError(f"n_shards must be >= 1, got {n_shards}")
    if rule == "round-robin":
        return [i % n_shards for i in range(len(tensor_bytes))]
    if rule != "greedy":
        raise UnknownNameError("placement rule", rule, RULES)
    load = [0] * n_shards
    out = []
    for nbytes in tensor_bytes:
        shard = min(range(n_shards), key=load.__getitem__)
        load[shard] += nbytes
        out.append(shard)
    return out


def shard_bytes(tensor_bytes: Sequence[int], n_shards: int, rule: str = "greedy") -> list[int]:
    """Total bytes per shard under :func:`place`."""
    return totals(tensor_bytes, place(tensor_bytes, n_shards, rule), n_shards)


def totals(tensor_bytes: Sequence[int], shards: Sequence[int], n_shards: int) -> list[int]:
    """Total bytes per shard of variables placed on ``shards``."""
    out = [0] * n_shards
    for shard, nbytes in zip(shards, tensor_bytes, strict=True):
        out[shard] += nbytes
    return out
