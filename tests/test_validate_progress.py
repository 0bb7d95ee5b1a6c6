"""``ddlsim validate`` of a long file: progress on stderr, and rows of one configuration
share one prediction (issue 33, 17)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import ddlsim.api
from ddlsim.cli.main import main
from ddlsim.cli.progress import Bar
from ddlsim.tools.validate.core import validate_file
from ddlsim.tools.validate.runs import load_runs

ROOT = Path(__file__).resolve().parents[1]
RUNS_CSV = ROOT / "traces" / "measured" / "runs.csv"


@pytest.fixture(autouse=True)
def _empty_user_calibration_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


def duplicated(tmp_path: Path, rows: int = 40, copies: int = 5) -> Path:
    """The first ``rows`` rows of the shipped file, ``copies`` times over (new run ids)."""
    with RUNS_CSV.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header, base = reader.fieldnames, list(reader)[:rows]
    path = tmp_path / "dup.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        for k in range(copies):
            writer.writerows({**r, "run_id": f"{r['run_id']}-c{k}"} for r in base)
    return path


def test_rows_of_one_configuration_share_one_prediction(tmp_path, monkeypatch):
    path = duplicated(tmp_path)
    calls = []
    real = ddlsim.api.predict

    def counting(**kwargs):
        calls.append(json.dumps(kwargs, sort_keys=True, default=repr))
        return real(**kwargs)

    monkeypatch.setattr(ddlsim.api, "predict", counting)
    results = validate_file(load_runs(str(path)))
    predicted = [r for r in results if r.status == "predicted"]
    assert len(predicted) == 5 * 29
    assert len(calls) == len(set(calls)) == 29  # once per configuration, not once per row
    first = {r.run_id[:-3]: r.predicted_images_per_sec for r in predicted if r.run_id[-1] == "0"}
    assert all(r.predicted_images_per_sec == first[r.run_id[:-3]] for r in predicted)


def test_validate_progress_in_a_log_every_10_s_and_nothing_for_a_short_run(tmp_path, capsys):
    path = duplicated(tmp_path, copies=1)
    assert main(["validate", str(path), "--json"]) == 0
    assert capsys.readouterr().err == ""  # a short run in a log: no progress lines
    seen = []
    validate_file(load_runs(str(path)), progress=lambda *a: seen.append(a[:2]))
    assert seen == [(n, 40) for n in range(1, 41)]
    log = io.StringIO()
    bar = Bar(log, unit="rows", quiet_log=True)
    for done in range(1, 101):
        bar(done, 100, elapsed_s=done * 0.25)  # 25 s in all
    bar.close()
    lines = log.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["40/100", "80/100", "100/100"]
    assert all(line.split()[2] == "rows" for line in lines)


def test_validate_progress_redraws_on_a_terminal(tmp_path, monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["validate", str(duplicated(tmp_path, rows=10, copies=1)), "--json"]) == 0
    text = tty.getvalue()
    assert text.count("\r") == 10 and "10/10 rows" in text and text.endswith("\n")
