"""Time to train: epochs x dataset images / images per second, in predict's outputs."""

from __future__ import annotations

import json
import math

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.workload.ttt import (
    DEFAULT_EPOCHS,
    IMAGENET_1K_TRAIN_IMAGES,
    format_duration,
    time_to_train_s,
    validate_ttt_inputs,
)

EXIT_USAGE = 2


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def test_formula_and_defaults() -> None:
    assert DEFAULT_EPOCHS == 90 and IMAGENET_1K_TRAIN_IMAGES == 1_281_167
    assert time_to_train_s(1000.0, 2, 5000) == pytest.approx(10.0)
    assert time_to_train_s(1000.0) == pytest.approx(90 * 1_281_167 / 1000.0)
    assert time_to_train_s(100.0, 0.5, 1000) == pytest.approx(5.0)  # fractional epochs


@pytest.mark.parametrize(
    "epochs, images",
    [
        *((e, 1000) for e in (0, -1, math.nan, math.inf, True, "90")),
        *((90, n) for n in (0, -5, 1.5, True, 10**14)),
    ],
)
def test_bad_inputs_raise_config_error(epochs: object, images: object) -> None:
    with pytest.raises(ConfigError):
        validate_ttt_inputs(epochs, images)  # type: ignore[arg-type]


@pytest.mark.parametrize("ips", [0.0, -1.0, math.nan])
def test_bad_throughput_raises(ips: float) -> None:
    with pytest.raises(ConfigError):
        time_to_train_s(ips)


def test_prediction_carries_time_to_train() -> None:
    p = ddlsim.predict("alexnet", 8)
    assert p.time_to_train_s == pytest.approx(90 * 1_281_167 / p.images_per_sec, rel=1e-12)
    d = p.to_dict()
    assert d["time_to_train_s"] == p.time_to_train_s
    assert d["inputs"]["epochs"] == 90 and d["inputs"]["dataset_images"] == 1_281_167
    q = ddlsim.predict("alexnet", 8, epochs=3, dataset_images=50_000)
    assert q.time_to_train_s == pytest.approx(3 * 50_000 / q.images_per_sec, rel=1e-12)
    with pytest.raises(ConfigError, match="epochs"):
        ddlsim.predict("alexnet", 8, epochs=0)


def test_cli_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["predict", "--model", "alexnet", "--gpus", "8", "--epochs", "2"]
    assert main([*argv, "--dataset-images", "1000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time_to_train_s"] == pytest.approx(2000 / doc["images_per_sec"], rel=1e-12)
    assert doc["inputs"]["epochs"] == 2 and doc["inputs"]["dataset_images"] == 1000
    assert main(argv) == 0
    text = capsys.readouterr().out
    (line,) = [ln for ln in text.splitlines() if ln.startswith("  time to train")]
    assert "2 epochs x 1,281,167 images, no failures" in line
    (expected,) = [ln for ln in text.splitlines() if ln.startswith("    time to train")]
    assert "expected (goodput" in expected  # the failures section's


@pytest.mark.parametrize(
    "flags", [["--epochs", "0"], ["--epochs", "-3"], ["--dataset-images", "0"], ["--epochs", "x"]]
)
def test_cli_bad_values_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    assert main(["predict", *flags]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ddlsim: error:") and err.count("\n") == 1


@pytest.mark.parametrize(
    "seconds, text",
    [(42.0, "42.0 s"), (750.0, "12.5 min"), (3 * 3600.0, "3.00 h"), (5 * 86400.0, "5.0 days")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_a_transformers_time_to_train_counts_tokens() -> None:
    """20 tokens a parameter by default (Chinchilla), or the stated budget, over tokens/s."""
    p = ddlsim.predict("bert-base", 8, gpu="v100-sxm2", batch=8, seq_len=128, precision="amp")
    i = p.inputs
    assert "epochs" not in i and i["train_tokens_stated"] is False
    tokens_per_s = p.images_per_sec * 128
    assert i["train_tokens"] == pytest.approx(20 * i["transformer"]["params"])
    assert p.time_to_train_s == pytest.approx(i["train_tokens"] / tokens_per_s)
    q = ddlsim.predict(
        "bert-base", 8, gpu="v100-sxm2", batch=8, seq_len=128, precision="amp", train_tokens=1e9
    )
    assert q.time_to_train_s == pytest.approx(1e9 / (q.images_per_sec * 128))
    assert q.inputs["train_tokens_stated"] is True


def test_the_report_says_what_the_time_to_train_counts() -> None:
    from ddlsim.cli.report import format_prediction

    p = ddlsim.predict("bert-base", 8, gpu="v100-sxm2", batch=8, seq_len=128, train_tokens=2.5e9)
    assert "(2.5 B tokens, no failures)" in format_prediction(p)
