"""Print the per-layer terms the software stack changes, summed over one step.

    python scripts/stack_terms.py [MODEL] [BATCH]      # default: resnet50_v1.5, 256

For each GPU (A100 SXM4 40 GB, H100 SXM5) at amp and fp32 (TF32), each layout and each fusion:
the step's milliseconds by term (:func:`ddlsim.compute.terms.step_terms_s`) and the images/s
of the per-layer model. docs/design.md ("The software stack") quotes its output.
"""

from __future__ import annotations

import sys

from ddlsim.compute.stack import Stack, check_supported
from ddlsim.compute.terms import step_terms_s
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.workload.zoo import get_model

GPUS = ("a100", "h100")
STACKS = [
    Stack("pytorch", "nchw", "none"),
    Stack("pytorch", "nhwc", "none"),
    Stack("pytorch", "nhwc", "bn-act"),
    Stack("pytorch", "nhwc", "xla"),
    Stack("pytorch", "nchw", "xla"),
]


def main(argv: list[str]) -> int:
    """Print the table."""
    model = get_model(argv[0] if argv else "resnet50_v1.5")
    batch = int(argv[1]) if len(argv) > 1 else 256
    for gpu in GPUS:
        device = catalog.device(gpu)
        for precision in ("amp", "fp32"):
            print(f"{model.name} on {device.id}, {precision}, batch {batch}: ms per step by term")
            rows = {}
            for stack in STACKS:
                try:
                    check_supported(stack, device, precision)
                except ConfigError:
                    continue
                rows[f"{stack.layout}/{stack.fusion}"] = step_terms_s(
                    model, device, batch, precision, stack
                )
            names = sorted({k for r in rows.values() for k in r}, key=lambda k: -max(
                r.get(k, 0.0) for r in rows.values()))  # fmt: skip
            print(f"  {'term':24s}" + "".join(f"{label:>14s}" for label in rows))
            for name in names:
                cells = "".join(f"{1e3 * r.get(name, 0.0):14.2f}" for r in rows.values())
                print(f"  {name:24s}{cells}")
            totals = "".join(f"{batch / sum(r.values()):14.1f}" for r in rows.values())
            print(f"  {'images/s':24s}{totals}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
