"""The GPU memory a transformer's data-parallel training step needs, by part.

Under plain data parallelism every rank holds the whole model; sharded methods split it
(:class:`ShardedState`, the ZeRO paper's Fig. 1 per stage). Per GPU:

- **parameters, gradients, optimizer state**: mixed precision with Adam keeps fp16 weights
  (2 bytes a parameter) and gradients (2), an fp32 master copy (4) and two fp32 moments (8):
  16 bytes a parameter (ZeRO, Rajbhandari et al. 2020, sec. 3.1); fp32 training keeps 4 + 4 +
  8. SGD with momentum keeps one moment, plain SGD none.
- **the exchange's buffers**: PyTorch DDP copies the gradients into its buckets
  (``gradient_as_bucket_view=False``, its default: ``torch/nn/parallel/distributed.py``);
  Horovod keeps one fusion buffer (``HOROVOD_FUSION_THRESHOLD``).
- **activations** kept for the backward pass, per block (Korthikanti et al. 2022, "Reducing
  Activation Recomputation in Large Transformer Models", sec. 4.1, generalised to any MLP
  width, gated MLPs, grouped keys and values and to fp32): the inputs of the QKV, output and
  MLP projections and of the norms, Q and K, V, the softmax's output and its dropout (the
  ``b·heads·s²`` terms FlashAttention does not keep: it recomputes them), the MLP's hidden
  activations, and a one-byte mask per dropout. With activation checkpointing a block keeps
  only its input; one block's full set lives during its recompute.
- **the logits** of the output head (``b·s·V``) and their fp32 loss, and the embedding's
  output.
- **CPU offload** (:class:`ShardedState` ``offload``) moves the optimizer state with its fp32
  master and the gradient shard (``optimizer``), and the parameter shard too (``params``), to
  host memory: what the node's host then holds is :attr:`Memory.host_bytes`.
- **a reserve** for the CUDA context, cuBLAS / cuDNN workspaces and the caching allocator's
  fragmentation (:data:`RESERVE_BYTES`, an assumption stated in the report).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.structure import head

GiB = 1 << 30
#: CUDA context (~0.3-0.8 GB by GPU and driver), cuBLAS / cuDNN workspaces and allocator
#: fragmentation: an assumption, not measured here (no GPU on this machine)
RESERVE_BYTES = 1 * GiB
#: bytes per parameter of the optimizer's state (fp32 moments)
STATE_BYTES = {"sgd": 0, "momentum": 4, "adam": 8, "adamw": 8, "lamb": 8}


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU, by part; ``capacity_bytes`` is the GPU's."""

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    buffers_bytes: float
    activations_bytes: float
    logits_bytes: float
    reserve_bytes: float
    capacity_bytes: float
    #: how a sharded method splits the state (:attr:`ShardedState.stage`; None: it does not)
    sharded_stage: int | str | None = None
    #: host memory a CPU offload needs on each node, and the node's DRAM (None: unknown)
    host_bytes: float = 0.0
    host_capacity_bytes: float | None = None

    @property
    def total_bytes(self) -> float:
        """What the step needs in all."""
        return (
            self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.buffers_bytes
            + self.activations_bytes + self.logits_bytes + self.reserve_bytes
        )  # fmt: skip

    @property
    def fits(self) -> bool:
        """Whether the step fits the GPU's memory."""
        return self.total_bytes <= self.capacity_bytes

    @property
    def host_fits(self) -> bool:
        """Whether what an offload keeps on the host fits the node's DRAM (where known)."""
        return self.host_capacity_bytes is None or self.host_bytes <= self.host_capacity_bytes

    def to_dict(self) -> dict[str, float | bool | None]:
        """The parts in GB (1e9 bytes), the total, the capacity and whether it fits; with a CPU
        offload, the host memory per node and the node's DRAM."""
        parts = {
            "params": self.params_bytes,
            "grads": self.grads_bytes,
            "optimizer": self.optimizer_bytes,
            "buffers": self.buffers_bytes,
            "activations": self.activations_bytes,
            "logits": self.logits_bytes,
            "reserve": self.reserve_bytes,
            "total": self.total_bytes,
            "capacity": self.capacity_bytes,
        }
        out: dict[str, float | bool | None] = {
            **{f"{k}_GB": v / 1e9 for k, v in parts.items()},
            "fits": self.fits,
        }
        if self.host_bytes > 0:
            cap = self.host_capacity_bytes
            out["host_per_node_GB"] = self.host_bytes / 1e9
            out["host_capacity_GB"] = None if cap is None else cap / 1e9
        return out


@dataclass(frozen=True)
class ShardedState:
    """How a sharded method splits the model state over ``shards`` GPUs (Rajbhandari et al.
    2020, Fig. 1; FSDP's flat parameters): ``stage`` 1 shards the optimizer state (with the
    fp32 master), 2 the gradients too, 3 the parameters too (ZeRO-3, FSDP ``FULL_SHARD`` /
    ``HYBRID_SHARD``); ``shard_grad_op`` is stage 3 whose gathered parameters stay from
    forward to backward; 0 shards nothing (FSDP ``NO_SHARD``). A stage-3 step also holds the
    units gathered in flight, ``in_flight_units`` of ``unit_params`` parameters at
    ``param_bytes`` (the one computing and the prefetched), one unit's unsharded gradient, and
    the root unit (embedding, head: ``root_params``) the whole step; ``buffer_bytes`` is the
    framework's own reduction buffer (DeepSpeed's contiguous-gradient bucket). ``offload``:
    what a CPU offload keeps on the host instead (``optimizer``: the state, the master and,
    from stage 2, the gradient shard; ``params``: the parameter shard too)."""

    stage: int | str
    shards: int
    unit_params: int = 0
    root_params: int = 0
    param_bytes: int = 2
    in_flight_units: int = 3
    buffer_bytes: float = 0.0
    offload: str = "none"


def sharded_state(
    sh: ShardedState, n_params: int, p: int, mixed: bool, state_bytes: int
) -> tuple[float, float, float, float]:
    """(parameters, gradients, optimizer state, buffers) bytes per GPU under ``sh``, ``p``
    bytes per working parameter and gradient, an fp32 master copy under ``mixed``."""
    n = sh.shards
    master = 4 if mixed else 0
    weights, grads = n_params * p, n_params * p
    optimizer = n_params * (master + state_bytes)  # the master travels with the state
    if sh.stage == 0:
        return weights, grads, optimizer, grads
    optimizer /= n
    if sh.stage in (2, 3, "shard_grad_op"):
        grads /= n
    if sh.stage in (3, "shard_grad_op"):
        gathered = sh.in_flight_units * sh.unit_params + sh.root_params
        if sh.stage == "shard_grad_op":  # every unit stays gathered from forward to backward
            gathered = n_params
        shard = 0.0 if sh.offload == "params" else weights / n  # the shard on the host
        weights = shard + gathered * sh.param_bytes
        grads = 0.0 if sh.offload != "none" else grads  # the fp32 shard on the host
        grads += sh.unit_params * p  # the unit whose gradient is being reduced
    elif sh.offload != "none" and sh.stage == 2:  # the partition goes to the host's buffer
        grads = 0.0
    if sh.offload != "none":
        optimizer = 0.0
    return weights, grads, optimizer, sh.buffer_bytes


def block_activation_bytes(
    cfg: TransformerConfig, b: int, s: int, p: int, *, flash: bool, cross: bool = False
) -> float:
    """Bytes one block keeps for its backward pass (module docstring), activations ``p``
    bytes an element."""
    d, f, a = cfg.hidden, cfg.ffn, cfg.heads
    kv_width = 2 * cfg.n_kv_heads * cfg.head_dim
    sbh = s * b * d
    mask = 1.0 if cfg.dropout else 0.0
    t = s + cfg.mem_len
    attn = p * sbh + p * (s * b * d + b * t * kv_width / 2) + p * b * t * kv_width / 2
    attn += p * sbh + mask * sbh  # the output projection's input, its dropout mask
    if not flash:  # the softmax output, its dropout mask and output
        attn += a * b * s * t * (p + mask + (p if cfg.dropout else 0))
    else:
        attn += 4.0 * a * b * s  # FlashAttention's log-sum-exp per row, fp32
    hidden = (3 if cfg.gated else 2) * p * s * b * f
    mlp = p * sbh + hidden + mask * sbh
    norms = 2 * p * sbh
    total = attn + mlp + norms
    if cross:
        total += attn
    return total


def memory(
    cfg: TransformerConfig,
    b: int,
    s: int,
    *,
    n_params: int,
    capacity_bytes: float,
    mixed: bool,
    optimizer: str,
    flash: bool,
    checkpointing: bool,
    exchange: str,
    fusion_bytes: float = 0.0,
    sharded: ShardedState | None = None,
) -> Memory:
    """Bytes per GPU of ``cfg``'s data-parallel step for ``b`` sequences of ``s`` tokens:
    ``mixed`` precision or fp32; ``exchange`` ``ddp`` (bucket copies), ``horovod`` (one fusion
    buffer of ``fusion_bytes``) or another method (none); ``sharded``: how a sharded method
    splits the state (:func:`sharded_state`)."""
    p = 2 if mixed else 4
    weights = n_params * (p + (4 if mixed else 0))  # the fp32 master under mixed precision
    grads = n_params * p
    state = n_params * STATE_BYTES.get(optimizer, 8)
    buffers = grads if exchange == "ddp" else fusion_bytes if exchange == "horovod" else 0.0
    if sharded is not None:
        weights, grads, state, buffers = sharded_state(
            sharded, n_params, p, mixed, STATE_BYTES.get(optimizer, 8)
        )
    per_block = block_activation_bytes(cfg, b, s, p, flash=flash)
    blocks = cfg.layers + cfg.decoder_layers
    if checkpointing:  # each block's input, and one block's whole set during its recompute
        activations = blocks * p * s * b * cfg.hidden + per_block
    else:
        dec = block_activation_bytes(cfg, b, s, p, flash=flash, cross=True)
        activations = cfg.layers * per_block + cfg.decoder_layers * dec
    activations += p * s * b * cfg.hidden  # the embedding's output
    logits = 0.0
    if cfg.head in ("lm", "mlm"):  # the logits and their fp32 softmax / gradient
        logits = logit_elements(cfg, b, s) * (p + 4)
    return Memory(
        weights, grads, state, buffers, activations, logits, RESERVE_BYTES, capacity_bytes,
        None if sharded is None else sharded.stage,
    )  # fmt: skip


def logit_elements(cfg: TransformerConfig, b: int, s: int) -> int:
    """The logits an LM / MLM head materialises for ``b`` x ``s`` tokens: its loss passes'
    elements (:func:`~ddlsim.workload.transformers.structure.head`). A plain head's rows x
    vocabulary; an adaptive softmax's head cluster for every token and each tail cluster only
    for the tokens whose target falls in it (the reference ``ProjectedAdaptiveLogSoftmax``
    index-selects those rows before the tail's projection), not rows x the whole vocabulary."""
    return sum(x.elems for x in head(cfg, b, s).passes if x.name.rsplit("/", 1)[-1] == "loss")
