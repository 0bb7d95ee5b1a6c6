"""Numbers the README quotes from a command, each produced here by running that command
(issue 33: the README had gone stale against its own commands).

Each test runs the command the README names and asserts that the number it prints is the one
the README quotes, in the README's own words (whitespace and line breaks aside). The pattern of
``tests/test_readme_examples.py`` (the sample report) and the track record, extended to the
prose.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
K80 = REPO / "calibration" / "k80" / "resnet50" / "b64-fp32.json"


def quoted(text: str) -> None:
    """``text`` is in the README (whitespace normalised)."""
    assert " ".join(text.split()) in README, text


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "usercal"
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(folder))
    return folder


def throughput(out: str) -> str:
    return re.search(r"throughput\s+([\d.]+) images/s", out).group(1)


def test_the_transfer_example(cli, user_dir):
    """``ddlsim predict --gpu v100`` on 8 GPUs before and after the k80 -> v100 transfer, and
    with the transferred file given."""
    code, out, _ = cli("predict", "--gpus", "8", "--gpu", "v100")
    assert code == 0 and throughput(out) == "2585.9"
    assert cli("calibrate", "--calibration", str(K80), "--transfer-to", "v100")[0] == 0
    assert throughput(cli("predict", "--gpus", "8", "--gpu", "v100")[1]) == "2585.9"
    mine = user_dir / "v100-sxm2" / "resnet50" / "b64-fp32.json"
    code, out, _ = cli("predict", "--gpus", "8", "--gpu", "v100", "--calibration", str(mine))
    assert code == 0 and throughput(out) == "1406.6"
    quoted("predict --gpu v100` (2,585.9 images/s on 8 GPUs before and after)")
    quoted("`--calibration` (1,406.6 images/s)")


def test_horovod_on_this_machines_cpu(cli):
    argv = ["--model", "alexnet", "--gpus", "2", "--gpu", "epyc-zen4-core"]
    argv += ["--comm", "horovod-gloo", "--batch", "16"]
    code, out, _ = cli("predict", *argv)
    assert code == 0 and "scaling efficiency         80.2 %" in out
    quoted("predicted 78.3% in the record (80.2% today)")
    p = json.loads(cli("predict", *argv, "--json")[1])
    measured = 24.74  # the README's table, 2 workers
    assert f"{p['images_per_sec']:.2f}" == "25.60"
    assert f"{100 * (p['images_per_sec'] / measured - 1):+.1f}%" == "+3.5%"
    assert round(1000 * p["breakdown"]["comm_exposed_s"]) == 235
    assert round(1000 * p["breakdown"]["straggler_wait_s"]) == 11
    quoted("25.60 images/s (+3.5%) for 2 workers from the calibration alone")
    quoted("its Gloo exchange is now 235 ms exposed per step and the per-rank wait 11 ms")
    code, out, _ = cli("validate", str(REPO / "traces/horovod/runs.csv"))
    row = next(line for line in out.splitlines() if line.startswith("HVD_LOCAL_CPU-0002"))
    assert code == 0 and row.split()[-3:-1] == ["25.5", "+2.9%"]
    quoted("and 25.5 (+2.9%) anchored")


def test_the_network_calibration_examples(cli, tmp_path):
    logs = str(REPO / "traces/measured/collectives/logs/S15_all_reduce_perf.log")
    code, out, _ = cli(
        "calibrate", "network", logs, "--inter-node", "efa", "-o", str(tmp_path / "e.json")
    )
    assert code == 0
    assert "bandwidth 7.505 GB/s (catalog 7.000), latency 49.70 us (catalog 46.00 us)" in out
    quoted(
        "gives 7.5 GB/s and 50 us per network hop where the catalog assumes 7.000 GB/s and 46 us"
    )
    for sweep, bandwidth, latency in [
        (REPO / "traces/gloo/allreduce_torch.json", "1.524", "647.87"),
        (REPO / "traces/horovod/allreduce_sweep.json", "1.088", "1080.71"),
    ]:
        argv = [
            "--gpu",
            "epyc-zen4-core",
            "--intra-node",
            "loopback",
            "-o",
            str(tmp_path / "l.json"),
        ]
        code, out, _ = cli("calibrate", "network", str(sweep), *argv)
        assert code == 0 and f"bandwidth {bandwidth} GB/s" in out and f"latency {latency} us" in out
    quoted("1.52 GB/s and 648 us per ring step")
    quoted("gives 1.09 GB/s and 1,081 us")


def test_the_modern_runs_validation(cli):
    code, out, _ = cli("validate", str(REPO / "traces/measured/runs_modern.csv"))
    assert code == 0
    groups = {line.split()[0]: line.split()[1:4] for line in out.splitlines() if line[:2] == "  "}
    assert groups["ddp"][:2] == ["185", "5.0%"]
    quoted("rows 5.0% (185)")
    total = next(line for line in out.splitlines() if line.startswith("all predicted rows"))
    assert total.split()[3:5] == ["207", "5.0%"] and total.split()[7] == "-1.1%"
    quoted("207 predicted with the compute anchored, MAPE 5.0% (bias -1.1%)")


def test_the_modern_runs_absolute_groups(cli):
    """``--absolute``, the 1-GPU rows by GPU and precision: every group over 15% is named in
    the README with its MAPE (issue 33: two A100 PCIe groups were missing)."""
    code, out, _ = cli(
        "validate", str(REPO / "traces/measured/runs_modern.csv"), "--absolute", "--json"
    )
    assert code == 0
    with (REPO / "traces/measured/runs_modern.csv").open(encoding="utf-8", newline="") as f:
        precision = {r["run_id"]: r["precision"] for r in csv.DictReader(f)}
    rows = [r for r in json.loads(out)["rows"] if r["status"] == "predicted" and r["gpus"] == 1]
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        errors[(r["gpu"], precision[r["run_id"]])].append(abs(r["rel_error"]))
    mape = {k: 100 * sum(v) / len(v) for k, v in errors.items()}
    assert len(rows) == 170 and f"{100 * sum(abs(r['rel_error']) for r in rows) / 170:.1f}" == (
        "12.4"
    )
    quoted("MAPE 12.4% over 170 rows")
    names = {
        ("a100", "fp32"): "A100 40 GB TF32",
        ("a100-sxm4-80gb", "amp"): "A100 80 GB amp",
        ("a100-sxm4-80gb", "fp32"): "and TF32",
        ("h100", "amp"): "H100 amp",
        ("a100-pcie-40gb", "amp"): "A100 PCIe 40 GB amp",
        ("a100-pcie-80gb", "amp"): "A100 PCIe 80 GB amp",
    }
    over = sorted(k for k, v in mape.items() if v > 15)
    assert over == sorted(names)
    for key in over:
        quoted(f"{names[key]} {mape[key]:.1f}%")
    assert f"{mape[('a100', 'amp')]:.1f}" == "11.8" and f"{mape[('h100', 'fp32')]:.1f}" == "4.2"
    quoted("H100 TF32 4.2%, H100 PCIe 4-10%, A100 40 GB amp 11.8%")


def _mape(errors: list[float]) -> str:
    return f"{100 * sum(abs(e) for e in errors) / len(errors):.1f}%"


def test_the_modern_runs_by_gpu_count(cli):
    """The per-GPU-count MAPEs of runs_modern.csv (issue 33: quoted without a test)."""
    code, out, _ = cli("validate", str(REPO / "traces/measured/runs_modern.csv"), "--json")
    assert code == 0
    by_count: dict[int, list[float]] = defaultdict(list)
    for r in json.loads(out)["rows"]:
        if r["status"] == "predicted":
            by_count[r["gpus"]].append(r["rel_error"])
    two, four, eight, sixteen = (_mape(by_count[n]) for n in (2, 4, 8, 16))
    assert len(by_count[8]) == 140
    quoted(f"the 2-GPU rows {two}, 4-GPU {four}, 8-GPU {eight} (140 rows;")
    quoted(f"DGX-2's 16 GPUs {sixteen}")


def test_the_seed_runs_headline(cli):
    """runs.csv's headline paragraph: the rows without an assumption, by method, single-node,
    and the rows whose stack is stated (issue 33: quoted without a test)."""
    code, out, _ = cli("validate", str(REPO / "traces/measured/runs.csv"))
    assert code == 0
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.startswith("rows without assumption")).split()
    n, mape, median, p90, bias = head[3:8]
    quoted(
        f"The headline, {n} rows: MAPE {mape} (median {median}, 90th percentile {p90}, bias {bias})"
    )
    group = {ln.split()[0]: ln.split()[1:] for ln in lines if ln.startswith("  ")}
    words = {
        "horovod-nccl": "horovod-nccl",
        "byteps": "BytePS",
        "ps": "parameter servers",
        "replicated-cpu": "replicated-cpu",
        "distributed-replicated": "distributed-replicated",
        "replicated-nccl": "replicated-nccl",
    }
    for method, word in words.items():
        quoted(f"{word} {group[method][1]}")
    none = group["none"]
    quoted(f"the {none[0]} single-node rows {none[1]} (bias {none[4]})")
    stated = group["stated"]
    quoted(f"{stated[1]}. Most of the multi-node")
    assert stated[0] == "18"


def test_the_fsdp_validation(cli):
    """The FSDP and ZeRO rows of runs_transformers.csv, no anchor (issue 31)."""
    path = str(REPO / "traces/measured/runs_transformers.csv")
    code, out, _ = cli("validate", path, "--absolute", "--json")
    assert code == 0
    rows = [r for r in json.loads(out)["rows"] if r["status"] == "predicted"]
    fsdp = [r["rel_error"] for r in rows if r["comm"] == "fsdp"]
    zero = [r["rel_error"] for r in rows if r["comm"] == "zero1"]
    h100 = [r["rel_error"] for r in rows if r["comm"] == "fsdp" and r["gpu"] == "h100"]
    assert len(fsdp) == 192 and len(zero) == 6 and len(h100) == 28
    bias = f"{100 * sum(fsdp) / len(fsdp):+.1f}%"
    quoted(f"the 192 whose network is stated come out at MAPE {_mape(fsdp)} (bias {bias})")
    quoted(f"H100 8 GPUs {_mape(h100)} ({100 * sum(h100) / len(h100):+.1f}%:")
    quoted(f"The 6 DeepSpeed ZeRO-1 rows: {_mape(zero)}")


def _band_mape(rows: list[dict], lo: float, hi: float) -> str:
    errors = [r["rel_error"] for r in rows if lo < r["size_bytes"] <= hi]
    return _mape(errors)


def test_the_collectives_validation(cli):
    """The measured collectives' figures: nccl_tests.csv by size band, nccl_tests_modern.csv by
    collective and (for all_gather) by size."""
    code, out, _ = cli("validate", str(REPO / "traces/measured/collectives/nccl_tests.csv"))
    assert code == 0
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.startswith("all predicted rows")).split()

    def band(name: str) -> str:  # the "by size band" line: n, MAPE, median, bias
        line = next(ln for ln in lines if ln.startswith(f"  {name} "))
        return line[len(name) + 2 :].split()[1]

    small, mid, large = (band(b) for b in ("< 64 KiB", "64 KiB - 16 MiB", "> 16 MiB"))
    quoted(f"MAPE {head[4]} (bias {head[6]}): < 64 KiB {small}, 64 KiB - 16 MiB {mid}, ")
    quoted(f"> 16 MiB {large}")
    path = REPO / "traces/measured/collectives/nccl_tests_modern.csv"
    code, out, _ = cli("validate", str(path), "--json")
    assert code == 0
    with path.open(newline="") as f:
        kind = {i: r["collective"] for i, r in enumerate(csv.DictReader(f), start=2)}
    by: dict[str, list[dict]] = defaultdict(list)
    for r in json.loads(out)["rows"]:
        if r["status"] == "predicted":
            by[kind[r["line"]]].append(r)
    ar, ag, rs = (by[c] for c in ("all_reduce", "all_gather", "reduce_scatter"))
    assert (len(ar), len(ag), len(rs)) == (245, 280, 7)

    def bias(rows: list[dict]) -> str:
        return f"{100 * sum(r['rel_error'] for r in rows) / len(rows):+.1f}%"

    errors = {c: [r["rel_error"] for r in rows] for c, rows in by.items()}
    quoted(f"all_reduce 245 rows {_mape(errors['all_reduce'])} MAPE (bias {bias(ar)})")
    quoted(f"reduce_scatter 7 rows {_mape(errors['reduce_scatter'])};")
    mib = 2**20
    quoted(
        f"all_gather 280 rows {_mape(errors['all_gather'])} (bias {bias(ag)}: by size, up to "
        f"1 MiB {_band_mape(ag, 0, mib)}, 1-16 MiB {_band_mape(ag, mib, 16 * mib)}, 16-256 MiB "
        f"{_band_mape(ag, 16 * mib, 256 * mib)}, above 256 MiB {_band_mape(ag, 256 * mib, 1e30)})"
    )


def test_the_transformer_kernel_figures(cli):
    """The headline figures of the transformer kernel check (docs/design.md has the groups)."""
    docs = {}
    for name in ("gemm.csv", "elementwise.csv"):
        path = str(REPO / "traces/measured/kernels/transformer" / name)
        code, out, _ = cli("kernels", path, "--no-held-out", "--json")
        assert code == 0
        docs[name] = json.loads(out)

    def mape(rows: list) -> str:
        return f"{100 * sum(abs(r['rel_error']) for r in rows) / len(rows):.1f}%"

    rows = docs["gemm.csv"]["rows"]
    ratios = sorted(r["measured_ms"] / r["predicted_ms"] for r in rows)
    median = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
    quoted(
        f"All {len(rows)} GEMM rows: MAPE {mape(rows)}, median measured / predicted {median:.2f}"
    )
    groups = {
        (g["gpu"], g["precision"], g["op"]): g
        for g in docs["gemm.csv"]["summary"]["by_gpu_precision_op"]
    }
    t4 = [f"{100 * groups[('t4', p, 'gemm')]['mape']:.1f}%" for p in ("fp16", "fp32")]
    l4 = f"{100 * groups[('l4', 'fp32', 'gemm')]['mape']:.1f}%"
    quoted(f"(T4 fp16 {t4[0]}, fp32 {t4[1]}; the L4 {l4}")
    elem = docs["elementwise.csv"]["rows"]
    quoted(f"all {len(elem)} element-wise rows: {mape(elem)}")
