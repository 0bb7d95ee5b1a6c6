"""Probes of this host's raw figures: TCP loopback, one core's memory bandwidth and SGEMM rate.

``python -m ddlsim.tools.hvdlocal.probes`` prints one JSON object:

- ``loopback``: one TCP stream over 127.0.0.1 between two processes pinned to the first two
  cores (``TCP_NODELAY``, as Gloo sets it): ``bandwidth_Bps`` = best of ``reps`` transfers of
  256 MiB (sent with ``sendall`` from one buffer, received with ``recv_into`` 4 MiB chunks,
  timed to the receiver's 1-byte acknowledgement); ``latency_s`` = half the median round trip
  of a 1-byte ping-pong. These are the figures ``iperf``-style tools report, the nominal the
  Gloo ring's efficiency is measured against.
- ``memory``: on one pinned core, ``a += b`` over float32 arrays of 64 MiB each (twice the
  32 MiB L3 of the development machine, so from DRAM): ``bandwidth_Bps`` counts the three
  streams (two read, one written), STREAM's "Add" convention, best of ``reps``.
- ``sgemm``: a 2048 x 2048 float32 matrix product on one pinned core (NumPy's BLAS, one
  thread), FLOP/s = 2 n^3 / time, best of ``reps``.

Only the standard library and NumPy; no TensorFlow, no Horovod.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
from typing import Any

from ddlsim.tools.hvdlocal.workers import THREAD_ENV, core_for, pin, usable_cores

STREAM_BYTES = 256 * 2**20
CHUNK_BYTES = 4 * 2**20
PINGS = 2000
ARRAY_BYTES = 64 * 2**20
GEMM_N = 2048


def _receiver(port_queue: Any, core: int, reps: int) -> None:
    pin(core)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port_queue.put(server.getsockname()[1])
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    view = memoryview(bytearray(CHUNK_BYTES))
    for _ in range(reps):
        got = 0
        while got < STREAM_BYTES:
            got += conn.recv_into(view, min(CHUNK_BYTES, STREAM_BYTES - got))
        conn.sendall(b"k")
    for _ in range(PINGS):
        conn.recv(1)
        conn.sendall(b"p")
    conn.close()
    server.close()


def loopback(reps: int = 5) -> dict[str, Any]:
    """TCP loopback throughput and latency between processes on the first two cores."""
    cores = usable_cores()
    a, b = core_for(0, cores), core_for(1, cores)
    ctx = mp.get_context("fork")
    ports = ctx.Queue()
    child = ctx.Process(target=_receiver, args=(ports, b, reps))
    child.start()
    try:
        pin(a)
        conn = socket.create_connection(("127.0.0.1", ports.get(timeout=30)))
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = memoryview(bytearray(STREAM_BYTES))
        rates = []
        for _ in range(reps):
            t0 = time.perf_counter()
            conn.sendall(data)
            conn.recv(1)
            rates.append(STREAM_BYTES / (time.perf_counter() - t0))
        rtts = []
        for _ in range(PINGS):
            t0 = time.perf_counter()
            conn.sendall(b"x")
            conn.recv(1)
            rtts.append(time.perf_counter() - t0)
        conn.close()
    finally:
        child.join(timeout=60)
    return {
        "cores": [a, b],
        "bandwidth_Bps": max(rates),
        "bandwidth_samples_Bps": [round(r) for r in rates],
        "latency_s": statistics.median(rtts) / 2,
        "stream_bytes": STREAM_BYTES,
        "pings": PINGS,
    }


def memory(reps: int = 10) -> dict[str, Any]:
    """One core's STREAM-Add-style memory bandwidth (three streams counted)."""
    import numpy as np

    pin(core_for(0))
    n = ARRAY_BYTES // 4
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    np.add(x, y, out=x)
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.add(x, y, out=x)
        rates.append(3 * ARRAY_BYTES / (time.perf_counter() - t0))
    return {
        "bandwidth_Bps": max(rates),
        "bandwidth_samples_Bps": [round(r) for r in rates],
        "array_bytes": ARRAY_BYTES,
        "kernel": "a += b, float32, 3 streams counted",
    }


def sgemm(reps: int = 5) -> dict[str, Any]:
    """One core's float32 matrix-product rate (FLOP/s)."""
    import numpy as np

    pin(core_for(0))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    b = rng.standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    a @ b
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        rates.append(2 * GEMM_N**3 / (time.perf_counter() - t0))
    return {"flops": max(rates), "samples_flops": [round(r) for r in rates], "n": GEMM_N}


def main() -> int:
    """Print the probes as one JSON object."""
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    out = {"loopback": loopback()}
    # each probe pins this process; run the single-core ones after the two-process one
    out["memory"] = memory()
    out["sgemm"] = sgemm()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
