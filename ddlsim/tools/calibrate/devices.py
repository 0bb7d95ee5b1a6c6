"""Which local device a calibration runs on, and which catalog GPU it is.

``ddlsim calibrate`` names its target either by catalog GPU (``--gpu p100``: some GPU that
TensorFlow sees must be that model) or by TensorFlow device (``--device cpu`` / ``gpu:N``).
:func:`catalog_match` maps the name TensorFlow reports (``Tesla P100-SXM2-16GB``,
``NVIDIA A100-SXM4-40GB``) to a catalog id by GPU family and form factor; a device the catalog
does not list is recorded under a slug of its name, and the CPU under ``cpu``. This module does
not import TensorFlow; :mod:`ddlsim.tools.calibrate.tf_env` lists the devices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.system import catalog

CPU_CATALOG_ID = "cpu"
_FAMILIES = ("k80", "p100", "p40", "v100", "a100", "h100", "a10")
_FORM = re.compile(r"\b(pcie|sxm\d?)\b")
_SIZE_GB = re.compile(r"\b(\d+)\s*gb\b")
_DEVICE_FLAG = re.compile(r"^(cpu|gpu)(?::(\d+))?$")


@dataclass(frozen=True)
class LocalDevice:
    """A device the framework sees: its name there (TensorFlow ``/device:GPU:0``, PyTorch
    ``cuda:0``), kind, index and the name it reports."""

    framework_name: str
    kind: str  # "cpu" | "gpu"
    index: int
    reported_name: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    def describe(self) -> str:
        """``GPU:0 (Tesla K80)``."""
        return f"{self.kind.upper()}:{self.index} ({self.reported_name})"


@dataclass(frozen=True)
class Target:
    """The device to profile and the catalog id its calibration files are written under."""

    device: LocalDevice
    catalog_id: str
    catalog_id_overridden: bool = False


def _canonical_ids() -> list[str]:
    aliases = catalog.device_aliases()
    return [n for n in catalog.device_names() if n not in aliases]


def _form(text: str) -> str | None:
    m = _FORM.search(text.lower().replace("-", " "))
    return m.group(1) if m else None


def catalog_match(reported_name: str) -> str | None:
    """The catalog GPU id of a device TensorFlow reports as ``reported_name``, or None: by GPU
    family, then form factor (a name without one is not a PCIe card: NVIDIA names those
    "PCIe"), then memory size where that still leaves several (A100 40 GB / 80 GB)."""
    text = reported_name.lower()
    family = next((f for f in _FAMILIES if re.search(rf"\b{f}\b", text)), None)
    if family is None:
        return None
    form = _form(text)
    candidates = [i for i in _canonical_ids() if i == family or i.startswith(f"{family}-")]
    if form and f"{family}-{form}" in candidates:
        return f"{family}-{form}"
    fits = []
    for cid in candidates:
        cat_form = _form(f"{cid} {catalog.device(cid).name}")
        if (form == "pcie") != (cat_form == "pcie"):
            continue
        if form is None or cat_form is None or cat_form == form:
            fits.append(cid)
    size = _SIZE_GB.search(text.replace("-", " "))
    if len(fits) > 1 and size:
        gib = int(size.group(1))
        fits = [c for c in fits if round(catalog.device(c).memory_bytes / 2**30) == gib]
    return fits[0] if len(fits) == 1 else None


def slug(reported_name: str) -> str:
    """A file-system-safe id for a device the catalog does not list."""
    return re.sub(r"[^a-z0-9]+", "-", reported_name.lower()).strip("-") or "unknown"


def parse_device_flag(text: str) -> tuple[str, int]:
    """``cpu`` -> ("cpu", 0); ``gpu:1`` -> ("gpu", 1); anything else is a ConfigError."""
    m = _DEVICE_FLAG.match(text.strip().lower())
    if not m:
        raise ConfigError(f"--device must be cpu or gpu:N, got {text!r}")
    return m.group(1), int(m.group(2) or 0)


def _seen(devices: list[LocalDevice]) -> str:
    return ", ".join(d.describe() for d in devices) or "no device"


def resolve_target(
    devices: list[LocalDevice],
    *,
    gpu: str | None = None,
    device: str | None = None,
    catalog_id: str | None = None,
    cuda_build: bool = True,
    framework: str = "TensorFlow",
    gpu_install: str = "pip install 'tensorflow[and-cuda]==2.18.1'",
) -> Target:
    """The device to profile among ``devices`` (what ``framework`` sees), from ``--gpu NAME``
    or ``--device cpu|gpu:N``; ``catalog_id`` (a catalog GPU) overrides the id recorded.
    ``cuda_build`` False (a CPU-only framework build) adds ``gpu_install`` to the error."""
    override = catalog.device(catalog_id).id if catalog_id else None
    if gpu is not None:
        wanted = catalog.device(gpu)
        for d in devices:
            if d.kind == "gpu" and catalog_match(d.reported_name) == wanted.id:
                return Target(d, override or wanted.id, override is not None)
        others = [d for d in devices if d.kind == "gpu"]
        hint = (
            f"'ddlsim calibrate --gpu {catalog_match(others[0].reported_name)}' or "
            if others and catalog_match(others[0].reported_name)
            else ""
        )
        instead = (
            f"run {hint}'ddlsim calibrate --device gpu:{others[0].index}'"
            if others
            else "run 'ddlsim calibrate --device cpu' to profile the CPU"
        )
        build = (
            ""
            if cuda_build
            else f" (this {framework} is a CPU-only build; a GPU needs '{gpu_install}')"
        )
        raise ConfigError(
            f"no {wanted.id} GPU ({wanted.name}) is visible to {framework}{build}; it sees: "
            f"{_seen(devices)}; {instead}"
        )
    kind, index = parse_device_flag(device or "cpu")
    for d in devices:
        if d.kind == kind and d.index == index:
            if kind == "cpu":
                cid = CPU_CATALOG_ID
            else:
                cid = catalog_match(d.reported_name) or slug(d.reported_name)
            return Target(d, override or cid, override is not None)
    build = (
        "" if cuda_build or kind == "cpu" else f" (a CPU-only build; a GPU needs '{gpu_install}')"
    )
    raise ConfigError(
        f"{framework} sees no device {kind}:{index}{build}; it sees: {_seen(devices)}; "
        "run 'ddlsim calibrate --device cpu' to profile the CPU"
    )
