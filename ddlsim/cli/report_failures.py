"""The "with failures" section of ``ddlsim predict``'s text report (:mod:`ddlsim.resilience`).

It follows the breakdown of the iteration: the failure model's inputs as used (node MTBF, the
checkpoint's size and cost, the restart or re-rendezvous, the interval), the expected failures,
the expected time-to-train with failures and its goodput, and where the extra time goes; the
Monte Carlo's distribution when ``--mc-draws`` asked for one. The report's own "time to train"
line stays the failure-free figure.
"""

from __future__ import annotations

import math

from ddlsim.resilience.analysis import ResilienceResult
from ddlsim.resilience.config import DEFAULT_NODE_MTBF_S, HOUR_S, KOKOLIS_NODE_MTBF_S
from ddlsim.workload.ttt import format_duration

_TITLE = {
    "restart": "restart from the last checkpoint",
    "elastic": "elastic (Horovod Elastic: the survivors roll back to the last commit)",
}


def _duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "never"
    if seconds == 0:
        return "0 s"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return format_duration(seconds)


def _hours(hours: float) -> str:
    """``6,335`` or ``0.25``: whole hours from 10 up, three figures below."""
    return f"{hours:,.0f}" if hours >= 10 else f"{hours:.3g}"


def _mtbf_line(r: ResilienceResult) -> str:
    node = r.config.node_mtbf_s
    if node is None:
        return "    node MTBF          none: no failures"
    source = {
        DEFAULT_NODE_MTBF_S: " (default, from Llama 3)",
        KOKOLIS_NODE_MTBF_S: " (Kokolis et al. 2024)",
    }.get(node, "")
    return (
        f"    node MTBF          {_hours(node / HOUR_S)} h{source}; {r.job.nodes:,} node"
        f"{'' if r.job.nodes == 1 else 's'}: job MTBF {_duration(r.job_mtbf_s)}"
    )


def _state_line(r: ResilienceResult) -> list[str]:
    c, cfg = r.costs, r.config
    size = r.to_dict()["checkpoint_bytes"] / 1e9
    what = "--checkpoint-GB" if cfg.checkpoint_bytes is not None else r.job.label
    if c.recovery == "elastic":
        return [
            f"    commit             {size:.3g} GB ({what}) to host memory in "
            f"{_duration(c.save_s)}",
            f"    re-rendezvous      {_duration(c.recover_s)}; replacement after "
            f"{_duration(c.replace_s)}, admitted in {_duration(c.admit_s)}",
        ]
    how = (
        "measured (--checkpoint-time-s)"
        if cfg.checkpoint_time_s is not None
        else f"at {cfg.checkpoint_write_Bps / 1e9:g} GB/s"
    )
    restart = "measured (--restart-min)" if cfg.restart_s is not None else "10 min assumed + load"
    return [
        f"    checkpoint         {size:.3g} GB ({what}), written in {_duration(c.save_s)} {how}",
        f"    restart            {_duration(c.recover_s)} ({restart})",
    ]


def _interval_line(r: ResilienceResult) -> str:
    c = r.costs
    noun = "commit" if c.recovery == "elastic" else "checkpoint"
    if c.interval_s is None:
        why = "auto: none pays off" if c.node_mtbf_s is not None else "no failures"
        return f"    interval           no {noun} ({why})"
    how = "auto" if c.interval_auto else "given"
    optimum = f"; Daly optimum {_duration(c.optimum_s)}" if c.optimum_s is not None else ""
    every = _duration(c.interval_s)
    return f"    interval           {noun} every {every} of training ({how}{optimum})"


def failure_lines(r: ResilienceResult | None) -> list[str]:
    """The section's lines, a blank line first (one line when failures are not modelled)."""
    if r is None:
        return ["", "  with failures: not modelled (--node-mtbf-hours 0)"]
    e = r.expected
    lines = [f"  with failures: {_TITLE[r.costs.recovery]}", _mtbf_line(r)]
    lines += _state_line(r)
    lines.append(_interval_line(r))
    if r.costs.recovery == "elastic":
        lines.append(
            f"    nodes present      {100 * r.nodes_present:.2f} % on average (and the global "
            "batch with them)"
        )
    expected = f"{_duration(e.time_s)} expected (goodput {100 * e.goodput:.2f} %;"
    if not math.isfinite(e.time_s):
        expected = "never: the job practically never completes (its"
    lines += [
        f"    expected failures  {e.failures:.3g}",
        f"    time to train      {expected} failure-free {_duration(e.work_s)})",
    ]
    parts = [
        ("committing" if r.costs.recovery == "elastic" else "writing checkpoints", e.checkpoint_s),
        ("re-computing lost work", e.lost_s),
        (
            "re-rendezvous, admissions" if r.costs.recovery == "elastic" else "restarting",
            e.recovery_s,
        ),
    ]
    if r.costs.recovery == "elastic":
        parts.append(("training on fewer nodes", e.degraded_s))
    lines += [f"      {name:<26}{_duration(value):>12}" for name, value in parts]
    mc = r.monte_carlo
    if mc is not None:
        lines.append(
            f"    Monte Carlo        {mc['draws']:,} runs (seed {r.config.seed}): mean "
            f"{_duration(mc['mean_s'])}, {mc['failures_mean']:.3g} failures"
        )
        lines.append(
            f"      p10 / p50 / p90  {_duration(mc['p10_s'])} / {_duration(mc['p50_s'])} / "
            f"{_duration(mc['p90_s'])}"
        )
    return ["", *lines]
