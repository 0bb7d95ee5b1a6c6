"""The report's transformer section: tokens/s, MFU and HFU, the numerics, and the memory per
GPU by part (:func:`ddlsim.api.predict`'s ``inputs["transformer"]``)."""

from __future__ import annotations

from typing import Any

from ddlsim.compute.transformer_terms import COMPUTE_TERMS

#: the memory parts in the report's order, with their words
MEMORY_PARTS = (
    ("params_GB", "weights"),
    ("grads_GB", "gradients"),
    ("optimizer_GB", "optimizer state"),
    ("buffers_GB", "exchange buffers"),
    ("activations_GB", "activations"),
    ("logits_GB", "logits"),
    ("reserve_GB", "reserve (context, workspaces; assumed)"),
)


#: how the kernels reach the GPU (:data:`ddlsim.compute.dispatch.DISPATCHES`), in words
DISPATCH_WORDS = {
    "eager": "eager dispatch",
    "cuda-graphs": "CUDA graphs",
    "graph-executor": "graph executor",
    "engine": "dependency engine",
    "xla": "XLA",
}


def _dispatch_words(n: dict[str, Any]) -> str:
    """``, eager dispatch (GPU waits on the host 43 % of forward and backward)``: how the
    kernels are dispatched and, under a host floor (PyTorch's eager mode, TensorFlow's graph
    executor), the share of the forward and backward the GPU waits on the host."""
    dispatch = n.get("dispatch")
    if dispatch not in DISPATCH_WORDS:
        return ""
    bound = n.get("host_bound_fraction") or 0.0
    share = (
        f" (GPU waits on the host {100 * bound:.0f} % of forward and backward)"
        if bound >= 0.005
        else ""
    )
    return f", {DISPATCH_WORDS[dispatch]}{share}"


def transformer_lines(inputs: dict[str, Any]) -> list[str]:
    """The section's lines (none for a CNN)."""
    t = inputs.get("transformer")
    if not t:
        return []
    n = t["numerics"]
    attention = "unfused attention"
    if n.get("flash_attention"):
        version = n.get("flash_version")
        attention = f"FlashAttention {version}" if version else "FlashAttention"
    mem = t["memory"]
    fitted = t.get("micro_batch_fitted")
    lines = [
        "",
        f"  transformer     {t['params'] / 1e6:,.1f} M parameters, sequence {t['seq_len']:,}",
        f"    tokens/s      {t['tokens_per_sec']:,.0f}   (micro-batch {t['micro_batch']} x "
        f"{t['grad_accum']} micro-step(s) per optimizer step)",
        f"    MFU           {100 * t['mfu']:.1f} %   (6N + 12·L·d·s FLOPs per token; HFU "
        f"{100 * t['hfu']:.1f} %)",
        f"    numerics      GEMMs {n.get('gemm_precision')}, activations "
        f"{n.get('pass_precision')}, {attention}"
        + (", activation checkpointing" if n.get("activation_checkpointing") else "")
        + (", fused loss" if n.get("fused_loss") else "")
        + _dispatch_words(n),
        f"    optimizer     {t['optimizer']}",
        f"    memory / GPU  {mem['total_GB']:.1f} GB of {mem['capacity_GB']:.1f} GB",
    ]
    if fitted:
        fit = f"    micro-batch   {t['micro_batch']}: the largest that fits (--batch max)"
        lines.insert(3, fit)
    lines += [f"      {words:<40}{mem[key]:8.2f} GB" for key, words in MEMORY_PARTS]
    if "host_per_node_GB" in mem:  # a CPU offload's state in host memory
        cap = mem["host_capacity_GB"]
        of = f" of {cap:,.0f} GB" if cap is not None else " (the node's DRAM is not catalogued)"
        lines.append(f"    host / node   {mem['host_per_node_GB']:,.1f} GB{of} (CPU offload)")
    return lines + compute_lines(t.get("compute_terms_s") or {})


def compute_lines(terms: dict[str, float]) -> list[str]:
    """One GPU's compute of an optimizer step by term, each with its share (the terms that
    take no time left out)."""
    total = sum(terms.values())
    if total <= 0:
        return []
    lines = [f"    compute / GPU {1e3 * total:,.2f} ms an optimizer step, by term (before "
             "contention and communication)"]  # fmt: skip
    for key, words in COMPUTE_TERMS:
        value = terms.get(key, 0.0)
        if round(1e3 * value, 2) > 0:  # a term that takes time at the report's precision
            lines.append(f"      {words:<40}{1e3 * value:8.2f} ms {100 * value / total:5.1f} %")
    return lines
