"""ResNeXt-101 32x4d and SE-ResNeXt-101 32x4d as NVIDIA DeepLearningExamples defines them.

Source: DeepLearningExamples ``PyTorch/Classification/ConvNets/image_classification/models/
resnet.py`` (``resnext101-32x4d``, ``se-resnext101-32x4d``; transcribed from memory, TensorFlow
and PyTorch are not dependencies of the zoo), which follows Xie et al. 2017 (ResNeXt) and Hu et
al. 2018 (SENet):

* stem: conv 64 7x7/2 + batch norm + ReLU, max pool 3x3/2 -> 56x56x64;
* four stages of 3, 4, 23, 3 bottleneck blocks; stage ``i`` has group-convolution width
  ``128·2^i`` (32 groups of ``4·2^i`` channels) and output depth ``256·2^i``. A block is
  conv 1x1 -> width, grouped conv 3x3 (32 groups, the stage's stride 2 here, as ResNet v1.5),
  conv 1x1 -> depth (no ReLU), each with batch norm (gamma and beta, no conv bias); a
  projection shortcut (1x1 conv with the stride + batch norm) in each stage's first block;
  ``relu(shortcut + main)``;
* SE-ResNeXt adds squeeze-excitation on the main branch before the sum (pool, affine
  ``depth -> depth/16`` + ReLU, affine back + sigmoid, channel scaling; affine layers with
  biases). DeepLearningExamples fuses the scaling with the residual sum (``addcmul``); here
  they are two layers (one more pass over the block output per block);
* spatial mean, affine 2048 -> 1000, softmax cross-entropy.

Tensor order follows the reference modules' registration order (conv1, conv2, conv3, then the
projection shortcut, then squeeze-excitation), which PyTorch DDP uses (reversed) to fill its
gradient buckets; the projection is therefore built after the main branch.

Uncertainty: the squeeze width. SENet and its reference implementations use ``depth // 16``
(the published 48,955,416 parameters need it); the PyTorch DeepLearningExamples code passes
``se_squeeze=16``, which, if it is an absolute width and not a ratio, would give 16 units in
every block (3,704,288 parameters fewer). The ratio is used here, as in the TensorFlow
DeepLearningExamples version and the paper.
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder

CARDINALITY = 32
STAGES = ((128, 256), (256, 512), (512, 1024), (1024, 2048))  # (grouped width, output depth)
LAYER_COUNTS = (3, 4, 23, 3)
SE_REDUCTION = 16

PUBLISHED_PARAMS = {"resnext101-32x4d": 44_177_704, "se-resnext101-32x4d": 48_955_416}
_SOURCES = {
    "resnext101-32x4d": (
        "timm resnext101_32x4d (1000 classes): 44,177,704 trainable params (the ResNeXt paper, "
        "Xie et al. 2017, rounds to 44.2M); conv without bias, BN gamma+beta"
    ),
    "se-resnext101-32x4d": (
        "timm seresnext101_32x4d / Cadene pretrainedmodels se_resnext101_32x4d (1000 classes): "
        "48,955,416 trainable params; SE reduction 16 with biases"
    ),
}


def _block(b: NetBuilder, width: int, depth: int, stride: int, se: bool) -> None:
    """One bottleneck block in scope ``resnext{N}``."""
    block_in = b.top
    with b.scope(b.next_name("resnext")):
        b.conv(width, 1, 1, bias=False)
        b.conv(width, 3, 3, stride, groups=CARDINALITY, bias=False)
        main = b.conv(depth, 1, 1, activation=None, bias=False)
        shortcut = block_in
        if depth != block_in.shape[-1] or stride != 1:
            b.top = block_in
            shortcut = b.conv(depth, 1, 1, stride, activation=None, bias=False)
            b.top = main
        if se:
            b.squeeze_excitation(depth // SE_REDUCTION, activation="relu")
        b.residual_add(shortcut, activation="relu")


def build_resnext(name: str, se: bool) -> ModelSpec:
    """ResNeXt-101 32x4d, with squeeze-excitation when ``se``, 224x224x3."""
    b = NetBuilder((224, 224, 3), batch_norm=True, bn_scale=True)
    b.conv(64, 7, 7, 2, bias=False)  # 112x112x64
    b.pool("max", 3, 3, 2, "SAME")  # 56x56x64
    for i, ((width, depth), n_blocks) in enumerate(zip(STAGES, LAYER_COUNTS, strict=True)):
        for j in range(n_blocks):
            _block(b, width, depth, 2 if i > 0 and j == 0 else 1, se)
    b.spatial_mean()  # 2048
    b.logits_and_loss()
    what = "SE-ResNeXt-101 32x4d" if se else "ResNeXt-101 32x4d"
    description = f"{what} (NVIDIA DeepLearningExamples), 224x224x3"
    return b.build(name, PUBLISHED_PARAMS[name], _SOURCES[name], description)


def resnext101_32x4d() -> ModelSpec:
    """ResNeXt-101 32x4d."""
    return build_resnext("resnext101-32x4d", se=False)


def se_resnext101_32x4d() -> ModelSpec:
    """SE-ResNeXt-101 32x4d."""
    return build_resnext("se-resnext101-32x4d", se=True)
