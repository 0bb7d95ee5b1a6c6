"""Speed of the failure model (prints it; the targets are in the README, not in tests).

    python benchmarks/bench_resilience.py [--repeat 7] [--draws 10000]

1. the closed form, ``ddlsim.resilience.from_prediction`` on a 4,096-GPU prediction (what
   ``predict_job`` adds to every prediction by default; target < 1 ms), restart and elastic;
2. the Monte Carlo of ``--draws`` runs of a 4,096-GPU (512-node) job (target < 5 s): the
   ResNet-50 prediction's own run (90 s), and 7- and 30-day runs at the default node MTBF and
   at Kokolis et al.'s 1,024 h (about 90 and 380 failures per run), restart and elastic.

Each figure is the median over ``--repeat`` runs, with the spread (min-max).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from ddlsim.api import predict
from ddlsim.resilience import ResilienceConfig, analyse, from_prediction, job_from_prediction
from ddlsim.resilience.config import HOUR_S, KOKOLIS_NODE_MTBF_S


def _times_s(fn: Callable[[], object], repeat: int, inner: int = 1) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return out


def _line(label: str, times: list[float], unit: float, unit_name: str) -> str:
    med = statistics.median(times) / unit
    return (
        f"{label}: median {med:.3f} {unit_name} "
        f"(min {min(times) / unit:.3f}, max {max(times) / unit:.3f}; {len(times)} runs)"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--draws", type=int, default=10_000)
    args = ap.parse_args(argv)
    pred = predict("resnet50", 4096, gpu="v100")
    print(
        f"resnet50 on 4,096 v100 (512 nodes): failure-free time-to-train "
        f"{pred.time_to_train_s:.0f} s"
    )
    for recovery in ("restart", "elastic"):
        cfg = ResilienceConfig(recovery=recovery)
        times = _times_s(lambda cfg=cfg: from_prediction(pred, cfg), args.repeat, inner=200)
        print(_line(f"closed form, {recovery:7s}", times, 1e-3, "ms"))

    job = job_from_prediction(pred)
    week = replace(job, work_s=7 * 24 * HOUR_S)
    month = replace(job, work_s=30 * 24 * HOUR_S)
    cases = (
        ("prediction's run, default MTBF", job, None),
        ("7-day run, default MTBF", week, None),
        ("7-day run, node MTBF 1,024 h", week, KOKOLIS_NODE_MTBF_S),
        ("30-day run, node MTBF 1,024 h", month, KOKOLIS_NODE_MTBF_S),
    )
    for label, j, mtbf in cases:
        for recovery in ("restart", "elastic"):
            kw = {} if mtbf is None else {"node_mtbf_s": mtbf}
            cfg = ResilienceConfig(recovery=recovery, mc_draws=args.draws, **kw)
            result = analyse(j, cfg)
            times = _times_s(lambda j=j, cfg=cfg: analyse(j, cfg), args.repeat)
            mc = result.monte_carlo or {}
            print(
                _line(f"Monte Carlo {args.draws:,} draws, {label}, {recovery}", times, 1e-3, "ms")
                + f"; {mc.get('failures_mean', 0):.1f} failures/run, mean "
                f"{mc.get('mean_s', 0) / 3600:.2f} h vs closed form "
                f"{result.expected.time_s / 3600:.2f} h"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
