"""GoogLeNet (Inception v1) as tf_cnn_benchmarks defines it (``models/googlenet_model.py``).

Szegedy et al. (2014), Table 1, without the auxiliary classifiers, LRN or dropout (the
tf_cnn_benchmarks definition has none of them): convolutions with biases and ReLU, no batch
norm, 224x224x3 input::

    conv 64 7x7/2, mpool 3x3/2 SAME, conv 64 1x1, conv 192 3x3, mpool 3x3/2 SAME,
    3a, 3b, mpool, 4a..4e, mpool, 5a, 5b, apool 7x7 VALID -> 1024, affine 1000

Each inception module is ``(k, l, m, n, p, q)``: 1x1 ``k``; 1x1 ``l`` -> 3x3 ``m``;
1x1 ``n`` -> 5x5 ``p``; 3x3/1 max pool -> 1x1 ``q``.
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder
from ddlsim.workload.zoo.inception_blocks import inception_module

# (k, l, m, n, p, q) per module; None marks the stride-2 max pools between stages
INCEPTION_V1_TABLE: tuple[tuple[int, int, int, int, int, int] | None, ...] = (
    (64, 96, 128, 16, 32, 32),  # 3a
    (128, 128, 192, 32, 96, 64),  # 3b
    None,
    (192, 96, 208, 16, 48, 64),  # 4a
    (160, 112, 224, 24, 64, 64),  # 4b
    (128, 128, 256, 24, 64, 64),  # 4c
    (112, 144, 288, 32, 64, 64),  # 4d
    (256, 160, 320, 32, 128, 128),  # 4e
    None,
    (256, 160, 320, 32, 128, 128),  # 5a
    (384, 192, 384, 48, 128, 128),  # 5b
)

PUBLISHED_PARAMS = 6_998_552
SOURCE = (
    "BVLC Caffe bvlc_googlenet deploy net without its two auxiliary classifiers (the main "
    "path of Szegedy et al. 2014 Table 1, conv and fc with biases, 1000 classes): 6,998,552 "
    "trainable params; the paper's Table 1 rounds the same layers to about 6.8M"
)


def build() -> ModelSpec:
    """GoogLeNet (tf_cnn_benchmarks), 224x224x3 input, 1000 classes."""
    b = NetBuilder((224, 224, 3))
    b.conv(64, 7, 7, 2)
    b.pool("max", 3, 3, 2, "SAME")
    b.conv(64, 1, 1)
    b.conv(192, 3, 3)
    b.pool("max", 3, 3, 2, "SAME")
    for row in INCEPTION_V1_TABLE:
        if row is None:
            b.pool("max", 3, 3, 2, "SAME")
            continue
        c1x1, r3x3, c3x3, r5x5, c5x5, pool_proj = row
        cols = [
            [("conv", c1x1, 1, 1)],
            [("conv", r3x3, 1, 1), ("conv", c3x3, 3, 3)],
            [("conv", r5x5, 1, 1), ("conv", c5x5, 5, 5)],
            [("mpool", 3, 3, 1, 1, "SAME"), ("conv", pool_proj, 1, 1)],
        ]
        inception_module(b, "incept_v1", cols)
    b.pool("avg", 7, 7, 1, "VALID")
    b.flatten()
    b.logits_and_loss()
    return b.build(
        "googlenet",
        PUBLISHED_PARAMS,
        SOURCE,
        "GoogLeNet / Inception v1 (tf_cnn_benchmarks googlenet_model.py), 224x224x3",
    )
