"""Inception v3 as tf_cnn_benchmarks defines it (``models/inception_model.py``,
``Inceptionv3Model`` with its default ``auxiliary=False``).

Szegedy et al. (2015), 299x299x3 input. Every convolution has batch norm and no bias; the
builder's ``batch_norm_config`` is left empty, so tf_cnn_benchmarks' batch norm runs with its
default ``scale=False``: one ``beta`` per channel, no ``gamma`` (as Keras' InceptionV3). The
stem and the module tables below are transcribed from the source; the comments give the output
shape. The last E module uses a max pool in its pooling branch (tf_cnn_benchmarks), Keras
uses an average pool (no parameter difference).
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder
from ddlsim.workload.zoo.inception_blocks import LayerSpec, inception_module

PUBLISHED_PARAMS = 23_817_352
SOURCE = (
    "Keras applications InceptionV3 (include_top=True, 1000 classes): 23,817,352 trainable "
    "params of 23,851,784 total (BN with scale=False, i.e. beta only; the 34,432 non-trainable "
    "are BN moving statistics); no auxiliary head"
)


def _a(pool_proj: int) -> list[list[LayerSpec]]:
    return [
        [("conv", 64, 1, 1)],
        [("conv", 48, 1, 1), ("conv", 64, 5, 5)],
        [("conv", 64, 1, 1), ("conv", 96, 3, 3), ("conv", 96, 3, 3)],
        [("apool", 3, 3, 1, 1, "SAME"), ("conv", pool_proj, 1, 1)],
    ]


B_COLS: list[list[LayerSpec]] = [
    [("conv", 384, 3, 3, 2, 2, "VALID")],
    [("conv", 64, 1, 1), ("conv", 96, 3, 3), ("conv", 96, 3, 3, 2, 2, "VALID")],
    [("mpool", 3, 3, 2, 2, "VALID")],
]


def _c(n: int) -> list[list[LayerSpec]]:
    return [
        [("conv", 192, 1, 1)],
        [("conv", n, 1, 1), ("conv", n, 1, 7), ("conv", 192, 7, 1)],
        [
            ("conv", n, 1, 1),
            ("conv", n, 7, 1),
            ("conv", n, 1, 7),
            ("conv", n, 7, 1),
            ("conv", 192, 1, 7),
        ],
        [("apool", 3, 3, 1, 1, "SAME"), ("conv", 192, 1, 1)],
    ]


D_COLS: list[list[LayerSpec]] = [
    [("conv", 192, 1, 1), ("conv", 320, 3, 3, 2, 2, "VALID")],
    [
        ("conv", 192, 1, 1),
        ("conv", 192, 1, 7),
        ("conv", 192, 7, 1),
        ("conv", 192, 3, 3, 2, 2, "VALID"),
    ],
    [("mpool", 3, 3, 2, 2, "VALID")],
]


def _e(pool: str) -> list[list[LayerSpec]]:
    return [
        [("conv", 320, 1, 1)],
        [("conv", 384, 1, 1), ("conv", 384, 1, 3)],
        [("share",), ("conv", 384, 3, 1)],
        [("conv", 448, 1, 1), ("conv", 384, 3, 3), ("conv", 384, 1, 3)],
        [("share",), ("share",), ("conv", 384, 3, 1)],
        [(pool, 3, 3, 1, 1, "SAME"), ("conv", 192, 1, 1)],
    ]


def build() -> ModelSpec:
    """Inception v3 (tf_cnn_benchmarks), 299x299x3 input, 1000 classes."""
    b = NetBuilder((299, 299, 3), batch_norm=True, bn_scale=False)
    b.conv(32, 3, 3, 2, "VALID")  # 149x149x32
    b.conv(32, 3, 3, 1, "VALID")  # 147x147x32
    b.conv(64, 3, 3, 1, "SAME")  # 147x147x64
    b.pool("max", 3, 3, 2, "VALID")  # 73x73x64
    b.conv(80, 1, 1, 1, "VALID")  # 73x73x80
    b.conv(192, 3, 3, 1, "VALID")  # 71x71x192
    b.pool("max", 3, 3, 2, "VALID")  # 35x35x192
    inception_module(b, "incept_v3_a", _a(32))  # 35x35x256
    inception_module(b, "incept_v3_a", _a(64))  # 35x35x288
    inception_module(b, "incept_v3_a", _a(64))  # 35x35x288
    inception_module(b, "incept_v3_b", B_COLS)  # 17x17x768
    for n in (128, 160, 160, 192):
        inception_module(b, "incept_v3_c", _c(n))  # 17x17x768
    inception_module(b, "incept_v3_d", D_COLS)  # 8x8x1280
    inception_module(b, "incept_v3_e", _e("apool"))  # 8x8x2048
    inception_module(b, "incept_v3_e", _e("mpool"))  # 8x8x2048
    b.pool("avg", 8, 8, 1, "VALID")  # 1x1x2048
    b.flatten()
    b.logits_and_loss()
    return b.build(
        "inception3",
        PUBLISHED_PARAMS,
        SOURCE,
        "Inception v3 (tf_cnn_benchmarks inception_model.py), 299x299x3, BN beta only",
    )
