"""What the commands say and read (issue 11, item 9): ``plot`` reads the Parquet files ``sweep``
writes, ``timeline`` says what it wrote, the report counts the nodes and GPUs actually used.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddlsim.cli.main import main
from ddlsim.tools.analysis.sweep import read_rows

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


pytestmark = pytest.mark.usefixtures("no_user_calibration")


def test_plot_reads_the_parquet_file_sweep_writes(tmp_path, cli):
    pytest.importorskip("pyarrow")
    pytest.importorskip("matplotlib")
    grid = ["--model", "alexnet", "--gpus", "1", "8", "16", "--comm", "horovod-nccl", "ps"]
    parquet, csv = tmp_path / "s.parquet", tmp_path / "s.csv"
    for out in (parquet, csv):
        assert main(["sweep", *grid, "--serial", "--quiet", "-o", str(out)]) == 0
    assert read_rows(parquet) == read_rows(csv)  # the same rows, the same cell values
    for kind in ("scaling", "efficiency", "breakdown"):
        fig = tmp_path / f"{kind}.png"
        code, _, err = cli("plot", str(parquet), "--kind", kind, "-o", str(fig))
        assert code == 0, err
        assert fig.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("content", [b"", b"PAR1 not really", b"\x00\x01\x02"])
def test_a_bad_parquet_file_is_one_line(content, tmp_path, cli):
    pytest.importorskip("pyarrow")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(content)
    code, _, err = cli("plot", str(bad), "-o", str(tmp_path / "f.png"))
    assert code == 2 and err.count("\n") == 1 and "bad.parquet" in err
    assert not (tmp_path / "f.png").exists()


def test_timeline_says_what_it_wrote(tmp_path, cli):
    out = tmp_path / "trace.json"
    argv = ["timeline", "--model", "alexnet", "--gpus", "4", "--engine", "detailed"]
    argv += ["--workers", "0-2", "--iterations", "2", "-o", str(out)]
    code, stdout, err = cli(*argv)
    assert code == 0 and stdout == ""
    events = len(json.loads(out.read_text())["traceEvents"])
    assert err == (
        f"wrote {out}: {events:,} events, iterations 3-4 of workers 0-2 (detailed engine); "
        "open it in https://ui.perfetto.dev\n"
    )
    code, stdout, err = cli("timeline", "--model", "alexnet", "-o", "-")
    assert code == 0 and err == "" and json.loads(stdout)["traceEvents"]


@pytest.mark.parametrize(
    "argv, header",
    [
        (["--gpus", "4"], "(1 node x 4 GPUs)"),
        (["--gpus", "1"], "(1 node x 1 GPU)"),
        (["--gpus", "16"], "(2 nodes x 8 GPUs)"),
        (["--gpus", "12", "--gpus-per-node", "4", "--gpu", "k80"], "(3 nodes x 4 GPUs)"),
    ],
)
def test_the_report_counts_what_is_used(argv, header, cli):
    code, out, _ = cli("predict", "--model", "alexnet", *argv)
    assert code == 0 and out.splitlines()[0].endswith(f"{header}, horovod-nccl")


def test_readme_sample_report_matches_the_header_format():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "(32 nodes x 8 GPUs)" in readme and "node(s)" not in readme
