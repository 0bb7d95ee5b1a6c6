"""Inception v4 as tf_cnn_benchmarks defines it (``models/inception_model.py``,
``Inceptionv4Model``).

Szegedy et al. (2016), "Inception-v4, Inception-ResNet and the Impact of Residual Connections",
Figures 3-9, 299x299x3 input: stem (three convolutions, then the three stem modules ``sa``,
``sb``, ``sc``) -> 4 x Inception-A -> Reduction-A (k, l, m, n = 192, 224, 256, 384) ->
7 x Inception-B -> Reduction-B -> 3 x Inception-C -> spatial mean -> dropout -> affine 1000.
Convolutions have batch norm with tf_cnn_benchmarks' default ``scale=False`` (beta only) and no
bias; there is no auxiliary head. Filter tables are transcribed from the source.
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder
from ddlsim.workload.zoo.inception_blocks import LayerSpec, inception_module

TIMM_INCEPTION_V4_PARAMS = 42_679_816
BN_CHANNELS = 31_584  # output channels summed over all 149 convolutions (one gamma each)
PUBLISHED_PARAMS = TIMM_INCEPTION_V4_PARAMS - BN_CHANNELS  # 42,648,232
SOURCE = (
    "timm inception_v4 (port of the TF-slim Inception-v4 checkpoint, 1000 classes, no aux "
    "head): 42,679,816 params, with BatchNorm gamma fixed at 1 but counted; tf_cnn_benchmarks "
    "uses scale=False, so its 31,584 gammas are absent: 42,679,816 - 31,584 = 42,648,232"
)

A_COLS: list[list[LayerSpec]] = [
    [("apool", 3, 3, 1, 1, "SAME"), ("conv", 96, 1, 1)],
    [("conv", 96, 1, 1)],
    [("conv", 64, 1, 1), ("conv", 96, 3, 3)],
    [("conv", 64, 1, 1), ("conv", 96, 3, 3), ("conv", 96, 3, 3)],
]
B_COLS: list[list[LayerSpec]] = [
    [("apool", 3, 3, 1, 1, "SAME"), ("conv", 128, 1, 1)],
    [("conv", 384, 1, 1)],
    [("conv", 192, 1, 1), ("conv", 224, 1, 7), ("conv", 256, 7, 1)],
    [
        ("conv", 192, 1, 1),
        ("conv", 192, 1, 7),
        ("conv", 224, 7, 1),
        ("conv", 224, 1, 7),
        ("conv", 256, 7, 1),
    ],
]
C_COLS: list[list[LayerSpec]] = [
    [("apool", 3, 3, 1, 1, "SAME"), ("conv", 256, 1, 1)],
    [("conv", 256, 1, 1)],
    [("conv", 384, 1, 1), ("conv", 256, 1, 3)],
    [("share",), ("conv", 256, 3, 1)],
    [("conv", 384, 1, 1), ("conv", 448, 1, 3), ("conv", 512, 3, 1), ("conv", 256, 3, 1)],
    [("share",), ("share",), ("share",), ("conv", 256, 1, 3)],
]
SA_COLS: list[list[LayerSpec]] = [
    [("mpool", 3, 3, 2, 2, "VALID")],
    [("conv", 96, 3, 3, 2, 2, "VALID")],
]
SB_COLS: list[list[LayerSpec]] = [
    [("conv", 64, 1, 1), ("conv", 96, 3, 3, 1, 1, "VALID")],
    [
        ("conv", 64, 1, 1),
        ("conv", 64, 7, 1),
        ("conv", 64, 1, 7),
        ("conv", 96, 3, 3, 1, 1, "VALID"),
    ],
]
SC_COLS: list[list[LayerSpec]] = [
    [("conv", 192, 3, 3, 2, 2, "VALID")],
    [("mpool", 3, 3, 2, 2, "VALID")],
]
RA_COLS: list[list[LayerSpec]] = [  # k, l, m, n = 192, 224, 256, 384
    [("mpool", 3, 3, 2, 2, "VALID")],
    [("conv", 384, 3, 3, 2, 2, "VALID")],
    [("conv", 192, 1, 1), ("conv", 224, 3, 3), ("conv", 256, 3, 3, 2, 2, "VALID")],
]
RB_COLS: list[list[LayerSpec]] = [
    [("mpool", 3, 3, 2, 2, "VALID")],
    [("conv", 192, 1, 1), ("conv", 192, 3, 3, 2, 2, "VALID")],
    [
        ("conv", 256, 1, 1),
        ("conv", 256, 1, 7),
        ("conv", 320, 7, 1),
        ("conv", 320, 3, 3, 2, 2, "VALID"),
    ],
]


def build() -> ModelSpec:
    """Inception v4 (tf_cnn_benchmarks), 299x299x3 input, 1000 classes."""
    b = NetBuilder((299, 299, 3), batch_norm=True, bn_scale=False)
    b.conv(32, 3, 3, 2, "VALID")  # 149x149x32
    b.conv(32, 3, 3, 1, "VALID")  # 147x147x32
    b.conv(64, 3, 3)  # 147x147x64
    inception_module(b, "incept_v4_sa", SA_COLS)  # 73x73x160
    inception_module(b, "incept_v4_sb", SB_COLS)  # 71x71x192
    inception_module(b, "incept_v4_sc", SC_COLS)  # 35x35x384
    for _ in range(4):
        inception_module(b, "incept_v4_a", A_COLS)  # 35x35x384
    inception_module(b, "incept_v4_ra", RA_COLS)  # 17x17x1024
    for _ in range(7):
        inception_module(b, "incept_v4_b", B_COLS)  # 17x17x1024
    inception_module(b, "incept_v4_rb", RB_COLS)  # 8x8x1536
    for _ in range(3):
        inception_module(b, "incept_v4_c", C_COLS)  # 8x8x1536
    b.spatial_mean()  # 1536
    b.dropout()
    b.logits_and_loss()
    return b.build(
        "inception4",
        PUBLISHED_PARAMS,
        SOURCE,
        "Inception v4 (tf_cnn_benchmarks inception_model.py), 299x299x3, BN beta only",
    )
