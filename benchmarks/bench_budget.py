"""The detailed engine's budget against real runs (prints figures; see ddlsim/engine/budget.py).

    python benchmarks/bench_budget.py [--quick]

For each configuration: the estimated SimPy events, executor steps, flow transfers, weighted
events and memory, against the SimPy events counted during the run, the peak traced memory
(tracemalloc) and the wall time; then how long the refusal of ``--gpus 1000000`` takes.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import simpy

from ddlsim import api
from ddlsim.engine import budget
from ddlsim.engine.plan import plan_from_dag

CONFIGS = [
    ("resnet50", 64, {}),
    ("resnet50", 256, {}),
    ("alexnet", 1024, {}),
    ("alexnet", 2048, {"comm": "ps"}),
    ("inception3", 64, {"comm": "distributed-replicated"}),
    ("resnet50", 256, {"hierarchical": True}),
    ("resnet50", 1024, {"comm": "byteps"}),
    ("resnet50", 4096, {}),
]


def _measure(model: str, gpus: int, kwargs: dict) -> str:
    setup = api.prepare(api.job(model, gpus, **kwargs))
    plan = plan_from_dag(setup.dag, with_comm=True)
    est = budget.estimate_detailed(plan, setup.comm, gpus, 5, 1, limit=float("inf"))
    run = api.prepare(api.job(model, gpus, **kwargs))
    count = [0]
    original = simpy.Environment.schedule

    def schedule(self, *args, **kw):
        count[0] += 1
        return original(self, *args, **kw)

    simpy.Environment.schedule = schedule
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        run.simulate(api.sim_options(api.SimulationConfig(engine="detailed")))
    finally:
        wall = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        simpy.Environment.schedule = original
    label = f"{model} {gpus} {kwargs.get('comm', 'horovod-nccl')}"
    label += " hierarchical" if kwargs.get("hierarchical") else ""
    return (
        f"{label:38s} events {est.events:9.3g} (SimPy est/counted {est.sim_events:8.3g}/"
        f"{count[0]:8.3g} = {est.sim_events / count[0]:4.2f}, steps {est.steps:8.3g}, flows "
        f"{est.flows:8.3g}); memory est/peak {est.memory_bytes / 1e6:7.1f}/{peak / 1e6:7.1f} MB;"
        f" {wall:6.1f} s (under tracemalloc)"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the three smallest configurations")
    args = ap.parse_args(argv)
    for model, gpus, kwargs in CONFIGS[:3] if args.quick else CONFIGS:
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
