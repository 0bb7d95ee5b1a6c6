"""validate and the software stack: variant tokens and the framework column set predict's
stack options; what cannot run, SUSPECT rows and unmodelled frameworks are skipped with a code."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.tools.validate.baseline import BaselineIndex
from ddlsim.tools.validate.core import PREDICTED, validate_runs
from ddlsim.tools.validate.mapping import plan_row
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import load_runs

HEADER = (
    "run_id,source_id,model,gpu,gpus,gpus_per_node,intra_node,inter_node,transport,comm,n_ps,"
    "variant,framework,batch_per_gpu,precision,data,images_per_sec,scaling_efficiency,"
    "from_figure,note"
)
ROWS = [
    "S-0001,S,resnet50_v1.5,a100,1,1,nvlink-a100,none,,single,,ngc-dle;channels_last,pytorch,"
    "256,amp,real,2400,,0,DGX A100",
    "S-0002,S,resnet50_v1.5,a100,8,8,nvlink-a100,none,,ddp,,ngc-dle;channels_last,pytorch,"
    "256,amp,real,17000,,0,DGX A100",
    "S-0003,S,resnet50_v1.5,a100,1,1,nvlink-a100,none,,single,,ngc-dle;xla,tensorflow,256,amp,"
    "real,2300,,0,DGX A100",
    "S-0004,S,resnet50_v1.5,v100-sxm2,1,1,nvlink-v100,none,,single,,tf32,pytorch,128,fp32,"
    "synthetic,370,,0,DGX-1",
    "S-0005,S,resnet50_v1.5,v100-sxm2,1,1,nvlink-v100,none,,single,,,oneflow,128,fp32,"
    "synthetic,397,,0,DGX-1",
    "S-0006,S,resnet50_v1.5,h100,1,1,nvlink-h100,none,,single,,,pytorch,64,amp,synthetic,900,,0,"
    "HGX; SUSPECT: 1-GPU cell implausibly low",
    "S-0007,S,resnet50_v1.5,h100,8,8,nvlink-h100,none,,ddp,,,pytorch,64,amp,synthetic,20000,,0,HGX",
    "S-0008,S,resnet50_v1.5,a100,1,1,nvlink-a100,none,,single,,,jax,256,amp,synthetic,2000,,0,x",
]


@pytest.fixture
def runs(tmp_path: Path, no_user_calibration):
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
    return load_runs(path).runs


def _plans(runs, **options):
    index, opts = BaselineIndex(runs), ValidateOptions(**options)
    return {r.run_id: plan_row(r, index, opts) for r in runs}


def test_tokens_and_the_framework_column_set_the_stack(runs):
    plans = _plans(runs, absolute=True)
    nhwc = plans["S-0001"].kwargs
    assert (nhwc["framework"], nhwc["layout"]) == ("pytorch", "nhwc")
    xla = plans["S-0003"].kwargs
    assert (xla["framework"], xla["fusion"]) == ("tensorflow", "xla")
    anchored = _plans(runs)["S-0002"]
    assert anchored.anchored and anchored.kwargs["layout"] == "nhwc"


def test_what_cannot_run_or_is_doubted_is_skipped_with_its_code(runs):
    plans = _plans(runs, absolute=True)
    assert plans["S-0004"].code == "not-runnable"
    assert "no TF32 tensor cores" in plans["S-0004"].reason
    assert plans["S-0005"].code == "framework-not-modelled"
    assert plans["S-0006"].code == "suspect"
    assert plans["S-0008"].code == "unknown-name" and plans["S-0008"].column == "framework"
    anchored = _plans(runs)
    assert anchored["S-0007"].code == "suspect-baseline"
    assert "S-0006" in anchored["S-0007"].reason
    # anchored, a framework without a modelled stack is predicted with TensorFlow's, noted
    assert anchored["S-0005"].code == "baseline-row"


def test_the_rows_are_predicted_in_their_stack(runs):
    rows = {r.run.run_id: r for r in validate_runs(runs, ValidateOptions(absolute=True))}
    nhwc, xla = rows["S-0001"], rows["S-0003"]
    assert nhwc.status == PREDICTED and xla.status == PREDICTED
    # XLA's fused element-wise passes run faster than PyTorch's unfused ones on the same GPU
    assert xla.predicted_images_per_sec > nhwc.predicted_images_per_sec


def test_an_unstated_network_can_be_assumed_and_is_then_kept_apart(tmp_path, no_user_calibration):
    rows = [
        "M-0001,M,efficientnet-b4,a100-sxm4-80gb,1,1,nvlink-a100,none,,single,,channels_last,"
        "pytorch,128,amp,real,331,,0,DGX A100",
        "M-0002,M,efficientnet-b4,a100-sxm4-80gb,16,8,nvlink-a100,,,ddp,,channels_last,"
        "pytorch,128,amp,real,4813,,0,DGX A100; network not stated",
    ]
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    runs = load_runs(path).runs
    assert _plans(runs)["M-0002"].code == "network-unknown"
    plan = _plans(runs, assume_inter_node="ib-hdr", assume_nics_per_node=8)["M-0002"]
    assert plan.anchored and plan.kwargs["inter_node"] == "ib-hdr"
    assert plan.kwargs["nics_per_node"] == 8 and "ib-hdr" in plan.assumption
    with pytest.raises(ConfigError, match="needs --assume-inter-node"):
        ValidateOptions(assume_nics_per_node=8)
    with pytest.raises(UnknownNameError, match="ib-zdr"):
        ValidateOptions(assume_inter_node="ib-zdr")
