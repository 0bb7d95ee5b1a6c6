"""``ddlsim sweep``: predict every configuration of a grid, on Dask, one row each.

Any predict parameter may take several values on the command line (``--gpus 1 8 64 256
--inter-node 10gbe ib-edr``) or in a YAML file (``--grid study.yaml``; command-line values
override the file's). Rows go to CSV or Parquet (by the output's suffix), written atomically.
Everything is checked before the first configuration runs: the output (folder, extension,
pandas / pyarrow for Parquet), every grid value, and the grid's size (``--max-configs``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import Any

from ddlsim.cli.args import int_at_least, int_in, output_file, scheduler_address
from ddlsim.cli.config_args import PARSERS
from ddlsim.cli.progress import Bar
from ddlsim.config.knobs import KNOBS

#: the knobs a sweep may vary (the knob table's ``sweep`` rows)
_SWEPT = tuple(knob for knob in KNOBS if knob.sweep)
_BOOLEAN_HELP = "true or false"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` sub-command."""
    from ddlsim.tools.analysis.sweep import MAX_CONFIGS, MAX_CONFIGS_LIMIT

    p = sub.add_parser(
        "sweep",
        help="predict a grid of configurations (Dask) into CSV or Parquet",
        description="Predict the cartesian product of the given values; every predict "
        "parameter may take a list. Runs on a local Dask cluster by default. Each row "
        "records its configuration (the 'config' column re-runs it with ddlsim.predict).",
    )
    grid = p.add_argument_group("grid values (one or more each; default: predict's default)")
    for knob in _SWEPT:
        text = knob.help_text
        if knob.annotation == "bool":
            off = "" if knob.switch else " switches it off"
            text = f"{_BOOLEAN_HELP}: {knob.flag} of predict{off}"
        grid.add_argument(
            knob.sweep_flag,
            dest=knob.name,
            type=str if knob.annotation == "bool" else PARSERS[knob.parse],
            nargs="+",
            default=None,
            metavar="V",
            help=f"values of predict's {knob.flag}: {text}" if knob.annotation != "bool" else text,
        )
    p.add_argument(
        "--grid",
        metavar="FILE.yaml",
        help="YAML mapping parameter -> value or list of values (flags override it)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file(".csv", ".parquet", stdout=True),
        metavar="OUT",
        help="rows to write: .csv, .parquet (pandas + pyarrow), or - (CSV on stdout)",
    )
    p.add_argument(
        "--scheduler",
        type=scheduler_address,
        metavar="ADDRESS",
        help="an existing Dask scheduler, tcp://host:port",
    )
    p.add_argument(
        "--workers",
        type=int_at_least(1),
        default=None,
        help="local Dask worker processes (default: one per usable core; at most 4 per core "
        "and what half the available memory holds at 100 MB each)",
    )
    p.add_argument("--serial", action="store_true", help="no Dask: evaluate in this process")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary line")
    p.add_argument(
        "--max-configs",
        type=int_in(1, MAX_CONFIGS_LIMIT),
        default=MAX_CONFIGS,
        metavar="N",
        help=f"refuse a grid of more configurations (default: {MAX_CONFIGS:,}; at most "
        f"{MAX_CONFIGS_LIMIT:,}: the rows are held until written, ~11 KB each; 1,000 "
        "fast-engine configurations take about 6 s on 2 cores)",
    )
    p.set_defaults(func=run)


def write_table(rows: list[dict[str, Any]], path: str) -> None:
    """Write sweep rows to ``path``: Parquet for ``.parquet``, else CSV (atomic either way)."""
    from ddlsim.tools.analysis.sweep import write_rows

    if path.lower().endswith(".parquet"):
        from ddlsim.tools.analysis.sweep import write_parquet

        write_parquet(rows, path)
    else:
        write_rows(rows, path)


def run(args: argparse.Namespace) -> int:
    """Run ``ddlsim sweep``."""
    from ddlsim.cli.applies import note_one_gpu_nodes, warn_inapplicable_grid
    from ddlsim.inputs import GRID_MAX_BYTES, check_input
    from ddlsim.tools.analysis.grid import load_grid_file, normalise_grid
    from ddlsim.tools.analysis.sweep import (
        check_grid_size,
        expand_grid,
        grid_size,
        parquet_modules,
    )

    if args.workers is not None and not args.serial and args.scheduler is None:
        from ddlsim.tools.analysis.distributed import check_workers

        check_workers(args.workers)
    if args.output.lower().endswith(".parquet"):
        parquet_modules()  # pandas and pyarrow present: fail before the work
    if args.grid:  # a FIFO, a device or a huge file is refused before the YAML reader opens it
        check_input(args.grid, "grid file", GRID_MAX_BYTES)
    raw: dict[str, Any] = load_grid_file(args.grid) if args.grid else {}
    for knob in _SWEPT:
        values = getattr(args, knob.name)
        if values is not None:
            raw[knob.name] = values
    grid = normalise_grid(raw)
    check_grid_size(grid, args.max_configs)  # counted from the list lengths: nothing built
    total = grid_size(grid)
    bar = None if args.quiet else Bar()
    try:
        if args.serial:
            rows = _run_serial(expand_grid(grid, max_configs=args.max_configs), total, bar)
        else:
            from ddlsim.tools.analysis.distributed import run_on_dask

            rows = run_on_dask(
                expand_grid(grid, max_configs=args.max_configs),
                total=total,
                scheduler=args.scheduler,
                n_workers=args.workers,
                progress=bar,
            )
    finally:
        if bar:
            bar.close()
    write_table(rows, args.output)
    # the configurations again, made from the grid in the same order: not held beside the rows
    split: list[str] = []  # what --intra-node none made of each configuration, if anything
    warn_inapplicable_grid(
        _noting_one_gpu_nodes(config, row if row["status"] == "ok" else None, split)
        for config, row in zip(expand_grid(grid, max_configs=args.max_configs), rows, strict=True)
    )
    if split:
        what = f"{len(split)} configuration(s), e.g. " if len(split) > 1 else ""
        note_one_gpu_nodes(split[0], what)
    failed = sum(1 for r in rows if r["status"] != "ok")
    if not args.quiet:
        print(f"{len(rows)} configurations, {failed} failed -> {args.output}", file=sys.stderr)
    return 0


def _noting_one_gpu_nodes(
    config: dict[str, Any], row: dict[str, Any] | None, split: list[str]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(config, row)`` as they are, after adding to ``split`` what ``--intra-node none``
    made of the configuration (:func:`ddlsim.api.one_gpu_nodes`), if anything."""
    from ddlsim.api import one_gpu_nodes

    became = one_gpu_nodes(config, row) if row is not None else None
    if became:
        split.append(became)
    return config, row


def _run_serial(configs: Iterable[dict[str, Any]], total: int, bar: Bar | None) -> list[Any]:
    """Evaluate ``configs`` in this process, in order, one row each."""
    from ddlsim.tools.analysis.sweep import evaluate, settle_heap

    rows = []
    settle_heap()
    start = time.perf_counter()
    for i, config in enumerate(configs, 1):
        rows.append(evaluate(config))
        if bar:
            bar(i, total, time.perf_counter() - start)
    return rows
