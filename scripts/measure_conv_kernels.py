"""Measure convolution kernel times on the local GPU with PyTorch, in ``ddlsim kernels``' format.

Reads the shapes of a kernel file (default: the DeepBench shapes in
``traces/measured/kernels/deepbench_conv_fp32.csv``; each distinct shape once) and times, for
each, cuDNN's forward, data-gradient and weight-gradient convolution on the device PyTorch
sees, the way DeepBench timed them: NCHW, warm, the fastest algorithm (``cudnn.benchmark``),
each pass alone. On a GPU each pass is captured ``--reps`` times in a CUDA graph and the graph's
replays are timed with CUDA events (median of ``--trials``), so launch gaps are not counted; on
the CPU (for tests) a wall clock times the calls.

One CSV per arithmetic mode (``--math``, repeatable):

* ``fp32``: fp32 storage, TF32 off (true fp32 arithmetic, as the DeepBench sheets);
* ``tf32``: fp32 storage, cuDNN allowed TF32 tensor cores (PyTorch's and TensorFlow's default
  for convolutions on Ampere and later, so what an "fp32" training step really runs);
* ``fp16``: fp16 storage and arithmetic (tensor cores; what ``amp`` runs).

    python scripts/measure_conv_kernels.py --out-dir traces/measured/kernels \
        --prefix h100_torch --math fp32 --math tf32 --math fp16

then ``ddlsim kernels traces/measured/kernels/h100_torch_fp32.csv``. The ``gpu`` column is the
catalog id of the device (``--gpu-id`` to override); the device's own name, PyTorch, CUDA and
cuDNN versions go to a ``.json`` beside each CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

from ddlsim.compute.kernel_check import MATHS, SHAPE_COLUMNS, TIME_COLUMNS
from ddlsim.compute.kernels import PASSES

DEFAULT_SHAPES = Path(__file__).resolve().parent.parent / (
    "traces/measured/kernels/deepbench_conv_fp32.csv"
)


def read_shapes(path: Path, limit: int | None = None) -> list[dict[str, int]]:
    """The distinct convolution shapes of a kernel CSV, in file order."""
    seen: dict[tuple[int, ...], dict[str, int]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                shape = {c: int(row[c]) for c in SHAPE_COLUMNS}
            except (KeyError, TypeError, ValueError):
                continue
            seen.setdefault(tuple(shape.values()), shape)
    shapes = list(seen.values())
    return shapes[:limit] if limit else shapes


def conv_tensors(torch, shape: dict[str, int], dtype, device) -> tuple:
    """Random input ``x``, filters ``w`` and output gradient ``gy`` of a convolution shape."""
    n, c, h, w = shape["batch"], shape["in_c"], shape["in_h"], shape["in_w"]
    k, r, s = shape["out_k"], shape["filter_h"], shape["filter_w"]
    x = torch.randn((n, c, h, w), device=device, dtype=dtype)
    wt = torch.randn((k, c, r, s), device=device, dtype=dtype) * (1.0 / (c * r * s) ** 0.5)
    y = torch.nn.functional.conv2d(x, wt, None, *_geometry(shape))
    return x, wt, torch.randn_like(y)


def _geometry(shape: dict[str, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    return (shape["stride_h"], shape["stride_w"]), (shape["pad_h"], shape["pad_w"])


def pass_fns(torch, shape: dict[str, int], x, wt, gy) -> dict:
    """The three passes of ``shape`` on these tensors, each a zero-argument callable: the
    forward convolution and cuDNN's data and weight gradients (``convolution_backward``)."""
    stride, pad = _geometry(shape)
    bwd = torch.ops.aten.convolution_backward

    def fwd():
        return torch.nn.functional.conv2d(x, wt, None, stride, pad)

    def bwd_data():
        return bwd(gy, x, wt, None, stride, pad, (1, 1), False, (0, 0), 1, (True, False, False))

    def bwd_filter():
        return bwd(gy, x, wt, None, stride, pad, (1, 1), False, (0, 0), 1, (False, True, False))

    return {"fwd": fwd, "bwd_data": bwd_data, "bwd_filter": bwd_filter}


def time_gpu_ms(torch, fn, reps: int, trials: int) -> float:
    """Median over ``trials`` of one CUDA-graph replay of ``reps`` calls, per call (ms)."""
    for _ in range(3):  # cudnn.benchmark picks the algorithm on the first call
        fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / reps)
    del graph
    return statistics.median(out)


def time_cpu_ms(fn, reps: int, trials: int) -> float:
    """Median over ``trials`` of ``reps`` calls' wall time, per call (ms)."""
    fn()
    out = []
    for _ in range(trials):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t) * 1e3 / reps)
    return statistics.median(out)


def measure(
    torch, shapes, math: str, device, reps: int, trials: int, log=sys.stderr
) -> list[dict[str, object]]:
    """One row per shape: the shape and ``{pass}_ms`` (empty where the pass failed)."""
    gpu = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    dtype = torch.float16 if math == "fp16" else torch.float32
    rows = []
    for i, shape in enumerate(shapes):
        row: dict[str, object] = dict(shape)
        try:
            fns = pass_fns(torch, shape, *conv_tensors(torch, shape, dtype, device))
        except RuntimeError as exc:  # out of memory, or a shape cuDNN refuses
            print(f"shape {i}: {exc}".splitlines()[0], file=log)
            fns = {}
        for pass_ in PASSES:
            try:
                fn = fns[pass_]
                t = time_gpu_ms(torch, fn, reps, trials) if gpu else time_cpu_ms(fn, reps, trials)
                row[f"{pass_}_ms"] = f"{t:.5g}"
            except (KeyError, RuntimeError) as exc:
                print(f"shape {i} {pass_}: {exc}".splitlines()[0], file=log)
                row[f"{pass_}_ms"] = ""
        rows.append(row)
        if gpu:
            torch.cuda.empty_cache()
    return rows


def device_info(torch, device) -> dict[str, object]:
    """What was measured on: the device as PyTorch names it, and the software versions."""
    info: dict[str, object] = {
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(device_name=p.name, sm_count=p.multi_processor_count,
                    compute_capability=f"{p.major}.{p.minor}")  # fmt: skip
    else:
        info["device_name"] = "cpu"
    return info


def main(argv: list[str] | None = None) -> int:
    """Measure the shapes in every ``--math`` mode; one CSV and one JSON per mode."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=Path, default=DEFAULT_SHAPES, help="kernel CSV of shapes")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--prefix", default=None, help="file name prefix (default: <gpu-id>_torch)")
    p.add_argument("--math", action="append", choices=MATHS, default=[])
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--gpu-id", default=None, help="catalog GPU id for the gpu column")
    p.add_argument("--reps", type=int, default=20, help="calls per timed graph replay")
    p.add_argument("--trials", type=int, default=5, help="timed replays (median)")
    p.add_argument("--limit", type=int, default=None, help="only the first N shapes")
    args = p.parse_args(argv)
    import torch

    from ddlsim.tools.calibrate.devices import catalog_match, slug

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        version = torch.__version__
        print(f"error: no CUDA device; PyTorch {version} sees the CPU only", file=sys.stderr)
        return 2
    info = device_info(torch, device)
    name = str(info["device_name"])
    gpu_id = args.gpu_id or catalog_match(name) or slug(name)
    prefix = args.prefix or f"{gpu_id}_torch"
    shapes = read_shapes(args.shapes, args.limit)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for math in args.math or ["fp32"]:
        t0 = time.perf_counter()
        rows = measure(torch, shapes, math, device, args.reps, args.trials)
        path = args.out_dir / f"{prefix}_{math}.csv"
        columns = ["gpu", "math", *SHAPE_COLUMNS, *TIME_COLUMNS]
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=columns)
            out.writeheader()
            for row in rows:
                out.writerow({"gpu": gpu_id, "math": math, **row})
        tmp.replace(path)
        if device.type == "cuda":
            timing = (
                f"CUDA graph of {args.reps} calls, CUDA events, median of {args.trials} replays"
            )
        else:
            timing = f"wall clock, median of {args.trials} loops of {args.reps} calls"
        meta = {
            **info,
            "gpu_id": gpu_id,
            "math": math,
            "layout": "NCHW",
            "algorithm": "cudnn.benchmark (fastest)",
            "shapes": str(args.shapes.name),
            "timing": timing,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        path.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"{path}: {len(rows)} shapes, {meta['seconds']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
