"""Measure the host (CPU) time PyTorch FSDP's per-unit hooks add to one training step.

    python3 scripts/measure_fsdp_hooks.py

What it answers (docs/design.md, "FSDP's multi-node fall"): whether FSDP's Python work per
unit (pre-forward unshard, post-forward reshard and the rate limiter's free-event queue,
pre-backward prefetch, post-backward reduce-scatter) can put the host on the critical path of
llm-foundry's MPT steps. A model of ``units`` tiny blocks (two 16 x 16 linears, batch 2: the
arithmetic is microseconds) runs forward and backward with and without FSDP FULL_SHARD
(``limit_all_gathers=True``, ``BackwardPrefetch.BACKWARD_PRE``, one unit per block) on the CPU,
as rank 0 of 8 in PyTorch's fake process group (its collectives return at once: what is left
is the hooks' own host time, not NCCL's). The hooks' cost per unit per step is the slope of the
difference between 4 and 32 units; the median of 70 steps after 10 warm-up steps.

Needs only the installed torch (CPU). A loaded machine inflates the figure: it is an upper
bound for a dedicated training host. Takes a few seconds.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.testing._internal.distributed.fake_pg import FakeStore

WIDTH = 16
RANKS = 8
STEPS = 80
WARMUP = 10
UNIT_COUNTS = (4, 32)


class Block(nn.Module):
    """A residual two-layer MLP: the unit FSDP wraps."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.a = nn.Linear(width, width)
        self.b = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x + b(relu(a(x)))."""
        return x + self.b(torch.relu(self.a(x)))


def step_s(units: int, wrap: bool) -> float:
    """Median seconds of one forward and backward of ``units`` blocks, FSDP-wrapped or not."""
    torch.manual_seed(0)
    model: nn.Module = nn.Sequential(*[Block(WIDTH) for _ in range(units)])
    if wrap:
        model = FullyShardedDataParallel(
            model,
            auto_wrap_policy=ModuleWrapPolicy({Block}),
            device_id=torch.device("cpu"),
            sharding_strategy=ShardingStrategy.FULL_SHARD,
            backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
            limit_all_gathers=True,
        )
    x = torch.randn(2, WIDTH)
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        model(x).sum().backward()
        times.append(time.perf_counter() - t0)
    kept = sorted(times[WARMUP:])
    return kept[len(kept) // 2]


def main() -> None:
    """Print each configuration's step time and the hooks' host time per unit per step."""
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=RANKS)
    torch.set_num_threads(1)
    extra = {}
    for units in UNIT_COUNTS:
        plain, wrapped = step_s(units, False), step_s(units, True)
        extra[units] = wrapped - plain
        print(f"{units:3d} units: plain {plain * 1e3:.3f} ms, FSDP {wrapped * 1e3:.3f} ms")
    lo, hi = UNIT_COUNTS
    per_unit_s = (extra[hi] - extra[lo]) / (hi - lo)
    print(
        f"FSDP hooks: {per_unit_s * 1e3:.3f} ms of host time per unit per step "
        f"(torch {torch.__version__})"
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
