"""Measure TensorFlow's graph executor's host cost per op on this machine's CPU.

    python3 scripts/measure_tf_executor.py [--long 2000] [--short 200] [--repeats 7]
        [--out traces/tf_executor.json]

A measurement script, not a dependency of ddlsim (``pip install tensorflow-cpu``). Each case is a
``tf.function`` (graph mode, ``jit_compile=False``: no XLA) running a chain of tiny ops on 8 x 8
fp32 tensors, so that the CPU kernel is a small part of each op. Grappler's meta-optimizer is
off so the graph runs the ops it was traced with (else the arithmetic optimizer folds a chain of
adds into one ``AddN`` and the remapper fuses MatMul + BiasAdd). The host seconds per op are

    (time(long chain) - time(short chain)) / (graph nodes(long) - graph nodes(short))

(the difference removes the function call's own cost: argument binding, the executor's start and
its end), the best of ``--repeats`` calls of each. Graph nodes are those of the function's graph
(``Const``, ``ReadVariableOp`` and ``Identity`` nodes included: the executor processes each), so
the figure is per node the executor runs; the per-*forward-op* figure (forward, and forward plus
its ``tf.GradientTape`` backward) divides by the forward's counted ops instead.

Cases: ``add``, ``mul``, ``matmul`` (8 x 8) chains, and a transformer-like ``layer`` (a dense
layer with bias, GELU, a residual add, a layer norm, a softmax); each forward only and forward +
backward (``tf.GradientTape`` inside the function: the gradient graph is part of the traced
graph). Each thread setting runs in its own process (TF fixes its thread pools at start):
``inter_op`` x ``intra_op`` = 1 x 1, 2 x 1, 1 x 2 and TF's default (0 x 0 = the core count).

docs/design.md ("TensorFlow's graph executor") quotes the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

THREADS = ((1, 1), (2, 1), (1, 2), (0, 0))
CASES = ("add", "mul", "matmul", "layer")


def _chain(case: str, n: int):
    """A function of (x, w, b) running ``n`` units of ``case``; returns the forward's counted
    ops per unit (a GEMM, an element-wise op, a reduction: not Const / Identity nodes)."""
    import tensorflow as tf

    def unit(x, w, b):
        if case == "add":
            return tf.add(x, b)
        if case == "mul":
            return tf.multiply(x, w)
        if case == "matmul":
            return tf.matmul(x, w)
        h = tf.nn.bias_add(tf.matmul(x, w), b[0])  # dense layer: 2 ops
        h = tf.nn.gelu(h, approximate=True)  # tanh GELU: ~8 element-wise ops
        h = h + x  # residual
        mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)  # LayerNorm's statistics
        h = (h - mean) * tf.math.rsqrt(var + 1e-5)
        return tf.nn.softmax(h)

    def run(x, w, b):
        for _ in range(n):
            x = unit(x, w, b)
        return x

    return run


def _time_case(case: str, n: int, backward: bool, repeats: int) -> tuple[float, int]:
    """(best seconds of one call, graph nodes) of ``case`` chained ``n`` times."""
    import tensorflow as tf

    body = _chain(case, n)
    x = tf.random.normal((8, 8))
    w = tf.Variable(tf.random.normal((8, 8)) * 0.3)
    b = tf.Variable(tf.random.normal((8, 8)) * 0.1)

    @tf.function(jit_compile=False)
    def fwd(x):
        return body(x, w, b)

    @tf.function(jit_compile=False)
    def fwd_bwd(x):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(body(x, w, b))
        return tape.gradient(y, [w, b], unconnected_gradients="zero")

    fn = fwd_bwd if backward else fwd
    nodes = len(fn.get_concrete_function(x).graph.get_operations())
    for _ in range(3):  # warm-up: tracing, the executor's first run, the cost model
        tf.nest.map_structure(lambda t: t.numpy(), fn(x))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), fn(x))
        best = min(best, time.perf_counter() - t0)
    return best, nodes


def _counted_ops(case: str) -> int:
    """The forward ops of one unit as ddlsim's structure counts them (GEMMs, passes; a tanh GELU
    as the element-wise ops of its formula, a LayerNorm as its statistics and its two passes)."""
    return {"add": 1, "mul": 1, "matmul": 1}.get(case, 2 + 8 + 1 + 6 + 1)


def measure(long: int, short: int, repeats: int) -> dict:
    """Host seconds per graph node and per counted forward op, forward and forward+backward."""
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    tf.config.optimizer.set_jit(False)
    out: dict = {}
    for case in CASES:
        for backward in (False, True):
            n_long = long if case != "layer" else long // 10
            n_short = short if case != "layer" else short // 10
            t_long, nodes_long = _time_case(case, n_long, backward, repeats)
            t_short, nodes_short = _time_case(case, n_short, backward, repeats)
            dt = t_long - t_short
            key = f"{case}_{'fwd_bwd' if backward else 'fwd'}"
            out[key] = {
                "per_node_us": round(dt / (nodes_long - nodes_short) * 1e6, 3),
                "per_fwd_op_us": round(dt / ((n_long - n_short) * _counted_ops(case)) * 1e6, 3),
                "nodes_per_unit": round((nodes_long - nodes_short) / (n_long - n_short), 2),
                "call_short_us": round(t_short * 1e6, 1),
            }
    return out


def _child(inter: int, intra: int, long: int, short: int, repeats: int) -> dict:
    """One thread setting, measured in this process."""
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(inter)
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    return {"inter_op": inter, "intra_op": intra, "cases": measure(long, short, repeats)}


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    """Measure each thread setting in a child process; print (and write) the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--long", type=int, default=2000)
    p.add_argument("--short", type=int, default=200)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default=None, help="write the JSON here too")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        inter, intra = (int(v) for v in args.child.split(","))
        print(json.dumps(_child(inter, intra, args.long, args.short, args.repeats)))
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    runs = []
    for inter, intra in THREADS:
        cmd = [sys.executable, __file__, "--child", f"{inter},{intra}"]
        cmd += ["--long", str(args.long), "--short", str(args.short)]
        cmd += ["--repeats", str(args.repeats)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    import tensorflow as tf

    result = {
        "what": "TensorFlow graph executor: host microseconds per graph node / per forward op",
        "command": "python3 scripts/measure_tf_executor.py " + " ".join(sys.argv[1:]),
        "tensorflow": tf.__version__,
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "long": args.long,
        "short": args.short,
        "repeats": args.repeats,
        "runs": runs,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
