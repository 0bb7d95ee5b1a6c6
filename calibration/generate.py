"""Regenerate the calibrations shipped with ddlsim (a maintainer's script, not the product).

    python calibration/generate.py            # rewrites calibration/<device>/<model>/*.json

For every catalog GPU, zoo model, batch in BATCHES plus the batch sizes of measured single-GPU
runs, and precision (fp32; amp where the GPU has a fast fp16 path): a split of the step by the
per-layer model (ddlsim.compute.roofline; convolutions and matrix products by the kernel model
fitted to the measured cuDNN kernels of traces/measured/kernels/, ddlsim.compute.kernels),
anchored to the measured single-GPU throughput in traces/measured/runs.csv where the exact
configuration (model, GPU, batch, precision) was measured, else the model's own step with no
factor (see ddlsim.calibration.anchored). Every file's provenance names the per-layer model, its
fit, the kernel families and libraries that time it, and its anchor (or null). The printed
measured/model ratios are a check of the model, not applied. The ``created`` date is fixed per
release so that regenerating is reproducible (a test regenerates a few files and compares).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ddlsim.calibration.anchored import (  # noqa: E402
    anchored_profile,
    measured_over_model,
    read_anchors,
)
from ddlsim.calibration.profile import save  # noqa: E402
from ddlsim.calibration.store import calibration_path  # noqa: E402
from ddlsim.system import catalog  # noqa: E402
from ddlsim.workload.zoo import MODEL_NAMES, get_model  # noqa: E402

BATCHES = (32, 64, 128)
CREATED = "2026-11-24"
RUNS_CSV = ROOT / "traces" / "measured" / "runs.csv"


def canonical_devices() -> list[str]:
    """Catalog GPU ids without their aliases (CPU devices are calibrated by measurement:
    their roofline would be a GPU's) and without another memory size of a part (``silicon_of``:
    its twin's files serve it)."""
    aliases = catalog.device_aliases()
    names = [name for name in catalog.device_names() if name not in aliases]
    devices = [catalog.device(name) for name in names]
    return [d.id for d in devices if d.kind == "gpu" and not d.silicon_of]


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
    counts: dict[str, int] = {}
    for model, dev, batch, precision in configurations(anchors):
        prof = anchored_profile(model, dev, batch, precision, anchors, CREATED)
        path = calibration_path(out_dir, model.name, dev.id, batch, precision)
        if path.exists():
            path.unlink()
        save(prof, path)
        method = prof.provenance["method"]
        counts[method] = counts.get(method, 0) + 1
    ratios = measured_over_model(anchors, models, devices)
    for key, (ratio, ids) in sorted(ratios.items()):
        print(
            f"measured/model (not applied) {key[0]:>10}/{key[1]:<5} {ratio:6.3f}  ({len(ids)} runs)"
        )
    print(", ".join(f"{n} {m}" for m, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
