"""The simulation knobs: how ddlsim simulates it (rows of :mod:`ddlsim.config.knobs`)."""

from __future__ import annotations

from ddlsim.comm import NCCL_METHODS
from ddlsim.config.checks import Range, Vocabulary
from ddlsim.config.knob import (
    DETAILED,
    MAX_JITTER_SIGMA,
    Applies,
    Knob,
    check_stragglers,
    comm_in,
    fails,
)
from ddlsim.engine.budget import DEFAULT_MAX_EVENTS, check_max_events
from ddlsim.engine.simulate import ENGINES
from ddlsim.engine.sync import (
    DEFAULT_HOST_CONTENTION,
    DEFAULT_RANK_SIGMA,
    check_host_contention,
    check_rank_sigma,
)
from ddlsim.resilience import config as rc

#: the simulation group's knobs, in field order
ROWS: tuple[Knob, ...] = (
    Knob(
        "engine",
        "simulation",
        "fast",
        "str",
        "--engine",
        "default: fast",
        check=Vocabulary("engine", lambda: ENGINES),
        choices=lambda: ENGINES,
    ),
    Knob(
        "stragglers",
        "simulation",
        None,
        "Mapping[int, float] | None",
        "--stragglers",
        "detailed engine: slow GPUs, e.g. 3:1.2 = rank 3 computes 20%% slower",
        check=check_stragglers,
        parse="stragglers",
        metavar="RANK:SLOWDOWN,...",
        sweep=False,
    ),
    Knob(
        "jitter_sigma",
        "simulation",
        0.0,
        "float",
        "--jitter",
        "detailed engine: log-normal compute noise",
        check=Range("jitter sigma", 0, MAX_JITTER_SIGMA),
        parse="number",
        dest="jitter",
        sweep=False,
    ),
    Knob(
        "rank_sigma",
        "simulation",
        DEFAULT_RANK_SIGMA,
        "float",
        "--rank-sigma",
        "per-rank, per-iteration speed variability (log-normal sigma) charged as waiting for "
        f"the slowest rank; 0 = identical ranks (default: {DEFAULT_RANK_SIGMA:g}, fitted)",
        check=check_rank_sigma,
        parse="number",
        sweep=False,
    ),
    Knob(
        "host_contention",
        "simulation",
        DEFAULT_HOST_CONTENTION,
        "float",
        "--host-contention",
        "compute slowdown of each GPU when a node runs several (shared CPUs, PCIe root, "
        f"power); 0 = none (default: {DEFAULT_HOST_CONTENTION:g}, fitted on single-node "
        "runs)",
        check=check_host_contention,
        parse="number",
        metavar="FRACTION",
        sweep=False,
    ),
    Knob(
        "interference",
        "simulation",
        True,
        "bool",
        "--no-interference",
        "do not slow compute while collectives hold SMs (NCCL: one SM per channel)",
        negate=True,
        sweep=False,
        applies=Applies(
            comm_in(*NCCL_METHODS),
            "only NCCL's kernels hold SMs while they communicate (horovod-nccl, replicated-nccl, "
            "ddp, fsdp, zero1-3)",
            ("comm",),
        ),
    ),
    Knob(
        "seed",
        "simulation",
        0,
        "int",
        "--seed",
        "seed of the jitter",
        check=Range("seed", 0, 2**63 - 1, integer=True, text="a non-negative integer"),
        parse="int",
        sweep=False,
        applies=Applies(
            lambda c: c.get("engine") == "detailed",
            "only the detailed engine draws random numbers",
            DETAILED,
        ),
    ),
    Knob(
        "max_events",
        "simulation",
        DEFAULT_MAX_EVENTS,
        "float",
        "--max-events",
        "detailed engine: refuse a run estimated at more events (its work weighted by cost: "
        "a flow transfer 4, a worker's share of a worker step 80, a worker step, loop event "
        f"or executor step 1,600; default: {DEFAULT_MAX_EVENTS:.0e}, about half a minute on 2 "
        "cores) or at more than 80%% of the available memory",
        check=check_max_events,
        parse="number",
        metavar="N",
        sweep=False,
        applies=Applies(
            lambda c: c.get("engine") == "detailed", "it bounds the detailed engine", DETAILED
        ),
    ),
    Knob(
        "mc_draws",
        "simulation",
        0,
        "int",
        "--mc-draws",
        "Monte Carlo runs of the whole training with failures: the time-to-train's p10 / "
        "p50 / p90 (default: 0, none)",
        check=lambda v: rc.check_count("Monte Carlo draws", v, rc.MAX_MC_DRAWS),
        parse="int",
        metavar="N",
        applies=Applies(fails, "the Monte Carlo draws failures", ("node_mtbf_hours",)),
        failure=True,
    ),
    Knob(
        "mc_seed",
        "simulation",
        0,
        "int",
        "--mc-seed",
        "Monte Carlo seed (default: 0)",
        check=Range("Monte Carlo seed", 0, 2**63 - 1, integer=True, text="a non-negative integer"),
        parse="int",
        metavar="N",
        applies=Applies(
            lambda c: fails(c) and bool(c.get("mc_draws")),
            "it seeds the Monte Carlo of failures",
            ("node_mtbf_hours", "mc_draws"),
        ),
        failure=True,
    ),
)
