"""Sweep rows (``run_grid`` / ``write_rows``) and ``ddlsim plot`` figures of them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ddlsim.cli.main import main
from ddlsim.errors import ConfigError
from ddlsim.tools.analysis.plot import series_dimensions
from ddlsim.tools.analysis.sweep import COLUMNS, evaluate, read_rows, run_grid, write_rows

pytest.importorskip("matplotlib")

EXIT_USAGE = 2
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


@pytest.fixture(scope="module")
def sweep_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = run_grid({"model": ["alexnet"], "gpus": [1, 2, 8, 16], "comm": ["horovod-nccl", "ps"]})
    rows.append(evaluate({"model": "alexnet", "gpus": 12, "gpus_per_node": 8}))
    path = tmp_path_factory.mktemp("sweep") / "sweep.csv"
    write_rows(rows, path)
    return path


def test_rows_follow_the_schema(sweep_csv: Path) -> None:
    with open(sweep_csv, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        raw = list(reader)
    assert len(raw) == 9
    assert [r["status"] for r in raw].count("ok") == 8
    failed = raw[-1]
    assert failed["status"] == "error" and "multiple" in failed["error"]
    assert (
        failed["gpus"] == "12" and failed["model"] == "alexnet" and failed["images_per_sec"] == ""
    )
    rows = read_rows(sweep_csv)
    one = rows[0]
    assert one["gpus"] == 1.0 and one["scaling_efficiency"] == pytest.approx(1.0)
    parts = ("compute_s", "comm_exposed_s", "input_stall_s", "coordination_s")
    for r in rows[:-1]:
        assert sum(r[p] for p in parts) == pytest.approx(r["iteration_time_s"], rel=1e-9)
        assert r["time_to_train_s"] == pytest.approx(90 * 1_281_167 / r["images_per_sec"])


def test_series_dimensions_ignore_columns_that_follow_the_gpu_count(sweep_csv: Path) -> None:
    ok = [r for r in read_rows(sweep_csv) if r["status"] == "ok"]
    assert series_dimensions(ok) == ["comm"]  # not gpus_per_node, intra_node, transport, n_ps


def test_unknown_grid_parameter_is_refused() -> None:
    with pytest.raises(ConfigError, match="gpu_count"):
        run_grid({"gpu_count": [1]})


@pytest.mark.parametrize("kind", ["scaling", "efficiency", "breakdown"])
def test_plot_writes_png_and_svg(
    capsys: pytest.CaptureFixture[str], sweep_csv: Path, tmp_path: Path, kind: str
) -> None:
    png, svg = tmp_path / f"{kind}.png", tmp_path / f"{kind}.svg"
    assert main(["plot", str(sweep_csv), "-o", str(png), "--kind", kind]) == 0
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 10_000
    if kind == "scaling":  # one SVG is enough to show the format works
        assert main(["plot", str(sweep_csv), "-o", str(svg), "--kind", kind]) == 0
        assert "<svg" in svg.read_text(encoding="utf-8")[:2000]
    assert capsys.readouterr().err == ""
    assert sorted(p.suffix for p in tmp_path.iterdir()) in ([".png"], [".png", ".svg"])


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "content, args, needle",
    [
        (None, ["--kind", "pie"], "invalid choice"),
        ("", [], "empty"),
        ("gpus,images_per_sec\n", [], "no configurations"),
        ("gpus,images_per_sec\n1,200\n", [], "single_gpu_images_per_sec"),
        ("gpus,scaling_efficiency\n1,1.0\n", ["--kind", "breakdown"], "compute_s"),
        ("gpus,scaling_efficiency,status\n1,,error\n", ["--kind", "efficiency"], "succeeded"),
        ("gpus,scaling_efficiency\none,1.0\n", ["--kind", "efficiency"], "not a number"),
        ("gpus,scaling_efficiency\n1,1.0\n", ["--kind", "efficiency", "-o", "f.jpg"], ".png"),
        ("MISSING", [], "cannot read"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str],
    sweep_csv: Path,
    tmp_path: Path,
    content: str | None,
    args: list[str],
    needle: str,
) -> None:
    if content is None:
        src = sweep_csv
    elif content == "MISSING":
        src = tmp_path / "nope.csv"
    else:
        src = _write(tmp_path / "in.csv", content)
    out_args = [] if "-o" in args else ["-o", str(tmp_path / "fig.png")]
    code = main(
        ["plot", str(src), *out_args, *[a if a != "f.jpg" else str(tmp_path / a) for a in args]]
    )
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert out == "" and err.startswith("ddlsim: error:") and err.count("\n") == 1
    assert needle in err
    assert not list(tmp_path.glob("fig*")) and not list(tmp_path.glob("*.jpg"))
