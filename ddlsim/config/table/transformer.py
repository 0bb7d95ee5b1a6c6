"""The execution knobs of a transformer's step: accumulation, recomputation, attention and
optimizer kernels, CUDA graphs (rows of :mod:`ddlsim.config.knobs`, in the execution group after
:mod:`ddlsim.config.table.execution`)."""

from __future__ import annotations

from ddlsim.config.checks import Range, Vocabulary
from ddlsim.config.knob import (
    ATTENTIONS,
    FLASH_VERSIONS,
    LOSS_KERNELS,
    MAX_GRAD_ACCUM,
    PYTORCH_TRANSFORMERS,
    TRANSFORMERS_ONLY,
    Knob,
)

ROWS: tuple[Knob, ...] = (
    Knob(
        "grad_accum",
        "execution",
        1,
        "int",
        "--grad-accum",
        "micro-steps per optimizer step (gradient accumulation: PyTorch's no_sync, Horovod's "
        "backward_passes_per_step): K forward and backward passes, one gradient exchange, "
        "overlapped with the last backward only (default: 1)",
        check=Range("gradient accumulation steps", 1, MAX_GRAD_ACCUM, integer=True),
        parse="int",
        metavar="K",
    ),
    Knob(
        "activation_checkpointing",
        "execution",
        False,
        "bool",
        "--activation-checkpointing",
        "keep only each transformer block's input and run its forward again before its "
        "backward: one more forward per block, a fraction of the activations' memory",
        switch=True,
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "attention",
        "execution",
        "auto",
        "str",
        "--attention",
        "a transformer's attention kernels: flash (FlashAttention 1 / 2 / 3 by GPU: one fused "
        "kernel, its backward recomputing the scores; fp16 / bf16 on Turing or later), "
        "unfused (two batched GEMMs and the softmax over the b x heads x s^2 scores) or auto "
        "(flash for causal decoders in PyTorch at fp16 / bf16 where the GPU runs it, as "
        "PyTorch 2's scaled_dot_product_attention picks; unfused otherwise)",
        check=Vocabulary("attention", lambda: ATTENTIONS),
        choices=lambda: ATTENTIONS,
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "flash_version",
        "execution",
        "auto",
        "str",
        "--flash-version",
        "the FlashAttention release the attention runs: 1 (flash-attn 1.0), 2 (PyTorch's "
        "scaled_dot_product_attention from 2.2), 3 (Hopper only, a separate install) or auto "
        "(2 where the GPU runs it, 1 on Turing)",
        check=Vocabulary("FlashAttention version", lambda: FLASH_VERSIONS),
        choices=lambda: FLASH_VERSIONS,
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "optimizer_kernels",
        "execution",
        "auto",
        "str",
        "--optimizer-kernels",
        "how a transformer's optimizer step runs: fused (PyTorch's foreach / fused optimizers, "
        "apex's FusedAdam / FusedLAMB: the state read and written once), per-tensor (an "
        "element-wise op per term per variable, as TensorFlow's Python optimizers of BERT's "
        "era: about 156 bytes a parameter for AdamW) or auto (per-tensor for tensorflow, fused "
        "otherwise)",
        check=Vocabulary("optimizer kernels", lambda: ("auto", "fused", "per-tensor")),
        choices=lambda: ("auto", "fused", "per-tensor"),
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "loss_kernel",
        "execution",
        "unfused",
        "str",
        "--loss-kernel",
        "how a transformer's loss over the logits runs: unfused (PyTorch's CrossEntropyLoss "
        "under autocast: the logits cast to fp32, log-softmax and its gradient as separate "
        "passes) or fused (one kernel each way over the half-precision logits: flash-attn's "
        "CrossEntropyLoss, llm-foundry's default fused_crossentropy)",
        check=Vocabulary("loss kernel", lambda: LOSS_KERNELS),
        choices=lambda: LOSS_KERNELS,
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "cuda_graphs",
        "execution",
        False,
        "bool",
        "--cuda-graphs",
        "replay a PyTorch transformer's step as CUDA graphs (torch.cuda.graphs, torch.compile's "
        "reduce-overhead mode, Megatron's and NeMo's CUDA-graph option): one host launch a "
        "step, so no stage waits on the host; off (the default), eager PyTorch dispatches "
        "every op from Python and a stage takes at least its ops x 23 us of host time",
        switch=True,
        applies=PYTORCH_TRANSFORMERS,
    ),
)
