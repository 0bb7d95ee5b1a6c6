"""Sweep grids: reading them (command line or YAML) and checking every value before running.

A grid maps :func:`ddlsim.predict` keywords to lists of values. Names are checked against the
catalogs and vocabularies, numbers against their ranges, so that a typo fails at once with one
line (exit 2) instead of producing a file of error rows. Combinations that are invalid only
together (12 GPUs at 8 per node) still become rows with ``status=error``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.extras import require

#: YAML / command-line spellings that differ from predict()'s keywords
ALIASES = {"batch_per_gpu": "batch", "single_gpu_images_per_sec": "single_gpu_throughput"}


def _names(what: str, valid: Callable[[], Iterable[str]]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        names = tuple(valid())
        if not isinstance(value, str) or value.strip().lower() not in names:
            raise UnknownNameError(what, value, names)
        return value.strip().lower()

    return check


def _int(what: str, low: int, high: int) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"sweep {what} must be an integer in {low}..{high}, got {value!r}")
        return value

    return check


def _float(what: str, low: float, high: float) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(f"sweep {what} must be a number in {low:g}..{high:g}, got {value!r}")
        return value

    return check


def _bool(what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"sweep {what} must be true or false, got {value!r}")

    return check


def _job_field(name: str, words: dict[str, Any] | None = None) -> Callable[[Any], Any]:
    """A value of the job's field ``name``, checked as the job checks it
    (:mod:`ddlsim.config.groups`); ``words`` maps spellings (``none``, ``auto``) to values."""

    def check(value: Any) -> Any:
        from ddlsim.config.groups import JobConfig

        if isinstance(value, str) and value.strip().lower() in (words or {}):
            value = (words or {})[value.strip().lower()]
        try:
            JobConfig.from_kwargs(**{name: value})
        except ConfigError as exc:
            raise ConfigError(f"sweep {name}: {exc}") from None
        return value

    return check


#: the failure model's keywords (:mod:`ddlsim.resilience`), checked as the job checks them
FAILURE_KEYS = {
    "node_mtbf_hours": {"none": 0.0},
    "checkpoint_interval_min": {"auto": None},
    **dict.fromkeys(
        ("checkpoint_GB", "checkpoint_write_GBps", "checkpoint_time_s", "restart_min"),
    ),
    **dict.fromkeys(("rendezvous_s", "replace_min", "mc_draws", "mc_seed")),
}


def _checkers() -> dict[str, Callable[[Any], Any]]:
    from ddlsim.calibration.profile import MAX_IMAGES_PER_SEC, MIN_IMAGES_PER_SEC
    from ddlsim.comm.nccl import NcclVersion
    from ddlsim.compute.kernels import LAYOUTS
    from ddlsim.compute.stack import FRAMEWORKS, FUSIONS
    from ddlsim.config.groups import MAX_CYCLE_TIME_MS
    from ddlsim.engine.simulate import ENGINES
    from ddlsim.execution.horovod import horovod_release
    from ddlsim.execution.schedules import SCHEDULES
    from ddlsim.execution.strategy import (
        ALGORITHMS,
        COMM_METHODS,
        DATA_KINDS,
        NCCL_PROTOCOLS,
        PRECISIONS,
    )
    from ddlsim.resilience.config import OPTIMIZERS, RECOVERIES
    from ddlsim.system import catalog
    from ddlsim.system.specs import TRANSPORTS
    from ddlsim.workload.zoo import MODEL_NAMES

    return {
        "model": _names("model", lambda: MODEL_NAMES),
        "gpu": _names("gpu", catalog.device_names),
        "intra_node": _names("intra_node link", catalog.intra_link_names),
        "inter_node": _names("inter_node network", catalog.inter_link_names),
        "transport": _names("transport", lambda: TRANSPORTS),
        "comm": _names("comm method", lambda: COMM_METHODS),
        "schedule": _names("schedule", lambda: SCHEDULES),
        "partition_mb": _float("partition_mb", 1e-3, 1024),
        "precision": _names("precision", lambda: PRECISIONS),
        "data": _names("data", lambda: DATA_KINDS),
        "algorithm": _names("allreduce algorithm", lambda: ALGORITHMS),
        "nccl_protocol": _names("NCCL protocol", lambda: NCCL_PROTOCOLS),
        "nccl_version": lambda v: str(NcclVersion.parse(v)),
        "horovod_version": lambda v: horovod_release(str(v)).version,
        "engine": _names("engine", lambda: ENGINES),
        "framework": _names("framework", lambda: FRAMEWORKS),
        "layout": _names("layout", lambda: LAYOUTS),
        "fusion": _names("fusion", lambda: FUSIONS),
        "gpus": _int("gpus", 1, 1_000_000),
        "gpus_per_node": _int("gpus_per_node", 1, 64),
        "nics_per_node": _int("nics_per_node", 1, 64),
        "n_ps": _int("n_ps", 1, 100_000),
        "batch": _int("batch", 1, 65536),
        "fusion_threshold_mb": _float("fusion_threshold_mb", 0, 65536),
        "cycle_time_ms": _float("cycle_time_ms", 0, MAX_CYCLE_TIME_MS),
        "single_gpu_throughput": _float(
            "single_gpu_throughput", MIN_IMAGES_PER_SEC, MAX_IMAGES_PER_SEC
        ),
        "epochs": _float("epochs", 1e-9, 1e6),
        "dataset_images": _int("dataset_images", 1, 10**12),
        "hierarchical": _bool("hierarchical"),
        "fp16_allreduce": _bool("fp16_allreduce"),
        "tf32": _bool("tf32"),
        "ps_colocated": _bool("ps_colocated"),
        "network_calibration": _network_calibration,
        "optimizer": _names("optimizer", lambda: OPTIMIZERS),
        "recovery": _names("recovery", lambda: RECOVERIES),
        **{name: _job_field(name, words) for name, words in FAILURE_KEYS.items()},
    }


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


def load_grid_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML grid file: a mapping of parameter -> value or list of values."""
    yaml = require("yaml", "sweep", "a YAML grid")
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"grid file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read grid file {p}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"grid file {p}{where}: invalid YAML") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"grid file {p} must be a mapping of parameter: [values]")
    return doc
