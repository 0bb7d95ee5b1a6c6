"""``ddlsim calibrate`` leaves nothing in the temporary folder (issue 33, item 18): TensorFlow's
autograph ``__pycache__`` and PyTorch's ``torchinductor_<user>`` go to a private folder that is
removed on exit, success or not."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ddlsim.tools.calibrate.scratch import CACHE_VARIABLES, private_tempdir

REPO = Path(__file__).resolve().parents[1]


def test_the_private_folder_takes_the_caches_and_is_removed_even_on_error(monkeypatch):
    monkeypatch.setenv("TMPDIR", "/somewhere")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = tempfile.tempdir
    with pytest.raises(RuntimeError), private_tempdir() as folder:
        assert tempfile.gettempdir() == folder
        assert os.environ["TMPDIR"] == folder
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.join(folder, "torchinductor")
        Path(folder, "__pycache__").mkdir()
        raise RuntimeError("the pass failed")
    assert not os.path.exists(folder)
    assert tempfile.tempdir == before
    assert os.environ["TMPDIR"] == "/somewhere"
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert set(CACHE_VARIABLES) >= {"TMPDIR", "TORCHINDUCTOR_CACHE_DIR"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "module"), [("tensorflow", "tensorflow"), ("torch", "torch")]
)
def test_a_calibration_leaves_the_temporary_folder_as_it_was(tmp_path, framework, module):
    pytest.importorskip(module)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = ["calibrate", "--framework", framework, "--device", "cpu", "--model", "alexnet"]
    argv += ["--batch", "4", "--steps", "2", "--warmup-steps", "1", "--output", str(tmp_path)]
    env = {**os.environ, "TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, "-m", "ddlsim", *argv], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp) == []
