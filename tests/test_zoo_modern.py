"""The zoo's ResNeXt / SE-ResNeXt / EfficientNet models against their references' multiply-add
counts, the layers they need (grouped convolution, squeeze-excitation, swish), and how the
per-layer model times those layers.

Reference multiply-adds: the reference implementations (timm 1.0 ``resnext101_32x4d``,
``seresnext101_32x4d``, ``efficientnet_b0``, ``efficientnet_b4`` at 380x380,
``efficientnetv2_s`` at 384x384, whose parameter counts equal the zoo's), counted by
``torch.utils.flop_counter.FlopCounterMode`` on one image: the multiply-adds of every
convolution and matrix product (it reports 2 FLOPs per multiply-add; halved here). The papers
state multiply-adds too, rounded (column ``PAPER``).
"""

from __future__ import annotations

import math

import pytest

from ddlsim.compute.passes import passes as elementwise_passes
from ddlsim.compute.roofline import DEFAULT_PARAMS, layer_time_s, matmul_flops, memory_Bps
from ddlsim.system import catalog
from ddlsim.workload.layers import LayerKind, ModelSpec
from ddlsim.workload.zoo import efficientnet, get_model
from ddlsim.workload.zoo.builder import NetBuilder
from ddlsim.workload.zoo.core import (
    RELU_FLOPS_PER_ELEM,
    SIGMOID_FLOPS_PER_ELEM,
    SWISH_FLOPS_PER_ELEM,
)

REFERENCE_MACS = {
    "resnext101-32x4d": 7_969_996_800,
    "se-resnext101-32x4d": 7_974_739_968,
    "efficientnet-b0": 385_814_752,
    "efficientnet-b4": 4_393_771_024,
    "efficientnetv2-s": 8_365_617_152,
}
#: (paper figure, source, relative tolerance): multiply-adds as the papers round them
PAPER = {
    "resnext101-32x4d": (7.99e9, "Hu et al. 2018 (SENet) Table 2", 0.005),
    "se-resnext101-32x4d": (8.00e9, "Hu et al. 2018 (SENet) Table 2", 0.005),
    "efficientnet-b0": (0.39e9, "Tan & Le 2019 Table 2", 0.02),
    # the paper's 4.2 B and 8.8 B are 4-5% off both timm's count and ours, which agree exactly
    "efficientnet-b4": (4.2e9, "Tan & Le 2019 Table 2", 0.05),
    "efficientnetv2-s": (8.8e9, "Tan & Le 2021 Table 7", 0.06),
}


def macs(model: ModelSpec) -> int:
    """Multiply-adds of every convolution and matrix product, from kernel shapes and outputs."""
    total = 0
    for la in model.layers:
        if la.kind is LayerKind.SQUEEZE_EXCITE:
            total += la.tensors[0].n_params + la.tensors[2].n_params
        elif la.kind in (LayerKind.CONV, LayerKind.GROUPED_CONV, LayerKind.DEPTHWISE_CONV):
            total += la.tensors[0].n_params * math.prod(la.output_shape[:2])
        elif la.kind is LayerKind.FC:
            total += la.tensors[0].n_params
    return total


@pytest.mark.parametrize("name", sorted(REFERENCE_MACS))
def test_multiply_adds_equal_the_reference_implementation(name: str) -> None:
    assert macs(get_model(name)) == REFERENCE_MACS[name]
    paper, _source, tol = PAPER[name]
    assert macs(get_model(name)) == pytest.approx(paper, rel=tol)


def test_widese_widens_only_the_squeeze_excitation() -> None:
    """Same layers and tensors as the base model except the squeeze width, 0.25·c_in·expand."""
    for variant, extra in (("b0", 3_135_300), ("b4", 15_585_630)):
        base, wide = (
            get_model(f"efficientnet-{variant}"),
            get_model(f"efficientnet-widese-{variant}"),
        )
        assert wide.n_params - base.n_params == extra == efficientnet.widese_extra_params(variant)
        assert [la.name for la in wide.layers] == [la.name for la in base.layers]
        for b_la, w_la in zip(base.layers, wide.layers, strict=True):
            if b_la.kind is LayerKind.SQUEEZE_EXCITE:
                hidden = w_la.output_shape[-1]
                assert w_la.tensors[0].shape == (hidden, int(hidden * 0.25))
            else:
                assert b_la.tensors == w_la.tensors and b_la.fwd_flops == w_la.fwd_flops
        assert wide.input_shape == base.input_shape


def test_efficientnet_b4_scaling() -> None:
    """Widths x1.4 rounded to multiples of 8, repeats x1.8 rounded up, 380x380."""
    blocks = efficientnet.blocks("b4")
    outs = [c_out for *_, c_out in blocks]
    assert sorted(set(outs)) == [24, 32, 56, 112, 160, 272, 448]
    assert [outs.count(c) for c in (24, 32, 56, 112, 160, 272, 448)] == [2, 4, 4, 6, 6, 8, 2]
    assert get_model("efficientnet-b4").input_shape == (380, 380, 3)
    assert [efficientnet.round_channels(c * 1.4) for c in (32, 1280)] == [48, 1792]
    assert efficientnet.round_channels(10) == 16  # 8 would be more than 10% down


def test_resnext_blocks_follow_the_reference() -> None:
    """32 groups of 4-32 channels, the stride on the grouped 3x3, DLE's tensor order."""
    model = get_model("se-resnext101-32x4d")
    grouped = [la for la in model.layers if la.kind is LayerKind.GROUPED_CONV]
    assert len(grouped) == 33
    for la in grouped:
        kh, kw, c_per_group, c_out = la.tensors[0].shape
        assert (kh, kw) == (3, 3) and la.input_shape[-1] == c_out == 32 * c_per_group
    assert [la.stride for la in grouped if la.stride != 1] == [2, 2, 2]
    first_block = [la.name for la in model.layers if la.name.startswith("resnext0/")]
    assert first_block == [
        "resnext0/conv1",
        "resnext0/conv2",
        "resnext0/conv3",
        "resnext0/conv4",  # the projection shortcut, registered after the main branch
        "resnext0/se0",
        "resnext0/add0",
    ]
    se = next(la for la in model.layers if la.name == "resnext0/se0")
    assert [t.shape for t in se.tensors] == [(256, 16), (16,), (16, 256), (256,)]


# -- the builder ------------------------------------------------------------------------------
def test_grouped_convolution_costs_one_groups_th() -> None:
    dense, grouped = NetBuilder((14, 14, 64)), NetBuilder((14, 14, 64))
    dense.conv(64, 3, 3)
    dense.conv(128, 3, 3)
    grouped.conv(64, 3, 3)
    grouped.conv(128, 3, 3, groups=8)
    d, g = dense.build("d", 0, "", "").layers[1], grouped.build("g", 0, "", "").layers[1]
    assert g.kind is LayerKind.GROUPED_CONV and d.kind is LayerKind.CONV
    assert g.tensors[0].shape == (3, 3, 8, 128)
    assert matmul_flops(g) * 8 == matmul_flops(d) == 2 * 9 * 64 * 14 * 14 * 128
    assert g.output_shape == d.output_shape
    assert d.fwd_flops - g.fwd_flops == matmul_flops(d) - matmul_flops(g)
    for groups in (0, 3, 256):  # must divide 64 inputs and 128 outputs
        with pytest.raises(ValueError, match=f"groups={groups}"):
            NetBuilder((14, 14, 64)).conv(128, 3, 3, groups=groups)


def test_squeeze_excitation_layer() -> None:
    b = NetBuilder((7, 7, 32))
    b.conv(64, 1, 1)
    out = b.squeeze_excitation(16, activation="swish")
    la = b.build("t", 0, "", "").layers[-1]
    assert out.shape == (7, 7, 64) and la.kind is LayerKind.SQUEEZE_EXCITE
    assert [(t.name, t.shape) for t in la.tensors] == [
        ("se0/squeeze/weights", (64, 16)),
        ("se0/squeeze/biases", (16,)),
        ("se0/excite/weights", (16, 64)),
        ("se0/excite/biases", (64,)),
    ]
    assert la.input_elems == 2 * 7 * 7 * 64  # read by the pool and by the scaling
    elementwise = 2 * 7 * 7 * 64 + (16 + 64) + SWISH_FLOPS_PER_ELEM * 16
    elementwise += SIGMOID_FLOPS_PER_ELEM * 64
    assert la.fwd_flops == 4 * 64 * 16 + elementwise
    assert la.bwd_flops == la.fwd_flops + 4 * 64 * 16
    with pytest.raises(ValueError, match="squeeze activation"):
        b.squeeze_excitation(4, activation=None)


def test_swish_costs_more_than_relu_per_element() -> None:
    relu, swish = NetBuilder((8, 8, 4)), NetBuilder((8, 8, 4))
    relu.conv(16, 3, 3)
    swish.conv(16, 3, 3, activation="swish")
    r, s = relu.build("r", 0, "", "").layers[0], swish.build("s", 0, "", "").layers[0]
    assert s.fwd_flops - r.fwd_flops == (SWISH_FLOPS_PER_ELEM - RELU_FLOPS_PER_ELEM) * 8 * 8 * 16
    with pytest.raises(ValueError, match="activation"):
        NetBuilder((8, 8, 4)).conv(16, 3, 3, activation="gelu")


# -- the per-layer model ----------------------------------------------------------------------
@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_grouped_convolution_is_timed_on_the_roofline(precision: str) -> None:
    """Not by the dense-convolution kernel model: max(compute, memory) on the CUDA cores at the
    fp32 peak and matmul efficiency also under amp (where only the bytes halve), plus the
    batch-norm / ReLU passes."""
    v100, p, batch = catalog.device("v100"), DEFAULT_PARAMS, 64
    model = get_model("resnext101-32x4d")
    for layer in [la for la in model.layers if la.kind is LayerKind.GROUPED_CONV][::10]:
        act = 4 if precision == "fp32" else 2
        rate = v100.peak_fp32_flops * p.matmul_efficiency_fp32
        bw = memory_Bps(v100, p)
        mm, weights = matmul_flops(layer), 4 * layer.n_params
        io_fwd = batch * (layer.input_elems + layer.output_elems) * act + weights
        io_bwd = batch * (layer.output_elems + 2 * layer.input_elems) * act + 2 * weights
        # TensorFlow's default stack: unfused batch norm (3 / 5 passes) and ReLU (2 / 3)
        pf, pb = elementwise_passes(layer, "none")
        assert (pf, pb) == (5, 8)
        out_s = batch * layer.output_elems * act / bw
        launch = 3 * p.kernel_overhead_s
        fwd, bwd = layer_time_s(layer, v100, batch, precision)
        assert fwd == pytest.approx(max(batch * mm / rate, io_fwd / bw) + pf * out_s + launch)
        assert bwd == pytest.approx(
            max(2 * batch * mm / rate, io_bwd / bw) + pb * out_s + 2 * launch
        )


def test_squeeze_excitation_is_memory_bound_with_six_kernels() -> None:
    """Three passes over the block output forward (pool, scale read + write), five backward."""
    v100, p, batch = catalog.device("v100"), DEFAULT_PARAMS, 128
    layer = next(la for la in get_model("se-resnext101-32x4d").layers if la.name.endswith("se5"))
    hwc = layer.output_elems
    bw = memory_Bps(v100, p)
    for precision, act in (("fp32", 4), ("amp", 2)):
        fwd, bwd = layer_time_s(layer, v100, batch, precision)
        weights = 4 * layer.n_params
        launch = 6 * p.kernel_overhead_s
        assert fwd == pytest.approx((3 * batch * hwc * act + weights) / bw + launch)
        assert bwd == pytest.approx((5 * batch * hwc * act + 2 * weights) / bw + 2 * launch)


def test_a_grouped_convolution_is_never_slower_in_amp_than_in_fp32() -> None:
    """Half the bytes at the same arithmetic rate: amp can only help (on every catalog GPU with
    a fast fp16 path)."""
    layers = [
        la for la in get_model("resnext101-32x4d").layers if la.kind is LayerKind.GROUPED_CONV
    ]
    for gpu in ("p100", "v100", "a100", "h100"):
        device = catalog.device(gpu)
        for layer in layers:
            for batch in (1, 32, 256):
                amp = layer_time_s(layer, device, batch, "amp")
                fp32 = layer_time_s(layer, device, batch, "fp32")
                assert amp[0] <= fp32[0] and amp[1] <= fp32[1]
