"""NVLink SHARP (NVLS, NVLS-tree): NCCL 2.29.7's closed forms, release and hardware gating."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlsim.comm import nccl_nvls as nvls
from ddlsim.comm.nccl import NcclVersion, Topology, candidates, choose, choose_half_ring, cost
from ddlsim.errors import ConfigError

GB = 1e9
V214, V217, V218, V219 = (NcclVersion.parse(v) for v in ("2.14", "2.17", "2.18", "2.19"))


def topo(nodes=1, local=8, arch="hopper", intra=360 * GB, net=8 * 48 * GB, switch=True):
    n = nodes * local
    return Topology(
        n_ranks=n,
        n_nodes=nodes,
        local=local,
        intra_hop="nvlink",
        channels=16,
        bus_Bps=min(intra, net if nodes > 1 else math.inf),
        transport_latency_s=3e-6 if nodes > 1 else 0.0,
        arch=arch,
        net_Bps=net if nodes > 1 else math.inf,
        intra_Bps=intra,
        nvls=switch,
    )


def test_one_node_nvls_allreduce_is_nccls_closed_form() -> None:
    """busBw = G channels x L/(G+1) x 0.85 x (G-1)/G x 2; algBw = busBw x G / (2(G-1));
    latency 25 us: an 8 x H100 node's 1 GiB all-reduce at about 2 x 0.85 x 360 x 7/9 GB/s of
    bus bandwidth (476; ring: 360)."""
    t, s = topo(), 2.0**30
    ch = cost(t, "nvls", "Simple", s)
    algo = 0.85 * 360 * GB * 8 / 9
    assert ch.latency_s == pytest.approx(25e-6)
    assert ch.time_s == pytest.approx(25e-6 + s / algo)
    assert s / ch.bandwidth_s * 2 * 7 / 8 == pytest.approx(2 * 0.85 * 360 * GB * 7 / 9)
    assert ch.channels == 16  # NVLS_NCHANNELS_SM90
    b = cost(topo(arch="blackwell", intra=720 * GB), "nvls", "Simple", s)
    assert b.time_s == pytest.approx(25e-6 + s / (0.74 * 720 * GB * 8 / 9))
    assert b.channels == 24


def test_nvls_allgather_moves_its_buffer_at_the_bus_bandwidth() -> None:
    """All-gather / reduce-scatter: per channel x (G-1)/G instead of x2, no ring conversion."""
    t, s = topo(), 2.0**30
    ch = cost(t, "nvls", "Simple", s, rounds=1)
    assert ch.bandwidth_s == pytest.approx(s / (0.85 * 360 * GB * 49 / 72))


def test_nvls_tree_is_bound_by_network_share_and_ceiling() -> None:
    """2 nodes: each channel's network share doubled (the tree's two roots), at most 57.7 GB/s
    a channel on Hopper; 3+ nodes: the share itself, at most 45.5; latency 25 us + 2 log2(n)
    levels of 20.9 us and the transport twice."""
    s = 2.0**30
    two = cost(topo(nodes=2), "nvls_tree", "Simple", s)
    bus = min(2 * 0.85 * 360 * GB * 7 / 9, 2 * 8 * 48 * GB, 8 * 57.7 * GB)
    assert two.bandwidth_s == pytest.approx(s / (bus * 16 / 30))
    assert two.latency_s == pytest.approx((25 + 2 * (20.9 + 2 * 3)) * 1e-6)
    narrow = cost(topo(nodes=4, net=8 * 12.5 * GB), "nvls_tree", "Simple", s)
    assert narrow.bandwidth_s == pytest.approx(s / (8 * 12.5 * GB * 32 / 62))
    assert narrow.latency_s == pytest.approx((25 + 4 * (20.9 + 2 * 3)) * 1e-6)
    assert narrow.channels == 16


def test_releases_have_what_their_libraries_name() -> None:
    one, two = topo(), topo(nodes=2)
    assert "nvls" not in {a for a, _ in candidates(V214, one)}
    assert ("nvls", "Simple") in candidates(V217, one)
    assert {a for a, _ in candidates(V217, two)} == {"ring", "tree"}  # NVLSTree: 2.18
    assert {a for a, _ in candidates(V218, two)} == {"ring", "tree", "nvls_tree"}
    assert {a for a, _ in candidates(V218, one, collective="all_gather")} == {"ring"}
    assert {a for a, _ in candidates(V219, one, collective="all_gather")} == {"ring", "nvls"}
    assert {a for a, _ in candidates(V219, two, collective="all_gather")} == {"ring"}
    assert {p for a, p in candidates(V219, one) if a == "nvls"} == {"Simple"}


def test_forcing_nvls_is_refused_where_it_cannot_run() -> None:
    with pytest.raises(ConfigError, match=r"2\.14 --algorithm nvls: arrived in NCCL 2\.17"):
        candidates(V214, topo(), "nvls")
    with pytest.raises(ConfigError, match="NVLink switch with SHARP"):
        candidates(V219, topo(switch=False), "nvls")
    with pytest.raises(ConfigError, match="NVLink switch with SHARP"):
        candidates(V219, topo(arch="ampere"), "nvls")
    with pytest.raises(ConfigError, match="across nodes NCCL runs nvls_tree"):
        candidates(V219, topo(nodes=2), "nvls")
    with pytest.raises(ConfigError, match="runs across nodes"):
        candidates(V219, topo(), "nvls_tree")
    with pytest.raises(ConfigError, match="Simple only"):
        candidates(V219, topo(), "nvls", "LL128")
    # an all-gather forced to an algorithm it lacks here runs a ring, as before
    assert choose_half_ring(topo(nodes=2), V219, 2.0**28, "auto", "nvls_tree").algorithm == "ring"


def test_nccl_picks_nvls_for_large_calls_only() -> None:
    """25 us of latency against the ring's and the tree's few: small calls stay on them."""
    t = topo()
    assert choose(t, V219, 2.0**16).algorithm == "ring"
    assert choose(t, V219, 2.0**28).algorithm == "nvls"
    assert choose(topo(nodes=2), V219, 2.0**28).algorithm == "nvls_tree"
    assert choose(t, V214, 2.0**28).algorithm == "ring"
    assert choose_half_ring(t, V219, 2.0**28).algorithm == "ring"  # NCCL's estimate: ring wins
    assert choose_half_ring(t, V219, 2.0**28, algorithm="nvls").algorithm == "nvls"


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.sampled_from([1, 2, 4, 16]),
    arch=st.sampled_from(["hopper", "blackwell"]),
    a=st.floats(1e3, 1e10),
    b=st.floats(1e3, 1e10),
)
def test_nvls_time_grows_with_size(nodes, arch, a, b) -> None:
    t = topo(nodes=nodes, arch=arch)
    algo = "nvls" if nodes == 1 else "nvls_tree"
    lo, hi = sorted((a, b))
    assert cost(t, algo, "Simple", lo).time_s <= cost(t, algo, "Simple", hi).time_s
    assert choose(t, V219, lo).time_s <= choose(t, V219, hi).time_s * (1 + 1e-9)


def test_unavailable_reasons_name_the_hardware_and_release() -> None:
    why = nvls.unavailable
    kw = {"fabric_nvls": True, "arch": "hopper", "n_nodes": 1, "local": 8}
    assert why("nvls", "all_reduce", (2, 17), **kw) == ""
    assert "2.19" in why("nvls", "reduce_scatter", (2, 18), **kw)
    assert "2 or more GPUs" in why("nvls", "all_reduce", (2, 19), **{**kw, "local": 1})
    assert "at most 32" in why("nvls", "all_gather", (2, 19), **{**kw, "local": 72})
    assert why("nvls", "all_reduce", (2, 19), **{**kw, "local": 72}) == ""


def test_predict_says_it_ran_nvls_and_refuses_it_on_a100(cli) -> None:
    code, out, _ = cli("predict", "--gpu", "h100", "--gpus", "8", "--model", "vgg16",
                       "--nccl-version", "2.19", "--algorithm", "nvls")  # fmt: skip
    assert code == 0 and "nvls/Simple" in out
    code, _, err = cli("predict", "--gpu", "a100", "--gpus", "8", "--model", "vgg16",
                       "--nccl-version", "2.19", "--algorithm", "nvls")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and "NVLink switch" in err


def test_report_says_when_the_release_predates_the_switchs_nvls(capsys) -> None:
    """The default 2.14 on an HGX H100 is costed without NVLink SHARP, and the report says so;
    2.19 has it, and a DGX-1 (no NVLS switch) gets no note."""
    from ddlsim.cli.main import main

    base = ["predict", "--model", "gpt2", "--gpu", "h100", "--gpus", "8", "--comm", "ddp"]
    hint = "no NVLink SHARP before NCCL 2.17"
    assert main(base) == 0
    assert hint in capsys.readouterr().out
    assert main([*base, "--nccl-version", "2.19"]) == 0
    out = capsys.readouterr()
    assert hint not in out.out and "no effect" not in out.err  # ddp uses the release
    assert main(["predict", "--gpus", "8"]) == 0
    assert hint not in capsys.readouterr().out
