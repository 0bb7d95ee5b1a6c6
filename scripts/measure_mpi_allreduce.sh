#!/usr/bin/env bash
# Measure the host side of Horovod's MPI allreduce on this machine: Open MPI's float summation on
# one core (MPI_Reduce_local) and a 2-rank MPI_Allreduce of 256 MiB over shared memory (vader)
# and TCP loopback, with Open MPI's AVX op component (4.1 and later) and without it (the plain C
# loops of earlier releases). Writes the medians of 5 runs each to traces/mpi/allreduce.json,
# which docs/design.md compares with the host rate the MPI model assumes (host_reduce_Bps).
# Installs Debian's Open MPI if mpicxx is missing.
# Usage: bash scripts/measure_mpi_allreduce.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mpicxx >/dev/null; then
  apt-get install -y -q libopenmpi-dev openmpi-bin >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicxx -O2 -o "$work/allreduce_bench" scripts/allreduce_bench.cpp
run() {  # $1 = btl, then extra mpirun options (--mca op ^avx: without the AVX op component)
  local btl=$1
  shift
  for i in 1 2 3 4 5; do
    mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl "self,$btl" "$@" \
      "$work/allreduce_bench" 256 5 | tail -n 1
  done
}
run vader >"$work/vader_avx.jsonl"
run vader --mca op ^avx >"$work/vader_base.jsonl"
run tcp >"$work/tcp_avx.jsonl"
run tcp --mca op ^avx >"$work/tcp_base.jsonl"
mkdir -p traces/mpi
python3 - "$work" <<'PY'
import sys
sys.path.insert(0, "scripts")
from mpi_host import header, load_runs, medians, write
work = sys.argv[1]
out = header("Open MPI float MPI_SUM on one core (reduce_local_Bps: bytes of input per second), "
             "memcpy on one core (copy_Bps: bytes of the buffer per second) "
             "and a 2-rank MPI_Allreduce of 256 MiB (allreduce_algbw_Bps: buffer bytes per "
             "second), 2 ranks on 2 cores; best of 5 repetitions per run, median of 5 runs",
             "bash scripts/measure_mpi_allreduce.sh")
for key in ("vader_avx", "vader_base", "tcp_avx", "tcp_base"):
    out[key] = medians(load_runs(work, key + ".jsonl"), ("reduce_local_Bps", "allreduce_algbw_Bps", "copy_Bps"))
write("traces/mpi/allreduce.json", out)
for key in ("vader_avx", "vader_base", "tcp_avx", "tcp_base"):
    print(key, {k: f"{v / 1e9:.2f} GB/s" for k, v in out[key].items() if k != "runs"})
PY
