"""CPU offload of sharded data parallelism: what crosses PCIe and what the host's DRAM moves.

Two framework features, one knob (``--offload``):

- ``optimizer`` -- DeepSpeed ZeRO-Offload (``zero_optimization.offload_optimizer.device:
  cpu``, stages 1-3): the fp32 master, the moments and an fp32 gradient partition live in host
  memory. Each reduced gradient shard is cast to fp32 on the GPU and copied device-to-host
  (``stage_1_and_2.py`` ``async_inplace_copy_grad_to_fp32_buffer_from_gpu``; ``stage3.py``
  ``partition_grads``); the step runs on the host (``DeepSpeedCPUAdam``, one fused AVX pass,
  ``#pragma omp parallel for`` over every core the process sees); the updated fp32 partition
  is converted to fp16 / bf16 on the host and copied host-to-device (``step``:
  ``bit16_partitions[partition_id].data.copy_(fp32_partition.data)``, blocking) before the
  all-gather of the updated parameters.
- ``params`` -- PyTorch FSDP ``CPUOffload(offload_params=True)`` (the fp32 sharded flat
  parameter and its gradient in host memory, ``torch.optim`` stepping on CPU tensors) and
  DeepSpeed ZeRO-Infinity ``offload_param.device: cpu`` with ``offload_optimizer`` (stage 3
  only): every gather first copies the unit's shard host-to-device (FSDP:
  ``FlatParamHandle.pre_unshard`` on the pre-unshard stream, which the all-gather's stream
  waits for), every reduced gradient shard is copied device-to-host (FSDP: ``_offload_grad``
  on the post-backward stream, behind its reduce-scatter).

A copy is a DMA over the GPU's host link; the GPUs behind one PCIe switch copy at the same time
(each its own shard), so each gets ``1/gpus_per_pcie_switch`` of the switch's uplink
(:func:`copy_Bps`). The host step streams its bytes (:func:`host_step_bytes_per_param`)
through DRAM at the rate :func:`host_step_Bps` gives one rank.
"""

from __future__ import annotations

from ddlsim.errors import ConfigError

#: ``--offload`` values
OFFLOADS = ("none", "optimizer", "params")

#: DRAM bytes per parameter of ``torch.optim``'s single-tensor step on CPU tensors (the foreach
#: and fused paths are taken for CUDA tensors only: ``optimizer.py``
#: ``_default_to_fused_or_foreach``), one pass over memory per element-wise op of
#: ``adam.py`` ``_single_tensor_adam`` (fp32, 4 bytes an element): ``exp_avg.lerp_(grad)`` 12,
#: ``exp_avg_sq.mul_`` 8 and ``.addcmul_(grad, grad)`` 12, ``exp_avg_sq.sqrt()`` 8, ``/
#: bias_correction2_sqrt`` 8, ``.add_(eps)`` 8, ``param.addcdiv_(exp_avg, denom)`` 16 = 72;
#: AdamW's decoupled ``param.mul_(1 - lr * wd)`` 8 more; SGD ``param.add_(grad)`` 12;
#: momentum ``buf.mul_(m).add_(grad)`` 20 and ``param.add_(buf)`` 12. LAMB is not in
#: ``torch.optim``: counted as AdamW.
TORCH_CPU_STEP_BYTES = {"adam": 72, "adamw": 80, "lamb": 80, "sgd": 12, "momentum": 32}

#: bytes per parameter of one optimizer state tensor (fp32)
_STATE_TENSORS = {"adam": 2, "adamw": 2, "lamb": 2, "sgd": 0, "momentum": 1}


def fused_step_bytes(optimizer: str) -> int:
    """DRAM bytes per parameter of a fused host step (``DeepSpeedCPUAdam``: each tensor read
    and written once, in registers between): the fp32 parameter read and written (8), the fp32
    gradient read (4), each fp32 state read and written (8 each): Adam 28."""
    return 12 + 8 * _STATE_TENSORS[optimizer]


def host_step_bytes_per_param(method: str, optimizer: str, precision: str) -> float:
    """DRAM bytes the host moves per parameter of its shard in one optimizer step.

    FSDP: ``torch.optim``'s CPU step (:data:`TORCH_CPU_STEP_BYTES`) on the fp32 flat
    parameter, which is the master copy (the low-precision copy is made on the GPU at the next
    gather). DeepSpeed: the fused step, plus under mixed precision the conversion of the
    updated fp32 partition to the 16-bit one it copies to the GPU (read 4, write 2), plus
    under fp16 (``amp``) the unscaling of the loss-scaled gradients (``unscale_and_clip_grads``:
    ``grad.mul_``, read and write 4)."""
    if optimizer not in _STATE_TENSORS:
        raise ConfigError(f"offload: unknown optimizer {optimizer!r} ({', '.join(_STATE_TENSORS)})")
    if method == "fsdp":
        return float(TORCH_CPU_STEP_BYTES[optimizer])
    extra = (6 if precision != "fp32" else 0) + (8 if precision == "amp" else 0)
    return float(fused_step_bytes(optimizer) + extra)


def host_step_Bps(
    method: str, node_mem_Bps: float, core_mem_Bps: float, ranks_per_node: int
) -> float:
    """DRAM bytes per second one rank's host step streams, the node's ranks stepping at once.

    DeepSpeed's ``DeepSpeedCPUAdam`` runs an OpenMP loop over every core the process sees (the
    launcher binds cores only with ``--bind_cores_to_rank``), so the ranks of a node share its
    sustained DRAM bandwidth (``node_mem_Bps / ranks``). PyTorch's ``torchrun`` sets
    ``OMP_NUM_THREADS=1`` for more than one process per node (``torch/distributed/run.py``), so
    FSDP's CPU step runs on one core: the lesser of a core's streaming rate (``core_mem_Bps``,
    bytes read plus written) and the rank's share of the node."""
    share = node_mem_Bps / max(1, ranks_per_node)
    if method == "fsdp" and ranks_per_node > 1:
        return min(core_mem_Bps, share)
    return share


def copy_Bps(host_link_Bps: float, gpus_per_pcie_switch: int) -> float:
    """The host-link bandwidth one GPU's copy gets while the other GPUs behind its PCIe switch
    copy their own shards at the same time (equal shares of the switch's uplink)."""
    return host_link_Bps / max(1, gpus_per_pcie_switch)


def host_state_bytes_per_param(method: str, offload: str, optimizer: str, precision: str) -> int:
    """Host memory per parameter of a rank's shard: the optimizer state (fp32 moments), the fp32
    master (DeepSpeed) or fp32 flat parameter (FSDP), the fp32 gradient partition, and for
    ZeRO-Infinity's ``params`` the 16-bit parameter partition."""
    if offload == "none":
        return 0
    state = 4 * _STATE_TENSORS[optimizer]
    if method == "fsdp":  # the fp32 flat parameter (the master) and its fp32 gradient
        return 4 + 4 + state
    working = 2 if precision != "fp32" else 4  # ZeRO-Infinity's parameter partition
    return 4 + 4 + state + (working if offload == "params" else 0)
