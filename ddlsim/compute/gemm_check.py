"""Checking the transformer kernel routes against measured kernels (``ddlsim kernels``).

Two files of ``traces/measured/kernels/transformer/`` (its README: sources, conventions):

* ``gemm.csv`` -- ``gpu, precision, op, batch, m, n, k, time_us, time_stat``: GEMMs and
  batched GEMMs, predicted by :func:`ddlsim.compute.gemm.gemm_time_s`;
* ``elementwise.csv`` -- ``gpu, precision, op, rows, cols, time_us, time_stat``: memory-bound
  ops, predicted by :func:`ddlsim.compute.transformer_ops.memory_op_s` (forward, as measured);
* rows of a GEMM-format file whose ``op`` is ``flash_fwd`` / ``flash_bwd`` (ddlsim's own device
  measurements, ``attention.csv``): FlashAttention with ``batch`` = micro-batch x heads, ``m`` =
  ``n`` = sequence, ``k`` = head_dim, causal where ``source_op`` says so, predicted by
  :func:`ddlsim.compute.transformer_ops.flash_attention_s`.

A prediction is the kernel time as the row's timing method shows it
(:func:`ddlsim.compute.gemm.as_measured_s`: NeuSight's CUDA events add the host's dispatch,
LLMCompass's host clock the launch and synchronisation, and a compiled call's guards where the
function was ``torch.compile``'d; DeepBench's back-to-back calls show the larger of the kernel
and the host's issue interval), named terms of the fitted model. A row whose GPU is not in the
catalog, whose precision the GPU cannot run, or whose op or time is unusable, is skipped with
its reason. Errors are summarised per (GPU, precision, op) with
:func:`ddlsim.compute.kernel_check.error_stats`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddlsim.compute.gemm import TIMING_CALLS, TIMINGS, GemmModel, as_measured_s, gemm_time_s
from ddlsim.compute.kernel_check import MeasuredVsPredicted, Skip, _pct, error_stats
from ddlsim.compute.transformer_ops import PASSES, flash_attention_s, memory_op_s
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.system.specs import DeviceSpec

GEMM_COLUMNS = ("gpu", "precision", "op", "batch", "m", "n", "k", "time_us", "time_stat")
MEMORY_COLUMNS = ("gpu", "precision", "op", "rows", "cols", "time_us", "time_stat")
#: the (source, op, model) rows that time more than one kernel: Vidur's phi-2 "add" row is its
#: two residual adds (the README of the measured files)
CALLS = {("vidur", "add", "microsoft/phi-2"): 2}
#: the (source, op) rows that time a ``torch.compile``'d function (the README of the measured
#: files: LLMCompass's layernorm and gelu; its softmax is eager ``torch.softmax``)
COMPILED = {("llmcompass", "layernorm"), ("llmcompass", "gelu")}
#: (source, the file's GPU name) -> the catalog GPU it ran on, where the source's own records
#: say more than the file's name. Vidur's ``a100-80gb`` (its SKU config: 80 GB, no form factor):
#: its docs/profiling.md shares compute profiles between Azure NC96ads_A100_v4 (4 x A100 80GB
#: PCIe, 300 W, pairwise NVLink bridges) and DGX A100, and its longest fp16 GEMMs top out at
#: 226 TFLOPS (72 % of the dense peak) where LLMCompass's "A100 80GB" reaches 288 on the
#: same-size bf16 GEMMs: a 300 W board's sustained clock, not a 400 W SXM4's (docs/design.md,
#: "Transformer kernels", the power-limited clock)
SOURCE_GPU = {("vidur", "a100-80gb"): "a100-pcie-80gb"}
#: FlashAttention's ops in a GEMM-format file -> the direction
FLASH_OPS = {"flash_fwd": "fwd", "flash_bwd": "bwd"}


@dataclass(frozen=True)
class MeasuredKernel:
    """One usable row: where it came from, its catalog device, the shape, the measurement.
    ``dims`` is (batch, m, n, k) for a GEMM, (rows, cols) for a memory-bound op."""

    line: int
    source: str
    gpu: str
    device: DeviceSpec
    precision: str
    op: str
    dims: tuple[int, ...]
    time_stat: str
    measured_us: float
    calls: int = 1
    compiled: bool = False
    causal: bool = False

    @property
    def is_flash(self) -> bool:
        """FlashAttention (:data:`FLASH_OPS`): dims (batch x heads, seq, seq, head_dim)."""
        return self.op in FLASH_OPS

    @property
    def is_gemm(self) -> bool:
        """A GEMM (four dims), not a memory-bound op nor FlashAttention."""
        return len(self.dims) == 4 and not self.is_flash


@dataclass(frozen=True)
class KernelResult(MeasuredVsPredicted):
    """One measured row and its prediction (kernel + timing overhead), in ms."""

    row: MeasuredKernel
    measured_ms: float
    predicted_ms: float

    def to_json(self) -> dict[str, Any]:
        """The row object of ``ddlsim kernels --json``."""
        r = self.row
        return {
            "line": r.line, "source": r.source, "gpu": r.gpu, "precision": r.precision,
            "op": r.op, "dims": list(r.dims), "time_stat": r.time_stat,
            "measured_ms": self.measured_ms, "predicted_ms": self.predicted_ms,
            "rel_error": self.rel_error,
        }  # fmt: skip


def is_transformer_file(header: Sequence[str]) -> bool:
    """Whether a CSV header is a transformer kernel file's (it has ``time_us`` and
    ``time_stat``)."""
    return "time_us" in header and "time_stat" in header


def read_transformer_csv(path: str | Path) -> tuple[list[MeasuredKernel], list[Skip], int]:
    """The usable rows of a GEMM or element-wise file, what was skipped and why, the row count."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read {p}: {exc.strerror or exc}") from None
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    gemm = "m" in header
    required = GEMM_COLUMNS if gemm else MEMORY_COLUMNS
    missing = [c for c in required if c not in header]
    if missing:
        raise ConfigError(f"{p}: missing column(s) {', '.join(missing)}")
    rows: list[MeasuredKernel] = []
    skipped: list[Skip] = []
    n = 0
    for record in reader:
        n += 1
        row = _parse(record, reader.line_num, gemm)
        if isinstance(row, Skip):
            skipped.append(row)
        else:
            rows.append(row)
    return rows, skipped, n


def _parse(record: dict[str, str], line: int, gemm: bool) -> MeasuredKernel | Skip:
    gpu = (record.get("gpu") or "").strip()
    source = (record.get("source_id") or "").strip()
    try:
        device = catalog.kernel_device(SOURCE_GPU.get((source, gpu), gpu))
    except ConfigError:
        return Skip(line, gpu, None, f"unknown GPU {gpu!r} (not in the catalog)")
    precision, op = record["precision"].strip(), record["op"].strip()
    stat = record["time_stat"].strip()
    if stat not in TIMINGS:
        return Skip(line, gpu, None, f"time_stat {stat!r} is not one of {', '.join(TIMINGS)}")
    if not gemm and op not in PASSES:
        return Skip(line, gpu, None, f"op {op!r} is not a modelled memory-bound op")
    names = ("batch", "m", "n", "k") if gemm else ("rows", "cols")
    try:
        dims = tuple(int(float(record[c])) for c in names)
        time_us = float(record["time_us"])
    except ValueError:
        return Skip(line, gpu, None, "a size or time_us is not a number")
    if min(dims) < 1 or not (math.isfinite(time_us) and time_us > 0):
        return Skip(line, gpu, None, "a size < 1 or a time that is not positive")
    calls = CALLS.get((source, op, (record.get("model") or "").strip()), 1)
    compiled = (source, op) in COMPILED
    causal = op in FLASH_OPS and "causal" in (record.get("source_op") or "")
    if op in FLASH_OPS and dims[1] != dims[2]:
        return Skip(line, gpu, None, "a FlashAttention row whose m (queries) is not n (keys)")
    row = MeasuredKernel(
        line, source, gpu, device, precision, op, dims, stat, time_us, calls, compiled, causal
    )
    try:
        predict(row)
    except ConfigError as exc:
        return Skip(line, gpu, None, str(exc))
    return row


def kernel_s(row: MeasuredKernel, model: GemmModel | None = None) -> float:
    """The model's kernel seconds of one call of ``row``, no timing overhead (a GEMM at the
    clock its measurement's back-to-back calls leave it, :data:`TIMING_CALLS`)."""
    if row.is_flash:
        batch, seq, _, head_dim = row.dims
        direction = FLASH_OPS[row.op]
        t = flash_attention_s(batch, 1, seq, head_dim, row.device, row.precision,
                              direction=direction, causal=row.causal, model=model)  # fmt: skip
    elif row.is_gemm:
        batch, m, n, k = row.dims
        calls = TIMING_CALLS[row.time_stat]
        t = gemm_time_s(m, n, k, row.device, row.precision, batch=batch, model=model, calls=calls)
    else:
        rows, cols = row.dims
        t = memory_op_s(row.op, rows, cols, row.device, row.precision, model=model)
    return t


def predict(row: MeasuredKernel, model: GemmModel | None = None) -> KernelResult:
    """``row`` measured against the model: kernel time + its timing method's overhead."""
    t = row.calls * as_measured_s(kernel_s(row, model), row.time_stat, model, row.compiled)
    return KernelResult(row, row.measured_us / 1e3, t * 1e3)


def group_key(row: MeasuredKernel) -> tuple[str, str, str]:
    """(catalog GPU, precision, op): the summary's group."""
    return (row.device.id, row.precision, row.op)


def summarise(results: Sequence[KernelResult]) -> list[dict[str, Any]]:
    """Statistics per (GPU, precision, op), groups in file order."""
    groups: dict[tuple[str, str, str], list[KernelResult]] = {}
    for r in results:
        groups.setdefault(group_key(r.row), []).append(r)
    out = []
    for (gpu, precision, op), mine in groups.items():
        sources = ",".join(sorted({r.row.source for r in mine}))
        entry = {"gpu": gpu, "precision": precision, "op": op, "sources": sources}
        out.append({**entry, **error_stats(mine)})
    return out


def format_summary(
    path: str,
    results: Sequence[KernelResult],
    skipped: Sequence[Skip],
    n_rows: int,
    held_out: dict[tuple[str, str, str], dict[str, Any]] | None = None,
) -> str:
    """The report: per (GPU, precision, op) group n, MAPE, median error and median ratio, with
    the leave-one-GPU-out MAPE where given, then the skipped rows' reasons (counted)."""
    lines = [
        f"ddlsim kernels: {path}: {n_rows} rows, {len(results)} predicted, {len(skipped)} skipped",
        "prediction = kernel time as the row's timing method (time_stat) sees it",
        "",
        f"{'gpu':<16} {'prec':<5} {'op':<13} {'sources':<20} {'n':>5} {'MAPE':>6} "
        f"{'median':>7} {'ratio':>6} {'LOGO':>6}",
    ]
    for s in summarise(results):
        logo = (held_out or {}).get((s["gpu"], s["precision"], s["op"]), {}).get("mape")
        lines.append(
            f"{s['gpu']:<16} {s['precision']:<5} {s['op']:<13} {s['sources'][:20]:<20} "
            f"{s['n']:>5} {_pct(s['mape']):>6} {_pct(s['median_ape']):>7} "
            f"{s['median_ratio']:>6.2f} {_pct(logo):>6}"
        )
    total = error_stats(results)
    lines.append(f"{'all':<56} {total['n']:>5} {_pct(total['mape']):>6} "
                 f"{_pct(total['median_ape']):>7} {total['median_ratio'] or 0:>6.2f}")  # fmt: skip
    lines.append(
        "ratio = median measured / predicted; LOGO = MAPE with that GPU left out of the fit"
    )
    reasons: dict[str, int] = {}
    for sk in skipped:
        reasons[sk.reason] = reasons.get(sk.reason, 0) + 1
    if reasons:
        lines += ["", f"skipped ({len(skipped)}):"]
        lines += [f"  {count:>5} x {why}" for why, count in sorted(reasons.items())]
    return "\n".join(lines) + "\n"
