"""Running a sweep grid on Dask: a local cluster by default, or an existing scheduler.

Each task evaluates a chunk of configurations with :func:`ddlsim.analysis.sweep.evaluate` (pure,
deterministic), so the rows are identical to a serial run; they are returned in grid order.
Dask is an optional dependency (``pip install ddlsim[sweep]``), imported only here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ddlsim.analysis.sweep import evaluate
from ddlsim.errors import ConfigError

ProgressFn = Callable[[int, int, float], None]


def evaluate_chunk(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Evaluate several configurations in one task (amortises Dask's per-task overhead)."""
    return [evaluate(c) for c in configs]


def _chunks(configs: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [configs[i : i + size] for i in range(0, len(configs), size)]


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
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ConfigError(
            "ddlsim sweep needs Dask: pip install 'ddlsim[sweep]' (or use --serial)"
        ) from None
    if not configs:
        return []
    workers = n_workers or os.cpu_count() or 1
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    size = chunk_size or max(1, min(50, len(configs) // (4 * workers) or 1))
    chunks = _chunks(configs, size)
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="10s")
        else:
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            )
            client = Client(cluster)
    except OSError as exc:
        raise ConfigError(f"cannot reach Dask scheduler {scheduler!r}: {exc}") from None
    try:
        start = time.perf_counter()
        futures = client.map(evaluate_chunk, chunks, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[list[dict[str, Any]] | None] = [None] * len(chunks)
        done = 0
        for future in as_completed(futures):
            results[index[future.key]] = future.result()
            done += len(chunks[index[future.key]])
            if progress:
                progress(done, len(configs), time.perf_counter() - start)
        return [row for chunk in results for row in chunk or []]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
