"""MobileNet v1 (1.0, 224) — Howard et al. (2017), Table 1.

Note: tf_cnn_benchmarks' ``mobilenet`` model name maps to a MobileNet *v2* implementation
(``models/tf1_only/mobilenet_v2.py``); this zoo follows the project brief and defines
MobileNet v1 instead, as in Keras applications / TF-slim ``mobilenet_v1``.

conv 32 3x3/2, then 13 depthwise-separable blocks (3x3 depthwise + 1x1 pointwise, each with
batch norm gamma+beta and ReLU, no bias), global average pool 7x7, dropout, affine 1000 (Keras
and slim use a 1x1 convolution with bias for the classifier: same parameters and FLOPs).
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder

# (pointwise output channels, depthwise stride) of the 13 separable blocks
SEPARABLE_BLOCKS = (
    (64, 1),
    (128, 2),
    (128, 1),
    (256, 2),
    (256, 1),
    (512, 2),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (1024, 2),
    (1024, 1),
)

PUBLISHED_PARAMS = 4_231_976
SOURCE = (
    "Keras applications MobileNet (alpha=1.0, 224, include_top=True, 1000 classes): "
    "4,231,976 trainable params of 4,253,864 total (BN gamma+beta trainable, the 21,888 "
    "moving statistics not)"
)


def build() -> ModelSpec:
    """MobileNet v1 1.0-224, 224x224x3 input, 1000 classes."""
    b = NetBuilder((224, 224, 3), batch_norm=True, bn_scale=True)
    b.conv(32, 3, 3, 2, bias=False)  # 112x112x32
    for out_ch, stride in SEPARABLE_BLOCKS:
        b.depthwise_conv(3, 3, stride, bias=False)
        b.conv(out_ch, 1, 1, bias=False)
    b.pool("avg", 7, 7, 1, "VALID")  # 1x1x1024
    b.flatten()
    b.dropout()
    b.logits_and_loss()
    return b.build(
        "mobilenet",
        PUBLISHED_PARAMS,
        SOURCE,
        "MobileNet v1 1.0-224 (Howard et al. 2017; not tf_cnn_benchmarks' v2), 224x224x3",
    )
