"""``ddlsim traces``: log importers on the fixtures in tests/data/logs, the Horovod timeline
summary on tests/data/horovod_timeline_4gpu_nccl.json (written in timeline.cc's exact format:
4 ranks, a broadcast of two variables, then 5 iterations of 6 tensors in 4 collective launches,
two of them fused; the first iteration negotiates with per-rank ``X`` events, the others hit the
response cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ddlsim
from ddlsim import atomic
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.tools.traces.logs import HOROVOD_SYNTHETIC, TF_CNN_BENCHMARKS, parse_log
from ddlsim.tools.traces.phases import simulated_phases, steady_state, timeline_phases, union_s
from ddlsim.tools.traces.timeline import load_timeline, parse_events
from ddlsim.tools.validate.runs import read_runs

DATA = Path(__file__).resolve().parent / "data"
LOGS = DATA / "logs"
TIMELINE = DATA / "horovod_timeline_4gpu_nccl.json"
HVD_4 = LOGS / "hvd_tf2_synthetic_resnet50_4gpu.log"
HVD_16 = LOGS / "hvd_tf2_synthetic_vgg16_16gpu_mpirun.log"
TF_REPLICATED = LOGS / "tf_cnn_benchmarks_resnet50_8gpu_replicated.log"
TF_HOROVOD = LOGS / "tf_cnn_benchmarks_inception3_16gpu_horovod.log"
TF_PS = LOGS / "tf_cnn_benchmarks_resnet50_2x8k80_ps.log"
# tensor bytes of the fixture: [1000], [2048, 1000], [3, 3, 512, 512], [512], [3, 3, 256, 512],
# [7, 7, 3, 64] in float32
FIXTURE_BYTES = 4 * (
    1000 + 2048 * 1000 + 3 * 3 * 512 * 512 + 512 + 3 * 3 * 256 * 512 + 7 * 7 * 3 * 64
)


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- log parsing


def test_horovod_synthetic_log() -> None:
    facts = parse_log(HVD_4.read_text(), "x")
    assert facts.kind == HOROVOD_SYNTHETIC
    assert (facts.model, facts.gpus, facts.batch_per_gpu) == ("ResNet50", 4, 32)
    assert facts.images_per_sec == 1187.6 and facts.data == "synthetic"
    assert facts.comms == ("horovod-nccl", "horovod-mpi")


def test_mpirun_tagged_log_keeps_rank_0_only() -> None:
    facts = parse_log(HVD_16.read_text(), "x")
    assert (facts.model, facts.gpus, facts.batch_per_gpu) == ("VGG16", 16, 64)
    assert facts.images_per_sec == 3289.4


def test_tf_cnn_benchmarks_single_node() -> None:
    facts = parse_log(TF_REPLICATED.read_text(), "x")
    assert facts.kind == TF_CNN_BENCHMARKS
    assert (facts.model, facts.gpus, facts.batch_per_gpu) == ("resnet50", 8, 64)
    assert facts.images_per_sec == 1731.62 and facts.data == "synthetic"
    assert facts.single_node and facts.comms == ("replicated-nccl", "replicated-cpu")


def test_tf_cnn_benchmarks_total_is_per_worker() -> None:
    hvd = parse_log(TF_HOROVOD.read_text(), "x")  # 16 one-GPU workers, rank 0's figure
    assert hvd.gpus == 16 and hvd.images_per_sec == pytest.approx(16 * 208.47)
    assert hvd.data == "real" and not hvd.single_node
    ps = parse_log(TF_PS.read_text(), "x")  # 2 workers x 8 GPUs; 'Num GPUs' is per worker
    assert ps.gpus == 16 and ps.images_per_sec == pytest.approx(2 * 360.24)
    assert ps.comms == ("ps",) and ps.data is None


def test_not_a_benchmark_log() -> None:
    with pytest.raises(ConfigError, match="not a Horovod synthetic benchmark"):
        parse_log("hello\nworld\n", "x.log")


# --------------------------------------------------------------------------- import command


def test_import_writes_schema_rows(tmp_path: Path, capsys) -> None:
    out = tmp_path / "imported.csv"
    logs = [str(p) for p in (HVD_4, HVD_16, TF_REPLICATED, TF_HOROVOD)]
    code, stdout, err = run_cli(
        capsys, "traces", "import", *logs, "--gpu", "v100", "--source-id", "LAB", "-o", str(out)
    )
    assert code == 0, err
    assert stdout == ""
    runs = {r.run_id: r for r in read_runs(out)}
    assert list(runs) == ["LAB-0001", "LAB-0002", "LAB-0003", "LAB-0004"]
    first = runs["LAB-0001"]
    assert (first.model, first.gpu, first.gpus, first.batch_per_gpu) == (
        "resnet50",
        "v100-sxm2",
        4,
        32,
    )
    assert first.comm == "" and first.precision == "fp32" and first.images_per_sec == 1187.6
    assert first.gpus_per_node is None  # not stated, not guessed
    single = runs["LAB-0003"]
    assert (single.gpus_per_node, single.inter_node) == (8, "none")
    assert runs["LAB-0004"].model == "inception3"
    assert runs["LAB-0004"].images_per_sec == pytest.approx(3335.52)


def test_import_flags_fill_what_the_log_does_not_state(capsys) -> None:
    code, out, err = run_cli(
        capsys,
        "traces",
        "import",
        str(TF_PS),
        "--gpu",
        "k80",
        "--gpus-per-node",
        "8",
        "--inter-node",
        "25gbe",
        "--transport",
        "tcp",
        "--data",
        "synthetic",
    )
    assert code == 0, err
    header, row = out.splitlines()
    cells = dict(zip(header.split(","), row.split(","), strict=False))
    assert cells["comm"] == "ps" and cells["gpus"] == "16" and cells["transport"] == "tcp"
    assert cells["inter_node"] == "25gbe" and cells["data"] == "synthetic"


@pytest.mark.parametrize(
    ("log", "flags", "words"),
    [
        (HVD_4, ["--model", "vgg16"], "--model"),
        (HVD_4, ["--gpus", "8"], "--gpus"),
        (TF_PS, ["--comm", "horovod-nccl"], "--comm"),
        (TF_REPLICATED, ["--gpus-per-node", "4"], "--gpus-per-node"),
        (HVD_4, ["--gpu", "tpu"], "unknown gpu"),
    ],
)
def test_import_conflicts_are_one_line_errors(capsys, log: Path, flags, words: str) -> None:
    code, out, err = run_cli(capsys, "traces", "import", str(log), *flags)
    assert code == 2 and out == ""
    assert err.startswith("ddlsim: error: ") and words in err and err.count("\n") == 1


def test_import_never_leaves_a_half_written_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs.csv"
    out.write_text("previous content\n")
    junk = tmp_path / "junk.log"
    junk.write_text("no results here\n")
    code, _, err = run_cli(capsys, "traces", "import", str(HVD_4), str(junk), "-o", str(out))
    assert code == 2 and "junk.log" in err
    assert out.read_text() == "previous content\n"
    assert {p.name for p in tmp_path.iterdir()} == {"runs.csv", "junk.log"}


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "runs.csv"
    out.write_text("previous content\n")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(ConfigError, match="No space left"):
        atomic.atomic_write_text(out, "new,content\n")
    assert out.read_text() == "previous content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]  # temporary removed


# --------------------------------------------------------------------------- timeline


def test_timeline_fixture_is_valid_json_in_horovod_layout() -> None:
    text = TIMELINE.read_text()
    assert text.startswith("[\n{") and text.endswith("}]")
    assert isinstance(json.loads(text), list)


def test_timeline_phases_per_iteration() -> None:
    timeline = load_timeline(TIMELINE)
    assert timeline.ranks == 4 and not timeline.truncated and timeline.unclosed_spans == 0
    its = timeline_phases(timeline)
    assert len(its) == 5 and its[-1].duration_s is None
    for it in its:
        assert it.negotiate_s == pytest.approx((452 + 430 + 462 + 450) * 1e-6)
        assert it.allreduce_s == pytest.approx((484 + 551 + 287 + 38) * 1e-6)
        assert it.memcpy_in_s == pytest.approx(2 * 39e-6)  # fused launches only
        assert it.memcpy_out_s == pytest.approx(2 * 36e-6)
        assert (it.n_tensors, it.n_ops, it.nbytes) == (6, 4, FIXTURE_BYTES)
    steady = steady_state(its)
    assert steady["iterations"] == [1, 2, 3]
    assert steady["duration_s"] == pytest.approx(25.4e-3, abs=0.1e-3)


@pytest.mark.parametrize("cut", ["bracket", "object", "comma"])
def test_truncated_timeline_is_tolerated(tmp_path: Path, cut: str) -> None:
    text = TIMELINE.read_text()
    if cut == "bracket":
        text = text[:-1]  # the writer crashed before the closing ']'
    elif cut == "comma":
        text = text[:-1] + ",\n"
    else:
        text = text[: text.rindex('{"ph": "B", "name": "NCCL_ALLREDUCE"') + 20]
    path = tmp_path / "cut.json"
    path.write_text(text)
    timeline = load_timeline(path)
    assert timeline.truncated
    assert len(timeline_phases(timeline)) == 5


def test_malformed_timeline_names_the_line(tmp_path: Path) -> None:
    lines = TIMELINE.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace('"ph": "B"', '"ph" "B"', 1)
    path = tmp_path / "bad.json"
    path.write_text("".join(lines))
    with pytest.raises(ConfigError, match=r"bad\.json:6: malformed trace event"):
        load_timeline(path)
    with pytest.raises(ConfigError, match="not a Horovod timeline"):
        parse_events("hello", "x")


def test_timeline_summary_cli_and_compare(capsys) -> None:
    code, out, err = run_cli(capsys, "traces", "timeline-summary", str(TIMELINE))
    assert code == 0, err
    assert "4 rank(s); 5 iteration window(s)" in out and "allreduce (ms)" in out
    args = ["--model", "resnet50", "--gpu", "v100", "--gpus", "4", "--batch", "16"]
    code, out, err = run_cli(
        capsys, "traces", "timeline-summary", str(TIMELINE), "--compare", "--json", *args
    )
    assert code == 0, err
    doc = json.loads(out)
    sim = doc["simulated"]
    assert sim["negotiate_s"] > 0 and sim["allreduce_s"] > 0 and sim["memcpy_in_s"] is None
    assert doc["steady_state"]["nbytes"] == FIXTURE_BYTES


def test_simulated_phases_match_the_spans() -> None:
    pred = ddlsim.predict("resnet50", 16, gpu="v100", gpus_per_node=8, batch=32)
    spans = pred.sim.spans
    sim = simulated_phases(spans, pred.iteration_time_s, len(pred.sim.iteration_times_s))
    comm = [s for s in spans if s.worker == 0 and s.iteration in sim["iterations"]]
    comm = [s for s in comm if s.stream.startswith("comm")]
    n_iter = len(sim["iterations"])
    # buffers fused again at run time make the count vary between iterations: the mean
    assert sim["n_ops"] == pytest.approx(len(comm) / n_iter)
    assert sim["nbytes"] == pytest.approx(sum(s.nbytes for s in comm) / n_iter)
    assert 0 < sim["allreduce_s"] < pred.iteration_time_s


def test_union_of_intervals() -> None:
    assert union_s([(0, 2), (1, 3), (5, 6)], 0, 10) == 4
    assert union_s([(0, 2), (1, 3)], 1.5, 2.5) == pytest.approx(1.0)
    assert union_s([], 0, 1) == 0
