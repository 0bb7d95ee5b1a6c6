"""scripts/fsdp_mfu_curves.py: issue 31's FSDP MFU curves and their direction count."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "fsdp_mfu_curves", ROOT / "scripts" / "fsdp_mfu_curves.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("gpus", "label"),
    [(1, "8"), (8, "8"), (16, "16-64"), (64, "16-64"), (128, "128-512"), (512, "128-512")],
)
def test_bands(gpus, label):
    assert _script().band(gpus) == label


def test_a_curve_changes_from_its_smallest_to_its_largest_count_averaging_repeats():
    s = _script()
    curves = {
        ("a100", "m"): {64: [(40.0, 44.0)], 8: [(44.0, 46.0), (46.0, 48.0)], 16: [(42.0, 46.5)]},
        ("a100", "single"): {8: [(50.0, 51.0)]},  # one count: no curve
    }
    [(key, row, d_meas, d_pred)] = s.curve_changes(curves)
    assert key == ("a100", "m")
    assert [n for n, _, _ in row] == [8, 16, 64]
    assert row[0][1:] == (45.0, 47.0)
    assert d_meas == pytest.approx(-5.0)
    assert d_pred == pytest.approx(-3.0)


@pytest.mark.parametrize(
    ("d_meas", "d_pred", "right"),
    [
        (-3.9, -1.5, True),
        (2.2, -0.0, False),
        (2.7, 0.4, True),
        (0.0, -1.0, True),
        (-1.0, 0.5, False),
    ],
)
def test_direction(d_meas, d_pred, right):
    assert _script().right_direction(d_meas, d_pred) is right


@pytest.mark.slow
def test_every_a100_curve_falls_or_rises_across_nodes_as_measured():
    """From the smallest multi-node count (16 or 32 GPUs) to the largest, every A100 curve (40
    and 80 GB) has the measured direction. The 8-GPU points are left out: they run gradient
    accumulation where the multi-node rows do not, and their level moves with the compute
    model (docs/design.md, "FSDP's multi-node fall")."""
    s = _script()
    _, curves = s.collect(ROOT / "traces" / "measured" / "runs_transformers.csv")
    multi_node = {key: {n: v for n, v in pts.items() if n > 8} for key, pts in curves.items()}
    changes = {key: (dm, dp) for key, _, dm, dp in s.curve_changes(multi_node)}
    a100 = {key: v for key, v in changes.items() if key[0].startswith("a100")}
    assert len(a100) == 12
    assert all(s.right_direction(dm, dp) for dm, dp in a100.values())
