"""A transformer's memory-bound passes and FlashAttention: the kernels besides its GEMMs.

**Passes over memory.** LayerNorm, RMSNorm, softmax, GELU, SiLU-and-mul, dropout, residual
adds, RoPE and the embedding gather do a few FLOPs per element: their time is the bytes they
move over the DRAM bandwidth the element-wise kernels achieve (``stream_efficiency``, fitted)
plus a floor per kernel (``stream_launch_s``, fitted; :mod:`ddlsim.compute.gemm`'s model file).
What each moves is counted as in :mod:`ddlsim.compute.passes`: *passes* over the op's tensor
(``rows x cols`` elements at the precision's width), reads and writes, forward and backward
(:data:`PASSES`), plus the small tensors named in :func:`op_bytes` (LayerNorm's weights and
statistics, dropout's 1-byte mask, the embedding table's rows). An unfused op is one kernel per
step (:data:`UNFUSED_KERNELS`: scale, mask and softmax as three kernels read and write the
scores three times); fused, one kernel reads each input once and writes each output once.

**FlashAttention** (:func:`flash_attention_s`) never writes the ``s x s`` scores: one fused
kernel timed from its grid of tiles (:mod:`ddlsim.compute.flash_grid`), its backward
recomputing the scores (2.5x the forward FLOPs; Dao et al. 2022).
"""

from __future__ import annotations

from ddlsim.compute.flash_grid import (
    fa1_s,
    fa2_s,
    flash_grid,
    flash_tiles,
)
from ddlsim.compute.gemm import (
    ELEM_BYTES,
    GemmModel,
    check_precision,
    default_gemm_model,
    unit_peak,
)
from ddlsim.errors import ConfigError
from ddlsim.system.specs import DeviceSpec

#: op -> ((reads, writes) forward, (reads, writes) backward), in passes over the op's input
#: tensor (SiLU-and-mul's input is twice as wide as its output: half a pass written). A norm
#: reads x and writes y; its backward reads dy and x for dx, and again for the weight
#: gradients (PyTorch's LayerNorm backward: two kernels). Softmax's backward reads y and dy.
#: An activation's backward reads dy and its input. A binary op (add, mul, div, pow) reads two
#: operands; a unary one (relu, tanh, the ``u`` ops: a tensor and a scalar) one. A residual
#: add's backward is the sum of the two gradients of the fan-out (passes.py's count). RoPE
#: rotates q and k in place. The embedding gather reads the rows it writes; its backward adds
#: dy into the table.
PASSES = {
    "layernorm": ((1, 1), (4, 1)),
    "rmsnorm": ((1, 1), (4, 1)),
    "softmax": ((1, 1), (2, 1)),
    "gelu": ((1, 1), (2, 1)),
    "silu_and_mul": ((1, 0.5), (1.5, 1)),
    "dropout": ((1, 1), (1, 1)),
    "add": ((2, 1), (2, 1)),
    "mul": ((2, 1), (3, 2)),
    "div": ((2, 1), (3, 2)),
    "pow": ((2, 1), (2, 1)),
    "addu": ((1, 1), (1, 1)),
    "mulu": ((1, 1), (1, 1)),
    "divu": ((1, 1), (1, 1)),
    "powu": ((1, 1), (2, 1)),
    "relu": ((1, 1), (2, 1)),
    "tanh": ((1, 1), (2, 1)),
    "rope": ((1, 1), (1, 1)),
    "embedding": ((1, 1), (2, 1)),
    # a cast between a half format and fp32, at the half format's width: one pass read and
    # one written at twice the width (or the reverse), each direction
    "cast": ((1, 2), (1, 2)),
    # a copy into another layout (``.contiguous()``, a reshape of a permuted tensor, ``cat``):
    # its backward is a view; a copy only the backward makes (the reshape of a permuted
    # gradient before a batched GEMM); Transformer-XL's ``_rel_shift`` (forward: ``cat`` with a
    # zero column; backward: a zero gradient of the padded shape written, the slice copied in)
    "layout_copy": ((1, 1), (0, 0)),
    "grad_layout_copy": ((0, 0), (1, 1)),
    "rel_shift": ((1, 1), (1, 2)),
    # a sum whose backward hands the gradient to both operands by reference
    "add_by_reference": ((2, 1), (0, 0)),
    # the loss over the logits as one fused kernel each way (flash-attn's CrossEntropyLoss,
    # llm-foundry's default ``fused_crossentropy``): forward reads the half-precision logits
    # once (fp32 math in registers, one log-sum-exp a row); backward reads them again and
    # writes their gradient
    "cross_entropy_fused": ((1, 0), (1, 1)),
}
#: kernels an op is unfused into: scale, mask (added), softmax -- each reads and writes the scores
UNFUSED_KERNELS = {"softmax": 3}
DIRECTIONS = ("fwd", "bwd")
#: the version a framework runs unless told otherwise: FlashAttention 2, the flash backend of
#: PyTorch's scaled_dot_product_attention (2.2+); FA3 is a separate, Hopper-only install
DEFAULT_FLASH_VERSION = 2
#: the architectures each FlashAttention version runs on (FA1: Turing, Ampere, Ada, Hopper, as
#: flash-attn 1.0's README lists; FA2: sm_80+, Blackwell through PyTorch 2.7's
#: scaled_dot_product_attention; FA3: sm_90 Hopper only)
FLASH_ARCHS = {
    1: ("turing", "ampere", "hopper"),
    2: ("ampere", "hopper", "blackwell"),
    3: ("hopper",),
}


def op_bytes(
    op: str, rows: int, cols: int, precision: str, direction: str = "fwd", fused: bool = True
) -> float:
    """DRAM bytes of ``op`` over a ``rows x cols`` tensor at ``precision`` in ``direction``:
    its passes (:data:`PASSES`, x :data:`UNFUSED_KERNELS` unfused) plus LayerNorm's weights
    and fp32 statistics, dropout's 1-byte mask, the embedding's token ids."""
    if op not in PASSES:
        raise ConfigError(f"unknown memory-bound op {op!r}; valid: {', '.join(PASSES)}")
    if direction not in DIRECTIONS:
        raise ConfigError(f"unknown direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    p = ELEM_BYTES[precision]
    reads, writes = PASSES[op][DIRECTIONS.index(direction)]
    kernels = 1 if fused else UNFUSED_KERNELS.get(op, 1)
    moved = kernels * (reads + writes) * rows * cols * p
    if op in ("layernorm", "rmsnorm"):
        moved += 2 * cols * p + 2 * rows * 4  # weights (gamma, beta) + mean / rstd in fp32
    if op == "dropout":
        moved += rows * cols  # the 1-byte keep mask: written forward, read backward
    if op == "embedding":
        moved += rows * 8  # int64 token ids
    return float(moved)


def op_kernels(op: str, fused: bool = True) -> int:
    """Kernels ``op`` launches in one direction."""
    return 1 if fused else UNFUSED_KERNELS.get(op, 1)


def stream_Bps(device: DeviceSpec, model: GemmModel | None = None) -> float:
    """The DRAM bandwidth element-wise kernels move their bytes at on ``device``: its
    datasheet bandwidth x the fitted ``stream_efficiency``."""
    return device.mem_bandwidth_Bps * (model or default_gemm_model()).stream_efficiency


def memory_op_s(
    op: str,
    rows: int,
    cols: int,
    device: DeviceSpec,
    precision: str = "fp16",
    *,
    direction: str = "fwd",
    fused: bool = True,
    model: GemmModel | None = None,
) -> float:
    """Seconds of a memory-bound ``op`` (:data:`PASSES`) over ``rows x cols`` elements:
    bytes / (DRAM bandwidth x ``stream_efficiency``) + a floor per kernel."""
    check_precision(device, precision)
    m = model or default_gemm_model()
    moved = op_bytes(op, rows, cols, precision, direction, fused)
    if moved == 0:  # no kernel in this direction (a view)
        return 0.0
    return op_kernels(op, fused) * m.stream_launch_s + moved / stream_Bps(device, m)


def flash_version(device: DeviceSpec, version: int | None = None) -> int:
    """The FlashAttention version that runs on ``device`` (default: FlashAttention 2, PyTorch's,
    where the GPU runs it; FA1 on Turing);
    :class:`ConfigError` naming the combination where it does not run."""
    if version is None:  # PyTorch's default where the GPU runs it, else the newest it runs
        for v in (DEFAULT_FLASH_VERSION, 3, 2, 1):
            if device.arch in FLASH_ARCHS[v]:
                return v
        raise ConfigError(f"FlashAttention on {device.id} ({device.arch}): needs Turing or later")
    if version not in FLASH_ARCHS:
        raise ConfigError(f"unknown FlashAttention version {version!r}; valid: 1, 2, 3")
    if device.arch not in FLASH_ARCHS[version]:
        raise ConfigError(
            f"FlashAttention {version} on {device.id} ({device.arch}): runs on "
            f"{', '.join(FLASH_ARCHS[version])} only"
        )
    return version


def flash_attention_s(
    batch: int,
    heads: int,
    seq: int,
    head_dim: int,
    device: DeviceSpec,
    precision: str = "fp16",
    *,
    direction: str = "fwd",
    causal: bool = False,
    version: int | None = None,
    model: GemmModel | None = None,
) -> float:
    """Seconds of FlashAttention over ``batch x heads`` sequences of ``seq`` tokens with
    ``head_dim``: its kernel grid (:mod:`ddlsim.compute.flash_grid`: tiles at the version's
    main-loop asymptote, a fixed cost per CTA, waves over the SMs; ``causal`` skips the tiles
    above the diagonal), never under q, k, v, o (and their gradients) once through DRAM. The
    backward that accumulates dQ in fp32 over CTAs (FA2, FA1 when it splits the KV blocks) adds
    memory-bound kernels: dO.O (reads dO and O, writes the fp32 row sums), the fp32 dQ
    accumulator zeroed (FA2: by the dO.O kernel; FA1: a memset) and dQ's conversion (reads the
    accumulator, writes dQ)."""
    if precision not in ("fp16", "bf16", "fp8"):
        raise ConfigError(f"FlashAttention at {precision}: it runs fp16 / bf16 (fp8: FA3)")
    check_precision(device, precision)
    if precision == "fp8" and version not in (None, 3):
        raise ConfigError(f"FlashAttention {version} at fp8: only FlashAttention 3 has fp8")
    v = flash_version(device, version)
    if direction not in DIRECTIONS:
        raise ConfigError(f"unknown direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    peak, _ = unit_peak(device, precision)
    m = model or default_gemm_model()
    bandwidth, p, bwd = stream_Bps(device, m), ELEM_BYTES[precision], direction == "bwd"
    tiles = flash_tiles(v, direction, head_dim, device.arch)
    grid = flash_grid(
        device, tiles, head_dim, direction,
        peak_flops=peak, stream_Bps=bandwidth, elem_bytes=p, version=v,
    )  # fmt: skip
    n = batch * heads
    if v == 1:
        main, extra_kernels = fa1_s(n, seq, head_dim, tiles, grid, causal, bwd)
    else:  # FA3 on FA2's grid (its Hopper kernel's own tiles are not modelled)
        main, extra_kernels = fa2_s(n, seq, head_dim, tiles, grid, causal, bwd), 2 * bwd
    tensors = (8 if bwd else 4) * n * seq * head_dim * p
    seconds = m.launch_s + max(main, tensors / bandwidth)
    if extra_kernels:  # dO.O, the fp32 dQ zeroed, dQ converted: 2 kernels (FA2), 3 (FA1)
        moved = n * seq * (2 * head_dim * p + 4 + 4 * head_dim + 4 * head_dim + head_dim * p)
        seconds += extra_kernels * m.stream_launch_s + moved / bandwidth
    return seconds
