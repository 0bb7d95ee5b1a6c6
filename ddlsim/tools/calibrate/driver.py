"""``ddlsim calibrate`` end to end: validate, pick the device, check the output, profile, write.

Order matters for the error policy (one line, exit 2, nothing written): everything that can be
checked without the framework is checked first (names, batches, flags); then the framework --
TensorFlow, or PyTorch with ``--framework torch`` -- is imported (a missing install says what to
install) and the target device resolved (a GPU that is not there names what the framework does
see); then the output directory and every destination file are checked (writable; an existing
file must be a schema-1 calibration) before the first, long, profiling pass. Each file is
written atomically when its pass ends, so Ctrl-C leaves only whole files.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path
from typing import TextIO

from ddlsim.calibration import profile as profile_io
from ddlsim.calibration.profile import ModelProfile, check_images_per_sec
from ddlsim.calibration.store import calibration_path
from ddlsim.calibration.transfer import anchor_throughput, transfer_device
from ddlsim.compute.kernels import PRECISIONS  # a CNN calibration: fp32 or amp
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.tools.calibrate import output
from ddlsim.tools.calibrate.defaults import (
    DEFAULT_CPU_BATCHES,
    DEFAULT_GPU_BATCHES,
    DEFAULT_STEPS,
    DEFAULT_WARMUP_STEPS,
)
from ddlsim.tools.calibrate.devices import Target, parse_device_flag
from ddlsim.tools.calibrate.progress import Progress, SummaryRow, format_table
from ddlsim.tools.calibrate.run import profile_pass
from ddlsim.tools.calibrate.scratch import private_tempdir
from ddlsim.workload.zoo import MODEL_NAMES, get_model

MAX_BATCH = 4096
MAX_STEPS = 1000
FRAMEWORKS = ("tensorflow", "torch")


@dataclass(frozen=True)
class Request:
    """What ``ddlsim calibrate`` was asked to do (flags, resolved to values)."""

    output: Path
    gpu: str | None = None
    device: str | None = None
    catalog_id: str | None = None
    models: tuple[str, ...] = ()
    batches: tuple[int, ...] = ()
    precisions: tuple[str, ...] = ()
    steps: int = DEFAULT_STEPS
    warmup_steps: int = DEFAULT_WARMUP_STEPS
    anchor_images_per_sec: float | None = None
    from_log: Path | None = None
    transfer_to: tuple[str, ...] = ()
    calibration: Path | None = None
    framework: str = "tensorflow"


def validate(req: Request) -> None:
    """Every check that needs no framework; ConfigError / UnknownNameError name the value."""
    if req.framework not in FRAMEWORKS:
        raise ConfigError(f"unknown --framework {req.framework!r}; valid: {', '.join(FRAMEWORKS)}")
    for name in req.models:
        get_model(name)
    for b in req.batches:
        if not 1 <= b <= MAX_BATCH:
            raise ConfigError(f"--batch must be in 1..{MAX_BATCH}, got {b}")
    for p in req.precisions:
        if p not in PRECISIONS:
            raise ConfigError(f"unknown precision {p!r}; valid: {', '.join(PRECISIONS)}")
    for flag, steps in (("--steps", req.steps), ("--warmup-steps", req.warmup_steps)):
        if not 1 <= steps <= MAX_STEPS:
            raise ConfigError(f"{flag} must be in 1..{MAX_STEPS}, got {steps}")
    if req.anchor_images_per_sec is not None:
        check_images_per_sec(req.anchor_images_per_sec, "--anchor-throughput")
    for gpu in (*req.transfer_to, *filter(None, [req.gpu, req.catalog_id])):
        catalog.device(gpu)
    if req.gpu is not None and req.device is not None:
        raise ConfigError("give either --gpu NAME or --device cpu|gpu:N, not both")
    if req.device is not None:
        parse_device_flag(req.device)
    if req.anchor_images_per_sec is not None and req.from_log is not None:
        raise ConfigError("give either --anchor-throughput or --from-log, not both")
    if req.calibration is not None:
        if req.gpu or req.device or req.models or req.batches or req.precisions:
            raise ConfigError(
                "--calibration FILE starts from that file: no --gpu, --device, --model, "
                "--batch or --precision with it"
            )
        if not req.transfer_to and req.anchor_images_per_sec is None and req.from_log is None:
            raise ConfigError(
                "--calibration FILE needs --anchor-throughput, --from-log or --transfer-to"
            )
    elif req.gpu is None and req.device is None:
        raise ConfigError("say what to profile: --gpu NAME (e.g. p100) or --device cpu|gpu:N")
    anchored = req.anchor_images_per_sec is not None or req.from_log is not None
    if "amp" in req.precisions:
        for gpu in req.transfer_to:
            if catalog.device(gpu).peak_fp16_flops is None:
                raise ConfigError(f"--transfer-to {gpu}: no fast fp16 path for amp")
    one = len(req.models) == 1 and len(req.batches) == 1 and len(req.precisions) <= 1
    if anchored and req.calibration is None and not one:
        raise ConfigError(
            "a throughput anchors one configuration: give exactly one --model and one "
            "--batch (and at most one --precision)"
        )


def _target(req: Request) -> Target:
    from ddlsim.tools.calibrate.devices import resolve_target

    if req.framework == "torch":
        from ddlsim.tools.calibrate import torch_env

        torch = torch_env.import_torch()
        return resolve_target(
            torch_env.list_devices(torch),
            gpu=req.gpu,
            device=req.device,
            catalog_id=req.catalog_id,
            cuda_build=bool(torch_env.build_info(torch)["cuda_build"]),
            framework="PyTorch",
            gpu_install=torch_env.GPU_INSTALL,
        )
    from ddlsim.tools.calibrate import tf_env

    tf = tf_env.import_tensorflow()
    devices = tf_env.list_devices(tf)
    cuda = bool(tf_env.build_info(tf)["cuda_build"])
    return resolve_target(
        devices, gpu=req.gpu, device=req.device, catalog_id=req.catalog_id, cuda_build=cuda
    )


def _profile_pass(req: Request):
    """The profiling pass of the requested framework (PyTorch's module imported only now)."""
    if req.framework == "torch":
        from ddlsim.tools.calibrate.torch_run import profile_pass as torch_pass

        return torch_pass
    return profile_pass


def _check_precision(target: Target, precision: str) -> None:
    if precision != "amp":
        return
    if target.device.kind == "cpu":
        raise ConfigError("--precision amp profiles a GPU's fp16 path; on the CPU use fp32")
    try:
        spec = catalog.device(target.catalog_id)
    except ConfigError:
        return
    if spec.peak_fp16_flops is None:
        raise ConfigError(f"GPU {spec.id!r} has no fast fp16 path; use --precision fp32")


Anchor = tuple[float, str]  # images/s and where the figure comes from


def _anchor_figure(req: Request, model: str, batch: int) -> Anchor | None:
    """The throughput to anchor to, read (and checked against the job) before any profiling."""
    if req.anchor_images_per_sec is not None:
        return req.anchor_images_per_sec, "--anchor-throughput"
    if req.from_log is not None:
        from ddlsim.tools.calibrate.logs import check_log, read_log

        log = read_log(req.from_log)
        check_log(log, model, batch)
        return log.images_per_sec, log.source
    return None


def _derive(req: Request, profile: ModelProfile, anchor: Anchor | None) -> list[ModelProfile]:
    """The profiles to write from one source: itself (anchored) and its transfers."""
    base = anchor_throughput(profile, *anchor) if anchor else profile
    return [base, *(transfer_device(base, gpu) for gpu in req.transfer_to)]


def _check_outputs(req: Request, paths: list[Path]) -> None:
    output.check_writable(req.output)
    for path in paths:
        output.check_destination(path)


def _from_file(req: Request, path: Path, out: TextIO) -> list[SummaryRow]:
    """Anchor and / or transfer an existing calibration file; no profiling, no TensorFlow."""
    source = profile_io.load(path)
    anchor = _anchor_figure(req, source.model, source.batch_per_gpu)
    derived = _derive(req, source, anchor)
    if anchor is None:
        derived = derived[1:]  # the source itself is not rewritten
    _check_outputs(
        req,
        [
            calibration_path(req.output, p.model, p.device, p.batch_per_gpu, p.precision)
            for p in derived
        ],
    )
    rows = [output.save(p, req.output) for p in derived]
    out.write(format_table(rows) + output.precedence_notes(rows, req.output))
    return rows


def execute(req: Request, out: TextIO | None = None, err: TextIO | None = None) -> list[SummaryRow]:
    """Run ``req``: profile (or load), anchor, transfer, write; print the summary table."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    validate(req)
    if req.calibration is not None:
        return _from_file(req, req.calibration, out)
    with private_tempdir():  # the frameworks' temporary files and caches, removed on exit
        return _profile_all(req, out, err)


def _profile_all(req: Request, out: TextIO, err: TextIO) -> list[SummaryRow]:
    """Profile every requested configuration on the target, derive, write, summarise."""
    anchored = req.anchor_images_per_sec is not None or req.from_log is not None
    anchor = _anchor_figure(req, req.models[0], req.batches[0]) if anchored else None
    target = _target(req)
    precisions = req.precisions or ("fp32",)
    for p in precisions:
        _check_precision(target, p)
    gpu = target.device.kind == "gpu"
    batches = req.batches or (DEFAULT_GPU_BATCHES if gpu else DEFAULT_CPU_BATCHES)
    jobs = list(product(req.models or MODEL_NAMES, batches, precisions))
    ids = [target.catalog_id, *(catalog.device(g).id for g in req.transfer_to)]
    _check_outputs(req, [calibration_path(req.output, m, i, b, p) for m, b, p in jobs for i in ids])
    rate = 5e12 if gpu else 5e10  # rough FLOP/s, only to weigh the progress bar
    weights = [
        6 * (req.steps * 2 + req.warmup_steps) * get_model(m).fwd_flops(b) / rate
        + 0.03 * len(get_model(m).layers)
        for m, b, _ in jobs
    ]
    progress = Progress(weights, err)
    pass_fn = _profile_pass(req)
    rows: list[SummaryRow] = []
    try:
        for model, batch, precision in jobs:
            progress.show(f"{model} b{batch} {precision}")
            result = pass_fn(
                model, batch, precision, target, steps=req.steps, warmup_steps=req.warmup_steps
            )
            for warning in result.warnings:
                progress.note(f"ddlsim: warning: {warning}")
            for p in _derive(req, result.profile, anchor):
                row = output.save(p, req.output)
                measured = p is result.profile
                rows.append(replace(row, pass_time_s=result.pass_time_s) if measured else row)
            progress.advance()
    finally:
        progress.close()
    out.write(format_table(rows) + output.precedence_notes(rows, req.output))
    return rows
