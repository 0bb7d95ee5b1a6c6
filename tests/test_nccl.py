"""NCCL's cost model: closed forms per algorithm and protocol, and each version's choice."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddlsim
from ddlsim.comm.nccl import (
    BASE_LATENCY_US,
    HOP_LATENCY_US,
    NcclVersion,
    Topology,
    candidates,
    choose,
    cost,
    ll_threshold_bytes,
    ring_latency_s,
    tree_correction,
    tree_latency_s,
)
from ddlsim.comm.nccl_tuning import channels_used
from ddlsim.errors import ConfigError, UnknownNameError

US = 1e-6


def topo(n_ranks=64, local=8, hop="nvlink", channels=4, bus=11.25e9, net_us=3.0, arch="pascal"):
    return Topology(
        n_ranks=n_ranks,
        n_nodes=max(1, n_ranks // local),
        local=min(local, n_ranks),
        intra_hop=hop,
        channels=channels,
        bus_Bps=bus,
        transport_latency_s=net_us * US,
        arch=arch,
    )


V21, V24, V214 = (NcclVersion.parse(v) for v in ("2.1", "2.4", "2.14.3"))


def test_ring_pays_the_network_only_on_its_node_crossings() -> None:
    """lat = base + (2(N-1) - 2(n-1)) intra + 2(n-1) net (LL: no plateau factor)."""
    t = topo(n_ranks=256, local=8)  # 32 nodes
    net = HOP_LATENCY_US["network"]["ring"]["LL"] + 3.0  # + the transport, once for LL
    intra = max(HOP_LATENCY_US["nvlink"]["ring"]["LL"], 1.0)  # multi-node floor: 1 us
    expected = BASE_LATENCY_US["ring"]["LL"] + (2 * 255 - 2 * 31) * intra + 2 * 31 * net
    assert ring_latency_s(t, "LL", 1e3) == pytest.approx(expected * US)


def test_one_gpu_per_node_rings_pay_the_trees_network_hop() -> None:
    """ppn = 1: every step crosses the network, fully exposed (tuning.cc: the tree's row)."""
    t = topo(n_ranks=4, local=1)  # 4 nodes of one GPU
    for p in ("LL", "LL128"):
        net = HOP_LATENCY_US["network"]["tree"][p] + 3.0
        expected = BASE_LATENCY_US["ring"][p] + 2 * 3 * net
        assert ring_latency_s(t, p, 1e3) == pytest.approx(expected * US)


def test_simple_flushes_once_more_and_pays_the_plateau_on_multinode_rings() -> None:
    t = topo(n_ranks=64, local=8)
    net = HOP_LATENCY_US["network"]["ring"]["Simple"] + 2 * 3.0
    intra = max(HOP_LATENCY_US["nvlink"]["ring"]["Simple"], 3.0)
    plain = BASE_LATENCY_US["ring"]["Simple"] + (126 - 14) * intra + 14 * net
    assert ring_latency_s(t, "Simple", 1e8) == pytest.approx(1.9 * plain * US)  # pre-Ampere
    assert ring_latency_s(replace(t, arch="ampere"), "Simple", 1e8) == pytest.approx(
        1.4 * plain * US
    )
    tiny = 63 * 4 * 64 - 1  # under 64 bytes per channel and rank: no plateau
    assert ring_latency_s(t, "Simple", tiny) == pytest.approx(plain * US)


def test_tree_latency_is_logarithmic_in_nodes() -> None:
    """lat = base + 2((g-1) intra + floor(log2 n) net)."""
    for nodes in (2, 16, 512):
        t = topo(n_ranks=8 * nodes, local=8)
        net = HOP_LATENCY_US["network"]["tree"]["LL"] + 3.0
        hops = 7 * HOP_LATENCY_US["nvlink"]["tree"]["LL"] + math.floor(math.log2(nodes)) * net
        expected = BASE_LATENCY_US["tree"]["LL"] + 2 * hops
        assert tree_latency_s(t, "LL") == pytest.approx(expected * US)


def test_bandwidth_terms_follow_the_protocols() -> None:
    t = topo(n_ranks=64, local=8, channels=4)
    s = 1e9
    ring = {p: cost(t, "ring", p, s).bandwidth_s for p in ("LL", "LL128", "Simple")}
    assert ring["Simple"] == pytest.approx(2 * 63 / 64 * s / t.bus_Bps)
    assert ring["LL"] == pytest.approx(2 * ring["Simple"])  # 4 data bytes per 8-byte line
    assert ring["LL128"] == pytest.approx(ring["Simple"] / 0.92)
    tree = cost(t, "tree", "Simple", s).bandwidth_s  # 1 GB: correction 0.9 (bucket 22)
    assert tree == pytest.approx(s / (min(0.92 * t.bus_Bps, 4 * 10e9) / 2 * 0.9))


def test_a_two_node_tree_loads_each_nic_with_s_not_2s() -> None:
    """Two nodes: each is the root of one tree and the leaf of the other, so its NIC moves S
    each way (network side 0.92 net); from three nodes an interior node moves 2S (NCCL's /2)."""
    s, net, intra = 1e9, 12.5e9, 120e9
    for nodes, halved in ((2, False), (3, True), (16, True)):
        t = replace(topo(n_ranks=8 * nodes, channels=6, bus=net), net_Bps=net, intra_Bps=intra)
        cap = 18.5e9 if nodes == 2 else 10e9  # Volta's per-channel tree ceiling, 2 / 3+ nodes
        network = 0.92 * net / (2 if halved else 1)
        algo = min(network, min(0.92 * intra, 6 * cap) / 2)
        assert cost(t, "tree", "Simple", s).bandwidth_s == pytest.approx(s / (algo * 0.9))
    two = replace(topo(n_ranks=16, channels=6, bus=net), net_Bps=net, intra_Bps=intra)
    three = replace(two, n_ranks=24, n_nodes=3)
    assert cost(two, "tree", "Simple", s).time_s < cost(three, "tree", "Simple", s).time_s


def test_a_two_node_tree_is_bound_by_the_fabric_when_the_nics_are_wide() -> None:
    t = replace(topo(n_ranks=16, channels=6, bus=20e9), net_Bps=400e9, intra_Bps=20e9)
    assert cost(t, "tree", "Simple", 1e9).bandwidth_s == pytest.approx(
        1e9 / (min(0.92 * 20e9, 6 * 26.5e9) / 2 * 0.9)
    )


def test_tree_correction_is_lowest_for_medium_sizes() -> None:
    for p in ("LL", "LL128", "Simple"):
        medium = min(tree_correction(p, 2.0**k) for k in range(16, 23))  # 64 KiB - 4 MiB
        assert 0.4 <= medium <= 0.6
        assert tree_correction(p, 64) >= 0.9 and tree_correction(p, 2**30) >= 0.9


def test_versions_offer_what_they_had() -> None:
    t = topo()
    assert {a for a, _ in candidates(V21, t)} == {"ring"}
    assert {a for a, _ in candidates(V24, t)} == {"ring", "tree"}
    assert {p for _, p in candidates(V214, t)} == {"LL", "Simple"}  # Pascal: no LL128
    assert {p for _, p in candidates(V214, replace(t, arch="volta"))} == {"LL", "LL128", "Simple"}
    with pytest.raises(ConfigError, match=r"NCCL 2.1 has no tree allreduce.*2\.4"):
        candidates(V21, t, "tree")
    with pytest.raises(ConfigError, match="LL128"):
        candidates(V24, replace(t, arch="volta"), protocol="LL128")
    with pytest.raises(UnknownNameError, match="NCCL algorithm"):
        candidates(V214, t, "halving")


def test_rings_only_nccl_switches_protocol_at_its_ll_threshold() -> None:
    t = topo(n_ranks=512, local=4, channels=2)
    limit = ll_threshold_bytes(t)
    assert limit == 32 * 256 * 2 * 512  # pre-Volta: 32 bytes per thread
    assert ll_threshold_bytes(replace(t, arch="volta")) == 2 * limit
    assert choose(t, V21, limit).protocol == "LL"
    assert choose(t, V21, limit + 1).protocol == "Simple"


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.sampled_from([1, 2, 4, 16, 128, 512]),
    local=st.sampled_from([1, 2, 4, 8]),
    nbytes=st.floats(8, 1e10),
    arch=st.sampled_from(["pascal", "volta", "ampere"]),
)
def test_tuned_nccl_picks_the_cheapest_pair(nodes, local, nbytes, arch) -> None:
    """2.5+: the choice is the minimum of NCCL's own estimate (all channels) over every
    available (algorithm, protocol); the call then runs on the channels its size gets, never
    faster than the estimate."""
    t = topo(n_ranks=nodes * local, local=local, arch=arch)
    if t.n_ranks < 2:
        return
    best = choose(t, V214, nbytes)
    estimate = cost(t, best.algorithm, best.protocol, nbytes)
    for a, p in candidates(V214, t):
        assert estimate.time_s <= cost(t, a, p, nbytes).time_s * (1 + 1e-12)
    used = channels_used(t.channels, best.algorithm, best.protocol, nbytes, t.n_ranks, t.bus_Bps)
    assert best.channels == used and best.time_s >= estimate.time_s * (1 - 1e-12)
    assert best.latency_s == pytest.approx(estimate.latency_s)
    # estimated by the same model, a newer NCCL never does worse than a rings-only one
    old = choose(t, V21, nbytes)
    assert estimate.time_s <= cost(t, "ring", old.protocol, nbytes).time_s * (1 + 1e-12)


def test_rings_before_the_tuning_model_pay_no_plateau() -> None:
    """The plateau factor belongs to the 2.5+ tuning model: a 2.1 or 2.4 ring SIMPLE call
    costs the plain latency, a 2.14 one 1.9x it (pre-Ampere)."""
    t = topo(n_ranks=512, local=4, channels=2)
    nbytes = 64e6  # SIMPLE under every version
    plain = ring_latency_s(t, "Simple", nbytes, plateau=False)
    assert ring_latency_s(t, "Simple", nbytes) == pytest.approx(1.9 * plain)
    for version in (V21, V24):
        ch = choose(t, version, nbytes, "ring")
        assert (ch.protocol, ch.latency_s) == ("Simple", pytest.approx(plain))
    assert choose(t, V214, nbytes, "ring", "Simple").latency_s == pytest.approx(1.9 * plain)


def test_version_strings() -> None:
    assert str(NcclVersion.parse(" 2.14.3 ")) == "2.14"
    assert NcclVersion.parse("2.4").generation == "trees"
    assert NcclVersion.parse("2.3").generation == "rings"
    assert NcclVersion.parse("2.5").generation == "tuned"
    for bad in ("1.3", "3.0", "two", "", "2"):
        with pytest.raises(ConfigError, match="NCCL version"):
            NcclVersion.parse(bad)


def test_every_fused_buffer_says_what_it_ran() -> None:
    p = ddlsim.predict("resnet50", 256)
    assert p.comm_ops and all({"algorithm", "protocol"} <= op.keys() for op in p.comm_ops)
    old = ddlsim.predict("resnet50", 256, nccl_version="2.1")
    assert {op["algorithm"] for op in old.comm_ops} == {"ring"}
    forced = ddlsim.predict("resnet50", 256, algorithm="ring", nccl_protocol="Simple")
    assert {(op["algorithm"], op["protocol"]) for op in forced.comm_ops} == {("ring", "Simple")}


def test_nccl_runs_over_rdma_where_the_nic_offers_it() -> None:
    """25 GbE: RoCE for NCCL, TCP for the methods that use sockets (gRPC)."""
    nccl = ddlsim.prepare(ddlsim.job("resnet50", 16, gpus_per_node=4, inter_node="25gbe"))
    ps = ddlsim.prepare(ddlsim.job("resnet50", 16, gpus_per_node=4, inter_node="25gbe", comm="ps"))
    tcp = ddlsim.prepare(
        ddlsim.job("resnet50", 16, gpus_per_node=4, inter_node="25gbe", transport="tcp")
    )
    assert (nccl.cluster.transport, ps.cluster.transport, tcp.cluster.transport) == (
        "rdma",
        "tcp",
        "tcp",
    )
    assert ddlsim.prepare(ddlsim.job("resnet50", 16, inter_node="10gbe")).cluster.transport == "tcp"
