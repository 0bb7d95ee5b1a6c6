"""Keras models of the zoo whose variables are the zoo's gradient tensors, name for name.

:func:`build_keras_model` runs the zoo definition with
:class:`~ddlsim.tools.calibrate.keras_builder.KerasNetBuilder` and wraps the recorded program in a
:class:`ZooKerasModel`. Variables are created up front from the zoo's activation shapes (no
forward pass, no weight download) inside the zoo's scopes, so a variable's path equals its zoo
tensor name (``resnet_v10/conv1/conv2d/kernel``). ``call`` replays the program, entering each
scope once per contiguous run of steps, so every op of a zoo layer runs under that layer's name
scope: ``<model>/resnet_v10/conv1/conv2d/convolution`` (TensorFlow may suffix a scope with
``_1``; :mod:`ddlsim.tools.calibrate.profiler` allows for it). The model maps ``(images, labels)``
to
the scalar loss. This module imports TensorFlow and Keras.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from ddlsim.tools.calibrate.definitions import GradientTensor, run_definition
from ddlsim.tools.calibrate.keras_builder import KerasNetBuilder, Step
from ddlsim.tools.calibrate.keras_layers import keras, tf
from ddlsim.workload.layers import ModelSpec

PRECISION_POLICIES = {"fp32": "float32", "amp": "mixed_float16"}
MASTER_WEIGHT_BYTES = 4  # variables (and so gradients) stay fp32 under mixed precision


class _ScopeStack:
    """Open name scopes; moving to a new path keeps the common prefix open, so a scope is
    entered once per contiguous run of steps (no ``_1`` suffixes inside a block)."""

    def __init__(self) -> None:
        self.open: list[tuple[str, Any]] = []

    def move_to(self, path: tuple[str, ...]) -> None:
        """Leave the scopes not on ``path``, enter the missing ones."""
        depth = 0
        while depth < min(len(self.open), len(path)) and self.open[depth][0] == path[depth]:
            depth += 1
        while len(self.open) > depth:
            self.open.pop()[1].__exit__(None, None, None)
        for name in path[depth:]:
            scope = keras.name_scope(name)
            scope.__enter__()
            self.open.append((name, scope))


class ZooKerasModel(keras.Model):
    """A zoo model as a Keras model: ``layers_`` applied by ``steps``, loss as output."""

    def __init__(
        self, spec: ModelSpec, steps: tuple[Step, ...], layers: list[Any], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.layers_ = list(layers)
        self._steps = steps
        self._owners = [layer.name for layer in spec.layers]  # one Keras layer per zoo layer
        if len(self._owners) != len(self.layers_):
            raise RuntimeError(f"{spec.name}: {len(layers)} Keras layers for {len(spec.layers)}")

    def build_variables(self) -> None:
        """Create every variable from the zoo's shapes, in the zoo's scopes."""
        for step in self._steps:
            if step.layer < 0:
                continue
            shapes = [(None, *s) for s in step.input_shapes]
            if step.with_labels:
                shapes.append((None,))
            with contextlib.ExitStack() as stack:
                for name in step.scopes:
                    stack.enter_context(keras.name_scope(name))
                self.layers_[step.layer].build(shapes[0] if len(shapes) == 1 else shapes)
        self.built = True

    def call(self, inputs: Any, training: bool = False) -> Any:
        """The loss of ``inputs = (images, labels)``."""
        images, labels = inputs
        values: dict[int, Any] = {0: images}
        scopes = _ScopeStack()
        try:
            for step in self._steps:
                scopes.move_to(step.scopes)
                args = [values[i] for i in step.inputs]
                values[step.output] = self._apply(step, args, labels, training)
        finally:
            scopes.move_to(())
        return values[self._steps[-1].output]

    def _apply(self, step: Step, args: list[Any], labels: Any, training: bool) -> Any:
        if step.layer < 0:
            return tf.reshape(args[0], (-1, math.prod(step.input_shapes[0])))
        layer = self.layers_[step.layer]
        if step.with_labels:
            args = [args[0], labels]
        # Keras passes ``training`` on only to layers whose call() takes it
        return layer(args if len(args) > 1 else args[0], training=training)

    def gradient_tensors(self) -> list[GradientTensor]:
        """The trainable variables (= gradient tensors), in ``trainable_variables`` order, with
        fp32 bytes and the zoo layer that owns each."""
        owner: dict[int, str] = {}
        for step in self._steps:
            if step.layer >= 0:
                for v in self.layers_[step.layer].trainable_weights:
                    owner[id(v)] = self._owners[step.layer]
        return [
            GradientTensor(
                v.path,
                tuple(int(d) for d in v.shape),
                MASTER_WEIGHT_BYTES * math.prod(int(d) for d in v.shape),
                owner[id(v)],
            )
            for v in self.trainable_variables
        ]


def build_keras_model(
    name: str, precision: str = "fp32", initializer: str = "glorot_uniform"
) -> ZooKerasModel:
    """The Keras model of zoo model ``name``, variables created (``initializer`` for kernels and
    weights; ``"zeros"`` is quickest when only shapes matter)."""
    spec, builder = run_definition(
        name, KerasNetBuilder, dtype=PRECISION_POLICIES[precision], initializer=initializer
    )
    model = ZooKerasModel(spec, tuple(builder.steps), builder.keras_layers, name=f"ddlsim_{name}")
    model.build_variables()
    return model
