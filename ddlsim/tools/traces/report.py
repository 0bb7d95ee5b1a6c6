"""Text of ``ddlsim traces timeline-summary``: per-iteration table and the ddlsim comparison."""

from __future__ import annotations

from typing import Any

_COLUMNS = (
    ("negotiate_s", "negotiate"),
    ("memcpy_in_s", "memcpy-in"),
    ("allreduce_s", "allreduce"),
    ("memcpy_out_s", "memcpy-out"),
    ("queue_wait_s", "queue/wait"),
)
_COMPARE = (
    ("duration_s", "iteration time (ms)", 1e3),
    ("negotiate_s", "negotiation (ms)", 1e3),
    ("memcpy_in_s", "fusion copy in (ms)", 1e3),
    ("allreduce_s", "allreduce (ms)", 1e3),
    ("memcpy_out_s", "fusion copy out (ms)", 1e3),
    ("queue_wait_s", "queue / wait for data (ms)", 1e3),
    ("n_ops", "collective launches", 1.0),
    ("nbytes", "bytes all-reduced (MB)", 1e-6),
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def _cell(value: float | None, scale: float, missing: str) -> str:
    return missing if value is None else f"{value * scale:.2f}"


def format_timeline_summary(doc: dict[str, Any]) -> str:
    """The report of one timeline (``doc``: the ``--json`` object)."""
    its = doc["iterations"]
    steady = doc["steady_state"]
    ranks = doc["ranks"] if doc["ranks"] is not None else "?"
    lines = [
        f"Horovod timeline: {doc['file']}",
        f"  {ranks} rank(s); {len(its)} iteration window(s), split at each negotiation of the "
        f"first all-reduced tensor",
        f"  first tensor: {doc['first_tensor']}",
    ]
    if doc["truncated"] or doc["unclosed_spans"]:
        lines.append(
            f"  file cut short: truncated={doc['truncated']}, "
            f"{doc['unclosed_spans']} unclosed span(s) ignored"
        )
    header = f"{'iter':>5}{'start ms':>11}{'iter ms':>9}" + "".join(
        f"{title:>11}" for _, title in _COLUMNS
    )
    lines += ["", header + f"{'tensors':>9}{'ops':>5}{'MB':>8}{'cycles':>8}"]
    for it in its:
        lines.append(
            f"{it['index']:>5}{it['start_s'] * 1e3:>11.2f}{_ms(it['duration_s']):>9}"
            + "".join(f"{_ms(it[key]):>11}" for key, _ in _COLUMNS)
            + f"{it['n_tensors']:>9}{it['n_ops']:>5}{it['nbytes'] / 1e6:>8.2f}{it['cycles']:>8}"
        )
    chosen = ", ".join(str(i) for i in steady["iterations"])
    lines += ["", f"steady state = mean of iteration(s) {chosen} (the first is warm-up)"]
    sim = doc.get("simulated")
    lines.append(f"  {'per iteration':<30}{'timeline':>12}" + (f"{'ddlsim':>14}" if sim else ""))
    for key, title, scale in _COMPARE:
        row = f"  {title:<30}{_cell(steady.get(key), scale, '-'):>12}"
        if sim:
            row += f"{_cell(sim.get(key), scale, 'not modelled'):>14}"
        lines.append(row)
    if sim:
        lines += [
            "",
            "  timeline negotiation runs from the first rank's request to the last rank's (it",
            "  includes waiting for the slowest backward pass); ddlsim's is the coordination",
            "  round only. ddlsim does not model fusion-buffer copies or the GPU queue wait.",
        ]
        if doc["ranks"] is not None and sim.get("gpus") != doc["ranks"]:
            lines.append(
                f"  note: the timeline has {doc['ranks']} ranks, ddlsim simulated "
                f"{sim.get('gpus')} GPU(s) (--gpus)"
            )
    return "\n".join(lines) + "\n"
