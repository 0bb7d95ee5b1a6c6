"""Running a sweep grid on Dask: a local cluster by default, or an existing scheduler.

Each task evaluates a chunk of configurations with :func:`ddlsim.tools.analysis.sweep.evaluate`
(pure,
deterministic), so the rows are identical to a serial run; they are returned in grid order.
Dask is an optional dependency (the ``sweep`` extra), imported only here.

A local cluster leaves nothing behind, finished or interrupted: its scratch space (Dask's
``global.lock`` / ``purge.lock`` / ``worker-*.dirlock`` files) lives in a temporary folder
removed at the end; its worker processes start with Ctrl-C and SIGTERM blocked
(:func:`ddlsim.signals.held_for_children`), so that only this process handles them (closing
the cluster, exit 130 or 143) and no worker prints a traceback, and a Ctrl-C while the cluster
starts stops the sweep once it has started (nothing is written); Dask's own log messages
(a worker killed at shutdown, a heartbeat to a scheduler that is closing, a cancelled task) are
not printed: a failure of the cluster itself reaches the user as one error line. On Linux its
workers are forked from this process (:data:`FORK_SETTING`), so they start in a fraction of a
second with ddlsim already imported: on 2 cores a 1,000-configuration sweep is then faster on
the local cluster than serially.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ddlsim import signals
from ddlsim.errors import ConfigError, shown
from ddlsim.extras import require
from ddlsim.tools.analysis.sweep import evaluate, settle_heap

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
#: most local workers per usable core: a worker is one single-threaded, CPU-bound process, so
#: more than a few per core only add memory and start-up time (64 workers on 2 cores: +2.9 GB
#: and 29 s for 2 configurations)
WORKERS_PER_CORE = 4
#: memory one local worker holds: measured here, 8 workers after a ResNet-50 configuration
#: each, 87 MB resident (65 MB of it their own) and MemAvailable 592 MB lower; rounded up
WORKER_MEMORY_BYTES = 100e6
#: share of the available memory the local workers may take together
WORKER_MEMORY_SHARE = 0.5
#: chunks submitted ahead per worker: the configurations are made from the grid as chunks are
#: submitted, so at most this many chunks per worker are held, never the whole grid
CHUNKS_IN_FLIGHT_PER_WORKER = 4


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def max_local_workers() -> tuple[int, str]:
    """The most local workers this machine runs usefully, and why: :data:`WORKERS_PER_CORE`
    per usable core, and no more than :data:`WORKER_MEMORY_SHARE` of the available memory
    holds at :data:`WORKER_MEMORY_BYTES` each."""
    from ddlsim.engine.budget import available_memory_bytes

    cores = usable_cores()
    limit, why = cores * WORKERS_PER_CORE, f"{WORKERS_PER_CORE} per core, {cores} core(s)"
    available = available_memory_bytes()
    if available is not None:
        by_memory = max(1, int(available * WORKER_MEMORY_SHARE // WORKER_MEMORY_BYTES))
        if by_memory < limit:
            limit = by_memory
            why = (
                f"{WORKER_MEMORY_SHARE:.0%} of the {available / 1e9:.1f} GB available at "
                f"{WORKER_MEMORY_BYTES / 1e6:.0f} MB per worker"
            )
    return limit, why


def check_workers(n_workers: object) -> None:
    """``n_workers`` is a whole number from 1 to :func:`max_local_workers`; a
    :class:`ConfigError` (one line, naming the limit and why) otherwise."""
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise ConfigError(f"--workers must be an integer >= 1, got {shown(n_workers)}")
    limit, why = max_local_workers()
    if n_workers > limit:
        raise ConfigError(
            f"--workers {n_workers:,} is more than this machine runs usefully: at most "
            f"{limit} ({why}); use fewer, or a Dask cluster (--scheduler)"
        )


def evaluate_chunk(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Evaluate several configurations in one task (amortises Dask's per-task overhead)."""
    if _OWN_WORKER:  # a worker of the local cluster this module forked (not a user's)
        settle_heap()
    return [evaluate(c) for c in configs]


#: set in a sweep's process before it forks its local cluster's workers, which inherit it
_OWN_WORKER = False


def _chunks(configs: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """``configs`` in lists of ``size``, made as they are consumed."""
    it = iter(configs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


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


def run_on_dask(
    configs: Iterable[dict[str, Any]],
    *,
    total: int | None = None,
    scheduler: str | None = None,
    n_workers: int | None = None,
    chunk_size: int | None = None,
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """Evaluate ``configs`` on Dask and return one row per configuration, in order.

    ``configs`` may be a stream (:func:`~ddlsim.tools.analysis.sweep.expand_grid`): chunks are
    taken from it as earlier ones finish, :data:`CHUNKS_IN_FLIGHT_PER_WORKER` per worker at
    most; ``total`` is its length (default ``len(configs)``). ``scheduler`` is the address of
    an existing cluster (``tcp://host:8786``); without it a ``LocalCluster`` of ``n_workers``
    single-threaded processes (default: one per usable core; at most
    :func:`max_local_workers`) is started and closed. ``progress(done, total, elapsed_s)`` is
    called as chunks finish.
    """
    require("dask.distributed", "sweep", "ddlsim sweep on Dask (or use --serial)")
    if n_workers is not None and scheduler is None:
        check_workers(n_workers)
    total = len(configs) if total is None else total  # type: ignore[arg-type]
    if not total:
        return []
    workers = n_workers or min(usable_cores(), max_local_workers()[0])
    size = chunk_size or max(1, min(50, total // (4 * workers) or 1))
    import dask

    settings: dict[str, Any] = {}
    if scheduler is None:
        settings[PROFILE_SETTING] = False
        if sys.platform == "linux":
            import ddlsim.api  # noqa: F401  (imported once here, inherited by the forked workers)

            settings[FORK_SETTING] = "fork"
    global _OWN_WORKER
    _OWN_WORKER = FORK_SETTING in settings  # inherited by the workers forked below
    plan = _Plan(_chunks(configs, size), total, workers * CHUNKS_IN_FLIGHT_PER_WORKER)
    try:
        with (
            quiet_dask(),
            tempfile.TemporaryDirectory(prefix="ddlsim-dask-") as scratch,
            dask.config.set({"temporary-directory": scratch, **settings}),
        ):
            return _run(plan, scheduler, workers, scratch, progress)
    finally:
        _OWN_WORKER = False


class _Plan:
    """The chunks to run (a stream), how many configurations they hold, and how many chunks
    may be submitted at once."""

    def __init__(self, chunks: Iterator[list[dict[str, Any]]], total: int, window: int):
        self.chunks, self.total, self.window = chunks, total, window


def _connect(scheduler: str | None, workers: int, scratch: str) -> tuple[Any, Any]:
    """A client of ``scheduler``, or of a local cluster started here (and the cluster)."""
    from dask.distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler, timeout="10s"), None
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # starting it unblocks signals: start it first
    cluster = None
    try:
        with signals.held_for_children():  # a Ctrl-C during the start is raised at its end
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                local_directory=scratch,
            )
        return Client(cluster), cluster
    except BaseException:  # interrupted, or the client failed: close the cluster that started
        _shutdown(None, cluster, [])
        raise


def _run(plan: _Plan, scheduler, workers, scratch, progress) -> list[dict[str, Any]]:
    from dask.distributed import as_completed

    cluster = client = None
    pending: dict[str, tuple[int, Any]] = {}  # future key -> (chunk index, future)
    try:
        try:
            client, cluster = _connect(scheduler, workers, scratch)
        except Exception as exc:  # unreachable, refused, timed out, or a protocol Dask lacks
            reason = " ".join(str(exc).split())[:200]
            raise ConfigError(f"cannot reach Dask scheduler {shown(scheduler)}: {reason}") from None
        start = time.perf_counter()
        numbered = enumerate(plan.chunks)

        def submit(n: int) -> list[Any]:
            new = []
            for i, chunk in itertools.islice(numbered, n):
                future = client.submit(evaluate_chunk, chunk, pure=False)
                pending[future.key] = (i, future)
                new.append(future)
            return new

        results: dict[int, list[dict[str, Any]]] = {}
        done = 0
        try:
            queue = as_completed(submit(plan.window))
            for future in queue:
                i, _ = pending.pop(future.key)
                results[i] = future.result()
                done += len(results[i])
                for nxt in submit(1):
                    queue.add(nxt)
                if progress:
                    progress(done, plan.total, time.perf_counter() - start)
        except Exception as exc:  # the cluster failed (a killed worker, a lost scheduler)
            reason = " ".join(str(exc).split())[:300]
            raise ConfigError(f"the Dask sweep failed: {type(exc).__name__}: {reason}") from None
        return [row for i in range(len(results)) for row in results[i]]
    finally:
        _shutdown(client, cluster, [f for _, f in pending.values()])


def _shutdown(client: Any, cluster: Any, futures: list[Any]) -> None:
    """Cancel what is left, close the client and the local cluster; a second Ctrl-C or
    SIGTERM during the shutdown is ignored (the workers are being stopped)."""
    with signals.ignored():
        if client is not None:
            with contextlib.suppress(Exception):
                if futures:
                    client.cancel(futures)
            with contextlib.suppress(Exception):
                client.close()
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close()
