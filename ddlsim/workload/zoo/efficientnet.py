"""EfficientNet B0 / B4 (and NVIDIA's wide-SE variants) and EfficientNetV2-S.

Sources: Tan & Le 2019 (EfficientNet, Table 1 and the B0->B7 scaling) as NVIDIA
DeepLearningExamples defines it (``PyTorch/Classification/ConvNets/image_classification/models/
efficientnet.py``, transcribed from memory); Tan & Le 2021 (EfficientNetV2, Table 4) for V2-S.

EfficientNet: stem conv 3x3/2 + batch norm + swish; seven stages of MBConv blocks (B0:
``(expand, kernel, stride, channels, repeats)`` in :data:`B0_STAGES`), head conv 1x1 + batch
norm + swish, spatial mean, dropout, affine 1000. B4 scales widths by 1.4 (rounded to a multiple
of 8, never more than 10% down: :func:`round_channels`) and repeats by 1.8 (rounded up), at
380x380 (the rows' and the reference's image size). An MBConv block: conv 1x1 ``c_in ->
c_in·expand`` + BN + swish (absent when expand is 1), depthwise conv kxk with the stride + BN +
swish, squeeze-excitation (swish inside), conv 1x1 -> channels + BN (linear), and the input
added when the stride is 1 and the channels are unchanged. The squeeze width is ``0.25·c_in``;
DeepLearningExamples' ``widese`` variants take ``0.25·c_in·expand`` instead ("SE width
proportional to the depthwise convolution's"), everything else equal. Stochastic depth (a
per-sample scalar on the residual branch) is not modelled: it adds no pass over the tensor when
fused with the sum, as DeepLearningExamples does.

EfficientNetV2-S, 384x384 (the resolution of the published FLOPs; the paper trains at up to 300
with progressive resizing): stem conv 3x3/2 24; Fused-MBConv stages (conv kxk with the stride
to ``c_in·expand`` + BN + swish, then conv 1x1 + BN; with expand 1 a single kxk conv + BN +
swish) and MBConv stages with squeeze ``0.25·c_in`` (:data:`V2S_STAGES`); head conv 1x1 1280.
"""

from __future__ import annotations

import math

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import NetBuilder

SE_RATIO = 0.25
CHANNEL_DIVISOR = 8
# (expand ratio, kernel, stride, output channels, repeats) of EfficientNet-B0
B0_STAGES = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)
B0_STEM, B0_HEAD = 32, 1280
# name -> (width multiplier, depth multiplier, image size); the dropout rate (0.2, 0.4) does
# not change the cost
SCALING = {"b0": (1.0, 1.0, 224), "b4": (1.4, 1.8, 380)}
# (fused, expand, kernel, stride, output channels, repeats) of V2-S; MBConv stages have SE
V2S_STAGES = (
    (True, 1, 3, 1, 24, 2),
    (True, 4, 3, 2, 48, 4),
    (True, 4, 3, 2, 64, 4),
    (False, 4, 3, 2, 128, 6),
    (False, 6, 3, 1, 160, 9),
    (False, 6, 3, 2, 256, 15),
)
V2S_STEM, V2S_HEAD, V2S_SIZE = 24, 1280, 384

PUBLISHED_PARAMS = {
    "efficientnet-b0": 5_288_548,
    "efficientnet-b4": 19_341_616,
    "efficientnetv2-s": 21_458_488,
}
_SOURCES = {
    "efficientnet-b0": (
        "timm efficientnet_b0 and Keras applications EfficientNetB0 (1000 classes): 5,288,548 "
        "trainable params (the paper, Tan & Le 2019 Table 2, rounds to 5.3M)"
    ),
    "efficientnet-b4": (
        "timm efficientnet_b4 and Keras applications EfficientNetB4 (1000 classes): 19,341,616 "
        "trainable params (the paper rounds to 19M)"
    ),
    "efficientnetv2-s": (
        "timm efficientnetv2_s / tf_efficientnetv2_s and Keras applications EfficientNetV2S "
        "(1000 classes): 21,458,488 trainable params (the paper, Tan & Le 2021 Table 7, rounds "
        "to 22M)"
    ),
}
_WIDESE_SOURCE = (
    "no published count: {base} ({base_params:,}) with every squeeze-excitation widened from "
    "0.25·c_in to 0.25·c_in·expand (DeepLearningExamples widese), +{extra:,} -> {total:,}"
)


def round_channels(channels: float, divisor: int = CHANNEL_DIVISOR) -> int:
    """Channels rounded to the nearest multiple of ``divisor``, never more than 10% down (the
    EfficientNet reference's ``round_filters``)."""
    rounded = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * channels else rounded


def _mbconv(b: NetBuilder, expand: int, kernel: int, stride: int, out_ch: int, wide_se: bool):
    """One MBConv block in scope ``mbconv{N}``."""
    block_in = b.top
    c_in = block_in.shape[-1]
    hidden = c_in * expand
    with b.scope(b.next_name("mbconv")):
        if expand != 1:
            b.conv(hidden, 1, 1, bias=False, activation="swish")
        b.depthwise_conv(kernel, kernel, stride, bias=False, activation="swish")
        b.squeeze_excitation(max(1, int((hidden if wide_se else c_in) * SE_RATIO)), "swish")
        b.conv(out_ch, 1, 1, bias=False, activation=None)
        if stride == 1 and c_in == out_ch:
            b.residual_add(block_in, activation=None)


def _fused_mbconv(b: NetBuilder, expand: int, kernel: int, stride: int, out_ch: int) -> None:
    """One Fused-MBConv block (no squeeze-excitation) in scope ``fused_mbconv{N}``."""
    block_in = b.top
    c_in = block_in.shape[-1]
    with b.scope(b.next_name("fused_mbconv")):
        if expand != 1:
            b.conv(c_in * expand, kernel, kernel, stride, bias=False, activation="swish")
            b.conv(out_ch, 1, 1, bias=False, activation=None)
        else:
            b.conv(out_ch, kernel, kernel, stride, bias=False, activation="swish")
        if stride == 1 and c_in == out_ch:
            b.residual_add(block_in, activation=None)


def _head(b: NetBuilder, channels: int) -> None:
    b.conv(channels, 1, 1, bias=False, activation="swish")
    b.spatial_mean()
    b.dropout()
    b.logits_and_loss()


def blocks(variant: str) -> list[tuple[int, int, int, int, int]]:
    """Every MBConv block of EfficientNet-``variant``: ``(expand, kernel, stride, c_in, c_out)``."""
    width, depth, _size = SCALING[variant]
    c_in, out = round_channels(B0_STEM * width), []
    for expand, kernel, stride, channels, repeats in B0_STAGES:
        c_out = round_channels(channels * width)
        for i in range(math.ceil(repeats * depth)):
            out.append((expand, kernel, stride if i == 0 else 1, c_in, c_out))
            c_in = c_out
    return out


def widese_extra_params(variant: str) -> int:
    """Parameters the wide squeeze-excitation adds to EfficientNet-``variant``: per block, two
    ``hidden x squeeze`` matrices and ``squeeze`` biases, for squeeze ``0.25·hidden`` instead
    of ``0.25·c_in``."""
    extra = 0
    for expand, _k, _s, c_in, _c_out in blocks(variant):
        hidden = c_in * expand
        wide, narrow = int(hidden * SE_RATIO), int(c_in * SE_RATIO)
        extra += (2 * hidden + 1) * (wide - narrow)
    return extra


def build_efficientnet(variant: str, wide_se: bool = False) -> ModelSpec:
    """EfficientNet-``variant`` (``b0``, ``b4``), NVIDIA's wide-SE version when ``wide_se``."""
    width, _depth, size = SCALING[variant]
    b = NetBuilder((size, size, 3), batch_norm=True, bn_scale=True)
    b.conv(round_channels(B0_STEM * width), 3, 3, 2, bias=False, activation="swish")
    for expand, kernel, stride, _c_in, c_out in blocks(variant):
        _mbconv(b, expand, kernel, stride, c_out, wide_se)
    _head(b, round_channels(B0_HEAD * width))
    base, shape = f"efficientnet-{variant}", f"{size}x{size}x3"
    if not wide_se:
        desc = f"EfficientNet-{variant.upper()} (Tan & Le 2019; DeepLearningExamples), {shape}"
        return b.build(base, PUBLISHED_PARAMS[base], _SOURCES[base], desc)
    extra = widese_extra_params(variant)
    total = PUBLISHED_PARAMS[base] + extra
    source = _WIDESE_SOURCE.format(
        base=base, base_params=PUBLISHED_PARAMS[base], extra=extra, total=total
    )
    desc = f"EfficientNet-WideSE-{variant.upper()} (DeepLearningExamples), {shape}"
    return b.build(f"efficientnet-widese-{variant}", total, source, desc)


def efficientnet_b0() -> ModelSpec:
    """EfficientNet-B0, 224x224."""
    return build_efficientnet("b0")


def efficientnet_b4() -> ModelSpec:
    """EfficientNet-B4, 380x380."""
    return build_efficientnet("b4")


def efficientnet_widese_b0() -> ModelSpec:
    """EfficientNet-WideSE-B0 (NVIDIA DeepLearningExamples), 224x224."""
    return build_efficientnet("b0", wide_se=True)


def efficientnet_widese_b4() -> ModelSpec:
    """EfficientNet-WideSE-B4 (NVIDIA DeepLearningExamples), 380x380."""
    return build_efficientnet("b4", wide_se=True)


def efficientnetv2_s() -> ModelSpec:
    """EfficientNetV2-S, 384x384."""
    b = NetBuilder((V2S_SIZE, V2S_SIZE, 3), batch_norm=True, bn_scale=True)
    b.conv(V2S_STEM, 3, 3, 2, bias=False, activation="swish")
    for fused, expand, kernel, stride, out_ch, repeats in V2S_STAGES:
        for i in range(repeats):
            s = stride if i == 0 else 1
            if fused:
                _fused_mbconv(b, expand, kernel, s, out_ch)
            else:
                _mbconv(b, expand, kernel, s, out_ch, wide_se=False)
    _head(b, V2S_HEAD)
    name = "efficientnetv2-s"
    desc = f"EfficientNetV2-S (Tan & Le 2021), {V2S_SIZE}x{V2S_SIZE}x3"
    return b.build(name, PUBLISHED_PARAMS[name], _SOURCES[name], desc)
