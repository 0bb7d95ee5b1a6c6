"""The flags of a job, made from the knob table (:mod:`ddlsim.config.knobs`).

``predict``, ``timeline`` and ``traces --compare`` take every knob as a flag, in one argument
group per part of the job (workload, system, execution, simulation); ``validate`` takes some
as overrides for every row, and ``sweep`` as lists of grid values. Each comes from the knob's
row: its flag, parser, metavar, choices (the owning registry's names) and help.
:func:`predict_kwargs` turns the parsed flags back into the keyword arguments of
:func:`ddlsim.predict`; the names differ only where a flag switches a default off
(``--no-tf32`` -> ``tf32=False``) or names its unit (``--host-input-rate`` ->
``host_input_images_per_s``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ddlsim.cli.args import integer, non_negative_number, number, number_or, positive_number
from ddlsim.config.knob import BATCH_MAX, GPUS_MIN, GROUP_NAMES, GROUP_TITLES
from ddlsim.config.knobs import BY_NAME, KNOBS, Knob, in_group
from ddlsim.errors import ConfigError


def _stragglers(text: str) -> dict[int, float]:
    """``RANK:SLOWDOWN[,RANK:SLOWDOWN...]``: distinct ranks, finite slowdowns (checked again,
    with their ranges, by the job's simulation group)."""
    out: dict[int, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        rank, _, factor = item.partition(":")
        try:
            r, f = int(rank), float(factor)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected RANK:SLOWDOWN[,RANK:SLOWDOWN...], got {text!r}"
            ) from None
        if r in out:
            raise argparse.ArgumentTypeError(f"rank {r} is given twice in {text!r}")
        out[r] = f
    if not out:
        raise argparse.ArgumentTypeError(f"expected RANK:SLOWDOWN[,...], got {text!r}")
    return out


class _Once(argparse.Action):
    """Store a knob's value once: a second flag that gives the same knob another value
    (``--xla --fusion bn-act``) is a contradiction, refused naming both, not "last one wins"."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, option: Any
    ) -> None:
        value = self.const if self.nargs == 0 else values
        given = getattr(ns, f"_given_{self.dest}", None)
        if given is not None and given[1] != value:
            parser.error(f"{option} contradicts {given[0]} (both set the {self.dest})")
        setattr(ns, f"_given_{self.dest}", (option, value))
        setattr(ns, self.dest, value)


mtbf_hours = number_or("none", 0.0, "hours")
minutes_or_auto = number_or("auto", None, "minutes")


#: a knob's ``parse`` -> the command line's parser of its value
PARSERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": integer,
    "number": number,
    "positive": positive_number,
    "non-negative": non_negative_number,
    "mtbf": mtbf_hours,
    "minutes-or-auto": minutes_or_auto,
    "int-or-max": number_or(BATCH_MAX, BATCH_MAX, "an integer", integer),
    "int-or-min": number_or(GPUS_MIN, GPUS_MIN, "an integer", integer),
    "stragglers": _stragglers,
}


def add_knob(
    g: argparse._ActionsContainer,
    knob: Knob,
    *,
    help: str | None = None,
    default: Any = ...,
    nargs: str | None = None,
) -> None:
    """Add ``knob``'s flag to ``g``: as in predict by default; ``default`` None and a ``help``
    for an override (validate), ``nargs="+"`` for a list of values (sweep)."""
    text = knob.help_text if help is None else help
    if (knob.negate or knob.switch) and nargs is None:
        g.add_argument(knob.flag, dest=knob.arg_dest, action="store_true", help=text)
    else:
        kwargs: dict[str, Any] = {"dest": knob.arg_dest, "help": text}
        if knob.negate or knob.switch:  # a grid of the boolean itself: true / false
            kwargs["type"] = str
        else:
            kwargs["type"] = PARSERS[knob.parse]
        if knob.choices is not None and nargs is None:
            kwargs["choices"] = knob.choices()
        if knob.metavar is not None:
            kwargs["metavar"] = knob.metavar
        if nargs is not None:
            kwargs.update(nargs=nargs, metavar="V")
        kwargs["default"] = knob.default if default is ... else default
        if knob.extra and nargs is None and default is ...:
            kwargs["action"] = _Once
        g.add_argument(knob.flag, **kwargs)
    if nargs is None and default is ...:
        for flag, value, extra_help in knob.extra:
            g.add_argument(
                flag, dest=knob.arg_dest, action=_Once, nargs=0, const=value, help=extra_help
            )


def add_config_arguments(p: argparse.ArgumentParser, *, title: str = "") -> None:
    """Add every knob's flag to ``p``, in one argument group per part of the job (``title``
    prefixes the groups' titles)."""
    for group in GROUP_NAMES:
        g = p.add_argument_group(f"{title}{GROUP_TITLES[group]}")
        for knob in in_group(group):
            add_knob(g, knob)


def add_overrides(p: argparse._ActionsContainer, helps: dict[str, str]) -> None:
    """Flags that set a knob for every row of a file (``validate``): ``helps`` maps the knob's
    name to its help there; default None (the row's or predict's value)."""
    for name, text in helps.items():
        knob = BY_NAME[name]
        add_knob(p, knob, help=text, default=False if (knob.negate or knob.switch) else None)


def knob_value(knob: Knob, args: argparse.Namespace) -> Any:
    """The knob's value from parsed flags (a negating switch given: False)."""
    value = getattr(args, knob.arg_dest)
    return not value if knob.negate else value


def predict_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`ddlsim.predict` from parsed flags, in the table's order."""
    for name in ("gpus", "batch"):
        value = getattr(args, name)
        if isinstance(value, int) and value < 1:
            raise ConfigError(f"{BY_NAME[name].flag} must be >= 1, got {value}")
    return {knob.name: knob_value(knob, args) for knob in KNOBS}
