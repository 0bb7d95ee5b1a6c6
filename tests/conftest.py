"""Fixtures shared by the test modules that opt in to them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ddlsim.cli.main import main


@pytest.fixture
def no_user_calibration(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point the user calibration directory at an empty folder: a developer's own calibrations
    (``~/.local/share/ddlsim/calibration``) must not change what a test sees."""
    monkeypatch.setenv("DDLSIM_CALIBRATION_DIR", str(tmp_path_factory.mktemp("no-user-cal")))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``cli("predict", "--gpus", "8")``: the command in-process; (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
