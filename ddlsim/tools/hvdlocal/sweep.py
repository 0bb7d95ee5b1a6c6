"""``hvd.allreduce`` over Gloo for message sizes 1 KiB ... 256 MiB (run by ``horovodrun``).

Each worker is pinned to its own core like the training workers (:mod:`.workers`); no training
runs, so the cores do nothing but the allreduce. For each size, a few untimed calls, then
``reps`` timed ones (``op=hvd.Sum`` on a float32 tensor). Rank 0 prints one JSON line per size
(``{"sweep": {"nbytes": ..., "wall_s": [...]}}``): the wall time of the whole Horovod operation
as the caller sees it (cycle tick, negotiation, copy into the output, the Gloo ring). The Gloo
ring alone is timed by Horovod's timeline (``GLOO_ALLREDUCE``), which the driver records with
``--timeline-filename`` and :func:`ddlsim.tools.hvdlocal.fit.gloo_durations` reads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from ddlsim.tools.hvdlocal.workers import pin_worker

MIN_LOG2, MAX_LOG2 = 10, 28
#: bytes moved per size (about): enough repetitions for a stable median, bounded run time
TARGET_BYTES = 512 * 2**20
MIN_REPS, MAX_REPS = 5, 40


def sizes(min_log2: int = MIN_LOG2, max_log2: int = MAX_LOG2, step: int = 1) -> list[int]:
    """Message sizes of the sweep, bytes (powers of two)."""
    return [2**p for p in range(min_log2, max_log2 + 1, step)]


def repetitions(nbytes: int) -> int:
    """Timed calls for a message of ``nbytes``."""
    return max(MIN_REPS, min(MAX_REPS, TARGET_BYTES // max(nbytes, 1)))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep; rank 0 prints the JSON lines."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-log2", type=int, default=MIN_LOG2)
    p.add_argument("--max-log2", type=int, default=MAX_LOG2)
    p.add_argument("--step", type=int, default=1, help="log2 step between sizes")
    args = p.parse_args(argv)
    pin_worker()
    import tensorflow as tf

    from ddlsim.tools.hvdlocal.workers import configure_tensorflow

    configure_tensorflow(tf)
    import horovod.tensorflow as hvd

    hvd.init()
    for nbytes in sizes(args.min_log2, args.max_log2, args.step):
        x = tf.ones((nbytes // 4,), tf.float32)
        for _ in range(2):
            hvd.allreduce(x, op=hvd.Sum).numpy()
        walls = []
        for _ in range(repetitions(nbytes)):
            t0 = time.perf_counter()
            hvd.allreduce(x, op=hvd.Sum).numpy()
            walls.append(time.perf_counter() - t0)
        if hvd.rank() == 0:
            row = {"nbytes": nbytes, "ranks": hvd.size(), "wall_s": [round(w, 7) for w in walls]}
            print(json.dumps({"sweep": row}), flush=True)
    hvd.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
