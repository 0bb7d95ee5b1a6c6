"""Tests of the model zoo: published parameter counts, an independent closed-form count per
model, structure (names, shapes, kinds, tensors), FLOPs per image, and builder properties."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.workload.layers import Layer, LayerKind, ModelSpec
from ddlsim.workload.zoo import (
    MODEL_NAMES,
    alexnet,
    get_model,
    inception4,
)
from ddlsim.workload.zoo.builder import NetBuilder, conv_out_size
from ddlsim.workload.zoo.inception_blocks import inception_module

EXPECTED_NAMES = (
    "alexnet",
    "googlenet",
    "inception3",
    "inception4",
    "resnet50",
    "resnet50_v1.5",
    "resnet50_v2",
    "resnet101",
    "resnet101_v2",
    "resnet152",
    "vgg16",
    "mobilenet",
    "resnext101-32x4d",
    "se-resnext101-32x4d",
    "efficientnet-b0",
    "efficientnet-b4",
    "efficientnet-widese-b0",
    "efficientnet-widese-b4",
    "efficientnetv2-s",
)

# (a) published figures, written out again here so a change in a model module cannot move both
# sides. Adjusted ones are checked arithmetically in test_published_adjustments.
PUBLISHED = {
    "alexnet": 61_100_840 + 737_408,  # torchvision alexnet + tf's conv4 of 384 filters
    "googlenet": 6_998_552,  # BVLC GoogLeNet without aux classifiers
    "inception3": 23_817_352,  # Keras InceptionV3 trainable
    "inception4": 42_679_816 - 31_584,  # timm inception_v4 minus BN gammas
    "resnet50": 25_557_032,  # torchvision resnet50
    "resnet50_v1.5": 25_557_032,
    "resnet50_v2": 25_568_360 - 34_048,  # Keras ResNet50V2 trainable minus differences
    "resnet101": 44_549_160,
    "resnet101_v2": 44_577_896 - 68_864,
    "resnet152": 60_192_808,
    "vgg16": 138_357_544,
    "mobilenet": 4_231_976,  # Keras MobileNet trainable
    "resnext101-32x4d": 44_177_704,  # timm resnext101_32x4d
    "se-resnext101-32x4d": 48_955_416,  # timm seresnext101_32x4d
    "efficientnet-b0": 5_288_548,  # timm efficientnet_b0, Keras EfficientNetB0 trainable
    "efficientnet-b4": 19_341_616,  # timm efficientnet_b4, Keras EfficientNetB4 trainable
    "efficientnet-widese-b0": 5_288_548 + 3_135_300,  # no published count: + wider SE
    "efficientnet-widese-b4": 19_341_616 + 15_585_630,
    "efficientnetv2-s": 21_458_488,  # timm efficientnetv2_s, Keras EfficientNetV2S trainable
}


def conv_p(k_h: int, k_w: int, c_in: int, c_out: int, *, bias: bool = False, bn: int = 0) -> int:
    """Parameters of a conv: kernel, bias, and ``bn`` per-channel BN params (1 beta, 2 +gamma)."""
    return k_h * k_w * c_in * c_out + (c_out if bias else 0) + bn * c_out


def fc_p(n_in: int, n_out: int) -> int:
    """Parameters of a dense layer with bias."""
    return n_in * n_out + n_out


# ---------------------------------------------------------------- (b) independent counts
def count_alexnet() -> int:
    table = [(11, 3, 64), (5, 64, 192), (3, 192, 384), (3, 384, 384), (3, 384, 256)]
    convs = sum(conv_p(k, k, i, o, bias=True) for k, i, o in table)
    return convs + fc_p(256 * 6 * 6, 4096) + fc_p(4096, 4096) + fc_p(4096, 1000)


def count_vgg16() -> int:
    chans = [3, 64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    convs = sum(conv_p(3, 3, i, o, bias=True) for i, o in itertools.pairwise(chans))
    return convs + fc_p(512 * 7 * 7, 4096) + fc_p(4096, 4096) + fc_p(4096, 1000)


def count_googlenet() -> int:
    stem = conv_p(7, 7, 3, 64, bias=True) + conv_p(1, 1, 64, 64, bias=True)
    total, c = stem + conv_p(3, 3, 64, 192, bias=True), 192
    table = [
        (64, 96, 128, 16, 32, 32),
        (128, 128, 192, 32, 96, 64),
        (192, 96, 208, 16, 48, 64),
        (160, 112, 224, 24, 64, 64),
        (128, 128, 256, 24, 64, 64),
        (112, 144, 288, 32, 64, 64),
        (256, 160, 320, 32, 128, 128),
        (256, 160, 320, 32, 128, 128),
        (384, 192, 384, 48, 128, 128),
    ]
    for b1, r3, b3, r5, b5, pp in table:
        total += c * b1 + b1 + c * r3 + r3 + 9 * r3 * b3 + b3 + c * r5 + r5 + 25 * r5 * b5 + b5
        total += c * pp + pp
        c = b1 + b3 + b5 + pp
    assert c == 1024
    return total + fc_p(1024, 1000)


def count_inception3() -> int:
    def cv(k_h: int, k_w: int, i: int, o: int) -> int:
        return conv_p(k_h, k_w, i, o, bn=1)

    total = cv(3, 3, 3, 32) + cv(3, 3, 32, 32) + cv(3, 3, 32, 64) + cv(1, 1, 64, 80)
    total += cv(3, 3, 80, 192)
    c = 192
    for pp in (32, 64, 64):  # A modules
        total += cv(1, 1, c, 64) + cv(1, 1, c, 48) + cv(5, 5, 48, 64)
        total += cv(1, 1, c, 64) + cv(3, 3, 64, 96) + cv(3, 3, 96, 96) + cv(1, 1, c, pp)
        c = 64 + 64 + 96 + pp
    total += cv(3, 3, c, 384) + cv(1, 1, c, 64) + cv(3, 3, 64, 96) + cv(3, 3, 96, 96)  # B
    c = 384 + 96 + c
    for n in (128, 160, 160, 192):  # C modules
        total += cv(1, 1, c, 192) + cv(1, 1, c, n) + cv(1, 7, n, n) + cv(7, 1, n, 192)
        total += cv(1, 1, c, n) + 3 * cv(7, 1, n, n) + cv(1, 7, n, 192) + cv(1, 1, c, 192)
    total += cv(1, 1, c, 192) + cv(3, 3, 192, 320)  # D
    total += cv(1, 1, c, 192) + 2 * cv(1, 7, 192, 192) + cv(3, 3, 192, 192)
    c = 320 + 192 + c
    for _ in range(2):  # E modules
        total += cv(1, 1, c, 320) + cv(1, 1, c, 384) + 2 * cv(1, 3, 384, 384)
        total += cv(1, 1, c, 448) + cv(3, 3, 448, 384) + 2 * cv(1, 3, 384, 384)
        total += cv(1, 1, c, 192)
        c = 320 + 768 + 768 + 192
    assert c == 2048
    return total + fc_p(2048, 1000)


def count_inception4() -> int:
    def cv(k_h: int, k_w: int, i: int, o: int) -> int:
        return conv_p(k_h, k_w, i, o, bn=1)

    total = cv(3, 3, 3, 32) + cv(3, 3, 32, 32) + cv(3, 3, 32, 64) + cv(3, 3, 64, 96)  # ..sa
    total += cv(1, 1, 160, 64) + cv(3, 3, 64, 96)  # sb
    total += cv(1, 1, 160, 64) + 2 * cv(7, 1, 64, 64) + cv(3, 3, 64, 96)
    total += cv(3, 3, 192, 192)  # sc -> 384
    block_a = cv(1, 1, 384, 96) * 2 + 2 * (cv(1, 1, 384, 64) + cv(3, 3, 64, 96))
    block_a += cv(3, 3, 96, 96)
    total += 4 * block_a
    total += cv(3, 3, 384, 384) + cv(1, 1, 384, 192) + cv(3, 3, 192, 224) + cv(3, 3, 224, 256)
    block_b = cv(1, 1, 1024, 128) + cv(1, 1, 1024, 384)
    block_b += cv(1, 1, 1024, 192) + cv(1, 7, 192, 224) + cv(7, 1, 224, 256)
    block_b += cv(1, 1, 1024, 192) + cv(1, 7, 192, 192) + cv(7, 1, 192, 224)
    block_b += cv(1, 7, 224, 224) + cv(7, 1, 224, 256)
    total += 7 * block_b
    total += cv(1, 1, 1024, 192) + cv(3, 3, 192, 192)  # reduction B
    total += cv(1, 1, 1024, 256) + cv(1, 7, 256, 256) + cv(7, 1, 256, 320) + cv(3, 3, 320, 320)
    block_c = 2 * cv(1, 1, 1536, 256) + cv(1, 1, 1536, 384) + 2 * cv(1, 3, 384, 256)
    block_c += cv(1, 1, 1536, 384) + cv(1, 3, 384, 448) + cv(3, 1, 448, 512)
    block_c += 2 * cv(3, 1, 512, 256)
    return total + 3 * block_c + fc_p(1536, 1000)


RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
RESNET_STAGES = ((256, 64), (512, 128), (1024, 256), (2048, 512))


def count_resnet(depth: int, version: str) -> int:
    v2 = version == "v2"
    total, c = conv_p(7, 7, 3, 64, bn=2), 64
    last_bn = 0 if v2 else 2  # v2: projection and last 1x1 conv have no BN
    for (d, b), n in zip(RESNET_STAGES, RESNET_BLOCKS[depth], strict=True):
        for i in range(n):
            total += c if v2 else 0  # pre-activation BN, beta only
            total += conv_p(1, 1, c, d, bn=last_bn) if i == 0 else 0
            total += conv_p(1, 1, c, b, bn=2) + conv_p(3, 3, b, b, bn=2)
            total += conv_p(1, 1, b, d, bn=last_bn)
            c = d
    return total + (2048 if v2 else 0) + fc_p(2048, 1000)


def count_mobilenet() -> int:
    total, c = conv_p(3, 3, 3, 32, bn=2), 32
    for out in (64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024):
        total += 9 * c + 2 * c + conv_p(1, 1, c, out, bn=2)
        c = out
    return total + fc_p(1024, 1000)


def count_resnext(se: bool) -> int:
    total, c = conv_p(7, 7, 3, 64, bn=2), 64
    for (d, bottleneck), n in zip(RESNET_STAGES, RESNET_BLOCKS[101], strict=True):
        w = 2 * bottleneck  # 32 groups of 4, 8, 16, 32 channels
        for i in range(n):
            total += conv_p(1, 1, c, w, bn=2) + conv_p(3, 3, w // 32, w, bn=2)
            total += conv_p(1, 1, w, d, bn=2) + (conv_p(1, 1, c, d, bn=2) if i == 0 else 0)
            total += (fc_p(d, d // 16) + fc_p(d // 16, d)) if se else 0
            c = d
    return total + fc_p(2048, 1000)


EFFNET_B0 = ((1, 3, 16, 1), (6, 3, 24, 2), (6, 5, 40, 2), (6, 3, 80, 3), (6, 5, 112, 3),
             (6, 5, 192, 4), (6, 3, 320, 1))  # (expand, kernel, channels, repeats)  # fmt: skip


def count_efficientnet(width: float, depth: float, wide_se: bool = False) -> int:
    def r(ch: int) -> int:  # round_filters of the reference
        exact = ch * width
        rounded = max(8, int(exact + 4) // 8 * 8)
        return rounded + 8 if rounded < 0.9 * exact else rounded

    c = r(32)
    total = conv_p(3, 3, 3, c, bn=2)
    for e, k, out, n in EFFNET_B0:
        for _ in range(math.ceil(n * depth)):
            h, sq = c * e, int((c * e if wide_se else c) * 0.25)
            total += conv_p(1, 1, c, h, bn=2) if e != 1 else 0
            total += conv_p(k, k, 1, h, bn=2) + fc_p(h, sq) + fc_p(sq, h)
            total += conv_p(1, 1, h, r(out), bn=2)
            c = r(out)
    return total + conv_p(1, 1, c, r(1280), bn=2) + fc_p(r(1280), 1000)


def count_efficientnetv2_s() -> int:
    stages = ((True, 1, 24, 2), (True, 4, 48, 4), (True, 4, 64, 4), (False, 4, 128, 6),
              (False, 6, 160, 9), (False, 6, 256, 15))  # all 3x3  # fmt: skip
    total, c = conv_p(3, 3, 3, 24, bn=2), 24
    for fused, e, out, n in stages:
        for _ in range(n):
            h, sq = c * e, c // 4
            if fused and e == 1:
                total += conv_p(3, 3, c, out, bn=2)
            elif fused:
                total += conv_p(3, 3, c, h, bn=2) + conv_p(1, 1, h, out, bn=2)
            else:
                total += conv_p(1, 1, c, h, bn=2) + conv_p(3, 3, 1, h, bn=2)
                total += fc_p(h, sq) + fc_p(sq, h) + conv_p(1, 1, h, out, bn=2)
            c = out
    return total + conv_p(1, 1, c, 1280, bn=2) + fc_p(1280, 1000)


INDEPENDENT = {
    "alexnet": count_alexnet,
    "googlenet": count_googlenet,
    "inception3": count_inception3,
    "inception4": count_inception4,
    "resnet50": lambda: count_resnet(50, "v1"),
    "resnet50_v1.5": lambda: count_resnet(50, "v1.5"),
    "resnet50_v2": lambda: count_resnet(50, "v2"),
    "resnet101": lambda: count_resnet(101, "v1"),
    "resnet101_v2": lambda: count_resnet(101, "v2"),
    "resnet152": lambda: count_resnet(152, "v1"),
    "vgg16": count_vgg16,
    "mobilenet": count_mobilenet,
    "resnext101-32x4d": lambda: count_resnext(se=False),
    "se-resnext101-32x4d": lambda: count_resnext(se=True),
    "efficientnet-b0": lambda: count_efficientnet(1.0, 1.0),
    "efficientnet-b4": lambda: count_efficientnet(1.4, 1.8),
    "efficientnet-widese-b0": lambda: count_efficientnet(1.0, 1.0, wide_se=True),
    "efficientnet-widese-b4": lambda: count_efficientnet(1.4, 1.8, wide_se=True),
    "efficientnetv2-s": count_efficientnetv2_s,
}


@pytest.fixture(scope="module", params=EXPECTED_NAMES)
def model(request: pytest.FixtureRequest) -> ModelSpec:
    return get_model(request.param)


WEIGHTED = (LayerKind.CONV, LayerKind.GROUPED_CONV, LayerKind.DEPTHWISE_CONV, LayerKind.FC)


def matmul_flops(layer: Layer) -> int:
    """Forward multiply-add FLOPs of a weighted layer from its kernel shape and output size
    (squeeze-excitation: its two matrices, applied once per image)."""
    if layer.kind is LayerKind.SQUEEZE_EXCITE:
        return 2 * (layer.tensors[0].n_params + layer.tensors[2].n_params)
    if layer.kind not in WEIGHTED:
        return 0
    spatial = math.prod(layer.output_shape[:2]) if len(layer.output_shape) == 3 else 1
    return 2 * math.prod(layer.tensors[0].shape) * spatial


def test_names_and_lookup() -> None:
    assert MODEL_NAMES == EXPECTED_NAMES
    assert get_model("resnet50") is get_model("resnet50")
    with pytest.raises(UnknownNameError, match="resnet51") as info:
        get_model("resnet51")
    assert isinstance(info.value, ConfigError)
    assert "vgg16" in str(info.value)


# ---------------------------------------------------------------- (a) and (b)
def test_published_params(model: ModelSpec) -> None:
    assert model.published_params == PUBLISHED[model.name]
    assert model.n_params == model.published_params
    assert f"{model.published_params:,}" in model.published_params_source


def test_independent_count(model: ModelSpec) -> None:
    assert model.n_params == INDEPENDENT[model.name]()


def test_published_adjustments() -> None:
    """The itemised differences between a published model and the tf_cnn_benchmarks one."""
    # AlexNet: conv4/conv5 of torchvision (384->256, 256->256) become 384->384, 384->256
    torch_c45 = conv_p(3, 3, 384, 256, bias=True) + conv_p(3, 3, 256, 256, bias=True)
    tf_c45 = conv_p(3, 3, 384, 384, bias=True) + conv_p(3, 3, 384, 256, bias=True)
    assert tf_c45 - torch_c45 == 737_408 == alexnet.PUBLISHED_PARAMS - 61_100_840
    # Inception v4: one gamma per convolution output channel is absent with scale=False
    m4 = get_model("inception4")
    convs = [la for la in m4.layers if la.kind is LayerKind.CONV]
    assert sum(la.output_shape[-1] for la in convs) == 31_584 == inception4.BN_CHANNELS
    # ResNet v2: Keras has biases on stem/projection/last 1x1 and gammas in stand-alone BNs
    for depth, keras, delta in ((50, 25_568_360, 34_048), (101, 44_577_896, 68_864)):
        stages = list(zip(RESNET_STAGES, RESNET_BLOCKS[depth], strict=True))
        biases = 64 + sum(d for (d, _), _ in stages) + sum(d * n for (d, _), n in stages)
        block_inputs = [64, *[d for (d, _), n in stages for _ in range(n)]][:-1]
        gammas = sum(block_inputs) + 2048
        assert biases + gammas - 128 == delta
        assert keras - delta == count_resnet(depth, "v2")


# ---------------------------------------------------------------- (c) structure
def test_unique_names(model: ModelSpec) -> None:
    names = [la.name for la in model.layers]
    assert len(set(names)) == len(names)
    tensor_names = [t.name for t in model.tensors]
    assert len(set(tensor_names)) == len(tensor_names)


def test_fp16_is_half_fp32(model: ModelSpec) -> None:
    assert model.grad_bytes("fp32") == 4 * model.n_params
    assert 2 * model.grad_bytes("fp16") == model.grad_bytes("fp32")


def test_head_and_kinds(model: ModelSpec) -> None:
    assert model.layers[0].kind is LayerKind.CONV
    assert model.layers[-1].kind is LayerKind.LOSS
    logits = model.layers[-2]
    assert logits.kind is LayerKind.FC and logits.output_shape == (1000,)
    assert [t.shape[1:] for t in logits.tensors] == [(1000,), ()]
    for la in model.layers:
        assert la.output_elems == math.prod(la.output_shape)
        assert bool(la.tensors) == (
            la.kind in (*WEIGHTED, LayerKind.BATCHNORM, LayerKind.SQUEEZE_EXCITE)
        )


def test_backward_flops(model: ModelSpec) -> None:
    """Weighted layers: backward = forward + matmul (input grad), except the first (= forward)."""
    first, *rest = model.layers
    assert first.bwd_flops == first.fwd_flops
    for la in rest:
        assert la.bwd_flops == la.fwd_flops + matmul_flops(la)


# conv layers, gradient tensors (from the architecture), layers, last feature map
STRUCTURE = {
    "alexnet": (5, 8 * 2, 14, (6, 6, 256)),
    "googlenet": (57, 57 * 2 + 2, 82, (7, 7, 1024)),
    "inception3": (94, 94 * 2 + 2, 121, (8, 8, 2048)),
    "inception4": (149, 149 * 2 + 2, 190, (8, 8, 1536)),
    "resnet50": (53, 53 * 3 + 2, 73, (7, 7, 2048)),
    "resnet50_v1.5": (53, 53 * 3 + 2, 73, (7, 7, 2048)),
    "resnet50_v2": (53, 3 + 16 * 8 + 4 + 1 + 2, 90, (7, 7, 2048)),
    "resnet101": (104, 104 * 3 + 2, 141, (7, 7, 2048)),
    "resnet101_v2": (104, 3 + 33 * 8 + 4 + 1 + 2, 175, (7, 7, 2048)),
    "resnet152": (155, 155 * 3 + 2, 209, (7, 7, 2048)),
    "vgg16": (13, 16 * 2, 24, (7, 7, 512)),
    "mobilenet": (14, 27 * 3 + 2, 31, (7, 7, 1024)),
    # + 33 grouped convs; (stem, 33 blocks x (1x1, 1x1), 4 projections) x 3 tensors + fc
    "resnext101-32x4d": (71, 104 * 3 + 2, 2 + 33 * 4 + 4 + 3, (7, 7, 2048)),
    "se-resnext101-32x4d": (71, 104 * 3 + 2 + 33 * 4, 2 + 33 * 5 + 4 + 3, (7, 7, 2048)),
    # stem, 15 expansions, 16 projections, head; 16 depthwise, 16 SE; 9 residual adds
    "efficientnet-b0": (33, 49 * 3 + 16 * 4 + 2, 33 + 32 + 9 + 4, (7, 7, 1280)),
    "efficientnet-widese-b0": (33, 49 * 3 + 16 * 4 + 2, 33 + 32 + 9 + 4, (7, 7, 1280)),
    # 32 blocks (the first two without expansion), 25 residual adds, 380 -> 12
    "efficientnet-b4": (64, 96 * 3 + 32 * 4 + 2, 64 + 64 + 25 + 4, (12, 12, 1792)),
    "efficientnet-widese-b4": (64, 96 * 3 + 32 * 4 + 2, 64 + 64 + 25 + 4, (12, 12, 1792)),
    # stem, 2 + 2x8 fused convs, 30 MBConv x 2 convs, head; 35 adds; 384 -> 12
    "efficientnetv2-s": (80, 110 * 3 + 30 * 4 + 2, 80 + 60 + 35 + 4, (12, 12, 1280)),
}


def test_structure(model: ModelSpec) -> None:
    n_conv, n_tensors, n_layers, feature_map = STRUCTURE[model.name]
    assert sum(la.kind is LayerKind.CONV for la in model.layers) == n_conv
    assert len(model.tensors) == n_tensors
    assert len(model.layers) == n_layers
    last_3d = [la.output_shape for la in model.layers if len(la.output_shape) == 3]
    assert feature_map in last_3d[-3:]


def test_resnet_stride_placement() -> None:
    """v1 strides the first 1x1 conv of a stage, v1.5 the 3x3; parameters equal, FLOPs not."""
    v1, v15 = get_model("resnet50"), get_model("resnet50_v1.5")
    first_c1 = [la for la in v1.layers if la.name.startswith("resnet_v13/")]
    first_c15 = [la for la in v15.layers if la.name.startswith("resnet_v1.53/")]
    # block 3 = first block of stage 2: projection, 1x1, 3x3, 1x1, add
    shapes_v1 = [(28, 28, 512), (28, 28, 128), (28, 28, 128), (28, 28, 512), (28, 28, 512)]
    shapes_v15 = [(28, 28, 512), (56, 56, 128), (28, 28, 128), (28, 28, 512), (28, 28, 512)]
    assert [la.output_shape for la in first_c1] == shapes_v1
    assert [la.output_shape for la in first_c15] == shapes_v15
    assert v1.n_params == v15.n_params and v15.fwd_flops() > v1.fwd_flops()
    kinds = {la.kind for la in get_model("resnet50_v2").layers}
    assert LayerKind.BATCHNORM in kinds and LayerKind.ADD in kinds


def test_tensor_names_follow_tf_scopes() -> None:
    names = {t.name for t in get_model("resnet50").tensors}
    assert {"conv0/conv2d/kernel", "conv0/batchnorm0/gamma", "conv0/batchnorm0/beta"} <= names
    assert "resnet_v10/conv1/conv2d/kernel" in names
    assert {"affine0/weights", "affine0/biases"} <= names
    assert "conv0/biases" in {t.name for t in get_model("vgg16").tensors}
    inc = {la.name for la in get_model("inception3").layers}
    assert "incept_v3_a0/concat0" in inc and "incept_v3_e1/concat10" in inc


# forward GFLOP per image: total (all layers) and matmul-only (conv/fc multiply-adds x 2)
GFLOP_RANGES = {
    # name: (total lo, total hi, matmul lo, matmul hi)
    "alexnet": (1.65, 1.70, 1.67, 1.68),  # torchvision 0.71 GMAC + conv4 384 filters
    "googlenet": (3.0, 3.2, 3.0, 3.2),  # paper: 1.5 G multiply-adds
    "inception3": (11.4, 11.6, 11.4, 11.5),  # 5.71 GMAC (torchvision / Keras)
    "inception4": (24.5, 24.8, 24.4, 24.6),  # timm: 12.28 GMAC
    "resnet50": (7.7, 8.2, 7.7, 7.75),  # paper: 3.8 G multiply-adds
    "resnet50_v1.5": (8.2, 8.4, 8.17, 8.19),  # torchvision resnet50: 4.09 GMAC
    "resnet50_v2": (7.7, 8.2, 7.7, 7.75),
    "resnet101": (15.1, 15.4, 15.1, 15.2),  # paper: 7.6 G
    "resnet101_v2": (15.1, 15.4, 15.1, 15.2),
    "resnet152": (22.6, 22.9, 22.5, 22.6),  # paper: 11.3 G
    "vgg16": (30.9, 31.0, 30.9, 31.0),  # 15.47 GMAC
    "mobilenet": (1.14, 1.19, 1.13, 1.15),  # paper: 569 M multiply-adds
    # exact multiply-add counts against the references in test_zoo_modern.py
    "resnext101-32x4d": (16.0, 16.2, 15.93, 15.95),  # SENet Table 2: 7.99 G multiply-adds
    "se-resnext101-32x4d": (16.0, 16.2, 15.94, 15.96),  # SENet Table 2: 8.00 G
    "efficientnet-b0": (0.80, 0.88, 0.77, 0.78),  # paper: 0.39 G multiply-adds
    "efficientnet-b4": (9.2, 9.4, 8.78, 8.80),  # paper: 4.2 G (timm's count at 380: 4.39 G)
    "efficientnet-widese-b0": (0.80, 0.88, 0.77, 0.78),
    "efficientnet-widese-b4": (9.2, 9.4, 8.81, 8.83),
    "efficientnetv2-s": (16.9, 17.3, 16.72, 16.74),  # paper: 8.8 G at 384 (timm: 8.37 G)
}


def test_forward_gflops(model: ModelSpec) -> None:
    lo, hi, mm_lo, mm_hi = GFLOP_RANGES[model.name]
    assert lo <= model.fwd_flops() / 1e9 <= hi
    assert mm_lo <= sum(matmul_flops(la) for la in model.layers) / 1e9 <= mm_hi
    assert model.fwd_flops(batch=32) == pytest.approx(32 * model.fwd_flops())


def test_exact_vgg16_matmul_flops() -> None:
    sizes = [224] * 2 + [112] * 2 + [56] * 3 + [28] * 3 + [14] * 3
    chans = [3, 64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    macs = sum(
        9 * i * o * s * s for (i, o), s in zip(itertools.pairwise(chans), sizes, strict=True)
    )
    macs += 25088 * 4096 + 4096 * 4096 + 4096 * 1000
    assert sum(matmul_flops(la) for la in get_model("vgg16").layers) == 2 * macs


def test_sequential_models_chain_activations() -> None:
    for name in ("alexnet", "vgg16", "mobilenet"):
        layers = get_model(name).layers
        for prev, la in itertools.pairwise(layers):
            assert la.input_elems == prev.output_elems, (name, la.name)


# ---------------------------------------------------------------- builder properties
@given(
    n=st.integers(1, 300),
    k=st.integers(1, 11),
    s=st.integers(1, 5),
    pad=st.sampled_from(["SAME", "VALID"]),
)
def test_conv_out_size_matches_window_enumeration(n: int, k: int, s: int, pad: str) -> None:
    if pad == "VALID" and k > n:
        with pytest.raises(ValueError):
            conv_out_size(n, k, s, pad)
        return
    positions = range(0, n, s) if pad == "SAME" else range(0, n - k + 1, s)
    assert conv_out_size(n, k, s, pad) == len(positions)


@settings(max_examples=60)
@given(
    h=st.integers(8, 64),
    w=st.integers(8, 64),
    c_in=st.integers(1, 64),
    c_out=st.integers(1, 64),
    k=st.sampled_from([1, 3, 5, 7]),
    s=st.integers(1, 3),
    pad=st.sampled_from(["SAME", "VALID"]),
    bn=st.booleans(),
    scale=st.booleans(),
)
def test_builder_conv(
    h: int, w: int, c_in: int, c_out: int, k: int, s: int, pad: str, bn: bool, scale: bool
) -> None:
    b = NetBuilder((h, w, c_in), batch_norm=bn, bn_scale=scale)
    b.conv(c_out, k, k, s, pad)
    b.conv(c_out, k, k, 1, "SAME")
    first, second = b.build("t", 0, "", "").layers
    h_out = len(range(0, h, s)) if pad == "SAME" else len(range(0, h - k + 1, s))
    w_out = len(range(0, w, s)) if pad == "SAME" else len(range(0, w - k + 1, s))
    assert first.output_shape == (h_out, w_out, c_out)
    assert first.input_elems == h * w * c_in
    per_channel = (1 + scale) if bn else 1
    assert first.n_params == k * k * c_in * c_out + per_channel * c_out
    macs = k * k * c_in * h_out * w_out * c_out
    assert first.fwd_flops >= 2 * macs
    assert first.bwd_flops == first.fwd_flops  # fed by the image: no input gradient
    assert second.bwd_flops - second.fwd_flops == 2 * k * k * c_out * h_out * w_out * c_out


@given(st.lists(st.integers(1, 64), min_size=1, max_size=5))
def test_inception_concat_sums_channels(widths: list[int]) -> None:
    b = NetBuilder((17, 17, 32))
    b.conv(16, 3, 3)
    out = inception_module(b, "m", [[("conv", c, 1, 1), ("conv", c, 3, 3)] for c in widths])
    assert out.shape == (17, 17, sum(widths))
    spec = b.build("t", 0, "", "")
    assert spec.layers[-1].kind is LayerKind.CONCAT
    assert spec.layers[-1].input_elems == 17 * 17 * sum(widths)
    assert len(spec.layers) == 2 + 2 * len(widths)


def test_builder_other_layers() -> None:
    b = NetBuilder((32, 32, 3))
    assert b.pool("max", 2, 2).shape == (16, 16, 3)  # VALID 2x2/2
    b.conv(8, 3, 3, batch_norm=True)
    shortcut = b.top
    b.lrn(2)
    b.batch_norm(scale=True)
    b.activation()
    b.depthwise_conv(3, 3, multiplier=2, batch_norm=False)
    b.conv(8, 1, 1, activation=None, bias=False)
    b.residual_add(shortcut)
    b.dropout()
    b.spatial_mean()
    b.logits_and_loss(10)
    spec = b.build("toy", 0, "", "")
    kinds = [la.kind.value for la in spec.layers]
    assert kinds == [
        "pool",
        "conv",
        "lrn",
        "batchnorm",
        "activation",
        "depthwise_conv",
        "conv",
        "add",
        "dropout",
        "pool",
        "fc",
        "loss",
    ]
    dw = spec.layers[5]
    assert dw.tensors[0].shape == (3, 3, 8, 2) and dw.output_shape == (16, 16, 16)
    assert spec.layers[1].bwd_flops == spec.layers[1].fwd_flops  # input grad not needed
    with pytest.raises(ValueError, match="residual"):
        b2 = NetBuilder((8, 8, 4))
        b2.conv(5, 1, 1)
        b2.residual_add(NetBuilder((8, 8, 4)).top)
    with pytest.raises(ValueError, match="padding"):
        NetBuilder((8, 8, 4)).conv(4, 3, 3, 1, "FULL")
