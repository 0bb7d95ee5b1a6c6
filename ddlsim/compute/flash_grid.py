"""FlashAttention's time from its kernel grid: tiles, thread blocks, waves.

FlashAttention splits the ``s x s`` score matrix of each (sequence, head) into tiles of
``Br`` query rows by ``Bc`` key/value rows. A thread block (CTA) owns a strip of tiles and
walks it in a loop; the CTAs run in waves over the GPU's SMs. A kernel's time is therefore

* **one tile iteration** (:func:`_iteration_s`): the tile's matrix-multiply FLOPs (forward
  ``4.Br.Bc.d``: QK^T and PV; backward 2.5x: S, dP, dV, dK, dQ) at the main loop's rate, the
  paper's *asymptote* (:data:`FLASH_ASYMPTOTE`: the share of the tensor-core peak a long
  sequence reaches) split over the CTAs an SM holds at once;
* **a fixed cost per CTA** (:func:`_fixed_s`): the bytes it moves outside its pipelined loop
  (the forward's Q tile and first K tile before any MMA, O and the log-sum-exp after the last;
  the backward's K and V tiles, first Q and dO tiles, dK and dV written at the end), at its
  share of the DRAM bandwidth when every resident CTA streams at once;
* **waves** (:func:`_waves_s`): ``ceil(CTAs / slots)`` waves of the mean CTA, never less than
  the longest CTA (exact for equal CTAs; for the causal grid's unequal CTAs a wave's short CTAs
  backfill, which this rounds up).

Causal masking removes the tiles wholly above the diagonal; the diagonal tiles are computed
whole and masked, so a causal kernel costs more than half its non-causal twin at short
sequences. The grids, loops and tile sizes are flash-attn's (1.0.9 and 2.5.8, read from their
sdists; docs/design.md, "FlashAttention's kernel grid", cites each file and function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddlsim.errors import ConfigError
from ddlsim.system.specs import DeviceSpec

#: the main loop's share of the tensor-core peak (forward, backward), the asymptote a long
#: sequence approaches, by version. FA1: 40%, the top of Dao 2023's "25-40%" of A100's peak
#: (sec. 1), its backward at FA2's backward-to-forward ratio (the same algorithm's extra
#: matmuls); FA2: 73% forward and 63% backward, the tops of Dao 2023's A100 benchmarks
#: (sec. 4.1: "up to 73%" forward, "up to 63%" backward); FA3: 75% forward on H100 fp16 (Shah
#: et al. 2024: 740 of 989 TFLOP/s), its backward at FA2's ratio.
FLASH_ASYMPTOTE = {1: (0.40, 0.40 * 0.63 / 0.73), 2: (0.73, 0.63), 3: (0.75, 0.75 * 0.63 / 0.73)}
#: the same on Hopper for the versions written with Ampere's warp-level ``mma.sync`` (FA1, FA2:
#: no ``wgmma``, no TMA), a smaller share of Hopper's peak: FA2 at head dim 128, 16k tokens
#: (a long sequence: the asymptote), 338 TFLOP/s forward and about 300 backward of 989 (Shah
#: et al. 2024, Figs. 5-6, the FlashAttention-2 baselines); FA1 at FA2's Hopper share times
#: FA1's Ampere ratio to FA2 (the same instructions); FA3 is Hopper's own kernel
FLASH_ASYMPTOTE_HOPPER = {
    1: (0.342 * 0.40 / 0.73, 0.30 * FLASH_ASYMPTOTE[1][1] / 0.63),
    2: (0.342, 0.30),
    3: FLASH_ASYMPTOTE[3],
}
#: architectures whose tensor-core peak needs instructions newer than Ampere's ``mma.sync``
#: (Hopper's ``wgmma``, Blackwell's ``tcgen05``): FLASH_ASYMPTOTE_HOPPER; on Blackwell an
#: assumption (no FA2 measurement there: datasheet-only)
HOPPER_ARCHS = ("hopper", "blackwell")
#: FlashAttention's backward recomputes the scores: 2.5x the forward FLOPs (S = QK^T, dP, dV,
#: dK, dQ: five matmuls to the forward's two)
FLASH_BACKWARD_FLOPS = 2.5
#: shared memory an SM holds, bytes (CUDA programming guide, compute capabilities table:
#: 7.5: 64 KB; 8.0: 164 KB -- A100; the sm_86 Ampere parts have 100 KB and get other tiles,
#: not modelled; 9.0: 228 KB; Blackwell taken as Hopper)
SMEM_PER_SM_BYTES = {"turing": 64 << 10, "ampere": 164 << 10, "hopper": 228 << 10}
SMEM_PER_SM_BYTES["blackwell"] = SMEM_PER_SM_BYTES["hopper"]
#: 32-bit registers an SM holds (65536 on every architecture since Kepler); flash-attn's
#: kernels are register-bound: we take each thread at the 255-register ceiling, allocated in
#: 256s (the compiler's count is not in the source)
REGISTERS_PER_SM = 65536
REGISTERS_PER_THREAD = 256
#: FA1's forward Q step: 16 rows a step (``FMHA_kernel_traits<S, D, STEP=16, ...>``)
FA1_STEP_ROWS = 16


@dataclass(frozen=True)
class FlashTiles:
    """One kernel's launch configuration: ``rows`` (Br) query rows by ``cols`` (Bc) key/value
    rows a tile, ``warps`` a CTA, ``smem_bytes`` of shared memory a CTA."""

    rows: int
    cols: int
    warps: int
    smem_bytes: int

    def ctas_per_sm(self, arch: str) -> int:
        """CTAs one SM holds at once: the fewer of its shared memory and its registers allow,
        at least one."""
        by_smem = SMEM_PER_SM_BYTES.get(arch, SMEM_PER_SM_BYTES["ampere"]) // self.smem_bytes
        by_regs = REGISTERS_PER_SM // (self.warps * 32 * REGISTERS_PER_THREAD)
        return max(1, min(by_smem, by_regs))


def _padded_head_dim(version: int, head_dim: int) -> int:
    """The head dim of the kernel flash-attn dispatches ``head_dim`` to (the next one up)."""
    dims = (32, 64, 128) if version == 1 else (32, 64, 96, 128, 160, 192, 224, 256)
    for d in dims:
        if head_dim <= d:
            return d
    raise ConfigError(f"FlashAttention {version} at head dim {head_dim}: at most {dims[-1]}")


#: FA2 (2.5.8) on sm_80 / sm_90, no dropout, by head dim: forward (Br, Bc, warps) from
#: ``csrc/flash_attn/src/flash_fwd_launch_template.h`` (``run_mha_fwd_hdim*``), backward from
#: ``flash_bwd_launch_template.h`` (``run_mha_bwd_hdim*``, the >= 144 KB shared-memory branch)
FA2_FWD_TILES = {
    32: (128, 128, 4),
    64: (128, 128, 4),
    96: (128, 64, 4),
    128: (128, 64, 4),
    160: (128, 32, 4),
    192: (128, 64, 8),
    224: (128, 64, 8),
    256: (128, 64, 8),
}
FA2_BWD_TILES = {32: (128, 128, 8), 64: (128, 128, 8), 96: (64, 128, 8), 128: (64, 128, 8)}
FA2_BWD_TILES.update({d: (64, 64, 8) for d in (160, 192, 224, 256)})


def flash_tiles(version: int, direction: str, head_dim: int, arch: str) -> FlashTiles:
    """The tiles flash-attn launches for ``version`` / ``direction`` at ``head_dim`` on
    ``arch`` (FA3: taken as FA2's, its Hopper kernel's 128 x 128 not modelled separately)."""
    d = _padded_head_dim(version, head_dim)
    if version == 1:  # fmha_{fwd,bwd}_hdim*.cu: Bc 128 at head dim 128, 256 below (s >= 256)
        cols = 128 if d == 128 or (arch == "turing" and direction == "bwd") else 256
        warps = 4 if direction == "fwd" else 8
        # Q step, K and V blocks in shared memory (fmha::get_dynamic_smem_size)
        return FlashTiles(FA1_STEP_ROWS, cols, warps, (FA1_STEP_ROWS + 2 * cols) * d * 2)
    if direction == "fwd":
        rows, cols, warps = FA2_FWD_TILES[d]
        # kernel_traits.h kSmemSize: Q tile + K and V tiles
        return FlashTiles(rows, cols, warps, (rows + 2 * cols) * d * 2)
    rows, cols, warps = FA2_BWD_TILES[d]
    # kSmemSize1colblock: K, V, Q and dO (double-buffered), dS and P: >= 100 KB at these tiles
    return FlashTiles(rows, cols, warps, (2 * cols + 4 * rows) * d * 2 + 2 * rows * cols * 2)


def flash_asymptote(device: DeviceSpec, version: int, direction: str) -> float:
    """The main loop's share of ``device``'s tensor-core peak (:data:`FLASH_ASYMPTOTE`)."""
    table = FLASH_ASYMPTOTE_HOPPER if device.arch in HOPPER_ARCHS else FLASH_ASYMPTOTE
    return table[version][1 if direction == "bwd" else 0]


@dataclass(frozen=True)
class Grid:
    """What a kernel's time needs of the device: its CTA slots (SMs x the CTAs an SM holds),
    the seconds of one tile iteration and of one byte moved outside the loop, per CTA, and the
    width of an element (fp16 / bf16: 2, fp8: 1)."""

    slots: int
    iteration_s: float
    byte_s: float
    elem_bytes: int


def flash_grid(
    device: DeviceSpec,
    tiles: FlashTiles,
    head_dim: int,
    direction: str,
    *,
    peak_flops: float,
    stream_Bps: float,
    elem_bytes: int,
    version: int,
) -> Grid:
    """A CTA slot's rates: one tile iteration's FLOPs at the asymptote's rate per SM shared by
    the SM's CTAs; one byte at the DRAM bandwidth shared by every slot."""
    per_sm = tiles.ctas_per_sm(device.arch)
    slots = per_sm * (device.sm_count or 1)
    flops = 4.0 * tiles.rows * tiles.cols * head_dim
    if direction == "bwd":
        flops *= FLASH_BACKWARD_FLOPS
    iteration_s = flops * slots / (flash_asymptote(device, version, direction) * peak_flops)
    return Grid(slots, iteration_s, slots / stream_Bps, elem_bytes)


def _waves_s(ctas: list[tuple[float, int]], slots: int) -> float:
    """Seconds of a grid of CTA classes ``(seconds, count)`` run in waves over ``slots``:
    ``ceil(n / slots)`` waves of the mean CTA, never under the longest."""
    n = sum(count for _, count in ctas)
    if n == 0:
        return 0.0
    mean = sum(t * count for t, count in ctas) / n
    return max(max(t for t, count in ctas if count), math.ceil(n / slots) * mean)


def fa2_s(
    heads: int, seq: int, d: int, tiles: FlashTiles, grid: Grid, causal: bool, bwd: bool
) -> float:
    """FA2's main kernel over ``heads`` (batch x heads) sequences. Forward
    (``flash_fwd_kernel.h``, ``compute_attn_1rowblock``): a CTA per (Q tile, head), iterating
    over the KV tiles up to and including the diagonal (``n_block_max``). Backward
    (``flash_bwd_kernel.h``, ``compute_dq_dk_dv_1colblock``): a CTA per (KV tile, head),
    iterating over the Q tiles from the diagonal on (``m_block_min``)."""
    q_tiles, kv_tiles = math.ceil(seq / tiles.rows), math.ceil(seq / tiles.cols)
    p = grid.elem_bytes
    if not bwd:
        fixed = grid.byte_s * ((2 * tiles.rows + tiles.cols) * d * p + 4 * tiles.rows)
        ctas = [
            (fixed + grid.iteration_s * iters, heads)
            for iters in (
                min(kv_tiles, math.ceil((m + 1) * tiles.rows / tiles.cols)) if causal else kv_tiles
                for m in range(q_tiles)
            )
        ]
        return _waves_s(ctas, grid.slots)
    fixed = grid.byte_s * (4 * tiles.cols + 2 * tiles.rows) * d * p
    ctas = [
        (
            fixed + grid.iteration_s * (q_tiles - (n * tiles.cols // tiles.rows if causal else 0)),
            heads,
        )
        for n in range(kv_tiles)
    ]
    return _waves_s(ctas, grid.slots)


def _fa1_splits_fwd(heads: int, slots: int, max_splits: int) -> int:
    """FA1's forward splits of the Q steps (``fmha_fwd_launch_template.h``,
    ``num_splits_heuristic_fwd``): the fewest within 95% of the best wave efficiency."""
    eff = []
    for splits in range(1, max_splits + 1):
        waves = heads * splits / slots
        eff.append(waves / math.ceil(waves))
    best = max(eff)
    return next(i + 1 for i, e in enumerate(eff) if e > 0.95 * best)


def _fa1_parallel_bwd(heads: int, slots: int, seq: int, cols: int, causal: bool) -> bool:
    """Whether FA1's backward splits the KV blocks over CTAs (``fmha_bwd_launch_template.h``,
    ``num_splits_heuristic_bwd``), over the KV length rounded up to whole blocks
    (``fmha_api.cpp``, ``mha_bwd``: ``max_seqlen_k``)."""
    splits = math.ceil(seq / cols)
    seq = splits * cols
    if splits <= 1:
        return False
    if causal and splits >= 10:
        return True
    waves_1, waves_n = heads / slots, heads * splits / slots
    discount = 1 + (0.5 if causal else 1.0) * cols / seq
    return waves_1 / math.ceil(waves_1) < waves_n / math.ceil(waves_n) / discount


def fa1_s(
    heads: int, seq: int, d: int, tiles: FlashTiles, grid: Grid, causal: bool, bwd: bool
) -> tuple[float, int]:
    """FA1's kernel (``fmha_fprop_kernel_1xN.h`` / ``fmha_dgrad_kernel_1xN_loop.h``): the outer
    loop over KV blocks of ``Bc``, the inner over 16-row Q steps (causal: from the diagonal
    step ``j.Bc/16`` on, ``begin``), K and V loaded (backward: dK and dV written) once a block.
    Forward: a CTA per (head, split of the Q steps); backward: a CTA per head, or per (head, KV
    block) when the heuristic splits them. Returns (seconds, the memory-bound kernels the split
    backward adds: ``mha_bwd``'s ``dq_tmp.zero_()``, the dO.O kernel, ``dq.copy_(dq_tmp)``)."""
    steps, blocks = math.ceil(seq / tiles.rows), math.ceil(seq / tiles.cols)
    per_block = tiles.cols // tiles.rows
    todo = [steps - (j * per_block if causal else 0) for j in range(blocks)]
    kv_bytes = (4 if bwd else 2) * tiles.cols * d * grid.elem_bytes
    block_s = [grid.byte_s * kv_bytes + grid.iteration_s * n for n in todo]
    if not bwd:
        # run_fmha_fwd_loop's bound ``min(30, (seqlen_q + M - 1 / M))`` is ``seqlen_q + M``
        # past 30 by precedence: CTAs beyond the steps return at once
        splits = _fa1_splits_fwd(heads, grid.slots, min(30, seq + tiles.rows))
        per_cta = sum(
            grid.byte_s * kv_bytes + grid.iteration_s * math.ceil(n / splits) for n in todo
        )
        return _waves_s([(per_cta, heads * splits)], grid.slots), 0
    if _fa1_parallel_bwd(heads, grid.slots, seq, tiles.cols, causal):
        return _waves_s([(t, heads) for t in block_s], grid.slots), 3
    return _waves_s([(sum(block_s), heads)], grid.slots), 0
