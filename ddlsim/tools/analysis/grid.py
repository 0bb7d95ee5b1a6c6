"""Sweep grids: reading them (command line or YAML) and checking every value before running.

A grid maps :func:`ddlsim.predict` keywords to lists of values. Names are checked against the
catalogs and vocabularies, numbers against their ranges, so that a typo fails at once with one
line (exit 2) instead of producing a file of error rows. Combinations that are invalid only
together (12 GPUs at 8 per node) still become rows with ``status=error``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlsim.config.knobs import KNOBS, Knob
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.extras import require

#: YAML / command-line spellings that differ from predict()'s keywords
ALIASES = {"batch_per_gpu": "batch", "single_gpu_images_per_sec": "single_gpu_throughput"}


def _bool(what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"sweep {what} must be true or false, got {value!r}")

    return check


def _knob_check(knob: Knob) -> Callable[[Any], Any]:
    """A grid value of ``knob``: a name is one of its registry's (any case, trimmed); a word
    stands for its value (``none`` -> 0); the rest is checked as the job checks it."""
    if knob.annotation == "bool":
        return _bool(knob.name)

    def check(value: Any) -> Any:
        vocabulary = knob.vocabulary
        if isinstance(value, str) and value.strip().lower() in knob.words:
            value = knob.words[value.strip().lower()]
        elif vocabulary is not None:
            names = tuple(vocabulary())
            if not isinstance(value, str) or value.strip().lower() not in names:
                raise UnknownNameError(knob.name.replace("_", " "), value, names)
            value = value.strip().lower()
        if knob.name == "network_calibration":
            return _network_calibration(value)
        try:
            knob.validate(value)
        except UnknownNameError:  # names the vocabulary itself (unknown model 'x'; nearest: ...)
            raise
        except ConfigError as exc:
            raise ConfigError(f"sweep {knob.name}: {exc}") from None
        return knob.canonical(value) if knob.canonical is not None else value

    return check


def _checkers() -> dict[str, Callable[[Any], Any]]:
    """One check per knob a grid may vary (the knob table's ``sweep`` rows)."""
    return {knob.name: _knob_check(knob) for knob in KNOBS if knob.sweep}


def _network_calibration(value: Any) -> str:
    """A readable network calibration file (checked before the sweep runs)."""
    from ddlsim.calibration.network import load

    load(str(value))
    return str(value)


def normalise_grid(raw: dict[str, Any]) -> dict[str, list[Any]]:
    """Check every key and value of ``raw``; return it with predict()'s keywords and lists."""
    if not raw:
        raise ConfigError("empty sweep grid: give at least one parameter")
    checkers = _checkers()
    grid: dict[str, list[Any]] = {}
    for key, values in raw.items():
        name = str(key).strip().replace("-", "_")
        name = ALIASES.get(name, name)
        if name not in checkers:
            raise UnknownNameError("sweep parameter", key, checkers)
        items = list(values) if isinstance(values, (list, tuple)) else [values]
        if not items:
            raise ConfigError(f"sweep parameter {key!r} has an empty list of values")
        grid[name] = [checkers[name](v) for v in items]
    return grid


class _DuplicateKeyError(ValueError):
    """A grid key given twice (YAML keeps the last silently)."""


def _unique_keys_loader(yaml: Any) -> type:
    """PyYAML's safe loader, refusing a mapping that gives a key twice (``model:`` twice is a
    contradiction, not an override)."""

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise _DuplicateKeyError(f"line {line}: {key!r} is given twice")
            seen[key] = loader.construct_object(value_node, deep=deep)
        return seen

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def load_grid_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML grid file: a mapping of parameter -> value or list of values."""
    yaml = require("yaml", "sweep", "a YAML grid")
    from ddlsim.inputs import GRID_MAX_BYTES, read_text

    p = Path(path)
    text = read_text(p, "grid file", GRID_MAX_BYTES)  # a regular file, bounded, BOM or not
    try:
        doc = yaml.load(text, Loader=_unique_keys_loader(yaml))
    except _DuplicateKeyError as exc:
        raise ConfigError(f"grid file {p}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"grid file {p}{where}: invalid YAML") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"grid file {p} must be a mapping of parameter: [values]")
    return doc
