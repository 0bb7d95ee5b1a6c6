"""Measure transformer kernels and a small GPT's training step on a lent GPU, in the format of
``traces/measured/kernels/transformer/`` (its README, section "Measured by ddlsim on a lent
device", says what each column and ``time_stat`` means).

One command on the device machine (PyTorch only, no network)::

    python3 scripts/device_measure.py --out $OUT --budget-s 420

writes under ``--out`` (default ``$OUT``):

* ``gemm.csv`` -- GEMMs (``torch.matmul`` into a preallocated output; fp8 via
  ``torch._scaled_mm``) of the zoo's transformer layers (GPT-2, BERT-large, MPT-1B/7B,
  Llama-3-8B: QKV, attention out, FFN up/down, LM head) forward and their two backward GEMMs
  (data and weight gradients), a square sweep 512..16384, and attention's batched GEMMs
  (``bmm``: Q.K^T and P.V), at bf16, fp16, TF32, fp32 and fp8 -- the columns of ``gemm.csv``;
* ``attention.csv`` -- FlashAttention through ``scaled_dot_product_attention`` with the flash
  backend forced, forward (``flash_fwd``) and backward (``flash_bwd``, autograd), the columns
  of ``gemm.csv``: ``batch`` = micro-batch x heads, ``m`` = ``n`` = sequence, ``k`` = head_dim,
  ``source_op`` ``sdpa_flash`` or ``sdpa_flash causal``;
* ``elementwise.csv`` -- LayerNorm, RMSNorm, softmax, GELU, SiLU-and-mul, add, dropout and
  cross-entropy, forward, bf16 and fp32 -- the columns of ``elementwise.csv``;
* ``steps.csv`` -- a 1-GPU training step of a small GPT (bf16 autocast, fused AdamW, SDPA),
  eager and as one CUDA graph;
* ``machine.json`` -- the GPU (name, SMs, memory, clocks, power limit, driver), the PyTorch,
  CUDA, cuDNN and cuBLAS versions, each section's outcome and every failure.

Every row is written and flushed as soon as it is measured, so a run cut short keeps what it
has; every section runs inside ``try`` and records its failure; the sections run in order of
value (bf16 zoo GEMMs, FlashAttention, the training step, element-wise, sweeps, fp8, TF32,
fp32) and each stops at its share of ``--budget-s``, unspent time passing to the next.

``--smoke`` runs tiny sizes on the CPU (a test of the files' format, not of any number);
``--check DIR`` runs ``ddlsim kernels`` on a finished folder's CSVs.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ID = "ddlsim_device"
#: the columns of traces/measured/kernels/transformer/gemm.csv and elementwise.csv
GEMM_HEADER = [
    "source_id", "source_locator", "gpu", "precision", "math", "op", "batch", "m", "n", "k",
    "transa", "transb", "time_us", "time_stat", "model", "num_tokens", "tp", "source_op",
]  # fmt: skip
ELEM_HEADER = [
    "source_id", "source_locator", "gpu", "precision", "op", "source_op", "rows", "cols",
    "numel", "bytes_hint", "time_us", "time_stat", "model", "num_tokens", "tp",
]  # fmt: skip
STEP_HEADER = [
    "source_id", "source_locator", "gpu", "model", "layers", "d_model", "heads", "seq", "vocab",
    "params", "micro_batch", "precision", "mode", "step_s", "tokens_per_s", "time_stat",
    "source_op",
]  # fmt: skip
#: timing: WARMUP eager calls, then (on CUDA) the CALLS calls captured in one CUDA graph,
#: replayed once to warm up and WINDOWS times between two CUDA events; time_us = the median
#: replay / CALLS. Without a graph (CPU, or a capture that fails) the same calls run eagerly
#: back to back between the events (or the CPU's clock).
WARMUP, CALLS, WINDOWS = 3, 10, 5
STAT_GRAPH = "graph10_median5"
STAT_EAGER = "event10_median5"
STAT_STEP = "event_step_median10"
#: zoo transformers: d_model, heads, kv heads, ffn, gated FFN, vocab
ZOO = {
    "gpt2": (768, 12, 12, 3072, False, 50257),
    "bert-large": (1024, 16, 16, 4096, False, 30522),
    "mpt-1b": (2048, 16, 16, 8192, False, 50368),
    "mpt-7b": (4096, 32, 32, 16384, False, 50432),
    "llama-3-8b": (4096, 32, 8, 14336, True, 128256),
}
#: --smoke's stand-ins (CPU, seconds): a tiny plain and a tiny gated (Llama-like) layer
SMOKE_ZOO = {"tiny": (64, 4, 4, 128, False, 256), "tiny-gated": (64, 4, 2, 96, True, 320)}
MATH = {
    "bf16": "bf16 tensor cores",
    "fp16": "fp16 tensor cores",
    "tf32": "tf32 tensor cores (fp32 storage, allow_tf32)",
    "fp32": "fp32 CUDA cores (no TF32)",
    "fp8": "fp8 e4m3 tensor cores (torch._scaled_mm, bf16 out)",
}
SQUARES = (4096, 8192, 2048, 16384, 1024, 512, 6144, 12288, 3072, 1536, 768)


class Budget:
    """The run's deadline and each section's share of it."""

    def __init__(self, seconds: float) -> None:
        self.start = time.monotonic()
        self.end = self.start + seconds
        self.section_end = self.end

    def left_s(self) -> float:
        """Seconds until the run's deadline."""
        return self.end - time.monotonic()

    def open_section(self, share: float, total_share: float) -> None:
        """This section may spend ``share`` of what is left per unit of ``total_share``."""
        left = max(self.left_s(), 0.0)
        self.section_end = time.monotonic() + left * min(1.0, share / total_share)

    def expired(self) -> bool:
        """Whether the section's share or the run's budget is spent."""
        now = time.monotonic()
        return now >= self.section_end or now >= self.end


class Run:
    """Output files, the device and its names, the budget, the record of what happened."""

    def __init__(self, torch, args: argparse.Namespace) -> None:
        self.torch = torch
        self.smoke = args.smoke
        self.zoo = SMOKE_ZOO if args.smoke else ZOO
        self.cuda = torch.cuda.is_available() and not args.smoke
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.budget = Budget(args.budget_s)
        self.run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.name = torch.cuda.get_device_name(0) if self.cuda else "cpu"
        self.gpu = args.gpu or gpu_id(self.name)
        self.failures: list[dict[str, str]] = []
        self.sections: dict[str, dict[str, object]] = {}
        self.files = {}
        self.writers = {}
        self.counts: dict[str, int] = {}
        for key, header in (
            ("gemm", GEMM_HEADER),
            ("attention", GEMM_HEADER),
            ("elementwise", ELEM_HEADER),
            ("steps", STEP_HEADER),
        ):
            f = open(self.out / f"{key}.csv", "w", newline="", encoding="utf-8")  # noqa: SIM115
            self.files[key] = f
            self.writers[key] = csv.DictWriter(f, fieldnames=header)
            self.writers[key].writeheader()
            f.flush()
            self.counts[key] = 0

    def write(self, key: str, row: dict[str, object]) -> None:
        """Append one row to file ``key`` (with source, GPU and locator) and flush it."""
        self.counts[key] += 1
        row = {"source_id": SOURCE_ID, "gpu": self.gpu, **row}
        row["source_locator"] = f"run {self.run_id} {key} #{self.counts[key]}"
        self.writers[key].writerow(row)
        self.files[key].flush()

    def fail(self, where: str, exc: BaseException) -> None:
        """Record a failure and free what it left on the device."""
        self.failures.append({"where": where, "error": f"{type(exc).__name__}: {exc}"[:500]})
        if self.cuda:
            try:
                self.torch.cuda.synchronize()
                self.torch.cuda.empty_cache()
            except Exception as again:  # a broken context: say so, the next shape tries
                self.failures.append({"where": f"{where} (clean-up)", "error": str(again)[:200]})

    def fits(self, nbytes: float) -> bool:
        """Whether ``nbytes`` more fit in the device's free memory (with a margin)."""
        if not self.cuda:
            return nbytes < 2**28
        cuda = self.torch.cuda
        for _ in range(2):  # the allocator's cached blocks count as free; else release them
            free = cuda.mem_get_info()[0] + cuda.memory_reserved() - cuda.memory_allocated()
            if nbytes < 0.7 * free:
                return True
            cuda.empty_cache()
        return False

    def math(self, precision: str) -> str:
        """The ``math`` column: where the arithmetic ran."""
        return MATH[precision] if self.cuda else f"{precision} on the CPU (--smoke)"

    def close(self) -> None:
        """Close the CSV files."""
        for f in self.files.values():
            f.close()


def gpu_id(name: str) -> str:
    """ddlsim's catalog id of a device ``torch.cuda.get_device_name`` reports (the H100 / H200
    family explicitly; other GPUs through ddlsim's own matcher), else a slug of the name."""
    text = name.lower()
    explicit = (
        (r"\bgh200\b|h100 nvl|h200 nvl", None),
        (r"\bh200\b", "h200"),
        (r"\bh100\b.*pcie", "h100-pcie"),
        (r"\bh100\b.*(hbm3|sxm)", "h100"),
        (r"\bgb200\b", "gb200"),
        (r"\bb200\b", "b200"),
    )
    for pattern, cid in explicit:
        if re.search(pattern, text):
            return cid or _slug(name)
    try:
        sys.path.insert(0, str(ROOT))
        from ddlsim.tools.calibrate.devices import catalog_match

        return catalog_match(name) or _slug(name)
    except Exception:  # no ddlsim on the device: the slug
        return _slug(name)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def time_us(run: Run, fn, graph: bool = True) -> tuple[float, str]:
    """Per-call microseconds of ``fn`` and the statistic's code: CUDA-graph replays where
    ``graph`` and the capture works, else eager back-to-back calls (module constants)."""
    torch = run.torch
    for _ in range(WARMUP):
        fn()
    if not run.cuda:
        out = []
        for _ in range(WINDOWS):
            t = time.perf_counter()
            for _ in range(CALLS):
                fn()
            out.append((time.perf_counter() - t) * 1e6 / CALLS)
        return statistics.median(out), STAT_EAGER
    torch.cuda.synchronize()
    captured = _capture(torch, fn) if graph else None

    def eager() -> None:
        for _ in range(CALLS):
            fn()

    replay = captured.replay if captured is not None else eager
    replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(WINDOWS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / CALLS)
    del captured
    return statistics.median(out), STAT_EAGER if replay is eager else STAT_GRAPH


def _capture(torch, fn):
    """``CALLS`` calls of ``fn`` in one CUDA graph, None where the capture fails."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS):
                fn()
        return graph
    except Exception:  # not capturable: the caller times eager calls
        torch.cuda.synchronize()
        return None


# ---------------------------------------------------------------------------------- GEMMs


def zoo_gemms(tokens: int, zoo: dict = ZOO) -> list[tuple[str, str, int, int, int]]:
    """(model, layer, tokens, out features, in features) of each zoo layer's linear."""
    out = []
    for model, (d, heads, kv, ffn, gated, vocab) in zoo.items():
        hd = d // heads
        out += [
            (model, "qkv", tokens, (heads + 2 * kv) * hd, d),
            (model, "attn_out", tokens, d, heads * hd),
            (model, "ffn_up", tokens, (2 if gated else 1) * ffn, d),
            (model, "ffn_down", tokens, d, ffn),
            (model, "lm_head", tokens, vocab, d),
        ]
    return out


def linear_passes(tokens: int, n_out: int, n_in: int) -> list[tuple[str, int, int, int, str]]:
    """The three GEMMs of ``nn.Linear(n_in -> n_out)`` on ``tokens`` rows, row-major
    ``C[m,n] = op(A)[m,k] . op(B)[k,n]`` with the README's ``transa``/``transb``: forward
    ``x . W^T`` (W stored [n_out, n_in]), data gradient ``dy . W``, weight gradient
    ``dy^T . x``."""
    return [
        ("fwd", tokens, n_out, n_in, "NT"),
        ("dgrad", tokens, n_in, n_out, "NN"),
        ("wgrad", n_out, n_in, tokens, "TN"),
    ]


def gemm_fn(
    run: Run, precision: str, m: int, n: int, k: int, trans: str, batch: int = 1
) -> Callable[[], None]:
    """A closure computing one GEMM (into a preallocated output, but fp8)."""
    torch = run.torch
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    lead = (batch,) if batch > 1 else ()
    a_shape = (*lead, k, m) if trans[0] == "T" else (*lead, m, k)
    b_shape = (*lead, n, k) if trans[1] == "T" else (*lead, k, n)
    if precision == "fp8":
        a = torch.randn(m, k, device=run.device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=run.device).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device=run.device)

        def fp8() -> None:
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return fp8
    a = torch.randn(a_shape, device=run.device, dtype=dtype)
    b = torch.randn(b_shape, device=run.device, dtype=dtype)
    a = a.transpose(-1, -2) if trans[0] == "T" else a
    b = b.transpose(-1, -2) if trans[1] == "T" else b
    c = torch.empty((*lead, m, n), device=run.device, dtype=dtype)

    def mm() -> None:
        torch.matmul(a, b, out=c)

    return mm


def measure_gemm(run: Run, precision: str, shape: tuple, **row) -> None:
    """Time one GEMM (``shape`` = batch, m, n, k, trans) and write its row."""
    torch = run.torch
    batch, m, n, k, trans = shape
    width = {"fp32": 4, "tf32": 4, "fp8": 4}.get(precision, 2)  # fp8: made from fp32 randn
    if not run.fits(batch * (m * k + k * n + m * n) * width * 1.2):
        run.failures.append({"where": f"gemm {precision} {shape}", "error": "skipped: memory"})
        return
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        t, stat = time_us(run, gemm_fn(run, precision, m, n, k, trans, batch))
    except Exception as exc:  # recorded, the next shape runs
        run.fail(f"gemm {precision} {shape}", exc)
        return
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    run.write("gemm", {
        "precision": precision, "math": run.math(precision), "op": "bmm" if batch > 1 else "gemm",
        "batch": batch, "m": m, "n": n, "k": k, "transa": trans[0], "transb": trans[1],
        "time_us": f"{t:.3f}", "time_stat": stat, **row,
    })  # fmt: skip


def zoo_section(run: Run, precisions, token_counts, passes=("fwd", "dgrad", "wgrad")) -> None:
    """The zoo's linear layers' GEMMs (fp8: the forward's TN layout only)."""
    for tokens in token_counts:
        for precision in precisions:
            for model, layer, t, n_out, n_in in zoo_gemms(tokens, run.zoo):
                for name, m, n, k, trans in linear_passes(t, n_out, n_in):
                    if run.budget.expired():
                        return
                    if name not in passes or (precision == "fp8" and trans != "NT"):
                        continue
                    measure_gemm(
                        run, precision, (1, m, n, k, trans),
                        model=model, num_tokens=t, tp=1, source_op=f"{layer} {name}",
                    )  # fmt: skip


def square_section(run: Run, precisions, sizes) -> None:
    """Square GEMMs (NN; fp8 TN, the layout ``_scaled_mm`` takes)."""
    for size in sizes:
        for precision in precisions:
            if run.budget.expired():
                return
            trans = "NT" if precision == "fp8" else "NN"
            measure_gemm(run, precision, (1, size, size, size, trans), source_op="square")


def bmm_section(run: Run, precision: str, seqs, tokens: int) -> None:
    """Attention's batched GEMMs: scores Q.K^T [s,d]x[d,s] and P.V [s,s]x[s,d]."""
    for seq in seqs:
        for model in list(run.zoo)[:: len(run.zoo) - 1]:  # the first and the last
            d, heads = run.zoo[model][:2]
            hd, batch = d // heads, max(1, tokens // seq) * heads
            for shape, op in (
                ((batch, seq, seq, hd, "NT"), "qk"),
                ((batch, seq, hd, seq, "NN"), "pv"),
            ):
                if run.budget.expired():
                    return
                measure_gemm(
                    run, precision, shape, model=model, num_tokens=max(1, tokens // seq) * seq,
                    tp=1, source_op=f"attention {op}",
                )  # fmt: skip


# ------------------------------------------------------------------------ FlashAttention


def flash_context(torch) -> AbstractContextManager:
    """A context that forces SDPA's FlashAttention backend (PyTorch >= 2.3's ``sdpa_kernel``,
    else the older ``torch.backends.cuda.sdp_kernel``)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:
        return torch.backends.cuda.sdp_kernel(
            enable_flash=True, enable_math=False, enable_mem_efficient=False
        )


def flash_one(run: Run, batch: int, heads: int, seq: int, hd: int, causal: bool) -> None:
    """Time SDPA (flash forced) forward, then its backward by autograd, and write both rows."""
    torch = run.torch
    F = torch.nn.functional
    shape = (batch, heads, seq, hd)
    if not run.fits(12 * batch * heads * seq * hd * 2 * 1.5):
        run.failures.append({"where": f"flash {shape}", "error": "skipped: memory"})
        return
    q, k, v = (
        torch.randn(shape, device=run.device, dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3)
    )
    name = f"sdpa_flash{' causal' if causal else ''} heads={heads}"
    dims = {"batch": batch * heads, "m": seq, "n": seq, "k": hd, "transa": "N", "transb": "T"}
    common = {"precision": "bf16", "math": run.math("bf16"), **dims, "source_op": name}
    common |= {"num_tokens": batch * seq, "tp": 1}
    with flash_context(torch):

        def fwd() -> None:
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        t, stat = time_us(run, fwd)
        run.write("attention", {**common, "op": "flash_fwd", "time_us": f"{t:.3f}",
                                "time_stat": stat})  # fmt: skip
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        grad = torch.randn_like(out)

        def bwd() -> None:
            torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

        t, stat = time_us(run, bwd, graph=False)
        run.write("attention", {**common, "op": "flash_bwd", "time_us": f"{t:.3f}",
                                "time_stat": stat})  # fmt: skip


def flash_section(run: Run, seqs, tokens: int) -> None:
    """FlashAttention at ``tokens`` per batch: head_dim 128 and 64, causal and not."""
    for seq in seqs:
        for hd, heads in ((32, 2), (16, 2)) if run.smoke else ((128, 16), (64, 12)):
            for causal in (True, False):
                if run.budget.expired():
                    return
                try:
                    flash_one(run, max(1, tokens // seq), heads, seq, hd, causal)
                except Exception as exc:  # recorded, the next shape runs
                    run.fail(f"flash seq {seq} hd {hd} causal {causal}", exc)


# --------------------------------------------------------------------------- element-wise


def elementwise_cases(torch, smoke: bool) -> list[tuple[str, str, int, int]]:
    """(op, torch call, rows, cols): the zoo's activations (tokens x d_model or x ffn), the
    attention scores (b.heads.s x s) and the logits (tokens x vocab)."""
    if smoke:
        return [(op, src, 64, 96) for op, src in _EW_OPS]
    out = []
    for tokens in (8192, 32768):
        for op, src in _EW_OPS:
            if op == "softmax":
                out += [(op, src, tokens * 16, 1024), (op, src, tokens // 8, 50304)]
            elif op == "cross_entropy":
                out += [(op, src, tokens // 4, 50304), (op, src, tokens // 4, 128256)]
            elif op == "silu_and_mul_eager":
                out += [(op, src, tokens, 2 * 14336)]
            else:
                out += [(op, src, tokens, d) for d in (768, 2048, 4096, 8192)]
    return out


_EW_OPS = (
    ("layernorm", "F.layer_norm (affine)"),
    ("rmsnorm", "F.rms_norm (weight)"),
    ("softmax", "torch.softmax(dim=-1)"),
    ("gelu", "F.gelu (erf)"),
    ("add", "x + y"),
    ("dropout", "F.dropout(p=0.1, training)"),
    ("silu_and_mul_eager", "F.silu(a) * b: 2 kernels (unfused)"),
    ("cross_entropy", "F.cross_entropy (log_softmax + nll_loss)"),
)


def elementwise_fn(
    run: Run, op: str, rows: int, cols: int, dtype
) -> tuple[Callable[[], object], int]:
    """A closure for one op's forward on fresh tensors, and its minimal DRAM bytes."""
    torch = run.torch
    F = torch.nn.functional
    x = torch.randn(rows, cols, device=run.device, dtype=dtype)
    e, n = x.element_size(), rows * cols
    w = torch.ones(cols, device=run.device, dtype=dtype)
    if op == "layernorm":
        return (lambda: F.layer_norm(x, (cols,), w, w)), 2 * e * n + 2 * e * cols
    if op == "rmsnorm":
        return (lambda: F.rms_norm(x, (cols,), w)), 2 * e * n + e * cols
    if op == "softmax":
        return (lambda: torch.softmax(x, dim=-1)), 2 * e * n
    if op == "gelu":
        return (lambda: F.gelu(x)), 2 * e * n
    if op == "add":
        y = torch.randn_like(x)
        return (lambda: x + y), 3 * e * n
    if op == "dropout":
        return (lambda: F.dropout(x, 0.1, training=True)), 2 * e * n + n
    if op == "silu_and_mul_eager":
        a, b = x[:, : cols // 2], x[:, cols // 2 :]
        return (lambda: F.silu(a) * b), e * n + e * n // 2
    if op == "cross_entropy":
        target = torch.randint(0, cols, (rows,), device=run.device)
        return (lambda: F.cross_entropy(x, target)), e * n
    raise ValueError(op)


def elementwise_section(run: Run, precisions) -> None:
    """The memory-bound ops' forwards (:func:`elementwise_cases`)."""
    torch = run.torch
    for precision in precisions:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        for op, src, rows, cols in elementwise_cases(torch, run.smoke):
            if run.budget.expired():
                return
            if op == "rmsnorm" and not hasattr(torch.nn.functional, "rms_norm"):
                continue
            if not run.fits(rows * cols * 4 * 5):
                run.failures.append({"where": f"{op} {rows}x{cols}", "error": "skipped: memory"})
                continue
            try:
                fn, nbytes = elementwise_fn(run, op, rows, cols, dtype)
                t, stat = time_us(run, fn)
            except Exception as exc:  # recorded, the next shape runs
                run.fail(f"{op} {precision} {rows}x{cols}", exc)
                continue
            run.write("elementwise", {
                "precision": precision, "op": op, "source_op": src, "rows": rows,
                "cols": cols, "numel": rows * cols, "bytes_hint": nbytes,
                "time_us": f"{t:.3f}", "time_stat": stat, "num_tokens": rows, "tp": 1,
            })  # fmt: skip


# -------------------------------------------------------------------------- training step


def gpt_model(torch, layers: int, d: int, heads: int, seq: int, vocab: int) -> object:
    """A GPT-2-style decoder (pre-LN, GELU MLP 4d, tied LM head, FlashAttention via SDPA)."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, d // heads).unbind(2)
            a = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx, target):
            x = self.wte(idx) + self.wpe.weight[: idx.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.float().view(-1, vocab), target.view(-1))

    return GPT()


def step_one(run: Run, dims: dict[str, int], micro_batch: int, mode: str) -> None:
    """Time ``mode`` (eager, or cuda_graph: the whole step captured) and write its row."""
    torch = run.torch
    model = gpt_model(torch, **dims).to(run.device)
    graph = mode == "cuda_graph"
    options = {"lr": 1e-4, "fused": True} | ({"capturable": True} if graph else {})
    try:
        opt = torch.optim.AdamW(model.parameters(), **options)
    except (RuntimeError, TypeError):  # no fused AdamW on this device
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seq, vocab = dims["seq"], dims["vocab"]
    idx = torch.randint(0, vocab, (micro_batch, seq), device=run.device)
    target = torch.randint(0, vocab, (micro_batch, seq), device=run.device)

    def step() -> None:
        opt.zero_grad(set_to_none=not graph)
        with torch.autocast(run.device.type, dtype=torch.bfloat16, cache_enabled=False):
            loss = model(idx, target)
        loss.backward()
        opt.step()

    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        call = g.replay
    else:
        call = step
    times = _step_times(run, call)
    t = statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    run.write("steps", {
        "model": "gpt", "layers": dims["layers"], "d_model": dims["d"], "heads": dims["heads"],
        "seq": seq, "vocab": vocab, "params": params, "micro_batch": micro_batch,
        "precision": "bf16 autocast", "mode": mode, "step_s": f"{t:.6f}",
        "tokens_per_s": f"{micro_batch * seq / t:.1f}", "time_stat": STAT_STEP,
        "source_op": f"AdamW {'fused' if opt.defaults.get('fused') else 'foreach'}, SDPA",
    })  # fmt: skip


def _step_times(run: Run, call) -> list[float]:
    """Seconds of each of 10 steps after 3 warm-ups (CUDA events; the CPU's clock in smoke)."""
    torch = run.torch
    for _ in range(3):
        call()
    out = []
    for _ in range(10):
        if not run.cuda:
            t = time.perf_counter()
            call()
            out.append(time.perf_counter() - t)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / 1e3)
    return out


def step_section(run: Run) -> None:
    """The small GPT's training step per micro-batch, eager then as one CUDA graph."""
    if run.smoke:
        dims, batches = {"layers": 2, "d": 64, "heads": 2, "seq": 32, "vocab": 256}, (1, 2)
    else:
        dims = {"layers": 12, "d": 768, "heads": 12, "seq": 1024, "vocab": 50304}
        batches = (8, 1, 4, 16, 2)
    config = gpt_config(**dims)
    (run.out / "gpt_config.json").write_text(json.dumps(config, indent=2) + "\n")
    modes = ("eager", "cuda_graph") if run.cuda else ("eager",)
    for mode in modes:
        for mb in batches:
            if run.budget.expired():
                return
            try:
                step_one(run, dims, mb, mode)
            except Exception as exc:  # recorded, the next one runs
                run.fail(f"step {mode} micro-batch {mb}", exc)


def gpt_config(layers: int, d: int, heads: int, seq: int, vocab: int) -> dict[str, object]:
    """:func:`gpt_model` as a ``ddlsim predict --model-config`` file."""
    return {
        "name": f"ddlsim-device-gpt-{layers}x{d}", "layers": layers, "hidden": d,
        "heads": heads, "kv_heads": heads, "ffn": 4 * d, "ffn_kind": "gelu", "vocab": vocab,
        "max_positions": seq, "seq_len": seq, "position": "learned", "norm": "layernorm",
        "norm_placement": "pre", "final_norm": True, "bias": True, "tie_embeddings": True,
        "causal": True, "dropout": 0.0,
    }  # fmt: skip


#: ``ddlsim predict`` flags of the measured step: bf16 autocast, FlashAttention through SDPA,
#: fused AdamW, the loss on fp32 logits (unfused), one GPU
PREDICT_FLAGS = [
    "--precision", "bf16", "--framework", "pytorch", "--attention", "flash",
    "--optimizer", "adamw", "--optimizer-kernels", "fused", "--loss-kernel", "unfused",
]  # fmt: skip


def check_steps(folder: Path) -> None:
    """Each step of ``steps.csv`` measured against ``ddlsim predict`` (GPUs of the catalog)."""
    config = folder / "gpt_config.json"
    with (folder / "steps.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    print(f"\n{folder / 'steps.csv'} vs ddlsim predict --model-config {config}:")
    for r in rows:
        cmd = [
            sys.executable,
            "-m",
            "ddlsim",
            "predict",
            "--model-config",
            str(config),
            "--gpu",
            r["gpu"],
            "--batch",
            r["micro_batch"],
            *PREDICT_FLAGS,
            "--json",
        ]
        cmd += ["--cuda-graphs"] if r["mode"] == "cuda_graph" else []  # fmt: skip
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        try:
            predicted = f"{json.loads(done.stdout)['iteration_time_s'] * 1e3:8.2f}"
        except (ValueError, KeyError):
            predicted = f"- ({(done.stderr.strip().splitlines() or ['no output'])[-1][:60]})"
        measured = float(r["step_s"]) * 1e3
        print(f"  {r['gpu']} {r['mode']:<10} micro-batch {r['micro_batch']:>2}: measured "
              f"{measured:8.2f} ms/step, predicted {predicted} ms")  # fmt: skip


# --------------------------------------------------------------------------------- machine


def nvidia_smi() -> dict[str, str]:
    """``nvidia-smi --query-gpu`` fields of GPU 0 (each group alone: an unknown field fails
    its whole query), {} without nvidia-smi."""
    out: dict[str, str] = {}
    groups = (
        "name,driver_version,power.limit,clocks.max.sm,clocks.sm",
        "power.max_limit,power.default_limit,clocks.max.mem,clocks.mem,memory.total",
        "temperature.gpu,ecc.mode.current,persistence_mode,mig.mode.current,pstate",
    )
    for fields in groups:
        try:
            text = subprocess.run(
                ["nvidia-smi", f"--query-gpu={fields}", "--format=csv"],
                capture_output=True, text=True, timeout=20, check=True,
            ).stdout.splitlines()  # fmt: skip
            out |= dict(
                zip(fields.split(","), (v.strip() for v in text[1].split(",")), strict=True)
            )
        except (OSError, subprocess.SubprocessError, IndexError, ValueError):
            continue
    return out


def cublas_version() -> str | None:
    """cuBLAS's version from the library this process loaded (``cublasGetProperty``)."""
    import ctypes

    try:
        maps = Path("/proc/self/maps").read_text()
        path = next(m.group(0) for m in re.finditer(r"/\S*libcublas\.so[.\d]*", maps))
        lib = ctypes.CDLL(path)
        parts = []
        for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            lib.cublasGetProperty(prop, ctypes.byref(value))
            parts.append(str(value.value))
        return ".".join(parts)
    except (OSError, StopIteration, AttributeError):
        return None


def machine(run: Run) -> dict[str, object]:
    """The device, its software and the timing statistics' definitions."""
    torch = run.torch
    info: dict[str, object] = {
        "run_id": run.run_id, "source_id": SOURCE_ID, "gpu": run.gpu, "device_name": run.name,
        "torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
        "cudnn": torch.backends.cudnn.version() if run.cuda else None, "smoke": run.smoke,
        "matmul_fp16_reduced_precision_reduction": getattr(
            torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", None),
        "matmul_bf16_reduced_precision_reduction": getattr(
            torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", None),
        "timing": {
            STAT_GRAPH: f"{WARMUP} eager warm-up calls, {CALLS} calls captured in one CUDA "
            f"graph, 1 warm-up replay, then the median of {WINDOWS} replays between CUDA events "
            f"/ {CALLS}",
            STAT_EAGER: f"{WARMUP} warm-up calls, then the median of {WINDOWS} windows of {CALLS} "
            f"back-to-back eager calls between CUDA events (the CPU's clock in --smoke) / {CALLS}",
            STAT_STEP: "3 warm-up steps, then the median of 10 steps each between CUDA events",
        },
    }  # fmt: skip
    if run.cuda:
        try:
            info |= _properties(torch)
        except Exception as exc:  # recorded; the measurements do not need them
            run.fail("machine properties", exc)
    return info


def _properties(torch) -> dict[str, object]:
    """The device's properties (those this torch exposes) and nvidia-smi's view of it."""
    p = torch.cuda.get_device_properties(0)
    keep = ("name", "multi_processor_count", "total_memory", "major", "minor",
            "L2_cache_size", "clock_rate", "memory_clock_rate", "memory_bus_width")  # fmt: skip
    return {
        "properties": {k: getattr(p, k) for k in keep if hasattr(p, k)},
        "nvidia_smi_start": nvidia_smi(),
    }


# ------------------------------------------------------------------------------------ main


def sections(run: Run) -> list[tuple[str, float, object]]:
    """(name, share of the budget, callable), most valuable first."""
    smoke = run.smoke
    tokens = (64,) if smoke else (8192, 4096, 16384, 32768)
    squares = (64, 96) if smoke else SQUARES
    seqs = (32, 64) if smoke else (2048, 4096, 1024, 8192, 512, 16384)
    att_tokens = 128 if smoke else 16384
    fp8 = run.cuda and hasattr(run.torch, "float8_e4m3fn") and _sm(run) >= (8, 9)
    few = tokens[:1]
    return [
        ("gemm_zoo_bf16", 3, lambda: zoo_section(run, ("bf16",), tokens)),
        ("flash_attention_bf16", 2, lambda: flash_section(run, seqs, att_tokens)),
        ("train_step", 1.5, lambda: step_section(run)),
        ("elementwise_bf16", 1, lambda: elementwise_section(run, ("bf16",))),
        ("gemm_square_bf16_fp16", 1, lambda: square_section(run, ("bf16", "fp16"), squares)),
        ("gemm_fp8", 1, lambda: fp8 and (zoo_section(run, ("fp8",), few, ("fwd",)),
                                         square_section(run, ("fp8",), squares))),
        ("gemm_zoo_tf32_fp16", 1.5, lambda: zoo_section(run, ("tf32", "fp16"), few)),
        ("gemm_square_tf32", 0.5, lambda: square_section(run, ("tf32",), squares)),
        ("bmm_attention_bf16", 1, lambda: bmm_section(run, "bf16", seqs[:5], att_tokens)),
        ("elementwise_fp32", 0.5, lambda: elementwise_section(run, ("fp32",))),
        ("gemm_fp32", 1, lambda: (square_section(run, ("fp32",), squares[:4]),
                                  zoo_section(run, ("fp32",), tokens[1:2] or tokens))),
    ]  # fmt: skip


def _sm(run: Run) -> tuple[int, int]:
    return tuple(run.torch.cuda.get_device_capability(0))


def measure(args: argparse.Namespace) -> int:
    """Run every section within the budget, writing rows as they come."""
    import torch

    torch.manual_seed(0)
    run = Run(torch, args)
    info = machine(run)
    todo = sections(run)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {name for name, _, _ in todo}
        if unknown:
            raise SystemExit(f"--only: unknown section(s) {', '.join(sorted(unknown))}; "
                             f"valid: {', '.join(name for name, _, _ in todo)}")  # fmt: skip
        todo = [t for t in todo if t[0] in wanted]
    shares = [s for _, s, _ in todo]
    for i, (name, share, body) in enumerate(todo):
        run.budget.open_section(share, sum(shares[i:]))
        start, before = time.monotonic(), dict(run.counts)
        if run.budget.left_s() <= 0:
            run.sections[name] = {"status": "not run: budget spent"}
            continue
        try:
            body()
            status = "cut by the budget" if run.budget.expired() else "done"
        except Exception as exc:  # recorded, the next section runs
            run.fail(name, exc)
            status = "failed: " + traceback.format_exception_only(type(exc), exc)[-1].strip()
        rows = {k: run.counts[k] - before[k] for k in run.counts if run.counts[k] > before[k]}
        run.sections[name] = {"status": status, "seconds": round(time.monotonic() - start, 1),
                              "rows": rows}  # fmt: skip
        print(f"{name}: {status}, {run.sections[name]['seconds']} s, rows {rows}", flush=True)
        _write_machine(run, info)
    if run.cuda:
        info["cublas"] = cublas_version()
        info["nvidia_smi_end"] = nvidia_smi()
    _write_machine(run, info)
    run.close()
    print(f"wrote {run.out}: rows {run.counts}, {len(run.failures)} failures", flush=True)
    return 0


def _write_machine(run: Run, info: dict[str, object]) -> None:
    doc = {**info, "sections": run.sections, "rows": run.counts, "failures": run.failures}
    tmp = run.out / "machine.json.tmp"
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(run.out / "machine.json")


def check(folder: Path, held_out: bool) -> int:
    """``ddlsim kernels`` on each CSV of a finished run, then the training steps as measured."""
    rc = 0
    for name in ("gemm.csv", "attention.csv", "elementwise.csv"):
        path = folder / name
        if not path.is_file() or len(path.read_text(encoding="utf-8").splitlines()) < 2:
            print(f"{path}: missing or no rows")
            continue
        cmd = [sys.executable, "-m", "ddlsim", "kernels", str(path)]
        cmd += [] if held_out else ["--no-held-out"]
        print("$ python3 " + " ".join(cmd[1:]), flush=True)
        rc = max(rc, subprocess.run(cmd, cwd=ROOT, check=False).returncode)
    if (folder / "steps.csv").is_file() and (folder / "gpt_config.json").is_file():
        check_steps(folder)
    return rc


def main(argv: list[str] | None = None) -> int:
    """Command line: measure (``--out``), or ``--check DIR``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default $OUT)")
    p.add_argument("--budget-s", type=float, default=420.0, help="seconds to spend (420)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (a format test)")
    p.add_argument("--gpu", default=None, help="the gpu column (default: from the device name)")
    p.add_argument("--only", metavar="A,B", help="run only these sections (machine.json names)")
    p.add_argument("--check", metavar="DIR", help="run ddlsim kernels on a finished folder")
    p.add_argument("--held-out", action="store_true", help="--check: also leave one GPU out")
    args = p.parse_args(argv)
    if args.check:
        return check(Path(args.check), args.held_out)
    if not args.out:
        p.error("--out DIR is needed ($OUT is not set)")
    if args.budget_s <= 0:
        p.error(f"--budget-s must be positive, got {args.budget_s}")
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
