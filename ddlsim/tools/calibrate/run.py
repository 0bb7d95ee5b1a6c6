"""One profiling pass: a zoo model trained on synthetic data, traced by the TF profiler.

:func:`profile_pass` builds the Keras model of a zoo model
(:func:`~ddlsim.tools.calibrate.keras_models.build_keras_model`), makes a ``tf.function`` training
step (forward, loss, ``GradientTape`` backward, momentum-SGD update, as tf_cnn_benchmarks'
synthetic-data run), runs ``warmup_steps`` (the first traces the graph), times ``steps`` steps
without the profiler, then traces ``steps`` more, each inside a ``train`` step marker. Per-layer
forward / backward times come from the trace (:mod:`ddlsim.tools.calibrate.profiler`), never from
timing layers one by one (that is biased: forward ~1.3x too high, backward ~0.75x too low).
Op execution is serialised (inter-op threads = 1) so the per-layer times add up to the step.

The recorded ``step_time_s`` is the mean *traced* step, the same steps the layer times come from,
so ``sum_layers_over_step`` measures how much of the step the layers explain; the untraced step
time is kept in the provenance (``untraced_step_time_s``) with the profiler's overhead.
"""

from __future__ import annotations

import math
import socket
import statistics
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ddlsim.calibration.profile import LayerTiming, ModelProfile
from ddlsim.errors import CalibrationError
from ddlsim.tools.calibrate import tf_env
from ddlsim.tools.calibrate.defaults import DEFAULT_STEPS, DEFAULT_WARMUP_STEPS
from ddlsim.tools.calibrate.definitions import GradientTensor
from ddlsim.tools.calibrate.devices import Target
from ddlsim.tools.calibrate.profiler import STEP_EVENT, Attribution, attribute, read_trace
from ddlsim.version import __version__
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.zoo import get_model

METHOD = "tf-profiler"
RATIO_BOUNDS = (0.85, 1.15)
LEARNING_RATE, MOMENTUM = 0.01, 0.9
NUM_CLASSES = 1000


@dataclass(frozen=True)
class PassResult:
    """A profiled calibration and what the pass observed."""

    profile: ModelProfile
    attribution: Attribution
    pass_time_s: float
    warnings: list[str] = field(default_factory=list)


def _train_step(tf: Any, model: Any, optimizer: Any, images: Any, labels: Any) -> Any:
    @tf.function(jit_compile=False)
    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = model((images, labels), training=True)
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, model.trainable_variables)
        missing = [
            v.path for v, g in zip(model.trainable_variables, grads, strict=True) if g is None
        ]
        if missing:  # checked while tracing: a variable the loss does not depend on
            raise CalibrationError(f"{model.spec.name}: no gradient for {missing[:3]}")
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return step


def _check_gradients(model: Any, name: str) -> dict[str, int]:
    """Gradient bytes per zoo layer, after checking the Keras model against the zoo."""
    spec = get_model(name)
    ours = {(t.name, t.shape, t.nbytes) for t in model.gradient_tensors()}
    zoo = {(t.name, t.shape, t.nbytes()) for t in spec.tensors}
    if ours != zoo:
        raise CalibrationError(
            f"the Keras model of {name} does not match the zoo's gradient tensors "
            f"(only in Keras: {sorted(ours - zoo)[:3]}, only in the zoo: {sorted(zoo - ours)[:3]})"
        )
    return grad_bytes_per_layer(spec, model.gradient_tensors())


def grad_bytes_per_layer(spec: ModelSpec, tensors: Iterable[GradientTensor]) -> dict[str, int]:
    """Gradient bytes per zoo layer of ``spec`` (every layer, 0 without weights) from a
    framework model's ``gradient_tensors()`` (checked against the zoo's)."""
    per_layer = {layer.name: 0 for layer in spec.layers}
    for t in tensors:
        per_layer[t.layer] += t.nbytes
    return per_layer


def profile_pass(
    model_name: str,
    batch: int,
    precision: str,
    target: Target,
    *,
    steps: int = DEFAULT_STEPS,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
) -> PassResult:
    """Profile ``model_name`` at ``batch`` and ``precision`` on ``target``; a calibration."""
    tf = tf_env.import_tensorflow()
    import keras

    from ddlsim.tools.calibrate.keras_models import build_keras_model

    t0 = time.perf_counter()
    spec = get_model(model_name)
    with tf.device(target.device.framework_name):
        model = build_keras_model(model_name, precision)
        grad_bytes = _check_gradients(model, model_name)
        images = tf.random.uniform((batch, *spec.input_shape), dtype=tf.float32)
        labels = tf.random.uniform((batch,), maxval=NUM_CLASSES, dtype=tf.int32)
        optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
        if precision == "amp":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
        step = _train_step(tf, model, optimizer, images, labels)
        for _ in range(max(1, warmup_steps)):
            step().numpy()
        untraced = []
        for _ in range(steps):
            t = time.perf_counter()
            step().numpy()
            untraced.append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory(prefix="ddlsim-profile-") as logdir:
            tf.profiler.experimental.start(logdir)
            try:
                for i in range(steps):
                    with tf.profiler.experimental.Trace(STEP_EVENT, step_num=i, _r=1):
                        step().numpy()
            finally:
                tf.profiler.experimental.stop()
            windows, events = read_trace(logdir, target.device.framework_name)
    att = attribute(windows, events, [la.name for la in spec.layers], model.name)
    head = {
        "method": METHOD,
        "created": now_utc(),
        "host": socket.gethostname(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "ddlsim": __version__,
        "data": "synthetic",
        "optimizer": f"momentum SGD (momentum {MOMENTUM})"
        + (", dynamic loss scaling" if precision == "amp" else ""),
    }
    device_info = {
        "reported_name": target.device.reported_name,
        "tf_device": target.device.framework_name,
        "kind": target.device.kind,
        **{k: _plain(v) for k, v in target.device.details.items() if k != "device_name"},
        **tf_env.build_info(tf),
    }
    extra = {"inter_op_threads": tf_env.inter_op_threads(tf)}
    measured = Measured(att, grad_bytes, statistics.median(untraced), steps, warmup_steps)
    profile = attributed_profile(spec, batch, precision, target, measured, head, extra, device_info)
    return PassResult(profile, att, time.perf_counter() - t0, _warnings(profile))


def now_utc() -> str:
    """The current time, UTC, to the second (a pass's ``created``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Measured:
    """What a profiling pass measured: the attribution, gradient bytes per layer, the median
    untraced step and the step counts."""

    attribution: Attribution
    grad_bytes: dict[str, int]
    untraced_step_s: float
    steps: int
    warmup_steps: int


def attributed_profile(
    spec: Any,
    batch: int,
    precision: str,
    target: Target,
    measured: Measured,
    head: dict[str, Any],
    extra: dict[str, Any],
    device_info: dict[str, Any],
) -> ModelProfile:
    """The calibration of a profiled pass (either framework): per-layer rows from the
    attribution, the traced step as ``step_time_s``, and the provenance ``head`` (method,
    framework, versions), the pass's figures, then ``extra``."""
    att = measured.attribution
    layers = tuple(
        LayerTiming(la.name, att.fwd_s[la.name], att.bwd_s[la.name], measured.grad_bytes[la.name])
        for la in spec.layers
    )
    step_s = att.step_time_s
    provenance = {
        **head,
        "warmup_steps": max(1, measured.warmup_steps),
        "traced_steps": measured.steps,
        "traced_step_times_s": [round(s, 6) for s in att.step_times_s],
        "untraced_step_time_s": round(measured.untraced_step_s, 6),
        "profiler_overhead": round(step_s / measured.untraced_step_s - 1, 4),
        "sum_layers_over_step": round(att.sum_layers_s / step_s, 4),
        "accounted_over_step": round((att.sum_layers_s + att.unattributed_s) / step_s, 4),
        **extra,
        "op_events": att.n_events,
        "top_unattributed_s": {k: round(v, 6) for k, v in att.top_unattributed},
    }
    if target.catalog_id_overridden:
        provenance["catalog_id_override"] = target.catalog_id
    return ModelProfile(
        model=spec.name,
        device=target.catalog_id,
        batch_per_gpu=batch,
        precision=precision,
        layers=layers,
        unattributed_time_s=att.unattributed_s,
        step_time_s=step_s,
        provenance=provenance,
        device_info=device_info,
    )


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _warnings(profile: ModelProfile) -> list[str]:
    ratio = profile.sum_layers_s / profile.step_time_s
    lo, hi = RATIO_BOUNDS
    out = []
    if not (lo <= ratio <= hi) or not math.isfinite(ratio):
        out.append(
            f"{profile.model} batch {profile.batch_per_gpu}: sum of per-layer times / step time "
            f"= {ratio:.3f}, outside {lo}-{hi} (ops overlapping, or time outside the layers: "
            f"unattributed {profile.unattributed_time_s * 1e3:.2f} ms of "
            f"{profile.step_time_s * 1e3:.2f} ms)"
        )
    return out
