"""The README's examples run as written (issue 11, item 10).

Every ``ddlsim`` command in the README's ``bash`` blocks is read as the shell would (line
continuations joined, comments dropped, ``~`` expanded) and run in order in a scratch folder
where the repository's input folders appear under their own names, with ``HOME`` pointing at
the scratch folder (user calibrations land there, not in the developer's home).

- default run: every command parses (flags, output paths) and names only input files that
  exist in the repository or that an earlier example writes; the commands that were wrong
  before (``traces import``, ``traces timeline-summary``, ``sweep --grid``, a calibration
  transfer) and every ``predict`` / ``timeline`` example run;
- ``slow``: all of them run, in order, with exit code 0 (ResNet-50 CPU profiling included),
  except ``calibrate --gpu``, which needs that GPU.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from ddlsim.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: repository folders the examples read, linked into the scratch folder
INPUT_DIRS = ("traces", "tests", "calibration", "examples")
#: flags whose value is a file or folder the command writes
OUTPUT_FLAGS = ("-o", "--output", "--plot")


def readme_commands() -> list[list[str]]:
    """``ddlsim`` argv lists of the README's bash blocks, in order."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:1] == ["ddlsim"]:
                    commands.append(words[1:])
                elif words[:3] == ["python3", "-m", "ddlsim"]:
                    commands.append(words[3:])
    return commands


def needs_gpu(argv: list[str]) -> bool:
    return argv[0] == "calibrate" and "--gpu" in argv


def needs_tensorflow(argv: list[str]) -> bool:
    return argv[0] == "calibrate" and "--calibration" not in argv


def _home_expanded(argv: list[str], home: Path) -> list[str]:
    return [str(home / a[2:]) if a.startswith("~/") else a for a in argv]


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    for name in INPUT_DIRS:
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("DDLSIM_CALIBRATION_DIR", raising=False)
    return tmp_path


def test_the_readme_has_examples_of_every_sub_command():
    used = {argv[0] if argv[0] != "traces" else " ".join(argv[:2]) for argv in readme_commands()}
    assert {"predict", "timeline", "sweep", "plot", "calibrate", "validate"} <= used
    assert {"traces import", "traces timeline-summary"} <= used


def test_every_example_parses_and_names_inputs_that_exist(scratch):
    parser = build_parser()
    written: set[str] = set()
    for argv in readme_commands():
        argv = _home_expanded(argv, scratch)
        parser.parse_args(argv)  # flags, choices, output paths (checked at parse time)
        outputs = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in OUTPUT_FLAGS}
        for arg in argv[1:]:
            looks_like_file = "/" in arg or re.search(r"\.(csv|parquet|json|ya?ml|log)$", arg)
            if looks_like_file and arg not in outputs and not arg.startswith("tcp://"):
                produced = arg in written or any(arg.startswith(w) for w in written)
                assert Path(arg).exists() or produced, f"{arg} (in: ddlsim {shlex.join(argv)})"
        written |= outputs
        if argv[0] == "calibrate" and "--calibration" not in argv:
            written.add(str(scratch / ".local" / "share" / "ddlsim" / "calibration"))


CHEAP = ("predict", "timeline", "traces")


def test_the_cheap_examples_and_the_ones_that_were_broken_run(scratch, capsys):
    ran = 0
    for argv in readme_commands():
        argv = _home_expanded(argv, scratch)
        transfer = argv[0] == "calibrate" and "--calibration" in argv
        grid = argv[0] == "sweep" and "--grid" in argv
        reads_user_file = any(str(scratch / ".local") in a for a in argv)
        if (argv[0] in CHEAP or transfer or grid) and not reads_user_file:
            assert main(argv) == 0, (argv, capsys.readouterr().err)
            ran += 1
    assert ran >= 7
    assert (scratch / "rows.csv").read_text().count("\n") == 2  # header + the imported run
    assert (scratch / ".local/share/ddlsim/calibration/v100-sxm2/resnet50/b64-fp32.json").is_file()


@pytest.mark.slow
def test_every_example_runs_in_order(scratch, capsys):
    for argv in readme_commands():
        if needs_gpu(argv):
            continue
        argv = _home_expanded(argv, scratch)
        code = main(argv)
        assert code == 0, (argv, capsys.readouterr().err)
    assert os.path.isfile(scratch / "study.parquet") and os.path.isfile(scratch / "where.png")
