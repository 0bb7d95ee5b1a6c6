"""A plain-text progress bar on stderr, and the summary table printed at the end.

:class:`Progress` counts units of work (one per model x batch x precision) weighted by their
expected cost, and shows elapsed and estimated remaining time. On a terminal it redraws one line
(``\\r``); otherwise it prints one line per unit, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

BAR_WIDTH = 24


def format_duration(seconds: float) -> str:
    """``1:05`` or ``1:02:03``."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress over ``len(weights)`` units; ``weights`` are relative expected costs. ``name``
    starts the line (the command or script reporting)."""

    def __init__(
        self,
        weights: Sequence[float],
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "calibrate",
    ) -> None:
        self.name = name
        self.weights = [max(float(w), 1e-12) for w in weights]
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.t0 = clock()
        self.done = 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, label: str) -> str:
        """The progress line with ``label`` for the unit in progress."""
        total = len(self.weights)
        frac = sum(self.weights[: self.done]) / sum(self.weights)
        filled = round(frac * BAR_WIDTH)
        elapsed = self.clock() - self.t0
        if self.done == 0:
            remaining = "?"
        elif self.done == total:
            remaining = "0:00"
        else:
            remaining = "~" + format_duration(elapsed * (1 - frac) / frac)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        return (
            f"{self.name} [{bar}] {self.done}/{total} {label}  "
            f"elapsed {format_duration(elapsed)}  remaining {remaining}"
        )

    def show(self, label: str) -> None:
        """Draw the line for the unit ``label`` that is starting."""
        text = self.line(label)
        if self.tty:
            self.stream.write("\r" + text.ljust(100)[:160])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """A message line (a warning) that the bar does not overwrite."""
        self.stream.write(("\n" if self.tty else "") + text + "\n")
        self.stream.flush()

    def advance(self) -> None:
        """One more unit done."""
        self.done += 1

    def close(self) -> None:
        """Final line (all done, or where it stopped)."""
        self.show("done" if self.done == len(self.weights) else "stopped")
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


@dataclass(frozen=True)
class SummaryRow:
    """One calibration written: what, how fast, how well the layers explain the step."""

    model: str
    batch: int
    precision: str
    device: str
    method: str
    step_time_s: float
    sum_over_step: float
    path: str
    pass_time_s: float | None = None  # None: derived (anchored / transferred), not profiled

    @property
    def images_per_sec(self) -> float:
        """Throughput the calibration implies."""
        return self.batch / self.step_time_s


def format_table(rows: Sequence[SummaryRow]) -> str:
    """The summary table, one row per file written."""
    head = ("model", "batch", "prec", "device", "method")
    head += ("step ms", "images/s", "sum/step", "pass s")
    body = [
        (
            r.model,
            str(r.batch),
            r.precision,
            r.device,
            r.method,
            f"{r.step_time_s * 1e3:.2f}",
            f"{r.images_per_sec:.1f}",
            f"{r.sum_over_step:.3f}",
            "-" if r.pass_time_s is None else f"{r.pass_time_s:.1f}",
        )
        for r in rows
    ]
    widths = [max(len(c) for c in col) for col in zip(head, *body, strict=True)]
    right = {1, 5, 6, 7, 8}

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [fmt(head), *(fmt(b) for b in body), ""]
    lines += [f"wrote {r.path}" for r in rows]
    return "\n".join(lines) + "\n"
