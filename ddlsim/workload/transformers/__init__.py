"""Transformers, framework-free: a user's description, parameter counts, per-block structure.

* :mod:`.config`: :class:`TransformerConfig` and its optional parts (validated);
* :mod:`.tensors`: every trainable tensor, per component, in forward order;
* :mod:`.structure`: per-block GEMMs and memory passes, FLOPs per token;
* :mod:`.zoo` and :mod:`.published`: published definitions with their sources and counts;
* :mod:`.load`: a user's model file (plain fields or a Hugging Face ``config.json``).

Kept apart from the CNN zoo's ``MODEL_NAMES``: ``predict`` cannot simulate a transformer yet.
"""

from __future__ import annotations

from ddlsim.workload.transformers.config import (
    AdaptiveSoftmax,
    ConvLayer,
    Generator,
    PatchEmbedding,
    SpeechFrontEnd,
    TransformerConfig,
)
from ddlsim.workload.transformers.tensors import gradient_tensors, param_breakdown, params
from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES, get_transformer

__all__ = [
    "TRANSFORMER_NAMES",
    "AdaptiveSoftmax",
    "ConvLayer",
    "Generator",
    "PatchEmbedding",
    "SpeechFrontEnd",
    "TransformerConfig",
    "get_transformer",
    "gradient_tensors",
    "param_breakdown",
    "params",
]
