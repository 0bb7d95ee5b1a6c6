"""``ddlsim validate`` on measured collectives: the same model predict builds, per-setup and
per-band errors, skipped setups with their reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ddlsim
from ddlsim.tools.validate.collectives import (
    CollectiveResult,
    forced_algorithm,
    forced_protocol,
    read_collectives,
    validate_collectives,
)
from ddlsim.units import KiB, MiB

REPO = Path(__file__).resolve().parents[1]
CSV = REPO / "traces" / "measured" / "collectives" / "nccl_tests.csv"


@pytest.fixture(scope="module")
def results() -> list[CollectiveResult]:
    return validate_collectives(read_collectives(CSV))


def test_every_row_is_predicted_or_skipped_with_a_reason(results):
    assert len(results) == 178
    for r in results:
        assert r.status in ("predicted", "skipped")
        assert r.status == "predicted" or (r.code and r.reason)
    assert all(r.status == "skipped" for r in results if "anomalous" in r.row.note)
    predicted = {r.row.setup_id for r in results if r.status == "predicted"}
    assert {"S15_aws_p3dn_efa_2x8_awsdoc", "S09_azure_ndA100v4_1x8", "S27_v100_ib_edr1nic_4x8"} <= (
        predicted
    )


def test_the_prediction_is_predicts_own_communication_model(results):
    """Each predicted time is what ddlsim.prepare's communication model gives that size."""
    checked = 0
    for r in results:
        if r.status != "predicted" or r.row.setup_id not in (
            "S15_aws_p3dn_efa_2x8_awsdoc",
            "S38_v100_p3dn_tcp_2x8",
        ):
            continue
        setup = ddlsim.prepare(
            ddlsim.job(
                "resnet50",
                r.row.gpus_total,
                gpu="v100-sxm2",
                gpus_per_node=8,
                inter_node="efa" if "efa" in r.row.network else "100gbe",
                transport="rdma" if "efa" in r.row.network else "tcp",
                nccl_version="2.4",
                algorithm="ring",
            )
        )
        assert r.predicted_s == pytest.approx(setup.comm.time_s(r.size_bytes), rel=1e-12)
        checked += 1
    assert checked == 29


def test_measured_time_basis(results):
    by = {(r.row.setup_id, r.size_bytes): r for r in results if r.status == "predicted"}
    s15 = by[("S15_aws_p3dn_efa_2x8_awsdoc", 8)]
    assert s15.basis == "time" and s15.measured_s == pytest.approx(145.4e-6)
    s09 = by[("S09_azure_ndA100v4_1x8", 1024**3)]  # busbw only: time = S x 2(n-1)/n / busbw
    assert s09.basis == "busbw" and s09.measured_s == pytest.approx(1024**3 * 1.75 / 228.10e9)
    s27 = next(r for r in results if r.row.setup_id.startswith("S27") and r.status == "predicted")
    assert s27.basis == "plateau" and s27.size_bytes == 1024**3


@pytest.mark.parametrize(
    ("size", "band"),
    [(1, "< 64 KiB"), (64 * KiB - 1, "< 64 KiB"), (64 * KiB, "64 KiB - 16 MiB"),
     (16 * MiB, "64 KiB - 16 MiB"), (16 * MiB + 1, "> 16 MiB")],
)  # fmt: skip
def test_size_bands(results, size, band):
    r = next(r for r in results if r.status == "predicted")
    assert CollectiveResult(r.row, r.status, size_bytes=size).band == band


def test_forced_algorithm_from_the_note():
    assert forced_algorithm("ring forced (NCCL_TREE_THRESHOLD=0); x") == "ring"
    assert forced_algorithm("NCCL_ALGO=Tree forced") == "tree"
    assert forced_algorithm("default algo") == "auto"


def test_forced_protocol_from_the_note():
    assert forced_protocol("NCCL_ALGO=Ring NCCL_PROTO=Simple NCCL_MIN/MAX_NCHANNELS=8") == "Simple"
    assert forced_protocol("NCCL_PROTO=ll128") == "LL128"
    assert forced_protocol("NCCL_PROTO=Simple,LL128") == "auto"  # NCCL still chooses
    assert forced_protocol("default algo") == "auto"


def test_a_forced_protocol_is_the_one_the_rows_run_with():
    modern = read_collectives(CSV.with_name("nccl_tests_modern.csv"))
    rows = [r for r in modern if r.setup_id.startswith("S60_")]
    labels = {r.label.get("protocol") for r in validate_collectives(rows)}
    assert labels == {"Simple"}


def test_the_cli_reports_setups_bands_and_skips(cli):
    code, out, err = cli("validate", str(CSV))
    assert code == 0 and err == ""
    assert "by size band" in out and "< 64 KiB" in out and "> 16 MiB" in out
    assert "S15_aws_p3dn_efa_2x8_awsdoc" in out and "[anomalous]" in out
    assert "[unknown-gpu] GPU 'B300' is not in the catalog" in out
    code, out, _ = cli("validate", str(CSV), "--json", "--source", "S15_aws_p3dn_efa_2x8_awsdoc")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["n_predicted"] == 28
    assert set(doc["summary"]["by_setup_band"]["S15_aws_p3dn_efa_2x8_awsdoc"]) == {
        "< 64 KiB", "64 KiB - 16 MiB", "> 16 MiB"
    }  # fmt: skip


def test_runs_only_flags_and_unknown_setups_are_refused(cli):
    code, _, err = cli("validate", str(CSV), "--assume-batch", "64")
    assert code == 2 and "--assume-batch applies to measured runs" in err
    code, _, err = cli("validate", str(CSV), "--source", "S99")
    assert code == 2 and "S99" in err and "S15_aws_p3dn_efa_2x8_awsdoc" in err
