"""One PyTorch profiling pass: a zoo model trained on synthetic data, traced by torch.profiler.

:func:`profile_pass` builds the PyTorch model of a zoo model
(:func:`~ddlsim.tools.calibrate.torch_models.build_torch_model`, checked tensor for tensor against
the
zoo), makes a training step (zero the gradients, forward and loss, backward, momentum-SGD
update; ``amp``: autocast to fp16 with a dynamic loss scale, on a GPU only), runs
``warmup_steps`` (on a GPU with cuDNN's autotuner on, as TensorFlow does), times ``steps``
steps without the profiler, then profiles ``steps`` more, each inside
``record_function("ddlsim::step")`` and ending with a device synchronisation. Per-layer forward
and backward times come from the trace (:mod:`ddlsim.tools.calibrate.torch_profiler`); the file
records the mean profiled step as ``step_time_s`` and the untraced one in its provenance, with
``framework: pytorch``, the device PyTorch reports, the PyTorch / CUDA / cuDNN versions and the
sum of layer times over the step.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import time
from typing import Any

from ddlsim.errors import CalibrationError
from ddlsim.tools.calibrate import torch_env
from ddlsim.tools.calibrate.defaults import DEFAULT_STEPS, DEFAULT_WARMUP_STEPS
from ddlsim.tools.calibrate.devices import Target
from ddlsim.tools.calibrate.run import (
    LEARNING_RATE,
    MOMENTUM,
    NUM_CLASSES,
    Measured,
    PassResult,
    _warnings,
    attributed_profile,
    grad_bytes_per_layer,
    now_utc,
)
from ddlsim.tools.calibrate.torch_profiler import STEP_EVENT, attribute, read_events
from ddlsim.version import __version__
from ddlsim.workload.zoo import get_model

METHOD = "torch-profiler"
FRAMEWORK = "pytorch"


def check_gradients(model: Any, name: str) -> dict[str, int]:
    """Gradient bytes per zoo layer, after checking the PyTorch model's tensors against the
    zoo's: the same names, in the same order, with the same element counts."""
    spec = get_model(name)
    ours = [(t.name, t.nbytes) for t in model.gradient_tensors()]
    zoo = [(t.name, t.nbytes()) for t in spec.tensors]
    if ours != zoo:
        raise CalibrationError(
            f"the PyTorch model of {name} does not match the zoo's gradient tensors "
            f"(only in PyTorch: {sorted(set(ours) - set(zoo))[:3]}, "
            f"only in the zoo: {sorted(set(zoo) - set(ours))[:3]})"
        )
    return grad_bytes_per_layer(spec, model.gradient_tensors())


def _step_fn(torch: Any, model: Any, images: Any, labels: Any, amp: bool, gpu: bool) -> Any:
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    scaler = torch.amp.GradScaler("cuda") if amp else None

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        cast = torch.autocast("cuda", dtype=torch.float16) if amp else contextlib.nullcontext()
        with cast:
            loss = model(images, labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        if gpu:
            torch.cuda.synchronize()

    return step


@contextlib.contextmanager
def _quiet_native_stderr():
    """Silence file descriptor 2 while the profiler starts or stops: Kineto prints status lines
    there from C++ (``profiler_start``), which would break the one-line error policy's output.
    Python errors are raised, not printed, so nothing of ddlsim's is lost."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable descriptor 2: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _provenance(
    torch: Any, info: dict[str, Any], target: Target, precision: str, gpu: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The calibration's provenance head and device record of a profiling pass."""
    head = {
        "method": METHOD,
        "framework": FRAMEWORK,
        "created": now_utc(),
        "host": socket.gethostname(),
        "torch": info["torch"],
        "cuda": info["cuda"],
        "cudnn": info.get("cudnn"),
        "device_name": target.device.reported_name,
        "ddlsim": __version__,
        "data": "synthetic",
        "optimizer": f"momentum SGD (momentum {MOMENTUM})"
        + (", autocast fp16, dynamic loss scaling" if precision == "amp" else ""),
        "layout": "NCHW",
        "time_source": "CUDA kernel time" if gpu else "CPU wall time of the ops",
        # fp32 arithmetic on Ampere and later: PyTorch's TF32 switches as they were (convolutions
        # default to TF32, matrix products not), the kernel model's fp32 assumes convolutions on
        "tf32": {
            "cudnn_convolutions": bool(torch.backends.cudnn.allow_tf32),
            "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        },
    }
    device_info = {
        "reported_name": target.device.reported_name,
        "torch_device": target.device.framework_name,
        "kind": target.device.kind,
        **target.device.details,
        **{k: v for k, v in info.items() if k in ("cuda_build", "nvidia_driver")},
    }
    return head, device_info


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
    torch = torch_env.import_torch()
    from torch.profiler import ProfilerActivity, profile, record_function

    from ddlsim.tools.calibrate.torch_models import build_torch_model

    t0 = time.perf_counter()
    spec = get_model(model_name)
    gpu = target.device.kind == "gpu"
    device = torch.device(target.device.framework_name)
    if gpu:
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = build_torch_model(model_name, device=device).train()
    grad_bytes = check_gradients(model, model_name)
    h, w, c = spec.input_shape
    images = torch.rand((batch, c, h, w), device=device)
    labels = torch.randint(0, NUM_CLASSES, (batch,), device=device)
    step = _step_fn(torch, model, images, labels, precision == "amp", gpu)
    for _ in range(max(1, warmup_steps)):
        step()
    untraced = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        untraced.append(time.perf_counter() - t)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    prof = profile(activities=activities)
    with _quiet_native_stderr():
        prof.start()
    try:
        for _ in range(steps):
            with record_function(STEP_EVENT):
                step()
    finally:
        with _quiet_native_stderr():
            prof.stop()
    att = attribute(read_events(prof.events()), [la.name for la in spec.layers], gpu)
    info = torch_env.build_info(torch)
    head, device_info = _provenance(torch, info, target, precision, gpu)
    extra = {"cpu_threads": torch.get_num_threads()}
    measured = Measured(att, grad_bytes, statistics.median(untraced), steps, warmup_steps)
    profile_ = attributed_profile(
        spec, batch, precision, target, measured, head, extra, device_info
    )
    return PassResult(profile_, att, time.perf_counter() - t0, _warnings(profile_))
