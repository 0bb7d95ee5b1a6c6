"""The workload knobs: what is trained (rows of :mod:`ddlsim.config.knobs`)."""

from __future__ import annotations

from ddlsim.calibration.profile import MAX_IMAGES_PER_SEC, MIN_IMAGES_PER_SEC
from ddlsim.calibration.use import DEFAULT_BATCH_PER_GPU
from ddlsim.config.checks import Range, Vocabulary, optional
from ddlsim.config.knob import (
    BATCH_MAX,
    CNNS_ONLY,
    MAX_BATCH,
    MAX_SEQ_LEN,
    TASKS,
    TRANSFORMERS_ONLY,
    WITH_FAILURES,
    Applies,
    Knob,
    fails,
)
from ddlsim.execution.strategy import DATA_KINDS, PRECISIONS
from ddlsim.resilience import config as rc
from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES
from ddlsim.workload.ttt import (
    CHINCHILLA_TOKENS_PER_PARAM,
    DEFAULT_EPOCHS,
    IMAGENET_1K_TRAIN_IMAGES,
    MAX_DATASET_IMAGES,
    MAX_EPOCHS,
    MAX_TRAIN_TOKENS,
)
from ddlsim.workload.zoo import MODEL_NAMES
from ddlsim.workload.zoo.aliases import canonical

_BATCH = Range("batch per GPU", 1, MAX_BATCH, integer=True)


def batch_or_max(value: object) -> None:
    """A batch per GPU in 1..65536, or ``max`` (the largest that fits: transformers)."""
    if value != BATCH_MAX:
        _BATCH(value)


#: the workload group's knobs, in field order
ROWS: tuple[Knob, ...] = (
    Knob(
        "model",
        "workload",
        None,
        "str | None",
        "--model",
        lambda: (
            f"zoo model, CNNs then transformers: {', '.join((*MODEL_NAMES, *TRANSFORMER_NAMES))}, "
            "or a torchvision, timm or Hugging Face name of one (bert-large-uncased, "
            "meta-llama/Meta-Llama-3-8B) (default: the --calibration file's, else resnet50)"
        ),
        check=optional(canonical),
    ),
    Knob(
        "model_config",
        "workload",
        None,
        "str | None",
        "--model-config",
        "a transformer of your own: a JSON (or YAML) file of layers, hidden, heads, kv_heads, "
        "ffn, ffn_kind, vocab, seq_len, norm, position, ... or a Hugging Face config.json as "
        "it is (examples/model_config_plain.json); in place of --model",
        metavar="FILE",
        sweep=False,
    ),
    Knob(
        "batch",
        "workload",
        None,
        "int | str | None",
        "--batch",
        f"mini-batch per GPU (default: the --calibration file's, else {DEFAULT_BATCH_PER_GPU}); "
        "max: a transformer's largest micro-batch whose step fits the GPU's memory",
        check=optional(batch_or_max),
        parse="int-or-max",
        metavar="N|max",
        words={BATCH_MAX: BATCH_MAX},
    ),
    Knob(
        "seq_len",
        "workload",
        None,
        "int | None",
        "--seq-len",
        "tokens per sequence of a transformer (default: the model's: BERT 512, GPT-2 1,024, "
        "MPT 2,048, Llama 3 8,192; at most its learned positions)",
        check=optional(Range("sequence length", 1, MAX_SEQ_LEN, integer=True)),
        parse="int",
        metavar="TOKENS",
    ),
    Knob(
        "task",
        "workload",
        "auto",
        "str",
        "--task",
        "what a transformer is trained for, i.e. its head: mlm (BERT pre-training as its "
        "reference code runs it: logits only at the masked 15%% of positions, gathered first), "
        "span (SQuAD: start and end logits per token; token classification has the same "
        "shape), classify (a classifier on the first token: GLUE) or auto (the model's own "
        "head on every position: an encoder's MLM head as Hugging Face's BertForPreTraining "
        "runs it, a decoder's LM head)",
        check=Vocabulary("task", lambda: TASKS),
        choices=lambda: TASKS,
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "precision",
        "workload",
        None,
        "str | None",
        "--precision",
        "default: the --calibration file's, else fp32",
        check=optional(Vocabulary("precision", lambda: PRECISIONS)),
        choices=lambda: PRECISIONS,
    ),
    Knob(
        "tf32",
        "workload",
        True,
        "bool",
        "--no-tf32",
        "fp32 on a GPU with TF32 tensor cores (a100, h100) as true fp32 "
        "(NVIDIA_TF32_OVERRIDE=0); by default fp32 convolutions run on TF32, as TensorFlow "
        "2.4+ and PyTorch do",
        negate=True,
        applies=Applies(
            lambda c: bool(c.get("tf32_in_play", True)),
            "TF32 is in play only for fp32 on a GPU with TF32 tensor cores (a100, h100)",
            ("gpu", "precision"),
        ),
    ),
    Knob(
        "data",
        "workload",
        "synthetic",
        "str",
        "--data",
        "default: synthetic",
        check=Vocabulary("data", lambda: DATA_KINDS),
        choices=lambda: DATA_KINDS,
    ),
    Knob(
        "calibration",
        "workload",
        None,
        "str | None",
        "--calibration",
        "calibration file; gives the default model, batch, precision and GPU (another "
        "catalog --gpu re-times it by roofline ratios)",
        metavar="FILE",
        sweep=False,
    ),
    Knob(
        "single_gpu_throughput",
        "workload",
        None,
        "float | None",
        "--single-gpu-throughput",
        "scale the compute calibration so that 1 GPU runs at this many images/s",
        check=optional(
            Range(
                "single-GPU throughput",
                MIN_IMAGES_PER_SEC,
                MAX_IMAGES_PER_SEC,
                text=f"a number of images/s in {MIN_IMAGES_PER_SEC:g}..{MAX_IMAGES_PER_SEC:g}",
            )
        ),
        unit="images/s",
        parse="number",
        metavar="IMG_PER_S",
    ),
    Knob(
        "epochs",
        "workload",
        DEFAULT_EPOCHS,
        "float",
        "--epochs",
        f"epochs of a CNN's time-to-train figure (default: {DEFAULT_EPOCHS})",
        check=Range(
            "epochs", 0, MAX_EPOCHS, open_low=True, text=f"a number in (0, {MAX_EPOCHS:g}]"
        ),
        parse="number",
        applies=CNNS_ONLY,
    ),
    Knob(
        "dataset_images",
        "workload",
        IMAGENET_1K_TRAIN_IMAGES,
        "int",
        "--dataset-images",
        f"images per epoch (default: ImageNet-1k, {IMAGENET_1K_TRAIN_IMAGES:,})",
        check=Range(
            "dataset images",
            1,
            MAX_DATASET_IMAGES,
            integer=True,
            text=f"an integer in 1..{MAX_DATASET_IMAGES:.0e}",
        ),
        parse="int",
        applies=CNNS_ONLY,
    ),
    Knob(
        "train_tokens",
        "workload",
        None,
        "float | None",
        "--train-tokens",
        "tokens of a transformer's time-to-train figure (default: "
        f"{CHINCHILLA_TOKENS_PER_PARAM} a parameter, the compute-optimal budget of Hoffmann et "
        "al. 2022)",
        check=optional(
            Range(
                "training tokens",
                0,
                MAX_TRAIN_TOKENS,
                open_low=True,
                text=f"a number in (0, {MAX_TRAIN_TOKENS:g}]",
            )
        ),
        parse="number",
        metavar="TOKENS",
        applies=TRANSFORMERS_ONLY,
    ),
    Knob(
        "optimizer",
        "workload",
        "auto",
        "str",
        "--optimizer",
        "the optimizer: its step (a pass over its state) and its state in memory and in a "
        "checkpoint: sgd 4, momentum 8, adam / adamw / lamb 12 bytes per parameter (default: "
        "auto = momentum for the CNN zoo, adamw for transformers)",
        check=lambda v: rc.check_choice("optimizer", v, ("auto", *rc.OPTIMIZERS)),
        choices=lambda: ("auto", *rc.OPTIMIZERS),
        applies=Applies(
            lambda c: fails(c) and c.get("checkpoint_GB") is None,
            "it sets the checkpoint's size, with failures, unless --checkpoint-GB gives it",
            ("node_mtbf_hours", "checkpoint_GB"),
        ),
        failure=True,
    ),
    Knob(
        "checkpoint_GB",
        "workload",
        None,
        "float | None",
        "--checkpoint-GB",
        "checkpoint size, in place of the model's parameters x bytes per parameter",
        check=optional(
            lambda v: rc.check_range("checkpoint size", v, rc.MIN_CHECKPOINT_GB, 1e9, "GB")
        ),
        unit="GB",
        parse="positive",
        metavar="GB",
        applies=WITH_FAILURES,
        failure=True,
    ),
)
