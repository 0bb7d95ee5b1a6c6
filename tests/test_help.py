"""What a newcomer reads first (issue 23, item 8): ``predict --help`` lists the names every
flag takes, from the zoo and the catalogs themselves (never a list that can go stale), without
importing anything heavy; the fitting scripts say how far they are."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from ddlsim.cli.main import build_parser
from ddlsim.system import catalog
from ddlsim.tools.calibrate.progress import Progress
from ddlsim.workload.zoo import MODEL_NAMES

REPO = Path(__file__).resolve().parents[1]


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return " ".join(out.getvalue().split())  # argparse wraps lines: compare words


@pytest.mark.parametrize("command", ["predict", "timeline"])
def test_help_lists_every_model_gpu_link_and_network(command):
    text = _help(command)
    for name in MODEL_NAMES:
        assert f" {name}," in text or f" {name} (" in text, name
    for name in catalog.device_names():  # canonical ids and their aliases
        assert name in text, name
    for name in (*catalog.intra_link_names(), *catalog.inter_link_names()):
        assert f" {name}," in text or f" {name} (" in text, name


def test_help_imports_nothing_heavy():
    code = (
        "import contextlib, io, sys\n"
        "from ddlsim.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['predict', '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('tensorflow', 'torch', 'matplotlib', 'pandas', 'dask', 'scipy', 'yaml')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_the_fitting_scripts_report_progress_with_their_name():
    stream = io.StringIO()
    progress = Progress([2, 1], stream, clock=iter([0.0, 10.0, 10.0, 15.0]).__next__, name="fit")
    progress.show("P100 fit: generation 10/150, loss 0.1234")
    progress.advance()
    progress.show("m40 held out")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("fit [") and "0/2 P100 fit: generation 10/150" in lines[0]
    assert "1/2 m40 held out" in lines[1] and "remaining ~0:05" in lines[1]
    for script in ("fit_sync.py", "fit_kernel_model.py"):
        text = (REPO / "scripts" / script).read_text(encoding="utf-8")
        assert "Progress(" in text and "progress.show(" in text and "progress.close()" in text
