"""Progress of a long command on stderr (``ddlsim sweep``'s configurations, ``ddlsim
validate``'s rows).

On a terminal, one bar redrawn in place (``\\r``) that :meth:`Bar.close` ends however the
command ended; written to a file or a pipe, a plain line at most every :data:`Bar.LOG_EVERY_S`
seconds and one at the end, so a log holds no ``\\r`` updates (the convention of tqdm and
rich).
"""

from __future__ import annotations

import sys
from typing import TextIO


class Bar:
    """A progress bar of ``done`` of ``total`` ``unit`` (called with the seconds elapsed)."""

    WIDTH = 30
    #: seconds between two progress lines in a log
    LOG_EVERY_S = 10.0

    def __init__(
        self, stream: TextIO | None = None, unit: str = "configurations", *, quiet_log: bool = False
    ) -> None:
        """``quiet_log``: in a log, nothing for a command shorter than :data:`LOG_EVERY_S` (no
        line at the end either), so a short run's output is unchanged."""
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.quiet_log = quiet_log
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.open = False
        self.logged_s = 0.0  # when the last line went to the log

    def __call__(self, done: int, total: int, elapsed_s: float) -> None:
        """Show ``done`` of ``total`` after ``elapsed_s`` seconds."""
        filled = int(self.WIDTH * done / total) if total else self.WIDTH
        remaining_s = elapsed_s / done * (total - done) if done else 0.0
        text = (
            f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} {self.unit} "
            f"{elapsed_s:6.1f} s elapsed, {remaining_s:6.1f} s left"
        )
        if not self.tty:
            end = done == total and not (self.quiet_log and self.logged_s == 0.0)
            if end or elapsed_s - self.logged_s >= self.LOG_EVERY_S:
                self.logged_s = elapsed_s
                self.stream.write(text + "\n")
                self.stream.flush()
            return
        self.open = True  # before the write: a Ctrl-C during it still ends the line
        self.stream.write("\r" + text)
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line on a terminal (nothing in a log)."""
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False
