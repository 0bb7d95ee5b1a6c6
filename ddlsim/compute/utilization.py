"""How much of the GPU a transformer's training uses: model and hardware FLOPs utilisation.

**MFU** counts the FLOPs the model needs per token, ``6N + 12·L·d·s`` for training (three
times the forward: the weights' ``2N`` each way and the attention scores' ``4·L·d·s``; PaLM,
Chowdhery et al. 2022, appendix B; llm-foundry's ``collect_results.py``), against the peak of
the precision the GEMMs run at. **HFU** counts what the GPU executes, recompute included:
activation checkpointing runs the forward again (``8N + 16·L·d·s``).
"""

from __future__ import annotations

from ddlsim.compute.gemm import unit_peak
from ddlsim.system.specs import DeviceSpec


def model_flops_per_token(n_params: int, layers: int, hidden: int, seq: int) -> float:
    """Training FLOPs per token by the ``6N + 12·L·d·s`` convention."""
    return 6.0 * n_params + 12.0 * layers * hidden * seq


def hardware_flops_per_token(
    n_params: int, layers: int, hidden: int, seq: int, *, recompute: bool
) -> float:
    """FLOPs per token the GPU executes: with a recomputed forward, four forwards' worth."""
    factor = 4.0 / 3.0 if recompute else 1.0
    return factor * model_flops_per_token(n_params, layers, hidden, seq)


def utilization(
    tokens_per_s_per_gpu: float, flops_per_token: float, device: DeviceSpec, gemm_precision: str
) -> float:
    """Fraction of ``device``'s peak at ``gemm_precision`` that ``flops_per_token`` at this
    rate is."""
    peak, _ = unit_peak(device, gemm_precision)
    return tokens_per_s_per_gpu * flops_per_token / peak
