"""Where ``ddlsim calibrate`` writes, checked before any profiling, and the writing itself.

:func:`check_writable` checks that the output directory takes files (creating nothing);
:func:`check_destination` refuses to replace anything but a schema-1 calibration file (a
corrupt file, or one of another schema, is left alone and named); :func:`save` writes
atomically through
:func:`ddlsim.workload.profile.save` (temporary file + rename: an interrupted write leaves no
partial file) and returns the summary row.
"""

from __future__ import annotations

import json
from pathlib import Path

from ddlsim.atomic import check_folder, check_replaceable
from ddlsim.calibrate.progress import SummaryRow
from ddlsim.errors import CalibrationError
from ddlsim.workload import profile as profile_io
from ddlsim.workload.profile import ModelProfile
from ddlsim.workload.store import calibration_path


def check_writable(folder: Path) -> None:
    """``folder`` exists and takes files, or can be created (nothing is created here: the
    folders appear with the first file written, so an interrupted run leaves none behind)."""
    check_folder(folder, "cannot write calibration files to")


def check_destination(path: Path) -> None:
    """An existing file at ``path`` must be a schema-1 calibration (it will be replaced)."""
    if not check_replaceable(path).exists():
        return
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != profile_io.FORMAT
        or doc.get("schema_version") != profile_io.SCHEMA_VERSION
    ):
        raise CalibrationError(
            f"refusing to overwrite {path}: it is not a schema-{profile_io.SCHEMA_VERSION} "
            "ddlsim calibration file (corrupt, or another schema); move it away or choose "
            "another --output"
        )


def save(profile: ModelProfile, root: Path) -> SummaryRow:
    """Write ``profile`` under ``root`` (``<device>/<model>/b<batch>-<precision>.json``)."""
    path = calibration_path(
        root, profile.model, profile.device, profile.batch_per_gpu, profile.precision
    )
    try:
        profile_io.save(profile, path)
    except OSError as exc:
        raise CalibrationError(f"cannot write {path}: {exc.strerror or exc}") from None
    return SummaryRow(
        profile.model,
        profile.batch_per_gpu,
        profile.precision,
        profile.device,
        str(profile.provenance.get("method")),
        profile.step_time_s,
        profile.sum_layers_s / profile.step_time_s,
        str(path),
    )
