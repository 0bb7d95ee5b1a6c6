"""One core per worker: CPU pinning and TensorFlow's thread pools, the same in every process.

A Horovod worker started by ``horovodrun`` finds its slot in ``HOROVOD_LOCAL_RANK`` and is
pinned to the ``local_rank``-th core it may run on; the calibration pass is pinned to the first.
TensorFlow then runs one intra-op and one inter-op thread (set before its runtime starts), so a
worker computes on one core whether it trains alone or beside others. Threads created later
(Horovod's background loop, Gloo's TCP I/O, TensorFlow's pools) inherit the pinning.

This module imports neither TensorFlow nor Horovod.
"""

from __future__ import annotations

import os
from types import ModuleType

INTRA_OP_THREADS = 1
INTER_OP_THREADS = 1
#: environment of every measured process: TensorFlow reads these when its runtime starts
THREAD_ENV = {
    "TF_NUM_INTRAOP_THREADS": str(INTRA_OP_THREADS),
    "TF_NUM_INTEROP_THREADS": str(INTER_OP_THREADS),
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}


def usable_cores() -> list[int]:
    """The cores this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def core_for(local_rank: int, cores: list[int] | None = None) -> int:
    """The core of the worker with ``local_rank`` (ranks beyond the cores wrap around)."""
    cores = cores if cores is not None else usable_cores()
    return cores[local_rank % len(cores)]


def pin(core: int) -> None:
    """Pin the calling process (and the threads it starts from now on) to ``core``."""
    os.sched_setaffinity(0, {core})


def pin_worker() -> int:
    """Pin this Horovod worker to its core (from ``HOROVOD_LOCAL_RANK``); returns the core."""
    core = core_for(int(os.environ.get("HOROVOD_LOCAL_RANK", "0")))
    pin(core)
    return core


def configure_tensorflow(tf: ModuleType) -> None:
    """One intra-op and one inter-op thread (call before TensorFlow's runtime starts)."""
    tf.config.threading.set_intra_op_parallelism_threads(INTRA_OP_THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(INTER_OP_THREADS)
