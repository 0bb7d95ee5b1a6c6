"""Speed figures of ddlsim (prints them; targets are in the README, not in tests).

    python benchmarks/bench_predict.py [--model resnet50] [--repeat 5]

1. whole-process wall time of ``ddlsim predict --model M --gpus N`` at 8 and 4096 GPUs
   (target <= 1.0 s, the same at both);
2. fast-engine ``simulate`` time at 8 / 256 / 1024 / 4096 GPUs (target <= 20 ms at 256, flat
   in GPUs);
3. detailed-engine time per simulated iteration at 8 / 256 / 1024 / 4096 GPUs (target <= 10 s
   at 256; 4096 only with ``--detailed-4096``, minutes).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from ddlsim.api import job, prepare
from ddlsim.engine.plan import plan_from_dag
from ddlsim.engine.simulate import SimOptions


def _median_time_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--detailed-4096", action="store_true", help="also time 4096 GPUs detailed")
    args = ap.parse_args(argv)
    for gpus in (8, 4096):
        cmd = [sys.executable, "-m", "ddlsim", "predict", "--model", args.model]
        cmd += ["--gpus", str(gpus)]
        wall = _median_time_s(
            lambda cmd=cmd: subprocess.run(cmd, check=True, capture_output=True), args.repeat
        )
        print(
            f"{' '.join(['ddlsim', *cmd[3:]])}: whole process {wall:.3f} s "
            f"(median of {args.repeat})"
        )

    for gpus in (8, 256, 1024, 4096):
        setup = prepare(job(args.model, gpus))
        t = _median_time_s(setup.simulate, args.repeat)
        n_ops = len(plan_from_dag(setup.dag).ops)
        print(
            f"fast engine, {gpus:5d} GPUs: simulate {1e3 * t:7.2f} ms ({n_ops} comm ops/iteration)"
        )
    for gpus in (8, 256, 1024, *((4096,) if args.detailed_4096 else ())):
        setup = prepare(job(args.model, gpus))
        opts = SimOptions(engine="detailed", warmup_iterations=0, measured_iterations=2)
        t0 = time.perf_counter()
        setup.simulate(opts)
        per_iter = (time.perf_counter() - t0) / 2
        print(f"detailed engine, {gpus:4d} GPUs: {per_iter:.3f} s per iteration")
    return 0


if __name__ == "__main__":
    sys.exit(main())
