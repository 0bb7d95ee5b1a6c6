"""ddlsim sweep: grid checks, Dask and serial runs give identical rows, CSV/Parquet output."""

from __future__ import annotations

import csv

import pytest

from ddlsim.cli.main import main
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.tools.analysis.distributed import run_on_dask
from ddlsim.tools.analysis.grid import normalise_grid
from ddlsim.tools.analysis.sweep import COLUMNS, evaluate, expand_grid, read_rows

GRID = {
    "model": ["alexnet", "resnet50"],
    "gpus": [1, 8, 12, 64],  # 12 GPUs at 8 per node: a row with status error
    "inter_node": ["10gbe", "ib-edr"],
}


def test_dask_rows_are_identical_to_serial_predict_in_grid_order():
    configs = list(expand_grid(normalise_grid(GRID)))
    serial = [evaluate(c) for c in configs]
    seen = []
    dask_rows = run_on_dask(configs, n_workers=2, chunk_size=3, progress=lambda *a: seen.append(a))
    assert dask_rows == serial
    assert seen[-1][:2] == (len(configs), len(configs))
    assert [r["status"] for r in serial].count("error") == 4
    import ddlsim

    one = ddlsim.predict("resnet50", 64, inter_node="10gbe")
    row = serial[configs.index({"model": "resnet50", "gpus": 64, "inter_node": "10gbe"})]
    assert row["images_per_sec"] == one.images_per_sec


@pytest.mark.parametrize(
    "grid, error, text",
    [
        ({"model": ["resnet50", "resnet5O"]}, UnknownNameError, "unknown model 'resnet5O'"),
        ({"gpu": ["p100", "tpu"]}, UnknownNameError, "unknown gpu 'tpu'"),
        ({"inter_node": []}, ConfigError, "empty list"),
        ({"gpus": [8, 0]}, ConfigError, "got 0"),
        ({"gpus": ["eight"]}, ConfigError, "'eight'"),
        ({"cycle_time_ms": [float("nan")]}, ConfigError, "nan"),
        ({"colour": ["red"]}, UnknownNameError, "unknown sweep parameter 'colour'"),
        ({}, ConfigError, "empty sweep grid"),
    ],
)
def test_bad_grids_fail_before_running(grid, error, text):
    with pytest.raises(error, match=text):
        normalise_grid(grid)


def test_cli_serial_csv_and_yaml_grid(tmp_path, capsys):
    grid = tmp_path / "study.yaml"
    grid.write_text("model: [alexnet, googlenet]\ngpus: [1, 16]\nbatch-per-gpu: 32\n")
    out = tmp_path / "rows.csv"
    assert main(["sweep", "--grid", str(grid), "--gpus", "8", "--serial", "-o", str(out)]) == 0
    rows = read_rows(out)
    assert [(r["model"], r["gpus"], r["batch_per_gpu"]) for r in rows] == [
        ("alexnet", 8, 32),
        ("googlenet", 8, 32),
    ]
    with open(out, newline="") as fh:
        assert tuple(next(csv.reader(fh))) == COLUMNS
    assert "2 configurations, 0 failed" in capsys.readouterr().err


def test_cli_parquet_output(tmp_path):
    pd = pytest.importorskip("pandas")
    out = tmp_path / "rows.parquet"
    args = ["sweep", "--model", "resnet50", "--gpus", "1", "8", "--serial", "--quiet"]
    assert main([*args, "-o", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["gpus"].tolist() == [1, 8]


@pytest.mark.parametrize(
    "args, text",
    [
        (["--model", "resnet50", "nosuchnet"], "unknown model 'nosuchnet'"),
        (["--gpus", "8", "-3"], "got -3"),
        (["--grid", "/nonexistent/grid.yaml"], "grid file /nonexistent/grid.yaml: not found"),
        (["--model", "alexnet", "-o", "rows.txt"], "must end in .csv or .parquet"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, text, capsys, tmp_path):
    argv = ["sweep", "--serial", *args]
    if "-o" not in args:
        argv += ["-o", str(tmp_path / "rows.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and text in err
    assert not list(tmp_path.iterdir())


def test_invalid_yaml_names_the_line(tmp_path, capsys):
    grid = tmp_path / "bad.yaml"
    grid.write_text("model: [alexnet\ngpus: 8\n")
    assert main(["sweep", "--grid", str(grid), "-o", str(tmp_path / "r.csv")]) == 2
    assert "line" in capsys.readouterr().err


def test_a_grid_is_streamed_not_materialised():
    """Issue 33, 6: the configurations are made as they are consumed: a 200,000-configuration
    grid holds next to nothing while it is read (a list of them: ~50 MB)."""
    import itertools
    import tracemalloc
    from collections.abc import Iterator

    assert isinstance(expand_grid({"gpus": [1, 8]}), Iterator)
    tracemalloc.start()
    try:
        configs = expand_grid(
            {"gpus": list(range(1, 401)), "batch": list(range(1, 501))}, max_configs=200_000
        )
        assert sum(1 for _ in configs) == 200_000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1e6, peak
    assert list(itertools.islice(expand_grid({"gpus": [1, 8]}), 5)) == [{"gpus": 1}, {"gpus": 8}]


def test_max_configs_has_a_stated_upper_bound(capsys):
    from ddlsim.tools.analysis.sweep import MAX_CONFIGS_LIMIT

    assert MAX_CONFIGS_LIMIT == 1_000_000
    argv = ["sweep", "--gpus", "1", "--max-configs", "1000001", "-o", "-"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "from 1 to 1,000,000" in err and len(err.strip().splitlines()) == 1
    gpus = [str(g) for g in range(1, 1001)]
    argv = ["sweep", "--gpus", *gpus, "--batch", *gpus, "--fusion-threshold-mb", *gpus[:999]]
    assert main([*argv, "--cycle-time-ms", *gpus, "--max-configs", "1000000", "-o", "-"]) == 2
    err = capsys.readouterr().err
    assert "999,000,000,000 configurations" in err and "--max-configs 1,000,000" in err


def test_dask_takes_chunks_from_a_stream_a_few_at_a_time():
    """A stream of configurations is consumed as chunks finish (4 per worker ahead), never
    drawn whole before the first row, and the rows come back in order."""
    drawn = []

    def stream():
        for gpus in range(1, 41):
            drawn.append(gpus)
            yield {"model": "alexnet", "gpus": gpus, "gpus_per_node": 8}

    seen = []
    rows = run_on_dask(
        stream(), total=40, n_workers=2, chunk_size=1, progress=lambda *a: seen.append(len(drawn))
    )
    assert [int(r["gpus"]) for r in rows] == list(range(1, 41))
    assert seen[0] <= 2 * 4 + 1 and seen[-1] == 40
