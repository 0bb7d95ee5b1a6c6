"""What a hostile tester tries (issue 23, items 3 and 5): file names longer than the file system
allows, absurd numbers, malformed addresses and sweep files, and values too long to echo.

Each is one line, ``ddlsim: error: ...``, exit 2, nothing written, and no value echoed with
more than ~100 of its characters.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddlsim.errors import MAX_SHOWN_CHARS, UnknownNameError, clip_long_words, shown

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
CAL = REPO / "calibration" / "p100-sxm2" / "alexnet" / "b64-fp32.json"
K80 = REPO / "calibration" / "k80" / "resnet50" / "b64-fp32.json"
#: a file-name component longer than any file system takes (NAME_MAX is 255)
LONG = "x" * 300


def _one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddlsim: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def sweep_csv(tmp_path: Path) -> Path:
    from ddlsim.tools.analysis.sweep import rows_to_csv, run_grid

    path = tmp_path / "sweep.csv"
    path.write_text(rows_to_csv(run_grid({"model": ["alexnet"], "gpus": [1, 8]})))
    return path


def _writers(sweep: Path) -> list[list[str]]:
    """Every command that writes a file, with a name too long for the file system."""
    runs = str(DATA / "validate_runs_small.csv")
    log = str(DATA / "logs" / "hvd_tf2_synthetic_resnet50_4gpu.log")
    kernels = str(REPO / "traces" / "measured" / "kernels" / "deepbench_conv_fp32.csv")
    return [
        ["timeline", "--model", "alexnet", "-o", f"{LONG}.json"],
        ["sweep", "--model", "alexnet", "--serial", "-o", f"{LONG}.csv"],
        ["plot", str(sweep), "-o", f"{LONG}.png"],
        ["traces", "import", log, "-o", f"{LONG}.csv"],
        ["calibrate", "--calibration", str(K80), "--transfer-to", "v100", "--output", LONG],
        ["validate", runs, "--plot", f"{LONG}.png"],
        ["kernels", kernels, "--plot", f"{LONG}.png"],
        ["timeline", "--model", "alexnet", "-o", f"{LONG}/{LONG}/t.json"],
    ]


def test_a_name_too_long_is_one_line_in_every_writer(cli, sweep_csv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path / "usercal"))
    before = sorted(os.listdir(tmp_path))
    for argv in _writers(sweep_csv):
        code, _, err = cli(*argv)
        line = _one_error_line(code, err)
        assert "File name too long" in line, argv
        assert len(line) < 400, line  # the 300-character name is cut
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["--calibration", f"{LONG}.json"],
        ["--from-json", f"{LONG}.json"],
    ],
)
def test_an_input_name_too_long_is_one_line(cli, argv):
    line = _one_error_line(*cli("predict", *argv)[::2])
    assert "File name too long" in line


@pytest.mark.parametrize(
    ("flag", "value", "text"),
    [
        ("--single-gpu-throughput", "1e-308", "single-GPU throughput must be"),
        ("--single-gpu-throughput", "4.9e-324", "single-GPU throughput must be"),
        ("--single-gpu-throughput", "1e308", "single-GPU throughput must be"),
        ("--host-input-rate", "1e-308", "host input rate must be"),
        ("--host-input-rate", "1e308", "host input rate must be"),
        ("--cycle-time-ms", "1e-308", "cycle time must be 0 or in"),
        ("--cycle-time-ms", "1e308", "cycle time must be 0 or in"),
        ("--fusion-threshold-mb", "1e308", "fusion threshold must be"),
    ],
)
def test_absurd_floats_are_refused_before_use(cli, flag, value, text):
    code, out, err = cli("predict", "--data", "real", flag, value)
    line = _one_error_line(code, err)
    assert text in line and out == ""
    assert "Warning" not in err  # no numpy warning before the error


def test_the_smallest_accepted_rates_still_predict_finite_numbers():
    import ddlsim

    p = ddlsim.predict("alexnet", 8, single_gpu_throughput=0.01, batch=8)
    assert p.single_gpu_images_per_sec == pytest.approx(0.01, rel=1e-3)
    q = ddlsim.predict("alexnet", 8, data="real", host_input_images_per_s=0.01)
    assert 0 < q.images_per_sec <= 8 * 0.01 * 1.0001  # input-bound: the hosts' rate
    with pytest.raises(ddlsim.errors.CalibrationError, match="step_time_s must be in"):
        ddlsim.predict("alexnet", 1, single_gpu_throughput=0.01, batch=65536)


def _calibration_with(tmp_path: Path, **changes) -> Path:
    doc = json.loads(CAL.read_text())
    if "layer_time" in changes:
        t = changes.pop("layer_time")
        doc["layers"] = [[n, t, t, g] for n, _, _, g in doc["layers"]]
    doc.update(changes)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("changes", "text"),
    [
        ({"layer_time": 1e308}, "a layer time must be in 0..1e+06 s"),
        ({"step_time_s": 1e308}, "step_time_s must be in 1e-06..1e+06 s"),
        ({"step_time_s": 1e-308}, "step_time_s must be in 1e-06..1e+06 s"),
        ({"unattributed_time_s": 1e300}, "unattributed_time_s must be in"),
        ({"batch_per_gpu": 1e400}, "malformed calibration file"),
    ],
)
def test_calibration_files_with_absurd_times_are_refused(cli, tmp_path, changes, text):
    path = _calibration_with(tmp_path, **changes)
    assert text in _one_error_line(*cli("predict", "--calibration", str(path))[::2])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    argv = ["calibrate", "--calibration", str(path), "--transfer-to", "v100"]
    assert text in _one_error_line(*cli(*argv, "--output", str(out_dir))[::2])
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize("value", ["1e-308", "0.001", "1e308"])
def test_an_absurd_anchor_writes_nothing(cli, tmp_path, value):
    argv = ["calibrate", "--calibration", str(K80), "--anchor-throughput", value]
    line = _one_error_line(*cli(*argv, "--output", str(tmp_path))[::2])
    assert "--anchor-throughput must be a number of images/s in 0.01..1e+07" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "address", ["garbage", "tcp://garbage", "ucx://host:1", "::::", "tcp://[::1", "h:99999"]
)
def test_a_malformed_scheduler_address_is_refused_before_anything_runs(cli, tmp_path, address):
    out = tmp_path / "s.csv"
    line = _one_error_line(*cli("sweep", "--scheduler", address, "-o", str(out))[::2])
    assert "expected a Dask scheduler address like tcp://host:8786" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        ("gpus", "-4", "column gpus must be a whole number in 1..1,000,000, got '-4'"),
        ("gpus", "0", "column gpus must be a whole number"),
        ("gpus", "2.5", "column gpus must be a whole number"),
        ("gpus", "1e308", "column gpus must be a whole number"),
        ("images_per_sec", "-5", "column images_per_sec must be a finite number > 0"),
        ("images_per_sec", "inf", "column images_per_sec must be a finite number > 0"),
        ("compute_s", "nan", "column compute_s must be a finite number >= 0"),
    ],
)
@pytest.mark.parametrize("kind", ["scaling", "efficiency", "breakdown"])
def test_plot_refuses_a_sweep_file_with_impossible_values(
    cli, sweep_csv, tmp_path, column, value, text, kind
):
    lines = sweep_csv.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index(column)] = value
    sweep_csv.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    out = tmp_path / "fig.png"
    line = _one_error_line(*cli("plot", str(sweep_csv), "--kind", kind, "-o", str(out))[::2])
    assert text in line and "line 2" in line
    assert not out.exists()


def test_errors_echo_at_most_about_100_characters_of_a_value(cli):
    for argv in (
        ["predict", "--model", "m" * 5000],
        ["predict", "--comm", "c" * 5000],
        ["predict", "--gpus", "9" * 5000 + "x"],
        ["sweep", "--gpu", "g" * 5000, "-o", "-"],
        ["predict", "--calibration", "/" + "d/" * 3000 + "f.json"],
        ["predict", "--comm", " ".join(["abc"] * 2000)],  # a value of short words
        ["predict", "--stragglers", " ".join(["1:2x"] * 2000)],
        ["sweep", "--gpus", " ".join(["abc"] * 2000), "-o", "-"],
    ):
        line = _one_error_line(*cli(*argv)[::2])
        assert max(len(word) for word in line.split()) <= MAX_SHOWN_CHARS, argv
        echoed = line.split("; valid: ")[0]  # a closed vocabulary's listing follows the value
        assert len(echoed) < 600, argv
        assert "characters" in line


def test_shown_and_clip_keep_short_values_and_say_how_long_a_cut_one_was():
    assert shown("resnet50") == "'resnet50'"
    cut = shown("y" * 300)
    assert len(cut.split()[0]) == MAX_SHOWN_CHARS and cut.endswith("(302 characters)")
    assert clip_long_words("a  b\tc") == "a b c"
    assert clip_long_words("cannot write " + "p" * 200 + ": No space") == (
        "cannot write " + "p" * 97 + "... (200 characters): No space"
    )
    assert "(300 characters)" in str(UnknownNameError("model", "z" * 298, ["alexnet"]))


# ----------------------------------------------------------------------------- one folder rule


def test_no_writer_creates_a_folder_you_name(cli, sweep_csv, tmp_path, monkeypatch):
    """Item 6: the folder of an output file, or an output folder, must exist (as for the
    shell's ``>``); every writer refuses a missing one with the same words."""
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path / "usercal"))
    missing = tmp_path / "missing"
    for argv in _writers(sweep_csv)[:-1]:
        argv = [str(missing / Path(a).name) if LONG in a else a for a in argv]
        if argv[0] == "calibrate":
            argv[-1] = str(missing)
        line = _one_error_line(*cli(*argv)[::2])
        assert "does not exist (ddlsim creates no folder you name: create it first)" in line
        assert not missing.exists()


def test_calibrate_creates_only_its_own_folders(cli, tmp_path, monkeypatch):
    """The user calibration directory and the <gpu>/<model>/ layout inside an output folder
    are ddlsim's own: created when missing."""
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path / "a" / "usercal"))
    argv = ["calibrate", "--calibration", str(K80), "--transfer-to", "v100"]
    assert cli(*argv)[0] == 0
    assert (tmp_path / "a" / "usercal" / "v100-sxm2" / "resnet50" / "b64-fp32.json").is_file()
    out = tmp_path / "mine"
    out.mkdir()
    assert cli(*argv, "--output", str(out))[0] == 0
    assert (out / "v100-sxm2" / "resnet50" / "b64-fp32.json").is_file()


# ----------------------------------------------------------------------------- bounded workers


def test_workers_are_bounded_by_the_cores_and_the_memory(cli, monkeypatch, tmp_path):
    from ddlsim.engine import budget
    from ddlsim.tools.analysis import distributed

    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    monkeypatch.setattr(budget, "available_memory_bytes", lambda: 64e9)
    assert distributed.max_local_workers() == (8, "4 per core, 2 core(s)")
    monkeypatch.setattr(budget, "available_memory_bytes", lambda: 0.5e9)
    limit, why = distributed.max_local_workers()
    assert limit == 2 and "50% of the 0.5 GB available at 100 MB per worker" in why
    monkeypatch.setattr(budget, "available_memory_bytes", lambda: None)  # not Linux
    assert distributed.max_local_workers()[0] == 8
    out = tmp_path / "s.csv"
    for n in ("9", "64", "1000", "9" * 200):
        line = _one_error_line(*cli("sweep", "--workers", n, "-o", str(out))[::2])
        assert "is more than this machine runs usefully: at most 8 (4 per core" in line
        assert len(line) < 300
    assert not out.exists()
    assert cli("sweep", "--model", "alexnet", "--workers", "64", "--serial", "-o", str(out))[0] == 0
