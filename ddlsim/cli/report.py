"""Human-readable report of a prediction."""

from __future__ import annotations

from typing import Any

from ddlsim.api import Prediction
from ddlsim.cli.report_failures import failure_lines
from ddlsim.cli.report_transformer import transformer_lines
from ddlsim.comm import SHARDED_METHODS
from ddlsim.comm.nccl import NcclVersion
from ddlsim.comm.nccl_nvls import SINCE as NVLS_SINCE
from ddlsim.config.track_record import format_absolute_line, format_line
from ddlsim.system import catalog
from ddlsim.workload.ttt import format_duration

#: how fp32 ran, where TF32 is in play (inputs["tf32"]; None elsewhere)
_TF32 = {True: " (TF32 tensor cores)", False: " (TF32 off)"}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms"


def _count(n: int, noun: str) -> str:
    """``1 node``, ``32 nodes``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _calibration_source(cal: dict[str, Any], source: dict[str, Any] | None) -> str:
    """The calibration file used, or the file a derived calibration was computed from."""
    if cal["file"]:
        return str(cal["file"])
    provenance = cal.get("provenance") or {}
    while isinstance(provenance, dict):  # follow "base" through re-anchorings
        if provenance.get("from_file"):
            return f"derived from batch {provenance.get('from_batch')} of {provenance['from_file']}"
        provenance = provenance.get("base")
    if source:
        return f"derived from {source['path']}"
    return "derived in memory"


#: what each schedule does, for the report (ddlsim.execution.schedules)
_SCHEDULE_WORDS = {
    "horovod": "tensor fusion at each cycle",
    "bsp": "every exchange after the backward pass",
    "wfbp": "each tensor as soon as it is ready",
    "mg-wfbp": "tensors merged where merging shortens the iteration (MG-WFBP)",
    "bytescheduler": "priority partitions",
    "layer": "each layer's gradients as soon as its backward pass ends",
    "ddp": "DistributedDataParallel's buckets, each launched when its last gradient is ready",
}


def _schedule(i: dict[str, Any]) -> str:
    """``bytescheduler: priority partitions of 3.9 MiB`` (``auto`` says what it resolved to)."""
    effective = i.get("effective_schedule", "horovod")
    words = _SCHEDULE_WORDS.get(effective, effective)
    if effective == "ddp":
        words += f" (first {i['first_bucket_mb']:g} MiB, then {i['bucket_cap_mb']:g} MiB)"
    if effective == "bytescheduler":
        words += f" of {i['partition_mb'] * 2**20:,.0f} bytes, next forward waits per layer"
    name = f"auto = {effective}" if i.get("schedule") == "auto" else effective
    return f"{name}: {words}"


def _user_lines(user: dict[str, Any] | None) -> list[str]:
    """What the search did with the user's own calibration file of this configuration
    (:mod:`ddlsim.calibration.store`): used, and the shipped file it shadows, or passed over."""
    if user is None:
        return []
    pad = " " * 19
    if user["used"] and user["shadows"]:
        lines = [f"{pad}your own file, shadowing the shipped {user['shadows']}: {user['reason']}"]
    elif user["used"]:
        lines = [f"{pad}your own file (user calibration directory)"]
    else:
        lines = [f"{pad}not your {user['file']}: {user['reason']} (--calibration FILE uses yours)"]
    return [*lines, f"{pad}'ddlsim calibrations' lists your files; delete one to stop using it"]


def _nccl_choices(ops: list[dict[str, Any]]) -> str:
    """``; ran ring/LL x 3, tree/Simple x 51`` from the ops' labels (empty without NCCL)."""
    counts: dict[str, int] = {}
    for op in ops:
        if "algorithm" in op:
            key = f"{op['algorithm']}/{op['protocol']}"
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return ""
    return "; ran " + ", ".join(f"{k} x {n}" for k, n in sorted(counts.items()))


def _nccl_line(i: dict[str, Any], ops: list[dict[str, Any]]) -> str:
    """The NCCL release and choices; for ``replicated-nccl`` TensorFlow's NCCL 1 ring."""
    if "nccl1_ring_GBps" in i:
        hop = ", a hop staged through host memory" if i["nccl1_ring_staged"] else ""
        return (
            f"    nccl           1.x (TensorFlow's own ops): one ring in device order, "
            f"{i['nccl1_ring_GBps']:.1f} GB/s{hop}{_nccl_choices(ops)}"
        )
    return (
        f"    nccl           {i['nccl_version']}: algorithm {i['algorithm']}, protocol "
        f"{i['nccl_protocol']}{_nccl_choices(ops)}{_nvls_hint(i)}"
    )


def _nvls_hint(i: dict[str, Any]) -> str:
    """A note where the node's switch reduces in the switch (NVLink SHARP) but the release
    predates it: the default 2.14 on an HGX H100 / B200 is costed without NVLS."""
    intra = i.get("intra_node")
    if not intra or (i.get("gpus_per_node") or 1) < 2 or not catalog.intra_link(intra).nvls:
        return ""
    first = NcclVersion(*min(NVLS_SINCE.values()))
    if NcclVersion.parse(i["nccl_version"]) >= first:
        return ""
    return f" (no NVLink SHARP before NCCL {first}: --nccl-version 2.19+ has it)"


def _nics(inputs: dict) -> str:
    """``4 NICs x `` before a multi-rail node's per-NIC bandwidth; nothing for one NIC."""
    n = inputs.get("nics_per_node") or 1
    return f"{n} NICs x " if n > 1 else ""


def _datasheet_line(inputs: dict) -> list[str]:
    """The catalog entries only a datasheet vouches for (none: no line)."""
    names = inputs.get("datasheet_only")
    if not names:
        return []
    return [f"    datasheet-only {', '.join(names)} (no measured run checks them yet)"]


def _stack_line(inputs: dict) -> list[str]:
    """The software stack the compute is timed for (framework, layout, operator fusion)."""
    st = inputs.get("stack")
    if not st:
        return []
    return [f"    stack          {st['framework']}: layout {st['layout']}, fusion {st['fusion']}"]


def _input_line(inputs: dict) -> list[str]:
    """The host decode rate that real data assumes, or DALI's GPU work (none for synthetic
    data)."""
    rate = inputs.get("host_input_images_per_s")
    dali_s = (inputs.get("calibration") or {}).get("provenance", {}).get("dali_gpu_s")
    if inputs.get("data") == "real" and inputs.get("input_pipeline") == "dali" and dali_s:
        return [f"    input          DALI on the GPUs: {_ms(dali_s)} of GPU work a batch"]
    if not rate:
        return []
    if (inputs.get("predict_kwargs") or {}).get("host_input_images_per_s") is not None:
        why = "--host-input-rate"
    else:
        kind = inputs.get("preprocessing_kind") or "crop-flip"
        why = f"estimate: {kind} on the host's threads; --host-input-rate"
    return [f"    input          host decode {rate:,.0f} images/s per node ({why})"]


def _network_calibration_lines(cal: dict[str, Any] | None) -> list[str]:
    """The network calibration a prediction used: file, what it fitted, from which logs."""
    if not cal:
        return []
    parts = []
    for scope, term in (cal.get("terms") or {}).items():
        bw, lat = term.get("bandwidth_GBps"), term.get("latency_us")
        got = [f"{bw:g} GB/s" if bw is not None else "", f"{lat:g} us" if lat is not None else ""]
        parts.append(f"{scope} {', '.join(g for g in got if g) or 'nothing determined'}")
    where = cal.get("cluster") or {}
    logs = len(cal.get("sources") or [])
    return [
        f"    network cal    {cal.get('file')} (sha256 {str(cal.get('sha256'))[:12]})",
        f"                   {'; '.join(parts)} from {logs} {cal.get('library')} log(s) on "
        f"{where.get('inter_node')} {where.get('transport') or ''}".rstrip(),
    ]


def _unit(inputs: dict[str, Any]) -> str:
    """What one sample is: an image for a CNN, a sequence for a transformer."""
    return "samples" if inputs.get("transformer") else "images"


def _budget(i: dict[str, Any]) -> str:
    """What the time to train counts: a CNN's epochs, a transformer's tokens."""
    if "train_tokens" not in i:
        return f"{i['epochs']:g} epochs x {i['dataset_images']:,} {_unit(i)}"
    tokens = f"{_si(i['train_tokens'])} tokens"
    return tokens if i["train_tokens_stated"] else f"{tokens}: 20 a parameter, Chinchilla-optimal"


def _si(n: float) -> str:
    """``6.7 B``, ``1.4 T``: a count for people."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g} {suffix}"
    return f"{n:.3g}"


def format_prediction(p: Prediction) -> str:
    """Multi-line text report: throughput, breakdown, assumptions."""
    lines = [
        *_summary_lines(p),
        *_breakdown_lines(p),
        *transformer_lines(p.inputs),
        *failure_lines(p.resilience),
        *_assumption_lines(p),
        *_measured_error_lines(p),
        "",
    ]
    return "\n".join(lines)


def _summary_lines(p: Prediction) -> list[str]:
    """The headline: the job, its throughput, iteration time, scaling and time to train."""
    i = p.inputs
    return [
        f"ddlsim prediction: {i['model']} on {i['n_gpus']} x {i['gpu']} "
        f"({_count(i['nodes'], 'node')} x {_count(i['local_gpus'], 'GPU')}), {i['comm']}",
        "",
        f"  throughput          {p.images_per_sec:12.1f} {_unit(i)}/s",
        f"  iteration time      {_ms(p.iteration_time_s)}",
        f"  scaling efficiency  {100 * p.scaling_efficiency:11.1f} %   "
        f"(1 GPU: {p.single_gpu_images_per_sec:.1f} {_unit(i)}/s)",
        f"  time to train       {format_duration(p.time_to_train_s):>12}   ({_budget(i)}, "
        "no failures)",
        "",
    ]


def _breakdown_lines(p: Prediction) -> list[str]:
    """Where the iteration goes: compute, communication, sync wait, input stall (ms and %)."""
    b = p.breakdown
    it = p.iteration_time_s
    lines = [
        "  where the iteration goes",
        f"    compute                     {_ms(b['compute_s'])}  "
        f"{100 * b['compute_s'] / it:5.1f} %",
        f"      communication hidden      {_ms(b['comm_hidden_s'])}  (overlapped with backprop)",
        f"      node contention           {_ms(b.get('contention_s', 0.0))}  "
        "(GPUs sharing a node; part of compute)",
        f"      comm interference         {_ms(b.get('interference_s', 0.0))}  "
        "(collectives holding SMs; part of compute)",
        *_offload_lines(b, "cpu_optimizer_s"),
        f"    communication exposed       {_ms(b['comm_exposed_s'])}  "
        f"{100 * b['comm_exposed_s'] / it:5.1f} %",
        *_offload_lines(b, "offload_copy_s"),
        f"    coordination / sync wait    {_ms(b['coordination_s'])}  "
        f"{100 * b['coordination_s'] / it:5.1f} %",
        f"      waiting for slowest rank  {_ms(b.get('straggler_wait_s', 0.0))}  "
        "(per-rank variability)",
    ]
    if b["input_stall_s"] > 0:
        lines.append(
            f"    input pipeline stall        {_ms(b['input_stall_s'])}  "
            f"{100 * b['input_stall_s'] / it:5.1f} %"
        )
    return lines


#: a CPU offload's parts of the breakdown: (label, what it is part of)
_OFFLOAD_PARTS = {
    "cpu_optimizer_s": ("cpu optimizer step", "offload: the host's step; part of compute"),
    "offload_copy_s": ("offload copies", "PCIe host<->GPU in flight, hidden or exposed"),
}


def _offload_lines(b: dict[str, float], key: str) -> list[str]:
    """The line of a CPU offload's part ``key`` of the breakdown (none without an offload)."""
    if key not in b:
        return []
    label, note = _OFFLOAD_PARTS[key]
    return [f"      {label:<26}{_ms(b[key])}  ({note})"]


def _assumption_lines(p: Prediction) -> list[str]:
    """The assumptions: hardware, method, schedule, versions, batch, calibration, engine."""
    i = p.inputs
    cal = i["calibration"]
    source = i.get("calibration_source")
    n_ops = len(p.comm_ops)
    total_bytes = sum(op["nbytes"] for op in p.comm_ops)
    return [
        "",
        "  assumptions",
        f"    GPU            {i['gpu']} ({i.get('gpu_name', '')})",
        f"    intra-node     {i['intra_node']}"
        + (
            f", {i['intra_bandwidth_GBps']:.1f} GB/s per GPU"
            if i.get("intra_bandwidth_GBps")
            else ""
        )
        + (f" ({i['one_gpu_nodes']})" if i.get("one_gpu_nodes") else ""),
        f"    inter-node     {i['inter_node']}"
        + (
            f", {_nics(i)}{i['nic_bandwidth_Gbps']:.1f} Gb/s effective, {i['transport']}"
            if i.get("nic_bandwidth_Gbps")
            else ""
        )
        + (f" (default: {i['network_default']})" if i.get("network_default") else ""),
        *_datasheet_line(i),
        f"    method         {i['comm']} ({i['comm_model']}), {n_ops} op(s)/iteration, "
        f"{total_bytes / 1e6:.1f} MB/iteration",
        *_schedule_lines(i),
        _nccl_line(i, p.comm_ops),
        f"    sync           rank sigma {i['rank_sigma']:g}, host contention "
        f"{100 * i['host_contention']:g} %, interference {'on' if i['interference'] else 'off'}",
        f"    batch          {i['batch_per_gpu']} per GPU, {i['precision']}"
        f"{_TF32.get(i.get('tf32'), '')}, {i['data']} data, "
        f"gradients {i['grad_dtype']}",
        *_stack_line(i),
        *_input_line(i),
        f"    calibration    {cal['method']}: {_calibration_source(cal, source)}",
        f"                   {cal['device_rule']}",
        *_network_calibration_lines(i.get("network_calibration")),
        *_user_lines(cal.get("user")),
        f"    engine         {i['engine']}",
    ]


def _schedule_lines(i: dict[str, Any]) -> list[str]:
    """How the exchange is scheduled: a sharded method's units, prefetch and dtypes, or the
    schedule and Horovod's knobs."""
    sh = i.get("sharding")
    if not sh:
        return [f"    schedule       {_schedule(i)}", *_horovod_line(i)]
    if sh["method"] == "fsdp":
        how = (
            f"{sh['sharding']}, {sh['unit_blocks']} block(s) per unit, backward prefetch "
            f"{sh['backward_prefetch']}, forward prefetch "
            f"{'on' if sh['forward_prefetch'] else 'off'}, limit_all_gathers "
            f"{'on' if sh['limit_all_gathers'] else 'off'}"
        )
    else:
        how = (
            f"DeepSpeed ZeRO stage {sh['method'][-1]}, overlap_comm "
            f"{'on' if sh['overlap_comm'] else 'off'}, contiguous_gradients "
            f"{'on' if sh.get('contiguous_gradients', True) else 'off'}, buckets "
            f"{sh['reduce_bucket_elements']:,} (reduce) / {sh['allgather_bucket_elements']:,} "
            "(all-gather) elements"
        )
    return [
        f"    sharding       {how}; state over {sh['shards']} GPUs; parameters gathered in "
        f"{8 * sh['param_bytes']}-bit, gradients reduced in {8 * sh['reduce_bytes']}-bit",
        *_offload_line(sh),
    ]


def _offload_line(sh: dict[str, Any]) -> list[str]:
    """A CPU offload's host step: what it moves and how fast (none without an offload)."""
    if sh.get("offload", "none") == "none":
        return []
    return [
        f"    offload        {sh['offload']} on the host: optimizer step "
        f"{sh['host_step_bytes']:g} B/parameter of DRAM traffic at "
        f"{sh['host_step_Bps'] / 1e9:.1f} GB/s per rank; shards copied over PCIe from "
        f"{'pinned' if sh['pin_memory'] else 'pageable'} host memory"
    ]


def _horovod_line(i: dict[str, Any]) -> list[str]:
    """Horovod's release and knobs (fusion MiB, cycle ms, ...); nothing for DDP."""
    if i["comm"] == "ddp":
        return []
    return [
        f"    horovod        {i['horovod_version']}: fusion "
        f"{i['fusion_threshold_mb']:g} MiB, cycle {i['cycle_time_ms']:g} ms, negotiation "
        f"{i['negotiation']}, hierarchical {'on' if i['hierarchical'] else 'off'}"
    ]


def _measured_error_lines(p: Prediction) -> list[str]:
    """The measured error quoted for this kind of prediction (ddlsim validate's scores)."""
    quoted = ["  measured error (ddlsim validate)"]
    record = p.track_record
    if record is not None:
        how = "anchored to measured 1-GPU runs"
        if p.inputs.get("transformer") and record["comm"] in SHARDED_METHODS:
            how = "--absolute: the whole step, no anchor"
        quoted.append(f"    scaling        {format_line(record)} ({how})")
    quoted.append(
        f"    1-GPU compute  {format_absolute_line(p.compute_record)} (--absolute: no anchor)"
    )
    return quoted
