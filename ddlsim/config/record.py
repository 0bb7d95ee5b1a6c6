"""Every result carries what re-runs it: ``ddlsim predict --from-json RESULT.json``.

The ``inputs`` of a prediction (``predict --json``, a timeline's ``metadata.inputs``, a sweep
row's ``config`` column) hold a :func:`record`:

- ``predict_kwargs``: the complete keyword arguments :func:`ddlsim.predict` ran with, every
  default filled in from the job's groups (:mod:`ddlsim.config.groups`: a field added to a group
  later
  is recorded without touching this module, and a later change of a default does not change
  what a record re-runs);
- ``ddlsim_version``;
- ``calibration_source``: the calibration file the compute times were read from (given, or
  found by the search, or the file a derived calibration was computed from) and its SHA-256.

:func:`load` reads the record back from a JSON file and refuses, with one line, a file whose
calibration is no longer what the record says (changed, missing); a different ddlsim version
is a warning (:func:`ddlsim.api.rerun` predicts it again). The JSON encoding of the keyword
arguments is plain JSON except for dicts with non-string keys (``stragglers``), written as
``{"__pairs__": [[key, value], ...]}``.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddlsim.atomic import file_sha256
from ddlsim.config.groups import defaults
from ddlsim.errors import ConfigError
from ddlsim.inputs import RESULT_JSON_MAX_BYTES, read_json
from ddlsim.version import __version__

PAIRS = "__pairs__"
#: the record's key of the network calibration file (``predict --network-calibration``)
NETWORK_SOURCE = "network_calibration_source"


def keyword_defaults() -> dict[str, Any]:
    """Default value of every keyword of :func:`ddlsim.predict`
    (:func:`ddlsim.config.groups.defaults`)."""
    return defaults()


def complete_kwargs(call: Mapping[str, Any]) -> dict[str, Any]:
    """``call`` (keywords of :func:`ddlsim.predict`, ``model`` and ``gpus`` included) with
    every missing keyword at its default, in signature order."""
    full = {**keyword_defaults(), **call}
    unknown = sorted(set(call) - set(full) - {"model", "gpus"})
    if unknown:
        raise ConfigError(f"unknown predict keyword(s): {', '.join(unknown)}")
    return full


def encode(value: Any) -> Any:
    """``value`` as plain JSON data (tuples as lists, dicts with non-string keys as pairs)."""
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {PAIRS: [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"cannot record the non-finite value {value!r}")
        return value
    if hasattr(value, "item"):  # a numpy scalar
        return encode(value.item())
    raise ConfigError(f"cannot record a value of type {type(value).__name__}: {value!r}")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode` (lists stay lists)."""
    if isinstance(value, dict):
        if set(value) == {PAIRS}:
            return {decode(k): decode(v) for k, v in value[PAIRS]}
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def record(call: Mapping[str, Any], calibration_source: str | None) -> dict[str, Any]:
    """What re-runs a result: complete keyword arguments, ddlsim version, calibration file."""
    source = None
    if calibration_source is not None:
        source = {"path": str(calibration_source), "sha256": file_sha256(calibration_source)}
    network = call.get("network_calibration")
    rec = {
        "predict_kwargs": encode(complete_kwargs(call)),
        "ddlsim_version": __version__,
        "calibration_source": source,
    }
    if network is not None:  # a network calibration file is checked like the compute one
        rec[NETWORK_SOURCE] = {"path": str(network), "sha256": file_sha256(network)}
    return rec


def _inputs_of(doc: Any) -> dict[str, Any] | None:
    """The ``inputs`` object of a ``predict --json`` document or a ``timeline`` trace."""
    if not isinstance(doc, dict):
        return None
    inputs = doc.get("inputs")
    if inputs is None and isinstance(doc.get("metadata"), dict):
        inputs = doc["metadata"].get("inputs")
    return inputs if isinstance(inputs, dict) else None


def load(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keyword arguments recorded in the JSON result at ``path``, and the record.

    Refuses (:class:`ConfigError`, one line) a file that is not a ddlsim result with a record,
    or whose calibration file changed or disappeared since; warns when the ddlsim version
    differs.
    """
    p = Path(path)
    doc = read_json(p, "--from-json result", RESULT_JSON_MAX_BYTES)
    inputs = _inputs_of(doc)
    kwargs = inputs.get("predict_kwargs") if inputs else None
    if not isinstance(kwargs, dict):
        raise ConfigError(
            f"--from-json: {p} records no predict_kwargs in its inputs (write it with "
            "'ddlsim predict --json' or 'ddlsim timeline' of this version)"
        )
    assert inputs is not None
    unknown = sorted(set(kwargs) - set(keyword_defaults()) - {"model", "gpus"})
    if unknown:
        raise ConfigError(
            f"--from-json: {p} records keyword(s) {', '.join(unknown)} that ddlsim "
            f"{__version__} does not know (written by ddlsim {inputs.get('ddlsim_version')})"
        )
    keys = ("predict_kwargs", "ddlsim_version", "calibration_source", NETWORK_SOURCE)
    rec = {k: inputs.get(k) for k in keys}
    check_calibration(rec, p)
    version = rec.get("ddlsim_version")
    if version != __version__:
        print(
            f"ddlsim: warning: {p} was written by ddlsim {version}, this is {__version__}; "
            "the result may differ",
            file=sys.stderr,
        )
    return decode(kwargs), rec


def check_calibration(rec: Mapping[str, Any], where: object) -> None:
    """The recorded calibration files (compute, network) still exist with the recorded
    SHA-256."""
    for key in ("calibration_source", NETWORK_SOURCE):
        source = rec.get(key)
        if isinstance(source, dict):
            _check_file(source, where, "network calibration" if key == NETWORK_SOURCE else "")


def _check_file(source: Mapping[str, Any], where: object, kind: str) -> None:
    kind = kind or "calibration"
    path, digest = source.get("path"), source.get("sha256")
    if not isinstance(path, str) or not Path(path).is_file():
        raise ConfigError(
            f"--from-json: {where} was computed with {kind} file {path}, which no longer exists"
        )
    now = file_sha256(path)
    if now != digest:
        raise ConfigError(
            f"--from-json: {kind} file {path} changed since {where} was written "
            f"(sha256 {str(digest)[:12]}... then, {now[:12]}... now)"
        )


def check_same_source(rec: Mapping[str, Any], rerun: Mapping[str, Any], where: object) -> None:
    """The re-run read the same calibration file as the record (the search can find another
    file once a user calibration is added)."""
    before = rec.get("calibration_source") or {}
    after = rerun.get("calibration_source") or {}
    if before.get("sha256") != after.get("sha256") or before.get("path") != after.get("path"):
        raise ConfigError(
            f"--from-json: {where} used calibration {before.get('path')}, the re-run found "
            f"{after.get('path')}; pass --calibration explicitly or remove the new file"
        )
