"""Where ``ddlsim calibrate`` writes, checked before any profiling, and the writing itself.

:func:`check_writable` checks that the output directory takes files (creating nothing);
:func:`check_destination` refuses to replace anything but a schema-1 calibration file (a
corrupt file, or one of another schema, is left alone and named); :func:`save` writes
atomically through
:func:`ddlsim.calibration.profile.save` (temporary file + rename: an interrupted write leaves no
partial file) and returns the summary row.
"""

from __future__ import annotations

from pathlib import Path

from ddlsim.atomic import check_folder, check_replaceable
from ddlsim.calibration import profile as profile_io
from ddlsim.calibration.profile import ModelProfile
from ddlsim.calibration.store import calibration_path, choose, shipped_dir, user_dir
from ddlsim.errors import CalibrationError
from ddlsim.tools.calibrate.progress import SummaryRow


def check_writable(folder: Path) -> None:
    """``folder`` exists and takes files, or can be created (nothing is created here: the
    folders appear with the first file written, so an interrupted run leaves none behind)."""
    check_folder(folder, "cannot write calibration files to")


def check_destination(path: Path) -> None:
    """An existing file at ``path`` must be a schema-1 calibration (it will be replaced)."""
    if not check_replaceable(path).exists():
        return
    if not profile_io.is_calibration_file(path):
        raise CalibrationError(
            f"refusing to overwrite {path}: it is not a schema-{profile_io.SCHEMA_VERSION} "
            "ddlsim calibration file (corrupt, or another schema); move it away or choose "
            "another --output"
        )


def uncatalogued(device: str) -> str | None:
    """Why ``ddlsim predict`` cannot use a calibration file of ``device``, where it cannot
    (:func:`ddlsim.calibration.use.catalogued`): a device the catalog does not know."""
    from ddlsim.system import catalog

    if device in catalog.device_names():
        return None
    return (
        f"device {device!r} is not in the device catalog (predict refuses it); profile again "
        "with --catalog-id GPU to record it under the catalog device it stands for "
        "(epyc-zen4-core: one core of this project's CPU)"
    )


def precedence_notes(rows: list[SummaryRow], root: Path) -> str:
    """What ``ddlsim predict`` will do with the files just written to ``root`` when it is the
    user calibration directory (the rule of :mod:`ddlsim.calibration.store`): use one in place of
    the shipped file it shadows, or pass a transferred one over for a shipped file calibrated
    on that GPU; and a file for a device the catalog does not know (``--device cpu`` without
    ``--catalog-id``), which predict refuses, wherever it is written."""
    unusable = [
        f"note: predict cannot use {row.path}: {why}\n"
        for row in rows
        if (why := uncatalogued(row.device)) is not None
    ]
    return "".join(unusable) + _shadow_notes(rows, root)


def _shadow_notes(rows: list[SummaryRow], root: Path) -> str:
    """:func:`precedence_notes` of the files predict searches (in the user directory)."""
    try:
        searched = root.resolve() == user_dir().resolve()
    except OSError:
        searched = False
    if not searched:
        return ""
    lines = []
    for row in rows:
        path = Path(row.path)
        shipped = calibration_path(shipped_dir(), row.model, row.device, row.batch, row.precision)
        choice = choose(path, shipped if shipped.is_file() else None)
        if choice is None or (choice.shadows is None and not choice.passed_over):
            continue
        if choice.passed_over:
            lines.append(
                f"note: predict keeps using the shipped {shipped}, not {path}: {choice.reason}; "
                "give yours with --calibration to use it"
            )
        else:
            lines.append(
                f"note: predict now uses {path} in place of the shipped {shipped}: {choice.reason}"
            )
    if lines:
        lines.append("note: 'ddlsim calibrations' lists your files; delete one to stop using it")
    return "".join(f"{line}\n" for line in lines)


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
