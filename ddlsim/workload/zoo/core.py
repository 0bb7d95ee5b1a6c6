"""Core state of the network builder: the current activation, names, scopes and the layer list.

:class:`BuilderCore` owns what tf_cnn_benchmarks' ``ConvNetBuilder`` keeps besides the layer
methods: ``top`` (the current per-sample activation), per-op-kind counters that number scopes
(``conv0``, ``conv1``, ...), the variable-scope stack, and the appended :class:`Layer` records.
The layer methods live in :class:`~ddlsim.workload.zoo.builder.NetBuilder`. The per-element
FLOP constants used there are defined here (FLOP per output element, forward; the backward
pass is charged the same).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ddlsim.workload.layers import GradTensor, Layer, LayerKind, ModelSpec

BIAS_FLOPS_PER_ELEM = 1
RELU_FLOPS_PER_ELEM = 1
BN_FLOPS_PER_ELEM = 4  # batch statistics and normalisation; +1 each for beta and gamma
ADD_FLOPS_PER_ELEM = 1
DROPOUT_FLOPS_PER_ELEM = 1
LRN_FLOPS_PER_WINDOW_ELEM = 2  # square and accumulate; +3 per element for bias, pow, divide
SOFTMAX_XENT_FLOPS_PER_CLASS = 5
SIGMOID_FLOPS_PER_ELEM = 3  # exp, add, divide
SWISH_FLOPS_PER_ELEM = 4  # x * sigmoid(x): the sigmoid and a multiply

NUM_CLASSES = 1000  # tf_cnn_benchmarks uses 1001 (label 0 = background); see zoo/__init__.py
PADDINGS = ("SAME", "VALID")
ACTIVATIONS = ("relu", "swish", None)  # swish = SiLU, x * sigmoid(x)
ACTIVATION_FLOPS_PER_ELEM = {"relu": RELU_FLOPS_PER_ELEM, "swish": SWISH_FLOPS_PER_ELEM, None: 0}


def conv_out_size(in_size: int, kernel: int, stride: int, padding: str) -> int:
    """Output length of a convolution or pooling along one axis (TensorFlow padding rules)."""
    if padding == "SAME":
        return -(-in_size // stride)
    if padding == "VALID":
        if kernel > in_size:
            raise ValueError(f"VALID window {kernel} larger than input {in_size}")
        return (in_size - kernel) // stride + 1
    raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")


@dataclass(frozen=True)
class Activation:
    """The activation the builder points at: per-sample ``shape`` and whether it needs a gradient.

    ``needs_grad`` is false for the input image and anything computed from it by parameter-free
    layers only; a weighted layer fed by it computes no input gradient.
    """

    shape: tuple[int, ...]
    needs_grad: bool

    @property
    def elems(self) -> int:
        """Elements per sample."""
        return math.prod(self.shape)


class BuilderCore:
    """Builder state: current activation ``top``, counters, scopes and the layers so far.

    ``batch_norm`` / ``bn_scale`` are the defaults for :meth:`conv` (tf_cnn_benchmarks'
    ``use_batch_norm`` and ``batch_norm_config['scale']``).
    """

    def __init__(
        self, input_shape: tuple[int, int, int], *, batch_norm: bool = False, bn_scale: bool = False
    ) -> None:
        self.input_shape = input_shape
        self.top = Activation(tuple(input_shape), needs_grad=False)
        self.use_batch_norm = batch_norm
        self.bn_scale = bn_scale
        self._layers: list[Layer] = []
        self._names: set[str] = set()
        self._counts: defaultdict[str, int] = defaultdict(int)
        self._scopes: list[str] = []

    # -- naming -----------------------------------------------------------------------------
    def next_name(self, key: str) -> str:
        """``key`` followed by its running count (``conv0``, ``conv1``, ...), as tf does."""
        n = self._counts[key]
        self._counts[key] += 1
        return f"{key}{n}"

    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Variable scope: layer and tensor names created inside are prefixed ``name/``."""
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    def _path(self, local: str) -> str:
        return "/".join([*self._scopes, local])

    def _spatial(self) -> tuple[int, int, int]:
        if len(self.top.shape) != 3:
            raise ValueError(f"layer needs an (H, W, C) input, got shape {self.top.shape}")
        h, w, c = self.top.shape
        return h, w, c

    def _add(
        self,
        path: str,
        kind: LayerKind,
        tensors: Sequence[GradTensor],
        fwd_flops: float,
        bwd_flops: float,
        input_elems: int,
        out_shape: tuple[int, ...],
        needs_grad: bool,
        stride: int = 1,
        input_shape: tuple[int, ...] = (),
        activation: str | None = None,
    ) -> Activation:
        if path in self._names:
            raise ValueError(f"duplicate layer name {path!r}")
        self._names.add(path)
        out = Activation(out_shape, needs_grad)
        layer = Layer(
            path,
            kind,
            tuple(tensors),
            fwd_flops,
            bwd_flops,
            input_elems,
            out.elems,
            out_shape,
            input_shape,
            stride,
            activation,
        )
        self._layers.append(layer)
        self.top = out
        return out

    # -- result ----------------------------------------------------------------------------------
    def build(self, name: str, published_params: int, source: str, description: str) -> ModelSpec:
        """The finished :class:`ModelSpec`."""
        h, w, c = self.input_shape
        return ModelSpec(
            name=name,
            layers=tuple(self._layers),
            input_shape=(h, w, c),
            published_params=published_params,
            published_params_source=source,
            description=description,
        )
