"""Running a zoo model definition with a framework's builder (no framework imported here).

Each zoo model is a function (``resnet.resnet50``, ``vgg.build`` ...) that drives a
:class:`~ddlsim.workload.zoo.builder.NetBuilder`. A profiling backend builds the same network in
its framework by running that function with a subclass of ``NetBuilder`` that also creates the
framework's layer for every builder call (:mod:`ddlsim.calibrate.keras_builder`,
:mod:`ddlsim.calibrate.torch_builder`): :func:`run_definition` swaps the subclass in, so the
framework model has exactly the zoo's layers, branches and variables.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ddlsim.errors import UnknownNameError
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo import (
    MODEL_NAMES,
    alexnet,
    efficientnet,
    googlenet,
    inception3,
    inception4,
    mobilenet,
    resnet,
    resnext,
    vgg,
)
from ddlsim.workload.zoo.builder import NetBuilder

# zoo model name -> (module whose NetBuilder is swapped, definition function in it)
DEFINITIONS: dict[str, tuple[ModuleType, str]] = {
    "alexnet": (alexnet, "build"),
    "googlenet": (googlenet, "build"),
    "inception3": (inception3, "build"),
    "inception4": (inception4, "build"),
    "resnet50": (resnet, "resnet50"),
    "resnet50_v1.5": (resnet, "resnet50_v1_5"),
    "resnet50_v2": (resnet, "resnet50_v2"),
    "resnet101": (resnet, "resnet101"),
    "resnet101_v2": (resnet, "resnet101_v2"),
    "resnet152": (resnet, "resnet152"),
    "vgg16": (vgg, "build"),
    "mobilenet": (mobilenet, "build"),
    "resnext101-32x4d": (resnext, "resnext101_32x4d"),
    "se-resnext101-32x4d": (resnext, "se_resnext101_32x4d"),
    "efficientnet-b0": (efficientnet, "efficientnet_b0"),
    "efficientnet-b4": (efficientnet, "efficientnet_b4"),
    "efficientnet-widese-b0": (efficientnet, "efficientnet_widese_b0"),
    "efficientnet-widese-b4": (efficientnet, "efficientnet_widese_b4"),
    "efficientnetv2-s": (efficientnet, "efficientnetv2_s"),
}
_SWAP_LOCK = threading.Lock()


@dataclass(frozen=True)
class GradientTensor:
    """One trainable variable of a framework's zoo model: its zoo name, the framework's shape,
    its fp32 bytes and the zoo layer that owns it."""

    name: str
    shape: tuple[int, ...]
    nbytes: int
    layer: str


def bound_args(method: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    """Every argument of a NetBuilder method call, defaults included."""
    bound = inspect.signature(method).bind(None, *args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def run_definition(
    name: str, builder: type[NetBuilder], **options: Any
) -> tuple[ModelSpec, NetBuilder]:
    """Run the zoo definition of ``name`` with ``builder`` (a NetBuilder subclass; ``options``
    go to its constructor); return the spec it records and the builder."""
    if name not in DEFINITIONS:
        raise UnknownNameError("model", name, MODEL_NAMES)
    module, func = DEFINITIONS[name]
    made: list[NetBuilder] = []

    def factory(*args: Any, **kwargs: Any) -> NetBuilder:
        made.append(builder(*args, **kwargs, **options))
        return made[-1]

    with _SWAP_LOCK:
        original = module.NetBuilder
        module.NetBuilder = factory
        try:
            spec = getattr(module, func)()
        finally:
            module.NetBuilder = original
    if len(made) != 1:
        raise RuntimeError(f"zoo definition of {name} made {len(made)} builders, expected 1")
    return spec, made[0]
