"""Horovod data-parallel training of a zoo model on synthetic data, one CPU core per worker.

Run by ``horovodrun`` (one process per worker)::

    horovodrun -np 2 -H localhost:2 --gloo --timeline-filename tl.json \\
        python -m ddlsim.tools.hvdlocal.train --model alexnet --batch-size 16

The model is the Keras model of the zoo
(:func:`ddlsim.tools.calibrate.keras_models.build_keras_model`,
tensor for tensor what ddlsim simulates and ``ddlsim calibrate`` profiles), trained like the
calibration pass (momentum SGD on a fixed synthetic batch) with Horovod's
``DistributedGradientTape``: the gradients are averaged by ``hvd.allreduce`` as backprop produces
them, fused and negotiated by Horovod's background thread. The first step broadcasts rank 0's
variables. After warm-up, ``--num-iters`` iterations of ``--num-batches-per-iter`` steps are
timed, and rank 0 prints the result the way Horovod's synthetic benchmarks do
(``Img/sec per CPU: X +-Y``, ``Total img/sec on N CPU(s): X +-Y``, the +- being 1.96 standard
deviations of the per-iteration figures), which ``ddlsim traces import`` reads.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from ddlsim.tools.hvdlocal import DEFAULT_BATCH, DEFAULT_MODEL
from ddlsim.tools.hvdlocal.workers import INTER_OP_THREADS, INTRA_OP_THREADS, pin_worker

PREFIX = "ddlsim-hvdlocal:"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (the names of Horovod's synthetic benchmark)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"zoo model (default {DEFAULT_MODEL})")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="batch per worker")
    p.add_argument("--num-warmup-batches", type=int, default=10, help="untimed steps first")
    p.add_argument("--num-batches-per-iter", type=int, default=5, help="steps per timed iter")
    p.add_argument("--num-iters", type=int, default=10, help="timed iterations")
    return p.parse_args(argv)


def _step_function(tf: Any, hvd: Any, model: Any, optimizer: Any, images: Any, labels: Any):
    variables = model.trainable_variables

    @tf.function(jit_compile=False)
    def step(first_batch: bool) -> Any:
        with tf.GradientTape() as tape:
            loss = model((images, labels), training=True)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, [v.value for v in variables])
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        if first_batch:  # every rank starts from rank 0's weights and optimizer state
            hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)
            hvd.broadcast_variables([v.value for v in optimizer.variables], root_rank=0)
        return loss

    return step


def main(argv: Sequence[str] | None = None) -> int:
    """Train and print the benchmark lines (rank 0)."""
    args = parse_args(argv)
    core = pin_worker()  # before TensorFlow starts any thread
    import tensorflow as tf

    from ddlsim.tools.hvdlocal.workers import configure_tensorflow

    configure_tensorflow(tf)
    import horovod
    import horovod.tensorflow as hvd
    import keras

    from ddlsim.tools.calibrate.keras_models import build_keras_model
    from ddlsim.tools.calibrate.run import LEARNING_RATE, MOMENTUM, NUM_CLASSES
    from ddlsim.workload.zoo import get_model

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    threading = tf.config.threading
    intra = threading.get_intra_op_parallelism_threads() or INTRA_OP_THREADS
    inter = threading.get_inter_op_parallelism_threads() or INTER_OP_THREADS
    print(
        f"{PREFIX} rank {rank} of {size}: pinned to core {core}, intra-op threads {intra}, "
        f"inter-op threads {inter}",
        flush=True,
    )
    spec = get_model(args.model)
    model = build_keras_model(args.model)
    images = tf.random.uniform((args.batch_size, *spec.input_shape), dtype=tf.float32)
    labels = tf.random.uniform((args.batch_size,), maxval=NUM_CLASSES, dtype=tf.int32)
    optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
    optimizer.build(model.trainable_variables)
    step = _step_function(tf, hvd, model, optimizer, images, labels)

    def log(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    log(
        f"{PREFIX} Horovod {horovod.__version__} (gloo {hvd.gloo_enabled()}, mpi "
        f"{hvd.mpi_enabled()}), TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"Python {platform.python_version()}"
    )
    log(f"Model: {args.model}")
    log(f"Batch size: {args.batch_size}")
    log(f"Number of CPUs: {size}")
    log("Running warmup...")
    step(True).numpy()
    for _ in range(max(0, args.num_warmup_batches - 1)):
        step(False).numpy()
    log("Running benchmark...")
    rates = []
    for i in range(args.num_iters):
        t0 = time.perf_counter()
        for _ in range(args.num_batches_per_iter):
            loss = step(False)
        loss.numpy()
        seconds = time.perf_counter() - t0
        rates.append(args.batch_size * args.num_batches_per_iter / seconds)
        log(f"Iter #{i}: {rates[-1]:.2f} img/sec per CPU")
    mean = statistics.fmean(rates)
    conf = 1.96 * statistics.pstdev(rates)
    log(f"Img/sec per CPU: {mean:.2f} +-{conf:.2f}")
    log(f"Total img/sec on {size} CPU(s): {size * mean:.2f} +-{size * conf:.2f}")
    hvd.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
