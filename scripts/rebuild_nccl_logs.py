"""Rebuild nccl-tests logs from the numbers of traces/measured/collectives/nccl_tests.csv.

Only for the setups the tests feed to ``ddlsim calibrate network`` (the CSV keeps the numbers,
not the logs). Each log has the layout nccl-tests prints: the NCCL version line (where the CSV
states a version), the environment echo of what the setup forced, one rank line per GPU, the
size table and the footer. What the CSV does not keep is marked in the log itself: host names
(``node0``...), PIDs and bus ids are placeholders, and the in-place columns repeat the
out-of-place ones (the calibrator reads only the out-of-place time). Run from the repository
root: ``python scripts/rebuild_nccl_logs.py`` (writes traces/measured/collectives/logs/).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "traces/measured/collectives/nccl_tests.csv"
OUT = ROOT / "traces/measured/collectives/logs"

#: setup -> (file name, device name as the driver prints it, environment echo lines)
SETUPS = {
    "S15_aws_p3dn_efa_2x8_awsdoc": (
        "S15_all_reduce_perf.log",
        "Tesla V100-SXM2-32GB",
        ["NCCL INFO NCCL_TREE_THRESHOLD set by environment to 0", "NCCL INFO NET/OFI Using EFA"],
    ),
    "S16_aws_g4dn8xl_socket_2x1": (
        "S16_all_reduce_perf.log",
        "Tesla T4",
        ["NCCL INFO NET/Socket : Using [0]eth0:<address not kept>"],
    ),
    "S08_aws_p4d_efa_4x8": (
        "S08_all_reduce_perf.log",
        "A100-SXM4-40GB",
        ["NCCL INFO NET/OFI Using EFA"],
    ),
}


def _row(size: int, time_us: float, algbw: float, busbw: float) -> str:
    count = size // 4
    oop = f"{time_us:8.1f} {algbw:7.2f} {busbw:7.2f}  0e+00"
    return f"{size:12d} {count:13d}     float     sum {oop} {oop}"


def rebuild(setup: str, rows: list[dict[str, str]]) -> str:
    """The log text of one setup."""
    _, device, env = SETUPS[setup]
    first = rows[0]
    nodes, per = int(first["nodes"]), int(first["gpus_per_node"])
    version = re.match(r"\d+\.\d+\.\d+", first["nccl_version"] or "")
    lines = [
        f"# rebuilt by scripts/rebuild_nccl_logs.py from {CSV.relative_to(ROOT)} ({setup}):",
        "# host names, pids and bus ids are placeholders; in-place columns repeat out-of-place",
        f"# source: {first['source']}",
        f"# nThread 1 nGpus 1 minBytes {min(int(r['size_bytes']) for r in rows)} maxBytes "
        f"{max(int(r['size_bytes']) for r in rows)} step: 2(factor) warmup iters: 5 iters: 20 "
        "validation: 1",
        "#",
        "# Using devices",
    ]
    for rank in range(nodes * per):
        lines.append(
            f"#   Rank {rank:2d} Pid {1000 + rank:6d} on      node{rank // per} device "
            f"{rank % per:2d} [0x00] {device}"
        )
    if version:
        lines.append(f"node0:1000:1000 [0] NCCL INFO NCCL version {version[0]}")
    lines += [f"node0:1000:1000 [0] {e}" for e in env]
    lines += [
        "#",
        "#                                                 out-of-place                       "
        "in-place",
        "#       size         count    type   redop     time   algbw   busbw  error     time   "
        "algbw   busbw  error",
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  "
        "(GB/s)  (GB/s)",
    ]
    timed = sorted((r for r in rows if r["time_us"]), key=lambda r: int(r["size_bytes"]))
    for r in timed:
        lines.append(
            _row(
                int(r["size_bytes"]),
                float(r["time_us"]),
                float(r["algbw_GBps"]),
                float(r["busbw_GBps"]),
            )
        )
    avg = sum(float(r["busbw_GBps"]) for r in timed) / len(timed)
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {avg:.4f}",
        "#",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write every rebuilt log."""
    with CSV.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    OUT.mkdir(parents=True, exist_ok=True)
    for setup, (name, _, _) in SETUPS.items():
        mine = [r for r in rows if r["setup_id"] == setup and "anomalous" not in r["note"]]
        (OUT / name).write_text(rebuild(setup, mine), encoding="utf-8")
        print(f"wrote {OUT / name} ({len(mine)} rows)")


if __name__ == "__main__":
    main()
