"""Golden ``ddlsim predict --json`` outputs of a few reference configurations.

Each ``tests/golden/<name>.json`` holds the argv and the ``--json`` output with volatile fields
removed (absolute paths made relative to the shipped calibration folder, dates dropped). Numbers
are compared with a relative tolerance of 1e-9, so any change to the model shows up here.
After an intended change, regenerate the files and review the diff::

    DDLSIM_UPDATE_GOLDEN=1 python -m pytest tests/test_cli_golden.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from ddlsim.calibration.store import shipped_dir
from ddlsim.cli.main import main

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("DDLSIM_UPDATE_GOLDEN") == "1"
REL_TOL = 1e-9
#: absolute slack for values that are zero up to floating-point noise (e.g. 1e-17 s)
ABS_TOL = 1e-15
#: keys whose values change without the model changing (calibration creation dates)
VOLATILE_KEYS = frozenset({"created"})
SHIPPED = "<shipped>"

CONFIGS: dict[str, list[str]] = {
    "alexnet-256-p100-defaults": ["--model", "alexnet", "--gpus", "256", "--gpu", "p100"],
    "resnet50-16-k80-pcie3-25gbe-tcp-b32": [
        *("--model", "resnet50", "--gpus", "16", "--gpu", "k80", "--intra-node", "pcie3"),
        *("--inter-node", "25gbe", "--transport", "tcp", "--comm", "horovod-nccl"),
        *("--batch", "32"),
    ],
    "inception3-64-p100pcie-40gbe-ps16": [
        *("--model", "inception3", "--gpus", "64", "--gpu", "p100-pcie"),
        *("--inter-node", "40gbe", "--comm", "ps", "--n-ps", "16"),
    ],
    "resnet50v15-32-v100-ibedr-amp-hierarchical": [
        *("--model", "resnet50_v1.5", "--gpus", "32", "--gpu", "v100"),
        *("--inter-node", "ib-edr", "--precision", "amp", "--hierarchical"),
    ],
    "vgg16-8-p100-replicated-nccl": [
        *("--model", "vgg16", "--gpus", "8", "--gpu", "p100", "--comm", "replicated-nccl"),
    ],
    # a batch without a shipped file (roofline transfer), real data, older Horovod knobs
    "googlenet-4of8-v100-b96-real-mpi": [
        *("--model", "googlenet", "--gpus", "4", "--gpus-per-node", "8", "--gpu", "v100"),
        *("--batch", "96", "--data", "real", "--comm", "horovod-mpi"),
        *("--fusion-threshold-mb", "64", "--cycle-time-ms", "5"),
    ],
    # transformers: an encoder under DDP across two DGX-1s; a decoder under FSDP with
    # checkpointing and accumulation on H100s (the compute-by-term and memory sections)
    "bert-large-16-v100-amp-ddp-seq128": [
        *("--model", "bert-large", "--gpus", "16", "--gpu", "v100-sxm2", "--precision", "amp"),
        *("--batch", "16", "--seq-len", "128", "--comm", "ddp"),
    ],
    "mpt-7b-64-h100-fsdp-ckpt-accum": [
        *("--model", "mpt-7b", "--gpus", "64", "--gpu", "h100", "--precision", "bf16"),
        *("--batch", "4", "--seq-len", "2048", "--comm", "fsdp", "--grad-accum", "2"),
        "--activation-checkpointing",
    ],
}


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the shipped calibrations: a developer's own files must not change the outputs."""
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def _portable(text: str) -> str:
    """An absolute path under the shipped calibration folder as ``<shipped>/...``."""
    path = Path(text)
    if not path.is_absolute():
        return text
    try:
        return f"{SHIPPED}/{path.relative_to(shipped_dir()).as_posix()}"
    except ValueError:
        raise AssertionError(f"absolute path outside the shipped calibrations: {text}") from None


def normalize(value: Any) -> Any:
    """``value`` without volatile fields: absolute paths made portable, dates dropped."""
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, str):
        return _portable(value)
    return value


def mismatches(actual: Any, expected: Any, where: str = "$") -> list[str]:
    """Differences between two JSON values (floats compared with :data:`REL_TOL`)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        if actual.keys() != expected.keys():
            extra, missing = actual.keys() - expected.keys(), expected.keys() - actual.keys()
            return [f"{where}: new keys {sorted(extra)}, missing keys {sorted(missing)}"]
        return [m for k in expected for m in mismatches(actual[k], expected[k], f"{where}.{k}")]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            got = len(actual) if isinstance(actual, list) else repr(actual)
            return [f"{where}: expected a list of {len(expected)}, got {got}"]
        return [
            m
            for i, (a, e) in enumerate(zip(actual, expected, strict=True))
            for m in mismatches(a, e, f"{where}[{i}]")
        ]
    numbers = (int, float)
    if (
        isinstance(expected, numbers)
        and isinstance(actual, numbers)
        and not isinstance(expected, bool)
        and not isinstance(actual, bool)
        and (isinstance(expected, float) or isinstance(actual, float))
    ):
        if math.isclose(actual, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return []
        return [f"{where}: {actual!r} != {expected!r} (rel. tol. {REL_TOL:g})"]
    if type(actual) is not type(expected) or actual != expected:
        return [f"{where}: {actual!r} != {expected!r}"]
    return []


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    """``ddlsim predict ARGV --json`` in-process, parsed."""
    code = main(["predict", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    return json.loads(out)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_predict_json_matches_golden(capsys: pytest.CaptureFixture[str], name: str) -> None:
    argv = CONFIGS[name]
    output = normalize(run_json(capsys, argv))
    path = GOLDEN_DIR / f"{name}.json"
    if UPDATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        doc = {"argv": argv, "output": output}
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        return
    if not path.is_file():
        pytest.fail(
            f"no golden file {path}; create it with DDLSIM_UPDATE_GOLDEN=1 python -m "
            "pytest tests/test_cli_golden.py"
        )
    golden = json.loads(path.read_text(encoding="utf-8"))
    assert golden["argv"] == argv, f"{path.name} was made for other flags; regenerate it"
    problems = mismatches(output, golden["output"])
    assert not problems, (
        f"{len(problems)} difference(s) from {path.name} (regenerate with "
        "DDLSIM_UPDATE_GOLDEN=1 if intended):\n" + "\n".join(problems[:20])
    )


def test_every_golden_file_has_a_configuration() -> None:
    stale = sorted(p.stem for p in GOLDEN_DIR.glob("*.json")) if GOLDEN_DIR.is_dir() else []
    assert [s for s in stale if s not in CONFIGS] == []


def test_golden_files_hold_no_absolute_paths_or_dates() -> None:
    for path in sorted(GOLDEN_DIR.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        assert str(shipped_dir()) not in text, path.name
        assert '"created"' not in text, path.name


def test_normalize_makes_shipped_paths_portable_and_drops_dates() -> None:
    shipped = str(shipped_dir() / "p100-sxm2" / "alexnet" / "b64-fp32.json")
    doc = {"file": shipped, "provenance": {"created": "2026-11-22", "source": "runs.csv"}}
    assert normalize(doc) == {
        "file": f"{SHIPPED}/p100-sxm2/alexnet/b64-fp32.json",
        "provenance": {"source": "runs.csv"},
    }


@pytest.mark.parametrize(
    "actual, expected, same",
    [
        (1.0 + 1e-12, 1.0, True),
        (1.0 + 1e-6, 1.0, False),
        (1e-17, 0.0, True),
        (1e-9, 0.0, False),
        (3, 3.0, True),
        (3, 4, False),
        (True, 1, False),
        ({"a": [1.0, "x"]}, {"a": [1.0, "x"]}, True),
        ({"a": [1.0]}, {"a": [1.0, 2.0]}, False),
        ({"a": 1.0, "b": 2.0}, {"a": 1.0}, False),
        (None, 0.0, False),
    ],
)
def test_mismatches_tolerance(actual: Any, expected: Any, same: bool) -> None:
    assert (mismatches(actual, expected) == []) is same
