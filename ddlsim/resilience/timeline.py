"""One run with a failure as a Chrome trace / Perfetto JSON: what a failure does, in order.

:func:`failure_timeline` runs :mod:`ddlsim.resilience.trace` once, with node 0 failing at
``fail_at_s`` (default: halfway through the failure-free run) and every other failure drawn,
and draws it on three tracks: the job (training, checkpoints or commits, the work a failure
loses, the restart or re-rendezvous and admissions, each interrupted one marked), the failures
(an instant per failure), and, for elastic recovery, each failed node's absence until its
replacement is admitted. Times are the run's wall clock (the trace format's microseconds).
"""

from __future__ import annotations

from typing import Any

from ddlsim.errors import ConfigError
from ddlsim.resilience.analysis import ResilienceResult
from ddlsim.resilience.daly import segments
from ddlsim.resilience.trace import Event, trace_elastic, trace_restart
from ddlsim.units import US_PER_S

#: most events in one trace by default (what Perfetto's UI still opens; the same bound as
#: :data:`ddlsim.tools.analysis.timeline.MAX_TRACE_EVENTS`)
MAX_EVENTS = 2_000_000
#: trace events per checkpoint (the training before it and the write) and per failure (lost
#: work, the failure, the restart; elastic: the absence and the admission too)
EVENTS_PER_SAVE, EVENTS_PER_FAILURE = 2, 6
PID = 1
TID_JOB, TID_FAILURES, TID_AWAY = 1, 2, 3


def _span(name: str, start_s: float, end_s: float, tid: int, **args: Any) -> dict[str, Any]:
    return {
        "name": name,
        "ph": "X",
        "ts": start_s * US_PER_S,
        "dur": max(0.0, end_s - start_s) * US_PER_S,
        "pid": PID,
        "tid": tid,
        "args": args,
    }


def check_size(result: ResilienceResult, max_events: int = MAX_EVENTS) -> None:
    """Refuse, before tracing it, a run expected to take more than ``max_events`` trace events
    (its checkpoints or commits and its failures, from the closed form)."""
    failures = result.expected.failures
    saves = segments(result.job.work_s, result.costs.interval_s)[0] - 1
    events = EVENTS_PER_SAVE * saves + EVENTS_PER_FAILURE * failures
    if not events <= max_events:
        shown = f"{events:,.0f}" if events < 1e12 else f"{events:.3g}"
        raise ConfigError(
            f"the failure timeline would hold ~{shown} events ({saves:,} checkpoints, "
            f"{failures:.3g} failures expected), more than the {max_events:,} trace viewers "
            "open; trace a shorter run (--epochs) or a longer node MTBF"
        )


def _events(result: ResilienceResult, seed: int, fail_at_s: float | None) -> list[Event]:
    c, job = result.costs, result.job
    if c.node_mtbf_s is None:
        raise ConfigError("a failure timeline needs failures: give a node MTBF, not none")
    at = job.work_s / 2 if fail_at_s is None else fail_at_s
    if not 0 <= at < job.work_s:
        raise ConfigError(
            f"the failure must come within the failure-free run (0..{job.work_s:g} s), got {at:g} s"
        )
    if c.recovery == "elastic":
        interval = job.work_s if c.interval_s is None else c.interval_s
        args = (c.save_s, c.recover_s, c.admit_s, c.replace_s)
        return trace_elastic(job.work_s, job.nodes, c.node_mtbf_s, interval, *args, seed, at)
    args2 = (c.interval_s, c.save_s, c.recover_s, job.nodes, c.node_mtbf_s)
    return trace_restart(job.work_s, *args2, seed, at)


def failure_timeline(
    result: ResilienceResult,
    seed: int = 0,
    fail_at_s: float | None = None,
    max_events: int = MAX_EVENTS,
) -> dict[str, Any]:
    """The Chrome trace (a JSON-ready dict) of one run of ``result``'s job with a failure
    (:func:`check_size` first: at most about ``max_events`` events)."""
    check_size(result, max_events)
    c = result.costs
    elastic = c.recovery == "elastic"
    save = "commit" if elastic else "checkpoint"
    stall = "re-rendezvous" if elastic else "restart"
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": PID, "args": {"name": f"run ({c.recovery})"}},
        *(
            {"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": name}}
            for tid, name in ((TID_JOB, "job"), (TID_FAILURES, "failures"), (TID_AWAY, "away"))
        ),
    ]
    nodes = present = result.job.nodes
    cursor, state, away = 0.0, "train", {}
    events = _events(result, seed, fail_at_s)
    for e in events:
        t = e.time_s
        if e.what == "save":
            out.append(_span("train", cursor, t - c.save_s, TID_JOB, nodes=present))
            out.append(_span(save, t - c.save_s, t, TID_JOB, saved_work_s=e.saved_work_s))
            cursor = t
        elif e.what == "failure":
            if state == "train":
                out.append(_span("lost work", cursor, t, TID_JOB, nodes=present))
            else:
                out.append(_span(f"{state} (interrupted)", cursor, t, TID_JOB))
            out.append(
                {"name": f"node {e.node} fails", "ph": "i", "s": "p", "ts": t * US_PER_S,
                 "pid": PID, "tid": TID_FAILURES, "args": {"rolled_back_to_s": e.saved_work_s}}
            )  # fmt: skip
            if elastic:
                present -= 1
                away[e.node] = t
            cursor, state = t, stall if state == "train" else state  # a stall starts over
        elif e.what == "admit":
            if state != "train":  # every node was down: waiting for a replacement
                out.append(_span("waiting for a replacement", cursor, t, TID_JOB))
            out.append(_span(f"node {e.node} away", away.pop(e.node), t, TID_AWAY))
            present += 1
            cursor, state = t, "admission"
        elif e.what == "resume":
            out.append(_span(state, cursor, t, TID_JOB, recover_s=c.recover_s))
            cursor, state = t, "train"
        else:  # end
            out.append(_span("train", cursor, t, TID_JOB, nodes=present))
    for node, since in away.items():  # replaced after the end
        out.append(_span(f"node {node} away", since, events[-1].time_s, TID_AWAY))
    failures = sum(e.what == "failure" for e in events)
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "metadata": {
            "resilience": result.to_dict(),
            "seed": seed,
            "nodes": nodes,
            "failures": failures,
            "time_to_train_s": events[-1].time_s,
        },
    }
