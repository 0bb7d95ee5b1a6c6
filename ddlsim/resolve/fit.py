"""The largest micro-batch that fits (``--batch max``) and the fewest GPUs that hold a step
(``--gpus min``).

A transformer's memory per GPU (:func:`ddlsim.workload.transformers.memory.memory`) grows
with the micro-batch (its activations and logits are linear in it, the rest does not depend on
it), so the largest micro-batch whose step fits the GPU's memory is found by bisection over
1..65536 (the batch knob's range). A CNN has no memory model here: ``--batch max`` is refused
for it (:func:`ddlsim.resolve.calibration.resolve_names`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ddlsim.compute.transformer_step import Numerics
from ddlsim.config.groups import ExecutionConfig, SystemConfig, WorkloadConfig
from ddlsim.config.knob import MAX_BATCH
from ddlsim.errors import ConfigError
from ddlsim.execution.strategy import Strategy
from ddlsim.resolve.calibration import Names
from ddlsim.resolve.transformer import step_memory, too_big, transformer_numerics
from ddlsim.system.catalog_files import MAX_GPUS
from ddlsim.system.specs import Cluster, DeviceSpec
from ddlsim.workload.transformers.memory import Memory
from ddlsim.workload.transformers.spec import transformer_spec


def largest_fitting(fits: Callable[[int], bool], high: int = MAX_BATCH) -> int:
    """The largest ``b`` in 1..``high`` with ``fits(b)``, for ``fits`` true up to some batch
    and false above it (monotone); 0 where even 1 does not fit."""
    if not fits(1):
        return 0
    if fits(high):
        return high
    lo, hi = 1, high  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_batch(
    w: WorkloadConfig, x: ExecutionConfig, names: Names, cluster: Cluster, strategy: Strategy
) -> int:
    """The largest micro-batch of the transformer of ``names`` whose step fits ``cluster``'s
    GPU under the job's numerics, optimizer and exchange; a ConfigError where even one
    sequence does not fit (the need at micro-batch 1, by part)."""
    cfg = names.transformer
    assert cfg is not None
    device = cluster.device
    numerics = transformer_numerics(cfg, x, device, strategy.precision, w.tf32)
    spec = transformer_spec(cfg, cfg.seq, x.grad_accum > 1)

    def fits(batch: int) -> bool:
        return step_memory(cfg, batch, w, x, device, strategy, numerics, spec).fits

    batch = largest_fitting(fits)
    if batch == 0:
        need = step_memory(cfg, 1, w, x, device, strategy, numerics, spec)
        raise ConfigError(too_big(cfg, 1, device, need, numerics))
    return batch


def fewest_gpus(
    w: WorkloadConfig, s: SystemConfig, x: ExecutionConfig, names: Names, nccl: bool
) -> int:
    """``--gpus min``: the fewest GPUs on which the transformer of ``names`` fits, counted in
    GPUs up to one node, then in whole nodes. Memory per GPU only falls as a sharded method
    splits the state over more GPUs, so the node count is bisected; plain data parallelism
    keeps the whole state on every GPU, so one GPU fits or none does. A ConfigError names the
    need at the largest count tried where none fits."""
    from ddlsim.resolve.execution import resolve_strategy
    from ddlsim.resolve.system import resolve_system

    cfg = names.transformer
    if cfg is None:
        raise ConfigError(
            f"--gpus min finds the fewest GPUs whose memory holds a transformer's step; "
            f"{names.model} has no memory model: give --gpus N"
        )
    spec = transformer_spec(cfg, cfg.seq, x.grad_accum > 1)

    def need(gpus: int) -> tuple[Memory, Numerics, DeviceSpec]:
        cluster = resolve_system(replace(s, gpus=gpus), names.gpu, nccl=nccl)
        strategy = resolve_strategy(x, cluster, w, batch=names.batch, precision=names.precision)
        device = cluster.device
        numerics = transformer_numerics(cfg, x, device, strategy.precision, w.tf32)
        memory = step_memory(
            cfg, names.batch, w, x, device, strategy, numerics, spec, cluster.local_gpus
        )
        return memory, numerics, device

    node = s.gpus_per_node or resolve_system(replace(s, gpus=MAX_GPUS), names.gpu).local_gpus
    for gpus in sorted({*(2**k for k in range(node.bit_length())), node}):
        if gpus <= node and need(gpus)[0].fits:
            return gpus
    most = MAX_GPUS // node
    nodes = largest_fitting(lambda k: not need(k * node)[0].fits, most) + 1
    if nodes > most:
        memory, numerics, device = need(most * node)
        raise ConfigError(
            f"--gpus min: not even {most * node:,} GPUs hold it: "
            + too_big(cfg, names.batch, device, memory, numerics)
        )
    return nodes * node
