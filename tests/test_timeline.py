"""``ddlsim timeline``: a Chrome / Perfetto trace of the simulated steady-state iteration."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ddlsim.cli.main import main
from ddlsim.tools.analysis.timeline import build_trace, write_trace
from ddlsim.tools.analysis.trace_events import TID_COMPUTE, WAIT_NAMES

EXIT_USAGE = 2
#: slack of trace timestamps (microseconds) for float noise
TOL_US = 1e-6
X_KEYS = ("name", "ph", "ts", "dur", "pid", "tid")


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def x_events(trace: dict[str, Any], pid: int | None = None) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and (pid is None or e["pid"] == pid)]


@pytest.fixture(scope="module")
def fast16(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    assert main(["timeline", "--model", "resnet50", "--gpus", "16", "-o", str(path)]) == 0
    return json.loads(path.read_text(encoding="utf-8"))


def assert_compute_thread_tiles(trace: dict[str, Any], pid: int, it: int) -> dict[str, float]:
    """Compute + wait events of ``pid`` tile the iteration window; returns waits in seconds."""
    lo_s, hi_s = trace["metadata"]["iteration_windows_s"][str(pid)][str(it)]
    t0 = trace["metadata"]["time_origin_s"]
    events = sorted(
        (
            e
            for e in x_events(trace, pid)
            if e["tid"] == TID_COMPUTE and e["args"]["iteration"] == it
        ),
        key=lambda e: e["ts"],
    )
    cursor = (lo_s - t0) * 1e6
    waits = dict.fromkeys(WAIT_NAMES.values(), 0.0)
    for e in events:
        assert e["ts"] == pytest.approx(cursor, abs=TOL_US), e
        cursor = e["ts"] + e["dur"]
        if e["cat"] == "wait":
            waits[WAIT_NAMES[e["name"]]] += e["dur"] / 1e6
    assert cursor == pytest.approx((hi_s - t0) * 1e6, abs=TOL_US)
    expected = trace["metadata"]["breakdown_s"][str(pid)][str(it)]  # engine's window_breakdown
    for key, value in waits.items():
        assert value == pytest.approx(expected[key], abs=1e-9), (pid, it, key)
    return waits


def test_trace_is_chrome_json_with_complete_and_metadata_events(fast16: dict[str, Any]) -> None:
    assert fast16["displayTimeUnit"] == "ms"
    events = fast16["traceEvents"]
    xs = x_events(fast16)
    assert xs and all(all(k in e for k in X_KEYS) for e in xs)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)
    meta = {(e["name"], e.get("tid")) for e in events if e["ph"] == "M"}
    assert ("process_name", None) in meta
    assert {("thread_name", 1), ("thread_name", 2), ("thread_name", 10)} <= meta
    assert fast16["metadata"]["inputs"]["n_gpus"] == 16
    assert fast16["metadata"]["inputs"]["model"] == "resnet50"
    names = {e["name"] for e in xs}
    assert {"fwd:conv0", "bwd:conv0", "update", "NEGOTIATE_ALLREDUCE", "NCCL_ALLREDUCE"} <= names
    fwd = [e for e in xs if e["cat"] == "forward"]
    assert fwd and all(
        {"layer", "grad_bytes", "activation_bytes", "flops"} <= set(e["args"]) for e in fwd
    )
    assert not any("MEMCPY" in e["name"] for e in xs)  # not modelled, not invented


def test_compute_thread_covers_the_iteration_and_waits_equal_the_breakdown(
    fast16: dict[str, Any],
) -> None:
    meta = fast16["metadata"]
    (it,) = meta["iterations"]
    waits = assert_compute_thread_tiles(fast16, 0, it)
    lo, hi = meta["iteration_windows_s"]["0"][str(it)]
    assert hi - lo == pytest.approx(meta["steady_state_iteration_time_s"], abs=1e-9)
    b = meta["breakdown_mean_s"]
    gaps = sum(waits.values())
    assert gaps == pytest.approx(
        b["comm_exposed_s"] + b["coordination_s"] + b["input_stall_s"], abs=1e-9
    )
    for key, value in waits.items():
        assert value == pytest.approx(b[key], abs=1e-9), key
    assert gaps > 0  # 16 GPUs: the last bucket's negotiation and allreduce are exposed


def test_fused_collectives_list_their_tensors_and_bytes(fast16: dict[str, Any]) -> None:
    xs = x_events(fast16)
    collectives = [e for e in xs if e["name"] == "NCCL_ALLREDUCE"]
    negotiations = [e for e in xs if e["name"] == "NEGOTIATE_ALLREDUCE"]
    assert collectives and len(negotiations) == len(collectives)
    for e in collectives:
        args = e["args"]
        assert args["tensors"] and len(args["tensors"]) == len(args["tensor_bytes"])
        assert args["bytes"] == sum(args["tensor_bytes"]) > 0
        assert args["layers"] and args["op"].startswith("allreduce:")
        assert e["tid"] == 10
    assert any(e["args"]["n_tensors"] > 1 for e in collectives)  # fusion happened
    total = sum(e["args"]["bytes"] for e in collectives)
    assert total == fast16["metadata"]["inputs"]["grad_bytes"]


def test_detailed_engine_has_one_process_per_worker(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["timeline", "--model", "alexnet", "--gpus", "4", "--engine", "detailed", "-o", "-"]
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    trace = json.loads(out)
    assert {e["pid"] for e in x_events(trace)} == {0, 1, 2, 3}
    names = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert sorted(e["pid"] for e in names) == [0, 1, 2, 3]
    (it,) = trace["metadata"]["iterations"]
    for w in range(4):
        assert_compute_thread_tiles(trace, w, it)
    code, out, err = run_cli(capsys, [*argv[:-2], "--workers", "0,2", "-o", "-"])
    assert code == 0, err
    assert {e["pid"] for e in x_events(json.loads(out))} == {0, 2}


def test_other_methods_real_data_and_several_iterations() -> None:
    trace = build_trace(
        {"model": "googlenet", "gpus": 4, "gpus_per_node": 8, "gpu": "v100", "batch": 96}
        | {"data": "real", "comm": "horovod-mpi", "host_input_images_per_s": 2000.0},
        iterations=2,
    )
    meta = trace["metadata"]
    assert len(meta["iterations"]) == 2
    names = {e["name"] for e in x_events(trace)}
    assert "MPI_ALLREDUCE" in names and "input" in names and "WAIT_INPUT" in names
    for it in meta["iterations"]:
        assert assert_compute_thread_tiles(trace, 0, it)["input_stall_s"] > 0
    ps = build_trace({"model": "alexnet", "gpus": 16, "comm": "ps"})
    names = {e["name"] for e in x_events(ps)}
    assert any(n.startswith("push:") for n in names) and any(n.startswith("pull:") for n in names)
    labels = [e["args"]["name"] for e in ps["traceEvents"] if e["name"] == "thread_name"]
    assert any("parameter server" in label for label in labels)


def test_single_gpu_trace_has_no_communication() -> None:
    trace = build_trace({"model": "resnet50", "gpus": 1})
    assert {e["tid"] for e in x_events(trace)} == {TID_COMPUTE}
    assert assert_compute_thread_tiles(
        trace, 0, trace["metadata"]["iterations"][0]
    ) == dict.fromkeys(WAIT_NAMES.values(), 0.0)


def test_atomic_write_leaves_no_file_on_error(tmp_path: Path) -> None:
    good = build_trace({"model": "alexnet", "gpus": 2})
    target = tmp_path / "trace.json"
    bad = {**good, "metadata": {"late": math.nan}}  # fails after traceEvents were written
    with pytest.raises(ValueError):
        write_trace(bad, str(target))
    assert list(tmp_path.iterdir()) == []
    write_trace(good, str(target))
    before = target.read_bytes()
    with pytest.raises(ValueError):
        write_trace(bad, str(target))
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]


def test_failed_rename_leaves_no_partial_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ddlsim.atomic.os.replace", disk_full)
    code, _, err = run_cli(capsys, ["timeline", "--gpus", "2", "-o", str(tmp_path / "t.json")])
    assert code == EXIT_USAGE and err.count("\n") == 1 and "No space left" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--workers", "3"], "fast engine"),
        (["--engine", "detailed", "--workers", "0,9"], "out of range"),
        (["--workers", "a,b"], "--workers"),
        (["--iterations", "0"], "iterations"),
        (["--model", "resnet5"], "unknown model"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], needle: str
) -> None:
    out_path = tmp_path / "t.json"
    code, out, err = run_cli(capsys, ["timeline", "--gpus", "4", *extra, "-o", str(out_path)])
    assert code == EXIT_USAGE
    assert err.startswith("ddlsim: error:") and err.count("\n") == 1 and needle in err
    assert out == "" and not out_path.exists()


def test_missing_output_folder_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_cli(
        capsys, ["timeline", "--gpus", "2", "-o", str(tmp_path / "no" / "t.json")]
    )
    assert code == EXIT_USAGE and err.count("\n") == 1 and "does not exist" in err
