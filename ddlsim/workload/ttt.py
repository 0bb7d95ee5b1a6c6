"""Time to train: wall-clock time of a full training run at the predicted steady-state rate.

A CNN's is ``time_to_train_s = epochs * dataset_images / images_per_sec``; a transformer's is
its token budget over its tokens per second (:func:`train_tokens`: given, or the
compute-optimal 20 tokens a parameter of Hoffmann et al. 2022, "Training Compute-Optimal
Large Language Models", Table 3 / sec. 3.4). It is a lower bound of the real
run: warm-up, evaluation passes, checkpointing, learning-rate-schedule effects on the batch and
the input pipeline's first epoch are not counted. The defaults are the usual ImageNet-1k
recipe: 90 epochs over the 1,281,167 training images of ILSVRC-2012.
"""

from __future__ import annotations

import math
import numbers

from ddlsim.errors import ConfigError

DEFAULT_EPOCHS = 90
#: training images of ImageNet-1k (ILSVRC-2012)
IMAGENET_1K_TRAIN_IMAGES = 1_281_167
#: bounds beyond which the inputs are certainly a mistake (a typo, a unit error)
MAX_EPOCHS = 1e6
MAX_DATASET_IMAGES = 10**13
#: training tokens per parameter of a compute-optimal run (Hoffmann et al. 2022, Chinchilla:
#: 1.4 T tokens for 70 B parameters)
CHINCHILLA_TOKENS_PER_PARAM = 20
#: most training tokens accepted: a quadrillion, beyond any published run (Llama 3: 15 T)
MAX_TRAIN_TOKENS = 1e15


def train_tokens(n_params: int, given: float | None = None) -> float:
    """A transformer's token budget: ``given``, else :data:`CHINCHILLA_TOKENS_PER_PARAM` a
    parameter."""
    return float(given) if given is not None else CHINCHILLA_TOKENS_PER_PARAM * float(n_params)


def validate_ttt_inputs(epochs: float, dataset_images: int) -> None:
    """Raise :class:`ConfigError` unless ``epochs`` and ``dataset_images`` are sane and > 0."""
    if (
        isinstance(epochs, bool)
        or not isinstance(epochs, numbers.Real)
        or not math.isfinite(epochs)
        or not 0 < epochs <= MAX_EPOCHS
    ):
        raise ConfigError(f"epochs must be a number in (0, {MAX_EPOCHS:g}], got {epochs!r}")
    if (
        isinstance(dataset_images, bool)
        or not isinstance(dataset_images, numbers.Integral)
        or not 0 < dataset_images <= MAX_DATASET_IMAGES
    ):
        raise ConfigError(
            f"dataset images must be an integer in 1..{MAX_DATASET_IMAGES:.0e}, "
            f"got {dataset_images!r}"
        )


def time_to_train_s(
    images_per_sec: float,
    epochs: float = DEFAULT_EPOCHS,
    dataset_images: int = IMAGENET_1K_TRAIN_IMAGES,
) -> float:
    """Seconds to process ``epochs`` passes over ``dataset_images`` at ``images_per_sec``."""
    validate_ttt_inputs(epochs, dataset_images)
    if not images_per_sec > 0 or not math.isfinite(images_per_sec):
        raise ConfigError(f"throughput must be a positive number, got {images_per_sec!r}")
    return epochs * dataset_images / images_per_sec


def tokens_time_to_train_s(tokens_per_sec: float, tokens: float) -> float:
    """Seconds to train on ``tokens`` tokens at ``tokens_per_sec``."""
    if not 0 < tokens <= MAX_TRAIN_TOKENS or not math.isfinite(tokens):
        raise ConfigError(f"training tokens must be in (0, {MAX_TRAIN_TOKENS:g}], got {tokens!r}")
    if not tokens_per_sec > 0 or not math.isfinite(tokens_per_sec):
        raise ConfigError(f"throughput must be a positive number, got {tokens_per_sec!r}")
    return tokens / tokens_per_sec


def format_duration(seconds: float) -> str:
    """A duration for people: ``42.0 s``, ``12.5 min``, ``6.31 h``, ``3.2 days``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 86400:.1f} days"
