"""The host input pipeline of real-data runs: what decoding and augmenting a batch costs the
host's cores, and the host's communication work that competes with it (docs/design.md, "Input
pipeline").

- **Per-image cost by preprocessing kind.** One core spends ``t(kind, pixels)`` CPU seconds per
  ImageNet JPEG: the decode plus the kind's crop, resize, flip and augmentation at the model's
  input size. Measured on this project's development machine by
  ``scripts/measure_input_pipeline.py`` (``traces/input/pipeline.json``: AMD EPYC, 2.6 GHz, one
  core, CPU time, ImageNet-sized JPEGs) at a 224 x 224 and a 380 x 380 crop; other sizes are
  interpolated (or extrapolated) linearly in the crop's pixels and never fall below the decode
  alone. The kinds: ``crop-flip`` (ResNet-style random-resized crop and flip: torchvision's PIL
  transform; TensorFlow's decode-and-crop is cheaper, 1.9 ms), ``inception`` (the same plus
  Inception's colour distortions in float: tf_cnn_benchmarks' ``--distortions``,
  preprocessing.py ``train_image`` / ``distort_color``), ``autoaugment`` (crop-flip plus one
  AutoAugment ImageNet sub-policy, EfficientNet's recipe).
- **The level: the reference pipeline's rate per hardware thread.** This machine's core is not
  the measured runs' hosts' (a 2.6 GHz EPYC core here decodes crop-flip at 405 images/s; the
  Broadwell hosts of the input-bound measured rows deliver ~100 per hardware thread), and the
  catalog states no host clock, so the measurement gives each kind's and size's cost *relative*
  to crop-flip at 224 x 224, and a hardware thread of the catalog's hosts runs crop-flip at 224
  at :data:`REFERENCE_IMAGES_PER_S_PER_THREAD` (100: the rate the input-bound rows of DGX-1
  class hosts imply, 7,105-7,887 images/s on 80 threads). Inception's distortions then cost
  1.2 x crop-flip (83 images/s a thread), AutoAugment 1.08 x, EfficientNet-B4's 380 x 380
  AutoAugment 1.6 x.
- **A per-process cap.** A training process decodes with its own workers (PyTorch's DataLoader
  ``num_workers``, a tf.data pipeline's parallel calls): with ``workers`` given, a node's
  processes use at most processes x workers hardware threads. Unset, the node's threads are
  shared out.
- **Host communication competes for the cores** (issue 32 item 6, the CPU-worker no-overlap
  rule extended): a method whose exchange runs on the host (MPI, Gloo, gRPC, BytePS's servers,
  TensorFlow's CPU aggregation, NCCL's socket proxy) keeps one thread per GPU's stream busy while
  it runs, so a host that is decoding does that work instead of decoding: the host's time per
  batch is (decode thread-seconds + k x exchange time) / threads. When the GPUs are faster than
  the host this adds to the step; otherwise the pipeline still runs ahead and it costs nothing.
"""

from __future__ import annotations

from ddlsim.errors import ConfigError

#: preprocessing kinds (``--preprocessing``; ``auto``: by model family)
PREPROCESSING_KINDS = ("crop-flip", "inception", "autoaugment")
PREPROCESSING_CHOICES = ("auto", *PREPROCESSING_KINDS)

#: CPU seconds one core spends per image at a 224 x 224 and a 380 x 380 crop
#: (traces/input/pipeline.json: crop-flip@224/380, inception@224/380, autoaugment@224/380)
CORE_S_PER_IMAGE: dict[str, tuple[float, float]] = {
    "crop-flip": (2.471e-3, 3.066e-3),
    "inception": (2.973e-3, 5.253e-3),
    "autoaugment": (2.662e-3, 3.936e-3),
}
#: the JPEG decode alone (traces/input/pipeline.json: decode), the floor of every kind
DECODE_CORE_S = 1.674e-3
_PIXELS = (224 * 224, 380 * 380)
#: images/s one hardware thread of the catalog's hosts decodes with crop-flip at 224 x 224
REFERENCE_IMAGES_PER_S_PER_THREAD = 100.0
#: exchange methods whose work runs on the host's cores (the rest run NCCL on the GPUs)
HOST_COMM_METHODS = (
    "horovod-mpi",
    "horovod-gloo",
    "ps",
    "distributed-replicated",
    "replicated-cpu",
    "byteps",
)
#: methods one process per node runs (TensorFlow's in-graph replication drives every GPU)
SINGLE_PROCESS_METHODS = ("ps", "replicated-nccl", "replicated-cpu", "distributed-replicated")


def image_pixels(input_shape: tuple[int, ...]) -> int:
    """The crop's pixels of a model reading (H, W, 3) images; a model whose input is not an
    image (a transformer's tokens) is charged the reference crop, 224 x 224."""
    if len(input_shape) == 3 and input_shape[2] == 3:
        return input_shape[0] * input_shape[1]
    return _PIXELS[0]


def preprocessing_kind(choice: str, model: str) -> str:
    """``choice``, or for ``auto`` the model family's: AutoAugment for the EfficientNets
    (their published recipes), crop-and-flip otherwise."""
    if choice != "auto":
        return choice
    return "autoaugment" if model.startswith("efficientnet") else "crop-flip"


def core_seconds_per_image(kind: str, pixels: float) -> float:
    """CPU seconds one core spends on one image of ``kind`` cropped to ``pixels``: linear in
    the crop's pixels through the two measured sizes, never below the decode alone."""
    if kind not in CORE_S_PER_IMAGE:
        raise ConfigError(
            f"unknown preprocessing {kind!r}: one of {', '.join(PREPROCESSING_KINDS)}"
        )
    if pixels <= 0:
        raise ConfigError(f"input pixels must be > 0, got {pixels!r}")
    small, large = CORE_S_PER_IMAGE[kind]
    slope = (large - small) / (_PIXELS[1] - _PIXELS[0])
    return max(DECODE_CORE_S, small + slope * (pixels - _PIXELS[0]))


def thread_seconds_per_image(kind: str, pixels: float) -> float:
    """Seconds one hardware thread of a catalog host spends on one image of ``kind`` at
    ``pixels``: the reference rate scaled by the measured cost relative to crop-flip at 224."""
    relative = core_seconds_per_image(kind, pixels) / CORE_S_PER_IMAGE["crop-flip"][0]
    return relative / REFERENCE_IMAGES_PER_S_PER_THREAD


def decode_threads(host_threads: int, processes: int, workers: int | None) -> int:
    """Hardware threads a node decodes on: all, at most ``processes`` x ``workers``."""
    return host_threads if workers is None else min(host_threads, processes * workers)


def processes_per_node(comm: str, local_gpus: int) -> int:
    """Training processes on a node: one for TensorFlow's in-graph methods, else one per GPU."""
    return 1 if comm in SINGLE_PROCESS_METHODS else local_gpus


def host_comm_threads(comm: str, transport: str, multi_node: bool, local_gpus: int) -> int:
    """Host cores a node's exchange keeps busy while it runs: one per GPU's stream for a
    method on the host, and for NCCL over TCP between nodes (its proxy thread); else none."""
    on_host = comm in HOST_COMM_METHODS or (multi_node and transport == "tcp")
    return local_gpus if on_host else 0


def host_batch_s(
    images: int, thread_s: float, threads: int, comm_threads: int = 0, comm_s: float = 0.0
) -> float:
    """Seconds a node's host needs per batch of ``images``: their decode thread-seconds plus
    the exchange's (``comm_threads`` threads for ``comm_s``), over ``threads``."""
    if threads < 1:
        raise ConfigError(f"the host needs at least one thread to decode, got {threads}")
    return (images * thread_s + comm_threads * comm_s) / threads
