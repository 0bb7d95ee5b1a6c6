"""VGG-16 as tf_cnn_benchmarks defines it (``models/vgg_model.py``, ``Vgg16Model``).

Configuration D of Simonyan & Zisserman (2014): 3x3 convolutions with biases and ReLU in five
stages of 2, 2, 3, 3, 3 layers (64, 128, 256, 512, 512 filters), a 2x2/2 max pool after each,
then affine 4096, dropout, affine 4096, dropout, affine 1000. 224x224x3 input, no batch norm.
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder

VGG16_LAYERS = (2, 2, 3, 3, 3)
VGG_FILTERS = (64, 128, 256, 512, 512)

PUBLISHED_PARAMS = 138_357_544
SOURCE = (
    "Keras applications VGG16 (include_top=True) and torchvision.models.vgg16: "
    "138,357,544 trainable params (conv and fc with biases, 1000 classes)"
)


def build() -> ModelSpec:
    """VGG-16, 224x224x3 input, 1000 classes."""
    b = NetBuilder((224, 224, 3))
    for n_layers, filters in zip(VGG16_LAYERS, VGG_FILTERS, strict=True):
        for _ in range(n_layers):
            b.conv(filters, 3, 3)
        b.pool("max", 2, 2, 2)
    b.flatten()
    b.fc(4096)
    b.dropout()
    b.fc(4096)
    b.dropout()
    b.logits_and_loss()
    return b.build(
        "vgg16", PUBLISHED_PARAMS, SOURCE, "VGG-16 (tf_cnn_benchmarks vgg_model.py), 224x224x3"
    )
