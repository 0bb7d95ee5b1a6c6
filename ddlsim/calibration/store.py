"""Finding the calibration for (model, device, batch, precision): one precedence rule.

Files live at ``<dir>/<device>/<model>/b<batch>-<precision>.json`` in two places: the user
calibration directory (``$DDLSIM_CALIBRATION_DIR``, else ``$XDG_DATA_HOME/ddlsim/calibration``,
else ``~/.local/share/ddlsim/calibration`` -- where ``ddlsim calibrate`` writes) and the
calibrations shipped with the package. The rule:

1. A file given with ``--calibration FILE`` is used, whatever it is: the user asked.
2. Otherwise, of the user's file and the shipped file of the same configuration, the one that
   stands higher wins (:func:`standing`): (a) a file resting on a measurement of this GPU --
   profiled on it, anchored to a throughput measured on it, or corrected by runs measured on
   it -- over (b) ddlsim's own per-layer model of this GPU (or a roofline corrected by other
   GPUs' runs), over (c) a file re-timed from another GPU by roofline ratios (``ddlsim
   calibrate --transfer-to``), which adds the model's GPU-to-GPU ratio error to the other
   GPU's measurement. So a transferred file never outranks a measured, anchored or modelled
   one of the same GPU unless it is given with ``--calibration``.
3. Between two files of the same standing, the user's wins: made on purpose, for this user's
   machine. It *shadows* the shipped one, and the prediction says so (:class:`Choice`, the
   report's calibration lines, ``inputs.calibration.user`` in ``--json``); ``ddlsim
   calibrations`` lists the user's files and what each does.

When no file has the requested batch, each place's nearest batch of the same model, device and
precision (the two weighed by the same rule) is transferred by per-layer roofline ratios
(:mod:`ddlsim.compute.roofline`); the result says so in its provenance (``method:
roofline-batch-transfer``), it is never presented as measured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ddlsim.calibration.profile import ModelProfile, check, load
from ddlsim.calibration.retime import roofline_retime
from ddlsim.errors import CalibrationError
from ddlsim.inputs import CALIBRATION_MAX_BYTES, read_json
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.layers import ModelSpec

_PKG_DIR = Path(__file__).resolve().parents[1]


def shipped_dir() -> Path:
    """Directory of the calibrations shipped with ddlsim (wheel or source checkout)."""
    for candidate in (_PKG_DIR / "_calibration", _PKG_DIR.parent / "calibration"):
        if candidate.is_dir():
            return candidate
    raise CalibrationError(
        f"shipped calibration data not found next to {_PKG_DIR}; reinstall ddlsim"
    )


def user_dir() -> Path:
    """The user calibration directory (searched before the shipped files)."""
    if os.environ.get("DDLSIM_CALIBRATION_DIR"):
        return Path(os.environ["DDLSIM_CALIBRATION_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "ddlsim" / "calibration"


def calibration_path(root: Path, model: str, device: str, batch: int, precision: str) -> Path:
    """Where the file for one (model, device, batch, precision) lives under ``root``."""
    return root / device / model / f"b{batch}-{precision}.json"


def _batches(root: Path, model: str, device: str, precision: str) -> dict[int, Path]:
    folder = root / device / model
    found: dict[int, Path] = {}
    if folder.is_dir():
        for p in folder.glob(f"b*-{precision}.json"):
            stem = p.name[1 : -len(f"-{precision}.json")]
            if stem.isdigit():
                found[int(stem)] = p
    return found


#: the provenance method of a calibration re-timed from another GPU by roofline ratios
DEVICE_TRANSFER = "roofline-device-transfer"
#: the method of a roofline split corrected by measured/roofline ratios, whose ``correction``
#: ``scope`` says of which GPU's runs (``v100-sxm2/fp32``; ``*/fp32``: every GPU's)
CORRECTED = "roofline-corrected"
#: the method of a step timed by ddlsim's own per-layer model with no measured anchor
PER_LAYER_MODEL = "per-layer-model"


@dataclass(frozen=True)
class Choice:
    """The file the search chose for one configuration, and the user's file it weighed:
    ``used`` (the file read), ``user_file`` (the user's file of that configuration, or None),
    ``shadows`` (the shipped file the user's file stands in front of, when it is used) and
    ``passed_over`` (True when the user's file was not used: re-timed from another GPU, behind
    a shipped file calibrated on this one)."""

    used: Path
    user_file: Path | None = None
    shadows: Path | None = None
    passed_over: bool = False
    #: why, in words (what the report prints)
    reason: str = ""

    def to_dict(self) -> dict[str, Any] | None:
        """What ``--json`` records under ``inputs.calibration.user`` (None: no user file)."""
        if self.user_file is None:
            return None
        return {
            "file": str(self.user_file),
            "used": not self.passed_over,
            "shadows": None if self.shadows is None else str(self.shadows),
            "passed_over_for": str(self.used) if self.passed_over else None,
            "reason": self.reason,
            "list_with": "ddlsim calibrations",
        }


def estimate_kind(path: Path) -> str | None:
    """How the calibration file at ``path`` is an estimate rather than a measurement of the GPU
    it is filed under (``<gpu>/<model>/...``): ``re-timed from another GPU``, ``corrected
    by other GPUs' runs`` or ddlsim's per-layer model with no anchor; None when it rests on a
    measurement of that GPU (profiled on it,
    anchored to a throughput measured on it, corrected by its own runs) or says nothing else.
    A file that cannot be read counts as measured: the search reads it and names the fault."""
    try:
        doc = read_json(path, "calibration file", CALIBRATION_MAX_BYTES, CalibrationError)
    except CalibrationError:
        return None
    provenance = doc.get("provenance") if isinstance(doc, dict) else None
    if not isinstance(provenance, dict):
        return None
    method = provenance.get("method")
    if method == DEVICE_TRANSFER:
        return f"re-timed from {provenance.get('from_device', 'another GPU')} by roofline ratios"
    if method == PER_LAYER_MODEL and not provenance.get("anchor"):
        return "ddlsim's per-layer model, no measured run of this GPU behind it"
    if method == CORRECTED:
        correction = provenance.get("correction")
        scope = correction.get("scope") if isinstance(correction, dict) else None
        gpu = path.parent.parent.name
        if not (isinstance(scope, str) and scope.partition("/")[0] == gpu):
            return "a roofline corrected by other GPUs' runs"
    return None


def measured_on_gpu(path: Path) -> bool:
    """Whether the file rests on a measurement of its GPU (:func:`estimate_kind`)."""
    return estimate_kind(path) is None


def standing(path: Path) -> int:
    """2: rests on a measurement of its GPU; 1: ddlsim's model of that GPU (or a roofline
    corrected by other GPUs' runs); 0: re-timed from another GPU (module docstring, rule 2)."""
    kind = estimate_kind(path)
    if kind is None:
        return 2
    return 0 if kind.startswith("re-timed from") else 1


def choose(user: Path | None, shipped: Path | None) -> Choice | None:
    """The precedence rule (module docstring) between the user's file and the shipped file of
    one configuration, either of which may be missing."""
    if user is None:
        return None if shipped is None else Choice(shipped)
    if shipped is None:
        return Choice(user, user_file=user, reason="the only file of this configuration")
    mine, theirs = estimate_kind(user), estimate_kind(shipped)
    gpu = user.parent.parent.name
    if standing(user) < standing(shipped):
        stands = f"rests on measurements of {gpu}" if theirs is None else f"is {theirs} for {gpu}"
        return Choice(
            shipped,
            user_file=user,
            passed_over=True,
            reason=f"yours is an estimate ({mine}); the shipped one {stands}",
        )
    why = (
        "rests on a measurement of"
        if mine is None
        else "is an estimate, as is the shipped one, for"
        if standing(user) == standing(shipped)
        else f"is an estimate ({mine}), above the shipped one ({theirs}), for"
    )
    return Choice(user, user_file=user, shadows=shipped, reason=f"yours {why} {gpu}")


def search(model: str, device: str, batch: int, precision: str) -> tuple[Choice, int] | None:
    """The file to read for (model, device, batch, precision) and its batch: the exact batch
    if either place has it; else each place's nearest batch (the larger on a tie), the two
    weighed by the same rule; None when neither place has the model on that device at that
    precision."""
    places = [
        _nearest(root, model, device, batch, precision) for root in (user_dir(), shipped_dir())
    ]
    if any(p is not None and p[0] == batch for p in places):  # then only files of that batch
        places = [p if p is not None and p[0] == batch else None for p in places]
    user, shipped = places
    choice = choose(user[1] if user else None, shipped[1] if shipped else None)
    if choice is None:
        return None
    used_batch = user[0] if user is not None and choice.used == user[1] else shipped[0]
    return choice, used_batch


def _nearest(
    root: Path, model: str, device: str, batch: int, precision: str
) -> tuple[int, Path] | None:
    """The file of ``root`` with ``batch``, else with the nearest batch (the larger on a tie)."""
    exact = calibration_path(root, model, device, batch, precision)
    if exact.is_file():
        return batch, exact
    candidates = _batches(root, model, device, precision)
    if not candidates:
        return None
    nearest = min(candidates, key=lambda b: (abs(b - batch), -b))
    return nearest, candidates[nearest]


#: calibration files read, by path: (the file's stat signature, its profile)
_LOADED: dict[str, tuple[tuple[int, int, int], ModelProfile]] = {}
#: at most this many files are kept parsed
_LOADED_MAX = 256


def _load(path: Path) -> ModelProfile:
    """:func:`~ddlsim.calibration.profile.load` of ``path``, parsed once while the file is unchanged
    (same inode, size and modification time): a sweep reads the same few files a thousand
    times. Profiles are frozen, so the one object serves every caller."""
    try:
        st = path.stat()
    except OSError:
        return load(path)  # the reader names what is wrong
    key, sig = str(path), (st.st_ino, st.st_size, st.st_mtime_ns)
    got = _LOADED.get(key)
    if got is not None and got[0] == sig:
        return got[1]
    profile = load(path)
    if len(_LOADED) >= _LOADED_MAX:
        _LOADED.clear()
    _LOADED[key] = (sig, profile)
    return profile


def find_profile(model: ModelSpec, device: DeviceSpec, batch: int, precision: str) -> ModelProfile:
    """The calibration to use for ``model`` on ``device`` at ``batch`` and ``precision``."""
    return find_profile_and_choice(model, device, batch, precision)[0]


def find_profile_and_choice(
    model: ModelSpec, device: DeviceSpec, batch: int, precision: str
) -> tuple[ModelProfile, Choice]:
    """:func:`find_profile`, and the :class:`Choice` that picked its file."""
    found = search(model.name, device.id, batch, precision)
    if found is None and device.silicon_of:  # another memory size of a calibrated part
        found = search(model.name, device.silicon_of, batch, precision)
    if found is None:
        roots = [user_dir(), shipped_dir()]
        raise CalibrationError(
            f"no calibration for {model.name} on {device.id} at {precision} in "
            f"{' or '.join(str(r) for r in roots)}; run 'ddlsim calibrate' or pass "
            "--calibration FILE"
        )
    choice, found_batch = found
    profile = _load(choice.used)
    if found_batch != batch:
        profile = transfer_batch(profile, model, device, batch)
    return profile, choice


def transfer_batch(
    profile: ModelProfile, model: ModelSpec, device: DeviceSpec, batch: int
) -> ModelProfile:
    """Re-time ``profile`` for another batch size by per-layer roofline ratios."""
    if batch == profile.batch_per_gpu:
        return profile
    moved = roofline_retime(profile, model, device, device, batch)
    provenance = {
        "method": "roofline-batch-transfer",
        "from_batch": profile.batch_per_gpu,
        "from_file": profile.path,
        "from_method": profile.provenance.get("method"),
    }
    return check(replace(moved, provenance=provenance), f"{profile.describe()} at batch {batch}")
