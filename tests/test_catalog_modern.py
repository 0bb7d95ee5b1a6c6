"""Today's systems in the catalog: H200, B200, GB200 NVL72, H20, T4 from datasheets; networks by
any stated speed; the default network of a GPU's reference server; the modern measured
collectives validated with them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlsim.errors import ConfigError, UnknownNameError
from ddlsim.system import catalog
from ddlsim.system.catalog import build_cluster, describe_cluster

ROOT = Path(__file__).resolve().parents[1]
MODERN = ROOT / "traces" / "measured" / "collectives" / "nccl_tests_modern.csv"
NEW_GPUS = ("h200", "b200", "gb200", "h20")


# --------------------------------------------------------------------------- GPUs


def test_datasheet_figures_of_the_new_gpus() -> None:
    h200, b200, gb200 = (catalog.device(g) for g in ("h200", "hgx-b200", "gb200"))
    assert h200.memory_bytes == 141 * 2**30 and h200.mem_bandwidth_Bps == 4.8e12
    assert h200.peak_fp16_flops == 989e12 and h200.peak_fp8_flops == 1979e12
    # dense = the datasheet's sparsity figure halved: HGX B200 8 GPUs, FP8 72 PFLOPS sparse
    assert b200.peak_fp8_flops == 72e15 / 8 / 2 and b200.peak_fp4_flops == 144e15 / 8 / 2
    assert b200.peak_fp16_flops == 2.25e15 and b200.memory_bytes == 180 * 2**30
    assert gb200.peak_fp4_flops == 1440e15 / 72 / 2 and gb200.host_link == "nvlink-c2c"
    assert catalog.device("h100").peak_fp8_flops == 1979e12
    assert catalog.device("a100").peak_fp8_flops is None  # Ampere has no fp8
    assert catalog.device("t4").arch == "turing" and catalog.device("t4").peak_fp8_flops is None
    for gpu in NEW_GPUS:
        dev = catalog.device(gpu)
        assert dev.datasheet_only
        assert dev.peak_fp8_flops == pytest.approx(2 * dev.peak_fp16_flops, rel=1e-3)
        assert "sparsity" in dev.sources["peak_fp16_TFLOPS"] or gpu == "h20"
    assert not catalog.device("h100").datasheet_only


def test_nvlink5_fabrics_and_the_nvl72_domain() -> None:
    assert catalog.intra_link("nvlink-b200").nominal_bandwidth_Bps == 900e9
    one = build_cluster("gb200", 72)
    assert (one.n_nodes, one.intra_link, one.nic) == (1, "nvl72", None)
    two = build_cluster("gb200", 144)
    assert (two.n_nodes, two.inter_link, two.nics_per_node) == (2, "ib-ndr", 72)
    with pytest.raises(ConfigError, match="at most 8"):
        build_cluster("b200", 16, 16)  # an HGX B200 baseboard has 8 GPUs
    with pytest.raises(ConfigError, match="gpus_per_node=73"):
        build_cluster("gb200", 146, 73)
    described = describe_cluster(two)
    assert described["datasheet_only"] == ["gb200", "nvl72", "nvlink-c2c"]
    assert described["peak_fp4_TFLOPS"] == 10000.0


# --------------------------------------------------------------------------- networks by speed


def test_stated_speeds_are_catalogued_entries_or_their_family_s() -> None:
    assert catalog.network("ib-400").id == "ib-ndr"
    assert catalog.network("ib-800").id == "ib-xdr"
    assert catalog.network("100GbE").id == "100gbe"
    g32 = catalog.network("32gbe")
    assert (
        g32.nominal_bandwidth_Bps == 4e9 and g32.efficiency == catalog.network("25gbe").efficiency
    )
    roce = catalog.network("roce-400")
    assert roce.default_transport == "rdma" and catalog.network("400gbe").default_transport == "tcp"
    efa = catalog.network("efa-3200")
    assert efa.bandwidth_Bps("rdma") == pytest.approx(32 * catalog.network("efa").bandwidth_Bps())


@pytest.mark.parametrize("bad", ["ib-0", "efa-20000", "32g", "gbe", "roce-", "ib-ndr2"])
def test_a_bad_speed_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError, match=bad):
        catalog.network(bad)


@given(
    family=st.sampled_from(["{}gbe", "roce-{}", "ib-{}", "efa-{}"]),
    speeds=st.lists(st.integers(1, 10_000), min_size=2, max_size=2, unique=True),
)
def test_effective_rdma_bandwidth_is_monotone_in_the_stated_speed(family, speeds) -> None:
    """Higher stated speed, never less RDMA bandwidth; the nominal is the stated speed."""
    low, high = sorted(speeds)
    a, b = (catalog.network(family.format(s)) for s in (low, high))
    assert a.nominal_bandwidth_Bps == pytest.approx(low * 1e9 / 8)
    assert a.bandwidth_Bps("rdma") <= b.bandwidth_Bps("rdma")
    assert b.bandwidth_Bps("tcp") <= b.nominal_bandwidth_Bps


# --------------------------------------------------------------------------- default network


@pytest.mark.parametrize(
    ("gpu", "network", "nics"),
    [
        ("h100", "ib-ndr", 8),
        ("h200", "ib-ndr", 8),
        ("b200", "ib-ndr", 8),
        ("a100", "ib-hdr", 8),
        ("a100-80gb", "ib-hdr", 8),
        ("v100", "ib-edr", 1),
        ("p100", "ib-edr", 1),
        ("k80", "ib-edr", 1),
        ("t4", "ib-edr", 1),
    ],
)
def test_the_default_network_is_the_reference_server_s(gpu: str, network: str, nics: int) -> None:
    cluster = build_cluster(gpu, 64, 8)
    assert (cluster.inter_link, cluster.nics_per_node) == (network, nics)
    assert network in cluster.network_default
    assert describe_cluster(cluster)["network_default"] == cluster.network_default
    # the older GPUs' default is exactly today's explicit ib-edr with one NIC
    if nics == 1:
        assert cluster == build_cluster(gpu, 64, 8, inter_node="ib-edr", nics_per_node=1)


def test_a_named_network_keeps_one_nic_and_a_named_count_is_kept() -> None:
    assert build_cluster("h100", 64, inter_node="ib-ndr").nics_per_node == 1
    assert build_cluster("h100", 64, inter_node="ib-ndr").network_default == ""
    assert build_cluster("h100", 64, nics_per_node=4).nics_per_node == 4
    assert build_cluster("h100", 8).network_default == ""  # one node: no network


def test_predict_says_which_default_it_took(cli) -> None:
    code, out, _ = cli("predict", "--gpu", "h100", "--gpus", "64", "--comm", "ddp")
    assert code == 0
    assert "inter-node     ib-ndr, 8 NICs x" in out and "(default: h100's reference" in out
    code, out, _ = cli("predict", "--gpu", "b200", "--gpus", "16", "--json")
    inputs = json.loads(out)["inputs"]
    assert inputs["network_default"] == "b200's reference server: 8 x ib-ndr"
    assert inputs["datasheet_only"] == ["b200", "nvlink-b200"]
    code, out, _ = cli("predict", "--gpu", "b200", "--gpus", "16")
    assert "datasheet-only b200, nvlink-b200" in out


@pytest.mark.parametrize(
    ("value", "fragment"), [("32g", "'32g'"), ("ib-0", "'ib-0'"), ("efa-x", "'efa-x'")]
)
def test_a_bad_network_on_the_command_line_is_one_line_exit_2(cli, value, fragment) -> None:
    code, out, err = cli("predict", "--gpus", "16", "--inter-node", value)
    assert code == 2 and out == ""
    assert fragment in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- modern collectives


def test_the_modern_collectives_validate_with_the_catalog() -> None:
    from ddlsim.tools.validate.collectives import read_collectives, validate_collectives

    results = validate_collectives(read_collectives(MODERN))
    assert len(results) == 553
    reduce = [r for r in results if r.row.collective == "all_reduce" and r.status == "predicted"]
    assert len(reduce) == 245  # every all_reduce row with a value (S71: 7 without one)
    mape = sum(abs(r.rel_error) for r in reduce) / len(reduce)
    assert mape < 0.30  # measured 28.6% (docs/design.md, "Today's systems")
    by_setup = {r.row.setup_id for r in reduce}
    assert {
        "S55_vultr_b200_2x8_ib_ar",
        "S71_skypilot_gcpvm_a3high_h100_tcpx_2x8_ar_table",
    } <= by_setup
    for r in results:
        if r.row.collective != "all_reduce" and r.status != "predicted":
            assert r.code in ("op-not-modelled", "anomalous"), (r.row.setup_id, r.reason)


def test_stated_ib_of_unstated_generation_takes_the_reference_server_s() -> None:
    from ddlsim.tools.validate.collectives import map_setup, read_collectives

    rows = {r.setup_id: r for r in read_collectives(MODERN)}
    nebius = map_setup(rows["S65_dstack_nebius_h100_2x8_ar"])
    assert nebius.kwargs["inter_node"] == "ib-ndr" and nebius.kwargs["nics_per_node"] == 8
    assert any("not stated: ib-ndr" in note for note in nebius.notes)
    aion = map_setup(rows["S86_h100_ib400_aion_8x8_ar"])  # "ib 400G", "8 (assumed)"
    assert (aion.kwargs["inter_node"], aion.kwargs["nics_per_node"]) == ("ib-ndr", 8)


def test_unknown_network_error_lists_the_grammar() -> None:
    with pytest.raises(UnknownNameError, match="roce-<S>"):
        catalog.network("myrinet")
