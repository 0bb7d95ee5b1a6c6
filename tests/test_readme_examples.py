"""The README's examples run as written (issue 11, item 10; issue 23, item 2).

Every fenced block of the README is read: each command of the ``bash`` blocks as the shell
would (line continuations joined, comments dropped, ``~`` expanded), the ``python`` block, and
the report shown after ``$ ddlsim predict``. The ``ddlsim`` commands run in order in a scratch
folder where the repository's input folders appear under their own names, with ``HOME``
pointing at the scratch folder (user calibrations land there, not in the developer's home).

- every command is either run by these tests or named in :data:`NOT_RUN` with the reason (it
  installs packages, builds Horovod, runs this suite, or needs a GPU): a new README command
  cannot be left out silently;
- default run: every ``ddlsim`` command parses (flags, output paths) and names only input
  files that exist in the repository or that an earlier example writes; every ``predict``,
  ``timeline``, ``traces`` and ``calibrations`` example, the calibration transfer and the
  YAML sweep run with exit code 0; the Python block runs; the shown report is what
  ``ddlsim predict`` prints, number for number;
- ``slow``: all the ``ddlsim`` commands run, in order, with exit code 0 (ResNet-50 CPU
  profiling included), except those that need a GPU.
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
#: commands of the README the tests do not run, by how they start, and why
NOT_RUN = {
    "python3 -m pip install": "installs packages (the tests run where they are installed)",
    "pip install": "installs packages (the tests run where they are installed)",
    "bash scripts/test.sh": "runs this test suite",
    "bash scripts/horovod_local.sh": "installs system packages and builds Horovod (~20 min)",
    "python -m ddlsim.tools.hvdlocal": "needs Horovod, which scripts/horovod_local.sh builds",
    "python scripts/measure_conv_kernels.py": "needs a CUDA GPU",
    "python3 scripts/device_measure.py": "needs a CUDA GPU (tests/test_device_measure.py runs "
    "its --smoke on the CPU and its --check)",
    "ddlsim calibrate --gpu": "needs that GPU",
    "ddlsim calibrate --framework torch --gpu": "needs that GPU",
}


def fenced_blocks(language: str) -> list[str]:
    """The README's fenced blocks of ``language`` ("" for the blocks that name none)."""
    text = README.read_text(encoding="utf-8")
    return [b for lang, b in re.findall(r"```(\w*)\n(.*?)```", text, re.S) if lang == language]


def shell_commands() -> list[list[str]]:
    """Every command of the README's bash blocks, as the shell splits it, in order."""
    commands = []
    for block in fenced_blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words:
                    commands.append(words)
    return commands


def readme_commands() -> list[list[str]]:
    """``ddlsim`` argv lists of the README's bash blocks, in order."""
    commands = []
    for words in shell_commands():
        if words[:1] == ["ddlsim"]:
            commands.append(words[1:])
        elif words[:3] == ["python3", "-m", "ddlsim"]:
            commands.append(words[3:])
    return commands


def not_run(words: list[str]) -> str | None:
    """Why the tests do not run this command (None: they do)."""
    line = " ".join(words)
    return next((why for start, why in NOT_RUN.items() if line.startswith(start)), None)


def needs_gpu(argv: list[str]) -> bool:
    return not_run(["ddlsim", *argv]) is not None


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


def test_every_fenced_command_is_run_by_these_tests_or_says_why_not():
    for words in shell_commands():
        runs = words[:1] == ["ddlsim"] or words[:3] == ["python3", "-m", "ddlsim"]
        assert runs or not_run(words), f"README command neither run nor excused: {words}"
    assert len(fenced_blocks("python")) == 1


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


CHEAP = ("predict", "timeline", "traces", "calibrations")


def test_the_cheap_examples_and_the_ones_that_were_broken_run(scratch, capsys):
    ran = 0
    for argv in readme_commands():
        argv = _home_expanded(argv, scratch)
        transfer = argv[0] == "calibrate" and "--calibration" in argv
        grid = argv[0] == "sweep" and "--grid" in argv
        user_files = [a for a in argv if str(scratch / ".local") in a]
        written = all(Path(a).exists() for a in user_files)  # by an earlier example run here
        if (argv[0] in CHEAP or transfer or grid) and written:
            assert main(argv) == 0, (argv, capsys.readouterr().err)
            ran += 1
    assert ran >= 10
    assert (scratch / "rows.csv").read_text().count("\n") == 2  # header + the imported run
    assert (scratch / ".local/share/ddlsim/calibration/v100-sxm2/resnet50/b64-fp32.json").is_file()


def test_the_python_block_runs(scratch):
    (block,) = fenced_blocks("python")
    exec(compile(block, "README.md", "exec"), {})


def test_the_shown_report_is_what_predict_prints(scratch, capsys):
    """The README's sample report, number for number (the checkout's path shown as ...)."""
    (shown,) = [b for b in fenced_blocks("") if b.startswith("$ ddlsim predict")]
    command, _, report = shown.partition("\n")
    assert main(shlex.split(command)[2:]) == 0
    printed = capsys.readouterr().out.replace(f"{REPO}/", ".../")
    assert printed == report


def shown_excerpts() -> list[tuple[str, list[str]]]:
    """The README's ``text`` blocks that show a command's output: (the command after ``$ ``,
    the lines shown; ``...`` stands for lines left out)."""
    out = []
    for block in fenced_blocks("text"):
        if block.startswith("$ ddlsim "):
            command, _, shown = block.partition("\n")
            out.append((command[2:], [ln for ln in shown.splitlines() if ln.strip() != "..."]))
    return out


def test_there_are_transformer_excerpts():
    commands = [command for command, _ in shown_excerpts()]
    assert sum("--model bert-large" in c or "--model gpt2" in c for c in commands) >= 2


@pytest.mark.parametrize("command, lines", shown_excerpts(), ids=lambda v: str(v)[:60])
def test_each_shown_excerpt_is_what_its_command_prints(scratch, capsys, command, lines):
    """Each line of an excerpt is a line the command prints (a refusal: on stderr), in order,
    number for number."""
    code = main(shlex.split(command)[1:])
    out, err = capsys.readouterr()
    printed = (out if code == 0 else err).splitlines()
    assert code == (0 if out else 2)
    at = 0
    for line in lines:
        assert line in printed[at:], (command, line)
        at = printed.index(line, at) + 1


@pytest.mark.slow
def test_every_example_runs_in_order(scratch, capsys):
    for argv in readme_commands():
        if needs_gpu(argv):
            continue
        argv = _home_expanded(argv, scratch)
        code = main(argv)
        assert code == 0, (argv, capsys.readouterr().err)
    assert os.path.isfile(scratch / "study.parquet") and os.path.isfile(scratch / "where.png")
