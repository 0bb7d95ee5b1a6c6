"""Shared test fixtures: hand-built clusters (no catalog) and hypothesis strategies for them."""

from __future__ import annotations

from hypothesis import strategies as st

from ddlsim.system.specs import Cluster, DeviceSpec, Hop

DUMMY_DEVICE = DeviceSpec(
    id="dummy",
    name="Dummy GPU",
    peak_fp32_flops=10e12,
    peak_fp16_flops=None,
    mem_bandwidth_Bps=500e9,
    memory_bytes=16 * 2**30,
    host_link="pcie3",
)


def make_cluster(
    n_gpus: int,
    gpus_per_node: int = 8,
    *,
    intra_Bps: float = 20e9,
    intra_latency_s: float = 5e-6,
    nic_Bps: float = 1.25e9,
    nic_latency_s: float = 30e-6,
    host_Bps: float = 12e9,
    host_latency_s: float = 10e-6,
    gpus_per_pcie_switch: int = 2,
    nics_per_node: int = 1,
    host_reduce_Bps: float = 10e9,
) -> Cluster:
    """A homogeneous cluster with a dummy GPU; ``intra`` / ``nic`` hops are set only where the
    cluster has more than one GPU per node / more than one node."""
    local = min(n_gpus, gpus_per_node)
    n_nodes = n_gpus // local
    return Cluster(
        device=DUMMY_DEVICE,
        n_gpus=n_gpus,
        gpus_per_node=gpus_per_node,
        intra_link="test-intra",
        inter_link="test-net",
        transport="rdma",
        intra=Hop(intra_Bps, intra_latency_s) if local > 1 else None,
        nic=Hop(nic_Bps, nic_latency_s) if n_nodes > 1 else None,
        host=Hop(host_Bps, host_latency_s),
        gpus_per_pcie_switch=gpus_per_pcie_switch,
        nics_per_node=nics_per_node,
        host_reduce_Bps=host_reduce_Bps,
    )


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 16, min_gpus: int = 2) -> Cluster:
    """Clusters of 1..max_nodes nodes of 1, 2, 4 or 8 GPUs with varied link speeds."""
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, max_nodes))
    if per_node * nodes < min_gpus:
        nodes = -(-min_gpus // per_node)
    switch = draw(st.sampled_from([s for s in (1, 2, 3, 4) if s <= per_node]))
    return make_cluster(
        per_node * nodes,
        per_node,
        intra_Bps=draw(st.sampled_from([10e9, 25e9, 130e9])),
        intra_latency_s=draw(st.sampled_from([2e-6, 8e-6])),
        nic_Bps=draw(st.sampled_from([1.25e9, 3.1e9, 12.5e9])),
        nic_latency_s=draw(st.sampled_from([5e-6, 40e-6])),
        host_Bps=draw(st.sampled_from([6e9, 12e9, 24e9])),
        gpus_per_pcie_switch=switch,
        nics_per_node=draw(st.sampled_from([1, 2])),
        host_reduce_Bps=draw(st.sampled_from([5e9, 20e9])),
    )


#: message sizes from latency-bound to bandwidth-bound (bytes)
sizes = st.sampled_from([1.0, 4e3, 256e3, 4e6, 64e6, 400e6]) | st.floats(1.0, 1e9)
