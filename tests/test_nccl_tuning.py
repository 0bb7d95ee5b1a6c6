"""NCCL's protocol ceilings by architecture and the channels a call runs on: closed forms per
protocol and channel count, monotonicity in size, and what each NCCL generation does."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.comm.nccl import (
    NcclVersion,
    Topology,
    candidates,
    choose,
    choose_half_ring,
    cost,
    ring_bus_Bps,
    ring_latency_s,
)
from ddlsim.comm.nccl_tuning import channel_bytes, channel_share, channels_used, ll_max_Bps

GB = 1e9
V21, V24, V214 = (NcclVersion.parse(v) for v in ("2.1", "2.4", "2.14"))


def topo(nodes=2, local=8, channels=16, bus=360e9, arch="hopper", net_us=3.0) -> Topology:
    multi = nodes > 1
    return Topology(
        n_ranks=nodes * local,
        n_nodes=nodes,
        local=local,
        intra_hop="nvlink",
        channels=channels,
        bus_Bps=bus,
        transport_latency_s=net_us * 1e-6 if multi else 0.0,
        arch=arch,
        net_Bps=bus if multi else math.inf,
        intra_Bps=(2 * bus if multi else bus) if local > 1 else math.inf,
    )


def test_ll_is_capped_by_its_whole_gpu_ceiling() -> None:
    """LL: half the bus, at most llMaxBws: by GPU on one node, by host (Intel) across nodes."""
    assert ll_max_Bps("hopper", 1) == 141 * GB and ll_max_Bps("blackwell", 1) == 282 * GB
    assert ll_max_Bps("volta", 1) == ll_max_Bps("pascal", 1) == 39 * GB
    assert ll_max_Bps("ampere", 1) == 87.7 * GB
    assert ll_max_Bps("hopper", 2) == 39 * GB and ll_max_Bps("blackwell", 3) == 20.4 * GB
    assert ring_bus_Bps(topo(nodes=1, bus=720e9, arch="blackwell"), "LL") == 282 * GB
    assert ring_bus_Bps(topo(nodes=2, bus=360e9), "LL") == 39 * GB
    assert ring_bus_Bps(topo(nodes=2, bus=48e9), "LL") == 24 * GB  # half the bus: under it


def test_ll128_ceiling_is_per_channel_and_by_architecture() -> None:
    """LL128: 0.92 of the bus, at most channels x 20 (Volta, Ampere), 36.7 (Hopper), 40 GB/s
    (Blackwell)."""
    for arch, per_channel in (("volta", 20), ("ampere", 20), ("hopper", 36.7), ("blackwell", 40)):
        t = topo(nodes=1, channels=4, bus=800e9, arch=arch)
        assert ring_bus_Bps(t, "LL128") == pytest.approx(4 * per_channel * GB)
    wide = topo(nodes=1, channels=32, bus=360e9)
    assert ring_bus_Bps(wide, "LL128") == pytest.approx(0.92 * 360e9)


def test_tree_ceilings_by_node_count_column() -> None:
    """Tree Simple: min(0.92 bus, channels x perChMaxTreeBw) / 2, the column by node count."""
    s = 2**30  # correction 0.9 (Simple, 1 GiB)
    for nodes, cap in ((4, 36.0), (16, 36.0)):  # Hopper, 3+ nodes
        t = topo(nodes=nodes, channels=2, bus=360e9)
        algo = min(0.92 * 360e9, 2 * cap * GB) / 2
        assert cost(t, "tree", "Simple", s).bandwidth_s == pytest.approx(s / (algo * 0.9))


def test_channel_bytes_follow_threads_and_thresholds() -> None:
    """threads x threshold: LL 512 x 8 x ranks (rings), LL128 640 x 8, Simple 512 x 64 (256 x
    64 on a ring of at most PCI_BW = 12 GB/s)."""
    assert channel_bytes("ring", "LL", 16, 360e9) == 512 * 8 * 16
    assert channel_bytes("tree", "LL", 16, 360e9) == 512 * 8
    assert channel_bytes("ring", "LL128", 16, 360e9) == 640 * 8
    assert channel_bytes("ring", "Simple", 16, 360e9) == 512 * 64
    assert channel_bytes("ring", "Simple", 16, 10e9) == 256 * 64
    assert channels_used(16, "ring", "LL", 3 * 65536 + 1, 16, 360e9) == 3
    assert channels_used(16, "ring", "LL", 100, 16, 360e9) == 1
    assert channels_used(16, "ring", "Simple", 2**30, 16, 360e9) == 16
    assert channel_share(16, "ring", "LL", 3.5 * 65536, 16, 360e9) == pytest.approx(3.5)


@pytest.mark.parametrize("used", [1, 3, 8, 16])
def test_a_call_on_fewer_channels_moves_their_share(used) -> None:
    """Simple ring: the bandwidth term on c of C channels is C / c the full one; the latency
    does not move. LL on c channels: c x half a channel's bus, up to LL's ceiling."""
    t, s = topo(nodes=1, channels=16, bus=360e9), 2**24
    full = cost(t, "ring", "Simple", s)
    part = cost(t, "ring", "Simple", s, channels=used)
    assert part.bandwidth_s == pytest.approx(full.bandwidth_s * 16 / used)
    assert part.latency_s == full.latency_s and part.channels == used
    ll = cost(t, "ring", "LL", s, channels=used)
    bus = min(used * 360e9 / 16 * 0.5, 141 * GB)
    assert ll.bandwidth_s == pytest.approx(2 * 7 / 8 * s / bus)


def test_fewer_channels_share_the_nics_but_not_the_fabric() -> None:
    """Across nodes a channel is a CTA driving its share of NVLink; the NICs are shared by the
    channels that run: 8 of 16 channels on 720 GB/s NVLink still fill 360 GB/s of NICs, 1
    of 16 moves 45 GB/s."""
    t, s = topo(nodes=2, channels=16, bus=360e9), 2**24
    full = cost(t, "ring", "Simple", s, rounds=1)
    assert cost(t, "ring", "Simple", s, rounds=1, channels=8).bandwidth_s == full.bandwidth_s
    assert cost(t, "ring", "Simple", s, rounds=1, channels=1).bandwidth_s == pytest.approx(
        full.bandwidth_s * 360 / 45
    )


def test_allgather_goes_round_the_ring_once() -> None:
    """An allgather / reduce-scatter of S: (N-1) steps, (n-1) network crossings, (N-1)/N S;
    half an allreduce's bandwidth term, no plateau factor."""
    t, s = topo(nodes=2, channels=16), 2**30
    ag = cost(t, "ring", "Simple", s, rounds=1)
    ar = cost(t, "ring", "Simple", s, plateau=False)
    assert ag.bandwidth_s == pytest.approx(ar.bandwidth_s / 2)
    assert ag.latency_s == pytest.approx(ring_latency_s(t, "Simple", s, plateau=False, rounds=1))
    assert choose_half_ring(t, V214, s).time_s == pytest.approx(
        min(cost(t, "ring", p, s, rounds=1).time_s for p in ("LL", "LL128", "Simple"))
    )


def test_the_call_runs_on_what_its_size_gets_only_from_2_5() -> None:
    """2.5+ (topoGetAlgoInfo) runs a 48 KiB LL ring of 8 ranks (32 KiB a channel) on 1.5
    channels' worth; 2.1 and 2.4 run every call on all channels."""
    t, s = topo(nodes=1, channels=16, bus=360e9), 48 * 1024
    new = choose(t, V214, s, "ring", "LL")
    assert new.channels == 1
    assert new.bandwidth_s == pytest.approx(cost(t, "ring", "LL", s, channels=1.5).bandwidth_s)
    for old in (V21, V24):
        ch = choose(t, old, s, "ring", "LL")
        assert ch.time_s == pytest.approx(cost(t, "ring", "LL", s, plateau=False).time_s)
    # the ceilings are the hardware's: a 2.1 LL ring on a V100 node moves at most 39 GB/s
    v100 = topo(nodes=1, channels=6, bus=150e9, arch="volta")
    big = 2**22
    assert choose(v100, V21, big, "ring", "LL").bandwidth_s == pytest.approx(2 * 7 / 8 * big / 39e9)


SIZES = st.floats(8, 2e10)
TOPOS = st.builds(
    topo,
    nodes=st.sampled_from([1, 2, 3, 8, 64]),
    local=st.sampled_from([1, 2, 8]),
    channels=st.sampled_from([2, 4, 16, 32]),
    bus=st.sampled_from([12e9, 48e9, 360e9, 720e9]),
    arch=st.sampled_from(["pascal", "volta", "ampere", "hopper", "blackwell"]),
)


@settings(max_examples=80, deadline=None)
@given(t=TOPOS, a=SIZES, b=SIZES)
def test_time_never_falls_as_the_size_grows(t, a, b) -> None:
    """A larger call never ends sooner: allreduce (NCCL's choice, or any forced pair) and
    allgather."""
    if t.n_ranks < 2:
        return
    small, large = sorted((a, b))
    assert choose(t, V214, small).time_s <= choose(t, V214, large).time_s * (1 + 1e-12)
    assert choose_half_ring(t, V214, small).time_s <= (
        choose_half_ring(t, V214, large).time_s * (1 + 1e-12)
    )
    for alg, proto in candidates(V214, t):
        assert choose(t, V214, small, alg, proto).time_s <= (
            choose(t, V214, large, alg, proto).time_s * (1 + 1e-12)
        )


@settings(max_examples=60, deadline=None)
@given(t=TOPOS, a=st.floats(8, 2**26), b=st.floats(8, 2**26))
def test_ring_bus_bandwidth_grows_with_the_size_on_a_protocol(t, a, b) -> None:
    """On one protocol, a ring's bus bandwidth (S x rounds(N-1)/N / time) does not fall as
    the size grows: latency is paid once and the channels only add up."""
    if t.n_ranks < 2:
        return
    small, large = sorted((a, b))
    for proto in ("LL", "LL128", "Simple"):
        if ("ring", proto) not in candidates(V214, t):
            continue
        slow = choose_half_ring(t, V214, small, proto)
        fast = choose_half_ring(t, V214, large, proto)
        assert small / slow.time_s <= large / fast.time_s * (1 + 1e-12)
