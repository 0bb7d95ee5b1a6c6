"""Checking the per-layer kernel model against measured convolution kernels (``ddlsim kernels``).

A kernel file is a CSV with one row per (GPU, convolution shape) and the measured milliseconds of
its three passes (``traces/measured/kernels/README.md``)::

    gpu,in_w,in_h,in_c,batch,out_k,filter_h,filter_w,pad_h,pad_w,stride_h,stride_w,
    fwd_ms,bwd_data_ms,bwd_filter_ms[,fwd_algorithm,...]

A missing column is an error (:class:`~ddlsim.errors.ConfigError`, one line); a row whose GPU is
not a catalog GPU, or with a value that is not a valid size, is skipped with its reason, and so
is a pass whose cell is empty or not a positive number. Every other pass is predicted by
:func:`ddlsim.compute.kernels.conv_pass_s` (the model that builds calibrations) and summarised
per GPU and pass, over all shapes and over the *vision* shapes (square inputs: the image-CNN
layers; the others are speech and OCR shapes).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ddlsim.compute.kernels import PASSES, ConvShape, KernelModel, conv_pass_s, has_tensor_cores
from ddlsim.errors import ConfigError, shown
from ddlsim.inputs import KERNELS_CSV_MAX_BYTES, csv_rows, read_text
from ddlsim.system import catalog
from ddlsim.system.specs import DeviceSpec

#: the shape columns (named as the fields of ConvShape)
SHAPE_COLUMNS = (
    "in_w",
    "in_h",
    "in_c",
    "batch",
    "out_k",
    "filter_h",
    "filter_w",
    "pad_h",
    "pad_w",
    "stride_h",
    "stride_w",
)
TIME_COLUMNS = tuple(f"{p}_ms" for p in PASSES)
REQUIRED_COLUMNS = ("gpu", *SHAPE_COLUMNS, *TIME_COLUMNS)
#: optional column: the arithmetic the kernels ran (empty or absent: fp32). fp32 = TF32 off,
#: tf32 = fp32 storage on TF32 tensor cores (Ampere+), fp16 = fp16 storage and products with
#: fp32 sums on tensor cores (Volta+: what amp runs; DeepBench's "FP16 ip, Mixed math")
MATH_COLUMN = "math"
MATHS = ("fp32", "tf32", "fp16")
SHAPE_SETS = ("all", "vision")
#: filter classes of the per-filter breakdown (square filters; anything else is "other")
FILTER_CLASSES = ("1x1", "3x3", "5x5", "7x7", "other")


def filter_class(shape: ConvShape) -> str:
    """``"1x1"``, ``"3x3"``, ``"5x5"``, ``"7x7"`` for square filters, else ``"other"``."""
    label = f"{shape.filter_h}x{shape.filter_w}"
    return label if label in FILTER_CLASSES else "other"


#: the physical range of a measured kernel time, ms: from a microsecond (a kernel launch alone
#: takes several) to a million seconds, the range of a calibration's times
#: (``ddlsim.calibration.profile.MIN_STEP_TIME_S``, ``MAX_TIME_S``, a layer above this one); a
#: time outside it is skipped with its reason instead of giving an infinite error
MIN_KERNEL_MS = 1e-3
MAX_KERNEL_MS = 1e9
#: the largest convolution size a row may state: cuDNN describes tensors with 32-bit integers
MAX_SHAPE_DIM = 2**31 - 1


@dataclass(frozen=True)
class KernelRow:
    """One readable row: the file's GPU name, its catalog device, the shape, measured ms."""

    line: int
    gpu: str
    device: DeviceSpec
    shape: ConvShape
    measured_ms: dict[str, float]  # pass -> ms, only the passes with a usable value
    math: str = "fp32"  # one of MATHS

    @property
    def vision(self) -> bool:
        """A square input: an image-CNN layer (DeepBench's speech and OCR inputs are not)."""
        return self.shape.in_h == self.shape.in_w


@dataclass(frozen=True)
class Skip:
    """A row (``pass_`` None) or a single pass that could not be checked, and why."""

    line: int
    gpu: str
    pass_: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """``{"line", "gpu", "pass", "reason"}``."""
        return {"line": self.line, "gpu": self.gpu, "pass": self.pass_, "reason": self.reason}


class MeasuredVsPredicted:
    """The error of a result with ``measured_ms`` and ``predicted_ms`` (what
    :func:`error_stats` summarises)."""

    measured_ms: float
    predicted_ms: float

    @property
    def rel_error(self) -> float:
        """(predicted - measured) / measured: positive = the model is slower than measured."""
        return (self.predicted_ms - self.measured_ms) / self.measured_ms


@dataclass(frozen=True)
class PassResult(MeasuredVsPredicted):
    """One measured pass and its prediction."""

    row: KernelRow
    pass_: str
    measured_ms: float
    predicted_ms: float

    def to_json(self) -> dict[str, Any]:
        """The row object of ``ddlsim kernels --json``."""
        s = self.row.shape
        return {
            "gpu": self.row.gpu,
            **{col: getattr(s, col) for col in SHAPE_COLUMNS},
            "pass": self.pass_,
            "measured_ms": self.measured_ms,
            "predicted_ms": self.predicted_ms,
            "rel_error": self.rel_error,
            "math": self.row.math,
        }


def read_kernel_csv(path: str | Path) -> tuple[list[KernelRow], list[Skip], int]:
    """The usable rows of a kernel file, what was skipped and why, and the number of rows."""
    p = Path(path)
    text = read_text(p, "kernel file", KERNELS_CSV_MAX_BYTES)
    reader = csv.DictReader(text.splitlines())
    try:
        header = [h.strip() for h in reader.fieldnames or []]
    except csv.Error as exc:
        raise ConfigError(f"{p}, line 1: malformed CSV header ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ConfigError(
            f"{p}: missing column(s) {', '.join(missing)}; a kernel file needs "
            f"{','.join(REQUIRED_COLUMNS)}"
        )
    reader.fieldnames = header
    rows: list[KernelRow] = []
    skipped: list[Skip] = []
    n = 0
    try:
        for record, skip in csv_rows(reader):
            n += 1
            if skip:
                skipped.append(Skip(reader.line_num, "", None, skip))
                continue
            row, skips = _parse(record, reader.line_num)
            skipped.extend(skips)
            if row is not None:
                rows.append(row)
    except csv.Error as exc:
        raise ConfigError(f"{p}, line {reader.line_num}: malformed CSV ({exc})") from None
    return rows, skipped, n


def _parse(record: dict[str, Any], line: int) -> tuple[KernelRow | None, list[Skip]]:
    gpu = (record.get("gpu") or "").strip()
    if None in record or any(record.get(c) is None for c in REQUIRED_COLUMNS):
        return None, [Skip(line, gpu, None, "wrong number of fields")]
    try:
        device = catalog.device(gpu)
    except ConfigError:
        return None, [Skip(line, gpu, None, f"unknown GPU {gpu!r} (not in the catalog)")]
    if device.kind != "gpu":
        return None, [Skip(line, gpu, None, f"{device.id} is not a GPU")]
    math_ = (record.get(MATH_COLUMN) or "").strip().lower() or "fp32"
    if math_ not in MATHS:
        why = f"{MATH_COLUMN} {math_!r} is not one of {', '.join(MATHS)}"
        return None, [Skip(line, gpu, None, why)]
    if math_ == "tf32" and device.peak_tf32_flops is None:
        return None, [Skip(line, gpu, None, f"{device.id} has no TF32 tensor cores")]
    if math_ == "fp16" and device.peak_fp16_flops is None:
        return None, [Skip(line, gpu, None, f"{device.id} has no fast fp16 path")]
    if math_ in ("fp16", "tf32") and not has_tensor_cores(device):
        why = f"{device.id} has no tensor cores, which {MATH_COLUMN} {math_} runs on"
        return None, [Skip(line, gpu, None, why)]
    values: dict[str, int] = {}
    for col in SHAPE_COLUMNS:
        cell = record[col].strip()
        try:
            values[col] = int(cell)
        except ValueError:
            return None, [Skip(line, gpu, None, f"{col} {shown(cell)} is not an integer")]
        if values[col] > MAX_SHAPE_DIM:
            why = f"{col} {shown(cell)} is above {MAX_SHAPE_DIM:,} (cuDNN's 32-bit sizes)"
            return None, [Skip(line, gpu, None, why)]
    try:
        shape = ConvShape(**values)
    except ConfigError as exc:
        return None, [Skip(line, gpu, None, str(exc))]
    measured: dict[str, float] = {}
    skips: list[Skip] = []
    for pass_, col in zip(PASSES, TIME_COLUMNS, strict=True):
        cell = record[col].strip()
        if not cell:
            skips.append(Skip(line, gpu, pass_, f"{col} is empty"))
            continue
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            skips.append(Skip(line, gpu, pass_, f"{col} {shown(cell)} is not a positive number"))
            continue
        if not MIN_KERNEL_MS <= value <= MAX_KERNEL_MS:
            why = f"{col} {shown(cell)} is outside {MIN_KERNEL_MS:g}..{MAX_KERNEL_MS:g} ms"
            skips.append(Skip(line, gpu, pass_, why))
            continue
        measured[pass_] = value
    row = KernelRow(line, gpu, device, shape, measured, math_) if measured else None
    return row, skips


def predict_rows(rows: Iterable[KernelRow], model: KernelModel | None = None) -> list[PassResult]:
    """Every measured pass of ``rows`` with the model's prediction in the row's arithmetic."""
    out = []
    for row in rows:
        precision = "amp" if row.math == "fp16" else "fp32"
        for p, ms in row.measured_ms.items():
            t_s = conv_pass_s(row.shape, p, row.device, precision, model, tf32=row.math == "tf32")
            out.append(PassResult(row, p, ms, 1e3 * t_s))
    return out


def error_stats(results: Sequence[MeasuredVsPredicted]) -> dict[str, Any]:
    """``n``, ``mape``, ``median_ape``, ``p90_ape`` and ``median_ratio`` (measured / predicted:
    above 1 = the GPU is slower than the model) of ``results`` (fractions; None if empty)."""
    if not results:
        return {"n": 0, "mape": None, "median_ape": None, "p90_ape": None, "median_ratio": None}
    ape = np.abs([r.rel_error for r in results])
    ratio = [r.measured_ms / r.predicted_ms for r in results]
    return {
        "n": len(results),
        "mape": float(ape.mean()),
        "median_ape": float(np.median(ape)),
        "p90_ape": float(np.percentile(ape, 90)),
        "median_ratio": float(np.median(ratio)),
    }


def _by_gpu(results: Sequence[PassResult]) -> dict[tuple[str, str], list[PassResult]]:
    """The results of each (file GPU name, math), in file order."""
    groups: dict[tuple[str, str], list[PassResult]] = {}
    for r in results:
        groups.setdefault((r.row.gpu, r.row.math), []).append(r)
    return groups


def summarise(results: Sequence[PassResult]) -> list[dict[str, Any]]:
    """Statistics per (GPU, pass, shape set), GPUs in file order, then all passes of a GPU."""
    out = []
    for (gpu, math_), mine in _by_gpu(results).items():
        device = mine[0].row.device.id
        for pass_ in (*PASSES, "all"):
            for shapes in SHAPE_SETS:
                sel = [
                    r
                    for r in mine
                    if pass_ in ("all", r.pass_) and (shapes == "all" or r.row.vision)
                ]
                stats = error_stats(sel)
                entry = {"gpu": gpu, "catalog_id": device, "math": math_}
                entry.update({"pass": pass_, "shapes": shapes})
                out.append({**entry, **stats})
    return out


def summarise_by_filter(results: Sequence[PassResult]) -> list[dict[str, Any]]:
    """Statistics per (GPU, pass, filter class) over the vision shapes: where the model errs by
    filter size (a class with no row of a GPU is left out)."""
    out = []
    for (gpu, math_), group in _by_gpu(results).items():
        mine = [r for r in group if r.row.vision]
        for pass_ in PASSES:
            for cls in FILTER_CLASSES:
                sel = [r for r in mine if r.pass_ == pass_ and filter_class(r.row.shape) == cls]
                if sel:
                    entry = {"gpu": gpu, "math": math_, "pass": pass_, "filter": cls}
                    out.append({**entry, **error_stats(sel)})
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def format_report(
    path: str, results: Sequence[PassResult], skipped: Sequence[Skip], n_rows: int
) -> str:
    """The human-readable report: every pass, then the summary, then what was skipped."""
    lines = [
        f"ddlsim kernels: {path}: {n_rows} rows, {len(results)} passes predicted, "
        f"{len(skipped)} skipped",
        "",
        f"{'gpu':<15} {'input WxHxC':>14} {'N':>3} {'K':>5} {'filter':>6} {'pad':>5} "
        f"{'stride':>6} {'pass':<10} {'measured':>9} {'predicted':>9} {'error':>7}",
    ]
    for r in results:
        s = r.row.shape
        label = r.row.gpu if r.row.math == "fp32" else f"{r.row.gpu} {r.row.math}"
        lines.append(
            f"{label:<15} {f'{s.in_w}x{s.in_h}x{s.in_c}':>14} {s.batch:>3} {s.out_k:>5} "
            f"{f'{s.filter_h}x{s.filter_w}':>6} {f'{s.pad_h},{s.pad_w}':>5} "
            f"{f'{s.stride_h},{s.stride_w}':>6} {r.pass_:<10} {r.measured_ms:>7.3f}ms "
            f"{r.predicted_ms:>7.3f}ms {100 * r.rel_error:>+6.1f}%"
        )
    lines += [
        "",
        "summary (absolute relative errors, %; ratio = median measured / predicted)",
        f"{'gpu':<15} {'pass':<10} {'shapes':<7} {'n':>4} {'MAPE':>6} {'median':>7} "
        f"{'p90':>6} {'ratio':>6}",
    ]
    for s in summarise(results):
        ratio = "-" if s["median_ratio"] is None else f"{s['median_ratio']:.2f}"
        label = s["gpu"] if s["math"] == "fp32" else f"{s['gpu']} {s['math']}"
        lines.append(
            f"{label:<15} {s['pass']:<10} {s['shapes']:<7} {s['n']:>4} {_pct(s['mape']):>6} "
            f"{_pct(s['median_ape']):>7} {_pct(s['p90_ape']):>6} {ratio:>6}"
        )
    lines += _filter_table(results)
    if skipped:
        lines += ["", f"skipped ({len(skipped)}):"]
        for sk in skipped:
            what = f" {sk.pass_}" if sk.pass_ else ""
            lines.append(f"  line {sk.line} ({sk.gpu or 'no gpu'}{what}): {sk.reason}")
    return "\n".join(lines) + "\n"


def _filter_table(results: Sequence[PassResult]) -> list[str]:
    """The per-filter breakdown as text: MAPE % (median measured / predicted) per class."""
    by = summarise_by_filter(results)
    lines = [
        "",
        "by filter size, vision shapes: MAPE % (median measured / predicted) [n]",
        f"{'gpu':<15} {'pass':<10} " + " ".join(f"{c:>17}" for c in FILTER_CLASSES),
    ]
    rows: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for s in by:
        rows.setdefault((s["gpu"], s["math"], s["pass"]), {})[s["filter"]] = s
    for (gpu, math_, pass_), cells in rows.items():
        label = gpu if math_ == "fp32" else f"{gpu} {math_}"
        text = []
        for c in FILTER_CLASSES:
            s = cells.get(c)
            text.append(
                "-" if s is None else f"{_pct(s['mape'])} ({s['median_ratio']:.2f}) [{s['n']}]"
            )
        lines.append(f"{label:<15} {pass_:<10} " + " ".join(f"{t:>17}" for t in text))
    return lines
