"""The calibration wing: the compute a job's workload costs on its resolved cluster.

The model and its defaults (a given calibration file's, else resnet50, 64, fp32), the
calibration that times it (:func:`ddlsim.calibration.store.find_profile_and_choice`: the one
precedence rule; or the file the job names, re-timed for another GPU), re-timed for the job's
software stack and TF32 setting (:mod:`ddlsim.calibration.restack`), DALI's GPU work with real
data, and a user's anchor (``single_gpu_throughput``): a :class:`Compute`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ddlsim.calibration import profile as profile_io
from ddlsim.calibration import restack
from ddlsim.calibration import use as calibration_use
from ddlsim.calibration.profile import ModelProfile
from ddlsim.calibration.store import Choice, find_profile_and_choice
from ddlsim.compute.stack import Stack
from ddlsim.compute.stack import resolve as resolve_stack
from ddlsim.config.groups import ExecutionConfig, WorkloadConfig
from ddlsim.config.knob import BATCH_MAX
from ddlsim.errors import ConfigError
from ddlsim.execution.strategy import Strategy
from ddlsim.system.specs import Cluster, DeviceSpec
from ddlsim.workload.layers import ModelSpec
from ddlsim.workload.transformers.config import TransformerConfig, with_task
from ddlsim.workload.transformers.zoo import TRANSFORMER_NAMES, get_transformer
from ddlsim.workload.workload import Workload
from ddlsim.workload.zoo.aliases import canonical

#: a transformer's micro-batch per GPU where the job states none (a CNN's is 64)
DEFAULT_TRANSFORMER_BATCH = 8


@dataclass(frozen=True)
class Names:
    """The workload's names as resolved: a given calibration file's defaults for what the job
    leaves None (``file``: that file, read), else ddlsim's; ``transformer`` the model's
    definition where it is a transformer (the zoo's or the ``model_config`` file's, at the
    job's sequence length)."""

    model: str
    gpu: str
    batch: int
    precision: str
    file: ModelProfile | None
    transformer: TransformerConfig | None = None


def resolve_names(w: WorkloadConfig, gpu: str | None) -> Names:
    """Model, GPU, batch and precision of the job (:mod:`ddlsim.calibration.use`); a model
    name in any accepted spelling (:func:`ddlsim.workload.zoo.aliases.canonical`)."""
    model = canonical(w.model) if w.model is not None else None
    cfg = None
    if w.model_config is not None:
        if model is not None:
            raise ConfigError("--model-config describes the model: drop --model")
        from ddlsim.workload.transformers.load import load_model_config

        cfg = load_model_config(w.model_config)
    elif model is not None and model in TRANSFORMER_NAMES:
        cfg = get_transformer(model)
    if cfg is None:
        if w.batch == BATCH_MAX:
            raise ConfigError(
                f"--batch max finds the largest micro-batch that fits a transformer's memory "
                f"model; {model or 'resnet50'} has none: give --batch N"
            )
        if w.seq_len is not None:
            raise ConfigError(f"--seq-len applies to transformer models, not {model or 'resnet50'}")
        file_prof = profile_io.load(w.calibration) if w.calibration is not None else None
        model, gpu, batch, precision = calibration_use.resolve_defaults(
            file_prof, w.calibration, model=model, gpu=gpu, batch=w.batch, precision=w.precision
        )
        return Names(model, gpu, batch, precision, file_prof)
    if w.calibration is not None:
        raise ConfigError(
            "a transformer is timed by ddlsim's per-layer model: --calibration files hold a "
            "CNN's measured layers; drop --calibration"
        )
    if w.seq_len is not None and cfg.positions_follow_seq:  # the table sized to the run
        cfg = replace(cfg, seq_len=w.seq_len, max_positions=w.seq_len)
    elif w.seq_len is not None:
        cfg = replace(cfg, seq_len=w.seq_len)  # checked against its positions
    cfg = with_task(cfg, w.task)
    batch = DEFAULT_TRANSFORMER_BATCH if w.batch in (None, BATCH_MAX) else w.batch  # max: fitted
    return Names(cfg.name, gpu or "p100", batch, w.precision or "fp32", None, cfg)


@dataclass(frozen=True)
class Compute:
    """The workload timed: the model with its per-layer calibration (``workload``), the file
    the times were read from (``source``), how the search chose it (``choice``; None for a
    given file) and the software stack they are timed for (``stack``)."""

    workload: Workload
    source: str | None
    choice: Choice | None
    stack: Stack


def resolve_compute(
    w: WorkloadConfig,
    x: ExecutionConfig,
    spec: ModelSpec,
    names: Names,
    cluster: Cluster,
    strategy: Strategy,
) -> Compute:
    """The calibration of ``spec`` on ``cluster``'s GPU for ``strategy``'s batch and
    precision, re-timed for the job's stack, TF32 setting, DALI and anchor."""
    choice = None
    if names.file is not None:
        prof = calibration_use.for_cluster(names.file, w.calibration, cluster)
        source = str(w.calibration)
    else:
        prof, choice = find_profile_and_choice(
            spec, cluster.device, strategy.batch_per_gpu, strategy.precision
        )
        source = prof.path or prof.provenance.get("from_file")
    stack = job_stack(x, cluster.device, strategy.precision, w.tf32)
    tf32_off = not w.tf32 and tf32_applies(cluster.device, strategy.precision)
    prof = restack.for_job(prof, spec, cluster.device, stack, tf32_off)
    if strategy.data == "real" and strategy.input_pipeline == "dali":
        dali_s = restack.dali_gpu_s(cluster.device, strategy.batch_per_gpu, strategy.precision)
        prof = restack.with_dali(prof, dali_s)
    workload = _workload(spec, strategy, prof, w.single_gpu_throughput)
    return Compute(workload, source, choice, stack)


def tf32_applies(device: DeviceSpec, precision: str) -> bool:
    """Whether TF32 is in play: fp32 on a GPU with TF32 tensor cores (Ampere and later)."""
    return precision == "fp32" and device.peak_tf32_flops is not None


def job_stack(x: ExecutionConfig, device: DeviceSpec, precision: str, tf32: bool) -> Stack:
    """The software stack of the execution on ``device`` at ``precision``: the framework's
    defaults for the layout and fusion it leaves None; a combination the library cannot run
    is a :class:`ConfigError` (:func:`ddlsim.compute.stack.resolve`)."""
    return resolve_stack(x.framework, x.layout, x.fusion, device, precision, tf32)


def _workload(
    spec: ModelSpec, strategy: Strategy, prof: ModelProfile, single_ips: float | None
) -> Workload:
    if single_ips is not None:
        prof = prof.scaled((strategy.batch_per_gpu / single_ips) / prof.step_time_s)
        prof = _with_provenance(prof, single_ips)
        profile_io.check(prof, f"the calibration rescaled to {single_ips:g} images/s on 1 GPU")
    return Workload.build(spec, prof)


def _with_provenance(prof: ModelProfile, single_ips: float) -> ModelProfile:
    provenance: dict[str, Any] = {
        "method": "anchored-by-user",
        "single_gpu_images_per_sec": single_ips,
        "base": prof.provenance,
    }
    return replace(prof, provenance=provenance)
