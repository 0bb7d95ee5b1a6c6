"""FlashAttention's kernel grid (ddlsim/compute/flash_grid.py): closed forms, bounds, limits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.compute import flash_grid as fg
from ddlsim.compute.gemm import default_gemm_model
from ddlsim.compute.transformer_ops import flash_attention_s, stream_Bps
from ddlsim.errors import ConfigError
from ddlsim.system import catalog

MODEL = default_gemm_model()
A100, H100 = catalog.kernel_device("a100"), catalog.kernel_device("h100")


def _efficiency(device, version, seq, head_dim=128, direction="fwd", causal=False):
    """Useful FLOPs / (seconds x tensor peak) over 16k tokens of 16 heads."""
    batch, heads = max(1, 16384 // seq), 16
    t = flash_attention_s(
        batch, heads, seq, head_dim, device, "bf16",
        direction=direction, causal=causal, version=version,
    )  # fmt: skip
    flops = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
    flops *= fg.FLASH_BACKWARD_FLOPS if direction == "bwd" else 1.0
    return flops / (t * device.peak_fp16_flops)


def test_tiles_are_flash_attns():
    """FA2 2.5.8's sm_80 tiles at head dim 128 (fwd 128 x 64, 4 warps: 2 CTAs an SM on A100;
    bwd 64 x 128, 8 warps: 1); FA1's 16-row Q steps by 128 (head dim 128) or 256 (64) KV rows."""
    fwd = fg.flash_tiles(2, "fwd", 128, "ampere")
    assert (fwd.rows, fwd.cols, fwd.warps, fwd.smem_bytes) == (128, 64, 4, 64 << 10)
    assert fwd.ctas_per_sm("ampere") == 2  # 64 KB of 164; 128 threads x 256 registers
    bwd = fg.flash_tiles(2, "bwd", 128, "ampere")
    assert (bwd.rows, bwd.cols, bwd.ctas_per_sm("ampere")) == (64, 128, 1)
    assert fg.flash_tiles(2, "fwd", 80, "ampere") == fg.flash_tiles(2, "fwd", 96, "ampere")
    fa1 = fg.flash_tiles(1, "fwd", 128, "ampere")
    assert (fa1.rows, fa1.cols) == (16, 128)
    assert fg.flash_tiles(1, "bwd", 64, "ampere").cols == 256
    with pytest.raises(ConfigError, match="FlashAttention 1 at head dim 256"):
        flash_attention_s(1, 1, 1024, 256, A100, "bf16", version=1)


def test_tile_aligned_forward_is_waves_of_equal_ctas():
    """FA2's forward, non-causal, 2048 tokens, head dim 128 on A100: 27 heads x 16 Q tiles =
    432 CTAs = exactly 2 waves of 216 slots (108 SMs x 2); each CTA 32 KV tiles plus its
    fixed bytes (Q, the first K tile, O: 128+64+128 rows x 128 x 2 bytes, the fp32 LSE)."""
    heads, seq, d = 27, 2048, 128
    slots = 2 * A100.sm_count
    iteration = 4 * 128 * 64 * d * slots / (0.73 * A100.peak_fp16_flops)
    fixed = ((2 * 128 + 64) * d * 2 + 4 * 128) * slots / stream_Bps(A100)
    expected = MODEL.launch_s + 2 * (fixed + 32 * iteration)
    assert flash_attention_s(heads, 1, seq, d, A100, "bf16", version=2) == pytest.approx(expected)


def test_causal_backward_counts_tiles_from_the_diagonal():
    """FA2's causal backward: KV tile n (128 rows) iterates Q tiles (64 rows) from 2n on: with
    one head, 1024 tokens, 8 CTAs of 16, 14, ..., 2 tiles, one wave: the longest (16) rules."""
    tiles = fg.flash_tiles(2, "bwd", 128, "ampere")
    grid = fg.flash_grid(
        A100, tiles, 128, "bwd", peak_flops=A100.peak_fp16_flops, stream_Bps=1e12,
        elem_bytes=2, version=2,
    )  # fmt: skip
    fixed = grid.byte_s * (4 * 128 + 2 * 64) * 128 * 2
    causal = fg.fa2_s(1, 1024, 128, tiles, grid, causal=True, bwd=True)
    assert causal == pytest.approx(fixed + 16 * grid.iteration_s)
    assert fg.fa2_s(1, 1024, 128, tiles, grid, causal=False, bwd=True) == pytest.approx(causal)


def test_waves_round_up_and_never_beat_the_longest_cta():
    assert fg._waves_s([(1.0, 10)], 5) == 2.0
    assert fg._waves_s([(1.0, 11)], 5) == 3.0
    assert fg._waves_s([(4.0, 1), (1.0, 3)], 8) == 4.0  # one wave: the longest CTA
    assert fg._waves_s([(2.0, 8), (1.0, 8)], 4) == pytest.approx(4 * 1.5)


def test_fa1_split_heuristics():
    """FA1 splits its forward's Q steps to fill the waves: the fewest splits within 95% of
    the best wave efficiency (54 heads on 216 slots: 4, one full wave; 48 heads: 4 fill 0.89
    of a wave, 9 fill two exactly); its causal backward splits the KV blocks once there are 10."""
    assert fg._fa1_splits_fwd(54, 216, 30) == 4
    assert fg._fa1_splits_fwd(48, 216, 30) == 9
    assert fg._fa1_splits_fwd(216, 216, 30) == 1
    assert fg._fa1_parallel_bwd(64, 108, 2048, 128, causal=True)
    assert not fg._fa1_parallel_bwd(64, 108, 128, 128, causal=True)


@settings(max_examples=40, deadline=None)
@given(
    seq=st.integers(64, 12000),
    head_dim=st.sampled_from([64, 80, 128]),
    version=st.sampled_from([1, 2]),
    direction=st.sampled_from(["fwd", "bwd"]),
)
def test_causal_never_slower_and_time_grows_with_seq(seq, head_dim, version, direction):
    """Causal skips tiles; a longer sequence has no fewer (FA1's backward excepted: at a
    longer sequence its heuristic may pick the KV-split grid, which can be faster)."""
    kw = {"direction": direction, "version": version}
    causal = flash_attention_s(2, 16, seq, head_dim, A100, "bf16", causal=True, **kw)
    full = flash_attention_s(2, 16, seq, head_dim, A100, "bf16", causal=False, **kw)
    assert causal <= full * (1 + 1e-12)
    if version == 1 and direction == "bwd":  # FA1's heuristic may switch to the split grid
        return
    for c in (False, True):
        here = flash_attention_s(2, 16, seq, head_dim, A100, "bf16", causal=c, **kw)
        longer = flash_attention_s(2, 16, seq + 64, head_dim, A100, "bf16", causal=c, **kw)
        assert longer >= here


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_efficiency_rises_to_the_asymptote(version, direction):
    """Long sequences approach the paper's asymptote from below; short ones sit well under
    it (few KV tiles per CTA, fixed costs, the diagonal tiles computed whole)."""
    asymptote = fg.flash_asymptote(A100, version, direction)
    seqs = (512, 2048, 8192, 65536)
    effs = [_efficiency(A100, version, s, direction=direction, causal=True) for s in seqs]
    assert effs == sorted(effs)
    assert effs[-1] <= asymptote and effs[-1] > 0.9 * asymptote
    assert effs[0] < 0.7 * asymptote
    long = _efficiency(A100, version, 1 << 17, direction=direction)
    assert long == pytest.approx(asymptote, rel=0.05)


def test_hopper_runs_ampere_kernels_at_a_smaller_share():
    """FA1 / FA2 on H100 (mma.sync) reach a smaller share of its peak than FA3 (wgmma)."""
    fa2, fa3 = (_efficiency(H100, v, 16384) for v in (2, 3))
    assert fa2 < fg.FLASH_ASYMPTOTE_HOPPER[2][0] < 0.5 < fa3
    assert math.isclose(fg.FLASH_ASYMPTOTE_HOPPER[1][0], 0.342 * 0.40 / 0.73)


def test_fa1_forward_is_kv_blocks_of_split_q_steps():
    """FA1's forward, one head of 2048 tokens at head dim 128 on A100: 16 KV blocks of 128,
    128 Q steps of 16 split 29 ways (the fewest within 95% of 30's wave efficiency): one wave
    of 29 CTAs, each 16 x (K and V loaded + 5 Q steps)."""
    tiles = fg.flash_tiles(1, "fwd", 128, "ampere")
    grid = fg.flash_grid(
        A100, tiles, 128, "fwd", peak_flops=A100.peak_fp16_flops, stream_Bps=1e12,
        elem_bytes=2, version=1,
    )  # fmt: skip
    assert fg._fa1_splits_fwd(1, grid.slots, 30) == 29
    seconds, extra = fg.fa1_s(1, 2048, 128, tiles, grid, causal=False, bwd=False)
    kv = grid.byte_s * 2 * 128 * 128 * 2
    assert extra == 0 and seconds == pytest.approx(16 * (kv + 5 * grid.iteration_s))
