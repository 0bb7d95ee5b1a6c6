"""Flags that do not apply to the chosen configuration: one warning each, never an error.

``--n-ps 4 --comm horovod-nccl`` is accepted (a sweep or a script may pass a fixed set of flags)
but has no effect; ddlsim says so once on stderr::

    ddlsim: warning: --n-ps has no effect with --comm horovod-nccl (it applies to ps, ...)

A flag counts as given when its value differs from :func:`ddlsim.predict`'s default. A sweep
warns about a flag only when it applies to none of the grid's configurations. To cover a new
flag, add a :class:`Rule`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ddlsim.execution.strategy import HOROVOD_METHODS, PS_METHODS

Config = Mapping[str, Any]


@dataclass(frozen=True)
class Rule:
    """``keyword`` (flag ``flag``) only matters when ``applies(config)``; ``scope`` says when."""

    keyword: str
    flag: str
    applies: Callable[[Config], bool]
    scope: str
    context: tuple[str, ...]  # the keywords whose values decide (named in the warning)


def _tf32_in_play(gpu: object, precision: object) -> bool:
    """:func:`ddlsim.resolve.prepare.tf32_applies` for the catalog GPU ``gpu`` (default p100) at
    ``precision`` (default fp32); an unknown name counts as yes (predict names it)."""
    from ddlsim.errors import DdlsimError
    from ddlsim.resolve.prepare import tf32_applies
    from ddlsim.system import catalog

    try:
        return tf32_applies(catalog.device(str(gpu or "p100")), str(precision or "fp32"))
    except DdlsimError:
        return True


def _multi_node(c: Config) -> bool:
    """Whether the configuration spans several nodes (build_cluster's defaults; the GPU given,
    else the calibration file's, else p100); a configuration that does not resolve counts as
    yes (predict names what is wrong)."""
    from ddlsim.calibration import profile as profile_io
    from ddlsim.errors import DdlsimError
    from ddlsim.system import catalog

    try:
        gpu = c.get("gpu")
        if gpu is None and c.get("calibration"):
            gpu = profile_io.load(c["calibration"]).device
        cluster = catalog.build_cluster(
            str(gpu or "p100"), int(c.get("gpus") or 1), c.get("gpus_per_node")
        )
        return cluster.n_nodes > 1
    except (DdlsimError, OSError, TypeError, ValueError):
        return True


def _comm_in(*methods: str) -> Callable[[Config], bool]:
    return lambda c: c.get("comm") in methods


def _fails(c: Config) -> bool:
    """Whether nodes fail (``node_mtbf_hours`` not 0): the failure model applies."""
    return c.get("node_mtbf_hours") != 0


def _recovering(recovery: str) -> Callable[[Config], bool]:
    return lambda c: _fails(c) and c.get("recovery") == recovery


#: the failure model's flags: (keyword, flag, applies, scope, context)
_FAILURE_RULES = (
    ("optimizer", "--optimizer", lambda c: _fails(c) and c.get("checkpoint_GB") is None,
     "it sets the checkpoint's size, with failures, unless --checkpoint-GB gives it",
     ("node_mtbf_hours", "checkpoint_GB")),
    ("checkpoint_GB", "--checkpoint-GB", _fails, "it applies with failures", ("node_mtbf_hours",)),
    ("recovery", "--recovery", _fails, "it applies with failures", ("node_mtbf_hours",)),
    ("checkpoint_interval_min", "--checkpoint-interval-min", _fails, "it applies with failures",
     ("node_mtbf_hours",)),
    ("checkpoint_write_GBps", "--checkpoint-write-GBps", _recovering("restart"),
     "it applies to --recovery restart with failures", ("node_mtbf_hours", "recovery")),
    ("checkpoint_time_s", "--checkpoint-time-s", _recovering("restart"),
     "it applies to --recovery restart with failures", ("node_mtbf_hours", "recovery")),
    ("restart_min", "--restart-min", _recovering("restart"),
     "it applies to --recovery restart with failures", ("node_mtbf_hours", "recovery")),
    ("rendezvous_s", "--rendezvous-s", _recovering("elastic"),
     "it applies to --recovery elastic with failures", ("node_mtbf_hours", "recovery")),
    ("replace_min", "--replace-min", _recovering("elastic"),
     "it applies to --recovery elastic with failures", ("node_mtbf_hours", "recovery")),
    ("mc_draws", "--mc-draws", _fails, "the Monte Carlo draws failures", ("node_mtbf_hours",)),
    ("mc_seed", "--mc-seed", lambda c: _fails(c) and bool(c.get("mc_draws")),
     "it seeds the Monte Carlo of failures", ("node_mtbf_hours", "mc_draws")),
)  # fmt: skip


RULES = (
    Rule(
        "nics_per_node",
        "--nics-per-node",
        _multi_node,
        "network adapters matter only between nodes",
        ("gpu", "gpus", "gpus_per_node"),
    ),
    Rule(
        "n_ps",
        "--n-ps",
        _comm_in(*PS_METHODS),
        f"it applies to {', '.join(PS_METHODS)}",
        ("comm",),
    ),
    Rule(
        "ps_colocated",
        "--ps-dedicated",
        _comm_in("ps", "byteps"),
        "it applies to ps and byteps",
        ("comm",),
    ),
    Rule(
        "ps_placement",
        "--ps-placement",
        _comm_in("ps", "replicated-cpu"),
        "it applies to ps and replicated-cpu",
        ("comm",),
    ),
    Rule(
        "fusion_threshold_mb",
        "--fusion-threshold-mb",
        _comm_in(*HOROVOD_METHODS),
        f"it applies to {', '.join(HOROVOD_METHODS)}",
        ("comm",),
    ),
    Rule(
        "bucket_cap_mb",
        "--bucket-cap-mb",
        lambda c: (
            c.get("schedule") == "ddp"
            or (c.get("comm") == "ddp" and c.get("schedule") in (None, "auto"))
        ),
        "it applies to --comm ddp (PyTorch DDP's buckets)",
        ("comm", "schedule"),
    ),
    Rule(
        "partition_mb",
        "--partition-mb",
        lambda c: c.get("schedule") == "bytescheduler",
        "it applies to --schedule bytescheduler",
        ("schedule",),
    ),
    Rule(
        "cycle_time_ms",
        "--cycle-time-ms",
        _comm_in(*HOROVOD_METHODS),
        f"it applies to {', '.join(HOROVOD_METHODS)}",
        ("comm",),
    ),
    Rule(
        "hierarchical",
        "--hierarchical",
        _comm_in("horovod-nccl"),
        "it applies to horovod-nccl",
        ("comm",),
    ),
    Rule(
        "algorithm",
        "--algorithm",
        lambda c: c.get("comm") == "horovod-nccl" and not c.get("hierarchical"),
        "it applies to horovod-nccl without --hierarchical",
        ("comm", "hierarchical"),
    ),
    Rule(
        "nccl_protocol",
        "--nccl-protocol",
        lambda c: c.get("comm") == "horovod-nccl" and not c.get("hierarchical"),
        "it applies to horovod-nccl without --hierarchical",
        ("comm", "hierarchical"),
    ),
    Rule(
        "nccl_version",
        "--nccl-version",
        _comm_in("horovod-nccl"),
        "it applies to horovod-nccl (replicated-nccl is TensorFlow's own NCCL 1)",
        ("comm",),
    ),
    Rule(
        "horovod_version",
        "--horovod-version",
        _comm_in(*HOROVOD_METHODS),
        f"it applies to {', '.join(HOROVOD_METHODS)}",
        ("comm",),
    ),
    Rule(
        "response_cache",
        "--no-response-cache",
        _comm_in(*HOROVOD_METHODS),
        f"it applies to {', '.join(HOROVOD_METHODS)} (releases 0.16 and later)",
        ("comm",),
    ),
    Rule(
        "interference",
        "--no-interference",
        _comm_in("horovod-nccl", "replicated-nccl", "ddp"),
        "only NCCL's kernels hold SMs while they communicate",
        ("comm",),
    ),
    Rule(
        "tf32",
        "--no-tf32",
        lambda c: _tf32_in_play(c.get("gpu"), c.get("precision")),
        "TF32 is in play only for fp32 on a GPU with TF32 tensor cores (a100, h100)",
        ("gpu", "precision"),
    ),
    Rule(
        "input_pipeline",
        "--input-pipeline",
        lambda c: c.get("data") == "real",
        "it applies to --data real",
        ("data",),
    ),
    Rule(
        "host_input_images_per_s",
        "--host-input-rate",
        lambda c: c.get("data") == "real" and c.get("input_pipeline") == "host",
        "it applies to --data real decoded by the host",
        ("data", "input_pipeline"),
    ),
    Rule(
        "seed",
        "--seed",
        lambda c: c.get("engine") == "detailed",
        "only the detailed engine draws random numbers",
        ("engine",),
    ),
    Rule(
        "max_events",
        "--max-events",
        lambda c: c.get("engine") == "detailed",
        "it bounds the detailed engine",
        ("engine",),
    ),
    *(Rule(*rule) for rule in _FAILURE_RULES),
)


def _flag_value(keyword: str, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return "default" if value is None else str(value)


def inapplicable(configs: Iterable[Config]) -> list[str]:
    """Warnings (one per flag) for flags given in ``configs`` (keyword arguments of
    :func:`ddlsim.predict`) that apply to none of the configurations where they are given."""
    from ddlsim.config.record import keyword_defaults

    defaults = keyword_defaults()
    full = [{**defaults, **c} for c in configs]
    out = []
    for rule in RULES:
        given = [c for c in full if c.get(rule.keyword) != defaults.get(rule.keyword)]
        if not given or any(rule.applies(c) for c in given):
            continue
        context = ", ".join(
            f"--{k.replace('_', '-')} "
            + "/".join(sorted({_flag_value(k, c.get(k)) for c in given}))
            for k in rule.context
        )
        out.append(f"{rule.flag} has no effect with {context} ({rule.scope}); ignored")
    return out


def warn_inapplicable(config: Config) -> None:
    """Print one ``ddlsim: warning:`` line per given flag that does not apply to ``config``."""
    warn_inapplicable_grid([config])


def warn_inapplicable_grid(configs: Iterable[Config]) -> None:
    """The same for a sweep: a flag that applies to none of ``configs``."""
    for message in inapplicable(configs):
        print(f"ddlsim: warning: {message}", file=sys.stderr)
