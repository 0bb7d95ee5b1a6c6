"""Inception modules: parallel branches from one input, concatenated along channels.

:func:`inception_module` takes the column table of tf_cnn_benchmarks'
``ConvNetBuilder.inception_module`` verbatim, so the model files can transcribe its filter tables
one to one. Each column is a list of layer tuples, applied in order from the module's input:

* ``('conv', out_ch, k_h, k_w[, stride_h, stride_w[, padding]])``;
* ``('mpool' | 'apool', k_h, k_w, stride_h, stride_w, padding)``;
* ``('share',)`` reuses the output of the layer at the same position in the previous column
  (Inception v3/v4 split a branch into a 1x3 and a 3x1 head this way).

The last layer of every column is concatenated.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddlsim.workload.zoo.builder import Activation, NetBuilder

LayerSpec = tuple[object, ...]


def _apply(b: NetBuilder, spec: LayerSpec) -> Activation:
    """Apply one non-shared layer tuple at the builder's current ``top``."""
    op, *args = spec
    if op == "conv":
        out_ch, k_h, k_w, *rest = args
        s_h, s_w, padding = (*rest, *(1, 1, "SAME")[len(rest) :])
        if s_h != s_w:
            raise ValueError(f"unequal strides not supported: {spec}")
        return b.conv(int(out_ch), int(k_h), int(k_w), int(s_h), str(padding))
    if op in ("mpool", "apool"):
        k_h, k_w, s_h, s_w, padding = args
        if s_h != s_w:
            raise ValueError(f"unequal strides not supported: {spec}")
        kind = "max" if op == "mpool" else "avg"
        return b.pool(kind, int(k_h), int(k_w), int(s_h), str(padding))
    raise ValueError(f"unknown inception layer {spec!r}")


def inception_module(b: NetBuilder, prefix: str, cols: Sequence[Sequence[LayerSpec]]) -> Activation:
    """Build one module in scope ``{prefix}{N}`` from ``cols``; ``top`` becomes the concat."""
    module_input = b.top
    outputs: list[list[Activation]] = []
    with b.scope(b.next_name(prefix)):
        for c, col in enumerate(cols):
            b.top = module_input
            outs: list[Activation] = []
            for pos, spec in enumerate(col):
                if spec[0] == "share":
                    b.top = outputs[c - 1][pos]
                else:
                    _apply(b, spec)
                outs.append(b.top)
            outputs.append(outs)
        return b.concat([outs[-1] for outs in outputs])
