"""Interval arithmetic on ``(start_s, end_s)`` pairs: union, clipping, lengths."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def union_intervals(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, disjoint union of ``(start, end)`` intervals (empty ones dropped)."""
    merged: list[tuple[float, float]] = []
    lo = hi = None
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if hi is not None and a <= hi:
            if b > hi:
                hi = b
        else:
            if hi is not None:
                merged.append((lo, hi))
            lo, hi = a, b
    if hi is not None:
        merged.append((lo, hi))
    return merged


def clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of ``intervals`` inside ``[lo, hi]``."""
    return [(max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi]


def length(intervals: list[tuple[float, float]]) -> float:
    """Total length of disjoint ``intervals``."""
    return sum(b - a for a, b in intervals)


def intersection_length(x: list[tuple[float, float]], y: list[tuple[float, float]]) -> float:
    """Length of the intersection of two sorted, disjoint interval lists."""
    total, i, j = 0.0, 0, 0
    nx, ny = len(x), len(y)
    while i < nx and j < ny:
        (xa, xb), (ya, yb) = x[i], y[j]
        lo = ya if ya > xa else xa  # max(xa, ya), min(xb, yb)
        hi = yb if yb < xb else xb
        if hi > lo:
            total += hi - lo
        if xb < yb:
            i += 1
        else:
            j += 1
    return total


def overlap_lengths(
    starts: np.ndarray, ends: np.ndarray, valid: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Per column ``w``: ``length(clip(union_intervals(...), lo[w], hi[w]))`` of the intervals
    ``(starts[k, w], ends[k, w])`` with ``valid[k, w]`` -- the same floating-point operations
    in the same order as the list functions above, on every column at once (rows: intervals,
    columns: workers; a few rows, many columns)."""
    k_rows = starts.shape[0]
    if k_rows == 1:  # one interval: no union to form
        a, b, v = starts[0], ends[0], valid[0]
        inside = v & (b > lo) & (a < hi)
        return np.where(inside, np.minimum(b, hi) - np.maximum(a, lo), 0.0)
    order = np.argsort(np.where(valid, starts, np.inf), axis=0, kind="stable")
    starts = np.take_along_axis(starts, order, axis=0)
    ends = np.take_along_axis(ends, order, axis=0)
    valid = np.take_along_axis(valid, order, axis=0)
    total = np.zeros(starts.shape[1])
    have = np.zeros(starts.shape[1], dtype=bool)
    cur_a = np.zeros(starts.shape[1])
    cur_b = np.zeros(starts.shape[1])
    for k in range(k_rows):
        a, b, v = starts[k], ends[k], valid[k]
        merge = v & have & (a <= cur_b)
        new = v & ~merge
        close = new & have
        inside = close & (cur_b > lo) & (cur_a < hi)
        total = np.where(inside, total + (np.minimum(cur_b, hi) - np.maximum(cur_a, lo)), total)
        cur_b = np.where(merge, np.maximum(cur_b, b), cur_b)
        cur_a = np.where(new, a, cur_a)
        cur_b = np.where(new, b, cur_b)
        have |= v
    inside = have & (cur_b > lo) & (cur_a < hi)
    return np.where(inside, total + (np.minimum(cur_b, hi) - np.maximum(cur_a, lo)), total)
