"""Where parameter-server variables live, as TensorFlow places them for tf_cnn_benchmarks.

TensorFlow's ``tf.train.replica_device_setter`` (``tensorflow/python/training/
device_setter.py``: ``replica_device_setter``, ``_ReplicaDeviceChooser.device_function``)
calls its ``ps_strategy`` once for every variable op (``STANDARD_PS_OPS``: ``VariableV2``,
``VarHandleOp``, ...) in creation order and puts the op on the PS task it returns:

- ``round-robin``: the default strategy (``ps_strategy=None`` -> ``_RoundRobinStrategy``):
  variable i on task i mod k, whatever its size. tf_cnn_benchmarks' ``distributed_replicated``
  creates its global copies under a plain ``replica_device_setter``.
- ``greedy``: ``GreedyLoadBalancingStrategy(num_ps, byte_size_load_fn)``
  (``tensorflow/contrib/training/python/training/device_setter.py``, read from the
  tensorflow-cpu 1.15.0 wheel): ``task = np.argmin(self._ps_loads)`` -- the task holding the
  fewest bytes so far, ties to the lowest index -- then ``self._ps_loads[task] +=
  load_fn(op)``, where ``byte_size_load_fn`` is the variable's elements x dtype size.
  tf_cnn_benchmarks' ``variable_update=parameter_server`` uses it across PS tasks (and
  ``ParamServerDeviceSetter`` does the same least-loaded choice among local parameter
  devices); its ``variable_mgr.py`` is not on PyPI and is cited from memory.

A variable is never split, so a model with one huge tensor (VGG-16's fc6: 411 MB of 553 MB)
loads one shard far more than the others under either rule; many similar tensors (Inception V3,
the ResNets) spread evenly under ``greedy`` but pile up under ``round-robin`` whenever k divides
the period of the layer pattern (a convolution and its batch norm's gamma and beta: every
third variable is a kernel, so with k = 3 or 6 every kernel lands on one or two tasks).
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


def hottest(tensor_bytes: Sequence[int], n_shards: int, rule: str = "greedy") -> int:
    """Bytes on the most loaded shard under :func:`place` (what bounds a PS step)."""
    return max(shard_bytes(tensor_bytes, n_shards, rule), default=0)


def totals(tensor_bytes: Sequence[int], shards: Sequence[int], n_shards: int) -> list[int]:
    """Total bytes per shard of variables placed on ``shards``."""
    out = [0] * n_shards
    for shard, nbytes in zip(shards, tensor_bytes, strict=True):
        out[shard] += nbytes
    return out
