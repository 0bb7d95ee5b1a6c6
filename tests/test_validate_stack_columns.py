"""A run is predicted with the stack it ran (issue 32, item 3) and on the cloud instance it
names (item 5): the nccl_version, horovod_version, framework_version, mpi and instance columns
of a measured-runs file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlsim.tools.validate.baseline import BaselineIndex
from ddlsim.tools.validate.core import PREDICTED, validate_runs
from ddlsim.tools.validate.mapping import plan_row
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.report import format_report
from ddlsim.tools.validate.runs import load_runs
from ddlsim.tools.validate.stats import summarise

ROOT = Path(__file__).resolve().parents[1]
HEADER = (
    "run_id,source_id,model,gpu,gpus,gpus_per_node,intra_node,inter_node,transport,comm,n_ps,"
    "variant,framework,batch_per_gpu,precision,data,images_per_sec,scaling_efficiency,"
    "from_figure,note,nccl_version,horovod_version,framework_version,mpi,instance"
)
BASE = "resnet50,v100-sxm2,{gpus},8,nvlink-v100,{net},{tr},{comm},,,tensorflow,64,fp32,synthetic"
ROWS = {
    "S-0001": (1, "single", "", "", "", "", ""),
    "S-0002": (16, "horovod-nccl", "2.2", "0.12", "1.4", "openmpi-3.0.0", ""),
    "S-0003": (16, "horovod-nccl", "", "0.19.0", "", "", ""),
    "S-0004": (16, "horovod-nccl", "", "", "", "", ""),
    "S-0005": (16, "horovod-nccl", "2.x", "", "", "", ""),
    "S-0006": (16, "horovod-mpi", "", "0.16", "", "openmpi-2.1.1", ""),
    "S-0007": (16, "horovod-mpi", "", "0.16", "", "lam-mpi 7", ""),
    "S-0008": (16, "distributed-replicated", "", "", "1.1", "", ""),
    "S-0009": (16, "horovod-nccl", "", "0.1", "", "", ""),
    "S-0010": (16, "horovod-nccl", "", "", "one.fifteen", "", ""),
}


def _line(run_id: str, gpus: int, comm: str, *stack: str) -> str:
    net, tr = ("none", "") if gpus == 1 else ("25gbe", "tcp")
    cells = BASE.format(gpus=gpus, net=net, tr=tr, comm=comm)
    return f"{run_id},S,{cells},{600 * gpus},,0,note," + ",".join(stack)


@pytest.fixture
def runs(tmp_path: Path, no_user_calibration):
    path = tmp_path / "runs.csv"
    lines = [_line(i, g, c, *stack) for i, (g, c, *stack) in ROWS.items()]
    path.write_text("\n".join([HEADER, *lines]) + "\n", encoding="utf-8")
    return load_runs(path).runs


def _plans(runs, **options):
    index, opts = BaselineIndex(runs), ValidateOptions(**options)
    return {r.run_id: plan_row(r, index, opts) for r in runs}


def test_stated_releases_go_to_predict_and_unstated_ones_are_noted(runs):
    plans = _plans(runs)
    stated = plans["S-0002"]
    assert (stated.kwargs["nccl_version"], stated.kwargs["horovod_version"]) == ("2.2", "0.12")
    assert stated.stack == "stated"
    assert any("framework_version 1.4 stated" in n for n in stated.notes)
    partly = plans["S-0003"]
    assert partly.stack == "partly stated" and "nccl_version" not in partly.kwargs
    assert "nccl_version not stated: 2.14 assumed (predict's default)" in partly.notes
    assert plans["S-0004"].stack == "assumed"
    assert plans["S-0008"].stack == "no release modelled"  # a PS method: no NCCL, no Horovod
    mpi = plans["S-0006"]
    assert "nccl_version" not in mpi.kwargs and mpi.stack == "stated"
    assert mpi.kwargs["mpi"] == "openmpi-2.1.1"


def test_the_option_fills_only_the_rows_that_state_no_release(runs):
    plans = _plans(runs, nccl_version="2.0", horovod_version="0.9")
    assert plans["S-0002"].kwargs["nccl_version"] == "2.2"  # the row's cell wins
    assert plans["S-0004"].kwargs["nccl_version"] == "2.0"
    assert "nccl_version not stated: 2.0 assumed (--nccl-version)" in plans["S-0004"].notes


@pytest.mark.parametrize(
    ("run_id", "column", "words"),
    [
        ("S-0005", "nccl_version", "NCCL version must look like 2.4"),
        ("S-0007", "mpi", "MPI must name an implementation and release"),
        ("S-0009", "horovod_version", "0.9 or later"),
        ("S-0010", "framework_version", "like 1.15.2"),
    ],
)
def test_a_cell_that_does_not_parse_skips_the_row_never_a_default(runs, run_id, column, words):
    plan = _plans(runs)[run_id]
    assert plan.kwargs is None and plan.code == "bad-version"
    assert (plan.column, words in plan.reason) == (column, True)
    assert plan.value == getattr(next(r for r in runs if r.run_id == run_id), column)


def test_the_stack_changes_the_prediction_and_the_report_groups_by_it(runs):
    results = validate_runs(runs)
    by_id = {r.run_id: r for r in results}
    # NCCL 2.2 has rings only and Horovod 0.12 negotiates per message: never faster than the
    # defaults' trees and response cache
    old, new = by_id["S-0002"], by_id["S-0004"]
    assert old.status == new.status == PREDICTED
    assert old.predicted_images_per_sec < new.predicted_images_per_sec
    summary = summarise(results)
    assert set(summary["by_stack"]) == {"stated", "partly stated", "assumed", "no release modelled"}
    text = format_report("runs.csv", results, summary)
    assert "by release stack" in text and "[bad-version] line" in text
    assert old.to_json()["stack"] == "stated"


def test_files_without_the_columns_read_as_unstated() -> None:
    table = load_runs(ROOT / "traces" / "measured" / "runs_modern.csv")
    assert not table.defects
    assert all(r.nccl_version == r.mpi == r.instance == "" for r in table.runs)


INSTANCE_ROWS = [
    "I-0001,I,resnet50,k80,1,1,pcie3,none,,distributed-replicated,1,ps-colocated,tensorflow,64,"
    "fp32,synthetic,52,,0,AWS,,,,,p2.8xlarge",
    "I-0002,I,resnet50,k80,16,,,,,distributed-replicated,2,ps-colocated,tensorflow,64,fp32,"
    "synthetic,750,,0,AWS,,,,,p2.8xlarge",
    "I-0003,I,resnet50,k80,16,8,pcie3,ec2,tcp,distributed-replicated,2,ps-colocated,tensorflow,"
    "64,fp32,synthetic,750,,0,AWS,,,,,p2.8xlarge",
    "I-0004,I,resnet50,k80,16,8,pcie3,,,distributed-replicated,2,ps-colocated,tensorflow,64,"
    "fp32,synthetic,750,,0,AWS,,,,,p2.8xlarg",
    "I-0005,I,resnet50,k80,16,8,pcie3,,,distributed-replicated,2,ps-colocated,tensorflow,64,"
    "fp32,synthetic,750,,0,AWS,,,,,p2.xlarge",
]


def test_a_named_instance_fills_the_cells_the_row_leaves_empty(tmp_path, no_user_calibration):
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([HEADER, *INSTANCE_ROWS]) + "\n", encoding="utf-8")
    plans = _plans(load_runs(path).runs)
    filled = plans["I-0002"]
    assert filled.kwargs["gpus_per_node"] == 8 and filled.kwargs["intra_node"] == "pcie3"
    assert (filled.kwargs["inter_node"], filled.kwargs["transport"]) == ("10gbe", "tcp")
    assert any(n.startswith("from instance p2.8xlarge: gpus_per_node 8") for n in filled.notes)
    kept = plans["I-0003"]
    assert kept.kwargs["inter_node"] == "ec2"  # the row's own network stays
    assert any("the row's inter_node ec2 (the instance's: 10gbe) kept" in n for n in kept.notes)
    unknown = plans["I-0004"]
    assert (unknown.code, unknown.column) == ("unknown-instance", "instance")
    assert "nearest: p2.8xlarge" in unknown.reason
    assert "not modelled" in plans["I-0005"].reason  # p2.xlarge's network is only "High"
