"""The named terms one GPU's transformer step is reported in (the report's ``compute / GPU``
lines, ``inputs.transformer.compute_terms_s``, the sweep's ``compute_<term>_s`` columns).

A module of names only, so that what reads the terms (the report, a sweep of CNNs) does not
load the transformer compute model that produces them
(:func:`ddlsim.calibration.transformer.compute_terms`).
"""

from __future__ import annotations

#: what a stage's kernels are: the linear layers' GEMMs (the projections, the MLP, the
#: vocabulary and task heads, a ViT's patch and wav2vec2's feature convolutions), attention's
#: work over the ``b·heads·s·t`` scores (its batched GEMMs, the score passes, or the
#: FlashAttention kernel), and the other element-wise passes (norms, activations, dropout,
#: residual adds, casts, the embedding gather, the loss)
KERNEL_KINDS = ("gemm", "attention", "elementwise")
#: every term, in the report's order, with its words: the kernels by kind, activation
#: checkpointing's second forward, the time a stage waits on the host's dispatch beyond its
#: kernels, the gradient additions of accumulation and the optimizer step the GPU runs
COMPUTE_TERMS = (
    ("gemm", "linear-layer GEMMs"),
    ("attention", "attention (scores, softmax, context)"),
    ("elementwise", "element-wise passes"),
    ("recompute", "recompute (activation checkpointing)"),
    ("host_wait", "waiting on the host's dispatch"),
    ("accumulate", "gradient accumulation adds"),
    ("optimizer", "optimizer step"),
)
#: the term names alone
TERM_NAMES = tuple(name for name, _ in COMPUTE_TERMS)
