"""Several network adapters per node (``--nics-per-node``, multi-rail).

A node's n NICs add up their bandwidth; the per-message latency is one NIC's. Every
communication model must therefore cost n NICs of B exactly as one NIC of n x B, and more NICs
must never slow a job down.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import ddlsim
from ddlsim.comm import make_comm_model
from ddlsim.system.catalog import build_cluster
from ddlsim.system.specs import Hop
from ddlsim.tools.validate.runs import COLUMNS, format_rows, load_runs

METHODS = ["horovod-nccl", "horovod-mpi", "ps", "distributed-replicated", "byteps"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("nics", [2, 4])
@pytest.mark.parametrize("nbytes", [4e3, 25e6, 400e6])
def test_n_nics_cost_what_one_nic_of_n_times_the_bandwidth_costs(
    method: str, nics: int, nbytes: float
) -> None:
    multi = build_cluster("p100", 64, inter_node="25gbe", transport="rdma", nics_per_node=nics)
    one = build_cluster("p100", 64, inter_node="25gbe", transport="rdma")
    assert one.nic is not None
    wide = replace(one, nic=Hop(nics * one.nic.bandwidth_Bps, one.nic.latency_s))
    for op in make_comm_model(method, multi).ops:
        t_multi = make_comm_model(method, multi).time_s(nbytes, op)
        t_wide = make_comm_model(method, wide).time_s(nbytes, op)
        assert t_multi == pytest.approx(t_wide, rel=1e-12)


def test_more_nics_never_slow_a_job_and_relieve_a_network_bound_one() -> None:
    efficiency = [
        ddlsim.predict(
            "vgg16", 64, gpu="p100", inter_node="10gbe", nics_per_node=n
        ).scaling_efficiency
        for n in (1, 2, 4, 8)
    ]
    assert efficiency == sorted(efficiency)
    assert efficiency[1] > efficiency[0] + 0.05  # VGG-16 on one 10 GbE NIC per 8 GPUs is bound


def test_a_single_node_has_no_network_to_widen() -> None:
    one = ddlsim.predict("vgg16", 8, gpu="p100")
    four = ddlsim.predict("vgg16", 8, gpu="p100", nics_per_node=4)
    assert four.iteration_time_s == one.iteration_time_s


def test_cli_flag_reaches_the_report_and_the_json(cli) -> None:
    code, out, _ = cli("predict", "--model", "vgg16", "--gpus", "64", "--nics-per-node", "4")
    assert code == 0
    assert "inter-node     ib-edr, 4 NICs x 97.6 Gb/s effective, rdma" in out
    code, out, _ = cli(
        "predict", "--model", "vgg16", "--gpus", "64", "--nics-per-node", "4", "--json"
    )
    inputs = json.loads(out)["inputs"]
    assert inputs["nics_per_node"] == 4
    assert inputs["predict_kwargs"]["nics_per_node"] == 4


def test_cli_warns_when_the_flag_cannot_matter(cli) -> None:
    code, _, err = cli("predict", "--gpus", "8", "--nics-per-node", "4")
    assert code == 0
    assert "--nics-per-node has no effect" in err


@pytest.mark.parametrize("value, text", [("0", "at least 1"), ("73", "implausibly large")])
def test_cli_refuses_a_bad_count_in_one_line(cli, value: str, text: str) -> None:
    code, out, err = cli("predict", "--gpus", "16", "--nics-per-node", value)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "nics_per_node" in err and text in err


def _runs(tmp_path: Path, nics: str | None) -> Path:
    base = {
        "source_id": "M",
        "model": "vgg16",
        "gpu": "p100-sxm2",
        "batch_per_gpu": 64,
        "precision": "fp32",
        "comm": "horovod-nccl",
    }
    rows = [
        {**base, "run_id": "M-1", "gpus": 1, "gpus_per_node": 1, "images_per_sec": 150},
        {
            **base,
            "run_id": "M-2",
            "gpus": 64,
            "gpus_per_node": 8,
            "inter_node": "10gbe",
            "transport": "tcp",
            "images_per_sec": 5000,
            "nics_per_node": nics,
        },
    ]
    path = tmp_path / "runs.csv"
    path.write_text(format_rows(rows), encoding="utf-8")
    return path


def test_validate_reads_an_optional_nics_per_node_column(tmp_path: Path) -> None:
    from ddlsim.tools.validate.core import validate_file

    stated = validate_file(load_runs(_runs(tmp_path, "4")))
    assert stated[1].run is not None and stated[1].run.nics_per_node == 4
    (tmp_path / "b").mkdir()
    unstated = validate_file(load_runs(_runs(tmp_path / "b", None)))
    assert "nics_per_node not stated: 1 NIC per node assumed" in unstated[1].notes
    assert stated[1].predicted_images_per_sec > unstated[1].predicted_images_per_sec


def test_format_rows_writes_the_optional_column_only_when_a_row_fills_it(tmp_path: Path) -> None:
    header = _runs(tmp_path, None).read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",") == list(COLUMNS)
    header = _runs(tmp_path, "2").read_text(encoding="utf-8").splitlines()[0]
    assert header.split(",") == [*COLUMNS, "nics_per_node"]


@pytest.mark.parametrize(
    "cell, code", [("0", "not-positive"), ("two", "bad-number"), ("99", "out-of-range")]
)
def test_a_bad_nics_per_node_cell_skips_its_row_only(tmp_path: Path, cell: str, code: str) -> None:
    from ddlsim.tools.validate.core import validate_file

    results = validate_file(load_runs(_runs(tmp_path, cell)))
    assert results[1].code == code and "nics_per_node" in (results[1].reason or "")


def test_the_warning_takes_the_gpu_from_the_calibration_file(cli) -> None:
    root = Path(__file__).resolve().parents[1]
    dgx2 = root / "calibration" / "v100-sxm3" / "resnet50" / "b128-amp.json"
    code, _, err = cli(
        "predict", "--calibration", str(dgx2), "--gpus", "16", "--nics-per-node", "4"
    )
    assert code == 0 and "--nics-per-node has no effect" in err  # one 16-GPU DGX-2 node


def test_fast_and_detailed_engines_agree_on_a_multi_rail_cluster() -> None:
    kw = dict(gpu="p100", inter_node="10gbe", nics_per_node=4)
    fast = ddlsim.predict("vgg16", 64, **kw).images_per_sec
    detailed = ddlsim.predict("vgg16", 64, engine="detailed", **kw).images_per_sec
    assert detailed == pytest.approx(fast, rel=0.03)
