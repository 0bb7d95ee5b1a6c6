"""The measured transformer runs' CSV schema (``traces/measured/README_transformers.md``).

Its rows are read by the measured-runs reader (:func:`ddlsim.tools.validate.runs.load_runs`,
the same lenient rules and coded defects): a header with ``samples_per_sec`` or
``tokens_per_sec`` and no ``images_per_sec`` is this schema. A row becomes a
:class:`~ddlsim.tools.validate.runs.Run` with ``schema`` ``"transformers"``, its ``task``,
``seq_len`` and ``tokens_per_sec``, and in ``images_per_sec`` its samples (sequences) per
second summed over the GPUs: the stated ``samples_per_sec``, else the stated
``tokens_per_sec`` over ``seq_len`` (a relative error of samples/s is the same as that of
tokens/s = samples/s x seq_len). ``gpu`` may be empty (the file's "GPU AMBIGUOUS" rows: the
mapping skips them with the reason); ``scaling_stated`` is not read (the scaling is measured
against the row's 1-GPU baseline, as for CNN rows).
"""

from __future__ import annotations

from collections.abc import Sequence

from ddlsim.calibration.profile import MAX_RUN_IMAGES_PER_SEC, MIN_IMAGES_PER_SEC
from ddlsim.system.catalog_files import MAX_GPUS
from ddlsim.tools.validate.runs import Run, _Cells, shared_cells

SCHEMA = "transformers"
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
#: the longest sequence a row may state (tokens; a million: far beyond the zoo's positions)
MAX_SEQ_LEN = 1 << 20
#: a run's tokens/s: up to the samples/s bound times a thousand-token sequence
MAX_TOKENS_PER_SEC = MAX_RUN_IMAGES_PER_SEC * 1000


def is_transformer_header(header: Sequence[str]) -> bool:
    """Whether a measured-runs header is the transformer schema's."""
    values = {"samples_per_sec", "tokens_per_sec"}
    return "images_per_sec" not in header and bool(values & set(header))


def transformer_run(cells: _Cells, line: int) -> Run:
    """One row of the transformer schema as a :class:`Run` (module docstring)."""
    gpus = cells.integer("gpus", MAX_GPUS, required=True)
    assert gpus is not None
    seq_len = cells.integer("seq_len", MAX_SEQ_LEN)
    samples = cells.number("samples_per_sec", MIN_IMAGES_PER_SEC, MAX_RUN_IMAGES_PER_SEC)
    tokens = cells.number("tokens_per_sec", MIN_IMAGES_PER_SEC, MAX_TOKENS_PER_SEC)
    if samples is None and tokens is not None and seq_len is not None:
        samples = tokens / seq_len
    return Run(
        line=line,
        gpu=cells.text("gpu"),
        gpus=gpus,
        nics_per_node=None,
        n_ps=None,
        images_per_sec=samples,
        scaling_efficiency=None,
        **shared_cells(cells),
        schema=SCHEMA,
        task=cells.text("task"),
        seq_len=seq_len,
        tokens_per_sec=tokens,
    )
