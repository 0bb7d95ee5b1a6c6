"""ddlsim's four speed figures, each the median of ``--repeat`` runs with its spread (min-max).

    python benchmarks/bench_predict.py [--repeat 5] [--only cli,fast,detailed,sweep,transformer]

1. ``ddlsim predict --model resnet50 --gpus 4096`` (fast engine), the whole process: wall and
   CPU time (user + system), and ``import ddlsim.api`` alone (goal: <= 0.25 s);
2. the fast engine in process, one configuration: ``Setup.simulate()`` of ResNet-50 on 8 and
   4,096 GPUs, and ``ddlsim.predict`` whole (prepare, simulate, the 1-GPU baseline, the
   inputs; goal: simulate <= 5 ms);
3. the detailed engine, ResNet-50 on 256 / 1,024 / 4,096 GPUs, a whole run (2 warm-up + 3
   measured iterations), and the growth exponent between sizes (goal: <= 1 s / <= 5 s at
   1,024 / 4,096, growth <= N^1.1);
4. ``ddlsim sweep`` of 1,000 configurations (5 models x 10 sizes 8-4,096 x 5 networks x 4
   methods), the whole process, ``--serial`` and on the local Dask cluster (goal: <= 10 s
   serial, and faster on Dask than serial on 2 cores).

Timings are of this machine as it is: each figure prints the load average (1 min) before and
after it, since other processes sharing the cores stretch wall times (CPU times much less).
Before timing, the package's bytecode is compiled (as ``pip install`` does), so that the
whole-process figures do not include compiling ddlsim's sources. No figure is asserted: goals
are in the README.

Every figure is also given in **t0**, the median wall time of ``python -c "import numpy"``
measured just before it on the same machine (the interpreter, its site packages and numpy:
what every run of a numpy program pays), so that a figure holds from one machine, or one load,
to another. Goals (issue 29): predict whole process <= 1.5 t0, the 1,000-configuration serial
sweep <= 50 t0, the detailed engine at 4,096 GPUs <= 10 t0; a transformer predict costs no more
than a ResNet-50 predict of the same GPU count (figure 5).
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's ddlsim, in process as in the timed processes
SWEEP_GRID = [
    *("--model", "resnet50", "alexnet", "vgg16", "inception3", "googlenet"),
    *("--gpus", "8", "16", "32", "64", "128", "256", "512", "1024", "2048", "4096"),
    *("--inter-node", "10gbe", "25gbe", "100gbe", "ib-edr", "ib-hdr"),
    *("--comm", "horovod-nccl", "horovod-mpi", "ps", "byteps"),
]


def _spread(values: list[float], unit: str, scale: float = 1.0) -> str:
    v = sorted(x * scale for x in values)
    return f"{statistics.median(v):.3g} {unit} ({v[0]:.3g}-{v[-1]:.3g}, n={len(v)})"


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _child_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_process(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeat`` runs of ``cmd`` (in the repository root)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    walls, cpus = [], []
    for _ in range(repeat):
        cpu0, t0 = _child_cpu_s(), time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
        walls.append(time.perf_counter() - t0)
        cpus.append(_child_cpu_s() - cpu0)
    return walls, cpus


def _times_s(fn: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (this process) seconds of ``repeat`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return walls, cpus


def numpy_t0(repeat: int) -> float:
    """t0: the median wall seconds of ``python -c "import numpy"`` (module docstring)."""
    walls, _ = _run_process([sys.executable, "-c", "import numpy"], max(repeat, 5))
    return statistics.median(walls)


def _in_t0(values: list[float], t0: float) -> str:
    return f"= {statistics.median(values) / t0:.2f} t0 (t0 {t0 * 1e3:.0f} ms)"


def cli_figure(repeat: int) -> None:
    """Figure 1: the whole ``ddlsim predict`` process."""
    print(f"1. ddlsim predict --model resnet50 --gpus 4096, whole process [{_load()}]")
    cmd = [sys.executable, "-m", "ddlsim", "predict", "--model", "resnet50", "--gpus", "4096"]
    t0 = numpy_t0(repeat)
    walls, cpus = _run_process(cmd, repeat)
    print(f"   wall {_spread(walls, 's')} {_in_t0(walls, t0)}, CPU {_spread(cpus, 's')}")
    walls, cpus = _run_process([sys.executable, "-c", "import ddlsim.api"], repeat)
    print(f"   import ddlsim.api: wall {_spread(walls, 's')}, CPU {_spread(cpus, 's')}")
    walls, cpus = _run_process([sys.executable, "-c", "pass"], repeat)
    print(f"   python -c pass (the interpreter alone): wall {_spread(walls, 's')} [{_load()}]")


def fast_figure(repeat: int) -> None:
    """Figure 2: the fast engine in process."""
    from ddlsim.api import job, predict, prepare

    print(f"2. fast engine in process, resnet50 [{_load()}]")
    for gpus in (8, 4096):
        setup = prepare(job("resnet50", gpus))
        setup.simulate()  # first-use caches (the comm model's closed form)
        t, t_cpu = _times_s(setup.simulate, repeat)
        p, p_cpu = _times_s(lambda gpus=gpus: predict("resnet50", gpus), repeat)
        print(
            f"   {gpus:5d} GPUs: Setup.simulate wall {_spread(t, 'ms', 1e3)}, CPU "
            f"{_spread(t_cpu, 'ms', 1e3)}; ddlsim.predict whole wall {_spread(p, 'ms', 1e3)}, "
            f"CPU {_spread(p_cpu, 'ms', 1e3)}"
        )
    print(f"   [{_load()}]")


def detailed_figure(repeat: int, sizes: tuple[int, ...]) -> None:
    """Figure 3: the detailed engine's whole run, and its growth with the GPU count."""
    from ddlsim.api import job, prepare
    from ddlsim.engine.simulate import SimOptions

    print(f"3. detailed engine, resnet50, 2 warm-up + 3 measured iterations [{_load()}]")
    medians = {}
    t0 = numpy_t0(repeat)
    for gpus in sizes:
        setup = prepare(job("resnet50", gpus))
        opts = SimOptions(engine="detailed")
        t, t_cpu = _times_s(lambda setup=setup, opts=opts: setup.simulate(opts), repeat)
        medians[gpus] = (statistics.median(t), statistics.median(t_cpu))
        print(
            f"   {gpus:5d} GPUs: wall {_spread(t, 's')} {_in_t0(t, t0)}, CPU "
            f"{_spread(t_cpu, 's')} [{_load()}]"
        )
    for i, what in enumerate(("wall", "CPU")):
        growth = [
            f"{a}->{b}: N^{math.log(medians[b][i] / medians[a][i]) / math.log(b / a):.2f}"
            for a, b in itertools.pairwise(sizes)
        ]
        print(f"   growth ({what}) {', '.join(growth)}")


def sweep_figure(repeat: int) -> None:
    """Figure 4: ``ddlsim sweep`` of 1,000 configurations, serial and on Dask."""
    print(f"4. ddlsim sweep, 1,000 configurations, whole process [{_load()}]")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "sweep.csv")
        base = [sys.executable, "-m", "ddlsim", "sweep", *SWEEP_GRID, "-o", out, "--quiet"]
        for label, extra in (("--serial", ["--serial"]), ("local Dask, 2 workers", [])):
            t0 = numpy_t0(repeat)
            walls, cpus = _run_process(base + extra, repeat)
            print(
                f"   {label}: wall {_spread(walls, 's')} {_in_t0(walls, t0)}, CPU (this "
                f"process and its children) {_spread(cpus, 's')} [{_load()}]"
            )
            rows = Path(out).read_text(encoding="utf-8").count("\n") - 1
            print(f"   ({rows} rows)")


def transformer_figure(repeat: int) -> None:
    """Figure 5: ``ddlsim.predict`` in process, a transformer beside ResNet-50, same GPUs."""
    from ddlsim.api import predict

    print(f"5. ddlsim.predict in process: transformer vs resnet50, 4,096 GPUs [{_load()}]")
    jobs = {
        "resnet50": {"model": "resnet50"},
        "bert-large (amp, s128, b16, ddp)": dict(
            model="bert-large", gpu="v100-sxm2", precision="amp", seq_len=128, batch=16,
            comm="ddp",
        ),
    }  # fmt: skip
    for label, kwargs in jobs.items():
        predict(gpus=4096, **kwargs)  # first use: the zoo, the calibration or kernel model
        walls, _ = _times_s(lambda kwargs=kwargs: predict(gpus=4096, **kwargs), repeat)
        print(f"   {label}: {_spread(walls, 'ms', 1e3)}")


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--only", default="cli,fast,detailed,sweep,transformer", help="figures to measure"
    )
    ap.add_argument(
        "--detailed-sizes", default="256,1024,4096", help="GPU counts of figure 3 (comma list)"
    )
    args = ap.parse_args(argv)
    compileall.compile_dir(ROOT / "ddlsim", quiet=1)
    only = set(args.only.split(","))
    print(f"ddlsim speed figures, median (min-max) of {args.repeat} runs, {os.cpu_count()} CPUs")
    if "cli" in only:
        cli_figure(args.repeat)
    if "fast" in only:
        fast_figure(args.repeat)
    if "detailed" in only:
        sizes = tuple(int(x) for x in args.detailed_sizes.split(","))
        detailed_figure(args.repeat, sizes)
    if "sweep" in only:
        sweep_figure(args.repeat)
    if "transformer" in only:
        transformer_figure(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
