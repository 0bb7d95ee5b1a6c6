"""ddlsim's predictions of the measured Horovod runs, and the predicted-vs-measured table.

For each worker count N, two predictions through :func:`ddlsim.predict` (``horovod-gloo`` on
N cores of the catalog device :data:`~ddlsim.tools.hvdlocal.CPU_DEVICE_ID`, ``loopback`` inside the
host, Horovod 0.28.1 defaults):

- ``calibrated``: compute from the CPU calibration file alone (the profiled step);
- ``anchored``: compute rescaled to the measured 1-worker throughput, so that the error is the
  scaling model's (what ``ddlsim validate`` does with ``traces/horovod/runs.csv``).

A CPU worker's core also does the Gloo transfers and sums, so ddlsim runs CPU workers without
wait-free backprop: their communication is never hidden behind compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ddlsim.tools.hvdlocal import COMM, CPU_DEVICE_ID, INTRA_NODE


@dataclass(frozen=True)
class Predicted:
    """ddlsim's figures for one worker count (images/s over all workers, seconds)."""

    workers: int
    calibrated_images_per_sec: float
    anchored_images_per_sec: float | None
    iteration_time_s: float
    comm_s_per_iteration: float
    comm_hidden_s: float
    negotiate_s_per_iteration: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def predict_kwargs(model: str, workers: int, batch: int, calibration: str | None) -> dict[str, Any]:
    """The keyword arguments of :func:`ddlsim.predict` for one measured configuration."""
    return {
        "model": model,
        "gpus": workers,
        "gpu": CPU_DEVICE_ID,
        "gpus_per_node": workers,
        "intra_node": INTRA_NODE,
        "comm": COMM,
        "batch": batch,
        "precision": "fp32",
        "data": "synthetic",
        "calibration": calibration,
    }


def predict_run(
    model: str, workers: int, batch: int, calibration: str | None, baseline_ips: float | None
) -> Predicted:
    """The predictions of one worker count (``baseline_ips``: measured 1-worker img/s)."""
    from ddlsim.api import predict

    kwargs = predict_kwargs(model, workers, batch, calibration)
    calibrated = predict(**kwargs)
    anchored = calibrated
    if baseline_ips is not None:
        anchored = predict(**kwargs, single_gpu_throughput=baseline_ips)
    hidden = float(anchored.breakdown.get("comm_hidden_s", 0.0))
    comm = sum(op["duration_s"] for op in anchored.comm_ops)
    negotiate = sum(
        s.end_s - s.start_s
        for s in anchored.sim.spans
        if s.worker == 0 and s.name.startswith("NEGOTIATE") and s.iteration == _last(anchored)
    )
    return Predicted(
        workers=workers,
        calibrated_images_per_sec=calibrated.images_per_sec,
        anchored_images_per_sec=anchored.images_per_sec if baseline_ips is not None else None,
        iteration_time_s=anchored.iteration_time_s,
        comm_s_per_iteration=comm,
        comm_hidden_s=hidden,
        negotiate_s_per_iteration=negotiate,
    )


def _last(prediction: Any) -> int:
    return max((s.iteration for s in prediction.sim.spans), default=0)


def _err(predicted: float | None, measured: float | None) -> str:
    if predicted is None or not measured:
        return "-"
    return f"{predicted / measured - 1:+.1%}"


def _num(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def format_table(
    measured: Mapping[int, Mapping[str, Any]], predicted: Mapping[int, Predicted]
) -> str:
    """The predicted-vs-measured table (images/s over all workers; errors = pred/meas - 1)."""
    head = (
        "workers",
        "measured img/s",
        "calibrated",
        "err",
        "anchored",
        "err",
        "eff meas",
        "eff pred",
    )
    base = measured.get(1, {}).get("images_per_sec")
    rows = []
    for n in sorted(measured):
        m, p = measured[n], predicted[n]
        ips = m["images_per_sec"]
        conf = m.get("conf")
        eff_m = ips / (n * base) if base else None
        anchored = p.anchored_images_per_sec
        eff_p = anchored / (n * base) if base and anchored else None
        rows.append(
            (
                str(n),
                f"{ips:.2f}" + (f" +-{conf:.2f}" if conf is not None else ""),
                _num(p.calibrated_images_per_sec),
                _err(p.calibrated_images_per_sec, ips),
                _num(p.anchored_images_per_sec) if n > 1 else "-",
                _err(p.anchored_images_per_sec, ips) if n > 1 else "-",
                _num(eff_m, ".1%"),
                _num(eff_p, ".1%") if n > 1 else "-",
            )
        )
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in (head, *rows)]
    return "\n".join(lines) + "\n"
