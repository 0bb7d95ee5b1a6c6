"""The element-wise passes over memory of a layer, by operator fusion: named per-layer terms.

Batch norm, bias, activation and residual add read and write whole activations and do a few
FLOPs per element: on a GPU they run at the DRAM roof, so their time is the bytes they move
over the achieved bandwidth (:func:`ddlsim.compute.roofline.memory_Bps`). What they move is
counted here in *passes*: one read or one write of the layer's output activation (its
elements x the element size). The counts follow from the kernels each framework launches
(docs/design.md, "The software stack"):

* ``none`` -- every op its own kernel (PyTorch's eager mode, TensorFlow without XLA): batch
  norm forward = a statistics pass (read x) + a normalising pass (read x, write y): 3; its
  backward = a reduction (read dy, x) + the input gradient (read dy, x, write dx): 5. An
  activation reads its input and writes its output (2); its gradient reads dy and the
  activation's output (ReLU) or input (swish) and writes dx (3). A bias: 2 forward, 1 backward
  (the reduction of dy). A residual add reads both operands and writes the sum (3); in the
  backward pass the block input that fed both branches sums their two gradients (3).
* ``xla`` -- XLA fuses every chain of element-wise ops into one kernel that reads each input
  once and writes each output once; a reduction stays its own pass. Batch norm + [add +]
  activation forward: statistics (1) + one normalise-add-activate pass (read x [and the
  shortcut], write y: 2 [+1]); backward: a reduction (read dy, x and the output the activation's
  mask comes from: 3) + the input gradient (the same three reads, one write: 4 [+1 for the
  shortcut's gradient]); the two gradients of a fan-out are summed inside the kernel that
  writes one of them (+1 read). A bias + activation: one pass each way (2 / 3).
* ``bn-act`` -- cuDNN's fused batch norm + ReLU (+ residual add) kernels (NHWC fp16 only): the
  same counts as ``xla`` for a batch norm followed by a ReLU (and an add); everything else,
  swish included (cuDNN's fused activation is ReLU), and the fan-out sum stay unfused.

Squeeze-excitation (its pooling reduction, the channel scaling and their gradients) and
depthwise convolutions are costed in :mod:`ddlsim.compute.roofline`; this module only says how
many of their epilogue's passes each fusion leaves. DALI's GPU work per image is
:func:`dali_decode_bytes`.
"""

from __future__ import annotations

from ddlsim.workload.layers import Layer, LayerKind

#: (forward, backward) passes of each unfused op over the layer's output
UNFUSED = {
    "batch_norm": (3, 5),
    "bias": (2, 1),
    "activation": (2, 3),
    "residual_add": (3, 3),
}
#: the fused chain batch norm [+ add] + activation: (forward, backward) passes, and what the
#: residual add adds to it (its shortcut read; its gradient written, the fan-out read)
FUSED_BN_ACT = (3, 7)
FUSED_BN = (3, 5)  # batch norm alone in a fused graph: nothing to merge it with
FUSED_ADD_XLA = (1, 2)
FUSED_ADD_CUDNN = (1, 1 + UNFUSED["residual_add"][1])
FUSED_BIAS_ACT = (2, 3)

#: DALI's GPU work per image. Assumed size of an ImageNet-1k training image as decoded: 469 x
#: 387 pixels, the mean resolution usually quoted for the 1.28 M training JPEGs (an assumption,
#: not measured here; the term is a fraction of a percent of a ResNet-50 step, so its error
#: hardly matters). DALI's decoder writes it (RGB, uint8), the random-resized crop reads its
#: share (54% on average: the expected area of torchvision's scale range 0.08..1) and writes
#: 224 x 224 x 3, and crop-mirror-normalize reads that and writes the network's input
DECODED_IMAGE_PIXELS = 469 * 387
RANDOM_RESIZED_CROP_AREA = 0.54
NETWORK_INPUT_PIXELS = 224 * 224


def _has(layer: Layer, names: tuple[str, ...]) -> bool:
    return any(t.name.rsplit("/", 1)[-1] in names for t in layer.tensors)


def has_batch_norm(layer: Layer) -> bool:
    """Whether the layer ends in a batch norm (its ``beta`` / ``gamma`` tensors)."""
    return layer.kind is LayerKind.BATCHNORM or _has(layer, ("beta", "gamma"))


def has_bias(layer: Layer) -> bool:
    """Whether the layer adds a bias (its ``bias`` / ``biases`` tensor)."""
    return layer.kind is not LayerKind.SQUEEZE_EXCITE and _has(layer, ("bias", "biases"))


def epilogue_terms(layer: Layer, fusion: str) -> dict[str, tuple[int, int]]:
    """The element-wise terms of ``layer`` under ``fusion`` (``none``, ``bn-act``, ``xla``):
    term name -> (forward, backward) passes over its output activation. A residual add's
    fusion with the batch norm before it is charged to the add (``residual_add``)."""
    act = layer.activation
    relu = act == "relu"
    bn, bias = has_batch_norm(layer), has_bias(layer)
    if layer.kind is LayerKind.ADD:
        return _add_terms(act, fusion)
    terms: dict[str, tuple[int, int]] = {}
    fuse_act = fusion == "xla" or (fusion == "bn-act" and relu)
    if bn and act is not None and fuse_act:
        terms["batch_norm_activation"] = FUSED_BN_ACT
        return terms
    if bias and act is not None and fusion == "xla":
        terms["bias_activation"] = FUSED_BIAS_ACT
        return terms
    if bn:
        terms["batch_norm"] = UNFUSED["batch_norm"] if fusion == "none" else FUSED_BN
    if bias:
        terms["bias"] = UNFUSED["bias"]
    if act is not None:
        terms["activation"] = UNFUSED["activation"]
    return terms


def _add_terms(act: str | None, fusion: str) -> dict[str, tuple[int, int]]:
    """A residual add [+ activation]: unfused, three passes each way (+ the activation's);
    fused into the batch norm before it (its shortcut read forward; backward, its gradient
    written and the fan-out's sum read inside a kernel (XLA) or as its own kernel (cuDNN)),
    the activation then counted in that batch norm's fused passes."""
    if fusion == "xla":
        return {"residual_add": FUSED_ADD_XLA, **({"activation_mask": (0, 2)} if act else {})}
    if fusion == "bn-act" and act == "relu":
        return {"residual_add": FUSED_ADD_CUDNN, **({"activation_mask": (0, 2)} if act else {})}
    terms = {"residual_add": UNFUSED["residual_add"]}
    if act is not None:
        terms["activation"] = UNFUSED["activation"]
    return terms


def passes(layer: Layer, fusion: str) -> tuple[int, int]:
    """Total (forward, backward) element-wise passes of ``layer`` under ``fusion``."""
    terms = epilogue_terms(layer, fusion).values()
    return sum(f for f, _ in terms), sum(b for _, b in terms)


def dali_decode_bytes(input_elem_bytes: int) -> float:
    """DRAM bytes DALI's GPU pipeline moves per ImageNet image: the decoded RGB image written,
    the random-resized crop reading its share and writing 224 x 224 x 3 (uint8), and
    crop-mirror-normalize reading that and writing the network's input at ``input_elem_bytes``
    per element."""
    decoded = 3.0 * DECODED_IMAGE_PIXELS
    resized = 3.0 * NETWORK_INPUT_PIXELS
    return decoded + RANDOM_RESIZED_CROP_AREA * decoded + resized + resized * (1 + input_elem_bytes)
