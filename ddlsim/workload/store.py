"""Finding the calibration for (model, device, batch, precision).

Search order: an explicit file (``--calibration FILE``); the user calibration directory
(``$DDLSIM_CALIBRATION_DIR``, else ``$XDG_DATA_HOME/ddlsim/calibration``, else
``~/.local/share/ddlsim/calibration`` — where ``ddlsim calibrate`` writes); the calibrations
shipped with the package. Files live at ``<dir>/<device>/<model>/b<batch>-<precision>.json``.

When no file has the requested batch, the nearest batch of the same model, device and precision
is transferred by per-layer roofline ratios (:mod:`ddlsim.workload.roofline`); the result says so
in its provenance (``method: roofline-batch-transfer``), it is never presented as measured.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ddlsim.cluster.specs import DeviceSpec
from ddlsim.errors import CalibrationError
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.profile import ModelProfile, load
from ddlsim.workload.retime import roofline_retime

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


#: calibration files read, by path: (the file's stat signature, its profile)
_LOADED: dict[str, tuple[tuple[int, int, int], ModelProfile]] = {}
#: at most this many files are kept parsed
_LOADED_MAX = 256


def _load(path: Path) -> ModelProfile:
    """:func:`~ddlsim.workload.profile.load` of ``path``, parsed once while the file is unchanged
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
    roots = [user_dir(), shipped_dir()]
    for root in roots:
        exact = calibration_path(root, model.name, device.id, batch, precision)
        if exact.is_file():
            return _load(exact)
    for root in roots:
        candidates = _batches(root, model.name, device.id, precision)
        if candidates:
            nearest = min(candidates, key=lambda b: (abs(b - batch), -b))
            return transfer_batch(_load(candidates[nearest]), model, device, batch)
    raise CalibrationError(
        f"no calibration for {model.name} on {device.id} at {precision} in "
        f"{' or '.join(str(r) for r in roots)}; run 'ddlsim calibrate' or pass --calibration FILE"
    )


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
    return replace(moved, provenance=provenance)
