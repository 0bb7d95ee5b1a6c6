"""A user's own transformer from a file: :func:`load_model_config` (JSON, or YAML with PyYAML).

Two forms are accepted:

* **plain**: the fields of :class:`~ddlsim.workload.transformers.config.TransformerConfig` by
  name (``layers, hidden, heads, kv_heads, ffn, ffn_kind, vocab, seq_len, max_positions,
  norm, norm_placement, position, bias, tie_embeddings`` ...), the optional parts as nested
  mappings (``patch``, ``speech`` with ``convs`` as ``[channels, kernel, stride]`` triples,
  ``adaptive``, ``generator``), and ``base``: a zoo name or alias whose definition the other
  fields change. ``name`` defaults to the file's stem. An unknown field is refused by name.
* **Hugging Face** ``config.json`` as published (recognised by ``model_type``, or by GPT-2's
  ``n_layer``/``n_embd`` or MPT's ``d_model``/``expansion_ratio``): see
  :mod:`ddlsim.workload.transformers.hf`.

Every error is one :class:`~ddlsim.errors.ConfigError` line naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ddlsim.errors import ConfigError, shown
from ddlsim.inputs import MODEL_CONFIG_MAX_BYTES, read_text
from ddlsim.workload.transformers.config import (
    AdaptiveSoftmax,
    ConvLayer,
    Generator,
    PatchEmbedding,
    SpeechFrontEnd,
    TransformerConfig,
)
from ddlsim.workload.transformers.hf import hf_fields, is_hf_config
from ddlsim.workload.transformers.zoo import get_transformer
from ddlsim.workload.zoo.aliases import canonical

_PARTS: dict[str, type] = {
    "patch": PatchEmbedding,
    "speech": SpeechFrontEnd,
    "adaptive": AdaptiveSoftmax,
    "generator": Generator,
}
_FIELDS = tuple(f.name for f in dataclasses.fields(TransformerConfig))
_TUPLE_FIELDS = ("cutoffs", "tie_projections")


def _read(path: Path) -> object:
    # a regular file no larger than a model description can be, read with a bound (a FIFO or
    # /dev/zero is refused before it is opened), UTF-8 with or without a byte-order mark
    text = read_text(path, "model config", MODEL_CONFIG_MAX_BYTES)
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                f"model config {shown(str(path))}: reading YAML needs PyYAML "
                "(pip install pyyaml), or write the file as JSON"
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"model config {shown(str(path))}: not valid YAML ({e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"model config {shown(str(path))}: not valid JSON ({e})") from None


def _part(key: str, value: object) -> object:
    """A nested mapping made into its dataclass (``convs`` triples into ConvLayers)."""
    cls = _PARTS[key]
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a mapping of its fields, got {shown(value)}")
    names = {f.name for f in dataclasses.fields(cls)}
    kw: dict[str, Any] = {}
    for k, v in value.items():
        if k not in names:
            raise ConfigError(
                f"unknown field {shown(k)} in {key}; valid: {', '.join(sorted(names))}"
            )
        if k == "convs":
            v = tuple(_conv(c) for c in (v if isinstance(v, list) else [v]))
        elif k in _TUPLE_FIELDS and isinstance(v, list):
            v = tuple(v)
        kw[k] = v
    try:
        return cls(**kw)
    except TypeError as e:
        raise ConfigError(f"{key}: {e}") from None


def _conv(value: object) -> ConvLayer:
    if not isinstance(value, list) or len(value) != 3:
        raise ConfigError(
            f"speech.convs: each entry is [channels, kernel, stride], got {shown(value)}"
        )
    return ConvLayer(*value)


def plain_config(doc: dict[str, Any], default_name: str = "custom") -> TransformerConfig:
    """A :class:`TransformerConfig` from the plain form (see the module doc)."""
    doc = dict(doc)
    base_name = doc.pop("base", None)
    for key in doc:
        if key not in _FIELDS:
            raise ConfigError(f"unknown field {shown(key)}; valid: base, {', '.join(_FIELDS)}")
    fields = {k: (_part(k, v) if k in _PARTS else v) for k, v in doc.items()}
    if base_name is not None:
        base = get_transformer(canonical(base_name))
        fields.setdefault("name", default_name)
        return dataclasses.replace(base, **fields)
    fields.setdefault("name", default_name)
    missing = [k for k in ("layers", "hidden", "heads", "ffn", "vocab") if k not in fields]
    if missing:
        raise ConfigError(f"missing field {missing[0]} (or name a zoo model as base)")
    return TransformerConfig(**fields)


def load_model_config(path: str | Path) -> TransformerConfig:
    """The transformer that file ``path`` describes (plain fields or a Hugging Face
    ``config.json``; JSON, or YAML where PyYAML is installed).

    Raises :class:`~ddlsim.errors.ConfigError`, one line naming the file and the bad field.
    """
    path = Path(path)
    doc = _read(path)
    where = f"model config {shown(str(path))}"
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a mapping of fields, got {shown(doc)}")
    try:
        if is_hf_config(doc):
            return TransformerConfig(**hf_fields(doc, path.stem))
        return plain_config(doc, path.stem)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
