"""``ddlsim calibrations``: the user's own calibration files and what each does to predictions.

Lists every file in the user calibration directory (``$DDLSIM_CALIBRATION_DIR``, else
``~/.local/share/ddlsim/calibration``: where ``ddlsim calibrate`` writes) with its
configuration, its method and, by the precedence rule of :mod:`ddlsim.calibration.store`, whether
``ddlsim predict`` uses it -- shadowing the shipped file of the same configuration, or as the
only one -- or passes it over (re-timed from another GPU, behind a shipped file calibrated on
that GPU), or cannot use (a device the catalog does not know, such as ``cpu``: predict refuses
it). Deleting a file stops its use; pointing ``DDLSIM_CALIBRATION_DIR`` at an empty
folder sets them all aside.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DESCRIPTION = (
    "List your own calibration files (the user calibration directory, where 'ddlsim "
    "calibrate' writes) and whether 'ddlsim predict' uses each: a file resting on a "
    "measurement of its GPU wins over an estimate (re-timed from another GPU, or corrected by "
    "other GPUs' runs); between two of the same standing yours wins over the shipped one (it "
    "shadows it). Delete a file to stop using it."
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``calibrations`` sub-command."""
    p = sub.add_parser(
        "calibrations",
        help="list your own calibration files and whether predict uses them",
        description=DESCRIPTION,
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def user_files() -> tuple[Path, list[dict[str, Any]]]:
    """The user calibration directory and one entry per calibration file in it."""
    from ddlsim.calibration.store import user_dir

    root = user_dir()
    entries = []
    if root.is_dir():
        for path in sorted(root.glob("*/*/b*-*.json")):
            entries.append(_entry(root, path))
    return root, entries


def _entry(root: Path, path: Path) -> dict[str, Any]:
    from ddlsim.calibration.profile import load
    from ddlsim.calibration.store import calibration_path, choose, shipped_dir
    from ddlsim.errors import CalibrationError
    from ddlsim.tools.calibrate.output import uncatalogued

    device, model = path.parent.parent.name, path.parent.name
    entry: dict[str, Any] = {"file": str(path), "gpu": device, "model": model}
    try:
        prof = load(path)
    except CalibrationError as exc:
        return {**entry, "status": "unreadable", "reason": " ".join(str(exc).split())}
    shipped = calibration_path(shipped_dir(), model, device, prof.batch_per_gpu, prof.precision)
    same_place = calibration_path(root, model, device, prof.batch_per_gpu, prof.precision)
    choice = choose(path, shipped if shipped.is_file() else None)
    entry.update(
        batch=prof.batch_per_gpu,
        precision=prof.precision,
        method=prof.provenance.get("method"),
    )
    unusable = uncatalogued(prof.device)
    if same_place != path or prof.model != model or prof.device != device:
        entry.update(status="not searched", reason="its name or folder is not its configuration")
    elif unusable is not None:
        entry.update(status="not usable by predict", reason=unusable)
    elif choice is not None and choice.passed_over:
        entry.update(status="passed over", shipped=str(shipped), reason=choice.reason)
    else:
        entry.update(
            status="used",
            shipped=str(shipped) if shipped.is_file() else None,
            reason=choice.reason if choice is not None else "",
        )
    return entry


def _line(e: dict[str, Any]) -> str:
    if e["status"] == "unreadable":
        return f"  {e['file']}\n      unreadable: {e['reason']}"
    what = f"{e['model']} b{e['batch']} {e['precision']} on {e['gpu']}, {e['method']}"
    if e["status"] == "used":
        does = f"used, shadowing {e['shipped']}" if e["shipped"] else "used (no shipped file)"
        does += f" ({e['reason']})" if e["shipped"] else ""
    elif e["status"] == "not usable by predict":
        does = f"not usable by predict: {e['reason']}"
    elif e["status"] == "passed over":
        does = f"passed over for {e['shipped']}: {e['reason']} (--calibration FILE uses it)"
    else:
        does = f"not searched: {e['reason']}"
    return f"  {e['file']}\n      {what}: {does}"


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim calibrations``."""
    root, entries = user_files()
    if args.json:
        json.dump({"user_dir": str(root), "files": entries}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not entries:
        print(f"no calibration files of yours in {root}: predict uses the shipped ones")
        return 0
    print(f"your calibration files, in {root} (DDLSIM_CALIBRATION_DIR):")
    for entry in entries:
        print(_line(entry))
    print(
        "delete a file to stop using it; DDLSIM_CALIBRATION_DIR=<an empty folder> sets them "
        "all aside"
    )
    return 0
