"""Measure this machine's loopback allreduce: torch.distributed with the Gloo backend on the CPU.

Two processes on this host, each pinned to its own core with one PyTorch thread, run
``dist.all_reduce`` (SUM) of float32 tensors from 1 KiB to 256 MiB. Per size: 3 warm-up calls,
then 5 repetitions of back-to-back calls (as nccl-tests times them), each repetition's mean per
call recorded; ``ddlsim calibrate network`` takes the median. PyTorch's ProcessGroupGloo and
Horovod's Gloo operations run the same algorithm (``gloo::allreduce``, a ring of TCP pairs over
the loopback interface, the sum on the calling core), which is what ddlsim's ``horovod-gloo``
model costs (:mod:`ddlsim.comm.gloo`).

Writes the sweep JSON that ``ddlsim calibrate network`` reads (default
``traces/gloo/allreduce_torch.json``) with the machine, the load and the versions::

    python scripts/measure_gloo_allreduce.py [--out FILE] [--max-mib 256]
    ddlsim calibrate network traces/gloo/allreduce_torch.json --gpu epyc-zen4-core \\
        --intra-node loopback -o loopback.json

(``epyc-zen4-core`` is the catalog's CPU worker: the host the Gloo model's per-core summation
rate is taken from; the JSON records the CPU the sweep actually ran on.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 3
REPS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _calls(nbytes: int) -> int:
    """Calls per repetition: about 64 MiB of traffic, between 2 and 200 calls."""
    return max(2, min(200, (64 << 20) // nbytes))


def _worker(rank: int, world: int, port: int, sizes: list[int], out: str) -> None:
    import torch
    import torch.distributed as dist

    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[rank % len(cores)]})
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    results = []
    for nbytes in sizes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        for _ in range(WARMUP):
            dist.all_reduce(t)
        calls, reps = _calls(nbytes), []
        for _ in range(REPS):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(t)
            reps.append((time.perf_counter() - start) / calls)
        results.append({"nbytes": nbytes, "calls_per_repetition": calls, "allreduce_s": reps})
        if rank == 0:
            print(f"{nbytes:>11d} B  median {statistics.median(reps) * 1e6:10.1f} us", flush=True)
    if rank == 0:
        Path(out).write_text(json.dumps(_document(world, results), indent=1) + "\n")
    dist.destroy_process_group()


def _document(world: int, results: list[dict]) -> dict:
    import torch

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "ranks": world,
        "method": "torch.distributed all_reduce (SUM) of float32 tensors, Gloo backend "
        "(gloo::allreduce ring over TCP loopback), ranks pinned to the cores, 1 thread each",
        "hosts": ["localhost"] * world,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average_before_after": [_LOAD_BEFORE, list(os.getloadavg())],
        "timing": f"{WARMUP} warm-up calls, then {REPS} repetitions of back-to-back calls; "
        "allreduce_s = mean per call of each repetition",
        "command": "python scripts/measure_gloo_allreduce.py " + " ".join(sys.argv[1:]),
        "sizes": results,
    }


_LOAD_BEFORE = list(os.getloadavg())


def main() -> None:
    """Run the sweep and write the JSON."""
    import torch.multiprocessing as mp

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "traces/gloo/allreduce_torch.json"))
    parser.add_argument("--max-mib", type=int, default=256)
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    sizes = [1 << k for k in range(10, 21 + (args.max_mib.bit_length() - 1))]
    mp.spawn(_worker, args=(2, _free_port(), sizes, args.out), nprocs=2, join=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
