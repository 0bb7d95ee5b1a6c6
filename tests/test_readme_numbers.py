"""Numbers the README quotes from a command, each produced here by running that command
(issue 33: the README had gone stale against its own commands).

Each test runs the command the README names and asserts that the number it prints is the one
the README quotes, in the README's own words (whitespace and line breaks aside). The pattern of
``tests/test_readme_examples.py`` (the sample report) and the track record, extended to the
prose. A command runs once per module (:func:`ran`), however many tests read it; a
``--assume-*`` run stands in for the plain one where the rows it adds are marked (``assumption``)
and summarised apart, so the plain figures are those of the rows without an assumption.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ddlsim.cli.main import main

REPO = Path(__file__).resolve().parents[1]
README = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
K80 = REPO / "calibration" / "k80" / "resnet50" / "b64-fp32.json"
MEASURED = REPO / "traces" / "measured"
RUNS = str(MEASURED / "runs.csv")
MODERN = str(MEASURED / "runs_modern.csv")
TRANSFORMERS = str(MEASURED / "runs_transformers.csv")
#: the --assume-* runs the README quotes (their assumed rows are marked and summarised apart)
MODERN_ASSUMED = ("validate", MODERN, "--assume-inter-node", "ib-hdr")
MODERN_ASSUMED += ("--assume-nics-per-node", "8", "--json")
TRANSFORMERS_ABSOLUTE = ("validate", TRANSFORMERS, "--absolute", "--json")

_RAN: dict[tuple[str, ...], tuple[int, str, str]] = {}


@pytest.fixture(scope="module", autouse=True)
def _no_user_calibration(tmp_path_factory: pytest.TempPathFactory):
    """The commands of :func:`ran` see no user calibration (a developer's own files)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))
        yield
    _RAN.clear()


def ran(*argv: str) -> tuple[int, str, str]:
    """``ddlsim ARGV`` in-process, once per module: (exit code, stdout, stderr)."""
    if argv not in _RAN:
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # with .buffer, like sys.stdout
        err = io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv))
        out.flush()
        _RAN[argv] = (code, out.buffer.getvalue().decode("utf-8"), err.getvalue())
    return _RAN[argv]


def doc(*argv: str) -> dict:
    """The ``--json`` document of a command that succeeds."""
    code, out, err = ran(*argv)
    assert code == 0, err
    return json.loads(out)


def predicted(document: dict, *, assumed: bool = False) -> list[dict]:
    """The predicted rows of a validate document; those resting on an ``--assume-*`` (or a
    catalog) assumption only with ``assumed``."""
    rows = [r for r in document["rows"] if r["status"] == "predicted"]
    return [r for r in rows if assumed or r.get("assumption") is None]


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def signed(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _mape(errors: list[float]) -> str:
    return pct(sum(abs(e) for e in errors) / len(errors))


def _bias(errors: list[float]) -> str:
    return signed(sum(errors) / len(errors))


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


def test_the_modern_runs_validation():
    """runs_modern.csv anchored: the headline, the DDP rows, the per-GPU-count MAPEs, what is
    skipped, and the 16-64-GPU EfficientNet rows under the README's assumed network."""
    document = doc(*MODERN_ASSUMED)
    summary, rows = document["summary"], predicted(document)
    assert summary["n_rows"] == 440 and summary["overall"]["n"] == len(rows) == 207
    quoted(f"`traces/measured/runs_modern.csv` ({summary['n_rows']} rows of V100")
    overall = summary["overall"]
    quoted(
        f"{overall['n']} predicted with the compute anchored, MAPE {pct(overall['mape'])} "
        f"(bias {signed(overall['mean_rel_error'])})"
    )
    ddp = summary["by_comm"]["ddp"]
    quoted(f"rows {pct(ddp['mape'])} ({ddp['n']})")
    by_count: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        by_count[r["gpus"]].append(r["rel_error"])
    two, four, eight, sixteen = (_mape(by_count[n]) for n in (2, 4, 8, 16))
    assert len(by_count[8]) == 140
    quoted(f"the 2-GPU rows {two}, 4-GPU {four}, 8-GPU {eight} (140 rows;")
    quoted(f"DGX-2's 16 GPUs {sixteen}")
    with open(MODERN, encoding="utf-8", newline="") as f:
        cells = {r["run_id"]: r for r in csv.DictReader(f)}
    b0 = [
        r["rel_error"]
        for r in rows
        if (r["gpus"], r["gpu"], r["model"]) == (8, "v100-sxm2", "efficientnet-b0")
        and cells[r["run_id"]]["batch_per_gpu"] == "256"
        and cells[r["run_id"]]["data"] == "real"
    ]
    assert [f"{100 * e:+.0f}%" for e in b0] == ["-14%", "-14%"]
    quoted("-14% for EfficientNet-B0 at batch 256 on a DGX-1V")
    assumed = predicted(document, assumed=True)
    assumed = [r for r in assumed if r["assumption"] is not None]
    assert len(assumed) == summary["n_under_catalog_assumption"] == 16  # network-unknown without
    assert {r["model"].startswith("efficientnet") and r["gpus"] >= 16 for r in assumed} == {True}
    host_bound = [r["rel_error"] for r in assumed if r["rel_error"] > 0.15]
    worst = " and ".join(f"{100 * e:+.0f}%" for e in sorted(host_bound, reverse=True))
    quoted(f"MAPE {_mape([r['rel_error'] for r in assumed])}, the two host-input-bound B0 amp")
    quoted(f"B0 amp rows {worst}. {summary['skipped_by_code']['suspect']} rows the file flags")


def test_the_modern_runs_absolute_groups():
    """``--absolute``, the 1-GPU rows by GPU and precision: every group over 15% is named in
    the README with its MAPE (issue 33: two A100 PCIe groups were missing)."""
    with open(MODERN, encoding="utf-8", newline="") as f:
        precision = {r["run_id"]: r["precision"] for r in csv.DictReader(f)}
    rows = [r for r in predicted(doc("validate", MODERN, "--absolute", "--json")) if r["gpus"] == 1]
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        errors[(r["gpu"], precision[r["run_id"]])].append(abs(r["rel_error"]))
    mape = {k: 100 * sum(v) / len(v) for k, v in errors.items()}
    assert len(rows) == 170
    quoted(f"MAPE {_mape([r['rel_error'] for r in rows])} over 170 rows")
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
    v100 = [v for (gpu, _), v in mape.items() if gpu.startswith("v100")]
    pcie = [v for (gpu, _), v in mape.items() if gpu == "h100-pcie"]
    assert min(v100) >= 5 and max(v100) < 11.5 and min(pcie) >= 4 and max(pcie) < 10.5
    quoted("V100 within 5-11% per GPU and precision")


def test_the_seed_runs_headline():
    """runs.csv's headline paragraph: what is predicted and skipped, the rows without an
    assumption, by method, single-node, and the rows whose stack is stated."""
    summary = doc("validate", RUNS, "--json")["summary"]
    skipped = summary["skipped_by_code"]
    no_method = skipped["comm-not-modelled"] + skipped["comm-not-stated"]
    quoted(
        f"`traces/measured/runs.csv` ({summary['n_rows']} rows): {summary['n_predicted']} "
        f"predicted, {summary['n_skipped']} skipped with their reason "
        f"({skipped['baseline-row']} baselines, {skipped['no-batch']} no batch size, "
        f"{skipped['no-precision']} no precision, {no_method} no modelled method;"
    )
    assert len(skipped) == 5  # no other reason, no malformed row
    quoted(f"{summary['n_under_catalog_assumption']} of the predicted rows (HKBU_DDLBENCH2020")
    head = summary["overall"]
    quoted(
        f"The headline, {head['n']} rows: MAPE {pct(head['mape'])} (median "
        f"{pct(head['median_ape'])}, 90th percentile {pct(head['p90_ape'])}, bias "
        f"{signed(head['mean_rel_error'])})"
    )
    words = {
        "horovod-nccl": "horovod-nccl",
        "byteps": "BytePS",
        "ps": "parameter servers",
        "replicated-cpu": "replicated-cpu",
        "distributed-replicated": "distributed-replicated",
        "replicated-nccl": "replicated-nccl",
    }
    for method, word in words.items():
        quoted(f"{word} {pct(summary['by_comm'][method]['mape'])}")
    one = summary["by_network"]["none"]
    quoted(
        f"the {one['n']} single-node rows {pct(one['mape'])} (bias {signed(one['mean_rel_error'])})"
    )
    stated = summary["by_stack"]["stated"]
    assert stated["n"] == 18
    quoted(f"{pct(stated['mape'])}. Most of the multi-node")


def test_the_large_n_horovod_rows():
    """HVD_README_EFF's six efficiency-only rows, with the 2018 stack and with today's defaults:
    the distance in efficiency points."""
    argv = ["validate", RUNS, "--source", "HVD_README_EFF", "--assume-batch", "64"]
    argv += ["--assume-precision", "fp32", "--json"]

    def points(*more: str) -> dict[tuple[str, int], float]:
        rows = predicted(doc(*argv, *more), assumed=True)
        assert len(rows) == 6
        gap = {}
        for r in rows:
            gap[(r["model"], r["gpus"])] = 100 * (
                r["predicted_scaling_efficiency"] - r["measured_scaling_efficiency"]
            )
        return gap

    old = sorted(
        abs(v) for v in points("--horovod-version", "0.12", "--nccl-version", "2.1").values()
    )
    quoted(f"within {old[0]:.1f}-{old[-1]:.1f} points, all six")
    today = points()
    vgg = today.pop(("vgg16", 512))
    rest = sorted(abs(v) for v in today.values())
    assert vgg > 0
    quoted(
        f"within {rest[0]:.1f}-{rest[-1]:.1f} points, except VGG-16 at 512 ({vgg:.1f} points high)"
    )


def test_the_transformer_validation_absolute():
    """runs_transformers.csv without an anchor: the 1-GPU rows, and the FSDP and ZeRO rows
    (issue 31), from one ``--absolute`` run."""
    document = doc(*TRANSFORMERS_ABSOLUTE)
    rows = predicted(document)
    fsdp = [r["rel_error"] for r in rows if r["comm"] == "fsdp"]
    zero = [r["rel_error"] for r in rows if r["comm"] == "zero1"]
    h100 = [r["rel_error"] for r in rows if r["comm"] == "fsdp" and r["gpu"] == "h100"]
    assert len(fsdp) == 192 and len(zero) == 6 and len(h100) == 28
    quoted(f"the 192 whose network is stated come out at MAPE {_mape(fsdp)} (bias {_bias(fsdp)})")
    quoted(f"H100 8 GPUs {_mape(h100)} ({_bias(h100)}:")
    quoted(f"The 6 DeepSpeed ZeRO-1 rows: {_mape(zero)}")
    small = [r["rel_error"] for r in rows if r["comm"] == "fsdp" and r["model"] == "mpt-125m"]
    quoted(
        f"MPT-125M went from 16-19% too slow to {100 * sum(small) / len(small):+.0f}% on average"
    )
    bands: dict[str, list[float]] = defaultdict(list)  # A100 rows by node count (8 GPUs a node)
    for r in rows:
        if r["comm"] == "fsdp" and r["gpu"].startswith("a100"):
            nodes = r["gpus"] // 8
            bands["1" if nodes == 1 else "2-8" if nodes <= 8 else "9-64"].append(r["rel_error"])
    mapes = sorted(_mape(v) for v in bands.values())
    biases = sorted(round(100 * sum(v) / len(v)) for k, v in bands.items() if k != "1")
    quoted(f"A100 {mapes[0][:-1]}-{mapes[-1]} per GPU-count band (8 GPUs {_bias(bands['1'])},")
    quoted(f"16-128 GPUs +{biases[0]} to +{biases[-1]}%")
    single = document["summary"]["single_gpu_by_gpu_precision_framework"]
    one = document["summary"]["by_comm"]["single"]
    quoted(
        f"the 1-GPU rows come out at MAPE {pct(one['mape'])}, bias "
        f"{signed(one['mean_rel_error'])} ({one['n']} rows;"
    )
    v100_tf = [pct(single[f"v100-{p} fp32 tensorflow"]["mape"]) for p in ("sxm2", "sxm3")]
    quoted(f"V100 fp32 TensorFlow is within {v100_tf[0]} and {v100_tf[1]} (SXM2, SXM3)")

    def span(groups: list[str]) -> str:
        values = sorted(100 * single[g]["mape"] for g in groups)
        return f"{values[0]:.1f}-{values[-1]:.1f}%"

    torch = [g for g in single if g.startswith(("v100-sxm2 ", "v100-sxm3 ")) and "pytorch" in g]
    quoted(f"the V100 PyTorch groups (DLE's Transformer-XL) {span(torch)}")
    amp_tf = [g for g in single if g.endswith(" amp tensorflow")]
    quoted(f"the amp TensorFlow groups {span(amp_tf)}")
    lambda_txl: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if (
            r["gpus"] == 1
            and r["source_id"].startswith("LAMBDA")
            and "transformer-xl" in r["model"]
        ):
            lambda_txl[(r["source_id"], r["model"])].append(r["rel_error"])
    means = sorted(100 * sum(v) / len(v) for v in lambda_txl.values())
    quoted(f"Lambda's Transformer-XL rows stay {means[0]:.0f}-{means[-1]:.0f}% too fast")


@pytest.mark.slow
def test_the_fsdp_rows_under_an_assumed_network():
    """All 208 FSDP rows, the H100 tables' network assumed (the 113 assumed rows cost 13 s)."""
    argv = [*TRANSFORMERS_ABSOLUTE[:-1], "--assume-inter-node", "ib-ndr"]
    rows = predicted(doc(*argv, "--assume-nics-per-node", "8", "--json"), assumed=True)
    fsdp = [r["rel_error"] for r in rows if r["comm"] == "fsdp"]
    assert len(fsdp) == 208
    quoted(f"--assume-nics-per-node 8` all 208 rows give {_mape(fsdp)}")


def test_the_transformer_validation_anchored():
    """runs_transformers.csv anchored to each row's 1-GPU baseline (5 s after the ``--absolute``
    run above, whose predictions it shares)."""
    summary = doc("validate", TRANSFORMERS, "--json")["summary"]
    head, by = summary["overall"], summary["by_comm"]
    quoted(
        f"Anchored to each row's 1-GPU baseline, {head['n']} rows: single-node MAPE "
        f"{pct(head['mape'])} (bias {signed(head['mean_rel_error'])}): ddp "
        f"{pct(by['ddp']['mape'])} ({by['ddp']['n']} rows;"
    )
    hvd, flat = by["horovod-nccl"], by["other"]
    quoted(f"horovod-nccl {pct(hvd['mape'])} ({hvd['n']};")
    quoted(f"the flat all-reduce rows {pct(flat['mape'])} ({flat['n']})")


def _band_mape(rows: list[dict], lo: float, hi: float) -> str:
    errors = [r["rel_error"] for r in rows if lo < r["size_bytes"] <= hi]
    return _mape(errors)


def test_the_collectives_validation():
    """The measured collectives' figures: nccl_tests.csv's counts and size bands, without its
    in-sample setup; nccl_tests_modern.csv by collective and (for all_gather) by size."""
    document = doc("validate", str(MEASURED / "collectives" / "nccl_tests.csv"), "--json")
    summary, rows = document["summary"], predicted(document)
    codes = defaultdict(int)
    for r in document["rows"]:
        codes[r["skip_code"]] += 1
    quoted(
        f"On the {summary['n_rows']} published rows: {summary['n_predicted']} predicted in "
        f"{len(summary['by_setup'])} setups"
    )
    quoted(f"{summary['n_skipped']} skipped ({codes['anomalous']} anomalous;")
    head = summary["overall"]
    bands = {b: pct(summary["by_band"][b]["mape"]) for b in summary["by_band"]}
    quoted(
        f"MAPE {pct(head['mape'])} (bias {signed(head['bias'])}): < 64 KiB "
        f"{bands['< 64 KiB']}, 64 KiB - 16 MiB {bands['64 KiB - 16 MiB']}, "
    )
    quoted(f"> 16 MiB {bands['> 16 MiB']}")
    others = [r["rel_error"] for r in rows if not r["setup_id"].startswith("S01_")]
    quoted(
        f"the {len(others)} rows of the other setups come out at {_mape(others)} ({_bias(others)})"
    )
    path = MEASURED / "collectives" / "nccl_tests_modern.csv"
    document = doc("validate", str(path), "--json")
    summary = document["summary"]
    codes = defaultdict(int)
    for r in document["rows"]:
        codes[r["skip_code"]] += 1
    setups = {r["setup_id"] for r in document["rows"]}
    quoted(f"`traces/measured/collectives/nccl_tests_modern.csv` ({summary['n_rows']} rows, ")
    quoted(f"{len(setups)} setups of H100")
    quoted(
        f"It predicts {summary['n_predicted']} rows ({codes['no-value']} without a value and "
        f"{codes['anomalous']} marked anomalous are skipped)"
    )
    with path.open(newline="") as f:
        kind = {i: r["collective"] for i, r in enumerate(csv.DictReader(f), start=2)}
    by: dict[str, list[dict]] = defaultdict(list)
    for r in predicted(document):
        by[kind[r["line"]]].append(r)
    ar, ag, rs = (by[c] for c in ("all_reduce", "all_gather", "reduce_scatter"))
    assert (len(ar), len(ag), len(rs)) == (245, 280, 7)
    errors = {c: [r["rel_error"] for r in rows] for c, rows in by.items()}
    reduce = errors["all_reduce"]
    quoted(f"all_reduce 245 rows {_mape(reduce)} MAPE (bias {_bias(reduce)})")
    mib = 2**20
    quoted(f"take the rows above 256 MiB from 26.7% to {_band_mape(ar, 256 * mib, 1e30)}")
    quoted(f"reduce_scatter 7 rows {_mape(errors['reduce_scatter'])};")
    quoted(
        f"all_gather 280 rows {_mape(errors['all_gather'])} (bias {_bias(errors['all_gather'])}: "
        f"by size, up to 1 MiB {_band_mape(ag, 0, mib)}, 1-16 MiB "
        f"{_band_mape(ag, mib, 16 * mib)}, 16-256 MiB {_band_mape(ag, 16 * mib, 256 * mib)}, "
        f"above 256 MiB {_band_mape(ag, 256 * mib, 1e30)})"
    )


def test_the_convolution_kernel_table():
    """The per-GPU, per-pass MAPEs of the DeepBench convolution files (vision shapes in
    brackets), as ``ddlsim kernels`` gives them."""
    names = {
        ("p100", "fp32"): "P100 fp32 (fitted)",
        ("titanx-pascal", "fp32"): "TITAN X Pascal fp32",
        ("m40", "fp32"): "Tesla M40 fp32",
        ("titanx-maxwell", "fp32"): "GTX TITAN X (Maxwell) fp32",
        ("v100", "fp16"): "V100 fp16, tensor cores (fitted)",
    }
    groups = {}
    for name in ("deepbench_conv_fp32.csv", "deepbench_conv_v100_fp16.csv"):
        path = str(MEASURED / "kernels" / name)
        for g in doc("kernels", path, "--no-held-out", "--json")["summary"]["by_gpu_pass"]:
            groups[(g["gpu"], g["math"], g["pass"], g["shapes"])] = pct(g["mape"])
    for (gpu, math), name in names.items():
        cells = [
            f"{groups[(gpu, math, p, 'all')]} ({groups[(gpu, math, p, 'vision')]})"
            for p in ("fwd", "bwd_data", "bwd_filter")
        ]
        quoted(f"| {name} | {' | '.join(cells)} |")


def test_the_transformer_kernel_figures():
    """The headline figures of the transformer kernel check (docs/design.md has the groups)."""
    gemm = doc("kernels", str(MEASURED / "kernels/transformer/gemm.csv"), "--no-held-out", "--json")
    elem = doc(
        "kernels", str(MEASURED / "kernels/transformer/elementwise.csv"), "--no-held-out", "--json"
    )["rows"]
    rows = gemm["rows"]
    ratios = sorted(r["measured_ms"] / r["predicted_ms"] for r in rows)
    median = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
    quoted(
        f"All {len(rows)} GEMM rows: MAPE {_mape([r['rel_error'] for r in rows])}, median "
        f"measured / predicted {median:.2f}"
    )
    groups = {
        (g["gpu"], g["precision"], g["op"]): g for g in gemm["summary"]["by_gpu_precision_op"]
    }
    t4 = [pct(groups[("t4", p, "gemm")]["mape"]) for p in ("fp16", "fp32")]
    l4 = pct(groups[("l4", "fp32", "gemm")]["mape"])
    quoted(f"(T4 fp16 {t4[0]}, fp32 {t4[1]}; the L4 {l4}")
    quoted(f"all {len(elem)} element-wise rows: {_mape([r['rel_error'] for r in elem])}")


@pytest.mark.slow
def test_the_l4_left_out_of_the_gemm_fit():
    """The L4's GEMMs with its rows left out of the fit (the leave-one-GPU-out refits: 9 s)."""
    gemm = doc("kernels", str(MEASURED / "kernels/transformer/gemm.csv"), "--json")
    out = {(g["gpu"], g["precision"], g["op"]): g for g in gemm["summary"]["leave_one_gpu_out"]}
    inside = {
        (g["gpu"], g["precision"], g["op"]): g for g in gemm["summary"]["by_gpu_precision_op"]
    }
    key = ("l4", "fp32", "gemm")
    left_out = pct(out[key]["mape"])
    quoted(f"the L4 {pct(inside[key]['mape'])} with its rows left out of the fit {left_out})")


def test_the_reference_network_example():
    """A multi-node job that names no network gets its GPU's reference server's."""
    argv = ["predict", "--gpu", "h100", "--gpus", "64", "--comm", "ddp", "--model", "resnet50_v1.5"]
    efficiency = re.compile(r"scaling efficiency\s+([\d.]+) %")

    def run(*more: str) -> str:
        code, out, err = ran(*argv, *more)
        assert code == 0, err
        return efficiency.search(out).group(1)

    assert "8 x ib-ndr" in ran(*argv)[1] or "ib-ndr" in ran(*argv)[1]
    ndr, edr = run(), run("--inter-node", "ib-edr", "--nics-per-node", "1")
    quoted(f"runs on 8 x ib-ndr (DGX H100) at {ndr}% scaling efficiency ({edr}% on the one EDR")


def test_the_horovod_timeline_comparison():
    """The Horovod timeline of this machine's 2-worker run against ddlsim's exchange."""
    code, out, err = ran(
        "traces", "timeline-summary", str(REPO / "traces/horovod/timeline_np2.json"),
        "--compare", "--model", "alexnet", "--gpus", "2", "--gpu", "epyc-zen4-core",
        "--comm", "horovod-gloo", "--batch", "16",
    )  # fmt: skip
    assert code == 0, err

    def cells(label: str) -> list[str]:
        return next(ln for ln in out.splitlines() if ln.strip().startswith(label)).split()[-2:]

    allreduce, ring = (float(x) for x in cells("allreduce (ms)"))
    negotiation = float(cells("negotiation (ms)")[0])
    megabytes = float(cells("bytes all-reduced (MB)")[0])
    launches = float(cells("collective launches")[0])
    quoted(
        f"Horovod's timeline shows {allreduce:.0f} ms of `GLOO_ALLREDUCE` per step "
        f"({megabytes:.0f} MB in {launches:.0f} fused operations) and {negotiation:.0f} ms of "
        f"negotiation"
    )
    quoted(f"against ddlsim's {ring:.0f} ms ring")


def test_the_offload_example_pinned():
    """ZeRO-2 with the optimizer on the host, its buffers pinned (``--pin-memory``)."""
    argv = ["predict", "--model", "llama2-13b", "--gpus", "8", "--gpu", "a100", "--comm"]
    argv += ["zero2", "--precision", "bf16", "--batch", "1", "--activation-checkpointing"]
    argv += ["--node-mtbf-hours", "0", "--offload", "optimizer", "--pin-memory"]
    code, out, err = ran(*argv)
    assert code == 0, err
    ms = float(re.search(r"iteration time\s+([\d.]+) ms", out).group(1))
    quoted(f"`--pin-memory` halves the copies and gives {ms / 1000:.2f} s)")
