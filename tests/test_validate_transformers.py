"""``ddlsim validate`` on the measured transformer runs' schema
(``traces/measured/README_transformers.md``): the reader, the row -> predict mapping of each
column and variant token, the skips, the CLI, and the real file's anchored scaling error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.tools.validate.core import PREDICTED, SKIPPED, validate_runs
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import load_runs
from ddlsim.tools.validate.transformer_mapping import numerics_kwargs
from ddlsim.tools.validate.transformer_runs import COLUMNS, SCHEMA

REAL = Path(__file__).parent.parent / "traces" / "measured" / "runs_transformers.csv"

HEADER = ",".join(COLUMNS)
#: (run_id, model, task, seq, gpu, gpus, gpn, intra, inter, comm, variant, framework, batch,
#: precision, samples/s, tokens/s, note)
ROWS = [
    ("B-1", "bert-base", "squad", 128, "v100-sxm2", 1, 1, "nvlink-v100", "none", "single",
     "", "pytorch", 32, "amp", 200.0, "", "DGX-1"),
    ("B-8", "bert-base", "squad", 128, "v100-sxm2", 8, 8, "nvlink-v100", "none", "ddp",
     "", "pytorch", 32, "amp", 1500.0, "", "DGX-1"),
    ("B-8A", "bert-base", "squad", 128, "v100-sxm2", 8, 8, "nvlink-v100", "none", "ddp",
     "grad-accum-4", "pytorch", 32, "amp", 1550.0, "", "DGX-1"),
    ("F-8", "mpt-125m", "lm", 2048, "a100", 8, "", "", "", "fsdp",
     "full_shard;bf16;flash-attn", "pytorch", 16, "amp", 200.0, "", "llm-foundry"),
    ("V-1", "bert-base", "squad", 128, "v100-sxm2", 1, 1, "nvlink-v100", "none", "single",
     "bf16", "pytorch", 32, "amp", 200.0, "", "DGX-1"),
    ("V-8", "bert-base", "squad", 128, "v100-sxm2", 8, 8, "nvlink-v100", "none", "ddp",
     "bf16", "pytorch", 32, "amp", 1500.0, "", "DGX-1"),
    ("X-1", "transformer-xl-base", "lm", 192, "v100-sxm2", 1, 1, "nvlink-v100", "none",
     "single", "lamb", "pytorch", 16, "amp", "", 24000.0, "DGX-1"),
    ("X-8", "transformer-xl-base", "lm", 192, "v100-sxm2", 8, 8, "nvlink-v100", "none", "ddp",
     "lamb", "pytorch", 16, "amp", "", 180000.0, "DGX-1"),
    ("G-8", "bert-large", "squad", 384, "", 8, 8, "", "none", "horovod-nccl", "xla",
     "tensorflow", 4, "amp", 100.0, "", "GPU AMBIGUOUS: heading says A; text says B"),
    ("N-16", "bert-base", "squad", 128, "v100-sxm2", 16, 8, "nvlink-v100", "", "ddp", "",
     "pytorch", 32, "amp", 2900.0, "", "DGX-1"),
    ("P-8", "bert-base", "squad", 128, "v100-sxm2", 8, 8, "nvlink-v100", "none", "other", "",
     "pytorch", 32, "amp", 1450.0, "", "DGX-1; Paddle Fleet collective (NCCL)"),
]  # fmt: skip


def _csv(tmp_path: Path, rows=ROWS) -> Path:
    lines = [HEADER]
    for r in rows:
        rid, model, task, seq, gpu, gpus, gpn, intra, inter, comm, var, fw, b, prec, s, t, n = r
        src = "SRC"
        cells = [rid, src, model, task, seq, gpu, gpus, gpn, intra, inter, "", comm, var, fw, b,
                 prec, "real", s, t, "", 0, n]  # fmt: skip
        lines.append(",".join(str(c) for c in cells))
    path = tmp_path / "runs_transformers.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return _csv(tmp_path)


def _by_id(path: Path, **options):
    return {
        r.run.run_id: r for r in validate_runs(load_runs(path).runs, ValidateOptions(**options))
    }


def test_the_reader_recognises_the_schema_and_converts_tokens(small: Path) -> None:
    table = load_runs(small)
    assert not table.defects and len(table.runs) == len(ROWS)
    runs = {r.run_id: r for r in table.runs}
    assert all(r.schema == SCHEMA for r in table.runs)
    x = runs["X-8"]
    assert x.seq_len == 192 and x.tokens_per_sec == 180000.0
    assert x.images_per_sec == pytest.approx(180000.0 / 192)  # samples/s = tokens/s / seq_len
    assert runs["B-8"].images_per_sec == 1500.0 and runs["B-8"].task == "squad"
    assert runs["G-8"].gpu == ""  # an ambiguous GPU is read; the mapping skips it


def test_a_multi_gpu_row_is_anchored_to_its_baseline_like_predict(small: Path) -> None:
    row = _by_id(small)["B-8"]
    assert row.status == PREDICTED and row.anchored and row.baseline.run_id == "B-1"
    p = ddlsim.predict(
        "bert-base", 8, gpu="v100-sxm2", gpus_per_node=8, intra_node="nvlink-v100",
        inter_node="none", comm="ddp", batch=32, seq_len=128, precision="amp", data="real",
        framework="pytorch", attention="unfused", optimizer="adamw", grad_accum=1,
        single_gpu_throughput=200.0, engine="fast", task="span",
    )  # fmt: skip
    assert row.predicted_images_per_sec == pytest.approx(p.images_per_sec)
    assert row.rel_error == pytest.approx(p.images_per_sec / 1500.0 - 1)
    assert p.single_gpu_images_per_sec == pytest.approx(200.0)  # the anchor holds


@pytest.mark.parametrize(
    ("task", "framework", "expected"),
    [("squad", "pytorch", "span"), ("ner", "tensorflow", "span"), ("glue-mnli", "pytorch",
     "classify"), ("pretrain-phase1", "tensorflow", "mlm"), ("pretrain-phase2", "paddle", "mlm"),
     ("pretrain-phase1", "pytorch", "auto"), ("lm", "pytorch", "auto")],
)  # fmt: skip
def test_the_task_column_picks_the_head(task: str, framework: str, expected: str) -> None:
    from types import SimpleNamespace

    from ddlsim.tools.validate.transformer_mapping import task_of

    assert task_of(SimpleNamespace(task=task, framework=framework)) == expected


def test_grad_accum_is_ignored_by_the_baseline_and_mapped(small: Path) -> None:
    rows = _by_id(small)
    row = rows["B-8A"]
    assert row.status == PREDICTED and row.baseline.run_id == "B-1"
    # more micro-steps per all-reduce: closer to linear than the row without accumulation
    assert row.predicted_scaling_efficiency > rows["B-8"].predicted_scaling_efficiency


def test_tokens_rows_are_scored_in_samples(small: Path) -> None:
    row = _by_id(small)["X-8"]
    assert row.status == PREDICTED and row.baseline.run_id == "X-1"
    assert row.measured_scaling_efficiency == pytest.approx(180000.0 / (8 * 24000.0))


@pytest.mark.parametrize(
    ("run_id", "code"),
    [
        ("F-8", "no-baseline"),  # no 1-GPU run: --absolute predicts FSDP rows
        ("V-8", "not-runnable"),
        ("G-8", "gpu-ambiguous"),
        ("N-16", "network-unknown"),
        ("B-1", "baseline-row"),
    ],
)
def test_rows_ddlsim_cannot_predict_are_skipped_with_a_code(small: Path, run_id, code) -> None:
    row = _by_id(small)[run_id]
    assert row.status == SKIPPED and row.code == code and row.reason


def test_bf16_on_a_v100_is_never_timed_on_another_path(small: Path) -> None:
    row = _by_id(small, absolute=True)["V-1"]
    assert row.status == SKIPPED and row.code == "not-runnable" and "bf16" in row.reason


def test_other_is_ddp_where_the_note_names_a_flat_all_reduce(small: Path) -> None:
    row = _by_id(small)["P-8"]
    assert row.status == PREDICTED and any("flat all-reduce" in n for n in row.notes)
    rows = [r if r[0] != "P-8" else (*r[:-1], "DGX-1") for r in ROWS]
    other = _by_id(_csv(small.parent, rows))["P-8"]
    assert other.status == SKIPPED and other.code == "comm-not-modelled"


def test_network_assumption_predicts_a_multi_node_row(small: Path) -> None:
    row = _by_id(small, assume_inter_node="ib-edr")["N-16"]
    assert row.status == PREDICTED and row.assumption and row.baseline.run_id == "B-1"


class _Row:
    def __init__(self, precision: str, *variant: str) -> None:
        self.precision, self.variant = precision, variant


@pytest.mark.parametrize(
    ("precision", "variant", "expected"),
    [
        ("amp", (), {"precision": "amp", "attention": "unfused", "optimizer": "adamw"}),
        ("amp", ("bf16",), {"precision": "bf16"}),
        ("amp", ("fp8",), {"precision": "fp8"}),
        ("fp32", (), {"precision": "fp32", "tf32": False}),
        ("fp32", ("tf32",), {"precision": "fp32", "tf32": True}),
        ("amp", ("grad-accum-16",), {"grad_accum": 16}),
        ("amp", ("act-ckpt",), {"activation_checkpointing": True}),
        ("amp", ("flash-attn",), {"attention": "flash"}),
        ("amp", ("lamb",), {"optimizer": "lamb"}),
        ("amp", ("xla",), {"fusion": "xla"}),
    ],
)
def test_each_variant_token_maps_onto_predict(precision, variant, expected) -> None:
    kwargs, unmapped = numerics_kwargs(_Row(precision, *variant))  # type: ignore[arg-type]
    assert not unmapped
    assert {k: kwargs.get(k) for k in expected} == expected


def test_unmapped_tokens_are_listed() -> None:
    _, unmapped = numerics_kwargs(_Row("amp", "pre-ln", "dle-fork", "lamb"))  # type: ignore[arg-type]
    assert unmapped == ["pre-ln", "dle-fork"]


def test_cli_text_json_and_absolute(small: Path, capsys) -> None:
    assert main(["validate", str(small)]) == 0
    out = capsys.readouterr().out
    assert "by comm method and node count" in out and "[no-baseline]" in out
    assert main(["validate", str(small), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "sharded" not in doc["summary"]["skipped_by_code"]
    assert "ddp | 1 node" in doc["summary"]["by_method_nodes"]
    assert main(["validate", str(small), "--absolute", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    fsdp = next(r for r in doc["rows"] if r["run_id"] == "F-8")
    assert fsdp["status"] == "predicted" and fsdp["comm"] == "fsdp"
    single = doc["summary"]["single_gpu_by_gpu_precision_framework"]
    assert "v100-sxm2 amp pytorch" in single and single["v100-sxm2 amp pytorch"]["n"] == 2


def test_a_long_model_name_widens_its_column(small: Path, capsys) -> None:
    """``transformer-xl-base`` (19 characters) keeps a space before the comm column."""
    assert main(["validate", str(small), "--absolute"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("X-1 "))
    assert line.split()[1:4] == ["transformer-xl-base", "single", "1"]


#: the real file's anchored single-node scaling MAPE measured on 2026-11-28 (6.9%: ddp 6.4%,
#: horovod-nccl 7.6%, other 4.5%; 482 rows), with a margin of one point
SINGLE_NODE_MAPE_BOUND = 0.08
README = " ".join((REAL.parents[2] / "README.md").read_text(encoding="utf-8").split())


def _pct(errors, signed: bool = False) -> str:
    value = sum(errors) if signed else sum(map(abs, errors))
    return f"{100 * value / len(errors):{'+' if signed else ''}.1f}%"


def test_the_real_files_anchored_single_node_mape_stays_under_its_measured_figure() -> None:
    results = validate_runs(load_runs(REAL).runs, ValidateOptions())
    rows = [r for r in results if r.status == PREDICTED and not r.run.multi_node]
    assert len(rows) >= 400
    mape = sum(abs(r.rel_error) for r in rows) / len(rows)
    assert mape <= SINGLE_NODE_MAPE_BOUND
    # the README's figures (its validation section), from this run
    errors = [r.rel_error for r in rows]
    quoted = f"{len(rows)} rows: single-node MAPE {_pct(errors)} (bias {_pct(errors, True)})"
    assert quoted in README, quoted
    for comm in ("ddp", "horovod-nccl", "other"):
        group = [r.rel_error for r in rows if r.run.comm == comm]
        assert f"{_pct(group)} ({len(group)}" in README, (comm, _pct(group), len(group))


@pytest.mark.parametrize(
    ("gpu", "note", "expected"),
    [("v100-sxm2", "DGX-1 (8x V100 32GB); NGC TensorFlow 19.08-py3", "v100-sxm2-32gb"),
     ("v100", "'V100 32GB' (CSV label), form factor not stated", "v100-sxm2-32gb"),
     ("v100-sxm2", "DGX-1 (8x V100 16GB)", "v100-sxm2"), ("v100-sxm3", "DGX-2 (16x V100 32GB)",
     "v100-sxm3"), ("a100", "8x A100 40GB", "a100")],
)  # fmt: skip
def test_a_memory_size_the_note_states_picks_the_catalog_part(gpu, note, expected) -> None:
    from types import SimpleNamespace

    from ddlsim.system.catalog import device
    from ddlsim.tools.validate.mapping import stated_gpu

    assert stated_gpu(SimpleNamespace(gpu=gpu, note=note)) == expected
    assert device("v100-sxm2-32gb").memory_bytes == 2 * device("v100-sxm2").memory_bytes
