"""Writing the record folder (``traces/horovod``): logs, trimmed timelines, ``runs.csv``,
``results.json``, ``machine.json`` and the README, each atomically; the summary on stdout.
"""

from __future__ import annotations

import argparse
from typing import Any

from ddlsim.tools.hvdlocal import COMM, CPU_DEVICE_ID, INTRA_NODE
from ddlsim.tools.hvdlocal.outputs import write_json, write_text
from ddlsim.tools.hvdlocal.record import KEEP_ITERATIONS, run_row
from ddlsim.tools.hvdlocal.stages import PREFIX
from ddlsim.tools.hvdlocal.workers import INTER_OP_THREADS, INTRA_OP_THREADS


def _readme(args: argparse.Namespace, info: dict, results: dict, table: str, cmd: str) -> str:
    v = info["versions"]
    cpu = info["cpu"]
    mem = info["memory_bytes"] or 0
    sweep = results.get("sweep_fit") or {}
    link = results.get("loopback_link") or {}
    lines = [
        "# Measured Horovod runs on this machine's CPU (Gloo, localhost)",
        "",
        f"Written by `{cmd}` (`scripts/horovod_local.sh` installs `ddlsim[horovod]` and runs "
        "it) on " + info["date_utc"] + ". Re-running it replaces every file here and the "
        f"calibration `{results['calibration']['file']}`.",
        "",
        "## What ran",
        "",
        f"- Model `{args.model}` (the zoo's Keras model, as `ddlsim calibrate` profiles it), "
        f"batch {args.batch} per worker, fp32, synthetic data, momentum SGD.",
        f"- Horovod data-parallel training, `horovodrun -np N -H localhost:N --gloo`, N = "
        f"{', '.join(map(str, args.workers))}; {args.warmup_batches} warm-up steps, then "
        f"{args.iters} timed iterations of {args.batches_per_iter} steps; Horovod 0.28.1 "
        "defaults (fusion 128 MiB, cycle 1 ms).",
        "- One core per worker everywhere: each worker pinned to its own core, TensorFlow "
        f"with {INTRA_OP_THREADS} intra-op and {INTER_OP_THREADS} inter-op thread; the "
        "calibration pinned to one core with the same threads. Horovod's background thread "
        "and Gloo's TCP I/O share the worker's core.",
        "",
        "## Machine and versions",
        "",
        f"- CPU: {cpu.get('model_name')} (family {cpu.get('cpu_family')}, model "
        f"{cpu.get('model')}, stepping {cpu.get('stepping')}), {cpu.get('logical_cpus')} "
        f"logical CPUs, flags {', '.join(cpu.get('flags', []))}",
        f"- RAM {mem / 2**30:.1f} GiB; kernel {info['kernel']}; {info['os']}",
        f"- Python {v['python']}, TensorFlow {v.get('tensorflow-cpu') or v.get('tensorflow')}, "
        f"Keras {v['keras']}, Horovod {v['horovod']}, NumPy {v['numpy']}, ddlsim {v['ddlsim']}"
        + (f" (git {info['git']['commit'][:12]})" if info.get("git") else ""),
        f"- Load average before / after: {results['load_before']} / {results['load_after']} "
        "(the machine was shared; see the top-level README)",
        "",
        "## Results (images/s over all workers)",
        "",
        "```",
        table.rstrip(),
        "```",
        "",
        "`calibrated`: ddlsim from the calibration alone; `anchored`: compute anchored to the "
        "measured 1-worker run (what `ddlsim validate runs.csv` predicts). A CPU worker's core "
        "also moves and sums the gradients, so ddlsim never hides its communication behind "
        "backprop.",
        "",
        f"Loopback link fitted from the allreduce sweep ({sweep.get('n_ranks')} ranks): "
        f"{link.get('bandwidth_GBps')} GB/s raw TCP, Gloo hop efficiency "
        f"{link.get('efficiency')}, {link.get('latency_us')} us per ring step (max relative "
        f"residual {sweep.get('max_rel_residual', 0):.0%}).",
        "",
        "## Files",
        "",
        "- `runs.csv`: the measured rows (measured-runs schema of `traces/measured/README.md`; "
        f"beyond its vocabulary: gpu `{CPU_DEVICE_ID}`, a CPU worker; intra_node "
        f"`{INTRA_NODE}`; comm `{COMM}`)",
        "- `results.json`: measured, predicted, timeline phases, the sweep fit",
        "- `train_npN.log`, `calibrate.log`, `sweep.log`, `probes.log`: raw output",
        f"- `timeline_npN.json`: Horovod timelines, trimmed to {KEEP_ITERATIONS} timed steps",
        "- `allreduce_sweep.json`, `probes.json`: the link and core measurements",
        "- `machine.json`: machine, versions, `horovodrun --check-build`, the command",
        "",
        "`python -m ddlsim.tools.hvdlocal --report-only` predicts this record again with the "
        "installed ddlsim (no measurement) and rewrites `results.json`'s predictions and this "
        "README; `ddlsim validate traces/horovod/runs.csv` predicts the 2-worker row with the "
        "catalog's figures, which should be this run's (`results.json`: `cpu_device`, "
        "`loopback_link`).",
        "",
    ]
    return "\n".join(lines)


def write(args, work, record, info, probes, sweep) -> None:
    """The whole record folder: logs, trimmed timelines, measurements, ``runs.csv``, report."""
    from ddlsim.tools.traces.logs import parse_log
    from ddlsim.tools.validate.runs import format_rows

    out = args.out
    trimmed = record.pop("trimmed_timelines")
    rows = []
    for n in args.workers:
        name = f"train_np{n}.log"
        text = (work / name).read_text(encoding="utf-8", errors="replace")
        rows.append(run_row(args, n, name, text, parse_log(text, name)))
        write_text(out / name, text)
        write_text(out / f"timeline_np{n}.json", trimmed[n])
    for name in ("calibrate.log", "probes.log", "sweep.log"):
        if (work / name).exists():
            write_text(out / name, (work / name).read_text(encoding="utf-8", errors="replace"))
    write_json(out / "probes.json", probes)
    if sweep is not None:
        write_json(out / "allreduce_sweep.json", sweep)
    write_json(out / "machine.json", info)
    write_text(out / "runs.csv", format_rows(rows))
    write_report(args, record, info)


def write_report(args: argparse.Namespace, record: dict[str, Any], info: dict) -> None:
    """results.json and README.md, and the summary on stdout."""
    out = args.out
    table = record.pop("table")
    write_json(out / "results.json", record)
    write_text(out / "README.md", _readme(args, info, record, table, record["command"]))
    print(f"\n{PREFIX}: {args.model}, batch {args.batch} per worker, images/s over all workers")
    print(table, end="")
    link = record.get("loopback_link")
    if link:
        print(
            f"loopback link (links.json 'loopback'): bandwidth_GBps {link['bandwidth_GBps']}, "
            f"efficiency {link['efficiency']}, latency_us {link['latency_us']}"
        )
    _compare_catalog(link, record["cpu_device"])
    ts = record["timeline_steady_state"]
    for n in args.workers:
        p = record["predicted"][str(n)]
        print(
            f"{n} worker(s): timeline allreduce {_ms(ts[str(n)].get('allreduce_s'))} ms/step, "
            f"negotiation {_ms(ts[str(n)].get('negotiate_s'))} ms/step; ddlsim comm "
            f"{_ms(p['comm_s_per_iteration'])} ms/step ({_ms(p['comm_hidden_s'])} hidden)"
        )
    print(f"wrote {out}/ and {record['calibration']['file']}")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _compare_catalog(link: dict[str, float] | None, device: dict[str, float]) -> None:
    """Say which catalog figures differ from this run's (the predictions used this run's)."""
    from ddlsim.system import catalog

    dev = catalog.device(CPU_DEVICE_ID)
    have = {
        f"devices.json {CPU_DEVICE_ID} peak_fp32_TFLOPS": (
            dev.peak_fp32_flops / 1e12,
            device["peak_fp32_TFLOPS"],
        ),
        f"devices.json {CPU_DEVICE_ID} mem_bandwidth_GBps": (
            dev.mem_bandwidth_Bps / 1e9,
            device["mem_bandwidth_GBps"],
        ),
    }
    if link is not None:
        spec = catalog.intra_link(INTRA_NODE)
        have.update(
            {
                "links.json loopback bandwidth_GBps": (
                    spec.nominal_bandwidth_Bps / 1e9,
                    link["bandwidth_GBps"],
                ),
                "links.json loopback efficiency": (spec.efficiency["tcp"], link["efficiency"]),
                "links.json loopback latency_us": (spec.latency_s["tcp"] * 1e6, link["latency_us"]),
            }
        )
    off = [f"{k}: {a:.6g} -> {b:.6g}" for k, (a, b) in have.items() if abs(a - b) > 1e-9]
    if off:
        print(
            f"{PREFIX}: the catalog's figures differ from this run's (the predictions above use "
            "this run's); to commit the run, set (and update the figures quoted in their "
            "sources):\n  " + "\n  ".join(off)
        )
