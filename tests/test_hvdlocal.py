"""The measured Horovod run on this machine (traces/horovod/), its link model and the driver.

The committed record is parsed the way ddlsim reads measured data (runs.csv, the benchmark logs,
the Horovod timeline) and validated in-process; the catalog figures of the CPU worker and the
loopback link are checked against the committed measurements they cite. Only the last test
needs Horovod (it re-runs the driver in smoke-test mode); it is skipped without it.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from importlib import util
from pathlib import Path

import numpy as np
import pytest
from strategies import make_cluster

from ddlsim.calibration import profile as profile_io
from ddlsim.cli.main import main
from ddlsim.comm import METHODS, make_comm_model
from ddlsim.comm.executor import execute
from ddlsim.comm.gloo import GlooModel
from ddlsim.errors import ConfigError
from ddlsim.execution.strategy import COMM_METHODS, HOROVOD_METHODS
from ddlsim.system import catalog
from ddlsim.system.specs import Hop
from ddlsim.tools.hvdlocal import COMM, CPU_DEVICE_ID, INTRA_NODE, SOURCE_ID
from ddlsim.tools.hvdlocal import fit as fitting
from ddlsim.tools.hvdlocal.outputs import trim_timeline
from ddlsim.tools.hvdlocal.report import predict_kwargs, predict_run
from ddlsim.tools.traces.importer import ImportFlags, build_row
from ddlsim.tools.traces.logs import parse_log
from ddlsim.tools.traces.phases import steady_state, timeline_phases
from ddlsim.tools.traces.timeline import load_timeline, parse_events
from ddlsim.tools.validate.runs import read_runs

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "traces" / "horovod"
RESULTS = json.loads((RECORD / "results.json").read_text())
MODEL, BATCH = RESULTS["model"], RESULTS["batch_per_worker"]


def _cpu_cluster(n: int, **kw):
    cpu = replace(catalog.device(CPU_DEVICE_ID))
    c = make_cluster(n, n, intra_Bps=0.8e9, intra_latency_s=60e-6, **kw)
    return replace(c, device=cpu, intra_link=INTRA_NODE, host=Hop(math.inf, 0.0))


# --------------------------------------------------------------------------- the Gloo model


def test_gloo_is_a_registered_horovod_method() -> None:
    assert COMM in METHODS and COMM in COMM_METHODS and COMM in HOROVOD_METHODS
    assert isinstance(make_comm_model(COMM, _cpu_cluster(2)), GlooModel)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("nbytes", [1.0, 4e3, 1e6, 247e6])
def test_cpu_workers_ring_closed_form_equals_executor(n: int, nbytes: float) -> None:
    c = _cpu_cluster(n)
    model = GlooModel(c)
    reduce_Bps = c.device.mem_bandwidth_Bps / 3
    chunk = nbytes / n
    expected = 2 * (n - 1) * (60e-6 + chunk / 0.8e9) + (n - 1) * chunk / reduce_Bps
    assert model.time_s(nbytes) == pytest.approx(expected, rel=1e-12)
    slow = float(execute(model.schedule(nbytes), np.zeros(n)).max())
    assert slow == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("n", "per_node"), [(8, 4), (16, 8), (4, 2), (6, 1)])
def test_gpu_workers_copy_and_sum_on_the_host(n: int, per_node: int) -> None:
    c = replace(make_cluster(n, per_node, gpus_per_pcie_switch=2), intra_link=INTRA_NODE)
    model = GlooModel(c)
    assert not model.cpu_worker and model.rank_reduce_Bps() == c.host_reduce_Bps / c.local_gpus
    for nbytes in (4e3, 1e8):
        fast = model.time_s(nbytes)
        slow = float(execute(model.schedule(nbytes), np.zeros(n)).max())
        assert slow == pytest.approx(fast, rel=1e-9)
        cpu_like = replace(c, host=Hop(math.inf, 0.0))
        assert fast > GlooModel(cpu_like).time_s(nbytes)  # the device<->host copies cost


def test_gloo_refuses_gpu_fabrics_and_costs_nothing_alone() -> None:
    with pytest.raises(ConfigError, match="--intra-node loopback"):
        make_comm_model(COMM, make_cluster(8, 8))
    one = GlooModel(_cpu_cluster(1))
    assert one.time_s(1e8) == 0.0 and one.schedule(1e8).n_steps == 0


def test_nccl_methods_refuse_cpu_workers() -> None:
    for method in ("horovod-nccl", "replicated-nccl"):
        with pytest.raises(ConfigError, match=r"needs GPUs.*horovod-gloo"):
            make_comm_model(method, _cpu_cluster(2))
    make_comm_model("horovod-nccl", _cpu_cluster(1))  # one worker: nothing to exchange
    make_comm_model("horovod-mpi", _cpu_cluster(2))


def test_cpu_worker_in_the_catalog() -> None:
    dev = catalog.device(CPU_DEVICE_ID)
    assert dev.kind == "cpu" and dev.host_link == "none" and dev.peak_fp16_flops is None
    assert all(catalog.device(g).kind == "gpu" for g in ("k80", "v100", "h100"))
    cluster = catalog.build_cluster(CPU_DEVICE_ID, 2)
    assert cluster.intra_link == INTRA_NODE and cluster.nic is None
    assert math.isinf(cluster.host.bandwidth_Bps) and cluster.host.latency_s == 0
    described = catalog.describe_cluster(cluster)
    json.dumps(described, allow_nan=False)  # JSON-safe: no Infinity
    assert described["host_bandwidth_GBps"] is None and described["intra_node"] == INTRA_NODE
    with pytest.raises(ConfigError, match="no fast fp16 path"):
        ddlsim_predict(precision="amp")


def ddlsim_predict(**kw):
    import ddlsim

    return ddlsim.predict(**{**predict_kwargs(MODEL, 2, BATCH, None), **kw})


def test_the_simulated_timeline_names_gloo_like_horovod() -> None:
    from ddlsim.api import job, prepare
    from ddlsim.tools.analysis.trace_events import EventFactory

    kwargs = predict_kwargs(MODEL, 2, BATCH, None)
    setup = prepare(job(**{k: v for k, v in kwargs.items() if k != "model"}, model=MODEL))
    assert EventFactory(setup).allreduce_name == "GLOO_ALLREDUCE"


# --------------------------------------------------------------------------- fit and trim


def test_fit_recovers_a_ring() -> None:
    alpha, bw, red = 40e-6, 0.9e9, 15e9
    samples = {s: 2 * alpha + s / bw + s / (2 * red) for s in (2**p for p in range(10, 29))}
    fit = fitting.fit_ring(samples, 2, red)
    assert fit.hop_latency_s == pytest.approx(alpha, rel=1e-9)
    assert fit.hop_bandwidth_Bps == pytest.approx(bw, rel=1e-9)
    assert fit.max_rel_residual < 1e-9
    link = fitting.link_figures(1.5e9, fit)
    assert (link.bandwidth_GBps, link.efficiency, link.latency_us) == (1.5, 0.6, 40.0)
    with pytest.raises(ConfigError, match="faster than the raw"):
        fitting.link_figures(0.5e9, fit)
    with pytest.raises(ConfigError, match="at least 3"):
        fitting.fit_ring({1024: 1e-4, 2048: 2e-4}, 2, red)


def test_gloo_durations_are_sized_by_their_operation() -> None:
    events = [
        {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 0, "pid": 1},
        {"ph": "E", "ts": 5, "pid": 1},
        {"ph": "B", "name": "ALLREDUCE", "ts": 10, "pid": 1},
        {"ph": "B", "name": "GLOO_ALLREDUCE", "ts": 12, "pid": 1},
        {"ph": "E", "ts": 42, "pid": 1},
        {"ph": "E", "ts": 50, "pid": 1, "args": {"dtype": "float32", "shape": "[256]"}},
    ]
    assert fitting.gloo_durations(events) == {1024: [pytest.approx(30e-6)]}


def test_trim_keeps_whole_spans_in_the_window(tmp_path: Path) -> None:
    text = (RECORD / "timeline_np2.json").read_text()
    events, _ = parse_events(text, "x")
    ts = sorted(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    lo, hi = ts[len(ts) // 3] * 1e-6, ts[2 * len(ts) // 3] * 1e-6
    path = tmp_path / "cut.json"
    path.write_text(trim_timeline(text, lo, hi))
    cut = load_timeline(path)
    assert not cut.truncated and cut.unclosed_spans == 0
    assert all(lo - 1e-9 <= s.start_s and s.end_s <= hi + 1e-9 for s in cut.spans)
    assert 0 < len(cut.spans) < len(load_timeline(RECORD / "timeline_np2.json").spans)


# --------------------------------------------------------------------------- the committed record


def test_runs_csv_loads_and_the_one_worker_row_is_the_baseline() -> None:
    runs = read_runs(RECORD / "runs.csv")
    assert [(r.gpus, r.gpus_per_node) for r in runs] == [(1, 1), (2, 2)]
    assert {r.source_id for r in runs} == {SOURCE_ID}
    for r in runs:
        assert (r.model, r.gpu, r.comm, r.intra_node) == (MODEL, CPU_DEVICE_ID, COMM, INTRA_NODE)
        assert (r.batch_per_gpu, r.precision, r.data) == (BATCH, "fp32", "synthetic")
        assert r.images_per_sec == RESULTS["measured"][str(r.gpus)]["images_per_sec"]
    assert runs[0].is_single_gpu and not runs[1].is_single_gpu


@pytest.mark.parametrize("n", [1, 2])
def test_logs_parse_and_import_to_the_committed_rows(n: int) -> None:
    name = f"train_np{n}.log"
    facts = parse_log((RECORD / name).read_text(), name)
    assert facts.device_kind == "cpu" and facts.gpus == n and facts.batch_per_gpu == BATCH
    assert facts.comms == ("horovod-gloo", "horovod-mpi")
    flags = ImportFlags(
        source_id=SOURCE_ID, gpu=CPU_DEVICE_ID, intra_node=INTRA_NODE, comm=COMM, gpus_per_node=n
    )
    row = build_row(facts, flags, name, "x")
    committed = next(r for r in read_runs(RECORD / "runs.csv") if r.gpus == n)
    assert row["images_per_sec"] == committed.images_per_sec
    assert (row["model"], row["gpu"], row["comm"]) == (MODEL, CPU_DEVICE_ID, COMM)
    with pytest.raises(ConfigError, match="ran on CPUs, but --gpu v100-sxm2 is a GPU"):
        build_row(facts, replace(flags, gpu="v100"), name, "x")


def test_the_real_gloo_timeline_summarises() -> None:
    timeline = load_timeline(RECORD / "timeline_np2.json")
    assert timeline.ranks == 2 and not timeline.truncated and timeline.unclosed_spans == 0
    assert any(s.name == "GLOO_ALLREDUCE" for s in timeline.spans)
    its = timeline_phases(timeline)
    assert len(its) >= 3
    for it in its[:-1]:
        assert it.negotiate_s > 0 and it.allreduce_s > 0 and it.duration_s > it.allreduce_s / 2
        assert it.nbytes == catalog_grad_bytes()
    steady = steady_state(its)
    assert steady["allreduce_s"] > 0 and steady["negotiate_s"] > 0


def catalog_grad_bytes() -> int:
    from ddlsim.workload.zoo import get_model

    return get_model(MODEL).grad_bytes("fp32")


def test_timeline_summary_cli_compares_with_the_gloo_model(capsys) -> None:
    path = str(RECORD / "timeline_np2.json")
    flags = ["--model", MODEL, "--gpu", CPU_DEVICE_ID, "--gpus", "2", "--batch", str(BATCH)]
    argv = ["traces", "timeline-summary", path, "--compare", "--json", *flags, "--comm", COMM]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated"]["allreduce_s"] > 0
    assert doc["steady_state"]["nbytes"] == catalog_grad_bytes()


def test_validate_predicts_the_two_worker_row_from_a_clean_clone(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path))  # no user calibrations
    assert main(["validate", str(RECORD / "runs.csv"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["run_id"]: r for r in doc["rows"]}
    two = rows[f"{SOURCE_ID}-0002"]
    assert two["status"] == "predicted" and two["baseline_run_id"] == f"{SOURCE_ID}-0001"
    assert math.isfinite(two["rel_error"])
    assert rows[f"{SOURCE_ID}-0001"]["skip_code"] == "baseline-row"
    # the driver's anchored prediction is what validate predicts (same configuration); the
    # committed results.json holds it as of the run (ddlsim may have changed since)
    baseline = RESULTS["measured"]["1"]["images_per_sec"]
    now = predict_run(MODEL, 2, BATCH, None, baseline)
    assert two["predicted_images_per_sec"] == pytest.approx(now.anchored_images_per_sec, rel=1e-9)


def test_the_shipped_cpu_calibration_is_the_measured_one() -> None:
    path = ROOT / RESULTS["calibration"]["file"]
    prof = profile_io.load(path)
    assert (prof.model, prof.device, prof.batch_per_gpu) == (MODEL, CPU_DEVICE_ID, BATCH)
    assert prof.provenance["method"] == "tf-profiler"
    assert prof.provenance["catalog_id_override"] == CPU_DEVICE_ID
    assert prof.device_info["kind"] == "cpu"
    assert prof.step_time_s == pytest.approx(RESULTS["calibration"]["step_time_s"])


def test_catalog_figures_are_the_committed_measurements() -> None:
    probes = json.loads((RECORD / "probes.json").read_text())
    sweep = json.loads((RECORD / "allreduce_sweep.json").read_text())
    dev = catalog.device(CPU_DEVICE_ID)
    assert dev.peak_fp32_flops / 1e12 == pytest.approx(probes["sgemm"]["flops"] / 1e12, abs=6e-4)
    assert dev.mem_bandwidth_Bps / 1e9 == pytest.approx(
        probes["memory"]["bandwidth_Bps"] / 1e9, abs=0.06
    )
    samples = {s["nbytes"]: s["gloo_allreduce_s"] for s in sweep["sizes"]}
    reduce_Bps = fitting.reduce_rate_Bps(probes["memory"]["bandwidth_Bps"])
    fit = fitting.fit_ring(fitting.medians(samples), sweep["ranks"], reduce_Bps)
    assert fit.hop_bandwidth_Bps == pytest.approx(sweep["fit"]["hop_bandwidth_Bps"], rel=1e-9)
    figures = fitting.link_figures(probes["loopback"]["bandwidth_Bps"], fit)
    link = catalog.intra_link(INTRA_NODE)
    assert link.nominal_bandwidth_Bps / 1e9 == pytest.approx(figures.bandwidth_GBps, abs=6e-4)
    assert link.efficiency["tcp"] == pytest.approx(figures.efficiency, abs=6e-4)
    assert link.latency_s["tcp"] * 1e6 == pytest.approx(figures.latency_us, abs=0.06)


# --------------------------------------------------------------------------- the real thing


@pytest.mark.horovod
@pytest.mark.slow
@pytest.mark.skipif(util.find_spec("horovod") is None, reason="needs ddlsim[horovod]")
def test_driver_smoke_run(tmp_path: Path, capsys) -> None:
    from ddlsim.tools.hvdlocal.driver import main as driver

    out, cal = tmp_path / "out", tmp_path / "cal"
    argv = ["--quick", "--out", str(out), "--calibration-dir", str(cal), "--sweep-max-log2", "22"]
    assert driver(argv) == 0
    assert len(read_runs(out / "runs.csv")) == 2
    assert "workers" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert results["predicted"]["2"]["anchored_images_per_sec"] > 0
