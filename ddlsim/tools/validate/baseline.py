"""Which single-GPU row anchors a multi-GPU row.

The schema's rule (``traces/measured/README.md``): a multi-GPU row's baseline is a row of the
same ``source_id``, ``model``, ``gpu``, ``batch_per_gpu``, ``precision``, ``data`` and
``framework`` with ``comm`` single or ``gpus`` 1 (a transformer row's also the same ``task``,
``seq_len`` and ``variant`` but ``grad-accum-N``: ``traces/measured/README_transformers.md``).
Where several rows qualify (several platforms, series or tables of one source), the schema
says ``note`` and ``variant`` tell them apart, so candidates are ranked, most important
first, by:

1. agreement with a speedup the row's note states (``speedup 10.0x``, ``speedup 3.84``): the
   candidate's throughput times the speedup must give the row's throughput to the speedup's
   stated precision;
2. the same platform: the note's text before the first ``,`` or ``;`` (the schema puts the
   platform first);
3. the same ``variant``; 4. the same ``comm``; 5. the same ``intra_node``.

Best candidates that still tie but disagree in throughput make the baseline ambiguous.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ddlsim.tools.validate.runs import Run

_SPEEDUP = re.compile(r"\bspeedup\s+(\d+(?:\.(\d+))?)\s*x?", re.IGNORECASE)
_PLATFORM_END = re.compile(r"[,;]")


@dataclass(frozen=True)
class BaselineChoice:
    """The chosen baseline, or ``None`` with the reason (``code``: a short category)."""

    run: Run | None
    code: str = ""
    reason: str = ""


def baseline_key(run: Run, *, with_batch: bool = True) -> tuple:
    """The columns a baseline must share with the row (the batch can be left out)."""
    batch = run.batch_per_gpu if with_batch else None
    return (
        run.source_id,
        run.model,
        run.gpu,
        batch,
        run.precision,
        run.data,
        run.framework,
        run.task,
        run.seq_len,
        run.baseline_variant,
    )


class BaselineIndex:
    """The single-GPU rows of a file, indexed by :func:`baseline_key`."""

    def __init__(self, runs: Iterable[Run]) -> None:
        self._by_key: dict[tuple, list[Run]] = defaultdict(list)
        self._by_key_any_batch: dict[tuple, list[Run]] = defaultdict(list)
        for run in runs:
            if run.is_single_gpu:
                self._by_key[baseline_key(run)].append(run)
                self._by_key_any_batch[baseline_key(run, with_batch=False)].append(run)

    def choose(self, run: Run, *, any_batch: bool = False) -> BaselineChoice:
        """The baseline of ``run``; ``any_batch`` ignores the batch (for an unstated one)."""
        if any_batch:
            found = self._by_key_any_batch[baseline_key(run, with_batch=False)]
        else:
            found = self._by_key[baseline_key(run)]
        candidates = [c for c in found if c.run_id != run.run_id]
        if not candidates:
            return BaselineChoice(
                None,
                "no-baseline",
                f"no single-GPU baseline in source {run.source_id or '(none)'!r} with the same "
                "model, gpu, batch_per_gpu, precision, data and framework",
            )
        with_value = [c for c in candidates if c.images_per_sec is not None]
        if not with_value:
            ids = ", ".join(c.run_id for c in candidates)
            return BaselineChoice(
                None, "no-baseline", f"baseline row(s) {ids} state no images_per_sec"
            )
        scored = sorted(with_value, key=lambda c: _score(run, c), reverse=True)
        best = [c for c in scored if _score(run, c) == _score(run, scored[0])]
        values = {c.images_per_sec for c in best}
        if len(values) > 1:
            listed = ", ".join(f"{c.run_id} ({c.images_per_sec:g} img/s)" for c in best)
            return BaselineChoice(
                None,
                "ambiguous-baseline",
                f"ambiguous baseline: {listed} match equally well (note/variant do not decide)",
            )
        return BaselineChoice(best[0])


def stated_speedup(note: str) -> tuple[float, float] | None:
    """``(speedup, tolerance)`` stated in a note; the tolerance is half its last digit."""
    match = _SPEEDUP.search(note)
    if match is None:
        return None
    decimals = len(match.group(2) or "")
    return float(match.group(1)), 0.5 * 10.0**-decimals + 1e-9


def platform(note: str) -> str:
    """The platform a note starts with: its text before the first ``,`` or ``;``."""
    return _PLATFORM_END.split(note, maxsplit=1)[0].strip().lower()


def _score(run: Run, cand: Run) -> tuple[bool, bool, bool, bool, bool]:
    speedup = stated_speedup(run.note)
    agrees = False
    if speedup is not None and run.images_per_sec is not None and cand.images_per_sec:
        value, tolerance = speedup
        agrees = abs(run.images_per_sec / cand.images_per_sec - value) <= tolerance
    return (
        agrees,
        platform(run.note) == platform(cand.note) != "",
        run.variant == cand.variant,
        run.comm == cand.comm,
        run.intra_node == cand.intra_node,
    )
