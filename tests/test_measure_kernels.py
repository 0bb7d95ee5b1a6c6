"""scripts/measure_conv_kernels.py: the three passes are the right gradients, and its files are
what ``ddlsim kernels`` reads (run on the CPU here; on a GPU it times CUDA graph replays)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ddlsim.compute.kernel_check import read_kernel_csv

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="needs the torch extra (PyTorch)"
)
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "measure_conv_kernels.py"


def _script():
    spec = importlib.util.spec_from_file_location("measure_conv_kernels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHAPE = {
    "in_w": 9, "in_h": 7, "in_c": 3, "batch": 2, "out_k": 4,
    "filter_h": 3, "filter_w": 3, "pad_h": 1, "pad_w": 0, "stride_h": 2, "stride_w": 1,
}  # fmt: skip


def test_the_passes_are_the_convolution_and_its_two_gradients() -> None:
    """fwd = conv2d; bwd_data and bwd_filter = autograd's input and weight gradients."""
    import torch

    script = _script()
    x, w, gy = script.conv_tensors(torch, SHAPE, torch.float64, torch.device("cpu"))
    fns = script.pass_fns(torch, SHAPE, x, w, gy)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = torch.nn.functional.conv2d(xr, wr, None, (2, 1), (1, 0))
    assert y.shape == gy.shape == (2, 4, 4, 7)  # (7 + 2 - 3) / 2 + 1, 9 - 3 + 1
    y.backward(gy)
    assert torch.allclose(fns["fwd"](), y.detach())
    assert torch.allclose(fns["bwd_data"]()[0], xr.grad)
    assert torch.allclose(fns["bwd_filter"]()[1], wr.grad)


def test_writes_a_kernel_file_per_mode(tmp_path: Path) -> None:
    code = _script().main(
        ["--device", "cpu", "--out-dir", str(tmp_path), "--gpu-id", "v100", "--limit", "2",
         "--reps", "1", "--trials", "1", "--math", "fp32", "--math", "fp16"]
    )  # fmt: skip
    assert code == 0
    for math in ("fp32", "fp16"):  # a V100 runs both (fp16 on tensor cores)
        rows, skipped, n = read_kernel_csv(tmp_path / f"v100_torch_{math}.csv")
        assert (n, len(rows), skipped) == (2, 2, [])
        first = rows[0]
        assert (first.shape.in_w, first.shape.in_h, first.shape.batch) == (700, 161, 4)
        assert all(t > 0 for r in rows for t in r.measured_ms.values())
        meta = json.loads((tmp_path / f"v100_torch_{math}.json").read_text())
        assert (meta["math"], meta["gpu_id"], meta["device_name"]) == (math, "v100", "cpu")
    assert not list(tmp_path.glob("*.tmp"))


def test_no_cuda_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert _script().main(["--out-dir", str(tmp_path), "--limit", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no CUDA device") and "\n" not in err
    assert not list(tmp_path.iterdir())
