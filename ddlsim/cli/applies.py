"""Flags that do not apply to the chosen configuration: one warning each, never an error.

``--n-ps 4 --comm horovod-nccl`` is accepted (a sweep or a script may pass a fixed set of flags)
but has no effect; ddlsim says so once on stderr::

    ddlsim: warning: --n-ps has no effect with --comm horovod-nccl (it applies to ps, ...)

A flag counts as given when its value differs from :func:`ddlsim.predict`'s default. When a
knob applies is its row's ``applies`` in the knob table (:mod:`ddlsim.config.knobs`), read on
the resolved job: the keywords, plus the node count and whether TF32 is in play as the
prediction resolved them (its ``inputs``), never a cluster built again here. A sweep warns
about a flag only when it applies to none of the grid's configurations.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ddlsim.config.knobs import KNOBS

Config = Mapping[str, Any]


def resolved_facts(inputs: Config | None) -> dict[str, Any]:
    """What the rules read of a resolved job (a prediction's ``inputs`` or a sweep row):
    ``nodes``, ``tf32_in_play`` and ``transformer``; empty for a job that did not resolve (every
    rule then
    counts as applying: the error names what is wrong)."""
    if not inputs:
        return {}
    out: dict[str, Any] = {}
    gpus, per_node = inputs.get("gpus") or inputs.get("n_gpus"), inputs.get("gpus_per_node")
    if inputs.get("nodes") is not None:
        out["nodes"] = inputs["nodes"]
    elif gpus and per_node:
        out["nodes"] = -(-int(gpus) // int(per_node))
    model = inputs.get("model")
    if model is not None:  # the resolved name: the zoo's, or a model file's (transformer)
        from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES

        out["transformer"] = bool(inputs.get("transformer")) or model in TRANSFORMER_NAMES
    if inputs.get("gpu") and inputs.get("precision"):
        out["tf32_in_play"] = _tf32_in_play(str(inputs["gpu"]), str(inputs["precision"]))
    return out


def _tf32_in_play(gpu: str, precision: str) -> bool:
    """:func:`ddlsim.resolve.prepare.tf32_applies` for the resolved catalog GPU ``gpu``."""
    from ddlsim.errors import DdlsimError
    from ddlsim.resolve.prepare import tf32_applies
    from ddlsim.system import catalog

    try:
        return tf32_applies(catalog.device(gpu), precision)
    except DdlsimError:
        return True


def _flag_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return "default" if value is None else str(value)


def inapplicable(jobs: Iterable[tuple[Config, Config | None]]) -> list[str]:
    """Warnings (one per flag) for flags given in ``jobs`` -- pairs of keyword arguments of
    :func:`ddlsim.predict` and what resolved of them (None: nothing) -- that apply to none of
    the jobs where they are given. ``jobs`` is read once, as a stream (a sweep's grid): what is
    kept is, per flag, whether it applied and the values of its context where it did not."""
    from ddlsim.config.record import keyword_defaults

    defaults = keyword_defaults()
    ruled = [knob for knob in KNOBS if knob.applies is not None]
    given: dict[str, dict[str, set[str]]] = {}  # flag -> context key -> values where given
    applied: set[str] = set()
    for kwargs, inputs in jobs:
        c = {**defaults, **kwargs, **resolved_facts(inputs)}
        for knob in ruled:
            if knob.name in applied or c.get(knob.name) == defaults.get(knob.name):
                continue
            if knob.applies.when(c):
                applied.add(knob.name)
                given.pop(knob.name, None)
                continue
            seen = given.setdefault(knob.name, {k: set() for k in knob.applies.context})
            for k in knob.applies.context:
                seen[k].add(_flag_value(c.get(k)))
    out = []
    for knob in ruled:
        if knob.name not in given:
            continue
        context = ", ".join(
            f"--{k.replace('_', '-')} " + "/".join(sorted(values))
            for k, values in given[knob.name].items()
        )
        out.append(f"{knob.flag} has no effect with {context} ({knob.applies.scope}); ignored")
    return out


def warn_inapplicable(kwargs: Config, inputs: Config | None = None) -> None:
    """Print one ``ddlsim: warning:`` line per given flag that does not apply to the job of
    ``kwargs``, resolved as ``inputs`` says."""
    warn_inapplicable_grid([(kwargs, inputs)])


def warn_inapplicable_grid(jobs: Iterable[tuple[Config, Config | None]]) -> None:
    """The same for a sweep: a flag that applies to none of ``jobs``."""
    for message in inapplicable(jobs):
        print(f"ddlsim: warning: {message}", file=sys.stderr)


def note_one_gpu_nodes(became: str | None, what: str = "") -> None:
    """The note that ``--intra-node none`` split the GPUs into nodes of one (``became``: the
    api's :func:`~ddlsim.api.one_gpu_nodes`; ``what``: which configurations, in a sweep)."""
    if became:
        print(
            f"ddlsim: note: --intra-node none: {what}{became} (name a fabric, e.g. the GPU's "
            "default, to keep them in one node)",
            file=sys.stderr,
        )
