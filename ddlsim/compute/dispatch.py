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

With CUDA graphs (``torch.cuda.graphs``, ``torch.compile(mode="reduce-overhead")``, Megatron's
and NeMo's CUDA-graph option) the captured kernels replay with one host launch per step: no
floor (the one launch, tens of microseconds a step, is left out). XLA launches its clusters as
few kernels from C++ and TensorFlow's graph executor dispatches each op from C++ at about the
back-to-back issue interval, under the GPU's own floor per kernel (``stream_launch_s``, 4.9 us):
neither gets a floor (docs/design.md, "Eager dispatch").
"""

from __future__ import annotations

from ddlsim.compute.gemm import GemmModel, default_gemm_model

#: how a step's kernels reach the GPU: PyTorch eager (a host floor per stage), CUDA graphs (one
#: launch a step), a graph executor (TensorFlow, MXNet) and XLA (dispatched from C++: no floor)
DISPATCHES = ("eager", "cuda-graphs", "graph-executor", "xla")
#: extra kernels of an op's backward node beyond its first, by memory-route op (PyTorch's
#: LayerNorm / RMSNorm backward: one kernel for dx, one for the weights' gradients)
EXTRA_BACKWARD_KERNELS = {"layernorm": 1, "rmsnorm": 1}


def host_s(ops: int, extra_kernels: int = 0, model: GemmModel | None = None) -> float:
    """Host seconds of dispatching ``ops`` PyTorch ops (or backward nodes) and launching
    ``extra_kernels`` more kernels from C++ (the docstring's terms)."""
    m = model or default_gemm_model()
    return ops * m.event_dispatch_s + extra_kernels * m.issue_interval_s


def dispatch_of(framework: str, fusion: str | None, cuda_graphs: bool) -> str:
    """How a step's kernels are dispatched (:data:`DISPATCHES`): XLA where it compiles, else
    TensorFlow's executor, else PyTorch's eager dispatch or its CUDA graphs."""
    if fusion == "xla":
        return "xla"
    if framework == "pytorch":
        return "cuda-graphs" if cuda_graphs else "eager"
    return "graph-executor"
