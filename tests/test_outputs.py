"""Every output ddlsim writes (issue 11, items 1-3): one writer (:mod:`ddlsim.atomic`), checked
before any work, never replacing what is not a regular file, following symlinks, and leaving
nothing behind when interrupted.

Special files are made inside ``tmp_path`` (a FIFO, a socket, a directory and, as root, a
character device with /dev/null's numbers), so a regression can only ever replace those.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from ddlsim import atomic
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "tests" / "data" / "validate_runs_small.csv"
LOG = REPO / "tests" / "data" / "logs" / "hvd_tf2_synthetic_resnet50_4gpu.log"
SHIPPED = REPO / "calibration" / "p100-sxm2" / "alexnet" / "b64-fp32.json"


pytestmark = pytest.mark.usefixtures("no_user_calibration")


def special_files(folder: Path) -> dict[str, Path]:
    """Things that exist and are not regular files, by kind."""
    made = {}
    fifo = folder / "fifo.out"
    os.mkfifo(fifo)
    made["FIFO"] = fifo
    directory = folder / "dir.out"
    directory.mkdir()
    made["directory"] = directory
    sock_path = folder / "sock.out"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    sock.close()
    made["socket"] = sock_path
    if os.geteuid() == 0:  # a /dev/null twin, only where mknod is allowed
        device = folder / "null.out"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        made["character device"] = device
    return made


def _kind(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


# -------------------------------------------------------------------------- the writer


def test_refuses_every_kind_of_non_regular_file_and_leaves_it_alone(tmp_path):
    for kind, path in special_files(tmp_path).items():
        before = _kind(path)
        with pytest.raises(ConfigError, match=rf"it is a.* {kind.split()[-1]}"):
            atomic.atomic_write_text(path, "data")
        with pytest.raises(ConfigError, match="only replaces regular files"):
            atomic.check_output(path)
        assert _kind(path) == before, kind
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_symlinks_are_followed_the_link_stays(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "latest.csv"
    link.symlink_to(target.name)
    atomic.atomic_write_text(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # permissions kept
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to("made-by-write.csv")
    atomic.atomic_write_text(dangling, "x\n")
    assert (tmp_path / "made-by-write.csv").read_text() == "x\n" and dangling.is_symlink()


def test_a_symlink_to_a_special_file_is_refused_like_it(tmp_path):
    fifo = special_files(tmp_path)["FIFO"]
    link = tmp_path / "link.csv"
    link.symlink_to(fifo)
    with pytest.raises(ConfigError, match=r"a symlink to .*fifo\.out.*FIFO"):
        atomic.atomic_write_text(link, "data")
    assert link.is_symlink() and stat.S_ISFIFO(os.stat(link).st_mode)


def test_dash_is_standard_output_for_text_and_bytes(capsysbinary):
    atomic.atomic_write_text("-", "text\n")
    atomic.atomic_write("-", lambda tmp: Path(tmp).write_bytes(b"\x00bytes"))
    assert capsysbinary.readouterr().out == b"text\n\x00bytes"


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "x.json"
    out.write_text("old")

    def fail(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic.atomic_write(out, fail)
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"] and out.read_text() == "old"


def test_check_output_names_folder_and_extension_problems(tmp_path):
    with pytest.raises(ConfigError, match=r"folder .*nodir does not exist"):
        atomic.check_output(tmp_path / "nodir" / "x.csv")
    with pytest.raises(ConfigError, match=r"has '\.txt'; it must end in \.csv or \.parquet"):
        atomic.check_output(tmp_path / "x.txt", suffixes=(".csv", ".parquet"))
    with pytest.raises(ConfigError, match="cannot be standard output"):
        atomic.check_output("-")
    atomic.check_output(tmp_path / "X.CSV", suffixes=(".csv",))  # case-insensitive
    atomic.check_output("-", stdout=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_folder_is_refused_up_front(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match="not writable"):
        atomic.check_output(locked / "x.csv")


def test_make_parents_and_remove_empty_undo_only_what_they_made(tmp_path):
    made = atomic.make_parents(tmp_path / "a" / "b" / "c" / "x.json")
    assert made == [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    (tmp_path / "a" / "keep.txt").write_text("")
    atomic.remove_empty(made)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "keep.txt"]


# -------------------------------------------------------------- every sub-command's outputs

#: (sub-command argv with {out} for the output, extension it writes, function doing the work)
WRITERS = [
    (["timeline", "--model", "alexnet", "-o", "{out}"], ".json", "ddlsim.api.prepare"),
    (
        ["sweep", "--model", "alexnet", "--serial", "--quiet", "-o", "{out}"],
        ".csv",
        "ddlsim.tools.analysis.grid.normalise_grid",
    ),
    (["plot", str(RUNS), "-o", "{out}"], ".png", "ddlsim.tools.analysis.sweep.read_rows"),
    (["validate", str(RUNS), "--plot", "{out}"], ".png", "ddlsim.tools.validate.runs.read_runs"),
    (
        ["traces", "import", str(LOG), "--gpu", "v100", "-o", "{out}"],
        ".csv",
        "ddlsim.tools.traces.importer.import_logs",
    ),
    (
        ["calibrate", "--calibration", str(SHIPPED), "--transfer-to", "v100", "--output", "{out}"],
        "",
        "ddlsim.calibration.profile.load",
    ),
]
IDS = [w[0][0] if w[0][0] != "traces" else "traces-import" for w in WRITERS]


def _no_work(monkeypatch, target: str) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"{target} ran before the output was checked")

    monkeypatch.setattr(target, refuse)


@pytest.mark.parametrize("argv, suffix, work", WRITERS, ids=IDS)
def test_special_files_are_refused_before_any_work(argv, suffix, work, tmp_path, monkeypatch, cli):
    _no_work(monkeypatch, work)
    for kind, path in special_files(tmp_path).items():
        if kind == "directory" and not suffix:
            continue  # calibrate --output takes a directory
        target = path.with_name(path.stem + suffix) if suffix else path
        if target != path:
            path.rename(target)
        before = _kind(target)
        args = [a.replace("{out}", str(target)) for a in argv]
        code, _, err = cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1, (kind, err)
        assert err.startswith("ddlsim: error: ") and str(target) in err
        assert _kind(target) == before


@pytest.mark.parametrize("argv, suffix, work", [w for w in WRITERS if w[1]], ids=IDS[:-1])
def test_missing_folder_and_wrong_extension_fail_before_any_work(
    argv, suffix, work, tmp_path, monkeypatch, cli
):
    _no_work(monkeypatch, work)
    for out, text in [
        (tmp_path / "nodir" / f"x{suffix}", "does not exist"),
        (tmp_path / "x.txt", f"it must end in {suffix}"),
    ]:
        code, _, err = cli(*[a.replace("{out}", str(out)) for a in argv])
        assert code == 2 and text in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "x.txt").exists()


def test_calibrate_output_under_a_file_fails_before_any_work(tmp_path, monkeypatch, cli):
    _no_work(monkeypatch, "ddlsim.calibration.profile.load")
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["calibrate", "--calibration", str(SHIPPED), "--transfer-to", "v100"]
    code, _, err = cli(*argv, "--output", str(blocker / "cal"))
    assert code == 2 and "is not a directory" in err


def test_every_writer_follows_a_symlink(tmp_path, cli):
    for name, argv in [
        ("trace.json", ["timeline", "--model", "alexnet", "-o"]),
        ("rows.csv", ["traces", "import", str(LOG), "--gpu", "v100", "-o"]),
        ("sweep.csv", ["sweep", "--model", "alexnet", "--serial", "--quiet", "-o"]),
    ]:
        real = tmp_path / f"real-{name}"
        real.write_text("old")
        link = tmp_path / name
        link.symlink_to(real)
        code, _, err = cli(*argv, str(link))
        assert code == 0, err
        assert link.is_symlink() and real.read_text() != "old"


# ----------------------------------------------------------------------------- Ctrl-C


def test_interrupted_calibrate_leaves_no_folder(tmp_path, monkeypatch, cli):
    """The folders ddlsim makes (the user calibration directory, here missing) go again."""
    from ddlsim.tools.calibrate import driver
    from ddlsim.tools.calibrate.devices import LocalDevice, Target

    cpu = LocalDevice("/device:CPU:0", "cpu", 0, "test CPU")
    monkeypatch.setattr(driver, "_target", lambda req: Target(cpu, "epyc-zen4-core", True))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "profile_pass", interrupted)
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path / "new" / "calibration"))
    argv = ["calibrate", "--device", "cpu", "--model", "alexnet", "--batch", "2"]
    code, _, err = cli(*argv)  # into the user calibration directory, created as needed
    assert code == 130
    assert err.endswith("\nddlsim: interrupted\n") or err == "ddlsim: interrupted\n"
    assert not (tmp_path / "new").exists()


def test_interrupted_profile_write_removes_the_folders_it_made(tmp_path, monkeypatch):
    from ddlsim.calibration import profile as profile_io

    prof = profile_io.load(SHIPPED)

    def interrupted_sync(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("ddlsim.atomic.os.fsync", interrupted_sync)
    with pytest.raises(KeyboardInterrupt):
        profile_io.save(prof, tmp_path / "a" / "b" / "x.json")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_line_is_on_its_own(capsys, monkeypatch):
    """The progress bar's open line (on a terminal) is ended before 'ddlsim: interrupted'."""
    import sys

    from ddlsim.tools.analysis import sweep

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)

    real, calls = sweep.evaluate, []

    def second_interrupts(config):
        calls.append(config)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(config)

    monkeypatch.setattr(sweep, "evaluate", second_interrupts)
    code = main(["sweep", "--model", "alexnet", "--gpus", "1", "2", "4", "--serial", "-o", "-"])
    captured = capsys.readouterr()
    assert code == 130 and captured.out == ""  # no half table on stdout
    bar, _, last = captured.err.rstrip("\n").rpartition("\n")
    assert last == "ddlsim: interrupted"
    assert bar.endswith("left") and "1/3 configurations" in bar


def test_ctrl_c_during_a_dask_sweep_leaves_nothing(tmp_path):
    """Ctrl-C as a terminal sends it (to the whole process group) while Dask workers compute:
    exit 130, 'ddlsim: interrupted' on its own line, no traceback or Dask warning from any
    process, no output file, no scratch files (TMPDIR stays empty)."""
    import signal
    import time

    from dask_sweep import start_dask_sweep

    proc, out, scratch = start_dask_sweep(tmp_path)
    seen = b""
    deadline = time.monotonic() + 60
    while b"configurations" not in seen and time.monotonic() < deadline:
        seen += os.read(proc.stderr.fileno(), 4096)  # the bar is drawn: workers are computing
    os.killpg(proc.pid, signal.SIGINT)
    rest, err_rest = proc.communicate(timeout=60)
    err = (seen + err_rest).decode()
    assert proc.returncode == 130, err
    assert err.endswith("\nddlsim: interrupted\n"), err[-300:]
    assert "Traceback" not in err and "WARNING" not in err and "distributed" not in err, err
    assert rest == b"" and not out.exists()
    time.sleep(0.5)
    assert list(scratch.iterdir()) == []


# issue 33 (items 4, 7, 8): a closed or broken standard output, the longest legal names, and a
# trailing slash


def _ddlsim(*argv: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "ddlsim", *argv]


@pytest.mark.parametrize("argv", [["predict", "--gpus", "8", "--json"], ["predict", "--gpus", "8"]])
def test_a_closed_standard_output_is_one_error_line(argv):
    import subprocess

    done = subprocess.run(
        _ddlsim(*argv),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),  # as the shell's ">&-"
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "ddlsim: error: standard output is closed (nothing was written)\n"


def test_a_broken_pipe_is_one_error_line():
    import subprocess

    proc = subprocess.Popen(
        _ddlsim("timeline", "--gpus", "64", "-o", "-"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader goes away before ddlsim writes
    err = proc.stderr.read()
    assert proc.wait() == 2
    assert err == (
        "ddlsim: error: standard output was closed before all of the output was written\n"
    )


@pytest.mark.parametrize("length", [242, 250, 255])
def test_every_legal_file_name_can_be_written(tmp_path, monkeypatch, length):
    monkeypatch.chdir(tmp_path)
    name = "k" * (length - len(".json")) + ".json"
    assert main(["timeline", "--gpus", "16", "-o", name]) == 0
    assert os.listdir(tmp_path) == [name]


def test_a_name_longer_than_the_file_system_takes_is_refused_before_the_work(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert main(["timeline", "--gpus", "16", "-o", "k" * 251 + ".json"]) == 2
    err = capsys.readouterr().err
    assert "File name too long" in err and err.count("\n") == 1
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["out.json/", "out.csv/"])
def test_a_trailing_slash_is_refused(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    cmd = "timeline" if name.startswith("out.json") else "sweep"
    assert main([cmd, "--gpus", "16", "-o", name]) == 2
    err = capsys.readouterr().err
    assert f"'{name}' ends in '/'" in err and err.count("\n") == 1
    assert os.listdir(tmp_path) == []
    with pytest.raises(ConfigError, match="ends in '/'"):
        atomic.atomic_write_text(f"{tmp_path}/x.txt/", "text")


def test_the_sweep_progress_redraws_only_on_a_terminal():
    import io

    from ddlsim.cli.progress import Bar as _Bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log = io.StringIO()
    bar = _Bar(log)
    for done in range(1, 1001):
        bar(done, 1000, elapsed_s=done * 0.025)  # 25 s in all
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert [line.split()[1] for line in lines] == ["400/1000", "800/1000", "1000/1000"]
    tty = Terminal()
    bar = _Bar(tty)
    for done in range(1, 4):
        bar(done, 3, elapsed_s=done)
    bar.close()
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().endswith("\n")
