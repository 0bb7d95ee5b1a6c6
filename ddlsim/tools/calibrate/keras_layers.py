"""Keras layers that mirror one zoo layer each, with the zoo's variable names.

Each class is what one :class:`~ddlsim.workload.zoo.builder.NetBuilder` call becomes: a layer
named after the last component of the zoo layer's path, holding variables whose Keras paths equal
the zoo's tensor names (``conv3/conv2d/kernel``, ``conv3/batchnorm3/beta``, ``affine0/weights``,
``affine0/biases``), so a variable *is* its zoo gradient tensor and profiler op names
(``<model>/conv3/conv2d/convolution:Conv2D``) attribute to zoo layers. Batch norm is
tf_cnn_benchmarks' fused kernel (``FusedBatchNormV3``), beta before gamma as in the zoo. A
grouped convolution is TensorFlow's ``Conv2D`` with a ``[kh, kw, c_in/groups, c_out]`` filter
(cuDNN's grouped convolution on a GPU); activations are ReLU, swish (``y * sigmoid(y)``) or none.

This module imports TensorFlow and Keras; import it only on the calibration path.
"""

from __future__ import annotations

from typing import Any

from ddlsim.tools.calibrate.tf_env import import_tensorflow

tf = import_tensorflow()  # first: it serialises op execution before the runtime starts

import keras  # noqa: E402

BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9  # tf_cnn_benchmarks' ResNet batch-norm decay


def _padding(padding: str) -> str:
    return padding.lower()


def activate(y: Any, activation: str | None) -> Any:
    """``y`` through the zoo activation ``activation`` (``relu``, ``swish``, ``sigmoid``, None).

    Swish is written ``y * sigmoid(y)``: ``tf.nn.silu``'s custom gradient creates its backward
    ops outside every name scope, where the profiler cannot attribute them to the layer."""
    if activation is None:
        return y
    if activation == "swish":
        return y * tf.math.sigmoid(y)
    functions = {"relu": tf.nn.relu, "sigmoid": tf.math.sigmoid}
    return functions[activation](y)


class ZooBatchNorm(keras.layers.Layer):
    """Fused batch norm (``beta``, optional ``gamma``), then an optional activation."""

    def __init__(self, scale: bool, activation: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale, self.activation = scale, activation

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create ``beta`` (and ``gamma``) and the moving statistics."""
        ch = (int(input_shape[-1]),)
        fp32 = {"shape": ch, "autocast": False}  # fused batch norm takes fp32 parameters
        self.beta = self.add_weight(name="beta", initializer="zeros", **fp32)
        self.gamma = (
            self.add_weight(name="gamma", initializer="ones", **fp32) if self.scale else None
        )
        self.moving_mean = self.add_weight(
            name="moving_mean", initializer="zeros", trainable=False, **fp32
        )
        self.moving_variance = self.add_weight(
            name="moving_variance", initializer="ones", trainable=False, **fp32
        )

    def call(self, x: Any, training: bool = False) -> Any:
        """Normalise with batch statistics (training) or the moving ones (inference)."""
        gamma = self.gamma if self.gamma is not None else tf.ones_like(self.beta)
        if training:
            y, mean, var = tf.compat.v1.nn.fused_batch_norm(
                x, gamma, self.beta, epsilon=BN_EPSILON, is_training=True
            )
            self.moving_mean.assign(BN_MOMENTUM * self.moving_mean + (1 - BN_MOMENTUM) * mean)
            self.moving_variance.assign(
                BN_MOMENTUM * self.moving_variance + (1 - BN_MOMENTUM) * var
            )
        else:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                x,
                gamma,
                self.beta,
                mean=self.moving_mean,
                variance=self.moving_variance,
                epsilon=BN_EPSILON,
                is_training=False,
            )
        return activate(y, self.activation)


class _GroupedConv2D(keras.layers.Layer):
    """A convolution in groups: one ``Conv2D`` op whose ``kernel`` has ``c_in/groups`` input
    channels (Keras' own grouped ``Conv2D`` compiles with XLA on the CPU, which would hide the
    op from the profiler's layer scopes)."""

    def __init__(
        self, filters: int, kernel: tuple[int, int], stride: int, padding: str, groups: int,
        initializer: str, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.filters, self.kernel_size, self.groups = filters, kernel, groups
        self.stride, self.pad, self.init = stride, padding.upper(), initializer

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create ``kernel``."""
        shape = (*self.kernel_size, int(input_shape[-1]) // self.groups, self.filters)
        self.kernel = self.add_weight(name="kernel", shape=shape, initializer=self.init)

    def call(self, x: Any) -> Any:
        """The grouped convolution."""
        return tf.nn.conv2d(x, tf.cast(self.kernel, x.dtype), self.stride, self.pad)


class ZooConv(keras.layers.Layer):
    """Convolution (``conv2d/kernel``, in ``groups``) + (``biases`` | batch norm ``batchnormN``)
    + activation."""

    def __init__(
        self,
        filters: int,
        kernel: tuple[int, int],
        stride: int,
        padding: str,
        *,
        biases: bool,
        bn_name: str | None,
        bn_scale: bool,
        activation: str | None,
        groups: int = 1,
        initializer: str = "glorot_uniform",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.filters, self.use_biases, self.activation = filters, biases, activation
        if groups == 1:
            self.conv = keras.layers.Conv2D(
                filters,
                kernel,
                strides=stride,
                padding=_padding(padding),
                use_bias=False,
                kernel_initializer=initializer,
                name="conv2d",
                dtype=self.dtype_policy,
            )
        else:
            self.conv = _GroupedConv2D(
                filters, kernel, stride, padding, groups, initializer,
                name="conv2d", dtype=self.dtype_policy,
            )  # fmt: skip
        self.bn = (
            ZooBatchNorm(bn_scale, activation, name=bn_name, dtype=self.dtype_policy)
            if bn_name
            else None
        )

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Build the convolution, then the batch norm or the ``biases``."""
        self.conv.build(input_shape)
        if self.bn is not None:
            self.bn.build((*input_shape[:-1], self.filters))  # BN needs only the channels
        self.biases = (
            self.add_weight(name="biases", shape=(self.filters,), initializer="zeros")
            if self.use_biases and self.bn is None
            else None
        )

    def call(self, x: Any, training: bool = False) -> Any:
        """Forward pass of the whole zoo layer."""
        y = self.conv(x)
        return _epilogue(y, self.bn, self.biases, self.activation, training)


def _epilogue(y: Any, bn: Any, biases: Any, activation: str | None, training: bool) -> Any:
    """What follows a convolution: the batch norm (which applies the activation itself), or
    the ``biases`` and the activation."""
    if bn is not None:
        return bn(y, training=training)
    if biases is not None:
        y = tf.nn.bias_add(y, tf.cast(biases, y.dtype))
    return activate(y, activation)


class ZooDepthwiseConv(keras.layers.Layer):
    """Depthwise convolution (``depthwise_kernel``) + (``biases`` | batch norm) + activation."""

    def __init__(
        self,
        kernel: tuple[int, int],
        stride: int,
        padding: str,
        multiplier: int,
        *,
        biases: bool,
        bn_name: str | None,
        bn_scale: bool,
        activation: str | None,
        initializer: str = "glorot_uniform",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size, self.stride, self.pad = kernel, stride, padding.upper()
        self.multiplier, self.use_biases, self.activation = multiplier, biases, activation
        self.init = initializer
        self.bn = (
            ZooBatchNorm(bn_scale, activation, name=bn_name, dtype=self.dtype_policy)
            if bn_name
            else None
        )

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create ``depthwise_kernel``, then the batch norm or the ``biases``."""
        c_in = int(input_shape[-1])
        shape = (*self.kernel_size, c_in, self.multiplier)
        self.depthwise_kernel = self.add_weight(
            name="depthwise_kernel", shape=shape, initializer=self.init
        )
        out_ch = c_in * self.multiplier
        if self.bn is not None:
            self.bn.build((*input_shape[:-1], out_ch))
        self.biases = (
            self.add_weight(name="biases", shape=(out_ch,), initializer="zeros")
            if self.use_biases and self.bn is None
            else None
        )

    def call(self, x: Any, training: bool = False) -> Any:
        """Forward pass of the whole zoo layer."""
        strides = (1, self.stride, self.stride, 1)
        kernel = tf.cast(self.depthwise_kernel, x.dtype)
        y = tf.nn.depthwise_conv2d(x, kernel, strides, self.pad)
        return _epilogue(y, self.bn, self.biases, self.activation, training)


class ZooDense(keras.layers.Layer):
    """Fully connected ``affineN``: ``weights`` ``[n_in, n_out]`` and ``biases``; flattens."""

    def __init__(
        self,
        units: int,
        activation: str | None,
        initializer: str = "glorot_uniform",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units, self.activation, self.init = units, activation, initializer

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create ``weights`` and ``biases``."""
        n_in = 1
        for d in input_shape[1:]:
            n_in *= int(d)  # type: ignore[arg-type]
        self.weights_ = self.add_weight(
            name="weights", shape=(n_in, self.units), initializer=self.init
        )
        self.biases = self.add_weight(name="biases", shape=(self.units,), initializer="zeros")

    def call(self, x: Any) -> Any:
        """Forward pass."""
        if len(x.shape) > 2:
            x = tf.reshape(x, (-1, self.weights_.shape[0]))
        y = tf.nn.bias_add(
            tf.matmul(x, tf.cast(self.weights_, x.dtype)), tf.cast(self.biases, x.dtype)
        )
        return activate(y, self.activation)


class ZooSqueezeExcite(keras.layers.Layer):
    """Squeeze-excitation: spatial mean, affine ``squeeze`` + activation, affine ``excite`` +
    sigmoid, the input scaled per channel (variables ``squeeze/weights`` ... as in the zoo)."""

    def __init__(
        self, channels: int, squeeze: int, activation: str, initializer: str = "glorot_uniform",
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        policy = self.dtype_policy
        self.squeeze = ZooDense(squeeze, activation, initializer, name="squeeze", dtype=policy)
        self.excite = ZooDense(channels, "sigmoid", initializer, name="excite", dtype=policy)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Build both affine layers."""
        channels = int(input_shape[-1])
        self.squeeze.build((None, channels))
        self.excite.build((None, self.squeeze.units))

    def call(self, x: Any) -> Any:
        """``x * excite(squeeze(mean(x)))``, broadcast over height and width."""
        gate = self.excite(self.squeeze(tf.reduce_mean(x, axis=(1, 2))))
        return x * gate[:, None, None, :]


class ZooAdd(keras.layers.Layer):
    """Residual sum of two inputs, then an optional ReLU."""

    def __init__(self, relu: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.relu = relu

    def call(self, inputs: list[Any]) -> Any:
        """``relu(a + b)`` or ``a + b``."""
        y = inputs[0] + inputs[1]
        return tf.nn.relu(y) if self.relu else y


class ZooSpatialMean(keras.layers.Layer):
    """Global average pooling to ``(N, C)``."""

    def call(self, x: Any) -> Any:
        """Mean over height and width."""
        return tf.reduce_mean(x, axis=(1, 2))


class ZooLRN(keras.layers.Layer):
    """Local response normalisation across channels."""

    def __init__(self, depth_radius: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.depth_radius = depth_radius

    def call(self, x: Any) -> Any:
        """``tf.nn.local_response_normalization``."""
        return tf.nn.local_response_normalization(x, depth_radius=self.depth_radius)


class ZooLoss(keras.layers.Layer):
    """Mean softmax cross-entropy of the logits against integer labels (in fp32)."""

    def call(self, inputs: list[Any]) -> Any:
        """The scalar loss."""
        logits, labels = inputs
        logits = tf.cast(logits, tf.float32)
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.reduce_mean(xent)
