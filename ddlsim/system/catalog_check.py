"""Shared helpers of the catalog loaders: limits, the file reader and the checker whose
messages name the file, the entry and the key (:mod:`ddlsim.system.catalog_files` reads the
links, :mod:`ddlsim.system.catalog_devices` the devices)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ddlsim.errors import CatalogError
from ddlsim.system.specs import TRANSPORTS

SCHEMA_VERSION = 1
MAX_GPUS = 1_000_000  # more GPUs than any cluster built: an input error
#: the largest NVLink domain a node may be: GB200 NVL72's 72 GPUs on one NVLink-switch fabric
MAX_GPUS_PER_NODE = 72
#: GB200 NVL72: one 400 Gb/s NIC per GPU, 72 per NVLink domain
MAX_NICS_PER_NODE = 72
#: the network of a multi-node cluster whose GPU's reference server names none
DEFAULT_INTER_NODE = "ib-edr"
NONE = "none"

if TYPE_CHECKING:
    from importlib.abc import Traversable

PathLike = Union[str, "os.PathLike[str]", "Traversable"]


def _norm(name: object) -> str:
    return name.strip().lower() if isinstance(name, str) else f"\0{name!r}"


def _data_file(filename: str) -> Traversable:
    from importlib import resources  # lazy: keeps the import of this module cheap

    return resources.files("ddlsim.system").joinpath("data").joinpath(filename)


def _read_json(path: PathLike) -> tuple[dict[str, Any], str]:
    source = Path(path) if isinstance(path, (str, os.PathLike)) else path
    label = str(source)
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"{label}: cannot read catalog file: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"{label}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(doc, dict):
        raise CatalogError(f"{label}: top level must be an object, got {type(doc).__name__}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CatalogError(
            f"{label}: schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}"
        )
    return doc, label


class _Checker:
    """Validation helpers whose messages name the file, the entry and the key."""

    def __init__(self, file: str, where: str) -> None:
        self.file = file
        self.where = where

    def fail(self, key: str | None, problem: str) -> CatalogError:
        at = f"{self.where}, key {key!r}" if key else self.where
        return CatalogError(f"{self.file}: {at}: {problem}")

    def identifier(self, name: str) -> None:
        # look-ups lower-case and strip the user's spelling, so ids must already be normalised
        if not name or name != name.strip().lower() or " " in name:
            raise self.fail(None, "ids must be non-empty, lower-case and without blanks")

    def obj(self, value: object, key: str | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r}")
        return value

    def keys(
        self, entry: dict[str, Any], required: frozenset[str], optional: frozenset[str]
    ) -> None:
        for key in sorted(required - entry.keys()):
            raise self.fail(key, "missing")
        for key in sorted(entry.keys() - required - optional):
            raise self.fail(key, "unknown key (typo or wrong unit?)")

    def text(self, entry: dict[str, Any], key: str) -> str:
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def number(self, value: object, key: str, *, allow_zero: bool = False) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            kind = "non-negative" if allow_zero else "positive"
            raise self.fail(key, f"must be a {kind} finite number, got {value!r}")
        return float(value)

    def choice(self, entry: dict[str, Any], key: str, valid: tuple[str, ...]) -> str:
        value = entry.get(key)
        if value not in valid:
            raise self.fail(key, f"must be one of {', '.join(valid)}, got {value!r}")
        return value

    def flag(self, value: object, key: str) -> bool:
        """``value`` as a boolean (JSON true / false)."""
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def count(self, value: object, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise self.fail(key, f"must be a positive integer, got {value!r}")
        return value

    def per_transport(self, value: object, key: str, *, fraction: bool) -> dict[str, float]:
        table = self.obj(value, key)
        if set(table) != set(TRANSPORTS):
            raise self.fail(key, f"must give exactly {list(TRANSPORTS)}, got {sorted(table)}")
        out = {}
        for transport in TRANSPORTS:
            item = f"{key}.{transport}"
            number = self.number(table[transport], item, allow_zero=not fraction)
            if fraction and number > 1:
                raise self.fail(item, f"efficiency must lie in (0, 1], got {number!r}")
            out[transport] = number
        return out

    def documented(self, entry: dict[str, Any], figures: list[str]) -> dict[str, str]:
        """Merge ``sources`` and ``assumptions``; every figure must be explained by one."""
        sources = self.obj(entry.get("sources", {}), "sources")
        assumptions = self.obj(entry.get("assumptions", {}), "assumptions")
        merged: dict[str, str] = {}
        for table, prefix in ((sources, ""), (assumptions, "assumption: ")):
            for key, value in table.items():
                if not isinstance(value, str) or not value.strip():
                    raise self.fail(key, f"source must be a non-empty string, got {value!r}")
                text = prefix + value
                merged[key] = f"{merged[key]} | {text}" if key in merged else text
        for figure in figures:
            if figure not in merged:
                raise self.fail(figure, "no source or assumption given for this figure")
        return merged
