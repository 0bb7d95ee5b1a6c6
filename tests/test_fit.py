"""``--batch max``: the largest micro-batch whose step fits the GPU's memory (bisection over the
monotone memory model), checked in closed form: it fits and one more sequence does not."""

from __future__ import annotations

import pytest

import ddlsim
from ddlsim.errors import ConfigError
from ddlsim.resolve.fit import largest_fitting
from ddlsim.workload.transformers.memory import memory

JOBS = [
    dict(model="bert-large", gpus=16, gpu="v100-sxm2", precision="amp", seq_len=128, comm="ddp"),
    dict(model="gpt2", gpus=8, gpu="a100-sxm4-80gb", precision="bf16", seq_len=512, comm="ddp"),
    dict(
        model="bert-large", gpus=8, gpu="a100-sxm4-40gb", precision="amp", seq_len=512,
        comm="horovod-nccl", activation_checkpointing=True,
    ),
]  # fmt: skip


@pytest.mark.parametrize("high", [1, 2, 7, 100, 65536])
@pytest.mark.parametrize("limit", [0, 1, 2, 37, 64, 65535, 65536, 10**6])
def test_the_bisection_finds_the_last_batch_that_fits(high: int, limit: int) -> None:
    calls: list[int] = []

    def fits(b: int) -> bool:
        calls.append(b)
        return b <= limit

    assert largest_fitting(fits, high) == min(limit, high)
    assert len(calls) <= 2 + high.bit_length()  # bisection, not a scan


@pytest.mark.parametrize("job", JOBS, ids=lambda j: f"{j['model']}-{j['gpu']}")
def test_the_found_batch_fits_and_one_more_does_not(job: dict) -> None:
    p = ddlsim.predict(batch="max", **job)
    t = p.inputs["transformer"]
    b = t["micro_batch"]
    assert t["micro_batch_fitted"] and p.inputs["batch_per_gpu"] == b > 1
    assert t["memory"]["fits"]
    assert p.inputs["predict_kwargs"]["batch"] == "max"  # the record re-runs the search
    setup = p.setup
    n = setup.workload.model.n_params
    numerics = setup.workload.profile.provenance["numerics"]
    kw = dict(
        n_params=n, capacity_bytes=setup.cluster.device.memory_bytes, mixed=True,
        optimizer="adamw", flash=numerics["flash_attention"],
        checkpointing=numerics["activation_checkpointing"],
        exchange="ddp" if job["comm"] == "ddp" else "horovod",
        fusion_bytes=setup.strategy.fusion_threshold_bytes,
    )  # fmt: skip
    cfg = setup.transformer
    assert memory(cfg, b, cfg.seq, **kw).fits
    assert not memory(cfg, b + 1, cfg.seq, **kw).fits
    same = ddlsim.predict(batch=b, **job)  # the fitted batch is an ordinary job
    assert same.images_per_sec == pytest.approx(p.images_per_sec)
    with pytest.raises(ConfigError, match="does not fit"):
        ddlsim.predict(batch=b + 1, **job)


def test_the_report_says_the_batch_was_chosen_to_fit(cli) -> None:
    code, out, _ = cli(
        "predict", "--model", "bert-large", "--gpus", "16", "--gpu", "v100-sxm2",
        "--precision", "amp", "--batch", "MAX", "--seq-len", "128", "--comm", "ddp",
    )  # fmt: skip
    assert code == 0
    assert "the largest that fits (--batch max)" in out


def test_a_cnn_is_refused_in_one_line(cli) -> None:
    code, out, err = cli("predict", "--model", "resnet50", "--batch", "max")
    assert code != 0 and not out
    assert len(err.strip().splitlines()) == 1 and "--batch max" in err and "resnet50" in err


def test_a_model_that_fits_no_batch_is_refused_in_one_line(cli) -> None:
    code, _, err = cli("predict", "--model", "mpt-7b", "--gpu", "a100-sxm4-80gb",
                       "--precision", "bf16", "--batch", "max", "--comm", "ddp")  # fmt: skip
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and "at micro-batch 1 " in err


def test_other_words_are_refused(cli) -> None:
    code, _, err = cli("predict", "--model", "bert-large", "--batch", "most")
    assert code != 0 and "expected an integer or max" in err
    with pytest.raises(ConfigError, match="batch per GPU"):
        ddlsim.predict(model="bert-large", batch="most")


def test_the_refusal_says_what_could_make_it_fit() -> None:
    kw = dict(gpu="h100", precision="bf16", comm="ddp", framework="pytorch")
    with pytest.raises(ConfigError, match=r"alone do not fit: .*--comm fsdp or zero1") as state:
        ddlsim.predict("mpt-7b", 8, batch=1, **kw)
    assert "try" not in str(state.value)  # no batch or checkpointing makes it fit
    with pytest.raises(ConfigError, match=r"try a smaller --batch or --activation-checkpointing$"):
        ddlsim.predict("gpt2-xl", 8, batch=64, **kw)  # causal, bf16 on H100: flash already
    with pytest.raises(ConfigError, match=r"try a smaller --batch or --attention flash$"):
        ddlsim.predict(
            "mpt-1b", 8, batch=64, activation_checkpointing=True, attention="unfused",
            **{**kw, "gpu": "a100-sxm4-40gb"},
        )  # fmt: skip


def test_the_record_re_runs_the_search(cli, tmp_path) -> None:
    argv = ["predict", "--model", "bert-large", "--gpu", "v100", "--precision", "amp"]
    code, out, _ = cli(*argv, "--batch", "max", "--gpus", "8", "--comm", "ddp", "--json")
    assert code == 0
    saved = tmp_path / "result.json"
    saved.write_text(out)
    code, again, _ = cli("predict", "--from-json", str(saved))
    assert code == 0 and "micro-batch   9: the largest that fits (--batch max)" in again
