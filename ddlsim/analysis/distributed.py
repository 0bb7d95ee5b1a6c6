"""Running a sweep grid on Dask: a local cluster by default, or an existing scheduler.

Each task evaluates a chunk of configurations with :func:`ddlsim.analysis.sweep.evaluate` (pure,
deterministic), so the rows are identical to a serial run; they are returned in grid order.
Dask is an optional dependency (the ``sweep`` extra), imported only here.

A local cluster leaves nothing behind, finished or interrupted: its scratch space (Dask's
``global.lock`` / ``purge.lock`` / ``worker-*.dirlock`` files) lives in a temporary folder
removed at the end; its worker processes start with Ctrl-C ignored, so that only this process
handles it (closing the cluster) and no worker prints a traceback; Dask's own log messages
(a worker killed at shutdown, a heartbeat to a scheduler that is closing, a cancelled task) are
not printed: a failure of the cluster itself reaches the user as one error line. On Linux its
workers are forked from this process (:data:`FORK_SETTING`), so they start in a fraction of a
second with ddlsim already imported: on 2 cores a 1,000-configuration sweep is then faster on
the local cluster than serially.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ddlsim.analysis.sweep import evaluate, settle_heap
from ddlsim.errors import ConfigError
from ddlsim.extras import require

ProgressFn = Callable[[int, int, float], None]

#: how a local cluster starts its worker processes: on Linux they are forked from this process,
#: which has imported ddlsim (2 workers start in ~0.3 s here, against ~1.7 s for Dask's default
#: "spawn", which starts fresh interpreters that import Dask and ddlsim again); elsewhere Dask's
#: default
FORK_SETTING = "distributed.worker.multiprocessing-method"
#: a local cluster's workers do not sample their tasks' stacks 100 times a second for Dask's
#: dashboard (which a sweep does not open): the sampling slows the configurations down by ~7%
PROFILE_SETTING = "distributed.worker.profile.enabled"
#: Dask's logger (the scheduler, nanny, worker) and the level it is held at during a sweep
DASK_LOGGER = "distributed"
DASK_LOG_LEVEL = logging.CRITICAL


def evaluate_chunk(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Evaluate several configurations in one task (amortises Dask's per-task overhead)."""
    if _OWN_WORKER:  # a worker of the local cluster this module forked (not a user's)
        settle_heap()
    return [evaluate(c) for c in configs]


#: set in a sweep's process before it forks its local cluster's workers, which inherit it
_OWN_WORKER = False


def _chunks(configs: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [configs[i : i + size] for i in range(0, len(configs), size)]


@contextlib.contextmanager
def quiet_dask() -> Iterator[None]:
    """Dask's log messages silenced here and in the worker processes started inside."""
    logger = logging.getLogger(DASK_LOGGER)
    level = logger.level
    key = "DASK_LOGGING__DISTRIBUTED"
    env = os.environ.get(key)
    logger.setLevel(DASK_LOG_LEVEL)
    os.environ[key] = logging.getLevelName(DASK_LOG_LEVEL).lower()
    try:
        yield
    finally:
        logger.setLevel(level)
        if env is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = env


@contextlib.contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Processes started inside ignore SIGINT (Python keeps an inherited SIG_IGN), so Ctrl-C in
    the terminal reaches only this process, which shuts the workers down."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_on_dask(
    configs: list[dict[str, Any]],
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    chunk_size: int | None = None,
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """Evaluate ``configs`` on Dask and return one row per configuration, in order.

    ``scheduler`` is the address of an existing cluster (``tcp://host:8786``); without it a
    ``LocalCluster`` of ``n_workers`` single-threaded processes (default: the CPU count) is
    started and closed. ``progress(done, total, elapsed_s)`` is called as chunks finish.
    """
    require("dask.distributed", "sweep", "ddlsim sweep on Dask (or use --serial)")
    if n_workers is not None and (isinstance(n_workers, bool) or n_workers < 1):
        raise ConfigError(f"--workers must be >= 1, got {n_workers}")
    if not configs:
        return []
    workers = n_workers or os.cpu_count() or 1
    size = chunk_size or max(1, min(50, len(configs) // (4 * workers) or 1))
    import dask

    settings: dict[str, Any] = {}
    if scheduler is None:
        settings[PROFILE_SETTING] = False
        if sys.platform == "linux":
            import ddlsim.api  # noqa: F401  (imported once here, inherited by the forked workers)

            settings[FORK_SETTING] = "fork"
    global _OWN_WORKER
    _OWN_WORKER = FORK_SETTING in settings  # inherited by the workers forked below
    try:
        with (
            quiet_dask(),
            tempfile.TemporaryDirectory(prefix="ddlsim-dask-") as scratch,
            dask.config.set({"temporary-directory": scratch, **settings}),
        ):
            return _run(configs, _chunks(configs, size), scheduler, workers, scratch, progress)
    finally:
        _OWN_WORKER = False


def _run(configs, chunks, scheduler, workers, scratch, progress) -> list[dict[str, Any]]:
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = client = None
    futures: list[Any] = []
    try:
        try:
            if scheduler:
                client = Client(scheduler, timeout="10s")
            else:
                with _children_ignore_sigint():
                    cluster = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        local_directory=scratch,
                    )
                client = Client(cluster)
        except OSError as exc:
            raise ConfigError(f"cannot reach Dask scheduler {scheduler!r}: {exc}") from None
        start = time.perf_counter()
        futures = client.map(evaluate_chunk, chunks, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[list[dict[str, Any]] | None] = [None] * len(chunks)
        done = 0
        try:
            for future in as_completed(futures):
                results[index[future.key]] = future.result()
                done += len(chunks[index[future.key]])
                if progress:
                    progress(done, len(configs), time.perf_counter() - start)
        except Exception as exc:  # the cluster failed (a killed worker, a lost scheduler)
            reason = " ".join(str(exc).split())[:300]
            raise ConfigError(f"the Dask sweep failed: {type(exc).__name__}: {reason}") from None
        return [row for chunk in results for row in chunk or []]
    finally:
        _shutdown(client, cluster, futures)


def _shutdown(client: Any, cluster: Any, futures: list[Any]) -> None:
    """Cancel what is left, close the client and the local cluster; a second Ctrl-C during
    the shutdown is ignored (the workers are being stopped)."""
    with _children_ignore_sigint():
        if client is not None:
            with contextlib.suppress(Exception):
                if futures:
                    client.cancel(futures)
            with contextlib.suppress(Exception):
                client.close()
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close()
