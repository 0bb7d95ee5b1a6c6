"""The execution knobs of sharded data parallelism (FSDP, ZeRO): rows of
:mod:`ddlsim.config.knobs`, in the execution group after :mod:`ddlsim.config.table.execution`.

Names and defaults are the frameworks' own: PyTorch's ``FullyShardedDataParallel`` arguments
(``sharding_strategy``, ``backward_prefetch``, ``forward_prefetch``, ``limit_all_gathers``),
Composer's mixed-precision presets and DeepSpeed's ZeRO configuration (``overlap_comm``,
``reduce_bucket_size``, ``allgather_bucket_size``, ``contiguous_gradients``,
``offload_optimizer`` / ``offload_param``,
FSDP's ``CPUOffload``); docs/design.md cites the sources.
"""

from __future__ import annotations

from ddlsim.config.checks import Range, Vocabulary
from ddlsim.config.knob import Applies, Knob, comm_in
from ddlsim.execution.offload import OFFLOADS
from ddlsim.execution.sharded import (
    BACKWARD_PREFETCH,
    FSDP_PRECISIONS,
    SHARDINGS,
    ZERO_BUCKET_ELEMENTS,
)

_FSDP = Applies(comm_in("fsdp"), "it applies to --comm fsdp", ("comm",))
_ZERO = Applies(comm_in("zero1", "zero2", "zero3"), "it applies to --comm zero1|zero2|zero3",
                ("comm",))  # fmt: skip
_SHARDED = Applies(comm_in("fsdp", "zero1", "zero2", "zero3"),
                   "it applies to --comm fsdp|zero1|zero2|zero3", ("comm",))  # fmt: skip
_ZERO12 = Applies(comm_in("zero1", "zero2"), "it applies to --comm zero1|zero2", ("comm",))

ROWS: tuple[Knob, ...] = (
    Knob(
        "sharding",
        "execution",
        "full_shard",
        "str",
        "--sharding",
        "--comm fsdp: FSDP's ShardingStrategy: full_shard (parameters gathered for forward "
        "and again for backward), shard_grad_op (kept from forward to backward), "
        "hybrid_shard (sharded inside a node, replicated across nodes) or no_shard (an "
        "all-reduce per unit) (default: full_shard)",
        check=Vocabulary("sharding strategy", lambda: SHARDINGS),
        choices=lambda: SHARDINGS,
        applies=_FSDP,
    ),
    Knob(
        "fsdp_unit_blocks",
        "execution",
        1,
        "int",
        "--fsdp-unit-blocks",
        "--comm fsdp: transformer blocks per FSDP unit (the auto-wrap policy; the embedding "
        "and the head form the root unit) (default: 1)",
        check=Range("blocks per FSDP unit", 1, 4096, integer=True),
        parse="int",
        metavar="N",
        applies=_FSDP,
    ),
    Knob(
        "backward_prefetch",
        "execution",
        "pre",
        "str",
        "--backward-prefetch",
        "--comm fsdp: when the next unit's gather is issued in backward: pre (as this unit's "
        "backward starts: BACKWARD_PRE, PyTorch's default), post (as it ends, before its "
        "reduce-scatter) or none (behind the reduce-scatter)",
        check=Vocabulary("backward prefetch", lambda: BACKWARD_PREFETCH),
        choices=lambda: BACKWARD_PREFETCH,
        applies=_FSDP,
    ),
    Knob(
        "forward_prefetch",
        "execution",
        False,
        "bool",
        "--forward-prefetch",
        "--comm fsdp: issue the next unit's gather as this unit's forward starts",
        switch=True,
        applies=_FSDP,
    ),
    Knob(
        "limit_all_gathers",
        "execution",
        True,
        "bool",
        "--no-limit-all-gathers",
        "--comm fsdp: let the CPU issue every gather at once (limit_all_gathers=False; by "
        "default at most two are in flight)",
        negate=True,
        sweep=False,
        applies=_FSDP,
    ),
    Knob(
        "fsdp_precision",
        "execution",
        "auto",
        "str",
        "--fsdp-precision",
        "--comm fsdp: the mixed-precision policy (Composer's presets): full (fp32 parameters "
        "and reduction), default (half parameters, fp32 reduction), pure (half both); auto: "
        "default at amp / bf16, full at fp32",
        check=Vocabulary("FSDP mixed precision", lambda: FSDP_PRECISIONS),
        choices=lambda: FSDP_PRECISIONS,
        applies=_FSDP,
    ),
    Knob(
        "overlap_comm",
        "execution",
        "auto",
        "str",
        "--overlap-comm",
        "--comm zero1|zero2|zero3: DeepSpeed's overlap_comm: on (reductions on their own "
        "stream), off (on the compute stream: the backward waits) or auto (DeepSpeed's "
        "default: on for ZeRO-3 only)",
        check=Vocabulary("overlap_comm", lambda: ("auto", "on", "off")),
        choices=lambda: ("auto", "on", "off"),
        applies=_ZERO,
    ),
    Knob(
        "reduce_bucket_size",
        "execution",
        ZERO_BUCKET_ELEMENTS,
        "int",
        "--reduce-bucket-size",
        "--comm zero1|zero2|zero3: DeepSpeed's reduce_bucket_size, gradient elements reduced "
        "at a time by ZeRO-1/2, and the contiguous-gradient buffer's size (default: "
        "500,000,000)",
        check=Range("reduce bucket size", 1, 1 << 40, integer=True),
        parse="int",
        metavar="ELEMENTS",
        applies=_ZERO,
    ),
    Knob(
        "contiguous_gradients",
        "execution",
        True,
        "bool",
        "--no-contiguous-gradients",
        "--comm zero1|zero2|zero3: DeepSpeed's contiguous_gradients false: no persistent "
        "gradient buffer; ZeRO-1/2 flatten each bucket's gradients for its reduction and copy "
        "them back (by default each gradient is copied into reduce_bucket_size buffers, two "
        "with overlap_comm)",
        negate=True,
        sweep=False,
        applies=_ZERO,
    ),
    Knob(
        "allgather_bucket_size",
        "execution",
        ZERO_BUCKET_ELEMENTS,
        "int",
        "--allgather-bucket-size",
        "--comm zero1|zero2: DeepSpeed's allgather_bucket_size, updated parameters gathered "
        "at a time after the step (default: 500,000,000)",
        check=Range("all-gather bucket size", 1, 1 << 40, integer=True),
        parse="int",
        metavar="ELEMENTS",
        applies=_ZERO12,
    ),
    Knob(
        "offload",
        "execution",
        "none",
        "str",
        "--offload",
        "--comm fsdp|zero1|zero2|zero3: CPU offload: optimizer (DeepSpeed's offload_optimizer: "
        "the fp32 master, moments and gradients on the host, the step on the CPU; ZeRO 1-3), "
        "params (FSDP's CPUOffload(offload_params=True); ZeRO-3's offload_param with "
        "offload_optimizer: the parameter shards too) or none (default: none)",
        check=Vocabulary("offload", lambda: OFFLOADS),
        choices=lambda: OFFLOADS,
        applies=_SHARDED,
    ),
    Knob(
        "pin_memory",
        "execution",
        False,
        "bool",
        "--pin-memory",
        "--comm zero1|zero2|zero3 with --offload: DeepSpeed's offload pin_memory: pinned host "
        "buffers (copies at the host link's DMA rate; by default pageable, staged by the "
        "driver; FSDP always pins)",
        switch=True,
        applies=Applies(
            lambda c: c.get("comm") in ("zero1", "zero2", "zero3") and c.get("offload") != "none",
            "it applies to --comm zero1|zero2|zero3 with --offload",
            ("comm", "offload"),
        ),
    ),
)
