"""The settings ``ddlsim validate`` applies to every row, checked when they are made.

A bad value raises :class:`~ddlsim.errors.ConfigError` naming it, before any row is predicted
(predict's own checks would otherwise turn it into the same skip reason on every row).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from ddlsim.comm.mpi import MpiRelease
from ddlsim.config.groups import ExecutionConfig
from ddlsim.engine.sync import DEFAULT_HOST_CONTENTION, DEFAULT_RANK_SIGMA, SyncTerms
from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.execution.strategy import DEFAULT_BATCH_PER_GPU, PRECISIONS, Strategy
from ddlsim.units import MiB

ENGINES = ("fast", "detailed")
MAX_BATCH_PER_GPU = 65536


@dataclass(frozen=True)
class ValidateOptions:
    """Settings applied to every row; ``None`` leaves predict's default.

    Passed to :func:`ddlsim.predict`: ``engine``, ``fusion_threshold_mb``, ``cycle_time_ms``,
    ``rank_sigma``, ``host_contention``, ``interference``, ``nccl_version``,
    ``horovod_version``, ``mpi`` (a row's own release cells win over these:
    :mod:`ddlsim.tools.validate.stack_cells`). Cell fillers (each noted on the rows
    it fills):
    ``assume_baseline_batch`` (an empty ``batch_per_gpu`` takes the baseline's),
    ``assume_batch`` (an empty ``batch_per_gpu`` that the baseline does not state either),
    ``assume_precision`` (an empty ``precision``), ``assume_inter_node`` and
    ``assume_nics_per_node`` (the network of a multi-node row that states none, and its NICs
    per node: such rows carry the assumption). ``absolute``: every row with a measured
    throughput, single-GPU rows included, is predicted from ddlsim's own per-layer compute
    model, with no measured anchor. ``network_calibration``: a file of ``ddlsim calibrate
    network``, given to predict for the rows on the network it measured.
    """

    engine: str = "fast"
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    rank_sigma: float | None = None
    host_contention: float | None = None
    interference: bool = True
    nccl_version: str | None = None
    horovod_version: str | None = None
    mpi: str | None = None
    assume_baseline_batch: bool = False
    assume_batch: int | None = None
    assume_precision: str | None = None
    assume_inter_node: str | None = None
    assume_nics_per_node: int | None = None
    absolute: bool = False
    network_calibration: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UnknownNameError("engine", self.engine, ENGINES)
        batch = self.assume_batch
        if batch is not None and (
            isinstance(batch, bool)
            or not isinstance(batch, numbers.Integral)
            or not 1 <= batch <= MAX_BATCH_PER_GPU
        ):
            raise ConfigError(
                f"assumed batch per GPU must be an integer in 1..{MAX_BATCH_PER_GPU}, got {batch!r}"
            )
        if self.assume_precision is not None and self.assume_precision not in PRECISIONS:
            raise UnknownNameError("assumed precision", self.assume_precision, PRECISIONS)
        if self.assume_inter_node is not None:
            from ddlsim.system import catalog

            catalog.network(self.assume_inter_node)  # an unknown name is one error
        nics = self.assume_nics_per_node
        if nics is not None and (
            isinstance(nics, bool) or not isinstance(nics, numbers.Integral) or not 1 <= nics <= 64
        ):
            raise ConfigError(f"assumed NICs per node must be an integer in 1..64, got {nics!r}")
        if nics is not None and self.assume_inter_node is None:
            raise ConfigError("--assume-nics-per-node needs --assume-inter-node")
        # the job's execution checks the fusion threshold's and cycle time's ranges, Strategy
        # the NCCL and Horovod releases
        ExecutionConfig(
            fusion_threshold_mb=self.fusion_threshold_mb, cycle_time_ms=self.cycle_time_ms
        )
        knobs: dict[str, object] = {"batch_per_gpu": batch or DEFAULT_BATCH_PER_GPU}
        if self.nccl_version is not None:
            knobs["nccl_version"] = self.nccl_version
        if self.horovod_version is not None:
            knobs["horovod_version"] = self.horovod_version
        if self.mpi is not None:
            knobs["mpi"] = str(MpiRelease.parse(self.mpi))
        if self.fusion_threshold_mb is not None:
            knobs["fusion_threshold_bytes"] = _finite(self.fusion_threshold_mb, "fusion") * MiB
        if self.cycle_time_ms is not None:
            knobs["cycle_time_s"] = _finite(self.cycle_time_ms, "cycle time") / 1e3
        Strategy(**knobs)  # type: ignore[arg-type]
        if self.network_calibration is not None:
            from ddlsim.calibration.network import load

            load(self.network_calibration)  # a bad file: one error before any row
        SyncTerms(
            DEFAULT_RANK_SIGMA if self.rank_sigma is None else self.rank_sigma,
            DEFAULT_HOST_CONTENTION if self.host_contention is None else self.host_contention,
            bool(self.interference),
        )

    def predict_kwargs(self) -> dict[str, object]:
        """The keyword arguments of :func:`ddlsim.predict` these settings give every row."""
        kwargs: dict[str, object] = {"engine": self.engine, "interference": self.interference}
        for name in (
            "fusion_threshold_mb",
            "cycle_time_ms",
            "rank_sigma",
            "host_contention",
            "nccl_version",
            "horovod_version",
            "mpi",
        ):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        return kwargs


def _finite(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        raise ConfigError(f"{what} must be a number, got {value!r}")
    return float(value)
