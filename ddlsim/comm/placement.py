"""Where parameter-server variables live: TensorFlow's round-robin placement.

``tf.train.replica_device_setter`` (and tf_cnn_benchmarks' parameter-server modes) assign
variables to PS tasks round-robin in creation order, whatever their size. A model with one huge
tensor (VGG-16's fc6: 411 MB) therefore loads one shard far more than the others.
"""

from __future__ import annotations

from collections.abc import Sequence


def round_robin_shards(n_tensors: int, n_shards: int) -> list[int]:
    """Shard index of each of ``n_tensors`` variables, in creation order."""
    if n_shards < 1:
        raise ValueError(f"n_shards must be >= 1, got {n_shards}")
    return [i % n_shards for i in range(n_tensors)]


def shard_bytes(tensor_bytes: Sequence[int], n_shards: int) -> list[int]:
    """Total bytes per shard under round-robin placement."""
    totals = [0] * n_shards
    for shard, nbytes in zip(
        round_robin_shards(len(tensor_bytes), n_shards), tensor_bytes, strict=True
    ):
        totals[shard] += nbytes
    return totals
