"""Regenerate the shipped sample of measured transformer kernels from the full files.

    python scripts/sample_transformer_kernels.py SRC_DIR [--out traces/measured/kernels/transformer]

``SRC_DIR`` holds the full ``gemm.csv``, ``elementwise.csv`` and ``README.md`` parsed from the
published sources the README names (DeepBench, NeuSight, Vidur, LLMCompass, the MAMF table: each
row keeps its ``source_id`` and ``source_locator``). The sample keeps every column the check
reads, plus the row's place in its source, and at most :data:`GEMM_ROWS` GEMM rows and
:data:`ELEMENTWISE_ROWS` element-wise rows per (source, GPU, precision, op), drawn with a fixed
seed (:data:`SEED`) in source order, so the same full files give the same sample. The README is
copied with a note on the sample prepended.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

SEED = 30
GEMM_ROWS = 200
ELEMENTWISE_ROWS = 40
GEMM_COLUMNS = (
    "source_id", "source_locator", "gpu", "precision", "math", "op", "batch", "m", "n", "k",
    "transa", "transb", "time_us", "time_stat", "model", "num_tokens", "tp", "source_op",
)  # fmt: skip
ELEMENTWISE_COLUMNS = (
    "source_id", "source_locator", "gpu", "precision", "op", "source_op", "rows", "cols",
    "numel", "bytes_hint", "time_us", "time_stat", "model", "num_tokens", "tp",
)  # fmt: skip
NOTE = """\
> **Sample shipped with ddlsim.** This folder holds a stratified sample of the full files this
> README describes: at most {gemm} GEMM rows and {elem} element-wise rows per (source, GPU,
> precision, op), drawn with seed {seed} by `scripts/sample_transformer_kernels.py SRC_DIR`
> from the full files, with the columns the check reads (and each row's `source_locator`).
> `model_ops.csv` and `model_e2e.csv` are not shipped. Row counts below are the full files'.

"""


def sample(rows: list[dict[str, str]], per_group: int, seed: int) -> list[dict[str, str]]:
    """At most ``per_group`` rows of each (source, GPU, precision, op), in file order."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, row in enumerate(rows):
        key = (row["source_id"], row["gpu"], row["precision"], row["op"])
        groups.setdefault(key, []).append(i)
    rng = random.Random(seed)
    keep: set[int] = set()
    for key in sorted(groups):
        idx = groups[key]
        keep.update(idx if len(idx) <= per_group else rng.sample(idx, per_group))
    return [rows[i] for i in sorted(keep)]


def write(path: Path, rows: list[dict[str, str]], columns: tuple[str, ...]) -> None:
    """Write ``rows`` with ``columns`` (a column the full file lacks is left empty)."""
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        out.writeheader()
        for row in rows:
            out.writerow({c: row.get(c, "") for c in columns})


def main(argv: list[str] | None = None) -> int:
    """Sample ``SRC_DIR``'s files into ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, help="folder of the full gemm.csv, elementwise.csv, README")
    ap.add_argument("--out", type=Path, default=Path("traces/measured/kernels/transformer"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, per_group, columns in (
        ("gemm.csv", GEMM_ROWS, GEMM_COLUMNS),
        ("elementwise.csv", ELEMENTWISE_ROWS, ELEMENTWISE_COLUMNS),
    ):
        with (args.src / name).open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        kept = sample(rows, per_group, SEED)
        write(args.out / name, kept, columns)
        print(f"{name}: {len(kept)} of {len(rows)} rows", file=sys.stderr)
    readme = (args.src / "README.md").read_text(encoding="utf-8")
    note = NOTE.format(gemm=GEMM_ROWS, elem=ELEMENTWISE_ROWS, seed=SEED)
    (args.out / "README.md").write_text(note + readme, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
