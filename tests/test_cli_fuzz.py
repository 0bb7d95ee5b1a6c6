"""A fuzz test of the whole command line (issue 11, Checks).

Hypothesis draws, for every sub-command, a few of its flags (read from the parser itself, so a
flag added later is fuzzed too) with random values (numbers out of range, non-finite, not
numbers, unknown names), input files with random contents (empty, truncated, binary, another
file's schema, missing, a folder) and output paths of every kind (a new file, a missing
folder, a wrong extension, a folder, a FIFO, an existing file, ``-``). Whatever it draws:

- no traceback, and the exit code is 0, 2 or 130;
- a failure is one line on stderr (``ddlsim: error: ...``) and leaves the scratch folder as it
  was: no output, no temporary file, an existing file unchanged, a FIFO still a FIFO.

The default run keeps to a few examples per sub-command (well under 30 s); the ``slow``
profile draws many more. Sweeps run serially (``--serial``) and TensorFlow is reported missing,
so that an example costs milliseconds, not a Dask start-up or a profiling pass.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddlsim.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
VALID = {
    "calibration": (REPO / "calibration" / "p100-sxm2" / "alexnet" / "b64-fp32.json").read_bytes(),
    "runs": (DATA / "validate_runs_small.csv").read_bytes(),
    "timeline": (DATA / "horovod_timeline_4gpu_nccl.json").read_bytes(),
    "log": (DATA / "logs" / "hvd_tf2_synthetic_resnet50_4gpu.log").read_bytes(),
    "grid": b"model: alexnet\ngpus: [1, 2]\n",
    "sweep": b"",  # filled below: a small sweep CSV, as ddlsim sweep writes it
}
NUMBERS = [
    *("0", "-1", "1", "2", "3", "8", "16", "0.5", "64", "1e300", "-1e-300", "99999999999"),
    *("nan", "inf", "-inf", "abc", "", "1:2", "0x10"),
]
NAMES = [
    *("alexnet", "resnet50", "p100", "v100", "k80", "epyc-zen4-core", "ib-edr", "25gbe"),
    *("nvlink-p100", "pcie3", "tcp", "rdma", "ring", "tree", "ps", "horovod-gloo", "none"),
    *("scaling", "breakdown", "cpu", "gpu:0", "", "ünïcode", "-", "x" * 300),
]
STRAGGLERS = ["0:1.2", "1:1.5,1:2", "0:inf", "99:1.1", "a:b", ",", "3:0"]
#: dest -> the kind of file the flag or positional names
INPUTS = {
    "calibration": "calibration",
    "from_json": "result",
    "grid": "grid",
    "from_log": "log",
    "csv": "runs",
    "sweep": "sweep",
    "logs": "log",
    "timeline": "timeline",
}
OUTPUTS = ("output", "plot")
EXTENSIONS = (".json", ".csv", ".parquet", ".png", ".svg", ".txt", "")
#: what each command writes (drawn more often than the others)
WRITES = {
    "timeline": (".json",),
    "sweep": (".csv", ".parquet"),
    "plot": (".png", ".svg"),
    "validate": (".png", ".svg"),
    "import": (".csv",),
    "network": (".json",),
}
#: a start that gets past the first checks, used for half of the examples
SEEDS = {
    "calibrate": ["--calibration", "<seed>", "--transfer-to", "v100"],
    "sweep": ["--model", "alexnet", "--gpus", "1", "8"],
    "timeline": ["--model", "alexnet"],
}


def _sweep_csv() -> bytes:
    from ddlsim.analysis.sweep import rows_to_csv, run_grid

    rows = run_grid({"model": ["alexnet"], "gpus": [1, 2, 8], "comm": ["horovod-nccl", "ps"]})
    return rows_to_csv(rows).encode("utf-8")


def _sweep_parquet(csv_bytes: bytes) -> bytes:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    buffer = io.BytesIO()
    pd.read_csv(io.BytesIO(csv_bytes)).to_parquet(buffer, index=False)
    return buffer.getvalue()


def _result_json() -> bytes:
    import ddlsim

    doc = ddlsim.predict("alexnet", 8).to_dict()
    return json.dumps(doc, indent=2).encode("utf-8")


VALID["sweep"] = _sweep_csv()
VALID["result"] = _result_json()
VALID["parquet"] = _sweep_parquet(VALID["sweep"])


def _sub_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                if nested:
                    yield from _sub_parsers(sub, (*path, name))
                if not nested or not all(a.required for a in nested):
                    yield (*path, name), sub  # optional sub-commands: the command runs alone


COMMANDS = dict(_sub_parsers(build_parser()))


def _is_number(action: argparse.Action) -> bool:
    name = getattr(action.type, "__name__", "")
    numeric = name in ("integer", "number", "positive_number") or name.startswith("integer >=")
    return action.type in (int, float) or numeric


def _value(draw, action: argparse.Action, files) -> list[str]:
    """Random value(s) for one action: 1-3 of them for nargs='+'."""
    count = draw(st.integers(1, 3)) if action.nargs in ("+", "*") else 1
    out = []
    for _ in range(count):
        if action.dest in INPUTS:
            out.append(draw(files(INPUTS[action.dest])))
        elif action.dest in OUTPUTS:
            out.append("<output>")
        elif action.dest == "stragglers":
            out.append(draw(st.sampled_from(STRAGGLERS)))
        elif action.choices:
            out.append(draw(st.sampled_from([*map(str, action.choices), "bogus"])))
        elif _is_number(action):
            out.append(draw(st.sampled_from(NUMBERS)))
        else:
            out.append(draw(st.sampled_from(NAMES)))
    return out


@st.composite
def invocations(draw, path: tuple[str, ...]):
    """(argv with placeholders, input files to create, output kind)."""
    parser = COMMANDS[path]
    inputs: dict[str, tuple[str, str, str]] = {}

    def files(kind: str):
        @st.composite
        def one(draw2):
            name = f"in{len(inputs)}"
            kinds = ["valid"] * 4 + ["empty", "truncated", "binary", "other", "missing", "dir"]
            content = draw2(st.sampled_from(kinds))
            suffix = draw2(st.sampled_from([".dat", ".csv", ".parquet", ".json", ".yaml"]))
            inputs[name] = (kind, content, suffix)
            return f"<{name}>"

        return one()

    argv: list[str] = list(path)
    if path[-1] in SEEDS and draw(st.booleans()):
        seed = SEEDS[path[-1]]
        argv += [draw(files("calibration")) if a == "<seed>" else a for a in seed]
    positionals = [a for a in parser._actions if not a.option_strings]
    optionals = [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
    ]
    required = [a for a in optionals if a.required]
    chosen = (
        draw(st.lists(st.sampled_from(optionals), max_size=4, unique_by=id)) if optionals else []
    )
    for action in [*required, *(a for a in chosen if a not in required)]:
        argv.append(action.option_strings[-1])
        if action.nargs != 0:
            argv.extend(_value(draw, action, files))
    for action in positionals:
        argv.extend(_value(draw, action, files))
    if path == ("sweep",):
        argv.append("--serial")
    output = draw(
        st.sampled_from(["new"] * 4 + ["nodir", "dir", "fifo", "existing", "symlink", "-"])
    )
    good = WRITES.get(path[-1], ())
    extension = draw(st.sampled_from([*good * 6, *EXTENSIONS]))
    return argv, inputs, (output, extension)


def _make_input(
    folder: Path, name: str, kind: str, content: str, suffix: str, rng_bytes: bytes
) -> Path:
    path = folder / f"{name}{suffix}"
    valid = VALID["parquet"] if kind == "sweep" and suffix == ".parquet" else VALID[kind]
    if content == "missing":
        return path
    if content == "dir":
        path.mkdir()
        return path
    data = {
        "valid": valid,
        "empty": b"",
        "truncated": valid[: max(1, len(valid) // 3)],
        "binary": rng_bytes,
        "other": VALID["runs" if kind != "runs" else "calibration"],
    }[content]
    path.write_bytes(data)
    return path


def _make_output(folder: Path, kind: str, extension: str) -> str:
    if kind == "-":
        return "-"
    path = folder / f"out{extension}"
    if kind == "nodir":
        return str(folder / "nodir" / f"out{extension}")
    if kind == "dir":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "existing":
        path.write_bytes(b"keep me")
    elif kind == "symlink":
        (folder / f"target{extension}").write_bytes(b"keep me")
        path.symlink_to(f"target{extension}")
    return str(path)


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    out = {}
    for p in sorted(folder.rglob("*")):
        mode = os.lstat(p).st_mode
        data = p.read_bytes() if stat.S_ISREG(mode) else None
        out[str(p.relative_to(folder))] = (stat.S_IFMT(mode), data)
    return out


def check_invocation(argv, inputs, output, rng_bytes: bytes, monkeypatch) -> None:
    with tempfile.TemporaryDirectory(prefix="ddlsim-fuzz-") as tmp:
        folder = Path(tmp)
        monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(folder / "usercal"))
        real = {
            f"<{name}>": str(_make_input(folder, name, *spec, rng_bytes))
            for name, spec in inputs.items()
        }
        real["<output>"] = _make_output(folder, *output)
        args = [real.get(a, a) for a in argv]
        if "--output" in args and args[0] == "calibrate":
            i = args.index("--output") + 1
            args[i] = str(folder / "cal") if output[0] == "new" else args[i]
        before = _snapshot(folder)
        err = io.StringIO()
        stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # with .buffer, like sys.stdout
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # --help / --version
                code = exc.code or 0
            except BaseException as exc:
                pytest.fail(f"ddlsim {args} raised {type(exc).__name__}: {exc}")
        text = err.getvalue()
        assert code in (0, 2, 130), (args, code, text)
        assert "Traceback" not in text, (args, text)
        after = _snapshot(folder)
        assert not [p for p in after if p.endswith(".tmp")], (args, after)
        if code != 0:
            lines = [line for line in text.splitlines() if not line.startswith("ddlsim: warn")]
            assert len(lines) == 1 and lines[0].startswith("ddlsim: "), (args, text)
            assert after == before, (args, text)
        else:
            changed = {p for p in after if before.get(p) != after[p]} | (
                before.keys() - after.keys()
            )
            for path in changed:  # success may write the output (or calibrations), nothing else
                assert path.startswith(("out", "target", "cal", "usercal")), (args, path)
            if output[0] == "fifo":
                assert stat.S_ISFIFO(after[f"out{output[1]}"][0])


def _fuzz(path: tuple[str, ...], examples: int):
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=examples < 100,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(invocation=invocations(path), rng_bytes=st.binary(min_size=1, max_size=64))
    def run(invocation, rng_bytes, monkeypatch):
        argv, inputs, output = invocation
        check_invocation(argv, inputs, output, rng_bytes, monkeypatch)

    return run


@pytest.fixture(autouse=True)
def _no_tensorflow(monkeypatch):
    """``calibrate`` reports TensorFlow missing instead of profiling (seconds per example)."""
    from ddlsim.calibrate import tf_env

    def missing():
        raise tf_env.TensorFlowMissingError(tf_env.INSTALL_HINT + " [fuzz test]")

    monkeypatch.setattr(tf_env, "import_tensorflow", missing)


IDS = [" ".join(p) for p in COMMANDS]


@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_fuzz_every_sub_command(path, monkeypatch):
    _fuzz(path, 12)(monkeypatch=monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("path", list(COMMANDS), ids=IDS)
def test_fuzz_every_sub_command_long(path, monkeypatch):
    _fuzz(path, 150)(monkeypatch=monkeypatch)


def test_the_fuzzer_reaches_every_sub_command_and_its_flags():
    assert {"predict", "timeline", "sweep", "plot", "validate", "calibrate"} <= {
        p[-1] for p in COMMANDS
    }
    assert ("traces", "import") in COMMANDS and ("traces", "timeline-summary") in COMMANDS
    assert ("calibrate", "network") in COMMANDS
    flags = {o for sub in COMMANDS.values() for a in sub._actions for o in a.option_strings}
    assert {"--gpus", "--stragglers", "--from-json", "--max-events", "--max-configs"} <= flags
