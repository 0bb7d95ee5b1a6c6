"""SIGTERM is Ctrl-C: how ddlsim stops when it is asked to, whoever asks.

A terminal sends SIGINT (Ctrl-C); ``timeout``, Slurm, CI runners and ``kill`` send SIGTERM. Both
stop ddlsim the same way: Python raises :class:`KeyboardInterrupt` for SIGINT, and
:func:`sigterm_as_interrupt` makes SIGTERM raise :class:`Terminated`, a subclass of it, so that
every clean-up written for Ctrl-C (an atomic write's temporary file, a calibration's new
folders, a Dask cluster and its scratch folder) runs for SIGTERM too. The command line exits
with 130 for SIGINT and 143 (128 + 15, what a shell reports for a process SIGTERM ended) for
SIGTERM.

Child processes (a sweep's Dask workers) are started with both signals blocked
(:func:`held_for_children`): they inherit the blocked mask, so a Ctrl-C sent to the terminal's
process group, or a SIGTERM sent to the job's processes, reaches only ddlsim, which closes them;
and a signal that arrives while they start is held, not lost, and acts as soon as they have
started (a sweep interrupted in its first second stops and writes nothing).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM
#: the signals that ask ddlsim to stop
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised where Ctrl-C's KeyboardInterrupt would be."""


def exit_code(exc: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 143 for SIGTERM."""
    return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` inside (the previous handler is restored after).
    Signal handlers belong to the main thread: elsewhere this does nothing."""
    if not _main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def held_for_children() -> Iterator[None]:
    """Start child processes inside: they never see SIGINT or SIGTERM, and one that arrives
    meanwhile acts when the block ends.

    Both signals are blocked in this thread while inside, so every thread it starts, and every
    process those threads start, inherits the block (a process keeps its mask through
    ``exec``): a Ctrl-C sent to the terminal's process group, or a SIGTERM sent to the job's
    processes, reaches only this process, which stops the children. A signal that arrives while
    inside is recorded (another thread may take it) and raised again on the way out, with the
    handler this process had (:class:`KeyboardInterrupt`, :class:`Terminated`). Python's
    ``multiprocessing`` resource tracker unblocks both signals in the thread that starts it:
    start it first (:func:`multiprocessing.resource_tracker.ensure_running`).
    """
    if not _main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous = {s: signal.signal(s, hold) for s in STOP_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending signal now runs `hold`
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if held:
            signal.raise_signal(held[0])


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside: a second Ctrl-C while child processes are being
    stopped does not interrupt the stopping."""
    if not _main_thread():
        yield
        return
    previous = [signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS]
    try:
        yield
    finally:
        for s, handler in zip(STOP_SIGNALS, previous, strict=True):
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
