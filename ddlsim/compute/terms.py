"""One step's time split into the named terms the software stack changes.

:func:`step_terms_s` sums, over a model's layers, what :func:`ddlsim.compute.roofline.
layer_time_s` charges, by term: the convolutions and matrix products in the layout their
kernels read (``convolution``), the transposes the stack's layout adds (``layout_transposes``),
each element-wise term of :func:`ddlsim.compute.passes.epilogue_terms` (``batch_norm``,
``activation``, ``batch_norm_activation``, ``residual_add``, ...), and everything else by layer
kind (depthwise and grouped convolutions, squeeze-excitation, pooling, kernel launches, the
optimizer). The terms add up to the step. ``scripts/stack_terms.py`` prints them; docs/design.md
("The software stack") quotes them for ResNet-50 on A100 and H100.
"""

from __future__ import annotations

from collections import defaultdict

from ddlsim.compute.kernels import LAYOUTS
from ddlsim.compute.passes import epilogue_terms
from ddlsim.compute.roofline import (
    DEFAULT_PARAMS,
    _kernel_matmul_s,
    layer_time_s,
    memory_Bps,
    optimizer_time_s,
)
from ddlsim.compute.stack import Stack
from ddlsim.system.specs import DeviceSpec
from ddlsim.workload.layers import ModelSpec


def step_terms_s(
    model: ModelSpec, device: DeviceSpec, batch: int, precision: str, stack: Stack
) -> dict[str, float]:
    """Seconds of one step of ``model`` on ``device`` by named term (they add up to the
    per-layer model's step)."""
    act_bytes = 2 if precision == "amp" else 4
    bw = memory_Bps(device, DEFAULT_PARAMS)
    out: dict[str, float] = defaultdict(float)
    for layer in model.layers:
        fwd, bwd = layer_time_s(layer, device, batch, precision, stack=stack)
        left = fwd + bwd
        kernel = _kernel_matmul_s(layer, device, batch, precision, stack.layout)
        if kernel is not None:
            best = min(
                sum(_kernel_matmul_s(layer, device, batch, precision, lay) or kernel)
                for lay in LAYOUTS
            )
            out["convolution"] += best
            out["layout_transposes"] += sum(kernel) - best
            left -= sum(kernel)
        out_bytes = batch * layer.output_elems * act_bytes
        kinds = ("conv", "fc", "add", "batchnorm", "activation")
        if layer.kind.value in kinds:
            for name, (f, b) in epilogue_terms(layer, stack.fusion).items():
                seconds = (f + b) * out_bytes / bw
                out[name] += seconds
                left -= seconds
        key = "kernel_launches" if layer.kind.value in kinds else layer.kind.value
        out[key] += left
    out["optimizer"] += optimizer_time_s(model, device)
    return dict(out)
