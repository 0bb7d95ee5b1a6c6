"""fp32 on GPUs with TF32 tensor cores: on by default (the frameworks' default), --no-tf32 for
true fp32; nothing changes elsewhere."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.compute.roofline import layer_time_s
from ddlsim.system import catalog
from ddlsim.workload.zoo import get_model


def test_no_tf32_retimes_by_the_kernel_model_ratio():
    on = ddlsim.predict(model="resnet50", gpu="a100", batch=64)
    off = ddlsim.predict(model="resnet50", gpu="a100", batch=64, tf32=False)
    assert (on.inputs["tf32"], off.inputs["tf32"]) == (True, False)
    # the step scales as the model's sum of layer times, CUDA-core fp32 over TF32
    a100 = catalog.device("a100")
    strict = replace(a100, peak_tf32_flops=None)
    layers = get_model("resnet50").layers
    t_on = sum(sum(layer_time_s(la, a100, 64)) for la in layers)
    t_off = sum(sum(layer_time_s(la, strict, 64)) for la in layers)
    assert 1.5 < t_off / t_on < 3  # convolutions 5-8x slower, memory-bound layers unchanged
    ratio = on.single_gpu_images_per_sec / off.single_gpu_images_per_sec
    assert ratio == pytest.approx(t_off / t_on, rel=0.02)  # + the unattributed optimizer time


@pytest.mark.parametrize(
    ("gpu", "precision"), [("p100", "fp32"), ("v100", "fp32"), ("a100", "amp")]
)
def test_nothing_changes_where_tf32_is_not_in_play(gpu, precision):
    on = ddlsim.predict(model="alexnet", gpu=gpu, precision=precision, gpus=8)
    off = ddlsim.predict(model="alexnet", gpu=gpu, precision=precision, gpus=8, tf32=False)
    assert on.images_per_sec == off.images_per_sec and on.inputs["tf32"] is None


def test_the_report_and_the_warning(capsys):
    assert main(["predict", "--gpu", "h100", "--no-tf32"]) == 0
    assert "64 per GPU, fp32 (TF32 off)," in capsys.readouterr().out
    assert main(["predict", "--gpu", "h100"]) == 0
    assert "64 per GPU, fp32 (TF32 tensor cores)," in capsys.readouterr().out
    assert main(["predict", "--gpu", "v100", "--no-tf32", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["inputs"]["tf32"] is None
    assert err.startswith("ddlsim: warning: --no-tf32 has no effect with --gpu v100")
