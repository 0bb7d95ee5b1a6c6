"""The system knobs: what it runs on (rows of :mod:`ddlsim.config.knobs`)."""

from __future__ import annotations

from ddlsim.calibration.profile import MIN_IMAGES_PER_SEC
from ddlsim.config.checks import Range, optional
from ddlsim.config.knob import (
    GPUS_MIN,
    RESTART,
    Applies,
    Knob,
    gpu_names,
)
from ddlsim.resilience import config as rc
from ddlsim.system import catalog
from ddlsim.system.catalog_files import MAX_GPUS, MAX_GPUS_PER_NODE, MAX_NICS_PER_NODE
from ddlsim.system.instances import instance, instance_names
from ddlsim.system.network_speeds import GRAMMAR as STATED_GRAMMAR
from ddlsim.system.specs import TRANSPORTS

#: the system group's knobs, in field order
ROWS: tuple[Knob, ...] = (
    Knob(
        "gpus",
        "system",
        1,
        "int | str",
        "--gpus",
        "total GPUs (default: 1); min: the fewest whole nodes (or GPUs of one node) on which a "
        "transformer's step fits the GPUs' memory",
        check=lambda v: v == GPUS_MIN or catalog.check_count("gpus", v, MAX_GPUS),
        parse="int-or-min",
        metavar="N|min",
        words={GPUS_MIN: GPUS_MIN},
    ),
    Knob(
        "gpu",
        "system",
        None,
        "str | None",
        "--gpu",
        lambda: (
            f"GPU type: {gpu_names()} (default: the --calibration file's, else p100 = "
            "p100-sxm2, DGX-1)"
        ),
        names=catalog.device_names,
    ),
    Knob(
        "instance",
        "system",
        None,
        "str | None",
        "--instance",
        lambda: (
            "a cloud instance type, which sets --gpu, --gpus-per-node, --intra-node, "
            f"--inter-node and --nics-per-node from its provider's table: "
            f"{', '.join(instance_names())}"
        ),
        check=optional(lambda v: instance(v)),
        metavar="TYPE",
    ),
    Knob(
        "gpus_per_node",
        "system",
        None,
        "int | None",
        "--gpus-per-node",
        "GPUs per node (default: min(gpus, the GPU's reference server's: 8; 16 for "
        "v100-sxm3, 72 for gb200, one NVL72 NVLink domain))",
        check=optional(lambda v: catalog.check_count("gpus_per_node", v, MAX_GPUS_PER_NODE)),
        parse="int",
    ),
    Knob(
        "intra_node",
        "system",
        None,
        "str | None",
        "--intra-node",
        lambda: (
            f"GPU-to-GPU fabric: {', '.join(catalog.intra_link_names())} (default: the "
            "GPU's usual server)"
        ),
        names=catalog.intra_link_names,
    ),
    Knob(
        "inter_node",
        "system",
        None,
        "str | None",
        "--inter-node",
        lambda: (
            f"network: {', '.join(catalog.inter_link_names())}, or a stated speed: "
            f"{STATED_GRAMMAR} (default when multi-node: the GPU's reference server's, "
            "e.g. 8 x ib-ndr for h100; ib-edr for GPUs without one)"
        ),
        check=optional(lambda v: catalog.network(v)),
        metavar="NETWORK",
    ),
    Knob(
        "transport",
        "system",
        None,
        "str | None",
        "--transport",
        "tcp or rdma (default: the network's usual one)",
        names=lambda: TRANSPORTS,
    ),
    Knob(
        "nics_per_node",
        "system",
        None,
        "int | None",
        "--nics-per-node",
        "network adapters per node, their bandwidth added up (multi-rail; DGX-1 4, DGX-2 "
        "and DGX A100/H100 8; default: the reference server's with the default network, "
        "else 1)",
        check=optional(lambda v: catalog.check_count("nics_per_node", v, MAX_NICS_PER_NODE)),
        parse="int",
        metavar="N",
        applies=Applies(
            lambda c: int(c.get("nodes") or 2) > 1,
            "network adapters matter only between nodes",
            ("gpu", "gpus", "gpus_per_node"),
        ),
    ),
    Knob(
        "host_input_images_per_s",
        "system",
        None,
        "float | None",
        "--host-input-rate",
        "real data: images/s one node's host CPUs decode (default: the reference server's "
        "hardware threads x 100 for crop-flip at 224 px, scaled by --preprocessing)",
        check=optional(
            Range(
                "host input rate",
                MIN_IMAGES_PER_SEC,
                1e9,
                text=f"a number of images/s in {MIN_IMAGES_PER_SEC:g}..1e9",
            )
        ),
        unit="images/s",
        parse="number",
        metavar="IMG_PER_S",
        dest="host_input_rate",
        sweep=False,
        applies=Applies(
            lambda c: c.get("data") == "real" and c.get("input_pipeline") == "host",
            "it applies to --data real decoded by the host",
            ("data", "input_pipeline"),
        ),
    ),
    Knob(
        "network_calibration",
        "system",
        None,
        "str | None",
        "--network-calibration",
        "network calibration file ('ddlsim calibrate network'): its fitted link bandwidth "
        "and latency replace the catalog's on the network (and fabric) it measured",
        metavar="FILE",
    ),
    Knob(
        "node_mtbf_hours",
        "system",
        rc.DEFAULT_NODE_MTBF_HOURS,
        "float",
        "--node-mtbf-hours",
        "each node's mean time between failures; 0 or none: no failures (default: "
        f"{rc.DEFAULT_NODE_MTBF_HOURS:,.0f}, Llama 3's 419 interruptions in 54 days x its "
        "2,048 nodes; Kokolis et al. 2024's research clusters: about 1,024)",
        check=rc.check_node_mtbf_hours,
        unit="h",
        parse="mtbf",
        metavar="H",
        words={"none": 0.0},
        failure=True,
    ),
    Knob(
        "checkpoint_write_GBps",
        "system",
        rc.DEFAULT_CHECKPOINT_WRITE_GBPS,
        "float",
        "--checkpoint-write-GBps",
        "checkpoint write (and read) bandwidth of a node, GB/s (default: "
        f"{rc.DEFAULT_CHECKPOINT_WRITE_GBPS:g}, Llama 3's 2 TB/s store over its 2,048 nodes)",
        check=lambda v: rc.check_range(
            "checkpoint write bandwidth",
            v,
            rc.MIN_CHECKPOINT_WRITE_GBPS,
            rc.MAX_CHECKPOINT_WRITE_GBPS,
            "GB/s",
        ),
        unit="GB/s",
        parse="positive",
        metavar="GBPS",
        applies=RESTART,
        failure=True,
    ),
    Knob(
        "checkpoint_time_s",
        "system",
        None,
        "float | None",
        "--checkpoint-time-s",
        "a measured checkpoint write time, in place of size / bandwidth",
        check=optional(lambda v: rc.check_duration("checkpoint write time", v, "s", 1.0)),
        unit="s",
        parse="positive",
        metavar="S",
        applies=RESTART,
        failure=True,
    ),
)
