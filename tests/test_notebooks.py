"""The analysis notebooks run top to bottom on the public API (executed with nbclient)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_without_error(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert errors == []
    figures = sum(
        1
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    )
    texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    assert texts, "every notebook explains what it shows"
    assert figures + sum(1 for c in nb.cells if c.cell_type == "code") > 0
