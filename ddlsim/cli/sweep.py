"""``ddlsim sweep``: predict every configuration of a grid, on Dask, one row each.

Any predict parameter may take several values on the command line (``--gpus 1 8 64 256
--inter-node 10gbe ib-edr``) or in a YAML file (``--grid study.yaml``; command-line values
override the file's). Rows go to CSV or Parquet (by the output's suffix), written atomically.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: (flag, predict() keyword, argparse type)
_PARAMS = (
    ("--model", "model", str),
    ("--gpu", "gpu", str),
    ("--gpus", "gpus", int),
    ("--gpus-per-node", "gpus_per_node", int),
    ("--intra-node", "intra_node", str),
    ("--inter-node", "inter_node", str),
    ("--transport", "transport", str),
    ("--comm", "comm", str),
    ("--n-ps", "n_ps", int),
    ("--batch", "batch", int),
    ("--precision", "precision", str),
    ("--data", "data", str),
    ("--fusion-threshold-mb", "fusion_threshold_mb", float),
    ("--cycle-time-ms", "cycle_time_ms", float),
    ("--hierarchical", "hierarchical", str),
    ("--algorithm", "algorithm", str),
    ("--nccl-version", "nccl_version", str),
    ("--nccl-protocol", "nccl_protocol", str),
    ("--horovod-version", "horovod_version", str),
    ("--fp16-allreduce", "fp16_allreduce", str),
    ("--engine", "engine", str),
    ("--epochs", "epochs", float),
    ("--dataset-images", "dataset_images", int),
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` sub-command."""
    p = sub.add_parser(
        "sweep",
        help="predict a grid of configurations (Dask) into CSV or Parquet",
        description="Predict the cartesian product of the given values; every predict "
        "parameter may take a list. Runs on a local Dask cluster by default.",
    )
    for flag, dest, kind in _PARAMS:
        p.add_argument(flag, dest=dest, type=kind, nargs="+", default=None, metavar="V")
    p.add_argument("--grid", metavar="FILE.yaml", help="YAML mapping parameter -> values")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help=".csv or .parquet")
    p.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler")
    p.add_argument("--workers", type=int, default=None, help="local Dask workers (default: CPUs)")
    p.add_argument("--serial", action="store_true", help="no Dask: evaluate in this process")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _progress(done: int, total: int, elapsed_s: float) -> None:
    width = 30
    filled = int(width * done / total)
    remaining_s = elapsed_s / done * (total - done) if done else 0.0
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} configurations "
        f"{elapsed_s:6.1f} s elapsed, {remaining_s:6.1f} s left"
    )
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def write_table(rows: list[dict[str, Any]], path: str) -> None:
    """Write sweep rows to ``path``: Parquet for ``.parquet``, else CSV (atomic either way)."""
    from ddlsim.analysis.sweep import COLUMNS, write_rows
    from ddlsim.errors import ConfigError

    if not path.endswith(".parquet"):
        write_rows(rows, path)
        return
    try:
        import pandas as pd
    except ImportError:
        raise ConfigError(
            "Parquet output needs pandas and pyarrow: pip install 'ddlsim[sweep]'"
        ) from None
    from ddlsim.atomic import atomic_write

    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    try:
        atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))
    except ImportError:
        raise ConfigError("Parquet output needs pyarrow: pip install 'ddlsim[sweep]'") from None


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim sweep``."""
    from ddlsim.analysis.grid import load_grid_file, normalise_grid
    from ddlsim.analysis.sweep import evaluate, expand_grid
    from ddlsim.errors import ConfigError

    raw: dict[str, Any] = load_grid_file(args.grid) if args.grid else {}
    for _, dest, _ in _PARAMS:
        values = getattr(args, dest)
        if values is not None:
            raw[dest] = values
    configs = expand_grid(normalise_grid(raw))
    if not (args.output.endswith((".csv", ".parquet")) or args.output == "-"):
        raise ConfigError(f"output must end in .csv or .parquet, got {args.output!r}")
    progress = None if args.quiet else _progress
    if args.serial:
        rows = []
        import time

        start = time.perf_counter()
        for i, config in enumerate(configs, 1):
            rows.append(evaluate(config))
            if progress:
                progress(i, len(configs), time.perf_counter() - start)
    else:
        from ddlsim.analysis.distributed import run_on_dask

        rows = run_on_dask(
            configs, scheduler=args.scheduler, n_workers=args.workers, progress=progress
        )
    write_table(rows, args.output)
    failed = sum(1 for r in rows if r["status"] != "ok")
    if not args.quiet:
        print(f"{len(rows)} configurations, {failed} failed -> {args.output}", file=sys.stderr)
    return 0
