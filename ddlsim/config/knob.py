"""A knob of the job -- one option: its :class:`Knob` row, :class:`Applies` (when it has an
effect), the limits the rows state, and the predicates several rows share.

The rows themselves are in :mod:`ddlsim.config.table` (one module per group) and
:mod:`ddlsim.config.knobs` assembles them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddlsim.comm import HOROVOD_METHODS, NCCL2_METHODS, PYTORCH_METHODS
from ddlsim.comm.nccl import (
    NcclVersion,
)
from ddlsim.config.checks import Check, is_real
from ddlsim.errors import ConfigError
from ddlsim.execution.horovod import horovod_release
from ddlsim.system import catalog

GROUP_NAMES = ("workload", "system", "execution", "simulation")
#: the argument group titles of ``--help``, by group
GROUP_TITLES = {
    "workload": "workload (what is trained)",
    "system": "system (what it runs on)",
    "execution": "execution (how it trains)",
    "simulation": "simulation (how ddlsim simulates it)",
}
#: largest accepted fusion threshold (and DDP bucket cap), MiB
MAX_FUSION_THRESHOLD_MB = 65536
#: accepted Horovod cycle times, ms, besides 0 (no cycle): from a microsecond (below it the
#: cycle count of one iteration overflows what a float counts exactly) to ten seconds
MIN_CYCLE_TIME_MS = 1e-3
MAX_CYCLE_TIME_MS = 10_000
#: largest accepted log-normal sigma of the detailed engine's compute jitter (beyond it one
#: iteration's compute varies by orders of magnitude and the results become meaningless)
MAX_JITTER_SIGMA = 1.0
#: largest accepted straggler slowdown (compute-time multiplier of one rank)
MAX_SLOWDOWN = 100.0
#: largest mini-batch per GPU
MAX_BATCH = 65536
#: the batch knob's word for the largest micro-batch that fits (``--batch max``)
BATCH_MAX = "max"
#: the gpus knob's word for the fewest GPUs on which the job's step fits (``--gpus min``)
GPUS_MIN = "min"
#: longest sequence accepted: a million tokens, beyond any published training context
MAX_SEQ_LEN = 1 << 20
#: a transformer's attention kernels (the ``attention`` knob)
ATTENTIONS = ("auto", "flash", "unfused")
#: how a transformer's loss over the logits runs (the ``loss_kernel`` knob)
LOSS_KERNELS = ("unfused", "fused")
#: what a transformer is trained for (the ``task`` knob): its head
TASKS = ("auto", "mlm", "span", "classify")
#: FlashAttention releases (the ``flash_version`` knob)
FLASH_VERSIONS = ("auto", "1", "2", "3")
#: most micro-steps per optimizer step (gradient accumulation)
MAX_GRAD_ACCUM = 65536
#: largest number of parameter-server tasks
MAX_PS = 100_000

Config = Mapping[str, Any]


def check_stragglers(stragglers: Mapping[int, float] | None) -> None:
    """Ranks are non-negative integers; slowdowns finite and in (0, MAX_SLOWDOWN]."""
    for rank, factor in (stragglers or {}).items():
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
            raise ConfigError(f"straggler rank must be a non-negative integer, got {rank!r}")
        ok = is_real(factor)
        if not ok or not math.isfinite(factor) or not 0 < factor <= MAX_SLOWDOWN:
            value = f"{factor:g}" if ok else repr(factor)
            raise ConfigError(
                f"bad straggler {rank}:{value}: a slowdown (compute-time multiplier) must be a "
                f"finite number in (0, {MAX_SLOWDOWN:g}]"
            )


def check_horovod_version(version: Any) -> None:
    """A Horovod release ddlsim knows (:func:`~ddlsim.execution.horovod.horovod_release`)."""
    horovod_release(version)


def check_nccl_version(version: Any) -> None:
    """An NCCL release in ``X.Y`` form (:class:`~ddlsim.comm.nccl.NcclVersion`)."""
    NcclVersion.parse(version)


@dataclass(frozen=True)
class Applies:
    """When a knob has an effect: ``when(config)`` on the resolved job (the keywords, plus
    ``nodes`` and ``tf32_in_play`` of the resolved cluster); ``scope`` says it in words;
    ``context`` names the keywords whose values decide (quoted in the warning)."""

    when: Callable[[Config], bool]
    scope: str
    context: tuple[str, ...]


@dataclass(frozen=True)
class Knob:
    """One option of a job. ``parse`` names the command line's parser of the value (int, number,
    positive, non-negative, str, mtbf, minutes-or-auto, int-or-max, stragglers); ``negate``: the
    flag is a switch that sets the (boolean) knob False; ``switch``: a switch that sets it True;
    ``dest`` the flag's argparse name where it differs from ``name``; ``extra`` more switches that
    set the knob to a value (``--xla`` = ``--fusion xla``); ``words`` the spellings a sweep grid
    accepts for a value (``none`` -> 0); ``sweep`` whether it may be a grid axis; ``names`` the
    vocabulary a grid's value is checked against where the command line takes more spellings than
    ``choices`` (aliases, any case), by default ``choices``; ``canonical`` the value's canonical
    spelling, where it has several (``2.4.8`` -> ``2.4``); ``failure``: an input of the failure
    model (:mod:`ddlsim.resilience`), not of the iteration."""

    name: str
    group: str
    default: Any
    annotation: str
    flag: str
    help: str | Callable[[], str]
    check: Check | None = None
    unit: str = ""
    parse: str = "str"
    metavar: str | None = None
    choices: Callable[[], tuple[str, ...]] | None = None
    names: Callable[[], tuple[str, ...]] | None = None
    canonical: Callable[[Any], Any] | None = None
    failure: bool = False
    negate: bool = False
    switch: bool = False
    dest: str | None = None
    extra: tuple[tuple[str, Any, str], ...] = ()
    words: Mapping[str, Any] = field(default_factory=dict)
    applies: Applies | None = None
    sweep: bool = True

    @property
    def help_text(self) -> str:
        """The help, with the registries' names filled in."""
        return self.help() if callable(self.help) else self.help

    @property
    def vocabulary(self) -> Callable[[], tuple[str, ...]] | None:
        """The names a grid value must be one of (None: not a name)."""
        return self.names or self.choices

    @property
    def sweep_flag(self) -> str:
        """The flag of ``ddlsim sweep`` that lists its values: a switch that negates the knob
        lists the knob itself (``--tf32 true false``)."""
        return "--" + self.name.replace("_", "-") if self.negate else self.flag

    @property
    def arg_dest(self) -> str:
        """The attribute of the parsed flags that holds the value (a negating switch's own
        name: ``no_tf32``)."""
        if self.dest is not None:
            return self.dest
        return self.flag[2:].replace("-", "_") if self.negate else self.name

    def validate(self, value: Any) -> None:
        """ConfigError naming ``value`` unless it passes the knob's check."""
        if self.check is not None:
            self.check(value)


def gpu_names() -> str:
    """The catalog's GPUs, each with its aliases: ``p100-sxm2 (= p100), ...``."""
    aliases: dict[str, list[str]] = {}
    for alias, target in catalog.device_aliases().items():
        aliases.setdefault(target, []).append(alias)
    return ", ".join(
        name + (f" (= {', '.join(aliases[name])})" if name in aliases else "")
        for name in catalog.device_names()
        if name not in catalog.device_aliases()
    )


def comm_in(*methods: str) -> Callable[[Config], bool]:
    """In play under the comm ``methods``."""
    return lambda c: c.get("comm") in methods


def fails(c: Config) -> bool:
    """Whether nodes fail (``node_mtbf_hours`` not 0): the failure model applies."""
    return c.get("node_mtbf_hours") != 0


def recovering(recovery: str) -> Callable[[Config], bool]:
    """In play with failures recovered by ``recovery``."""
    return lambda c: fails(c) and c.get("recovery") == recovery


def horovod_only(extra: str = "") -> Applies:
    """In play under Horovod's methods (``extra``: more words of the scope)."""
    return Applies(
        comm_in(*HOROVOD_METHODS), f"it applies to {', '.join(HOROVOD_METHODS)}{extra}", ("comm",)
    )


def nccl_release(c: Config) -> bool:
    """The job's collectives are NCCL 2's: its release is in play."""
    return c.get("comm") in NCCL2_METHODS


def nccl_call(c: Config) -> bool:
    """NCCL chooses each call: its NCCL 2 methods, except horovod-nccl's hierarchical allreduce
    (fixed calls per level)."""
    return nccl_release(c) and not (c.get("comm") == "horovod-nccl" and c.get("hierarchical"))


def ddp_buckets(c: Config) -> bool:
    """DDP's gradient buckets form the operations."""
    return c.get("schedule") == "ddp" or (
        c.get("comm") == "ddp" and c.get("schedule") in (None, "auto")
    )


WITH_FAILURES = Applies(fails, "it applies with failures", ("node_mtbf_hours",))
RESTART = Applies(
    recovering("restart"),
    "it applies to --recovery restart with failures",
    ("node_mtbf_hours", "recovery"),
)
ELASTIC = Applies(
    recovering("elastic"),
    "it applies to --recovery elastic with failures",
    ("node_mtbf_hours", "recovery"),
)
DETAILED = ("engine",)


#: a knob of the transformer model alone (a CNN's job ignores it)
TRANSFORMERS_ONLY = Applies(
    lambda c: bool(c.get("transformer", True)), "it applies to transformer models", ("model",)
)
#: a knob of PyTorch's dispatch of a transformer's kernels (DDP, FSDP and ZeRO run PyTorch)
PYTORCH_TRANSFORMERS = Applies(
    lambda c: (
        bool(c.get("transformer", True))
        and (c.get("framework") == "pytorch" or c.get("comm") in PYTORCH_METHODS)
        and c.get("fusion") != "xla"
    ),
    "it applies to transformer models in PyTorch without XLA",
    ("model", "framework", "comm"),
)
#: a knob of a CNN's epochs alone (a transformer's time to train counts tokens)
CNNS_ONLY = Applies(
    lambda c: not c.get("transformer", False),
    "it applies to CNN models; a transformer's time to train counts tokens: --train-tokens",
    ("model",),
)
