"""PyTorch modules that mirror one zoo layer each, holding the zoo's gradient tensors.

Each class is what one :class:`~ddlsim.workload.zoo.builder.NetBuilder` call becomes in
PyTorch. A module's parameters are the zoo layer's tensors in the zoo's order (``zoo_tensors``:
zoo name -> parameter), in PyTorch's layouts: a convolution kernel ``(kh, kw, c_in, c_out)`` is
an ``(c_out, c_in, kh, kw)`` weight (grouped: ``(c_out, c_in/groups, kh, kw)``), a depthwise
kernel ``(kh, kw, c_in, m)`` a ``(c_in.m, 1, kh, kw)`` one, fully connected ``weights``
``(n_in, n_out)`` an ``(n_out, n_in)`` matrix (:func:`torch_shape`); the squeeze-excitation
matrices keep the zoo's ``(n_in, n_out)`` (multiplied as ``x @ W``); the element counts, hence
the gradient bytes, are the zoo's. Activations: ReLU, swish (``F.silu``) or none.
Activations are NCHW (cuDNN's native layout); TensorFlow's SAME padding is reproduced exactly,
with an explicit pad where TensorFlow pads one more row or column at the bottom / right.

This module imports PyTorch; import it only on the calibration path.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from ddlsim.workload.layers import GradTensor, Layer, LayerKind
from ddlsim.workload.zoo.core import conv_out_size

BN_EPSILON = 1e-5
BN_MOMENTUM = 0.1  # PyTorch's convention for tf_cnn_benchmarks' decay 0.9
DROPOUT_RATE = 0.5
LRN_BIAS, LRN_ALPHA, LRN_BETA = 1.0, 1.0, 0.5  # tf.nn.local_response_normalization defaults


def torch_shape(tensor: GradTensor, kind: LayerKind, is_kernel: bool) -> tuple[int, ...]:
    """The PyTorch shape of a zoo gradient tensor (same elements, PyTorch's layout)."""
    shape = tensor.shape
    if not is_kernel:
        return shape
    if kind in (LayerKind.CONV, LayerKind.GROUPED_CONV):
        kh, kw, cin, cout = shape
        return (cout, cin, kh, kw)
    if kind is LayerKind.DEPTHWISE_CONV:
        kh, kw, cin, mult = shape
        return (cin * mult, 1, kh, kw)
    if kind is LayerKind.FC:
        n_in, n_out = shape
        return (n_out, n_in)
    return shape


def activate(y: torch.Tensor, activation: str | None) -> torch.Tensor:
    """``y`` through the zoo activation ``activation`` (``relu``, ``swish``, ``sigmoid``, None)."""
    if activation is None:
        return y
    functions = {"relu": F.relu, "swish": F.silu, "sigmoid": torch.sigmoid}
    return functions[activation](y)


def same_padding(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """(before, after) padding of one axis as TensorFlow applies it (SAME: the extra one after)."""
    if padding == "VALID":
        return 0, 0
    total = max((conv_out_size(size, kernel, stride, "SAME") - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


_KERNEL_FIRST = (LayerKind.CONV, LayerKind.GROUPED_CONV, LayerKind.DEPTHWISE_CONV, LayerKind.FC)


class ZooModule(nn.Module):
    """A zoo layer as a module: :attr:`zoo_tensors` are its parameters under their zoo names."""

    def __init__(self, layer: Layer, device: Any) -> None:
        super().__init__()
        self.zoo_name = layer.name
        self._attrs: list[tuple[str, str]] = []  # (zoo tensor name, attribute)
        for i, tensor in enumerate(layer.tensors):
            shape = torch_shape(tensor, layer.kind, is_kernel=(i == 0))
            param = nn.Parameter(torch.empty(shape, device=device))
            leaf = tensor.name.rsplit("/", 1)[-1]
            if param.device.type != "meta":
                if (i == 0 and layer.kind in _KERNEL_FIRST) or leaf == "weights":
                    nn.init.xavier_uniform_(param)
                elif leaf == "gamma":
                    nn.init.ones_(param)
                else:
                    nn.init.zeros_(param)
            self.register_parameter(f"p{i}_{leaf}", param)
            self._attrs.append((tensor.name, f"p{i}_{leaf}"))

    @property
    def zoo_tensors(self) -> dict[str, nn.Parameter]:
        """Zoo tensor name -> parameter, in the zoo's order."""
        return {name: getattr(self, attr) for name, attr in self._attrs}

    @property
    def kernel(self) -> nn.Parameter:
        """The first tensor: the convolution kernel or the weight matrix."""
        return getattr(self, self._attrs[0][1])

    def _param(self, leaf: str) -> nn.Parameter | None:
        attr = next((a for n, a in self._attrs if n.rsplit("/", 1)[-1] == leaf), None)
        return None if attr is None else getattr(self, attr)


class _Epilogue(ZooModule):
    """Batch norm (``beta``, optional ``gamma``), or ``biases``, then an optional activation
    (``relu``, ``swish``)."""

    def __init__(self, layer: Layer, device: Any, activation: str | None) -> None:
        super().__init__(layer, device)
        self.activation = activation
        self.has_bn = self._param("beta") is not None
        if self.has_bn:
            ch = self._param("beta").shape[0]
            self.register_buffer("running_mean", torch.zeros(ch, device=device))
            self.register_buffer("running_var", torch.ones(ch, device=device))

    def biases(self) -> nn.Parameter | None:
        """The ``biases`` tensor (layers without batch norm), else None."""
        return self._param("biases")

    def epilogue(self, y: torch.Tensor) -> torch.Tensor:
        """Batch norm (training statistics while training) or nothing, then the activation."""
        if self.has_bn:
            y = F.batch_norm(
                y,
                self.running_mean,
                self.running_var,
                self._param("gamma"),
                self._param("beta"),
                training=self.training,
                momentum=BN_MOMENTUM,
                eps=BN_EPSILON,
            )
        return activate(y, self.activation)


class ZooConv(_Epilogue):
    """Convolution (dense, grouped or depthwise) + (``biases`` | batch norm) + activation."""

    def __init__(
        self, layer: Layer, device: Any, in_hw: tuple[int, int], stride: int, padding: str,
        activation: str | None,
    ) -> None:  # fmt: skip
        super().__init__(layer, device, activation)
        kernel = self.kernel
        self.stride = stride
        self.groups = layer.input_shape[-1] // kernel.shape[1]  # 1 dense, c_in depthwise
        kh, kw = kernel.shape[2:]
        (top, bottom), (left, right) = (
            same_padding(in_hw[0], kh, stride, padding),
            same_padding(in_hw[1], kw, stride, padding),
        )
        symmetric = top == bottom and left == right
        self.pad = (0, 0, 0, 0) if symmetric else (left, right, top, bottom)
        self.conv_padding = (top, left) if symmetric else (0, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The whole zoo layer."""
        if any(self.pad):
            x = F.pad(x, self.pad)
        y = F.conv2d(x, self.kernel, self.biases(), self.stride, self.conv_padding, 1, self.groups)
        return self.epilogue(y)


class ZooDense(_Epilogue):
    """Fully connected ``affineN``: ``weights`` and ``biases``; flattens its input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``activation(x W + b)``."""
        return self.epilogue(F.linear(x.flatten(1), self.kernel, self.biases()))


class ZooSqueezeExcite(ZooModule):
    """Squeeze-excitation: spatial mean, ``x @ W_squeeze + b`` and the activation,
    ``@ W_excite + b`` and a sigmoid, the input scaled per channel."""

    def __init__(self, layer: Layer, device: Any, activation: str) -> None:
        super().__init__(layer, device)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x * gate(mean(x))``, broadcast over height and width."""
        w1, b1, w2, b2 = self.zoo_tensors.values()
        squeezed = activate(torch.addmm(b1, x.mean(dim=(2, 3)), w1), self.activation)
        gate = torch.sigmoid(torch.addmm(b2, squeezed, w2))
        return x * gate[:, :, None, None]


class ZooBatchNorm(_Epilogue):
    """A stand-alone batch norm (pre-activation ResNets), then an optional ReLU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise with batch statistics while training."""
        return self.epilogue(x)


class ZooPool(nn.Module):
    """Max or average pooling with TensorFlow's padding (average: padding not counted)."""

    def __init__(
        self, name: str, op: str, kernel: tuple[int, int], stride: int, padding: str,
        in_hw: tuple[int, int],
    ) -> None:  # fmt: skip
        super().__init__()
        self.zoo_name, self.zoo_tensors = name, {}
        self.op, self.window, self.stride = op, kernel, stride
        (top, bottom), (left, right) = (
            same_padding(in_hw[0], kernel[0], stride, padding),
            same_padding(in_hw[1], kernel[1], stride, padding),
        )
        self.pad = (left, right, top, bottom)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool one window per output position."""
        if self.op == "max":
            if any(self.pad):
                x = F.pad(x, self.pad, value=-math.inf)
            return F.max_pool2d(x, self.window, self.stride)
        if not any(self.pad):
            return F.avg_pool2d(x, self.window, self.stride)
        ones = F.pad(torch.ones_like(x[:1, :1]), self.pad)
        total = F.avg_pool2d(F.pad(x, self.pad), self.window, self.stride)
        return total / F.avg_pool2d(ones, self.window, self.stride)  # mean over real inputs


class ZooFunction(nn.Module):
    """A parameter-free zoo layer: spatial mean, LRN, ReLU, dropout, residual add, concat."""

    def __init__(self, name: str, kind: str, relu: bool = False, depth_radius: int = 5) -> None:
        super().__init__()
        self.zoo_name, self.zoo_tensors = name, {}
        self.kind, self.relu, self.depth_radius = kind, relu, depth_radius

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        """Apply the layer to its input(s)."""
        if self.kind == "spatial_mean":
            return xs[0].mean(dim=(2, 3))
        if self.kind == "lrn":
            size = 2 * self.depth_radius + 1  # PyTorch divides alpha by the window size
            return F.local_response_norm(xs[0], size, LRN_ALPHA * size, LRN_BETA, LRN_BIAS)
        if self.kind == "relu":
            return F.relu(xs[0])
        if self.kind == "dropout":
            return F.dropout(xs[0], DROPOUT_RATE, self.training)
        if self.kind == "add":
            y = xs[0] + xs[1]
            return F.relu(y) if self.relu else y
        if self.kind == "concat":
            return torch.cat(xs, dim=1)
        raise ValueError(f"unknown layer kind {self.kind!r}")


class ZooLoss(nn.Module):
    """Mean softmax cross-entropy of the logits against integer labels, in fp32."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.zoo_name, self.zoo_tensors = name, {}

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The scalar loss."""
        return F.cross_entropy(logits.float(), labels)
