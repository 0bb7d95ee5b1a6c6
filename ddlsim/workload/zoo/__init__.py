"""The model zoo: per-layer descriptions of CNNs, framework-free.

The 12 CNNs of tf_cnn_benchmarks, and the models of NVIDIA DeepLearningExamples' ConvNets
(ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d, EfficientNet B0 / B4 and their wide-SE variants) plus
EfficientNetV2-S. :func:`get_model` builds a :class:`~ddlsim.workload.layers.ModelSpec` on
first use and caches it (a few tens of milliseconds for all). Definitions follow
tf_cnn_benchmarks' ``models/*.py`` (tensorflow/benchmarks repo) and DeepLearningExamples'
``image_classification/models/*.py``, transcribed from memory since TensorFlow and PyTorch are
not dependencies; each module's docstring states its source and any uncertainty. Each model's
``published_params`` is a figure from Keras applications / torchvision / timm / the paper,
adjusted with an itemised difference where the definition differs.

Conventions, the same for every model:

* 1000 classes. tf_cnn_benchmarks builds its logits layer with 1001 (label 0 = background);
  published counts refer to 1000, and the difference is ``n_in + 1`` parameters of the last
  affine layer (2,049 for the ResNets), negligible for communication.
* No auxiliary heads (tf_cnn_benchmarks' default), so no auxiliary logits tensors.
* ``mobilenet`` is MobileNet v1 1.0-224, not tf_cnn_benchmarks' MobileNet v2 (see
  :mod:`ddlsim.workload.zoo.mobilenet`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ddlsim.errors import UnknownNameError
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo import (
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

_BUILDERS: dict[str, Callable[[], ModelSpec]] = {
    "alexnet": alexnet.build,
    "googlenet": googlenet.build,
    "inception3": inception3.build,
    "inception4": inception4.build,
    "resnet50": resnet.resnet50,
    "resnet50_v1.5": resnet.resnet50_v1_5,
    "resnet50_v2": resnet.resnet50_v2,
    "resnet101": resnet.resnet101,
    "resnet101_v2": resnet.resnet101_v2,
    "resnet152": resnet.resnet152,
    "vgg16": vgg.build,
    "mobilenet": mobilenet.build,
    "resnext101-32x4d": resnext.resnext101_32x4d,
    "se-resnext101-32x4d": resnext.se_resnext101_32x4d,
    "efficientnet-b0": efficientnet.efficientnet_b0,
    "efficientnet-b4": efficientnet.efficientnet_b4,
    "efficientnet-widese-b0": efficientnet.efficientnet_widese_b0,
    "efficientnet-widese-b4": efficientnet.efficientnet_widese_b4,
    "efficientnetv2-s": efficientnet.efficientnetv2_s,
}

MODEL_NAMES: tuple[str, ...] = tuple(_BUILDERS)


@functools.cache
def _build(name: str) -> ModelSpec:
    return _BUILDERS[name]()


def definition(name: str) -> Callable[[], ModelSpec]:
    """The function that defines model ``name`` by driving the ``NetBuilder`` of its module
    (what :mod:`ddlsim.tools.calibrate.definitions` re-runs with a framework's builder).

    Raises :class:`~ddlsim.errors.UnknownNameError` for a name not in :data:`MODEL_NAMES`.
    """
    if name not in _BUILDERS:
        raise UnknownNameError("model", name, MODEL_NAMES)
    return _BUILDERS[name]


def get_model(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of ``name`` (one of :data:`MODEL_NAMES`), built once and cached.

    Raises :class:`~ddlsim.errors.UnknownNameError` for any other name.
    """
    definition(name)
    return _build(name)


__all__ = ["MODEL_NAMES", "definition", "get_model"]
