"""Running a zoo model definition with a framework's builder (no framework imported here).

Each zoo model is a function (``resnet.resnet50``, ``vgg.build`` ...) that drives a
:class:`~ddlsim.workload.zoo.builder.NetBuilder`. A profiling backend builds the same network in
its framework by running that function with a subclass of ``NetBuilder`` that also creates the
framework's layer for every builder call (:mod:`ddlsim.tools.calibrate.keras_builder`,
:mod:`ddlsim.tools.calibrate.torch_builder`): :func:`run_definition` swaps the subclass in, so the
framework model has exactly the zoo's layers, branches and variables.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo import definition
from ddlsim.workload.zoo.builder import NetBuilder

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
    build = definition(name)  # the module whose NetBuilder is swapped, and the function in it
    module, func = sys.modules[build.__module__], build.__name__
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
