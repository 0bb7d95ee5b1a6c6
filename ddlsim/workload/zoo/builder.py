"""Builder that turns a tf_cnn_benchmarks-style network definition into :class:`Layer` records.

It plays the role of tf_cnn_benchmarks' ``ConvNetBuilder``: it tracks the current activation
(its per-sample shape ``(H, W, C)`` or ``(N,)`` once flattened) and appends one :class:`Layer` per
builder call, with that layer's trainable tensors, FLOPs and activation sizes. Scope and counter
names follow tf_cnn_benchmarks (``conv{N}``, ``affine{N}``, ``mpool{N}``, ``batchnorm{N}`` with
one global counter per op kind), so tensor paths read like its variables:
``conv3/conv2d/kernel``, ``conv3/batchnorm3/beta``, ``affine0/weights``.

FLOP accounting (per sample; a multiply-add counts 2):

* conv / fc: ``2·k_h·k_w·c_in·H_out·W_out·c_out`` (fc: ``2·n_in·n_out``; a convolution in ``g``
  groups: ``c_in/g`` in place of ``c_in``; depthwise: ``2·k_h·k_w·H_out·W_out·c_out``); backward
  is twice that (gradient wrt input and wrt weights), once only where no gradient flows into
  the layer's input (the first layer, fed by the image);
* squeeze-excitation: its two affine layers as fc, plus the pooling, sigmoid and channel
  scaling as element-wise costs (:meth:`NetBuilder.squeeze_excitation`);
* epilogues and element-wise layers cost the ``*_FLOPS_PER_ELEM`` constants of
  :mod:`~ddlsim.workload.zoo.core` per output element, and the same again in the backward pass;
  pooling costs one FLOP per window element.

These element-wise costs are round approximations; the matmul FLOPs are exact for the
definition. Branching (inception) is done with :attr:`NetBuilder.top` and :meth:`concat`, see
:mod:`ddlsim.workload.zoo.inception_blocks`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddlsim.workload.layers import GradTensor, LayerKind
from ddlsim.workload.zoo.core import (
    ACTIVATION_FLOPS_PER_ELEM,
    ACTIVATIONS,
    ADD_FLOPS_PER_ELEM,
    BIAS_FLOPS_PER_ELEM,
    BN_FLOPS_PER_ELEM,
    DROPOUT_FLOPS_PER_ELEM,
    LRN_FLOPS_PER_WINDOW_ELEM,
    NUM_CLASSES,
    RELU_FLOPS_PER_ELEM,
    SIGMOID_FLOPS_PER_ELEM,
    SOFTMAX_XENT_FLOPS_PER_CLASS,
    Activation,
    BuilderCore,
    conv_out_size,
)

__all__ = ["Activation", "NetBuilder", "conv_out_size"]


class NetBuilder(BuilderCore):
    """Appends layers to a network, one per call, tracking the current activation ``top``.

    ``batch_norm`` / ``bn_scale`` (constructor) are the defaults for :meth:`conv`
    (tf_cnn_benchmarks' ``use_batch_norm`` and ``batch_norm_config['scale']``).
    """

    # -- weighted layers ----------------------------------------------------------------------
    def _epilogue(
        self, path: str, ch: int, elems: int, bias: bool, bn: bool, scale: bool, act: str | None
    ) -> tuple[list[GradTensor], int]:
        """Bias or batch norm, then activation: their tensors and per-sample FLOPs."""
        if act not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {act!r}")
        tensors: list[GradTensor] = []
        flops = 0
        if bn:
            bn_path = f"{path}/{self.next_name('batchnorm')}"
            tensors.append(GradTensor(f"{bn_path}/beta", (ch,)))
            if scale:
                tensors.append(GradTensor(f"{bn_path}/gamma", (ch,)))
            flops += (BN_FLOPS_PER_ELEM + len(tensors)) * elems
        elif bias:
            tensors.append(GradTensor(f"{path}/biases", (ch,)))
            flops += BIAS_FLOPS_PER_ELEM * elems
        flops += ACTIVATION_FLOPS_PER_ELEM[act] * elems
        return tensors, flops

    def _weighted(
        self,
        kind: LayerKind,
        path: str,
        kernel: GradTensor,
        macs: int,
        out_shape: tuple[int, ...],
        epilogue: tuple[list[GradTensor], int],
        stride: int = 1,
        activation: str | None = None,
    ) -> Activation:
        extra, epi_flops = epilogue
        matmul_flops = 2 * macs
        bwd_matmul = (2 if self.top.needs_grad else 1) * matmul_flops
        return self._add(
            path,
            kind,
            [kernel, *extra],
            matmul_flops + epi_flops,
            bwd_matmul + epi_flops,
            self.top.elems,
            out_shape,
            needs_grad=True,
            stride=stride,
            input_shape=self.top.shape,
            activation=activation,
        )

    def conv(
        self,
        out_ch: int,
        k_h: int,
        k_w: int,
        stride: int = 1,
        padding: str = "SAME",
        *,
        groups: int = 1,
        bias: bool | None = None,
        batch_norm: bool | None = None,
        bn_scale: bool | None = None,
        activation: str | None = "relu",
        name: str | None = None,
    ) -> Activation:
        """Convolution + (bias | batch norm) + activation, one CONV layer (``conv{N}``).

        A bias is added when there is no batch norm unless ``bias=False`` (tf_cnn_benchmarks'
        ``bias=None``); with batch norm ``bias`` is ignored, as in tf_cnn_benchmarks.
        ``batch_norm`` / ``bn_scale`` default to the builder's settings; ``name`` overrides the
        counter-generated scope name. ``groups > 1`` makes a GROUPED_CONV layer: input and
        output channels split into ``groups`` independent convolutions (kernel
        ``[k_h, k_w, c_in/groups, out_ch]``, TensorFlow's and Keras' layout).
        """
        h, w, c_in = self._spatial()
        if groups < 1 or c_in % groups or out_ch % groups:
            raise ValueError(
                f"groups={groups} must divide {c_in} input and {out_ch} output channels"
            )
        bn = self.use_batch_norm if batch_norm is None else batch_norm
        scale = self.bn_scale if bn_scale is None else bn_scale
        h_out, w_out = (
            conv_out_size(h, k_h, stride, padding),
            conv_out_size(w, k_w, stride, padding),
        )
        out_elems = h_out * w_out * out_ch
        path = self._path(name or self.next_name("conv"))
        kernel = GradTensor(f"{path}/conv2d/kernel", (k_h, k_w, c_in // groups, out_ch))
        epi = self._epilogue(path, out_ch, out_elems, bias is not False, bn, scale, activation)
        macs = k_h * k_w * (c_in // groups) * out_elems
        shape = (h_out, w_out, out_ch)
        kind = LayerKind.CONV if groups == 1 else LayerKind.GROUPED_CONV
        return self._weighted(kind, path, kernel, macs, shape, epi, stride, activation)

    def depthwise_conv(
        self,
        k_h: int,
        k_w: int,
        stride: int = 1,
        padding: str = "SAME",
        *,
        multiplier: int = 1,
        bias: bool | None = None,
        batch_norm: bool | None = None,
        bn_scale: bool | None = None,
        activation: str | None = "relu",
    ) -> Activation:
        """Depthwise convolution (kernel ``[k_h, k_w, c_in, multiplier]``) + epilogue."""
        h, w, c_in = self._spatial()
        bn = self.use_batch_norm if batch_norm is None else batch_norm
        scale = self.bn_scale if bn_scale is None else bn_scale
        h_out, w_out = (
            conv_out_size(h, k_h, stride, padding),
            conv_out_size(w, k_w, stride, padding),
        )
        out_ch = c_in * multiplier
        out_elems = h_out * w_out * out_ch
        path = self._path(self.next_name("dwconv"))
        kernel = GradTensor(f"{path}/depthwise_kernel", (k_h, k_w, c_in, multiplier))
        epi = self._epilogue(path, out_ch, out_elems, bias is not False, bn, scale, activation)
        macs = k_h * k_w * out_elems
        return self._weighted(
            LayerKind.DEPTHWISE_CONV,
            path,
            kernel,
            macs,
            (h_out, w_out, out_ch),
            epi,
            stride,
            activation,
        )

    def fc(self, out_units: int, activation: str | None = "relu") -> Activation:
        """Fully connected layer ``affine{N}`` (weights ``[n_in, n_out]`` + biases); flattens."""
        n_in = self.top.elems
        path = self._path(self.next_name("affine"))
        kernel = GradTensor(f"{path}/weights", (n_in, out_units))
        epi = self._epilogue(path, out_units, out_units, True, False, False, activation)
        return self._weighted(
            LayerKind.FC, path, kernel, n_in * out_units, (out_units,), epi, 1, activation
        )

    def batch_norm(self, scale: bool = False, activation: str | None = None) -> Activation:
        """Stand-alone batch norm ``batchnorm{N}`` (tf default ``scale=False``: beta only)."""
        path = self._path(self.next_name("batchnorm"))
        ch, elems = self.top.shape[-1], self.top.elems
        flops = (BN_FLOPS_PER_ELEM + 1 + scale) * elems
        flops += RELU_FLOPS_PER_ELEM * elems if activation == "relu" else 0
        tensors = [GradTensor(f"{path}/beta", (ch,))]
        if scale:
            tensors.append(GradTensor(f"{path}/gamma", (ch,)))
        return self._add(
            path,
            LayerKind.BATCHNORM,
            tensors,
            flops,
            flops,
            elems,
            self.top.shape,
            True,
            activation=activation,
        )

    def squeeze_excitation(self, squeeze_ch: int, activation: str = "relu") -> Activation:
        """Squeeze-and-excitation (Hu et al. 2018) as one SQUEEZE_EXCITE layer ``se{N}``.

        Global average pool to ``(C,)``; affine ``squeeze`` ``C -> squeeze_ch`` with biases and
        ``activation``; affine ``excite`` back to ``C`` with biases and a sigmoid; the input
        scaled channel by channel. Tensors ``se{N}/squeeze/weights`` ``[C, squeeze_ch]``,
        ``.../biases``, ``se{N}/excite/weights`` ``[squeeze_ch, C]``, ``.../biases``. The input
        is read twice (by the pool and by the scaling), so ``input_elems`` is ``2·H·W·C``.
        """
        if activation not in ACTIVATIONS or activation is None:
            raise ValueError(f"squeeze activation must be relu or swish, got {activation!r}")
        h, w, c = self._spatial()
        path = self._path(self.next_name("se"))
        tensors = [
            GradTensor(f"{path}/squeeze/weights", (c, squeeze_ch)),
            GradTensor(f"{path}/squeeze/biases", (squeeze_ch,)),
            GradTensor(f"{path}/excite/weights", (squeeze_ch, c)),
            GradTensor(f"{path}/excite/biases", (c,)),
        ]
        matmul = 2 * 2 * c * squeeze_ch
        elementwise = 2 * h * w * c  # the pool (one add per element) and the scaling
        elementwise += BIAS_FLOPS_PER_ELEM * (squeeze_ch + c) + SIGMOID_FLOPS_PER_ELEM * c
        elementwise += ACTIVATION_FLOPS_PER_ELEM[activation] * squeeze_ch
        bwd_matmul = (2 if self.top.needs_grad else 1) * matmul
        return self._add(
            path,
            LayerKind.SQUEEZE_EXCITE,
            tensors,
            matmul + elementwise,
            bwd_matmul + elementwise,
            2 * h * w * c,
            (h, w, c),
            needs_grad=True,
            input_shape=self.top.shape,
        )

    # -- parameter-free layers ----------------------------------------------------------------
    def _elementwise(self, key: str, kind: LayerKind, flops_per_elem: int) -> Activation:
        elems = self.top.elems
        flops = flops_per_elem * elems
        path = self._path(self.next_name(key))
        return self._add(path, kind, (), flops, flops, elems, self.top.shape, self.top.needs_grad)

    def pool(
        self, op: str, k_h: int, k_w: int, stride: int = 2, padding: str = "VALID"
    ) -> Activation:
        """Max (``op='max'``, ``mpool{N}``) or average (``'avg'``, ``apool{N}``) pooling."""
        if op not in ("max", "avg"):
            raise ValueError(f"pool op must be 'max' or 'avg', got {op!r}")
        h, w, c = self._spatial()
        h_out, w_out = (
            conv_out_size(h, k_h, stride, padding),
            conv_out_size(w, k_w, stride, padding),
        )
        flops = k_h * k_w * h_out * w_out * c
        path = self._path(self.next_name("mpool" if op == "max" else "apool"))
        return self._add(
            path,
            LayerKind.POOL,
            (),
            flops,
            flops,
            h * w * c,
            (h_out, w_out, c),
            self.top.needs_grad,
        )

    def spatial_mean(self) -> Activation:
        """Global average pooling to ``(C,)`` (tf_cnn_benchmarks ``spatial_mean{N}``)."""
        h, w, c = self._spatial()
        path = self._path(self.next_name("spatial_mean"))
        flops = h * w * c
        return self._add(
            path, LayerKind.POOL, (), flops, flops, h * w * c, (c,), self.top.needs_grad
        )

    def lrn(self, depth_radius: int = 5) -> Activation:
        """Local response normalisation across channels, window ``2·depth_radius + 1``."""
        per_elem = LRN_FLOPS_PER_WINDOW_ELEM * (2 * depth_radius + 1) + 3
        return self._elementwise("lrn", LayerKind.LRN, per_elem)

    def activation(self, kind: str = "relu") -> Activation:
        """Stand-alone activation (``relu{N}``)."""
        if kind != "relu":
            raise ValueError(f"unsupported activation {kind!r}")
        elems = self.top.elems
        flops = RELU_FLOPS_PER_ELEM * elems
        path = self._path(self.next_name("relu"))
        return self._add(
            path,
            LayerKind.ACTIVATION,
            (),
            flops,
            flops,
            elems,
            self.top.shape,
            self.top.needs_grad,
            activation=kind,
        )

    def dropout(self) -> Activation:
        """Dropout (``dropout{N}``); the keep probability does not change the cost."""
        return self._elementwise("dropout", LayerKind.DROPOUT, DROPOUT_FLOPS_PER_ELEM)

    def flatten(self) -> Activation:
        """Reshape to ``(N,)``; a view, so no layer is recorded."""
        self.top = Activation((self.top.elems,), self.top.needs_grad)
        return self.top

    def residual_add(self, shortcut: Activation, activation: str | None = "relu") -> Activation:
        """``top + shortcut`` (then the activation) as one ADD layer (``add{N}``)."""
        if shortcut.shape != self.top.shape:
            raise ValueError(f"residual shapes differ: {shortcut.shape} vs {self.top.shape}")
        elems = self.top.elems
        flops = ADD_FLOPS_PER_ELEM * elems + (RELU_FLOPS_PER_ELEM * elems if activation else 0)
        path = self._path(self.next_name("add"))
        grad = self.top.needs_grad or shortcut.needs_grad
        return self._add(
            path,
            LayerKind.ADD,
            (),
            flops,
            flops,
            2 * elems,
            self.top.shape,
            grad,
            activation=activation,
        )

    def concat(self, branches: Sequence[Activation]) -> Activation:
        """Channel concatenation of branch outputs of equal ``H, W`` (``concat{N}``)."""
        spatial = {b.shape[:-1] for b in branches}
        if len(spatial) != 1 or any(len(b.shape) != 3 for b in branches):
            raise ValueError(f"cannot concatenate shapes {[b.shape for b in branches]}")
        out_shape = (*spatial.pop(), sum(b.shape[-1] for b in branches))
        elems = sum(b.elems for b in branches)
        path = self._path(self.next_name("concat"))
        grad = any(b.needs_grad for b in branches)
        return self._add(path, LayerKind.CONCAT, (), 0, 0, elems, out_shape, grad)

    def logits_and_loss(self, n_classes: int = NUM_CLASSES) -> Activation:
        """The final linear ``affine{N}`` to ``n_classes`` logits, then :meth:`softmax_loss`."""
        self.fc(n_classes, activation=None)
        return self.softmax_loss()

    def softmax_loss(self) -> Activation:
        """Softmax cross-entropy over the current logits, the final ``loss`` layer."""
        n = self.top.elems
        flops = SOFTMAX_XENT_FLOPS_PER_CLASS * n
        return self._add(self._path("loss"), LayerKind.LOSS, (), flops, flops, n, (1,), True)
