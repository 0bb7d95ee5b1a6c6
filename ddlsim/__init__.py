"""ddlsim — discrete-event simulator of distributed synchronous-SGD training.

A job is three inputs (:mod:`ddlsim.config.groups`): a workload (model, batch, precision, per-layer
compute calibration), a system (GPUs, links, network) and an execution (Horovod / NCCL / MPI /
parameter servers and their knobs), simulated as its simulation settings say.
:func:`ddlsim.predict` joins them; everything else sees one input. Units are SI throughout
(seconds, bytes, bytes/second).
"""

from ddlsim.version import __version__

_API = ("Prediction", "predict", "predict_job", "prepare", "rerun")
_CONFIG = (
    "ExecutionConfig",
    "JobConfig",
    "SimulationConfig",
    "SystemConfig",
    "WorkloadConfig",
    "job",
)
__all__ = ["__version__", *_API, *_CONFIG]
#: modules that moved in 0.2 (the folders that show the architecture): their former names,
#: kept for one release (``from ddlsim import reproduce`` still works)
_MOVED = {"reproduce": "ddlsim.config.record", "track_record": "ddlsim.config.track_record"}


def __getattr__(name: str) -> object:
    """``ddlsim.predict``, ``ddlsim.prepare``, ``ddlsim.job``, ... imported on first use so that
    ``import ddlsim`` stays light."""
    if name in _API:
        from ddlsim import api

        return getattr(api, name)
    if name in _CONFIG:
        from ddlsim.config import groups as config

        return getattr(config, name)
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(
            f"ddlsim.{name} moved to {_MOVED[name]}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(_MOVED[name])
    raise AttributeError(f"module 'ddlsim' has no attribute {name!r}")
