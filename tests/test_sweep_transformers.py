"""``ddlsim sweep`` over transformers: a configuration that does not fit memory is a row with
status error and the one-line reason, transformer rows carry seq_len, tokens/s, MFU and memory,
CNN rows leave them empty, and ``ddlsim plot`` draws the file."""

from __future__ import annotations

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.tools.analysis.sweep import TRANSFORMER_COLUMNS, evaluate, read_rows

ARGS = ["--model", "bert-large", "gpt2", "--gpus", "8", "64", "--precision", "amp"]
ARGS += ["--seq-len", "128", "512", "--gpu", "v100-sxm2", "--batch", "8", "64"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("sweep") / "transformers.csv"
    assert main(["sweep", *ARGS, "--serial", "--quiet", "-o", str(out)]) == 0
    return read_rows(out)


def test_the_grid_runs_and_what_does_not_fit_is_an_error_row(rows) -> None:
    assert len(rows) == 16
    bad = [r for r in rows if r["status"] == "error"]
    assert {(r["model"], r["batch_per_gpu"], r["seq_len"]) for r in bad} == {
        ("bert-large", 64, 512),
        ("gpt2", 64, 512),
    }
    for r in bad:
        assert "does not fit one v100-sxm2" in r["error"] and "\n" not in r["error"]
        assert all(r[c] is None for c in ("images_per_sec", *TRANSFORMER_COLUMNS))


def test_transformer_rows_carry_tokens_mfu_and_memory(rows) -> None:
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 12
    for r in ok:
        assert r["tokens_per_sec"] == pytest.approx(r["images_per_sec"] * r["seq_len"])
        assert 0 < r["mfu"] < 1
        assert 0 < r["memory_total_GB"] <= 17.2  # a 16 GiB V100
    r = next(r for r in ok if (r["model"], r["gpus"], r["seq_len"]) == ("gpt2", 64, 128))
    p = ddlsim.predict(
        "gpt2", 64, gpu="v100-sxm2", precision="amp", seq_len=128, batch=int(r["batch_per_gpu"])
    )
    t = p.inputs["transformer"]
    assert r["tokens_per_sec"] == pytest.approx(t["tokens_per_sec"], rel=1e-12)
    assert r["mfu"] == pytest.approx(t["mfu"], rel=1e-12)
    assert r["memory_total_GB"] == pytest.approx(t["memory"]["total_GB"], rel=1e-12)
    # one GPU's compute by term, as the report's compute lines give it
    terms = t["compute_terms_s"]
    for name, value in terms.items():
        assert r[f"compute_{name}_s"] == pytest.approx(value, rel=1e-12)
    assert r["compute_gemm_s"] > 0 and r["compute_recompute_s"] == 0.0


def test_cnn_rows_leave_the_transformer_columns_empty() -> None:
    row = evaluate({"model": "resnet50", "gpus": 8})
    assert row["status"] == "ok"
    assert all(row[c] is None for c in ("seq_len", *TRANSFORMER_COLUMNS))


def test_batch_max_in_a_grid(tmp_path) -> None:
    out = tmp_path / "max.csv"
    args = ["--model", "bert-large", "resnet50", "--gpu", "v100-sxm2", "--precision", "amp"]
    assert main(["sweep", *args, "--batch", "max", "--serial", "--quiet", "-o", str(out)]) == 0
    bert, cnn = read_rows(out)
    assert bert["status"] == "ok" and bert["batch_per_gpu"] > 1
    assert cnn["status"] == "error" and "--batch max" in cnn["error"]
    assert cnn["batch_per_gpu"] is None  # the config column says max


@pytest.mark.parametrize("kind", ["scaling", "breakdown"])
def test_plot_draws_the_file(rows, tmp_path, kind) -> None:
    pytest.importorskip("matplotlib")
    src = tmp_path / "rows.csv"
    assert main(["sweep", *ARGS, "--serial", "--quiet", "-o", str(src)]) == 0
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(src), "--kind", kind, "-o", str(out)]) == 0
    assert out.stat().st_size > 10_000


def test_a_swept_transformer_option_is_a_column() -> None:
    """--task and --loss-kernel as grid axes: each row says which (empty for a CNN)."""
    from ddlsim.tools.analysis.sweep import evaluate

    kw = dict(gpus=8, gpu="a100", batch=4, seq_len=128, precision="bf16")
    span = evaluate(dict(model="bert-large", task="span", loss_kernel="fused", **kw))
    mlm = evaluate(dict(model="bert-large", task="mlm", **kw))
    cnn = evaluate(dict(model="resnet50", gpus=8, gpu="a100"))
    assert (span["task"], span["loss_kernel"], mlm["task"]) == ("span", "fused", "mlm")
    assert span["sharding"] is None and cnn["task"] is None and cnn["attention"] is None
    fsdp = evaluate(dict(model="mpt-125m", comm="fsdp", offload="optimizer", **kw))
    assert (fsdp["sharding"], fsdp["offload"]) == ("full_shard", "optimizer")
