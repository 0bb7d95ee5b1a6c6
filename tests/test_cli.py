"""``ddlsim predict`` on the command line, run in-process through :func:`ddlsim.cli.main.main`.

The contract: every bad input prints ONE line ``ddlsim: error: ...`` on stderr that names the bad
value (and, for an unknown name, lists the valid ones), exits 2, prints no traceback and nothing
on stdout. Good inputs print a text report, or with ``--json`` exactly one JSON object.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddlsim.calibration.profile import load, save
from ddlsim.calibration.store import find_profile, shipped_dir
from ddlsim.cli.main import main
from ddlsim.execution.strategy import COMM_METHODS
from ddlsim.system import catalog
from ddlsim.system.specs import TRANSPORTS
from ddlsim.workload.zoo import get_model

EXIT_USAGE = 2
BREAKDOWN_KEYS = ("compute_s", "comm_hidden_s", "comm_exposed_s", "input_stall_s", "coordination_s")
INPUT_KEYS = (
    "model",
    "gpu",
    "n_gpus",
    "gpus_per_node",
    "nodes",
    "intra_node",
    "inter_node",
    "transport",
    "comm",
    "n_ps",
    "batch_per_gpu",
    "precision",
    "data",
    "fusion_threshold_mb",
    "cycle_time_ms",
    "hierarchical",
    "engine",
    "calibration",
)


def shipped_file(device: str, model: str, name: str) -> Path:
    """A calibration file shipped with ddlsim."""
    return shipped_dir() / device / model / name


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point the user calibration directory at an empty folder: a developer's own calibrations
    (``~/.local/share/ddlsim/calibration``) must not change what these tests see."""
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def run_predict(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``ddlsim predict ARGV`` in-process: (exit code, stdout, stderr)."""
    code = main(["predict", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def predict_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """``ddlsim predict ARGV --json``, checked to succeed quietly; the parsed object."""
    code, out, err = run_predict(capsys, *argv, "--json")
    assert code == 0, err
    assert err == ""
    return parse_strict_json(out)


def parse_strict_json(text: str) -> dict[str, Any]:
    """Exactly one JSON object (``json.loads`` rejects trailing data), with no NaN/Infinity."""

    def reject(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant} in the output")

    doc = json.loads(text, parse_constant=reject)
    assert isinstance(doc, dict)
    return doc


# --------------------------------------------------------------------------- bad inputs


def _write_bad_calibrations(folder: Path) -> None:
    """Broken calibration files under ``folder`` (names used by :data:`BAD_INPUTS`)."""
    good = shipped_file("p100-sxm2", "resnet50", "b64-fp32.json")
    text = good.read_text(encoding="utf-8")
    doc = json.loads(text)
    (folder / "corrupt.json").write_text("this is not json\n", encoding="utf-8")
    (folder / "truncated.json").write_text(text[: len(text) // 2], encoding="utf-8")
    (folder / "empty.json").write_text("", encoding="utf-8")
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00\x80 not utf-8")
    (folder / "nested.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (folder / "v2.json").write_text(json.dumps({**doc, "schema_version": 2}), encoding="utf-8")
    (folder / "other.json").write_text(json.dumps({"format": "something-else"}), encoding="utf-8")
    short = {**doc, "layers": doc["layers"][:-3]}
    (folder / "rows.json").write_text(json.dumps(short), encoding="utf-8")
    (folder / "resnet50-b64.json").write_text(text, encoding="utf-8")
    (folder / "a-directory.json").mkdir()


#: (test id, argv after ``predict`` with ``{cal}`` = the folder of bad calibration files,
#: substrings the one error line must contain)
BAD_INPUTS: list[tuple[str, list[str], list[str]]] = [
    # unknown names: the bad name and every valid one
    ("model", ["--model", "resnet51"], ["'resnet51'", "nearest", "resnet50"]),
    ("gpu", ["--gpu", "gtx1080"], ["'gtx1080'", *catalog.device_names()]),
    (
        "intra-node",
        ["--gpus", "8", "--intra-node", "nvlink9"],
        ["'nvlink9'", *catalog.intra_link_names()],
    ),
    (
        "inter-node",
        ["--gpus", "16", "--inter-node", "ib-qdr"],
        ["'ib-qdr'", *catalog.inter_link_names()],
    ),
    ("transport", ["--gpus", "16", "--transport", "udp"], ["'udp'", *TRANSPORTS]),
    ("comm", ["--comm", "allgather"], ["'allgather'", *COMM_METHODS]),
    ("precision", ["--precision", "fp64"], ["'fp64'", "fp32", "amp"]),
    ("engine", ["--engine", "turbo"], ["'turbo'", "fast", "detailed"]),
    ("empty-model", ["--model", ""], ["''", "no zoo model is close", "predict --help"]),
    # GPU counts and node shapes
    ("gpus-0", ["--gpus", "0"], ["--gpus", "got 0"]),
    ("gpus-negative", ["--gpus", "-4"], ["--gpus", "-4"]),
    ("gpus-huge", ["--gpus", str(10**9)], ["1000000000"]),
    ("gpus-abc", ["--gpus", "abc"], ["--gpus", "'abc'"]),
    ("gpus-fraction", ["--gpus", "2.5"], ["--gpus", "'2.5'"]),
    ("gpus-nan", ["--gpus", "nan"], ["--gpus", "'nan'"]),
    ("gpus-per-node-0", ["--gpus-per-node", "0"], ["gpus_per_node", "got 0"]),
    ("gpus-per-node-huge", ["--gpus-per-node", "1000"], ["gpus_per_node", "1000"]),
    ("not-divisible", ["--gpus", "12", "--gpus-per-node", "8"], ["12", "8", "multiple"]),
    ("multi-node-no-network", ["--gpus", "16", "--inter-node", "none"], ["'none'", "2 nodes"]),
    (
        "intra-none-several-gpus",
        ["--gpus", "4", "--intra-node", "none", "--gpus-per-node", "4"],
        ["'none'", "got 4"],
    ),
    # sizes
    ("batch-0", ["--batch", "0"], ["--batch", "got 0"]),
    ("batch-negative", ["--batch", "-1"], ["--batch", "-1"]),
    ("batch-huge", ["--batch", str(10**9)], ["1000000000"]),
    ("batch-inf", ["--batch", "inf"], ["--batch", "'inf'"]),
    ("fusion-negative", ["--fusion-threshold-mb", "-1"], ["fusion threshold", "-1"]),
    ("fusion-huge", ["--fusion-threshold-mb", "1e9"], ["fusion threshold", "1e+09"]),
    ("fusion-nan", ["--fusion-threshold-mb", "nan"], ["--fusion-threshold-mb", "'nan'"]),
    ("fusion-abc", ["--fusion-threshold-mb", "lots"], ["--fusion-threshold-mb", "'lots'"]),
    ("cycle-negative", ["--cycle-time-ms", "-1"], ["cycle time", "-1"]),
    ("cycle-huge", ["--cycle-time-ms", "1e9"], ["cycle time", "1e+09"]),
    ("cycle-inf", ["--cycle-time-ms", "inf"], ["--cycle-time-ms", "'inf'"]),
    ("cycle-minus-inf", ["--cycle-time-ms=-inf"], ["--cycle-time-ms", "'-inf'"]),
    ("throughput-0", ["--single-gpu-throughput", "0"], ["single-GPU throughput", "got 0"]),
    ("throughput-negative", ["--single-gpu-throughput", "-5"], ["single-GPU throughput", "-5"]),
    (
        "throughput-huge",
        ["--single-gpu-throughput", "1e12"],
        ["single-GPU throughput", "1e+12"],
    ),
    ("throughput-nan", ["--single-gpu-throughput", "NaN"], ["'NaN'"]),
    ("n-ps-0", ["--gpus", "16", "--comm", "ps", "--n-ps", "0"], ["parameter servers", "got 0"]),
    ("n-ps-huge", ["--gpus", "16", "--comm", "ps", "--n-ps", str(10**7)], ["10000000"]),
    ("seed-negative", ["--seed", "-1"], ["seed", "-1"]),
    ("jitter-negative", ["--jitter", "-0.1"], ["jitter", "-0.1"]),
    (
        "jitter-huge",
        ["--engine", "detailed", "--gpus", "2", "--jitter", "1e9"],
        ["jitter", "1e+09"],
    ),
    # combinations the simulator cannot express
    ("amp-on-k80", ["--gpu", "k80", "--precision", "amp"], ["'k80'", "amp", "fp16"]),
    ("amp-on-p40", ["--gpu", "p40", "--precision", "amp", "--gpus", "16"], ["'p40'", "amp"]),
    (
        "replicated-nccl-multi-node",
        ["--gpus", "16", "--comm", "replicated-nccl"],
        ["replicated-nccl", "2 node"],
    ),
    (
        "replicated-cpu-multi-node",
        ["--gpus", "16", "--comm", "replicated-cpu"],
        ["replicated-cpu", "2 node"],
    ),
    (
        "stragglers-fast-engine",
        ["--gpus", "8", "--stragglers", "3:1.2"],
        ["stragglers", "detailed"],
    ),
    ("stragglers-syntax", ["--stragglers", "slow"], ["--stragglers", "'slow'"]),
    (
        "straggler-rank",
        ["--gpus", "8", "--engine", "detailed", "--stragglers", "8:1.5"],
        ["8:1.5", "8 GPUs"],
    ),
    ("straggler-factor", ["--gpus", "8", "--engine", "detailed", "--stragglers", "1:0"], ["1:0"]),
    # argument syntax
    ("unknown-flag", ["--gpu-per-node", "8"], ["--gpu-per-node"]),
    ("missing-value", ["--gpus"], ["--gpus"]),
    # calibration files
    ("calibration-missing", ["--calibration", "{cal}/missing.json"], ["not found", "missing.json"]),
    (
        "calibration-corrupt",
        ["--calibration", "{cal}/corrupt.json"],
        ["corrupt.json", "invalid JSON"],
    ),
    (
        "calibration-truncated",
        ["--calibration", "{cal}/truncated.json"],
        ["truncated.json", "invalid JSON"],
    ),
    ("calibration-empty", ["--calibration", "{cal}/empty.json"], ["empty.json", "invalid JSON"]),
    ("calibration-binary", ["--calibration", "{cal}/binary.json"], ["binary.json", "corrupt"]),
    ("calibration-nested", ["--calibration", "{cal}/nested.json"], ["nested.json", "corrupt"]),
    ("calibration-schema", ["--calibration", "{cal}/v2.json"], ["v2.json", "schema version 2"]),
    (
        "calibration-format",
        ["--calibration", "{cal}/other.json"],
        ["other.json", "not a ddlsim calibration"],
    ),
    ("calibration-rows", ["--calibration", "{cal}/rows.json"], ["rows.json", "layer list"]),
    (
        "calibration-other-model",
        ["--model", "alexnet", "--calibration", "{cal}/resnet50-b64.json"],
        ["resnet50-b64.json", "'resnet50'", "'alexnet'"],
    ),
    (
        "calibration-other-batch",
        ["--batch", "32", "--calibration", "{cal}/resnet50-b64.json"],
        ["resnet50-b64.json", "batch 64", "batch 32"],
    ),
    (
        "calibration-other-precision",
        ["--precision", "amp", "--calibration", "{cal}/resnet50-b64.json"],
        ["resnet50-b64.json", "fp32", "amp"],
    ),
    ("calibration-directory", ["--calibration", "{cal}/a-directory.json"], ["a-directory.json"]),
]


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(
    "argv, expected", [(a, e) for _, a, e in BAD_INPUTS], ids=[i for i, _, _ in BAD_INPUTS]
)
def test_bad_input_is_one_error_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    expected: list[str],
    json_flag: bool,
) -> None:
    _write_bad_calibrations(tmp_path)
    args = [a.replace("{cal}", str(tmp_path)) for a in argv]
    code, out, err = run_predict(capsys, *args, *(["--json"] if json_flag else []))
    assert code == EXIT_USAGE
    assert out == ""
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("ddlsim: error: ")
    for text in expected:
        assert text in err, f"{text!r} not in {err!r}"


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("ddlsim: error: ") and "COMMAND" in err


@pytest.mark.parametrize("argv", [["--help"], ["predict", "--help"], ["predict", "-h"]])
def test_help_exits_0(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "usage: ddlsim" in out
    if argv[0] == "predict":
        for flag in ("--model", "--gpus", "--inter-node", "--calibration", "--json"):
            assert flag in out


def test_version_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("ddlsim ")


# --------------------------------------------------------------------------- --json


def test_json_is_one_object_with_the_contract_fields(capsys: pytest.CaptureFixture[str]) -> None:
    doc = predict_json(capsys, "--model", "alexnet", "--gpus", "16")
    for key in ("images_per_sec", "iteration_time_s", "scaling_efficiency"):
        assert isinstance(doc[key], float) and math.isfinite(doc[key]) and doc[key] > 0
    assert 0 < doc["scaling_efficiency"] <= 1
    breakdown = doc["breakdown"]
    assert set(BREAKDOWN_KEYS) <= set(breakdown)
    assert all(breakdown[k] >= 0 for k in BREAKDOWN_KEYS)
    # the non-overlapped parts add up to the iteration
    critical = sum(breakdown[k] for k in BREAKDOWN_KEYS if k != "comm_hidden_s")
    assert critical == pytest.approx(doc["iteration_time_s"], rel=1e-9)
    assert doc["images_per_sec"] == pytest.approx(16 * 64 / doc["iteration_time_s"], rel=1e-12)
    assert doc["scaling_efficiency"] == pytest.approx(
        doc["images_per_sec"] / (16 * doc["single_gpu_images_per_sec"]), rel=1e-12
    )

    inputs = doc["inputs"]
    assert set(INPUT_KEYS) <= set(inputs)
    assert inputs["gpu"] == "p100-sxm2"  # the alias p100, resolved
    assert (inputs["n_gpus"], inputs["gpus_per_node"], inputs["nodes"]) == (16, 8, 2)
    assert (inputs["intra_node"], inputs["inter_node"], inputs["transport"]) == (
        "nvlink-p100",
        "ib-edr",
        "rdma",
    )
    assert (inputs["comm"], inputs["batch_per_gpu"], inputs["precision"]) == (
        "horovod-nccl",
        64,
        "fp32",
    )
    assert (inputs["fusion_threshold_mb"], inputs["cycle_time_ms"]) == (128.0, 1.0)
    calibration = inputs["calibration"]
    assert calibration["file"] == str(shipped_file("p100-sxm2", "alexnet", "b64-fp32.json"))
    assert calibration["method"] and calibration["step_time_s"] > 0


def test_json_echoes_every_explicit_choice(capsys: pytest.CaptureFixture[str]) -> None:
    inputs = predict_json(
        capsys,
        *("--model", "resnet50", "--gpu", "v100", "--gpus", "16", "--gpus-per-node", "4"),
        *("--intra-node", "pcie3", "--inter-node", "25gbe", "--transport", "rdma"),
        *("--comm", "horovod-nccl", "--batch", "32", "--precision", "amp"),
        *("--fusion-threshold-mb", "64", "--cycle-time-ms", "5", "--hierarchical"),
    )["inputs"]
    expected = {
        "gpu": "v100-sxm2",
        "n_gpus": 16,
        "gpus_per_node": 4,
        "nodes": 4,
        "intra_node": "pcie3",
        "inter_node": "25gbe",
        "transport": "rdma",
        "comm": "horovod-nccl",
        "batch_per_gpu": 32,
        "precision": "amp",
        "fusion_threshold_mb": 64.0,
        "cycle_time_ms": 5.0,
        "hierarchical": True,
    }
    assert {k: inputs[k] for k in expected} == expected


def test_fewer_gpus_than_gpus_per_node_is_one_partly_used_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    inputs = predict_json(capsys, "--gpus", "4", "--gpus-per-node", "8")["inputs"]
    assert (inputs["n_gpus"], inputs["gpus_per_node"]) == (4, 8)
    assert (inputs["local_gpus"], inputs["nodes"]) == (4, 1)
    assert inputs["inter_node"] == "none"
    assert inputs["transport"] is None


def test_parameter_server_count_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    doc = predict_json(capsys, "--model", "alexnet", "--gpus", "16", "--comm", "ps", "--n-ps", "4")
    assert doc["inputs"]["n_ps"] == 4
    assert doc["inputs"]["comm"] == "ps"


# --------------------------------------------------------------------------- text report


def test_text_report_has_the_numbers_and_the_assumptions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ("--model", "alexnet", "--gpus", "16", "--inter-node", "25gbe")
    code, report, err = run_predict(capsys, *argv)
    assert code == 0 and err == ""
    doc = predict_json(capsys, *argv)
    for text in (
        f"{doc['images_per_sec']:.1f} images/s",
        f"iteration time      {doc['iteration_time_s'] * 1e3:9.2f} ms",
        f"scaling efficiency  {100 * doc['scaling_efficiency']:11.1f} %",
        "compute",
        "communication hidden",
        "communication exposed",
        "coordination / sync wait",
        "assumptions",
        "GPU            p100-sxm2",
        "intra-node     nvlink-p100",
        "inter-node     25gbe",
        "rdma",  # NCCL's own choice on RoCE-capable 25 GbE
        "method         horovod-nccl",
        "horovod        0.28.1: fusion 128 MiB, cycle 1 ms, negotiation cache",
        "nccl           2.14: algorithm auto, protocol auto; ran ",
        "sync           rank sigma",
        "batch          64 per GPU, fp32",
        f"calibration    {doc['inputs']['calibration']['method']}: "
        + str(shipped_file("p100-sxm2", "alexnet", "b64-fp32.json")),
    ):
        assert text in report, f"{text!r} not in the report:\n{report}"
    for key in ("compute_s", "comm_hidden_s", "comm_exposed_s", "coordination_s"):
        assert f"{doc['breakdown'][key] * 1e3:9.2f} ms" in report


def test_text_report_shows_the_input_stall_with_real_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ("--model", "alexnet", "--gpus", "8", "--data", "real")
    code, report, _ = run_predict(capsys, *argv)
    assert code == 0
    stall = predict_json(capsys, *argv)["breakdown"]["input_stall_s"]
    assert stall > 0
    assert "input pipeline stall" in report
    assert f"{stall * 1e3:9.2f} ms" in report


def test_text_report_names_the_host_decode_rate_and_its_origin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Real data on the host: the node's decode rate is an assumption, said as one with its
    preprocessing kind; a DGX-1 (80 host threads in the catalog) gets 80 x 100 images/s of
    crop-and-flip unless --host-input-rate is given."""
    base = ("--model", "resnet50", "--gpu", "p100", "--gpus", "8", "--data", "real")
    _, report, _ = run_predict(capsys, *base)
    expected = "host decode 8,000 images/s per node (estimate: crop-flip on the host's threads;"
    assert expected in report
    _, report, _ = run_predict(capsys, *base, "--host-input-rate", "12500")
    assert "host decode 12,500 images/s per node (--host-input-rate)" in report
    for argv in (base[:-2], (*base, "--input-pipeline", "dali")):
        _, report, _ = run_predict(capsys, *argv)
        assert "host decode" not in report


# --------------------------------------------------------------------------- 1 GPU, calibrations


@pytest.mark.parametrize(
    "model, gpu, batch, precision",
    [
        ("resnet50", "p100", 64, "fp32"),
        ("alexnet", "v100", 128, "amp"),
        ("inception3", "k80", 32, "fp32"),
    ],
)
@pytest.mark.parametrize("engine", ["fast", "detailed"])
def test_one_gpu_runs_at_the_calibrated_speed(
    capsys: pytest.CaptureFixture[str],
    model: str,
    gpu: str,
    batch: int,
    precision: str,
    engine: str,
) -> None:
    doc = predict_json(
        capsys,
        *("--model", model, "--gpu", gpu, "--gpus", "1", "--batch", str(batch)),
        *("--precision", precision, "--engine", engine),
    )
    profile = find_profile(get_model(model), catalog.device(gpu), batch, precision)
    assert profile.path is not None  # a shipped file, not a batch transfer
    assert doc["scaling_efficiency"] == 1.0
    assert doc["images_per_sec"] == pytest.approx(batch / profile.step_time_s, rel=1e-12)
    assert doc["single_gpu_images_per_sec"] == doc["images_per_sec"]
    assert doc["inputs"]["calibration"]["file"] == profile.path
    assert doc["breakdown"]["comm_exposed_s"] == 0


def _scaled_copy(source: Path, target: Path, factor: float) -> Path:
    """Save ``source``'s calibration at ``target`` with every time multiplied by ``factor``."""
    return save(load(source).scaled(factor), target)


def test_user_calibration_dir_takes_precedence_over_shipped_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = shipped_file("p100-sxm2", "resnet50", "b64-fp32.json")
    mine = _scaled_copy(shipped, tmp_path / "p100-sxm2" / "resnet50" / "b64-fp32.json", 2.0)
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path))

    doc = predict_json(capsys, "--model", "resnet50", "--gpus", "1")
    assert doc["inputs"]["calibration"]["file"] == str(mine)
    assert doc["images_per_sec"] == pytest.approx(64 / (2 * load(shipped).step_time_s), rel=1e-9)
    code, report, _ = run_predict(capsys, "--model", "resnet50", "--gpus", "1")
    assert code == 0
    assert str(mine) in report
    assert f"your own file, shadowing the shipped {shipped}" in report  # issue 23, item 1

    # other configurations still come from the shipped files
    other = predict_json(capsys, "--model", "resnet50", "--gpus", "1", "--batch", "128")
    assert other["inputs"]["calibration"]["file"] == str(
        shipped_file("p100-sxm2", "resnet50", "b128-fp32.json")
    )


def test_a_batch_without_a_file_names_the_file_it_was_derived_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ("--model", "resnet50", "--gpus", "1", "--batch", "96")
    doc = predict_json(capsys, *argv)
    calibration = doc["inputs"]["calibration"]
    assert calibration["file"] is None
    assert calibration["method"] == "roofline-batch-transfer"
    source = str(shipped_file("p100-sxm2", "resnet50", "b128-fp32.json"))  # the nearest batch
    assert calibration["provenance"]["from_file"] == source
    code, report, _ = run_predict(capsys, *argv)
    assert code == 0
    assert f"roofline-batch-transfer: derived from batch 128 of {source}" in report

    # a user file of another batch is preferred to the shipped files
    mine = _scaled_copy(
        shipped_file("p100-sxm2", "resnet50", "b64-fp32.json"),
        tmp_path / "p100-sxm2" / "resnet50" / "b64-fp32.json",
        1.0,
    )
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path))
    code, report, _ = run_predict(capsys, *argv)
    assert code == 0
    assert f"derived from batch 64 of {mine}" in report


@pytest.mark.parametrize("gpus", ["1", "16"])
def test_calibration_flag_is_used_and_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, gpus: str
) -> None:
    shipped = shipped_file("p100-sxm2", "resnet50", "b64-fp32.json")
    mine = _scaled_copy(shipped, tmp_path / "measured.json", 0.5)
    argv = ("--model", "resnet50", "--gpus", gpus, "--calibration", str(mine))
    doc = predict_json(capsys, *argv)
    assert doc["inputs"]["calibration"]["file"] == str(mine)
    assert doc["single_gpu_images_per_sec"] == pytest.approx(
        64 / (0.5 * load(shipped).step_time_s), rel=1e-9
    )
    code, report, _ = run_predict(capsys, *argv)
    assert code == 0
    assert str(mine) in report


def test_single_gpu_throughput_rescales_the_calibration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = predict_json(capsys, "--gpus", "1", "--single-gpu-throughput", "500")
    assert doc["images_per_sec"] == pytest.approx(500, rel=1e-9)
    assert doc["scaling_efficiency"] == 1.0
    assert doc["inputs"]["calibration"]["method"] == "anchored-by-user"


# --------------------------------------------------------------------------- python -m ddlsim


def _python_m_ddlsim(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddlsim", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_m_ddlsim_predicts() -> None:
    proc = _python_m_ddlsim("predict", "--model", "alexnet", "--gpus", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert parse_strict_json(proc.stdout)["inputs"]["n_gpus"] == 2


def test_python_m_ddlsim_reports_errors_in_one_line() -> None:
    proc = _python_m_ddlsim("predict", "--gpu", "nope")
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("ddlsim: error: unknown gpu 'nope'; valid: ")
