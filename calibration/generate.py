"""Regenerate the calibrations shipped with ddlsim (a maintainer's script, not the product).

    python calibration/generate.py            # rewrites calibration/<device>/<model>/*.json

For every catalog GPU, zoo model, batch in BATCHES plus the batch sizes of measured single-GPU
runs, and precision (fp32; amp where the GPU has a fast fp16 path): a split of the step by the
per-layer model (ddlsim.workload.roofline; convolutions and matrix products by the kernel model
fitted to the measured cuDNN kernels of traces/measured/kernels/, ddlsim.workload.kernels),
anchored to the measured single-GPU throughput in traces/measured/runs.csv where the exact
configuration was measured, else corrected by the median measured/model ratio of the same
device (see ddlsim.workload.anchored). Every file's provenance names the per-layer model and its
fit. The ``created`` date is fixed per release so that regenerating is reproducible (a test
regenerates a few files and compares).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ddlsim.cluster import catalog  # noqa: E402
from ddlsim.workload.anchored import (  # noqa: E402
    anchor_factors,
    anchored_profile,
    read_anchors,
)
from ddlsim.workload.profile import save  # noqa: E402
from ddlsim.workload.store import calibration_path  # noqa: E402
from ddlsim.workload.zoo import MODEL_NAMES, get_model  # noqa: E402

BATCHES = (32, 64, 128)
CREATED = "2026-11-24"
RUNS_CSV = ROOT / "traces" / "measured" / "runs.csv"


def canonical_devices() -> list[str]:
    """Catalog GPU ids without their aliases (CPU devices are calibrated by measurement:
    their roofline would be a GPU's)."""
    aliases = catalog.device_aliases()
    names = [name for name in catalog.device_names() if name not in aliases]
    return [name for name in names if catalog.device(name).kind == "gpu"]


def configurations(anchors: list) -> Iterator[tuple]:
    """Every (model, device, batch, precision) that is shipped."""
    devices = [catalog.device(name) for name in canonical_devices()]
    for dev in devices:
        precisions = ["fp32"] + (["amp"] if dev.peak_fp16_flops else [])
        for model in MODEL_NAMES:
            for precision in precisions:
                measured = {
                    a.batch_per_gpu
                    for a in anchors
                    if (a.model, a.gpu, a.precision) == (model, dev.id, precision)
                }
                for batch in sorted(set(BATCHES) | measured):
                    yield get_model(model), dev, batch, precision


def main(out_dir: Path = ROOT / "calibration") -> int:
    """Write every shipped calibration file under ``out_dir``; print a summary."""
    anchors = read_anchors(RUNS_CSV)
    models = {name: get_model(name) for name in MODEL_NAMES}
    devices = {name: catalog.device(name) for name in canonical_devices()}
    factors = anchor_factors(anchors, models, devices)
    counts: dict[str, int] = {}
    for model, dev, batch, precision in configurations(anchors):
        prof = anchored_profile(model, dev, batch, precision, anchors, factors, CREATED)
        path = calibration_path(out_dir, model.name, dev.id, batch, precision)
        if path.exists():
            path.unlink()
        save(prof, path)
        method = prof.provenance["method"]
        counts[method] = counts.get(method, 0) + 1
    for key, (factor, ids) in sorted(factors.items()):
        print(f"measured/roofline {key[0]:>10}/{key[1]:<5} {factor:6.3f}  ({len(ids)} runs)")
    print(", ".join(f"{n} {m}" for m, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
