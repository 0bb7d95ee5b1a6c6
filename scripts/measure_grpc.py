"""Measure TensorFlow's gRPC tensor transfer rate between two tasks on this host.

A parameter-server task (its own process) holds a float32 variable of 4, 64 or 411 MiB (411
MiB = VGG-16's fc6 weights); a worker task (this process) pulls it (``RecvTensor`` from the
PS) and pushes one of its own to the PS, each consumed by a trivial slice so that no compute
rides on the transfer. Loopback has no link limit: what binds is the host's gRPC path
(serialisation into gRPC buffers, copies, HTTP/2 framing, on both tasks' CPUs).

    python scripts/measure_grpc.py            # writes traces/grpc/transfer.json

Each (size, direction) is timed over repeated session runs after a warm-up; the file records
the median over 5 rounds, the host and the TensorFlow version. ``ddlsim.comm.ps.GRPC_TASK_Bps``
cites it.

It also runs under a TensorFlow 1.x of 2017 in its own Python (no ddlsim import needed there;
``python3.6 -m venv v && v/bin/pip install --no-deps tensorflow==1.3.0 numpy==1.16.6
protobuf==3.19.6 six``), writing to another file:

    v/bin/python scripts/measure_grpc.py --out traces/grpc/transfer_tf1.3.json

so that both releases are measured on one host (the module keeps to Python 3.6's syntax).
"""

import datetime
import json
import multiprocessing as mp
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path

try:
    from ddlsim.tools.calibrate.tf_env import cpu_name
except (ImportError, SyntaxError):  # a 2017 TensorFlow's Python, without ddlsim

    def cpu_name() -> str:
        """The host CPU's model name (``/proc/cpuinfo``)."""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
        return platform.machine()


OUT = Path(__file__).resolve().parents[1] / "traces" / "grpc" / "transfer.json"
SIZES_MIB = (4, 64, 411)
ROUNDS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _cluster(ports) -> dict:
    return {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]}


def _v1(tf):
    """TensorFlow's graph-mode API: ``tf.compat.v1`` from 1.13 on, ``tf`` itself before."""
    return getattr(getattr(tf, "compat", None), "v1", tf)


def _serve_ps(ports) -> None:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import tensorflow as tf

    spec = tf.train.ClusterSpec(_cluster(ports))
    _v1(tf).train.Server(spec, job_name="ps", task_index=0).join()


def _time_s(session, op, mib: int) -> float:
    session.run(op)
    reps = max(3, 1200 // mib)
    start = time.perf_counter()
    for _ in range(reps):
        session.run(op)
    return (time.perf_counter() - start) / reps


def _round(server, tf) -> dict:
    rates = {}
    for mib in SIZES_MIB:
        n = mib * 2**20 // 4
        graph = tf.Graph()
        with graph.as_default():
            with tf.device("/job:ps/task:0/cpu:0"):
                # named per size: a TensorFlow 1.x server keeps variables across sessions
                remote = tf.Variable(tf.zeros([n]), name=f"ps_{mib}MiB")
            with tf.device("/job:worker/task:0/cpu:0"):
                local = tf.Variable(tf.ones([n]), name=f"worker_{mib}MiB")
                pull = tf.identity(remote)[:1]  # the PS's tensor crosses to the worker
            with tf.device("/job:ps/task:0/cpu:0"):
                push = tf.identity(local)[:1]  # the worker's tensor crosses to the PS
            with _v1(tf).Session(server.target, graph=graph) as session:
                session.run(_v1(tf).global_variables_initializer())
                for name, op in (("pull", pull), ("push", push)):
                    rates[f"{mib}MiB_{name}"] = mib * 2**20 / _time_s(session, op, mib)
    return rates


def main() -> int:
    """Measure, write traces/grpc/transfer.json (or ``--out PATH``), print the medians."""
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else OUT
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    ports = (_free_port(), _free_port())
    ps = mp.get_context("spawn").Process(target=_serve_ps, args=(ports,), daemon=True)
    ps.start()
    import tensorflow as tf

    if hasattr(tf, "compat") and hasattr(tf.compat, "v1"):
        tf.compat.v1.disable_eager_execution()
    spec = tf.train.ClusterSpec(_cluster(ports))
    server = _v1(tf).train.Server(spec, job_name="worker", task_index=0)
    rounds = [_round(server, tf) for _ in range(ROUNDS)]
    ps.terminate()
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    doc = {
        "what": "TensorFlow gRPC tensor transfer between a PS task and a worker task (two "
        "processes) on one host over loopback, bytes per second, median of "
        f"{ROUNDS} rounds; pull = PS -> worker, push = worker -> PS",
        "command": " ".join(["python", "scripts/measure_grpc.py", *sys.argv[1:]]),
        "date": datetime.date.today().isoformat(),
        "host": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "tensorflow": tf.__version__,
        "rate_Bps": {key: round(value) for key, value in medians.items()},
        "rounds_Bps": [{k: round(v) for k, v in r.items()} for r in rounds],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    for key, value in medians.items():
        print(f"{key:>12}: {value / 1e9:5.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
