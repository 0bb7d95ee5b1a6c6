"""PyTorch models of the zoo whose parameters are the zoo's gradient tensors, tensor for tensor.

:class:`TorchNetBuilder` is a :class:`~ddlsim.workload.zoo.builder.NetBuilder` that, besides
recording each zoo :class:`~ddlsim.workload.layers.Layer`, creates the matching module
(:mod:`ddlsim.tools.calibrate.torch_layers`) and a step of a small program (which activations go in,
which comes out). :func:`build_torch_model` runs a zoo definition with it
(:func:`ddlsim.tools.calibrate.definitions.run_definition`) and wraps the program in a
:class:`ZooTorchModel` mapping ``(images, labels)`` to the loss. Every zoo layer's forward pass
runs inside ``torch.profiler.record_function("ddlsim::<layer>")``, which is how the profiler
trace attributes time to layers (:mod:`ddlsim.tools.calibrate.torch_profiler`). No weights are
downloaded; on the ``meta`` device nothing is allocated (structure checks).

This module imports PyTorch; import it only on the calibration path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ddlsim.tools.calibrate import torch_layers as tl
from ddlsim.tools.calibrate.definitions import GradientTensor, bound_args, run_definition
from ddlsim.tools.calibrate.torch_profiler import LAYER_EVENT_PREFIX
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo.builder import Activation, NetBuilder

MASTER_WEIGHT_BYTES = 4  # parameters (and so gradients) stay fp32 under autocast


@dataclass(frozen=True)
class Step:
    """One op of the replayed program: module ``layer`` (-1: a flatten) applied to activations
    ``inputs``, producing activation ``output``."""

    inputs: tuple[int, ...]
    output: int
    layer: int
    with_labels: bool = False


class TorchNetBuilder(NetBuilder):
    """A NetBuilder that also creates one module and one program step per zoo layer."""

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        *,
        batch_norm: bool = False,
        bn_scale: bool = False,
        device: Any = "cpu",
    ) -> None:
        super().__init__(input_shape, batch_norm=batch_norm, bn_scale=bn_scale)
        self.device = device
        self.modules: list[nn.Module] = []
        self.steps: list[Step] = []
        self._nodes: dict[int, tuple[Activation, int]] = {id(self.top): (self.top, 0)}

    def _emit(self, module: nn.Module | None, inputs: Sequence[Activation], out: Activation,
              with_labels: bool = False) -> Activation:  # fmt: skip
        ids = []
        for act in inputs:
            entry = self._nodes.get(id(act))
            if entry is None or entry[0] is not act:
                raise ValueError(f"activation {act} was not produced by this builder")
            ids.append(entry[1])
        node = len(self._nodes)
        self._nodes[id(out)] = (out, node)
        index = -1
        if module is not None:
            index = len(self.modules)
            self.modules.append(module)
        self.steps.append(Step(tuple(ids), node, index, with_labels))
        return out

    def _hw(self) -> tuple[int, int]:
        return self.top.shape[0], self.top.shape[1]

    # -- weighted layers ----------------------------------------------------------------------
    def conv(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.conv`."""
        a, x, hw = bound_args(NetBuilder.conv, args, kwargs), self.top, self._hw()
        out = super().conv(*args, **kwargs)
        act = a["activation"]
        module = tl.ZooConv(self._layers[-1], self.device, hw, a["stride"], a["padding"], act)
        return self._emit(module, [x], out)

    def depthwise_conv(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.depthwise_conv`."""
        a, x, hw = bound_args(NetBuilder.depthwise_conv, args, kwargs), self.top, self._hw()
        out = super().depthwise_conv(*args, **kwargs)
        act = a["activation"]
        module = tl.ZooConv(self._layers[-1], self.device, hw, a["stride"], a["padding"], act)
        return self._emit(module, [x], out)

    def fc(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.fc`."""
        a, x = bound_args(NetBuilder.fc, args, kwargs), self.top
        out = super().fc(*args, **kwargs)
        module = tl.ZooDense(self._layers[-1], self.device, a["activation"])
        return self._emit(module, [x], out)

    def batch_norm(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.batch_norm`."""
        a, x = bound_args(NetBuilder.batch_norm, args, kwargs), self.top
        out = super().batch_norm(*args, **kwargs)
        module = tl.ZooBatchNorm(self._layers[-1], self.device, a["activation"])
        return self._emit(module, [x], out)

    def squeeze_excitation(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.squeeze_excitation`."""
        a, x = bound_args(NetBuilder.squeeze_excitation, args, kwargs), self.top
        out = super().squeeze_excitation(*args, **kwargs)
        module = tl.ZooSqueezeExcite(self._layers[-1], self.device, a["activation"])
        return self._emit(module, [x], out)

    # -- parameter-free layers ----------------------------------------------------------------
    def pool(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.pool`."""
        a, x, hw = bound_args(NetBuilder.pool, args, kwargs), self.top, self._hw()
        out = super().pool(*args, **kwargs)
        window = (a["k_h"], a["k_w"])
        module = tl.ZooPool(self._layers[-1].name, a["op"], window, a["stride"], a["padding"], hw)
        return self._emit(module, [x], out)

    def _function(self, x: Activation, out: Activation, kind: str, **options: Any) -> Activation:
        return self._emit(tl.ZooFunction(self._layers[-1].name, kind, **options), [x], out)

    def spatial_mean(self) -> Activation:
        """See :meth:`NetBuilder.spatial_mean`."""
        x = self.top
        return self._function(x, super().spatial_mean(), "spatial_mean")

    def lrn(self, depth_radius: int = 5) -> Activation:
        """See :meth:`NetBuilder.lrn`."""
        x = self.top
        return self._function(x, super().lrn(depth_radius), "lrn", depth_radius=depth_radius)

    def activation(self, kind: str = "relu") -> Activation:
        """See :meth:`NetBuilder.activation`."""
        x = self.top
        return self._function(x, super().activation(kind), "relu")

    def dropout(self) -> Activation:
        """See :meth:`NetBuilder.dropout`."""
        x = self.top
        return self._function(x, super().dropout(), "dropout")

    def flatten(self) -> Activation:
        """See :meth:`NetBuilder.flatten` (a reshape step, no layer)."""
        x = self.top
        return self._emit(None, [x], super().flatten())

    def residual_add(self, shortcut: Activation, activation: str | None = "relu") -> Activation:
        """See :meth:`NetBuilder.residual_add`."""
        x = self.top
        out = super().residual_add(shortcut, activation)
        module = tl.ZooFunction(self._layers[-1].name, "add", relu=activation == "relu")
        return self._emit(module, [x, shortcut], out)

    def concat(self, branches: Sequence[Activation]) -> Activation:
        """See :meth:`NetBuilder.concat`."""
        out = super().concat(branches)
        return self._emit(tl.ZooFunction(self._layers[-1].name, "concat"), list(branches), out)

    def softmax_loss(self) -> Activation:
        """See :meth:`NetBuilder.softmax_loss` (the model's output: the scalar loss)."""
        x = self.top
        out = super().softmax_loss()
        return self._emit(tl.ZooLoss(self._layers[-1].name), [x], out, with_labels=True)


class ZooTorchModel(nn.Module):
    """A zoo model in PyTorch: ``layers_`` applied by ``steps``, the loss as output."""

    def __init__(self, spec: ModelSpec, steps: Sequence[Step], modules: Sequence[nn.Module]):
        super().__init__()
        self.spec = spec
        self.layers_ = nn.ModuleList(modules)
        self.steps = tuple(steps)
        if [m.zoo_name for m in modules] != [la.name for la in spec.layers]:
            raise RuntimeError(f"{spec.name}: the modules are not the zoo's layers, in order")

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of a batch (NCHW images, integer labels)."""
        values: dict[int, torch.Tensor] = {0: images}
        for step in self.steps:
            args = [values[i] for i in step.inputs]
            if step.layer < 0:
                values[step.output] = args[0].flatten(1)
                continue
            module = self.layers_[step.layer]
            with torch.profiler.record_function(LAYER_EVENT_PREFIX + module.zoo_name):
                if step.with_labels:
                    values[step.output] = module(args[0], labels)
                else:
                    values[step.output] = module(*args)
        return values[self.steps[-1].output]

    def gradient_tensors(self) -> list[GradientTensor]:
        """The parameters (= gradient tensors) in the zoo's order, with fp32 bytes and owner."""
        return [
            GradientTensor(
                name,
                tuple(param.shape),
                MASTER_WEIGHT_BYTES * math.prod(param.shape),
                module.zoo_name,
            )
            for module in self.layers_
            for name, param in module.zoo_tensors.items()
        ]


def build_torch_model(name: str, device: Any = "cpu") -> ZooTorchModel:
    """The PyTorch model of zoo model ``name`` on ``device`` (``"meta"``: shapes only)."""
    spec, builder = run_definition(name, TorchNetBuilder, device=device)
    assert isinstance(builder, TorchNetBuilder)
    return ZooTorchModel(spec, builder.steps, builder.modules)
