"""Model names users type, resolved onto zoo names: :func:`canonical`.

Covers both registries, the CNN zoo (:data:`~ddlsim.workload.zoo.MODEL_NAMES`) and the
transformer zoo (:data:`~ddlsim.workload.transformers.TRANSFORMER_NAMES`), and the names of
torchvision, timm, Keras applications and Hugging Face model ids (``org/name``). Matching is
case-insensitive and ignores ``-``, ``_`` and spaces (``efficientnet_v2-s`` is
``efficientnetv2-s``); a Hugging Face id is first looked up whole, then without its
organisation. A key that two zoo names share would be ambiguous and is refused at import.
An unknown name raises :class:`UnknownModelError`: one line with the nearest names.

Notes on what an alias means: torchvision's and timm's ``resnet50`` are ResNet-50 v1.5 (stride
on the 3x3 convolution) with the same parameters as the zoo's ``resnet50`` (tf_cnn_benchmarks'
v1), which the exact name keeps; ``resnet50_v1.5`` is the v1.5 entry. ``mosaicml/mpt-7b`` is
the released MPT-7B (ALiBi, no biases), ``mpt-7b`` the llm-foundry benchmark definition.
Llama 3.1 ids resolve to the Llama 3 entries (same tensors; only the RoPE scaling differs).
"""

from __future__ import annotations

import difflib
import re

from ddlsim.errors import ConfigError, UnknownNameError, shown
from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES
from ddlsim.workload.zoo import MODEL_NAMES

NEAREST_SHOWN = 5

#: names of other libraries that do not reduce to a zoo name by case and separators alone
_ALIASES: dict[str, str] = {
    # torchvision / timm / Keras CNNs
    "inception_v3": "inception3",
    "inceptionv3": "inception3",
    "inception_v4": "inception4",
    "mobilenet_v1": "mobilenet",
    "mobilenet_v1_1.0_224": "mobilenet",
    "resnet50_v1_5": "resnet50_v1.5",
    "resnetv2_50": "resnet50_v2",
    "resnetv2_101": "resnet101_v2",
    "legacy_seresnext101_32x4d": "se-resnext101-32x4d",
    "tf_efficientnet_b0": "efficientnet-b0",
    "tf_efficientnet_b4": "efficientnet-b4",
    "tf_efficientnetv2_s": "efficientnetv2-s",
    # BERT family
    "bert-base-uncased": "bert-base",
    "bert-large-uncased": "bert-large",
    "bert-large-uncased-whole-word-masking": "bert-large",
    "bert-large-cased-whole-word-masking": "bert-large-cased",
    "distilbert-base-uncased": "distilbert-base",
    "electra-base-discriminator": "electra-base",
    # sequence to sequence, Transformer-XL, speech
    "transformer_wmt_en_de_big": "transformer-big",
    "transformer_wmt_en_de_big_t2t": "transformer-big",
    "transformer_vaswani_wmt_en_de_big": "transformer-big",
    "transfo-xl-wt103": "transformer-xl-large",
    "txl-large": "transformer-xl-large",
    "txl-base": "transformer-xl-base",
    # decoder-only language models
    "gpt2-small": "gpt2",
    "mosaicml/mpt-7b": "mpt-7b-released",
    "mosaicml/mpt-7b-instruct": "mpt-7b-released",
    "mosaicml/mpt-7b-chat": "mpt-7b-released",
    "llama-2-7b-hf": "llama2-7b",
    "llama-2-7b-chat-hf": "llama2-7b",
    "llama-2-13b-hf": "llama2-13b",
    "llama-2-13b-chat-hf": "llama2-13b",
    "llama-2-70b-hf": "llama2-70b",
    "llama-2-70b-chat-hf": "llama2-70b",
    "meta-llama-3-8b": "llama3-8b",
    "meta-llama-3-8b-instruct": "llama3-8b",
    "meta-llama-3-70b": "llama3-70b",
    "meta-llama-3-70b-instruct": "llama3-70b",
    "meta-llama-3.1-8b": "llama3-8b",
    "llama-3.1-8b": "llama3-8b",
    "meta-llama-3.1-70b": "llama3-70b",
    "llama-3.1-70b": "llama3-70b",
    # vision transformers (timm, Hugging Face)
    "vit_base_patch16_224": "vit-b-16",
    "vit_large_patch16_224": "vit-l-16",
    "vit_huge_patch14_224": "vit-h-14",
    "vit-base-patch16-224": "vit-b-16",
    "vit-large-patch16-224": "vit-l-16",
    "vit-huge-patch14-224": "vit-h-14",
}

_SEPARATORS = re.compile(r"[-_\s]+")


class UnknownModelError(UnknownNameError):
    """A model name that neither zoo knows; the message lists the nearest names only."""

    def __init__(self, name: object, valid: list[str], nearest: list[str]) -> None:
        super().__init__("model", name, valid)
        self.nearest = nearest
        if nearest:
            self.args = (f"unknown model {shown(name)}; nearest: {', '.join(nearest)}",)
        else:  # nothing close: where the zoo's names are listed (too many for one line)
            self.args = (
                f"unknown model {shown(name)}; no zoo model is close ('ddlsim predict --help' "
                f"lists all {len(valid)})",
            )


def _key(name: str) -> str:
    return _SEPARATORS.sub("", name.strip().lower())


def _table() -> tuple[dict[str, str], dict[str, str]]:
    """(normalised key -> zoo name, lower-case spelling -> zoo name), refusing a shared key."""
    keys: dict[str, str] = {}
    spellings: dict[str, str] = {}
    entries = [(n, n) for n in (*MODEL_NAMES, *TRANSFORMER_NAMES)] + list(_ALIASES.items())
    for spelling, target in entries:
        key = _key(spelling)
        if keys.get(key, target) != target:
            raise AssertionError(f"alias key {key!r} names both {keys[key]} and {target}")
        keys[key] = target
        spellings[spelling.lower()] = target
    return keys, spellings


_KEYS, _SPELLINGS = _table()
ZOO_NAMES: tuple[str, ...] = (*MODEL_NAMES, *TRANSFORMER_NAMES)


def canonical(name: str) -> str:
    """The zoo name (CNN or transformer) that ``name`` means.

    Raises :class:`~ddlsim.errors.ConfigError` for a non-string and :class:`UnknownModelError`
    (a :class:`~ddlsim.errors.UnknownNameError`) naming the nearest names for an unknown one.
    """
    if not isinstance(name, str):
        raise ConfigError(f"model name must be a string, got {shown(name)}")
    candidates = [name]
    if "/" in name:  # a Hugging Face id: whole first, then without the organisation
        candidates.append(name.rsplit("/", 1)[1])
    for candidate in candidates:
        if (hit := _KEYS.get(_key(candidate))) is not None:
            return hit
    raise UnknownModelError(name, list(ZOO_NAMES), nearest(candidates[-1]))


def nearest(name: str, n: int = NEAREST_SHOWN) -> list[str]:
    """Up to ``n`` zoo names closest to ``name`` (difflib over zoo names and aliases)."""
    matches = difflib.get_close_matches(name.strip().lower(), list(_SPELLINGS), n=3 * n, cutoff=0.5)
    out: list[str] = []
    for spelling in matches:
        if (target := _SPELLINGS[spelling]) not in out:
            out.append(target)
    return out[:n]


def is_transformer(name: str) -> bool:
    """Whether ``name`` (any accepted spelling) resolves to the transformer zoo."""
    return canonical(name) in TRANSFORMER_NAMES


def aliases_of(zoo_name: str) -> tuple[str, ...]:
    """The listed aliases of a zoo name (spellings that differ by more than case and
    separators), sorted."""
    return tuple(sorted(a for a, target in _ALIASES.items() if target == zoo_name))
