#!/usr/bin/env bash
# Measure rank 0's CPU time per control message of a Horovod-0.9-style negotiation (one MPI
# message per ready tensor to rank 0; responses sent back one by one) with Open MPI over shared
# memory (standing for kernel-bypass RDMA) and over TCP loopback (sockets), and write the medians
# of 5 runs each to traces/mpi/coordinator.json. ddlsim.execution.horovod.CONTROL_MESSAGE_S cites them.
# Installs Debian's Open MPI if mpicxx is missing. Usage: bash scripts/measure_coordinator.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mpicxx >/dev/null; then
  apt-get install -y -q libopenmpi-dev openmpi-bin >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicxx -O2 -o "$work/coordbench" scripts/coordinator_bench.cpp
run() {  # $1 = btl
  for i in 1 2 3 4 5; do
    mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl "self,$1" \
      "$work/coordbench" 200 20 300 | tail -n 1
  done
}
run vader >"$work/shm.jsonl"
run tcp >"$work/tcp.jsonl"
mkdir -p traces/mpi
python3 - "$work" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from mpi_host import header, load_runs, medians, write
work = sys.argv[1]
out = header("rank 0's seconds per control message (Horovod 0.9-0.12 negotiation pattern), "
             "2 ranks on 2 cores, 200 requests + DONE in, 20 responses + DONE out per cycle, "
             "300 cycles; median of 5 runs", "bash scripts/measure_coordinator.sh")
for key, name in (("shm", "shm.jsonl"), ("tcp", "tcp.jsonl")):
    out[key] = medians(load_runs(work, name), ("recv_s_per_message", "send_s_per_message"))
write("traces/mpi/coordinator.json", out)
print(json.dumps({k: out[k] for k in ("shm", "tcp")}, default=str)[:400])
PY
