"""A transformer as the DAG sees a model: a :class:`~ddlsim.workload.layers.ModelSpec` whose
layers are its stages, each with the gradient tensors it owns.

The stages, in forward order: ``micro_steps`` (only with gradient accumulation: the ``K - 1``
micro-steps before the last, which exchange nothing), ``embedding`` (the token or patch
embedding, wav2vec2's feature encoder, ELECTRA's generator), one ``encoder/layerI`` per block
(``decoder/layerI`` for an encoder-decoder's decoder), and ``head`` (final norms, pooler,
the output head). A stage's gradient tensors are the ones whose names it prefixes; the
DAG exchanges them when the stage's backward ends, as DDP's buckets and Horovod's fusion do.
Per-sample FLOPs are the stage's forward GEMM FLOPs (backward twice that); activations count
the stage's output, ``hidden`` elements per token.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ddlsim.workload.layers import GradTensor, Layer, LayerKind, ModelSpec
from ddlsim.workload.transformers.config import TransformerConfig
from ddlsim.workload.transformers.structure import block, embedding, head
from ddlsim.workload.transformers.tensors import gradient_tensors, params

MICRO_STEPS = "micro_steps"
_LAYER = re.compile(r"^(encoder|decoder)/layer(\d+)/")


def stage_of(component: str, tensor_name: str) -> str:
    """The stage that owns a gradient tensor: its block, else the embedding or the head."""
    m = _LAYER.match(tensor_name)
    if m:
        return f"{m[1]}/layer{m[2]}"
    if component in ("embedding", "frontend", "generator"):
        return "embedding"
    return "head"


def stage_names(cfg: TransformerConfig, accumulating: bool = False) -> list[str]:
    """The stages of ``cfg`` in forward order."""
    names = [MICRO_STEPS] if accumulating else []
    names.append("embedding")
    names += [f"encoder/layer{i}" for i in range(cfg.layers)]
    names += [f"decoder/layer{i}" for i in range(cfg.decoder_layers)]
    names.append("head")
    return names


@lru_cache(maxsize=64)
def transformer_spec(cfg: TransformerConfig, seq: int, accumulating: bool = False) -> ModelSpec:
    """The :class:`ModelSpec` of ``cfg`` at sequence length ``seq`` (``accumulating``: with the
    ``micro_steps`` stage of gradient accumulation)."""
    owned: dict[str, list[GradTensor]] = {name: [] for name in stage_names(cfg, accumulating)}
    for component, tensor in gradient_tensors(cfg):
        owned[stage_of(component, tensor.name)].append(tensor)
    per_stage = {
        "embedding": embedding(cfg, 1, seq).flops,
        "head": head(cfg, 1, seq).flops,
        "encoder": block(cfg, 1, seq).flops,
        "decoder": block(cfg, 1, seq, decoder=True).flops if cfg.decoder_layers else 0,
    }
    layers = []
    for name, tensors in owned.items():
        kind = LayerKind.BLOCK if "/layer" in name else LayerKind.EMBEDDING
        if name == "head":
            kind = LayerKind.FC
        flops = 0.0 if name == MICRO_STEPS else float(per_stage[name.split("/")[0]])
        out = seq * cfg.hidden
        layers.append(
            Layer(name, kind, tuple(tensors), flops, 2 * flops, out, out, (seq, cfg.hidden))
        )
    return ModelSpec(
        name=cfg.name,
        layers=tuple(layers),
        input_shape=(seq, 1, 1),
        published_params=params(cfg),
        published_params_source=cfg.source or "ddlsim's transformer zoo",
        description=f"{cfg.name}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads",
    )
