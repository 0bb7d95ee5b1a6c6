"""Framework-free description of a CNN: layers, their gradient tensors, FLOPs and activations.

A :class:`ModelSpec` is the static part of a workload. It knows nothing about devices or time;
timing comes from a calibration (:mod:`ddlsim.calibration.profile`). Quantities are *per sample*
(one image); multiply by the batch size where a batch is meant. FLOPs count a multiply-add as 2.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from ddlsim.units import BYTES_PER_ELEMENT


class LayerKind(enum.Enum):
    """Closed set of layer kinds. A layer's kind is declared by the builder, never parsed from
    its name."""

    CONV = "conv"  # convolution, with its bias or batch norm and activation (one builder call)
    DEPTHWISE_CONV = "depthwise_conv"
    GROUPED_CONV = "grouped_conv"  # convolution in groups (ResNeXt): kernel [kh, kw, c_in/g, c_out]
    SQUEEZE_EXCITE = "squeeze_excite"  # pool, two small affine layers, sigmoid, channel scaling
    FC = "fc"  # fully connected (dense) layer, with bias and activation
    BATCHNORM = "batchnorm"  # a stand-alone batch norm (pre-activation ResNets)
    POOL = "pool"  # max / average pooling
    LRN = "lrn"  # local response normalisation
    ACTIVATION = "activation"  # stand-alone activation
    ADD = "add"  # residual addition (with its activation)
    CONCAT = "concat"  # inception concatenation
    DROPOUT = "dropout"
    LOSS = "loss"  # softmax cross-entropy
    EMBEDDING = "embedding"  # a transformer's embedding stage (or gradient accumulation's)
    BLOCK = "block"  # one transformer block: attention and MLP


@dataclass(frozen=True)
class GradTensor:
    """One trainable variable, i.e. one gradient tensor that is all-reduced.

    ``name`` is the variable path relative to the model (``conv1/kernel``, ``conv1/gamma``).
    """

    name: str
    shape: tuple[int, ...]

    @property
    def n_params(self) -> int:
        """Number of scalar parameters."""
        return math.prod(self.shape)

    def nbytes(self, dtype: str = "fp32") -> int:
        """Size of the gradient in bytes at ``dtype`` (``fp32`` or ``fp16``)."""
        return self.n_params * BYTES_PER_ELEMENT[dtype]


@dataclass(frozen=True)
class Layer:
    """One layer as a builder call creates it (e.g. conv + batch norm + ReLU is one layer).

    Attributes are per sample: ``fwd_flops`` (FLOP), ``bwd_flops`` (FLOP: gradients with respect
    to the input and to the weights), ``input_elems`` / ``output_elems`` (activation elements read
    and written by the forward pass). ``input_shape`` is the per-sample input ``(H, W, C)`` (or
    ``(N,)``) and ``stride`` the spatial stride, recorded for the layers whose kernels the
    per-layer model times by shape (convolutions).
    """

    name: str
    kind: LayerKind
    tensors: tuple[GradTensor, ...]
    fwd_flops: float
    bwd_flops: float
    input_elems: int
    output_elems: int
    output_shape: tuple[int, ...] = ()
    input_shape: tuple[int, ...] = ()
    stride: int = 1
    activation: str | None = None

    @property
    def n_params(self) -> int:
        """Trainable parameters of the layer."""
        return sum(t.n_params for t in self.tensors)

    def grad_bytes(self, dtype: str = "fp32") -> int:
        """Bytes of all gradient tensors of the layer at ``dtype``."""
        return sum(t.nbytes(dtype) for t in self.tensors)


@dataclass(frozen=True)
class ModelSpec:
    """A model: its layers in forward order, and the published parameter count it must match."""

    name: str
    layers: tuple[Layer, ...]
    input_shape: tuple[int, int, int]
    published_params: int
    published_params_source: str
    description: str = ""
    aliases: tuple[str, ...] = field(default=())

    @property
    def n_params(self) -> int:
        """Total trainable parameters."""
        return sum(layer.n_params for layer in self.layers)

    @property
    def tensors(self) -> tuple[GradTensor, ...]:
        """All gradient tensors, in forward order."""
        return tuple(t for layer in self.layers for t in layer.tensors)

    def grad_bytes(self, dtype: str = "fp32") -> int:
        """Bytes of all gradients at ``dtype``."""
        return sum(layer.grad_bytes(dtype) for layer in self.layers)

    def fwd_flops(self, batch: int = 1) -> float:
        """Forward FLOPs for ``batch`` samples."""
        return batch * sum(layer.fwd_flops for layer in self.layers)

    def activation_bytes(self, batch: int = 1, dtype: str = "fp32") -> int:
        """Bytes of all layer outputs kept for the backward pass, for ``batch`` samples."""
        return batch * BYTES_PER_ELEMENT[dtype] * sum(la.output_elems for la in self.layers)
