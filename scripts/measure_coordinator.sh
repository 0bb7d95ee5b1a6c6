#!/usr/bin/env bash
# Measure rank 0's CPU time per control message of a Horovod-0.9-style negotiation (one MPI
# message per ready tensor to rank 0; responses sent back one by one) with Open MPI over shared
# memory (standing for kernel-bypass RDMA) and over TCP loopback (sockets), and write the medians
# of 5 runs each to traces/mpi/coordinator.json. ddlsim.horovod.CONTROL_MESSAGE_S cites them.
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
import json, platform, statistics, subprocess, sys, datetime, os
work = sys.argv[1]
def load(name):
    return [json.loads(line) for line in open(os.path.join(work, name)) if line.strip()]
out = {"what": "rank 0's seconds per control message (Horovod 0.9-0.12 negotiation pattern), "
               "2 ranks on 2 cores, 200 requests + DONE in, 20 responses + DONE out per cycle, "
               "300 cycles; median of 5 runs",
       "command": "bash scripts/measure_coordinator.sh",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                    if l.startswith("model name")), platform.machine()),
       "cores": os.cpu_count(),
       "mpi": subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
       "load_average": os.getloadavg()}
for key, name in (("shm", "shm.jsonl"), ("tcp", "tcp.jsonl")):
    runs = load(name)
    out[key] = {"recv_s_per_message": statistics.median(r["recv_s_per_message"] for r in runs),
                "send_s_per_message": statistics.median(r["send_s_per_message"] for r in runs),
                "runs": runs}
with open("traces/mpi/coordinator.json", "w") as f:
    json.dump(out, f, indent=2)
    f.write("\n")
print(json.dumps({k: out[k] for k in ("shm", "tcp")}, default=str)[:400])
PY
