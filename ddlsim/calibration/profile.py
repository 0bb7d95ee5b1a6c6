"""Compute calibration: per-layer forward/backward times of one model on one device.

A :class:`ModelProfile` is what a calibration file holds, for one (model, device, batch per GPU,
precision). The file format (JSON, schema version :data:`SCHEMA_VERSION`) is shared by the
shipped roofline-anchored files and by ``ddlsim calibrate``'s TensorFlow profiling pass::

    {"format": "ddlsim-calibration", "schema_version": 1,
     "model": "resnet50", "batch_per_gpu": 64, "precision": "fp32",
     "device": {"catalog_id": "p100-sxm2", "reported_name": null, ...},
     "step_time_s": 0.2922, "unattributed_time_s": 0.0031, "sum_layers_over_step": 0.989,
     "provenance": {"method": "roofline-anchored", "anchor": {...}, "created": "2026-11-22", ...},
     "layer_columns": ["name", "fwd_time_s", "bwd_time_s", "grad_bytes"],
     "layers": [["conv0", 0.0021, 0.0035, 37632], ...]}

``step_time_s`` is the whole training step as measured (or anchored); the per-layer rows and
``unattributed_time_s`` (loss, optimizer, gradient sums: time no layer owns) split it.
Files are written atomically and never overwrite a file of another schema version.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ddlsim.atomic import atomic_write_text, check_replaceable, make_parents, remove_empty
from ddlsim.errors import CalibrationError, ConfigError, shown
from ddlsim.inputs import CALIBRATION_MAX_BYTES, read_json
from ddlsim.system.catalog_files import MAX_GPUS

SCHEMA_VERSION = 1
FORMAT = "ddlsim-calibration"
LAYER_COLUMNS = ("name", "fwd_time_s", "bwd_time_s", "grad_bytes")

#: the physically meaningful range of a calibration's times: a training step takes at least a
#: microsecond (a GPU kernel launch alone takes several) and at most a million seconds (11.6
#: days; any layer's time, and the time no layer owns, at most that too). A file or a derived
#: calibration outside it is refused, so that nothing downstream meets an overflow or a NaN.
MIN_STEP_TIME_S = 1e-6
MAX_TIME_S = 1e6
#: the range of a single-device throughput a calibration may be anchored or rescaled to,
#: images/s: from one image every 100 s (20x slower than one CPU core training VGG-16) to
#: ten million (a thousand times a GPU's AlexNet rate)
MIN_IMAGES_PER_SEC = 1e-2
MAX_IMAGES_PER_SEC = 1e7
#: the range of a measured run's throughput, images/s in all (a runs file, a training log): from
#: :data:`MIN_IMAGES_PER_SEC` up to the largest single-device rate on the largest cluster the
#: catalog takes
MAX_RUN_IMAGES_PER_SEC = MAX_IMAGES_PER_SEC * MAX_GPUS


def check_images_per_sec(value: float, what: str) -> None:
    """``value`` is a finite throughput in [:data:`MIN_IMAGES_PER_SEC`,
    :data:`MAX_IMAGES_PER_SEC`]; a :class:`~ddlsim.errors.ConfigError` naming ``what`` if not."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not MIN_IMAGES_PER_SEC <= value <= MAX_IMAGES_PER_SEC:
        raise ConfigError(
            f"{what} must be a number of images/s in {MIN_IMAGES_PER_SEC:g}.."
            f"{MAX_IMAGES_PER_SEC:g}, got {shown(value)}"
        )


@dataclass(frozen=True)
class LayerTiming:
    """Measured or modelled time of one layer for one batch: forward and backward seconds, and
    the fp32 bytes of its gradient tensors (0 for a layer without weights)."""

    name: str
    fwd_time_s: float
    bwd_time_s: float
    grad_bytes: int


@dataclass(frozen=True)
class ModelProfile:
    """Per-layer compute times of ``model`` on ``device`` at ``batch_per_gpu`` and ``precision``."""

    model: str
    device: str
    batch_per_gpu: int
    precision: str
    layers: tuple[LayerTiming, ...]
    unattributed_time_s: float
    step_time_s: float
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)
    device_info: dict[str, Any] = field(default_factory=dict, compare=False)
    path: str | None = field(default=None, compare=False)

    @property
    def sum_layers_s(self) -> float:
        """Sum of the per-layer forward and backward times."""
        return math.fsum(la.fwd_time_s + la.bwd_time_s for la in self.layers)

    @property
    def images_per_sec(self) -> float:
        """Single-GPU throughput this calibration implies."""
        return self.batch_per_gpu / self.step_time_s

    def normalized(self) -> ModelProfile:
        """A copy whose layer times and unattributed time add up to ``step_time_s`` exactly
        (scaled by one common factor), so a 1-GPU simulation reproduces the calibration."""
        total = self.sum_layers_s + self.unattributed_time_s
        if total <= 0:
            raise CalibrationError(f"calibration {self.describe()} has no positive time")
        return self.scaled(self.step_time_s / total, keep_step=True)

    def scaled(self, factor: float, *, keep_step: bool = False) -> ModelProfile:
        """All times multiplied by ``factor`` (``step_time_s`` too unless ``keep_step``)."""
        layers = tuple(
            replace(la, fwd_time_s=la.fwd_time_s * factor, bwd_time_s=la.bwd_time_s * factor)
            for la in self.layers
        )
        return replace(
            self,
            layers=layers,
            unattributed_time_s=self.unattributed_time_s * factor,
            step_time_s=self.step_time_s if keep_step else self.step_time_s * factor,
        )

    def describe(self) -> str:
        """Short human description: model, device, batch, precision and source."""
        where = self.path or self.provenance.get("method", "in memory")
        return (
            f"{self.model} on {self.device}, batch {self.batch_per_gpu}, {self.precision} ({where})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of this profile."""
        return {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "batch_per_gpu": self.batch_per_gpu,
            "precision": self.precision,
            "device": {"catalog_id": self.device, **self.device_info},
            "step_time_s": self.step_time_s,
            "unattributed_time_s": self.unattributed_time_s,
            "sum_layers_over_step": self.sum_layers_s / self.step_time_s,
            "provenance": self.provenance,
            "layer_columns": list(LAYER_COLUMNS),
            "layers": [
                [la.name, _round(la.fwd_time_s), _round(la.bwd_time_s), la.grad_bytes]
                for la in self.layers
            ],
        }


def _round(value: float) -> float:
    """Six significant digits: ample for timings, keeps the shipped files small."""
    return float(f"{value:.6g}")


def from_dict(doc: Any, source: str = "<memory>") -> ModelProfile:
    """Validate a calibration document and build the profile; CalibrationError names the problem."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibrationError(f"{source}: not a ddlsim calibration file (no format {FORMAT!r})")
    version = doc.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise CalibrationError(
            f"{source}: calibration schema version {version!r}; this ddlsim reads version "
            f"{SCHEMA_VERSION}"
        )
    fields = _Fields(doc, source)
    device = fields.get("device", dict, "an object")
    if not isinstance(device.get("catalog_id"), str):
        raise fields.bad(
            "device.catalog_id", "must be a string", device.get("catalog_id", _MISSING)
        )
    columns = fields.get("layer_columns", list, "a list")
    if tuple(columns) != LAYER_COLUMNS:
        raise fields.bad("layer_columns", f"must be {list(LAYER_COLUMNS)}", columns)
    provenance = doc.get("provenance") or {}
    if not isinstance(provenance, dict):
        raise fields.bad("provenance", "must be an object", provenance)
    profile = ModelProfile(
        model=fields.get("model", str, "a string"),
        device=device["catalog_id"],
        batch_per_gpu=fields.integer(doc.get("batch_per_gpu", _MISSING), "batch_per_gpu"),
        precision=fields.get("precision", str, "a string"),
        layers=fields.layers(),
        unattributed_time_s=fields.number(
            doc.get("unattributed_time_s", _MISSING), "unattributed_time_s"
        ),
        step_time_s=fields.number(doc.get("step_time_s", _MISSING), "step_time_s"),
        provenance=dict(provenance),
        device_info={k: v for k, v in device.items() if k != "catalog_id"},
        path=None if source == "<memory>" else source,
    )
    return check(profile, source)


_MISSING = object()


class _Fields:
    """Typed reads of a calibration document's fields: a missing or mistyped one is a
    :class:`CalibrationError` naming the field in words (never an exception's repr)."""

    def __init__(self, doc: dict[str, Any], source: str) -> None:
        self.doc, self.source = doc, source

    def bad(self, name: str, rule: str, value: object) -> CalibrationError:
        got = "it is missing" if value is _MISSING else f"got {shown(value)}"
        return CalibrationError(
            f"{self.source}: malformed calibration file: field {name!r} {rule}, {got}"
        )

    def get(self, name: str, kind: type, words: str) -> Any:
        value = self.doc.get(name, _MISSING)
        if not isinstance(value, kind):
            raise self.bad(name, f"must be {words}", value)
        return value

    def number(self, value: object, name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.bad(name, "must be a number", value)
        return float(value)

    def integer(self, value: object, name: str) -> int:
        number = self.number(value, name)
        if not math.isfinite(number) or number != int(number):
            raise self.bad(name, "must be an integer", value)
        return int(number)

    def layers(self) -> tuple[LayerTiming, ...]:
        rows = []
        for i, row in enumerate(self.get("layers", list, "a list of layer rows")):
            name = f"layers[{i}]"
            if not isinstance(row, list) or len(row) != len(LAYER_COLUMNS):
                raise self.bad(name, f"must be a row of {len(LAYER_COLUMNS)} values", row)
            n, f, b, g = row
            rows.append(
                LayerTiming(
                    str(n),
                    self.number(f, f"{name}.fwd_time_s"),
                    self.number(b, f"{name}.bwd_time_s"),
                    self.integer(g, f"{name}.grad_bytes"),
                )
            )
        return tuple(rows)


def check(profile: ModelProfile, source: str) -> ModelProfile:
    """``profile`` after checking it (a file read, or a calibration derived from one): layer
    rows present, a batch >= 1, every time finite and within the physical range
    (:data:`MIN_STEP_TIME_S`, :data:`MAX_TIME_S`); :class:`CalibrationError` naming ``source``
    and the value otherwise."""
    if not profile.layers:
        raise CalibrationError(f"{source}: no layer rows")
    step = profile.step_time_s
    if not (math.isfinite(step) and MIN_STEP_TIME_S <= step <= MAX_TIME_S):
        raise CalibrationError(
            f"{source}: step_time_s must be in {MIN_STEP_TIME_S:g}..{MAX_TIME_S:g} s, got {step:g}"
        )
    if profile.batch_per_gpu < 1:
        raise CalibrationError(f"{source}: batch_per_gpu must be >= 1, got {profile.batch_per_gpu}")
    if not _time_ok(profile.unattributed_time_s):
        raise CalibrationError(
            f"{source}: unattributed_time_s must be in 0..{MAX_TIME_S:g} s, got "
            f"{profile.unattributed_time_s:g}"
        )
    for la in profile.layers:
        for value in (la.fwd_time_s, la.bwd_time_s):
            if not _time_ok(value):
                raise CalibrationError(
                    f"{source}: layer {shown(la.name)} has a time of {value:g} s; a layer time "
                    f"must be in 0..{MAX_TIME_S:g} s"
                )
        if la.grad_bytes < 0:
            raise CalibrationError(
                f"{source}: layer {shown(la.name)} has grad_bytes {la.grad_bytes}"
            )
    if profile.sum_layers_s <= 0:
        raise CalibrationError(
            f"{source}: every layer time is 0 s; a calibration must time its layers"
        )
    return profile


def _time_ok(value: float) -> bool:
    return math.isfinite(value) and 0 <= value <= MAX_TIME_S


def load(path: str | os.PathLike[str]) -> ModelProfile:
    """Read and validate a calibration file (a regular file of at most
    :data:`~ddlsim.inputs.CALIBRATION_MAX_BYTES`, UTF-8 JSON; :mod:`ddlsim.inputs`)."""
    doc = read_json(path, "calibration file", CALIBRATION_MAX_BYTES, CalibrationError)
    return from_dict(doc, str(Path(path)))


def is_calibration_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a readable ddlsim calibration document of this schema version
    (the only kind of existing file a calibration may replace)."""
    try:
        doc = read_json(path, "calibration file", CALIBRATION_MAX_BYTES, CalibrationError)
    except CalibrationError:
        return False
    return (
        isinstance(doc, dict)
        and doc.get("format") == FORMAT
        and doc.get("schema_version") == SCHEMA_VERSION
    )


def save(profile: ModelProfile, path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` to ``path`` atomically (:mod:`ddlsim.atomic`: temp file + rename, never
    a partial file, only a regular file replaced), creating the missing folders.

    An existing file of another schema version (or not a calibration file) is not overwritten.
    """
    p = Path(path)
    if check_replaceable(p).exists() and not is_calibration_file(p):
        raise CalibrationError(
            f"refusing to overwrite {p}: it is not a schema-{SCHEMA_VERSION} calibration file"
        )
    text = json.dumps(profile.to_dict(), separators=(",", ":")) + "\n"
    created = make_parents(p)
    try:
        atomic_write_text(p, text)
    except BaseException:
        remove_empty(created)
        raise
    return p
