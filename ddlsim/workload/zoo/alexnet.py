"""AlexNet as tf_cnn_benchmarks defines it (``models/alexnet_model.py``, ``AlexnetModel``).

This is the single-tower "one weird trick" variant (Krizhevsky 2014): no LRN, no grouped
convolutions, convolutions with biases and ReLU, image size ``224 + 3 = 227`` so that the
11x11/4 VALID convolution gives 55x55::

    conv 64 11x11/4 VALID, mpool 3x3/2, conv 192 5x5, mpool 3x3/2,
    conv 384 3x3, conv 384 3x3, conv 256 3x3, mpool 3x3/2  -> 6x6x256
    affine 4096, dropout, affine 4096, dropout, affine 1000

Uncertainty (transcribed from memory of the source, no TensorFlow at hand): the fourth
convolution has 384 filters here, as in the "one weird trick" paper's table; torchvision and the
convnet-benchmarks AlexNet use 256 there and 256 in the fifth (61,100,840 parameters). The
difference is accounted for exactly in the published-parameter source string.
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder

TORCHVISION_ALEXNET_PARAMS = 61_100_840
# conv4 384->384 (was 384->256) and conv5 384->256 (was 256->256), kernels 3x3, with biases
_DELTA = (
    (9 * 384 * 384 + 384) + (9 * 384 * 256 + 256) - (9 * 384 * 256 + 256) - (9 * 256 * 256 + 256)
)
PUBLISHED_PARAMS = TORCHVISION_ALEXNET_PARAMS + _DELTA  # 61,838,248

SOURCE = (
    "torchvision.models.alexnet: 61,100,840 trainable params (conv 64/192/384/256/256, biases, "
    "fc 4096/4096/1000) + 737,408 for tf_cnn_benchmarks' conv4 of 384 filters "
    "(conv4 3x3x384x384+384 and conv5 3x3x384x256+256 replace 3x3x384x256+256 and "
    "3x3x256x256+256) = 61,838,248"
)


def build() -> ModelSpec:
    """AlexNet (tf_cnn_benchmarks), 227x227x3 input, 1000 classes."""
    b = NetBuilder((227, 227, 3))
    b.conv(64, 11, 11, 4, "VALID")
    b.pool("max", 3, 3, 2)
    b.conv(192, 5, 5)
    b.pool("max", 3, 3, 2)
    b.conv(384, 3, 3)
    b.conv(384, 3, 3)
    b.conv(256, 3, 3)
    b.pool("max", 3, 3, 2)
    b.flatten()
    b.fc(4096)
    b.dropout()
    b.fc(4096)
    b.dropout()
    b.logits_and_loss()
    return b.build(
        "alexnet",
        PUBLISHED_PARAMS,
        SOURCE,
        "AlexNet 'one weird trick' variant (tf_cnn_benchmarks alexnet_model.py), 227x227x3",
    )
