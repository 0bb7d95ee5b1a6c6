"""What a checkpoint holds: the model's weights and its optimizer's state, in bytes per parameter.

A data-parallel replica's training state is the same on every GPU; a checkpoint is one copy of
it. Bytes per trainable parameter (counting as ZeRO, Rajbhandari et al. SC'20, section 3.1,
counts model states, less the gradients, which a checkpoint does not keep):

============  =====  ==========================  ===================================
optimizer     fp32   amp                         what
============  =====  ==========================  ===================================
``sgd``       4      4                           weights
``momentum``  8      8                           weights + velocity (fp32)
``adam``      12     12                          weights + first and second moments
============  =====  ==========================  ===================================

Mixed precision (``amp``) keeps fp32 master weights: TensorFlow's mixed-precision policy and
tf_cnn_benchmarks' ``--use_fp16`` hold the variables in fp32 and cast them to fp16 for each
step, PyTorch's autocast likewise, so the fp16 copies are transient and the checkpoint is the
fp32 one plus the loss scale (a scalar). Frameworks that keep a persistent fp16 copy beside the
masters (Apex O2, Megatron) would add 2 bytes per parameter; that is not modelled. Batch-norm
moving means and variances (non-trainable, checkpointed) are not counted: they are under 0.6%
of the bytes of every zoo model (ResNet-50 0.2%, MobileNet 0.5%). Serialisation overhead
(names, shapes, a few kB) is ignored.
"""

from __future__ import annotations

from ddlsim.errors import ConfigError
from ddlsim.resilience.config import OPTIMIZERS
from ddlsim.workload.zoo import get_model

#: bytes of master weights per parameter (fp32 under both precisions)
WEIGHT_BYTES = 4
#: bytes of optimizer state per parameter (fp32 slots)
OPTIMIZER_STATE_BYTES = {"sgd": 0, "momentum": 4, "adam": 8, "adamw": 8, "lamb": 8}
PRECISIONS = ("fp32", "amp", "bf16", "fp8")
#: what the state holds, for reports
OPTIMIZER_STATE_WORDS = {
    "sgd": "fp32 weights",
    "momentum": "fp32 weights + momentum",
    "adam": "fp32 weights + Adam moments",
    "adamw": "fp32 weights + AdamW moments",
    "lamb": "fp32 weights + LAMB moments",
}


def bytes_per_param(optimizer: str, precision: str) -> int:
    """Checkpoint bytes per trainable parameter for ``optimizer`` at ``precision``."""
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return WEIGHT_BYTES + OPTIMIZER_STATE_BYTES[optimizer]


def checkpoint_bytes(model: str, precision: str, optimizer: str) -> int:
    """Bytes of one checkpoint of zoo ``model`` trained at ``precision`` with ``optimizer``."""
    return get_model(model).n_params * bytes_per_param(optimizer, precision)
