"""A fuzz test of the whole command line (issue 11, Checks; issue 23, Checks).

Hypothesis draws, for every sub-command, a few of its flags (read from the parser itself, so a
flag added later is fuzzed too) with random values (numbers out of range, non-finite, huge and
tiny -- 1e308, 1e-308, 5e-324 --, not numbers, unknown names, 300 characters), input files with
random contents (empty, truncated, binary, another file's schema, absurd values in the right
schema, missing, a folder, a name longer than the file system takes) and output paths of every
kind (a new file, a missing folder, a wrong extension, a folder, a FIFO, an existing file, a
name too long, a path too long, a legal 250-character name, a trailing slash, ``-``); an
input may also be a FIFO (refused at once, never opened) or start with a byte-order mark,
and whether SIGTERM or SIGINT arrives while the command writes its output. Whatever it draws:

- no traceback, and the exit code is 0, 2, 130 (SIGINT) or 143 (SIGTERM);
- a failure is one line on stderr (``ddlsim: error: ...``, ``ddlsim: interrupted``,
  ``ddlsim: terminated``) and leaves the scratch folder as it was: no output, no temporary
  file, an existing file unchanged, a FIFO still a FIFO; and no temporary folder is left in
  the temporary directory (``tempfile``'s, pointed into the scratch folder).

The default run keeps to a few examples per sub-command (well under 30 s); the ``slow``
profile draws many more. Sweeps run serially (``--serial``) and TensorFlow is reported missing,
so that an example costs milliseconds, not a Dask start-up or a profiling pass.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import signal
import stat
import tempfile
import time
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
    *("1e308", "1e-308", "5e-324", "-0", "1.7976931348623157e308", "1" * 400),
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
#: a file-name component longer than NAME_MAX (255), and a path longer than PATH_MAX (4096)
LONG_NAME = "n" * 300
#: the longest legal file-name component here (NAME_MAX): a name of it must be writable
MAX_NAME = 255
LONG_PATH = "/".join(["d" * 200] * 25)
#: what each kind of input file holds when its values are absurd (the right schema)
ABSURD = {
    "calibration": lambda: _absurd_calibration(),
    "sweep": lambda: VALID["sweep"].replace(b"\nalexnet,p100-sxm2,1,", b"\nalexnet,p100-sxm2,-4,"),
    "runs": lambda: VALID["runs"].replace(b",synthetic,219,", b",synthetic,1e-308,"),
}
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
    "plot": ["<sweep>", "--kind", "breakdown"],
    "sweep": ["--model", "alexnet", "--gpus", "1", "8"],
    "timeline": ["--model", "alexnet"],
}


def _sweep_csv() -> bytes:
    from ddlsim.tools.analysis.sweep import rows_to_csv, run_grid

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


def _absurd_calibration() -> bytes:
    doc = json.loads(VALID["calibration"])
    doc["layers"] = [[n, 1e308, 1e-308, g] for n, _, _, g in doc["layers"]]
    return json.dumps(doc).encode("utf-8")


VALID["sweep"] = _sweep_csv()
VALID["result"] = _result_json()
VALID["parquet"] = _sweep_parquet(VALID["sweep"])


def _runs_with(change) -> bytes:
    """The small runs file, its rows changed by ``change(header, rows) -> rows``."""
    header, *rows = list(csv.reader(io.StringIO(VALID["runs"].decode("utf-8"))))
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([header, *change(header, rows)])
    return text.getvalue().encode("utf-8")


def _long_cell(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    rows[1][header.index("note")] = "x" * 200_000  # past Python's csv field limit (131,072)
    return rows


def _one_configuration_many_times(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    base, eight = rows[0], rows[1]  # a 1-GPU baseline and an 8-GPU row of it
    return [base, *([f"{eight[0]}-{i}", *eight[1:]] for i in range(3_000))]


def _calibration_with(**fields) -> bytes:
    doc = json.loads(VALID["calibration"])
    for key, value in fields.items():
        if value is None:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc).encode("utf-8")


#: the hostile tester's files of issue 33, by content (made only when a case asks for one)
HOSTILE = {
    "nan-total": lambda: (
        (REPO / "traces" / "horovod" / "train_np2.log").read_bytes().replace(b"24.74 +-", b"nan +-")
    ),
    "wide-header": lambda: (
        VALID["runs"].split(b"\n", 1)[0]
        + b","
        + b",".join(b"extra%d" % i for i in range(20_000))
        + b"\n"
    ),
    "long-cell": lambda: _runs_with(_long_cell),
    "one-configuration": lambda: _runs_with(_one_configuration_many_times),
    "key-twice": lambda: b"model: alexnet\nmodel: resnet50\ngpus: [1, 2]\n",
    "no-layers": lambda: _calibration_with(layers=None),
    "half-batch": lambda: _calibration_with(batch_per_gpu=64.5),
    "cpu-device": lambda: _calibration_with(
        device={**json.loads(VALID["calibration"])["device"], "catalog_id": "cpu"}
    ),
    "absurd-network": lambda: json.dumps(
        {
            "schema": "ddlsim-network-calibration",
            "schema_version": 1,
            "cluster": {"inter_node": "ib-edr", "transport": "rdma"},
            "terms": {"network": {"bandwidth_GBps": 1e308, "latency_us": 3.0}},
        }
    ).encode("utf-8"),
    "v100-log": lambda: (
        REPO / "traces" / "measured" / "collectives" / "logs" / "S15_all_reduce_perf.log"
    ).read_bytes(),
}


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
            kinds += ["fifo", "bom"]  # a FIFO is refused at once; a byte-order mark is read
            kinds += ["absurd", "long"] if kind in ABSURD else ["long"]
            content = draw2(st.sampled_from(kinds))
            suffix = draw2(st.sampled_from([".dat", ".csv", ".parquet", ".json", ".yaml"]))
            inputs[name] = (kind, content, suffix)
            return f"<{name}>"

        return one()

    argv: list[str] = list(path)
    if path[-1] in SEEDS and draw(st.booleans()):
        seed = SEEDS[path[-1]]
        stand_in = {"<seed>": "calibration", "<sweep>": "sweep"}
        argv += [draw(files(stand_in[a])) if a in stand_in else a for a in seed]
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
    kinds = ["new"] * 4 + ["nodir", "dir", "fifo", "existing", "symlink", "-", "long", "deep"]
    kinds += ["slash", "maxname"]  # a trailing slash; a legal name of 250 characters
    output = draw(st.sampled_from(kinds))
    good = WRITES.get(path[-1], ())
    extension = draw(st.sampled_from([*good * 6, *EXTENSIONS]))
    signal_at_write = draw(st.sampled_from([None] * 4 + [signal.SIGTERM, signal.SIGINT]))
    return argv, inputs, (output, extension), signal_at_write


def _make_input(
    folder: Path, name: str, kind: str, content: str, suffix: str, rng_bytes: bytes
) -> Path:
    path = folder / f"{name}{suffix}"
    valid = VALID["parquet"] if kind == "sweep" and suffix == ".parquet" else VALID[kind]
    if content == "long":
        return folder / f"{name}{LONG_NAME}{suffix}"
    if content == "dev-zero":  # endless, and not a regular file
        return Path("/dev/zero")
    if content == "huge":  # 50 GiB, sparse: reading it whole would take the memory
        with open(path, "wb") as fh:
            fh.truncate(50 << 30)
        return path
    if content in HOSTILE:
        path.write_bytes(HOSTILE[content]())
        return path
    if content == "missing":
        return path
    if content == "dir":
        path.mkdir()
        return path
    if content == "fifo":
        os.mkfifo(path)
        return path
    data = {
        "valid": valid,
        "empty": b"",
        "truncated": valid[: max(1, len(valid) // 3)],
        "binary": rng_bytes,
        "other": VALID["runs" if kind != "runs" else "calibration"],
        "absurd": ABSURD[kind]() if kind in ABSURD else valid,
        "bom": b"\xef\xbb\xbf" + valid,
    }[content]
    path.write_bytes(data)
    return path


def _make_output(folder: Path, kind: str, extension: str) -> str:
    if kind in ("-", "closed"):
        return "-"
    path = folder / f"out{extension}"
    if kind == "nodir":
        return str(folder / "nodir" / f"out{extension}")
    if kind == "long":
        return str(folder / f"out{LONG_NAME}{extension}")
    if kind == "deep":
        return str(folder / LONG_PATH / f"out{extension}")
    if kind == "slash":
        return str(path) + "/"
    if kind == "maxname":
        return str(folder / f"out{'m' * (MAX_NAME - 3 - len(extension))}{extension}")
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


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes | int | None]]:
    """Each path's kind and content (a file over 16 MiB: its size and time, never read)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        info = os.lstat(p)
        data = None
        if stat.S_ISREG(info.st_mode):
            big = info.st_size > 16 << 20
            data = hash((info.st_size, info.st_mtime_ns)) if big else p.read_bytes()
        out[str(p.relative_to(folder))] = (stat.S_IFMT(info.st_mode), data)
    return out


#: where the scratch folders go (``tempfile``'s own folder is pointed into each one)
BASE_TMP = tempfile.gettempdir()
#: exit codes: success, bad input, SIGINT, SIGTERM
EXIT_CODES = (0, 2, 130, 143)


def _is_progress(line: str) -> bool:
    """A sweep's progress bar (redrawn after ``\\r``), or what is left of it."""
    return not line.strip() or (line.startswith("[") and "configurations" in line)


#: an exception's repr in a message ("KeyError('layers')"): say what is wrong in words instead
EXCEPTION_REPR = re.compile(r"\b[A-Z]\w*(Error|Exception)\(")


def check_invocation(
    argv, inputs, output, rng_bytes: bytes, monkeypatch, sig=None, words: str | None = None
) -> int:
    """Run one drawn invocation and check it; its exit code. ``output`` ``("closed", "")``
    runs it with standard output closed (``>&-``); ``words``, when given, must be in what it
    printed."""
    with tempfile.TemporaryDirectory(prefix="ddlsim-fuzz-", dir=BASE_TMP) as tmp:
        folder = Path(tmp)
        scratch_tmp = folder / "tmp"
        scratch_tmp.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(scratch_tmp))
        monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(folder / "usercal"))
        real = {
            f"<{name}>": str(_make_input(folder, name, *spec, rng_bytes))
            for name, spec in inputs.items()
        }
        real["<output>"] = _make_output(folder, *output)
        args = [real.get(a, a) for a in argv]
        if "--output" in args and args[0] == "calibrate" and output[0] == "new":
            i = args.index("--output") + 1
            (folder / "cal").mkdir()  # an output folder must exist (no folder you name is made)
            args[i] = str(folder / "cal")
        before = _snapshot(folder)
        if sig is not None:  # the signal arrives as the output is put in place
            real_replace = os.replace

            def replace_after_signal(*a, **k):
                os.kill(os.getpid(), sig)
                time.sleep(5)  # the handler raises here
                return real_replace(*a, **k)

            monkeypatch.setattr(os, "replace", replace_after_signal)
        err = io.StringIO()
        stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # with .buffer, like sys.stdout
        if output[0] == "closed":
            stdout = None  # as Python starts with file descriptor 1 closed
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
                try:
                    code = main(args)
                except SystemExit as exc:  # --help / --version
                    code = exc.code or 0
                except BaseException as exc:
                    pytest.fail(f"ddlsim {args} raised {type(exc).__name__}: {exc}")
        finally:
            if sig is not None:
                monkeypatch.setattr(os, "replace", real_replace)
        text = err.getvalue()
        _record(args, code, text, sig)
        assert code in EXIT_CODES, (args, code, text)
        assert "Traceback" not in text, (args, text)
        assert "\r" not in text, (args, "a progress redraw on what is not a terminal")
        assert not EXCEPTION_REPR.search(text), (args, text)
        if words is not None:
            printed = ""
            if stdout is not None:
                stdout.flush()
                printed = stdout.buffer.getvalue().decode("utf-8", "replace")
            assert words in text + printed, (args, words, text)
        assert code not in (130, 143) or sig is not None, (args, code, text)
        after = _snapshot(folder)
        assert not [p for p in after if p.endswith(".tmp")], (args, after)
        if code != 0:
            lines = [
                line
                for line in text.splitlines()
                if not line.startswith("ddlsim: warn") and not _is_progress(line)
            ]
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
        assert list(scratch_tmp.iterdir()) == [], (args, "left in the temporary directory")
        return code


def _record(args: list[str], code: int, text: str, sig) -> None:
    """One line of JSON per invocation to ``$DDLSIM_FUZZ_REPORT`` (counts for a report)."""
    report = os.environ.get("DDLSIM_FUZZ_REPORT")
    if report:
        entry = {"command": args[0], "code": code, "traceback": "Traceback" in text}
        entry["signal"] = None if sig is None else signal.Signals(sig).name
        with open(report, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")


def _fuzz(path: tuple[str, ...], examples: int):
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=examples < 100,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(invocation=invocations(path), rng_bytes=st.binary(min_size=1, max_size=64))
    def run(invocation, rng_bytes, monkeypatch):
        argv, inputs, output, sig = invocation
        check_invocation(argv, inputs, output, rng_bytes, monkeypatch, sig)

    return run


@pytest.fixture(autouse=True)
def _no_tensorflow(monkeypatch):
    """``calibrate`` reports TensorFlow missing instead of profiling (seconds per example)."""
    from ddlsim.tools.calibrate import tf_env

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


TIMELINE = ["timeline", "--model", "alexnet", "-o", "<output>"]
PLOT = ["plot", "<in0>", "-o", "<output>"]
TRANSFER = ["calibrate", "--calibration", "<in0>", "--transfer-to", "v100"]
ANCHOR = ["calibrate", "--calibration", "<in0>", "--anchor-throughput", "1e-308"]
SWEEP_CSV = {"in0": ("sweep", "valid", ".csv")}
CAL, ABSURD_CAL = (
    {"in0": ("calibration", "valid", ".json")},
    {"in0": ("calibration", "absurd", ".json")},
)
TERM, INT = signal.SIGTERM, signal.SIGINT


@pytest.mark.parametrize(
    ("argv", "inputs", "output", "sig", "code"),
    [
        (TIMELINE, {}, ("new", ".json"), TERM, 143),
        (TIMELINE, {}, ("existing", ".json"), INT, 130),
        (PLOT, SWEEP_CSV, ("new", ".png"), TERM, 143),
        (PLOT, {"in0": ("sweep", "absurd", ".csv")}, ("new", ".png"), None, 2),
        (
            ["sweep", "--model", "alexnet", "--serial", "-o", "<output>"],
            {},
            ("new", ".csv"),
            TERM,
            143,
        ),
        (TRANSFER, CAL, ("new", ""), TERM, 143),
        (TRANSFER, ABSURD_CAL, ("new", ""), None, 2),
        (ANCHOR, CAL, ("new", ""), None, 2),
        (
            ["predict", "--calibration", "<in0>"],
            {"in0": ("calibration", "long", ".json")},
            ("new", ""),
            None,
            2,
        ),
        (TIMELINE, {}, ("long", ".json"), None, 2),
        (TIMELINE, {}, ("deep", ".json"), None, 2),
        (
            ["validate", "<in0>", "--plot", "<output>"],
            {"in0": ("runs", "absurd", ".csv")},
            ("new", ".png"),
            TERM,
            143,
        ),
    ],
)
def test_the_new_hostile_inputs_are_reached(argv, inputs, output, sig, code, monkeypatch):
    """Whatever hypothesis draws, these cases run: a signal while writing (SIGTERM 143,
    SIGINT 130), absurd values in the right schema, names and paths too long."""
    assert check_invocation(argv, inputs, output, b"\x00\xff", monkeypatch, sig) == code


def _one(kind: str, content: str, suffix: str = ".csv") -> dict[str, tuple[str, str, str]]:
    return {"in0": (kind, content, suffix)}


NEW = ("new", ".json")
GPUS = [str(g) for g in range(1, 1001)]
#: issue 33's defects, each as a case of the fuzz test: (item, argv, inputs, output, exit code,
#: words it prints). Every case also meets the fuzz test's invariants (no traceback, no
#: exception repr, no progress redraw off a terminal, one error line, nothing left behind) and
#: ends within ISSUE_33_SECONDS: no hang.
ISSUE_33 = [
    (1, ["predict", "--calibration", "<in0>"], _one("calibration", "dev-zero"), NEW, 2,
     "it is a character device"),
    (1, ["validate", "<in0>"], _one("runs", "huge"), NEW, 2, "is too large: 51,200.0 MiB"),
    (1, ["sweep", "--grid", "<in0>", "--serial", "-o", "<output>"], _one("grid", "huge", ".yaml"),
     ("new", ".csv"), 2, "is too large"),
    (2, ["validate", "<in0>"], _one("runs", "fifo"), NEW, 2, "it is a FIFO"),
    (2, ["traces", "timeline-summary", "<in0>"], _one("timeline", "fifo", ".json"), NEW, 2,
     "it is a FIFO"),
    (3, ["traces", "import", "<in0>", "--gpu", "epyc-zen4-core"], _one("log", "nan-total", ".log"),
     NEW, 2, "no usable throughput"),
    (4, ["predict", "--gpus", "8", "--json"], {}, ("closed", ""), 2, "standard output is closed"),
    (5, ["validate", "<in0>"], _one("runs", "wide-header"), NEW, 0, None),
    (6, ["sweep", "--gpus", "1", "--max-configs", "1000001", "-o", "<output>"], {},
     ("new", ".csv"), 2, "from 1 to 1,000,000"),
    (6, ["sweep", "--gpus", *GPUS, "--batch", *GPUS, "--fusion-threshold-mb", *GPUS[:999],
         "--cycle-time-ms", *GPUS, "--max-configs", "1000000", "-o", "<output>"], {},
     ("new", ".csv"), 2, "999,000,000,000 configurations"),
    (7, ["timeline", "--gpus", "16", "-o", "<output>"], {}, ("maxname", ".json"), 0, None),
    (8, ["timeline", "--gpus", "16", "-o", "<output>"], {}, ("slash", ".json"), 2,
     "ends in '/'"),
    (9, ["validate", "<in0>", "--json"], _one("runs", "absurd"), NEW, 0,
     "column 'images_per_sec' must be in 0.01..1e+13"),
    (9, ["predict", "--calibration", "<in0>"], _one("calibration", "absurd", ".json"), NEW, 2,
     None),
    (9, ["predict", "--calibration", "<in0>"], _one("calibration", "half-batch", ".json"), NEW,
     2, "field 'batch_per_gpu' must be an integer, got 64.5"),
    (9, ["predict", "--gpus", "16", "--network-calibration", "<in0>"],
     _one("calibration", "absurd-network", ".json"), NEW, 2,
     "terms.network.bandwidth_GBps must be a number in 0.001..1e+06 GB/s"),
    (10, ["predict", "--xla", "--fusion", "bn-act"], {}, NEW, 2, "--fusion contradicts --xla"),
    (10, ["predict", "--horovod-version", "0.99"], {}, NEW, 2, "no Horovod release 0.99"),
    (10, ["sweep", "--grid", "<in0>", "--serial", "-o", "<output>"],
     _one("grid", "key-twice", ".yaml"), ("new", ".csv"), 2, "'model' is given twice"),
    (10, ["calibrate", "network", "<in0>", "--gpu", "a100", "--inter-node", "efa", "-o",
          "<output>"], _one("log", "v100-log", "_all_reduce_perf.log"), NEW, 2,
     "contradicts the logs"),
    (11, ["validate", "<in0>", "--json"], _one("runs", "long-cell"), NEW, 0,
     "a cell longer than 131,072 characters"),
    (12, ["predict", "--calibration", "<in0>"], _one("calibration", "no-layers", ".json"), NEW, 2,
     "field 'layers' must be a list of layer rows, it is missing"),
    (13, ["predict", "--model", "alexnet", "--calibration", "<in0>"],
     _one("calibration", "bom", ".json"), NEW, 0, "throughput"),
    (14, ["predict", "--model", "alexnet", "--calibration", "<in0>"],
     _one("calibration", "cpu-device", ".json"), NEW, 2, "not in the device catalog"),
    (15, ["predict", "--gpus", "8", "--intra-node", "none", "--json"], {}, NEW, 0,
     "the 8 GPUs became 8 nodes x 1 GPU"),
    (15, ["sweep", "--gpus", "8", "16", "--intra-node", "none", "--serial", "-o", "<output>"], {},
     ("new", ".csv"), 0, "2 configuration(s), e.g. one GPU per node"),
    (16, ["sweep", "--model", "alexnet", "--gpus", "1", "2", "4", "8", "--serial", "-o",
          "<output>"], {}, ("new", ".csv"), 0, "4 configurations, 0 failed"),
    (17, ["validate", "<in0>", "--json"], _one("runs", "one-configuration"), NEW, 0, None),
    (18, ["calibrate", "--device", "cpu", "--model", "alexnet", "--batch", "2"], {}, NEW, 2,
     "TensorFlow"),
]  # fmt: skip
#: the most any one case may take (a hang, or a read of 50 GiB, takes far longer)
ISSUE_33_SECONDS = 30


@pytest.mark.parametrize(
    ("item", "argv", "inputs", "output", "code", "words"),
    ISSUE_33,
    ids=[f"item{case[0]}-{'-'.join(case[1][:2])}" for case in ISSUE_33],
)
def test_issue_33_defects_are_fuzz_cases(item, argv, inputs, output, code, words, monkeypatch):
    """Issue 33's list, item by item, through the fuzz test's own check: one line and exit 2
    for what is refused, the work done for what is not, nothing left behind, and no hang."""
    start = time.monotonic()
    got = check_invocation(argv, inputs, output, b"\x00\xff", monkeypatch, words=words)
    assert got == code
    assert time.monotonic() - start < ISSUE_33_SECONDS, (item, argv)


def test_every_item_of_issue_33_has_a_fuzz_case():
    assert {case[0] for case in ISSUE_33} == set(range(1, 19))
