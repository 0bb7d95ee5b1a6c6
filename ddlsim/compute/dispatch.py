"""The host's dispatch of a transformer step's kernels: a floor under each stage's time.

In PyTorch's eager mode the Python thread dispatches every op: the Python call, the ATen
dispatcher, autograd's recording of a node (forward), and the CUDA launch; in the backward the
autograd engine runs each node (C++, no Python) and launches its kernels. Launches are
asynchronous, so the GPU runs a stage's kernels while the host dispatches the next ones; when
the kernels are shorter than their dispatch the GPU waits, and a stage takes at least its ops'
host time. Per stage (the embedding, each block, the head; forward and backward apart):

    time = max(GPU kernels' time, ops x ``event_dispatch_s`` + extra kernels x ``issue_interval_s``)

- an *op* is one forward op the Python thread dispatches (a GEMM, a memory pass; an unfused
  softmax's three), or one backward node the engine runs (one per forward op; with activation
  checkpointing the forward's ops again, dispatched from Python during the backward);
- ``event_dispatch_s`` (the GEMM model's file, fitted on NeuSight's CUDA-event timings of one
  PyTorch op call: 23.3 us) is what the host adds between the events around one op: the Python
  call, the dispatcher and the CUDA launch, on the GPU servers those rows were measured on;
- an *extra kernel* is a kernel beyond a node's first (a GEMM's backward: its data and weight
  gradients; LayerNorm's backward: two kernels), launched from C++ back to back:
  ``issue_interval_s`` (DeepBench's back-to-back cuBLAS calls: 3.0 us).

TensorFlow's graph executor (no XLA) runs each node of the step's graph from C++ on the thread
that found it ready (a GPU kernel is never "expensive", so it runs inline) and launches its
kernel; per stage

    time = max(GPU kernels' time, (ops + casts) x (``EXECUTOR_OP_S`` + ``issue_interval_s``)
                                  + extra kernels x ``issue_interval_s``)

- ``casts``: the AMP graph rewrite's Cast nodes, one in and one out around each op on its fp32
  list (a kernel each way, where PyTorch's autocast casts inside the op's own dispatch);
- ``EXECUTOR_OP_S`` (1.6 us): the executor's host time per op of the structure and direction,
  its graph companions (variable reads, identities, the gradient's shape and broadcast nodes)
  included: measured on this project's CPU (``scripts/measure_tf_executor.py``,
  ``traces/host/``), as is: no source gives a server core's speed relative to it;
- each op's kernel launched from C++ (``issue_interval_s``), as a C++ loop issues cuBLAS calls.

At 4.6 us an op it stays under the GPU's own floor per kernel (``stream_launch_s``, 4.9 us)
unless its ops outnumber the kernels, so it binds only on tiny models (docs/design.md,
"TensorFlow's graph executor"). MXNet's dependency engine (``engine``) is unmeasured: no floor.
With CUDA graphs (``torch.cuda.graphs``, ``torch.compile(mode="reduce-overhead")``, Megatron's
and NeMo's CUDA-graph option) the captured kernels replay with one host launch per step: no
floor (the one launch, tens of microseconds a step, is left out). XLA launches its clusters as
few kernels from C++: no floor (docs/design.md, "Eager dispatch").
"""

from __future__ import annotations

from ddlsim.compute.gemm import GemmModel, default_gemm_model

#: how a step's kernels reach the GPU: PyTorch eager (a host floor per stage), CUDA graphs (one
#: launch a step), TensorFlow's graph executor (a C++ floor per stage), MXNet's dependency
#: engine and XLA (no floor)
DISPATCHES = ("eager", "cuda-graphs", "graph-executor", "engine", "xla")
#: TensorFlow's graph executor's host seconds per op of the structure and direction: a
#: transformer-like layer's forward and ``tf.GradientTape`` backward on 8 x 8 tensors over twice
#: its counted forward ops, 1 or 2 inter-op x 1 intra-op thread, the median of the two runs in
#: ``traces/host/`` (``scripts/measure_tf_executor.py``; the CPU kernels of 8 x 8 tensors
#: included, so an upper figure for the executor's own work)
EXECUTOR_OP_S = 1.6e-6
#: extra kernels of an op's backward node beyond its first, by memory-route op (PyTorch's
#: LayerNorm / RMSNorm backward: one kernel for dx, one for the weights' gradients)
EXTRA_BACKWARD_KERNELS = {"layernorm": 1, "rmsnorm": 1}


def host_s(ops: int, extra_kernels: int = 0, model: GemmModel | None = None) -> float:
    """Host seconds of dispatching ``ops`` PyTorch ops (or backward nodes) and launching
    ``extra_kernels`` more kernels from C++ (the docstring's terms)."""
    m = model or default_gemm_model()
    return ops * m.event_dispatch_s + extra_kernels * m.issue_interval_s


def executor_host_s(ops: int, extra_kernels: int = 0, model: GemmModel | None = None) -> float:
    """Host seconds of TensorFlow's graph executor running ``ops`` ops (casts included) and
    launching their kernels, and launching ``extra_kernels`` more (the docstring's terms)."""
    m = model or default_gemm_model()
    return ops * (EXECUTOR_OP_S + m.issue_interval_s) + extra_kernels * m.issue_interval_s


def host_floor_s(
    dispatch: str, ops: int, extra_kernels: int = 0, casts: int = 0, model: GemmModel | None = None
) -> float:
    """The least host time of ``ops`` ops (and ``extra_kernels`` more launches) under
    ``dispatch`` (:data:`DISPATCHES`): PyTorch's eager dispatch (autocast's casts inside its
    ops), TensorFlow's executor (the casts nodes of their own); 0 for the others."""
    if dispatch == "eager":
        return host_s(ops, extra_kernels, model)
    if dispatch == "graph-executor":
        return executor_host_s(ops + casts, extra_kernels, model)
    return 0.0


def dispatch_of(framework: str, fusion: str | None, cuda_graphs: bool) -> str:
    """How a step's kernels are dispatched (:data:`DISPATCHES`): XLA where it compiles, else
    TensorFlow's executor, MXNet's engine, PyTorch's eager dispatch or its CUDA graphs."""
    if fusion == "xla":
        return "xla"
    if framework == "pytorch":
        return "cuda-graphs" if cuda_graphs else "eager"
    return "graph-executor" if framework == "tensorflow" else "engine"
