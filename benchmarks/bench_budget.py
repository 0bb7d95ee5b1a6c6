"""The detailed engine's budget against real runs (prints figures; see ddlsim/engine/budget.py).

    python benchmarks/bench_budget.py [--quick]

For each configuration: the estimated work (worker steps, loop events, executor steps, flows,
the weighted events the budget counts) against the work counted during the run
(``SimResult.work``), the estimated memory against the peak traced memory (tracemalloc), the
wall and CPU time of the run (without tracemalloc) and the CPU time per weighted event; first
ResNet-50 from 8 to 4,096 GPUs, then other methods; then how long the refusal of ``--gpus
1000000`` takes.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ddlsim

from ddlsim import api
from ddlsim.engine import budget
from ddlsim.engine.plan import plan_from_dag

SIZES = [("resnet50", n, {}) for n in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)]
CONFIGS = [
    ("alexnet", 1024, {}),
    ("alexnet", 2048, {"comm": "ps"}),
    ("inception3", 64, {"comm": "distributed-replicated"}),
    ("resnet50", 256, {"hierarchical": True}),
    ("resnet50", 1024, {"comm": "byteps"}),
    ("resnet50", 256, {"schedule": "bytescheduler"}),
    ("vgg16", 512, {"algorithm": "ring"}),
    ("googlenet", 128, {"comm": "horovod-mpi", "horovod_version": "0.11", "data": "real"}),
]


def _measure(model: str, gpus: int, kwargs: dict, table: bool = False) -> str:
    setup = api.prepare(api.job(model, gpus, **kwargs))
    plan = plan_from_dag(setup.dag, with_comm=True)
    est = budget.estimate_detailed(
        plan, setup.comm, gpus, 5, 1, limit=float("inf"), horovod=setup.strategy.is_horovod
    )
    options = api.sim_options(api.SimulationConfig(engine="detailed"))
    run = api.prepare(api.job(model, gpus, **kwargs))
    t0, c0 = time.perf_counter(), time.process_time()
    result = run.simulate(options)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tracemalloc.start()
    try:
        api.prepare(api.job(model, gpus, **kwargs)).simulate(options)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    got = result.work
    assert got is not None
    if table:  # a row of docs/design.md's table
        return (
            f"| {gpus:,} | {est.events:.3g} | {got.events:.3g} | {got.worker_steps:.0f} | "
            f"{got.loop_events:.0f} | {got.steps:.3g} | {got.flows:.3g} | {cpu:.2f} |"
        )
    label = f"{model} {gpus} {kwargs.get('comm', 'horovod-nccl')}"
    label += "".join(f" {k}={v}" for k, v in kwargs.items() if k != "comm")
    return (
        f"{label:44s} events est/counted {est.events:8.3g}/{got.events:8.3g} = "
        f"{est.events / got.events:4.2f} (worker steps {est.worker_steps:.0f}/"
        f"{got.worker_steps:.0f}, loop {est.loop_events:.0f}/{got.loop_events:.0f}, executor "
        f"steps {est.steps:.3g}/{got.steps:.3g}, flows {est.flows:.3g}/{got.flows:.3g}); "
        f"memory est/peak {est.memory_bytes / 1e6:6.1f}/{peak / 1e6:6.1f} MB; "
        f"{wall:5.2f} s wall, {cpu:5.2f} s CPU = {1e9 * cpu / got.events:4.1f} ns per event"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="ResNet-50 up to 256 GPUs only")
    ap.add_argument("--table", action="store_true", help="ResNet-50 as docs/design.md's table")
    args = ap.parse_args(argv)
    if args.table:
        for model, gpus, kwargs in SIZES:
            print(_measure(model, gpus, kwargs, table=True), flush=True)
        return 0
    configs = SIZES[:6] if args.quick else SIZES + CONFIGS
    for model, gpus, kwargs in configs:
        print(_measure(model, gpus, kwargs), flush=True)
    t0 = time.perf_counter()
    try:
        api.predict("resnet50", 1_000_000, engine="detailed")
    except Exception as exc:  # the refusal is the figure
        print(
            f"--gpus 1000000 --engine detailed refused in {time.perf_counter() - t0:.2f} s: {exc}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
