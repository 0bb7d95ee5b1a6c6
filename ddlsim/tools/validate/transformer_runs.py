"""The measured transformer runs' CSV schema (``traces/measured/README_transformers.md``).

Its rows are read by the measured-runs reader (:func:`ddlsim.tools.validate.runs.load_runs`,
the same lenient rules and coded defects): a header with ``samples_per_sec`` or
``tokens_per_sec`` and no ``images_per_sec`` is this schema (its row builder lives beside the
CNN schema's in :mod:`~ddlsim.tools.validate.runs`, which reads both). A row becomes a
:class:`~ddlsim.tools.validate.runs.Run` with ``schema`` ``"transformers"``, its ``task``,
``seq_len`` and ``tokens_per_sec``, and in ``images_per_sec`` its samples (sequences) per
second summed over the GPUs: the stated ``samples_per_sec``, else the stated
``tokens_per_sec`` over ``seq_len`` (a relative error of samples/s is the same as that of
tokens/s = samples/s x seq_len). ``gpu`` may be empty (the file's "GPU AMBIGUOUS" rows: the
mapping skips them with the reason); ``scaling_stated`` is not read (the scaling is measured
against the row's 1-GPU baseline, as for CNN rows).
"""

from __future__ import annotations

from ddlsim.tools.validate.runs import TRANSFORMERS, is_transformer_header, transformer_run

__all__ = ["COLUMNS", "SCHEMA", "is_transformer_header", "transformer_run"]

SCHEMA = TRANSFORMERS
#: the schema's columns, in file order
COLUMNS: tuple[str, ...] = (
    "run_id",
    "source_id",
    "model",
    "task",
    "seq_len",
    "gpu",
    "gpus",
    "gpus_per_node",
    "intra_node",
    "inter_node",
    "transport",
    "comm",
    "variant",
    "framework",
    "batch_per_gpu",
    "precision",
    "data",
    "samples_per_sec",
    "tokens_per_sec",
    "scaling_stated",
    "from_figure",
    "note",
)
