"""What a hostile tester feeds ddlsim's readers (issue 33): FIFOs, devices, files too large,
a byte-order mark before JSON, cells longer than Python's csv limit, absurd numbers inside
files, and malformed calibration fields.

A file is refused at once, one line ``ddlsim: error: ...`` and exit 2; a row of a row-based
file is skipped with its reason and the others are read.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import pytest

from ddlsim import inputs
from ddlsim.errors import CalibrationError, ConfigError

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
CAL = REPO / "calibration" / "p100-sxm2" / "alexnet" / "b64-fp32.json"
RUNS = DATA / "validate_runs_small.csv"
LOG = DATA / "logs" / "hvd_tf2_synthetic_resnet50_4gpu.log"


def _one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddlsim: error: "), err
    return lines[0]


def _readers(path: str, out: Path) -> list[list[str]]:
    """Every command that reads a file named by the user, reading ``path``."""
    return [
        ["predict", "--calibration", path],
        ["predict", "--from-json", path],
        ["predict", "--network-calibration", path],
        ["predict", "--model-config", path],
        ["validate", path],
        ["kernels", path],
        ["plot", path, "-o", str(out / "f.png")],
        ["sweep", "--grid", path, "--serial", "-o", str(out / "s.csv")],
        ["traces", "import", path, "--gpu", "epyc-zen4-core"],
        ["traces", "timeline-summary", path],
        ["calibrate", "network", path, "-o", str(out / "n.json")],
        ["calibrate", "--gpu", "v100", "--model", "resnet50", "--batch", "64", "--from-log", path],
    ]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_every_reader_refuses_a_file_that_is_not_regular_at_once(cli, tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "f"
        os.mkfifo(path)  # opening it would wait for a writer forever
        words = "it is a FIFO"
    elif kind == "dev-zero":
        path, words = Path("/dev/zero"), "it is a character device"
    else:
        path, words = tmp_path, "it is a directory"
    out = tmp_path / "out"
    out.mkdir()
    for argv in _readers(str(path), out):
        start = time.monotonic()
        line = _one_error_line(*cli(*argv)[::2])
        assert words in line and "ddlsim reads only regular files" in line, argv
        assert time.monotonic() - start < 10, argv
    assert list(out.iterdir()) == []


def test_every_reader_refuses_a_file_over_its_cap_before_reading(cli, tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(50 << 30)  # 50 GiB, sparse: reading it would take the memory
    out = tmp_path / "out"
    out.mkdir()
    for argv in _readers(str(big), out):
        line = _one_error_line(*cli(*argv)[::2])
        assert "is too large: 51,200.0 MiB, ddlsim reads at most" in line, argv
    assert list(out.iterdir()) == []


def test_the_bounded_read_stops_one_byte_past_the_cap(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("x" * 100)
    assert inputs.read_bytes(path, "test file", 100) == b"x" * 100
    with pytest.raises(ConfigError, match="too large"):
        inputs.read_bytes(path, "test file", 99)
    with pytest.raises(CalibrationError, match=r"cannot read calibration file .*: not found"):
        inputs.read_text(tmp_path / "none", "calibration file", 10, CalibrationError)


def test_json_inputs_with_a_byte_order_mark_are_read(cli, tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + CAL.read_bytes())
    code, out, err = cli("predict", "--model", "alexnet", "--calibration", str(path), "--json")
    assert code == 0, err
    plain = cli("predict", "--model", "alexnet", "--calibration", str(CAL), "--json")[1]
    assert json.loads(out)["images_per_sec"] == json.loads(plain)["images_per_sec"]


@pytest.mark.parametrize(
    ("change", "text"),
    [
        ({"layers": None}, "field 'layers' must be a list of layer rows, it is missing"),
        ({"model": None}, "field 'model' must be a string, it is missing"),
        ({"batch_per_gpu": 64.5}, "field 'batch_per_gpu' must be an integer, got 64.5"),
        ({"batch_per_gpu": "64"}, "field 'batch_per_gpu' must be a number, got '64'"),
        ({"step_time_s": True}, "field 'step_time_s' must be a number, got True"),
        ({"device": {}}, "field 'device.catalog_id' must be a string, it is missing"),
        ({"layer_time": 0.0}, "every layer time is 0 s"),
        ({"row": [1, 2]}, "field 'layers[0]' must be a row of 4 values"),
    ],
)
def test_malformed_calibration_fields_are_named_in_words(cli, tmp_path, change, text):
    doc = json.loads(CAL.read_text())
    for key, value in change.items():
        if key == "layer_time":
            doc["layers"] = [[n, value, value, g] for n, _, _, g in doc["layers"]]
        elif key == "row":
            doc["layers"][0] = value
        elif value is None:
            del doc[key]
        else:
            doc[key] = value
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    line = _one_error_line(*cli("predict", "--model", "alexnet", "--calibration", str(path))[::2])
    assert text in line
    assert "Error(" not in line  # no exception repr


def _runs_with(tmp_path: Path, column: str, value: str) -> Path:
    with open(RUNS, encoding="utf-8", newline="") as fh:
        header, *rows = list(csv.reader(fh))
    target = next(r for r in rows if r[header.index("gpus")] != "1")
    target[header.index(column)] = value
    path = tmp_path / "runs.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([header, *rows])
    return path


@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        ("images_per_sec", "1e-308", "column 'images_per_sec' must be in 0.01..1e+13"),
        ("images_per_sec", "1e308", "column 'images_per_sec' must be in 0.01..1e+13"),
        ("images_per_sec", "1e300", "column 'images_per_sec' must be in 0.01..1e+13"),
        ("scaling_efficiency", "2.5", "column 'scaling_efficiency' must be in 0.001..2"),
        ("batch_per_gpu", "64.5", "column 'batch_per_gpu' must be an integer"),
        ("batch_per_gpu", "1000000", "column 'batch_per_gpu' must be in 1..65,536"),
        ("gpus", "2000000", "column 'gpus' must be in 1..1,000,000"),
        ("note", "x" * 200_000, "a cell longer than 131,072 characters"),
    ],
)
def test_absurd_cells_of_a_runs_file_skip_their_row_only(cli, tmp_path, column, value, text):
    path = _runs_with(tmp_path, column, value)
    code, out, err = cli("validate", str(path), "--json")
    assert code == 0, err
    assert "Warning" not in err and "inf%" not in out
    doc = json.loads(out)
    reasons = json.dumps(doc)
    assert text in reasons
    assert len(reasons) < 200_000  # the long cell is not echoed whole


def test_a_wide_header_is_read_in_linear_time(tmp_path):
    from ddlsim.tools.validate.runs import load_runs

    header = RUNS.read_text(encoding="utf-8").splitlines()[0]
    extra = ",".join(f"extra{i}" for i in range(20_000))
    path = tmp_path / "wide.csv"
    path.write_text(f"{header},{extra}\n")
    start = time.monotonic()
    assert load_runs(path).runs == []
    assert time.monotonic() - start < 2.0  # 13 s when each name was counted in the list


def test_a_long_cell_skips_its_row_in_kernels_and_collectives(cli, tmp_path):
    kernels = REPO / "traces" / "measured" / "kernels" / "deepbench_conv_fp32.csv"
    lines = kernels.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "k.csv"
    path.write_text("\n".join([lines[0], "a," + "x" * 200_000, *lines[1:]]) + "\n")
    code, out, err = cli("kernels", str(path), "--json")
    assert code == 0, err
    assert "a cell longer than 131,072 characters" in out


@pytest.mark.parametrize("figure", ["nan", "-24.74", "0", "1.2.3"])
def test_traces_import_refuses_a_log_without_a_usable_total(cli, tmp_path, figure):
    text = (REPO / "traces" / "horovod" / "train_np2.log").read_text(encoding="utf-8")
    assert "24.74 +-" in text
    log = tmp_path / "bad.log"
    log.write_text(text.replace("24.74 +-", f"{figure} +-"))
    line = _one_error_line(*cli("traces", "import", str(log), "--gpu", "epyc-zen4-core")[::2])
    assert f"no usable throughput in 'Total img/sec on 2 CPU(s): {figure} +-2.37'" in line


@pytest.mark.parametrize(
    ("cells", "text"),
    [
        ({"fwd_ms": "1e-308"}, "fwd_ms '1e-308' is outside 0.001..1e+09 ms"),
        ({"fwd_ms": "1e308"}, "fwd_ms '1e308' is outside 0.001..1e+09 ms"),
        ({"batch": "9" * 30}, "is above 2,147,483,647 (cuDNN's 32-bit sizes)"),
    ],
)
def test_absurd_kernel_cells_skip_their_row_or_pass(cli, tmp_path, cells, text):
    kernels = REPO / "traces" / "measured" / "kernels" / "deepbench_conv_fp32.csv"
    with open(kernels, encoding="utf-8", newline="") as fh:
        header, first, *_ = list(csv.reader(fh))
    for column, value in cells.items():
        first[header.index(column)] = value
    path = tmp_path / "k.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([header, first])
    code, out, err = cli("kernels", str(path), "--json")
    assert "Warning" not in err and "inf" not in out and "Traceback" not in err
    assert code in (0, 2)  # 2: no row left to check, one error line
    assert text in out or text in err
