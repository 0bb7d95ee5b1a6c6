"""ResNets as tf_cnn_benchmarks defines them (``models/resnet_model.py``).

Stem: conv 64 7x7/2 with batch norm and ReLU (tf's ``SAME_RESNET`` explicit padding gives the
same 112x112 as ``SAME``), max pool 3x3/2 SAME; four stages of bottleneck blocks with
``(depth, bottleneck) = (256, 64), (512, 128), (1024, 256), (2048, 512)``, stride 2 in the first
block of stages 2-4; spatial mean; affine 1000. Convolutions have no bias; the conv batch norm
config is ``{'decay': 0.9, 'epsilon': 1e-5, 'scale': True}`` (gamma and beta). A projection
shortcut (1x1 conv + BN, linear) is used where the depth changes, i.e. in each stage's first
block.

* ``v1``: stride on the block's first 1x1 convolution; ``relu(shortcut + bn(conv3))``.
* ``v1.5``: stride on the 3x3 convolution instead (same parameters, more FLOPs).
* ``v2`` (pre-activation): every block starts with a stand-alone ``batch_norm()`` + ReLU
  outside the block scope; the projection shortcut and the last 1x1 conv have neither batch
  norm nor bias, the sum has no ReLU; a final ``batch_norm()`` + ReLU precedes the spatial mean.
  The stand-alone batch norms use ``ConvNetBuilder.batch_norm``'s default ``scale=False``
  (beta only). Uncertainty: this is transcribed from memory of the source; if those calls
  passed the ``scale=True`` config, v2-50 would gain 15,168 gamma parameters.
"""

from __future__ import annotations

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder

STAGE_DEPTHS = ((256, 64), (512, 128), (1024, 256), (2048, 512))
LAYER_COUNTS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _block_v1(b: NetBuilder, depth: int, bottleneck: int, stride: int, version: str) -> None:
    """Bottleneck block v1 / v1.5 in scope ``resnet_v1{N}`` / ``resnet_v1.5{N}``."""
    block_in = b.top
    with b.scope(b.next_name(f"resnet_{version}")):
        shortcut = block_in
        if depth != block_in.shape[-1]:
            shortcut = b.conv(depth, 1, 1, stride, activation=None, bias=False)
        elif stride != 1:
            shortcut = b.pool("avg", 1, 1, stride)
        b.top = block_in
        s1, s3 = (stride, 1) if version == "v1" else (1, stride)
        b.conv(bottleneck, 1, 1, s1, bias=False)
        b.conv(bottleneck, 3, 3, s3, bias=False)
        b.conv(depth, 1, 1, 1, activation=None, bias=False)
        b.residual_add(shortcut, activation="relu")


def _block_v2(b: NetBuilder, depth: int, bottleneck: int, stride: int) -> None:
    """Pre-activation bottleneck block: ``batchnorm{N}`` + ReLU, then scope ``resnet_v2{N}``."""
    block_in = b.top
    name = b.next_name("resnet_v2")
    preact = b.batch_norm(scale=False, activation="relu")
    with b.scope(name):
        shortcut = block_in
        if depth != block_in.shape[-1]:
            shortcut = b.conv(depth, 1, 1, stride, activation=None, batch_norm=False, bias=False)
        elif stride != 1:
            b.top = block_in
            shortcut = b.pool("avg", 1, 1, stride)
        b.top = preact
        b.conv(bottleneck, 1, 1, stride, bias=False)
        b.conv(bottleneck, 3, 3, 1, bias=False)
        b.conv(depth, 1, 1, 1, activation=None, batch_norm=False, bias=False)
        b.residual_add(shortcut, activation=None)


def build_resnet(
    name: str, depth: int, version: str, published_params: int, source: str
) -> ModelSpec:
    """ResNet-``depth`` (50, 101, 152) of ``version`` ``v1``, ``v1.5`` or ``v2``, 224x224x3."""
    b = NetBuilder((224, 224, 3), batch_norm=True, bn_scale=True)
    b.conv(64, 7, 7, 2, bias=False)  # 112x112x64
    b.pool("max", 3, 3, 2, "SAME")  # 56x56x64
    for (out_depth, bottleneck), n_blocks in zip(STAGE_DEPTHS, LAYER_COUNTS[depth], strict=True):
        for i in range(n_blocks):
            stride = 2 if i == 0 and out_depth != 256 else 1
            if version == "v2":
                _block_v2(b, out_depth, bottleneck, stride)
            else:
                _block_v1(b, out_depth, bottleneck, stride, version)
    if version == "v2":
        b.batch_norm(scale=False, activation="relu")
    b.spatial_mean()  # 2048
    b.logits_and_loss()
    description = f"ResNet-{depth} {version} (tf_cnn_benchmarks resnet_model.py), 224x224x3"
    return b.build(name, published_params, source, description)


_TV = "torchvision.models.resnet{}: {} trainable params (conv without bias, BN gamma+beta, 1000 "
_TV += "classes); v1 and v1.5 differ only in where the stride sits, not in parameters"
_V2 = (
    "Keras applications ResNet{}V2 (1000 classes): {} trainable params, minus {} for the "
    "definitional differences: Keras has conv biases on the stem, projection and last 1x1 "
    "convs (-{}) and gamma in every stand-alone BN (-{}), tf_cnn_benchmarks has BN gamma+beta "
    "on the stem conv (+128) -> {}"
)


def resnet50() -> ModelSpec:
    """ResNet-50 v1."""
    return build_resnet("resnet50", 50, "v1", 25_557_032, _TV.format(50, "25,557,032"))


def resnet50_v1_5() -> ModelSpec:
    """ResNet-50 v1.5 (stride-2 on the 3x3 convolution)."""
    return build_resnet("resnet50_v1.5", 50, "v1.5", 25_557_032, _TV.format(50, "25,557,032"))


def resnet101() -> ModelSpec:
    """ResNet-101 v1."""
    return build_resnet("resnet101", 101, "v1", 44_549_160, _TV.format(101, "44,549,160"))


def resnet152() -> ModelSpec:
    """ResNet-152 v1."""
    return build_resnet("resnet152", 152, "v1", 60_192_808, _TV.format(152, "60,192,808"))


def resnet50_v2() -> ModelSpec:
    """ResNet-50 v2 (pre-activation)."""
    source = _V2.format(50, "25,568,360", "34,048", "19,008", "15,168", "25,534,312")
    return build_resnet("resnet50_v2", 50, "v2", 25_568_360 - 34_048, source)


def resnet101_v2() -> ModelSpec:
    """ResNet-101 v2 (pre-activation)."""
    source = _V2.format(101, "44,577,896", "68,864", "36,416", "32,576", "44,509,032")
    return build_resnet("resnet101_v2", 101, "v2", 44_577_896 - 68_864, source)
