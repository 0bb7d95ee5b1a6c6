"""Measure PyTorch's host cost per eager op on this machine's CPU: dispatch, autograd's
recording, and the autograd engine's work per backward node.

    python3 scripts/measure_dispatch.py [--calls 20000] [--repeats 7]

A measurement script, not a dependency of ddlsim (torch CPU wheel: ``pip install torch
--index-url https://download.pytorch.org/whl/cpu``). Tensors are tiny (8 x 8 fp32) so that the
CPU kernel itself is a small part of each call; the numbers are host seconds per op, the best of
``--repeats`` loops of ``--calls`` calls:

- ``fwd_nograd``: ``add`` / ``linear`` / ``layer_norm`` under ``torch.no_grad()``
  (Python call, the dispatcher, the CPU kernel);
- ``fwd_grad``: the same with inputs that require grad (autograd also records a node);
- ``bwd_node``: ``autograd.grad`` through a chain of ``--chain`` scalings, per node (the engine's
  per-node work and the node's backward op, dispatched from C++: no Python per node).

docs/design.md ("Eager dispatch") quotes the results; a GPU run adds the CUDA launch to each op
(``cudaLaunchKernel``, a few microseconds) instead of the CPU kernel.
"""

from __future__ import annotations

import argparse
import json
import platform
import time


def _best(fn, calls: int, repeats: int) -> float:
    """Seconds per call of ``fn``: the best of ``repeats`` loops of ``calls``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def measure(calls: int, repeats: int, chain: int) -> dict[str, float]:
    """Host seconds per op: forward without and with autograd, backward per node."""
    import torch
    from torch.nn import functional

    torch.set_num_threads(1)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    w = torch.randn(8, 8)
    ag, bg, wg = (t.clone().requires_grad_() for t in (a, b, w))
    shape = (8,)
    out: dict[str, float] = {}
    ops = {
        "add": lambda x, y, _w: torch.add(x, y),
        "linear": lambda x, _y, w_: functional.linear(x, w_),
        "layer_norm": lambda x, _y, _w: functional.layer_norm(x, shape),
    }
    for name, op in ops.items():
        with torch.no_grad():
            out[f"fwd_nograd_{name}_s"] = _best(lambda op=op: op(a, b, w), calls, repeats)
        out[f"fwd_grad_{name}_s"] = _best(lambda op=op: op(ag, bg, wg), calls, repeats)

    x = ag
    for _ in range(chain):
        x = x * 1.0001  # MulBackward0: one op each way
    y = x.sum()
    loops = max(1, calls // chain)
    out["bwd_node_s"] = _best(lambda: torch.autograd.grad(y, ag, retain_graph=True), loops, repeats)
    out["bwd_node_s"] /= chain
    return out


def main() -> None:
    """Print the measurement as JSON (microseconds)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--chain", type=int, default=100)
    args = p.parse_args()
    import torch

    result = {
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        **{k: round(v * 1e6, 2) for k, v in measure(args.calls, args.repeats, args.chain).items()},
    }
    print(json.dumps(result, indent=1).replace('_s"', '_us"'))


if __name__ == "__main__":
    main()
