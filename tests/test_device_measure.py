"""scripts/device_measure.py: its files have exactly the measured kernel files' columns and
``ddlsim kernels`` reads them (``--smoke`` on the CPU: the format, not the numbers); the check
reads its timing statistics and FlashAttention rows the way the README defines them."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from ddlsim.compute import gemm
from ddlsim.compute.gemm_check import read_transformer_csv
from ddlsim.compute.gemm_fit import fitted_row, leave_one_gpu_out
from ddlsim.compute.transformer_ops import flash_attention_s
from ddlsim.system import catalog

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_measure.py"
MEASURED = ROOT / "traces" / "measured" / "kernels" / "transformer"


def _script():
    spec = importlib.util.spec_from_file_location("device_measure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _header(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return next(csv.reader(f))


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """One ``--smoke`` run on the CPU, its gpu column set to a catalog GPU so that the check
    predicts its rows (the CPU is in no catalog)."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("device")
    rc = _script().main(["--smoke", "--out", str(out), "--budget-s", "120", "--gpu", "h100"])
    assert rc == 0
    return out


def test_the_files_have_the_measured_files_columns(smoke: Path) -> None:
    """gemm.csv and attention.csv: gemm.csv's header; elementwise.csv: elementwise.csv's."""
    assert _header(smoke / "gemm.csv") == _header(MEASURED / "gemm.csv")
    assert _header(smoke / "attention.csv") == _header(MEASURED / "gemm.csv")
    assert _header(smoke / "elementwise.csv") == _header(MEASURED / "elementwise.csv")


def test_every_section_wrote_rows_ddlsim_kernels_predicts(smoke: Path) -> None:
    """Every GEMM and FlashAttention row is predicted; of the element-wise rows only the ops
    the model has no route for (eager SiLU-and-mul, unfused cross-entropy) are skipped."""
    for name in ("gemm.csv", "attention.csv", "elementwise.csv"):
        rows, skipped, n = read_transformer_csv(smoke / name)
        assert n > 0 and len(rows) + len(skipped) == n
        assert all(r.source == "ddlsim_device" and r.measured_us > 0 for r in rows)
        assert all(r.time_stat in gemm.TIMINGS for r in rows)
        reasons = {s.reason for s in skipped}
        if name == "elementwise.csv":
            assert reasons <= {
                "op 'silu_and_mul_eager' is not a modelled memory-bound op",
                "op 'cross_entropy' is not a modelled memory-bound op",
            }
            assert {r.op for r in rows} >= {"layernorm", "softmax", "gelu", "add", "dropout"}
        else:
            assert not skipped
    gemm_rows, _, _ = read_transformer_csv(smoke / "gemm.csv")
    assert {r.precision for r in gemm_rows} >= {"bf16", "fp16", "tf32", "fp32"}
    assert {r.op for r in gemm_rows} == {"gemm", "bmm"}
    flash, _, _ = read_transformer_csv(smoke / "attention.csv")
    assert {r.op for r in flash} == {"flash_fwd", "flash_bwd"}
    assert {r.causal for r in flash} == {True, False}


def test_the_machine_file_and_the_steps(smoke: Path) -> None:
    """machine.json names the run, the software and each section's outcome; steps.csv has a
    positive step time whose tokens/s is micro-batch x seq / step."""
    doc = json.loads((smoke / "machine.json").read_text())
    assert doc["gpu"] == "h100" and doc["torch"] and doc["smoke"] is True
    assert set(doc["timing"]) == {"graph10_median5", "event10_median5", "event_step_median10"}
    assert doc["sections"]["gemm_zoo_bf16"]["status"] in ("done", "cut by the budget")
    with (smoke / "steps.csv").open(encoding="utf-8") as f:
        steps = list(csv.DictReader(f))
    assert steps
    for r in steps:
        tokens = int(r["micro_batch"]) * int(r["seq"])
        assert float(r["tokens_per_s"]) == pytest.approx(tokens / float(r["step_s"]), rel=1e-3)


def test_the_check_runs_ddlsim_kernels(smoke: Path, capsys) -> None:
    """``--check DIR``: ddlsim kernels on each CSV, exit 0, then the steps."""
    assert _script().main(["--check", str(smoke)]) == 0
    assert "ms/step" in capsys.readouterr().out


def test_a_spent_budget_still_leaves_well_formed_files(tmp_path: Path) -> None:
    """A budget spent at once: headers, machine.json with every section 'not run'."""
    pytest.importorskip("torch")
    assert _script().main(["--smoke", "--out", str(tmp_path), "--budget-s", "1e-9"]) == 0
    assert _header(tmp_path / "gemm.csv") == _header(MEASURED / "gemm.csv")
    doc = json.loads((tmp_path / "machine.json").read_text())
    assert {s["status"] for s in doc["sections"].values()} == {"not run: budget spent"}


def test_device_names_map_to_the_catalog() -> None:
    """torch.cuda.get_device_name strings -> catalog ids; a GPU the catalog lacks -> a slug."""
    gpu_id = _script().gpu_id
    assert gpu_id("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu_id("NVIDIA H100 PCIe") == "h100-pcie"
    assert gpu_id("NVIDIA H200") == "h200"
    assert gpu_id("NVIDIA B200") == "b200"
    assert gpu_id("NVIDIA H100 NVL") == "nvidia-h100-nvl"
    assert gpu_id("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb"


def test_the_new_time_stats() -> None:
    """graph10_median5 is kernel time; event10_median5 is back-to-back calls: the larger of
    the kernel and the host's issue interval, and checked only (no fit sees it)."""
    m = gemm.default_gemm_model()
    assert gemm.as_measured_s(1e-6, "graph10_median5") == 1e-6
    assert gemm.as_measured_s(1e-9, "event10_median5") == m.issue_interval_s
    assert gemm.as_measured_s(1.0, "event10_median5") == 1.0
    assert gemm.TIMING_CALLS["graph10_median5"] == 64


def test_flash_rows_are_flash_attention(tmp_path: Path) -> None:
    """A flash row is predicted by flash_attention_s (batch = micro-batch x heads), causal from
    source_op; it enters no fit, and leave-one-GPU-out still reports it."""
    header = ",".join(_header(MEASURED / "gemm.csv"))
    lines = [header]
    for op, src in (("flash_fwd", "sdpa_flash heads=16"), ("flash_bwd", "sdpa_flash causal")):
        lines.append(f"ddlsim_device,x,h100,bf16,m,{op},64,4096,4096,128,N,T,1000.0,"
                     f"graph10_median5,,,1,{src}")  # fmt: skip
    path = tmp_path / "attention.csv"
    path.write_text("\n".join(lines) + "\n")
    rows, skipped, _ = read_transformer_csv(path)
    assert not skipped and [r.causal for r in rows] == [False, True]
    h100 = catalog.device("h100")
    fwd = flash_attention_s(4, 16, 4096, 128, h100, "bf16", direction="fwd")
    from ddlsim.compute.gemm_check import predict

    assert predict(rows[0]).predicted_ms == pytest.approx(fwd * 1e3)
    bwd = flash_attention_s(64, 1, 4096, 128, h100, "bf16", direction="bwd", causal=True)
    assert predict(rows[1]).predicted_ms == pytest.approx(bwd * 1e3)
    assert not any(fitted_row(r) for r in rows)
    held_out, _ = leave_one_gpu_out(rows, gemm.default_gemm_model())
    assert set(held_out) == {("h100", "bf16", "flash_fwd"), ("h100", "bf16", "flash_bwd")}
