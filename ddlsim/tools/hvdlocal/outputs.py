"""The committed record of a run: a trimmed Horovod timeline, JSON and CSV written atomically.

A Horovod timeline of a whole run (broadcast, warm-up, every timed step) is several hundred KB;
:func:`trim_timeline` keeps the metadata records and the events of a few whole iterations: a
``B``/``E`` pair is kept when both ends lie in the window, so every kept span is complete and
nested as in the original, and the events keep their original order (one per line). The
rank-ready marks (``X`` events named by the rank, written once per tensor before the response
cache takes over) are kept wherever they are: they tell a reader how many ranks ran.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ddlsim.atomic import atomic_write_text, make_parents
from ddlsim.tools.traces.timeline import parse_events


def trim_timeline(text: str, lo_s: float, hi_s: float, label: str = "timeline") -> str:
    """The events of ``text`` (a Horovod timeline) inside ``[lo_s, hi_s]``, as a JSON array."""
    events, _ = parse_events(text, label)
    lo_us, hi_us = lo_s * 1e6, hi_s * 1e6
    keep = [False] * len(events)
    stacks: dict[object, list[int]] = defaultdict(list)
    for i, ev in enumerate(events):
        ph, ts = ev.get("ph"), ev.get("ts")
        if ph == "M":
            keep[i] = True
        elif not isinstance(ts, (int, float)):
            continue
        elif ph == "B":
            stacks[ev.get("pid")].append(i)
        elif ph == "E" and stacks[ev.get("pid")]:
            j = stacks[ev.get("pid")].pop()
            if lo_us <= events[j]["ts"] and ts <= hi_us:
                keep[i] = keep[j] = True
        elif ph == "X" and str(ev.get("name", "")).isdigit():
            keep[i] = True
        elif ph in ("X", "i"):
            keep[i] = lo_us <= ts <= hi_us
    kept = [json.dumps(ev, separators=(",", ":")) for ev, k in zip(events, keep, strict=True) if k]
    return "[\n" + ",\n".join(kept) + "\n]\n"


def write_json(path: str | os.PathLike[str], doc: Mapping[str, Any] | list[Any]) -> None:
    """``doc`` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``text`` atomically (the missing folders are created)."""
    make_parents(path)
    atomic_write_text(path, text)
