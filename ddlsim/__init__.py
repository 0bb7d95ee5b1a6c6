"""ddlsim — discrete-event simulator of distributed synchronous-SGD training.

Three inputs, one pipeline: a workload (model + per-layer compute calibration), a cluster (GPUs,
links, network) and a strategy (Horovod/NCCL/MPI/parameter servers and their knobs).
:func:`ddlsim.predict` joins them; everything else sees one input. Units are SI throughout
(seconds, bytes, bytes/second).
"""

__version__ = "0.1.0"

__all__ = ["Prediction", "__version__", "predict", "prepare"]


def __getattr__(name: str) -> object:
    """``ddlsim.predict`` / ``ddlsim.prepare`` / ``ddlsim.Prediction``, imported on first use so
    that ``import ddlsim`` stays light."""
    if name in ("predict", "prepare", "Prediction"):
        from ddlsim import api

        return getattr(api, name)
    raise AttributeError(f"module 'ddlsim' has no attribute {name!r}")
