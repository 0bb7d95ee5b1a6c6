"""Keras builder: the zoo's own model definitions, run with Keras layers alongside.

:class:`KerasNetBuilder` is a :class:`~ddlsim.workload.zoo.builder.NetBuilder` that, besides
recording each zoo :class:`~ddlsim.workload.layers.Layer`, creates the matching Keras layer
(:mod:`ddlsim.tools.calibrate.keras_layers`) and a step of a small program (which activations go in,
which comes out). :func:`ddlsim.tools.calibrate.definitions.run_definition` runs a zoo definition
(``resnet.resnet50`` ...) with this builder in place of ``NetBuilder``, so the Keras graph has
exactly the zoo's layers, branches and variables; no weights are downloaded. This module imports
TensorFlow and Keras.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ddlsim.tools.calibrate import keras_layers as kl
from ddlsim.tools.calibrate.definitions import bound_args as _bound
from ddlsim.tools.calibrate.keras_layers import keras
from ddlsim.workload.zoo.builder import Activation, NetBuilder

DROPOUT_RATE = 0.5


@dataclass(frozen=True)
class Step:
    """One op of the replayed program: ``layer`` (an index into the model's layers, -1 for a
    flatten) applied to the activations ``inputs`` inside the scopes ``scopes``."""

    scopes: tuple[str, ...]
    inputs: tuple[int, ...]
    output: int
    layer: int
    input_shapes: tuple[tuple[int, ...], ...]
    with_labels: bool = False


class KerasNetBuilder(NetBuilder):
    """A NetBuilder that also creates one Keras layer and one program step per zoo layer."""

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        *,
        batch_norm: bool = False,
        bn_scale: bool = False,
        dtype: str = "float32",
        initializer: str = "glorot_uniform",
    ) -> None:
        super().__init__(input_shape, batch_norm=batch_norm, bn_scale=bn_scale)
        self.dtype, self.initializer = dtype, initializer
        self.keras_layers: list[keras.layers.Layer] = []
        self.steps: list[Step] = []
        self._nodes: dict[int, tuple[Activation, int]] = {id(self.top): (self.top, 0)}

    def _node(self, act: Activation) -> int:
        entry = self._nodes.get(id(act))
        if entry is None or entry[0] is not act:
            raise ValueError(f"activation {act} was not produced by this builder")
        return entry[1]

    def _emit(
        self,
        make: Callable[[str], keras.layers.Layer] | None,
        inputs: Sequence[Activation],
        out: Activation,
        *,
        with_labels: bool = False,
    ) -> Activation:
        node = len(self._nodes)
        in_ids = tuple(self._node(a) for a in inputs)
        self._nodes[id(out)] = (out, node)
        if make is None:  # flatten: no zoo layer, no Keras layer
            scopes, index = tuple(self._scopes), -1
        else:
            *scopes_list, leaf = self._layers[-1].name.split("/")
            scopes, index = tuple(scopes_list), len(self.keras_layers)
            self.keras_layers.append(make(leaf))
        shapes = tuple(a.shape for a in inputs)
        self.steps.append(Step(scopes, in_ids, node, index, shapes, with_labels))
        return out

    def _epilogue_args(self) -> dict[str, Any]:
        tensors = self._layers[-1].tensors
        leaves = [t.name.split("/") for t in tensors[1:]]
        bn = next((p[-2] for p in leaves if p[-1] == "beta"), None)
        return {
            "biases": any(p[-1] == "biases" for p in leaves),
            "bn_name": bn,
            "bn_scale": any(p[-1] == "gamma" for p in leaves),
        }

    # -- weighted layers ------------------------------------------------------------------
    def conv(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.conv`."""
        a, x = _bound(NetBuilder.conv, args, kwargs), self.top
        out = super().conv(*args, **kwargs)
        epi = self._epilogue_args()
        return self._emit(
            lambda leaf: kl.ZooConv(
                a["out_ch"],
                (a["k_h"], a["k_w"]),
                a["stride"],
                a["padding"],
                activation=a["activation"],
                groups=a["groups"],
                initializer=self.initializer,
                name=leaf,
                dtype=self.dtype,
                **epi,
            ),
            [x],
            out,
        )

    def depthwise_conv(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.depthwise_conv`."""
        a, x = _bound(NetBuilder.depthwise_conv, args, kwargs), self.top
        out = super().depthwise_conv(*args, **kwargs)
        epi = self._epilogue_args()
        return self._emit(
            lambda leaf: kl.ZooDepthwiseConv(
                (a["k_h"], a["k_w"]),
                a["stride"],
                a["padding"],
                a["multiplier"],
                activation=a["activation"],
                initializer=self.initializer,
                name=leaf,
                dtype=self.dtype,
                **epi,
            ),
            [x],
            out,
        )

    def fc(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.fc`."""
        a, x = _bound(NetBuilder.fc, args, kwargs), self.top
        out = super().fc(*args, **kwargs)
        return self._emit(
            lambda leaf: kl.ZooDense(
                a["out_units"], a["activation"], self.initializer, name=leaf, dtype=self.dtype
            ),
            [x],
            out,
        )

    def batch_norm(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.batch_norm`."""
        a, x = _bound(NetBuilder.batch_norm, args, kwargs), self.top
        out = super().batch_norm(*args, **kwargs)
        return self._emit(
            lambda leaf: kl.ZooBatchNorm(
                bool(a["scale"]), a["activation"], name=leaf, dtype=self.dtype
            ),
            [x],
            out,
        )

    def squeeze_excitation(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.squeeze_excitation`."""
        a, x = _bound(NetBuilder.squeeze_excitation, args, kwargs), self.top
        out = super().squeeze_excitation(*args, **kwargs)
        return self._emit(
            lambda leaf: kl.ZooSqueezeExcite(
                x.shape[-1],
                a["squeeze_ch"],
                a["activation"],
                self.initializer,
                name=leaf,
                dtype=self.dtype,
            ),
            [x],
            out,
        )

    # -- parameter-free layers ------------------------------------------------------------
    def pool(self, *args: Any, **kwargs: Any) -> Activation:
        """See :meth:`NetBuilder.pool`."""
        a, x = _bound(NetBuilder.pool, args, kwargs), self.top
        out = super().pool(*args, **kwargs)
        cls = keras.layers.MaxPooling2D if a["op"] == "max" else keras.layers.AveragePooling2D
        return self._emit(
            lambda leaf: cls(
                (a["k_h"], a["k_w"]),
                strides=a["stride"],
                padding=a["padding"].lower(),
                name=leaf,
                dtype=self.dtype,
            ),
            [x],
            out,
        )

    def spatial_mean(self) -> Activation:
        """See :meth:`NetBuilder.spatial_mean`."""
        x = self.top
        out = super().spatial_mean()
        return self._emit(lambda leaf: kl.ZooSpatialMean(name=leaf, dtype=self.dtype), [x], out)

    def lrn(self, depth_radius: int = 5) -> Activation:
        """See :meth:`NetBuilder.lrn`."""
        x = self.top
        out = super().lrn(depth_radius)
        return self._emit(
            lambda leaf: kl.ZooLRN(depth_radius, name=leaf, dtype=self.dtype), [x], out
        )

    def activation(self, kind: str = "relu") -> Activation:
        """See :meth:`NetBuilder.activation`."""
        x = self.top
        out = super().activation(kind)
        return self._emit(lambda leaf: keras.layers.ReLU(name=leaf, dtype=self.dtype), [x], out)

    def dropout(self) -> Activation:
        """See :meth:`NetBuilder.dropout`."""
        x = self.top
        out = super().dropout()
        return self._emit(
            lambda leaf: keras.layers.Dropout(DROPOUT_RATE, name=leaf, dtype=self.dtype), [x], out
        )

    def flatten(self) -> Activation:
        """See :meth:`NetBuilder.flatten` (a reshape step, no layer)."""
        x = self.top
        return self._emit(None, [x], super().flatten())

    def residual_add(self, shortcut: Activation, activation: str | None = "relu") -> Activation:
        """See :meth:`NetBuilder.residual_add`."""
        x = self.top
        out = super().residual_add(shortcut, activation)
        relu = activation == "relu"
        return self._emit(
            lambda leaf: kl.ZooAdd(relu, name=leaf, dtype=self.dtype), [x, shortcut], out
        )

    def concat(self, branches: Sequence[Activation]) -> Activation:
        """See :meth:`NetBuilder.concat`."""
        out = super().concat(branches)
        return self._emit(
            lambda leaf: keras.layers.Concatenate(axis=-1, name=leaf, dtype=self.dtype),
            list(branches),
            out,
        )

    def softmax_loss(self) -> Activation:
        """See :meth:`NetBuilder.softmax_loss` (the model's output: the scalar loss)."""
        x = self.top
        out = super().softmax_loss()
        return self._emit(
            lambda leaf: kl.ZooLoss(name=leaf, dtype=self.dtype), [x], out, with_labels=True
        )
