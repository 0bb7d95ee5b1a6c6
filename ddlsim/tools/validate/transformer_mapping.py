"""One measured transformer row and its baseline -> keyword arguments of :func:`ddlsim.predict`.

The row schema is ``traces/measured/README_transformers.md``
(:mod:`~ddlsim.tools.validate.transformer_runs`); the decisions shared with CNN rows
(:mod:`~ddlsim.tools.validate.mapping`: SUSPECT rows, baselines, ``--absolute``, the network
assumption) hold. What is the transformer schema's own:

- ``comm``: ``single`` (or 1 GPU) exchanges nothing; ``horovod-nccl`` and ``ddp`` are
  modelled; ``other`` is predicted as ``ddp`` where the note names a flat all-reduce
  (:data:`FLAT_ALLREDUCE`: Paddle Fleet's NCCL collective, DeepSpeed ZeRO stage 0), else
  skipped (``comm-not-modelled``); ``fsdp`` and ``zero1`` rows are skipped (``sharded``:
  sharded data parallelism is not modelled yet).
- ``precision`` ``amp`` is fp16 mixed precision, ``bf16`` where the variant says ``bf16``,
  fp8 GEMMs where it says ``fp8``; ``fp32`` runs TF32 math where the variant says ``tf32``,
  true fp32 otherwise. A combination the GPU cannot run (bf16 before Ampere, fp8 before
  Hopper, TF32 or FlashAttention on Volta) is skipped (``not-runnable``).
- ``variant``: ``grad-accum-N`` -> ``grad_accum=N``, ``act-ckpt`` ->
  ``activation_checkpointing``, ``flash-attn`` -> ``attention="flash"`` (else the unfused
  kernels), ``lamb`` -> ``optimizer="lamb"`` (else AdamW), ``xla`` -> ``fusion="xla"``; the
  others (``pre-ln``, ``dle-fork``, ``ngc-examples``, ...) are listed in the notes.
- ``task`` -> ``--task`` (:func:`task_of`): ``squad`` and ``ner`` put a few logits on every
  token (``span``), ``glue-*`` a classifier (``classify``); BERT pre-training in TensorFlow
  and Paddle gathers the masked positions (``mlm``: google-research/bert's
  ``run_pretraining.py``, PaddleNLP's ``BertPretrainingHeads`` with ``masked_positions``),
  while PyTorch's DLE BERT of the file's era scores every position (``auto``).
- ``framework``: ``tensorflow2`` is TensorFlow; a framework with no modelled stack
  (``paddle``) is skipped by ``--absolute`` (``framework-not-modelled``).
- An empty ``gpu`` (the source contradicts itself on it) skips the row (``gpu-ambiguous``);
  an empty ``seq_len`` (variable-length batches) too (``no-seq-len``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ddlsim.compute.gemm import check_precision
from ddlsim.compute.stack import FRAMEWORKS, UNMODELLED_FRAMEWORKS
from ddlsim.compute.transformer_ops import flash_version
from ddlsim.errors import DdlsimError, UnknownNameError
from ddlsim.execution.strategy import COMM_METHODS
from ddlsim.system import catalog
from ddlsim.tools.validate.baseline import BaselineIndex
from ddlsim.tools.validate.mapping import (
    _CATALOG_NAMES,
    METRIC_IPS,
    SUSPECT,
    UNKNOWN_NAME,
    RowPlan,
    _skip,
    assume_network,
    cluster_kwargs,
)
from ddlsim.tools.validate.options import ValidateOptions
from ddlsim.tools.validate.runs import Run
from ddlsim.workload.zoo.aliases import canonical

#: a RoCE row's per-node rate as its source states it (llm-foundry: "1600 Gbps node-node
#: interconnect (RoCE)"), carried by 200 GbE NICs (the 8 x 200 Gb/s of an A100 server)
ROCE_RATE = re.compile(r"(\d+)\s*Gbps node-node interconnect \(RoCE\)")
ROCE_NIC_GBPS = 200
#: the FlashAttention release a source's runs used, where the source's stack fixes it:
#: llm-foundry's benchmark tables (2023-07, 2024-01) ran its ``gpu`` install extra, flash-attn
#: 1.0.x (FlashAttention 2 was the opt-in ``gpu-flash2`` extra); their attention cost bears it
#: out: about 150-165 TFLOP/s (6N + 12·L·d·s convention) on A100 and 245-290 on H100, the rates
#: of FlashAttention 1, half those of FlashAttention 2 on A100 (docs/design.md)
FLASH_VERSION_OF_SOURCE = {"MOSAIC_LLMF_2307": "1", "MOSAIC_LLMF_2401": "1"}
#: the loss kernel a source's stack runs: llm-foundry's MPT defaults ``loss_fn`` to
#: ``fused_crossentropy``, flash-attn's fused CrossEntropyLoss (``llmfoundry/models/mpt/
#: modeling_mpt.py``, ``om_model_config.get('loss_fn', 'fused_crossentropy')``, in 0.2.0 of
#: 2023-07 and 0.4.0 of 2023-12 alike)
LOSS_KERNEL_OF_SOURCE = {"MOSAIC_LLMF_2307": "fused", "MOSAIC_LLMF_2401": "fused"}
#: GPUs on one HGX / DGX baseboard (the node a multi-node row's GPUs fill when unstated)
BOARD_GPUS = 8
#: what a note says of an ``other`` row whose exchange is one flat all-reduce of the gradients
FLAT_ALLREDUCE = ("Paddle Fleet collective", "ZeRO stage 0", "flat all-reduce", "flat-gradient")
#: framework column spellings -> predict's framework
FRAMEWORK_NAMES = {"tensorflow2": "tensorflow"}
#: variant tokens -> predict keywords (``grad-accum-N`` is read apart)
VARIANT_OPTIONS: dict[str, dict[str, Any]] = {
    "act-ckpt": {"activation_checkpointing": True},
    "flash-attn": {"attention": "flash"},
    "lamb": {"optimizer": "lamb"},
    "xla": {"fusion": "xla"},
    "tf32": {"tf32": True},
    "bf16": {},
    "fp8": {},
    "full_shard": {"sharding": "full_shard"},
    "shard_grad_op": {"sharding": "shard_grad_op"},
    "fsdp-mp-pure": {"fsdp_precision": "pure"},
}
GRAD_ACCUM = "grad-accum-"


def _row_skip(run: Run, options: ValidateOptions) -> RowPlan | None:
    """The reason a row is not predicted before its mapping (names, flags, kind), or None."""
    if not run.gpu:
        return _skip("gpu-ambiguous", "gpu empty: the source contradicts itself on the GPU")
    try:
        canonical(run.model)
    except UnknownNameError as exc:
        return RowPlan(None, code=UNKNOWN_NAME, reason=f"column 'model': {exc}", column="model")
    for column, lookup in _CATALOG_NAMES.items():
        value = getattr(run, column)
        if column == "inter_node" and _stated_roce(run):
            continue  # read from the note (_stated_roce)
        if value and value != "none":
            try:
                lookup(value)
            except UnknownNameError as exc:
                reason = f"column {column!r}: {exc}"
                return RowPlan(None, code=UNKNOWN_NAME, reason=reason, column=column, value=value)
    framework = FRAMEWORK_NAMES.get(run.framework, run.framework)
    if framework and framework not in (*FRAMEWORKS, *UNMODELLED_FRAMEWORKS):
        reason = f"column 'framework': unknown framework {run.framework!r}"
        return RowPlan(None, code=UNKNOWN_NAME, reason=reason, column="framework")
    if SUSPECT in run.note:
        return _skip("suspect", "the file flags the row SUSPECT (see its note)")
    if run.is_single_gpu and not options.absolute:
        return _skip("baseline-row", "single-GPU row (a baseline; nothing to scale)")
    if options.absolute and framework in UNMODELLED_FRAMEWORKS:
        return _skip(
            "framework-not-modelled",
            f"framework {run.framework!r} has no modelled software stack (--absolute)",
        )
    if run.seq_len is None:
        return _skip("no-seq-len", "seq_len not stated (variable-length batches)")
    if run.images_per_sec is None:
        return _skip("no-value", "neither samples_per_sec nor tokens_per_sec is stated")
    if run.batch_per_gpu is None:
        return _skip("no-batch", "batch_per_gpu not stated (ddlsim needs the micro-batch)")
    return None


def _comm(run: Run) -> tuple[str | None, str]:
    """predict's method for the row (None: not modelled) and a note."""
    if run.is_single_gpu:  # no exchange: a method of the row's framework (ddp is PyTorch's)
        return ("ddp" if run.framework == "pytorch" else "horovod-nccl"), ""
    if run.comm == "other":
        if any(marker in run.note for marker in FLAT_ALLREDUCE):
            return "ddp", "comm 'other': a flat all-reduce of the gradients, predicted as ddp"
        return None, "comm 'other': the note names no flat all-reduce"
    if run.comm in COMM_METHODS:
        return run.comm, ""
    return None, f"comm {run.comm or '(empty)'!r} is not a modelled method"


#: frameworks whose BERT pre-training scripts gather the masked positions before the head
GATHERING_FRAMEWORKS = ("tensorflow", "tensorflow2", "paddle")


def task_of(run: Run) -> str:
    """The ``--task`` of a row's ``task`` column (module docstring)."""
    task = (run.task or "").lower()
    if task in ("squad", "ner"):
        return "span"
    if task.startswith("glue"):
        return "classify"
    if task.startswith("pretrain") and run.framework in GATHERING_FRAMEWORKS:
        return "mlm"
    return "auto"


def numerics_kwargs(run: Run) -> tuple[dict[str, Any], list[str]]:
    """predict's precision, attention, optimizer, fusion, accumulation and checkpointing
    keywords of the row's ``precision`` and ``variant``, and the tokens left unmapped."""
    kwargs: dict[str, Any] = {"attention": "unfused", "optimizer": "adamw", "grad_accum": 1}
    precision = run.precision
    if precision == "amp" and "bf16" in run.variant:
        precision = "bf16"
    elif precision == "amp" and "fp8" in run.variant:
        precision = "fp8"
    kwargs["precision"] = precision
    if precision == "fp32":
        kwargs["tf32"] = False
    unmapped = []
    for token in run.variant:
        if token.startswith(GRAD_ACCUM) and token[len(GRAD_ACCUM) :].isdigit():
            kwargs["grad_accum"] = int(token[len(GRAD_ACCUM) :])
        elif token in VARIANT_OPTIONS:
            kwargs.update(VARIANT_OPTIONS[token])
        else:
            unmapped.append(token)
    return kwargs, unmapped


def _not_runnable(run: Run, kwargs: dict[str, Any]) -> str | None:
    """Why the row's GPU cannot run its numerics, or None."""
    device = catalog.device(run.gpu)
    precision = kwargs["precision"]
    if kwargs.get("tf32") and device.peak_tf32_flops is None:
        return f"variant 'tf32': GPU {run.gpu!r} has no TF32 tensor cores"
    gemm = {"amp": "fp16", "fp32": "fp32"}.get(precision, precision)
    try:
        check_precision(device, gemm)
        if kwargs["attention"] == "flash":
            if precision == "fp32":
                return "variant 'flash-attn': FlashAttention runs fp16 / bf16, the row is fp32"
            flash_version(device)
    except DdlsimError as exc:
        return str(exc)
    return None


def _stated_roce(run: Run) -> dict[str, Any]:
    """A ``roce`` row's network as its note states it: the per-node rate over 200 GbE NICs
    with RDMA (nothing for other rows)."""
    match = ROCE_RATE.search(run.note) if run.inter_node == "roce" else None
    if match is None:
        return {}
    nics = max(1, int(match[1]) // ROCE_NIC_GBPS)
    return {"inter_node": "200gbe", "nics_per_node": nics, "transport": "rdma"}


def plan_transformer_row(run: Run, index: BaselineIndex, options: ValidateOptions) -> RowPlan:
    """Map a transformer row onto predict's keyword arguments, or say why it cannot be."""
    skip = _row_skip(run, options)
    if skip is not None:
        return skip
    comm, comm_note = _comm(run)
    if comm is None:
        return _skip("comm-not-modelled", comm_note)
    board_note = ""
    if run.gpus_per_node is None and run.gpus > BOARD_GPUS:  # spans nodes, their size unstated
        run = replace(run, gpus_per_node=BOARD_GPUS)
        board_note = (
            f"gpus_per_node not stated: {BOARD_GPUS} assumed (an HGX / DGX board holds at most "
            f"{BOARD_GPUS} GPUs, so {run.gpus} span nodes)"
        )
    if not run.intra_node and run.gpus_per_node == 16 and run.gpu.startswith("v100"):
        run = replace(run, intra_node="nvswitch", gpu="v100-sxm3")  # the 16-V100 board
        board_note = (
            "GPU and intra_node not stated: 16 V100 in one node are a DGX-2 / HGX-2 (32 GB "
            "V100 SXM3 on NVSwitch)"
        )
    network = assume_network(run, options)
    if isinstance(network, RowPlan):
        return network
    run, network_assumed = network
    notes = [n for n in (comm_note, board_note, network_assumed) if n]
    numerics, unmapped = numerics_kwargs(run)
    problem = _not_runnable(run, numerics)
    if problem is not None:
        return _skip("not-runnable", problem)
    baseline = None
    if options.absolute:
        notes.append("compute not anchored: ddlsim's own per-layer model (--absolute)")
    else:
        choice = index.choose(run)
        if choice.run is None:
            return _skip(choice.code, choice.reason)
        baseline = choice.run
        if SUSPECT in baseline.note:
            reason = f"its baseline {baseline.run_id} is flagged SUSPECT by the file"
            return _skip("suspect-baseline", reason, baseline)
    if unmapped:
        notes.append(f"variant not mapped: {', '.join(unmapped)}")
    if "flash-attn" in run.variant and run.source_id in FLASH_VERSION_OF_SOURCE:
        numerics["flash_version"] = FLASH_VERSION_OF_SOURCE[run.source_id]
    if run.source_id in LOSS_KERNEL_OF_SOURCE and run.precision != "fp32":
        numerics["loss_kernel"] = LOSS_KERNEL_OF_SOURCE[run.source_id]
    if comm == "fsdp" and "fsdp-mp-pure" not in run.variant:
        numerics["fsdp_precision"] = "default"  # Composer's preset, the tables' MP DEFAULT
    if comm != "fsdp":
        numerics.pop("sharding", None)
        numerics.pop("fsdp_precision", None)
    framework = FRAMEWORK_NAMES.get(run.framework, run.framework)
    kwargs = cluster_kwargs(run, comm, baseline, options)
    kwargs.update(_stated_roce(run))
    kwargs.update(model=canonical(run.model), batch=run.batch_per_gpu, seq_len=run.seq_len)
    kwargs.update(numerics)
    task = task_of(run)
    if task != "auto":
        kwargs["task"] = task
    if framework in FRAMEWORKS:  # else predict's default stack (the anchor carries the speed)
        kwargs["framework"] = framework
    return RowPlan(
        kwargs,
        METRIC_IPS,
        baseline,
        tuple(notes),
        anchored=baseline is not None,
        assumption=network_assumed,
    )
