"""The software stack as physics: framework defaults, memory layout (NCHW transposes around
cuDNN 8's NHWC tensor-core kernels), operator fusion (element-wise passes over memory) and
DALI's GPU work -- named per-layer terms, never a factor."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddlsim
from ddlsim.calibration import restack
from ddlsim.compute import kernel_routes
from ddlsim.compute.kernels import (
    ConvShape,
    conv_pass_s,
    conv_routes_s,
    default_library,
    step_library,
)
from ddlsim.compute.passes import dali_decode_bytes, epilogue_terms, passes
from ddlsim.compute.roofline import (
    depthwise_backward_elems,
    layer_time_s,
    memory_Bps,
    model_times_s,
)
from ddlsim.compute.stack import Stack, calibration_stack, resolve
from ddlsim.compute.terms import step_terms_s
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system import catalog
from ddlsim.workload.layers import LayerKind
from ddlsim.workload.zoo import get_model

FUSIONS = ("none", "bn-act", "xla")


@pytest.fixture(autouse=True)
def _shipped_only(no_user_calibration):
    return None


def _layer(model: str, pick):
    return next(la for la in get_model(model).layers if pick(la))


# -- the passes ----------------------------------------------------------------------------------
def test_unfused_passes_are_each_kernel_s_reads_and_writes():
    """conv + batch norm + ReLU: stats (1) + normalise (2) + ReLU (2) forward; reduction (2) +
    input gradient (3) + ReLU gradient (3) backward. A residual add + ReLU: 3 + 2 forward, the
    ReLU gradient (3) and the fan-out's gradient sum (3) backward."""
    conv = _layer("resnet50_v1.5", lambda la: la.kind is LayerKind.CONV)
    add = _layer("resnet50_v1.5", lambda la: la.kind is LayerKind.ADD)
    assert epilogue_terms(conv, "none") == {"batch_norm": (3, 5), "activation": (2, 3)}
    assert passes(conv, "none") == (5, 8)
    assert passes(add, "none") == (5, 6)
    # the bottleneck's last convolution has no activation: its batch norm alone
    last = _layer("resnet50_v1.5", lambda la: la.kind is LayerKind.CONV and la.activation is None)
    assert passes(last, "none") == (3, 5)


def test_fusion_merges_the_element_wise_chain():
    """XLA / cuDNN's fused kernel: batch norm + ReLU in one normalising pass forward (3), the
    activation's mask read in both backward passes (3 + 4); the residual add reads its shortcut
    inside the batch norm's pass."""
    conv = _layer("resnet50_v1.5", lambda la: la.kind is LayerKind.CONV)
    add = _layer("resnet50_v1.5", lambda la: la.kind is LayerKind.ADD)
    for fusion in ("xla", "bn-act"):
        assert epilogue_terms(conv, fusion) == {"batch_norm_activation": (3, 7)}
    assert passes(add, "xla") == (1, 4)  # shortcut read; mask 2 + gradient write + fan-out read
    assert passes(add, "bn-act") == (1, 6)  # the fan-out's sum is its own kernel (3)
    swish = _layer("efficientnet-b0", lambda la: la.activation == "swish")
    assert passes(swish, "bn-act") == passes(swish, "none")  # cuDNN fuses ReLU only
    assert passes(swish, "xla") == (3, 7)


@pytest.mark.parametrize("model", ["resnet50_v1.5", "efficientnet-b0", "se-resnext101-32x4d"])
def test_fusion_never_moves_more_bytes(model):
    for layer in get_model(model).layers:
        none = passes(layer, "none")
        for fusion in ("bn-act", "xla"):
            fused = passes(layer, fusion)
            assert fused[0] <= none[0] and fused[1] <= none[1], (layer.name, fusion)


# -- the layout ----------------------------------------------------------------------------------
def test_cudnn_8_transposes_nchw_around_its_tensor_core_kernels():
    """The input (and 3x3 filter) are transposed before the pass, the output after: each read
    once and written once at the DRAM roof; cuDNN 7.6 (the measured library) reads both."""
    v100 = catalog.device("v100")
    assert (step_library(v100), default_library(v100)) == ("cudnn-8", "cudnn-7.6")
    shape = ConvShape(16, 28, 28, 256, 256, 3, 3, 1, 1)
    nchw, nhwc = (
        conv_routes_s(shape, "fwd", v100, "amp", layout=lay, library="cudnn-8")["tensor"]
        for lay in ("nchw", "nhwc")
    )
    moved = 16 * 28 * 28 * 2 * 256 + 9 * 256 * 2 * 256 + 2 * 16 * 28 * 28 * 256
    assert nchw - nhwc == pytest.approx(2 * moved / memory_Bps(v100))
    old = [
        conv_routes_s(shape, "fwd", v100, "amp", layout=lay, library="cudnn-7.6")["tensor"]
        for lay in ("nchw", "nhwc")
    ]
    assert old[0] == old[1] == nhwc
    assert kernel_routes.LIBRARIES["cudnn-8"].tensor_layouts == ("nhwc",)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 64),
    hw=st.integers(1, 56),
    c=st.integers(1, 512),
    k=st.integers(1, 512),
    f=st.sampled_from([1, 3, 5]),
    pass_=st.sampled_from(["fwd", "bwd_data", "bwd_filter"]),
)
def test_the_layout_the_kernels_read_is_never_slower(n, hw, c, k, f, pass_):
    shape = ConvShape(n, hw, hw, c, k, f, f, f // 2, f // 2)
    a100, p100 = catalog.device("a100"), catalog.device("p100")
    tc = [
        conv_routes_s(shape, pass_, a100, "amp", layout=lay, library="cudnn-8")["tensor"]
        for lay in ("nhwc", "nchw")
    ]
    assert tc[0] <= tc[1]
    cuda = [conv_pass_s(shape, pass_, p100, layout=lay) for lay in ("nchw", "nhwc")]
    assert cuda[0] <= cuda[1]


# -- the framework's defaults and what cannot run ------------------------------------------------
@pytest.mark.parametrize(
    ("framework", "gpu", "precision", "expected"),
    [
        ("tensorflow", "v100", "amp", Stack("tensorflow", "nhwc", "none")),
        ("tensorflow", "a100", "fp32", Stack("tensorflow", "nchw", "none")),
        ("tensorflow", "p100", "amp", Stack("tensorflow", "nchw", "none")),  # no tensor cores
        ("pytorch", "h100", "amp", Stack("pytorch", "nchw", "none")),
        ("mxnet", "a100", "amp", Stack("mxnet", "nchw", "none")),
    ],
)
def test_framework_defaults(framework, gpu, precision, expected):
    assert resolve(framework, None, None, catalog.device(gpu), precision) == expected


def test_what_the_library_cannot_run_is_refused():
    a100 = catalog.device("a100")
    with pytest.raises(ConfigError, match="NHWC fp16 tensors only"):
        resolve("pytorch", "nchw", "bn-act", a100, "amp")
    with pytest.raises(ConfigError, match="NHWC fp16 tensors only"):
        resolve("pytorch", "nhwc", "bn-act", a100, "fp32")
    for kind, bad in (("framework", "jax"), ("layout", "chwn"), ("fusion", "tvm")):
        args = {"framework": "pytorch", "layout": None, "fusion": None, kind: bad}
        with pytest.raises(UnknownNameError, match=f"unknown {kind} '{bad}'"):
            resolve(args["framework"], args["layout"], args["fusion"], a100, "amp")
    assert resolve("pytorch", "nhwc", "bn-act", a100, "amp").fusion == "bn-act"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--framework", "jax"], "argument --framework: invalid choice: 'jax'"),
        (["--layout", "chwn"], "argument --layout: invalid choice: 'chwn'"),
        (
            ["--framework", "pytorch", "--fusion", "bn-act", "--precision", "amp"],
            "NHWC fp16 tensors",
        ),
        (["--gpu", "k80", "--layout", "nhwc", "--precision", "amp"], "no fast fp16 path"),
    ],
)
def test_bad_input_is_one_line(cli, argv, message):
    code, out, err = cli("predict", "--gpu", "a100", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ddlsim: error: ") and message in err


# -- predictions: the terms move the step, ratios re-time a calibration ---------------------------
def test_predict_reports_the_stack_and_the_layouts_rank():
    """NHWC beats NCHW on tensor cores (no transposes), fusion beats none, by the model's
    own per-layer ratios applied to the shipped file."""
    kw = {"model": "resnet50_v1.5", "gpu": "h100", "precision": "amp", "batch": 256}
    nchw = ddlsim.predict(framework="pytorch", **kw)
    nhwc = ddlsim.predict(framework="pytorch", layout="nhwc", **kw)
    xla = ddlsim.predict(framework="pytorch", layout="nhwc", fusion="xla", **kw)
    assert nchw.inputs["stack"] == {"framework": "pytorch", "layout": "nchw", "fusion": "none"}
    assert nchw.images_per_sec < nhwc.images_per_sec < xla.images_per_sec
    dev, spec = catalog.device("h100"), get_model("resnet50_v1.5")
    model = [
        sum(f + b for f, b in model_times_s(spec, dev, 256, "amp", stack=s)[0])
        for s in (Stack("pytorch", "nchw", "none"), Stack("pytorch", "nhwc", "none"))
    ]
    ratio = nhwc.single_gpu_images_per_sec / nchw.single_gpu_images_per_sec
    assert ratio == pytest.approx(model[0] / model[1], rel=0.02)  # + the optimizer's time
    assert "retimed" in nchw.inputs["calibration"]["provenance"]


def test_the_calibration_s_own_stack_is_not_retimed():
    p = ddlsim.predict(model="resnet50", gpu="v100", precision="amp", batch=64)
    prov = p.inputs["calibration"]["provenance"]
    assert prov["stack"] == {"framework": "tensorflow", "layout": "nhwc", "fusion": "none"}
    assert "retimed" not in prov


def test_calibration_stack_of_files_that_do_not_state_one():
    a100 = catalog.device("a100")
    assert calibration_stack({"method": "x"}, a100, "amp") == Stack("tensorflow", "nhwc", "none")
    torch = {"framework": "pytorch", "layout": "NCHW"}
    assert calibration_stack(torch, a100, "amp") == Stack("pytorch", "nchw", "none")
    nested = {"base": {"stack": {"framework": "mxnet", "layout": "nhwc", "fusion": "bn-act"}}}
    assert calibration_stack(nested, a100, "amp") == Stack("mxnet", "nhwc", "bn-act")


def test_dali_adds_its_gpu_bytes_to_the_step():
    """Real data through DALI: the decoded image, the crop and the normalised input through DRAM
    (a closed form), added to the 1-GPU step; the host does not bind."""
    kw = {"model": "resnet50_v1.5", "gpu": "a100", "precision": "amp", "batch": 256}
    synthetic = ddlsim.predict(**kw)
    dali = ddlsim.predict(data="real", input_pipeline="dali", **kw)
    dev = catalog.device("a100")
    expected = 256 * dali_decode_bytes(2) / memory_Bps(dev)
    assert restack.dali_gpu_s(dev, 256, "amp") == pytest.approx(expected)
    assert dali.iteration_time_s - synthetic.iteration_time_s == pytest.approx(expected, rel=1e-6)
    assert 0 < expected < 0.01 * synthetic.iteration_time_s  # a fraction of a percent


def test_depthwise_weight_gradient_reads_its_inputs_once_per_tap():
    """The data gradient reads dy and writes dx; the weight gradient reads dy and the tap's
    inputs once per filter tap: the backward pass is at least those bytes at the DRAM roof."""
    dev, batch = catalog.device("v100"), 64
    for layer in get_model("efficientnet-b0").layers:
        if layer.kind is not LayerKind.DEPTHWISE_CONV:
            continue
        kh, kw = layer.tensors[0].shape[:2]
        elems = depthwise_backward_elems(layer)
        assert elems == layer.input_elems + layer.output_elems + 2 * kh * kw * layer.output_elems
        _, bwd = layer_time_s(layer, dev, batch, "fp32", stack=Stack("pytorch", "nchw", "none"))
        assert bwd >= batch * elems * 4 / memory_Bps(dev)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_the_named_terms_add_up_to_the_step(fusion):
    dev, spec = catalog.device("a100"), get_model("resnet50_v1.5")
    for layout in ("nchw", "nhwc"):
        stack = Stack("pytorch", layout, fusion)
        if fusion == "bn-act" and layout == "nchw":
            continue
        terms = step_terms_s(spec, dev, 128, "amp", stack)
        times, opt = model_times_s(spec, dev, 128, "amp", stack=stack)
        assert sum(terms.values()) == pytest.approx(sum(f + b for f, b in times) + opt)
        assert (terms["layout_transposes"] > 0) == (layout == "nchw")
        assert ("activation" in terms and terms["activation"] > 0) == (fusion == "none")
