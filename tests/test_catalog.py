"""Tests of the device / link catalogs and the cluster builder (ddlsim.system.catalog)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ddlsim
from ddlsim.errors import CatalogError, ConfigError, UnknownNameError
from ddlsim.system import catalog
from ddlsim.system.catalog import build_cluster, describe_cluster
from ddlsim.system.specs import TRANSPORTS, Cluster

# The vocabulary of the measured-data columns (copied here; tests never read ../shared).
GPUS = (
    "k80",
    "p100-pcie",
    "p100-sxm2",
    "p40",
    "v100-pcie",
    "v100-sxm2",
    "v100-sxm2-32gb",
    "v100-sxm3",
)
INTRA = ("none", "pcie3", "nvlink-p100", "nvlink-v100", "nvswitch")
INTER = (
    "none",
    "10gbe",
    "25gbe",
    "40gbe",
    "100gbe",
    "ib-fdr",
    "ib-edr",
    "ib",
    "aries",
    "ec2",
    "azure-eth",
)
NETWORKS = tuple(n for n in INTER if n != "none")

# (gpu, gpus, gpus_per_node, intra_node, inter_node, transport) as they occur in measured rows;
# None = empty cell.
MEASURED_COMBOS = [
    ("k80", 1, 1, "pcie3", "none", None),
    ("k80", 8, 8, "pcie3", "none", None),
    ("k80", 64, 8, "pcie3", "ec2", "tcp"),
    ("p100-sxm2", 8, 8, "nvlink-p100", "none", None),
    ("p100-pcie", 1, 1, None, "none", None),
    ("p100-pcie", 16, 4, None, "25gbe", "rdma"),
    ("p100-pcie", 64, 4, None, "40gbe", "tcp"),
    ("p100-pcie", 512, 4, None, "25gbe", None),
    ("v100-sxm2", 1, 1, "nvlink-v100", "none", None),
    ("v100-sxm2", 32, 8, "nvlink-v100", "ib-edr", "rdma"),
    ("v100-sxm2", 32, 8, "nvlink-v100", "ib-edr", None),
    ("v100-sxm3", 16, 16, "nvswitch", "none", None),
    ("v100-sxm3", 4, 4, "nvswitch", "none", None),
]

DATA = Path(catalog.__file__).parent / "data"


def _doc(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _write(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- vocabulary


@pytest.mark.parametrize("gpu", GPUS)
def test_every_measured_gpu_is_a_device(gpu: str) -> None:
    spec = catalog.device(gpu)
    assert spec.id == gpu
    assert spec.peak_fp32_flops > 1e12
    assert spec.mem_bandwidth_Bps > 1e11
    assert spec.memory_bytes >= 12 * 2**30
    assert catalog.host_link(spec.host_link).scope == "host"


@pytest.mark.parametrize("name", INTRA)
def test_every_measured_intra_node_is_an_intra_fabric(name: str) -> None:
    assert name in catalog.intra_link_names()
    assert catalog.intra_link(name).scope == "intra"
    assert catalog.link(name).scope == "intra"


@pytest.mark.parametrize("name", INTER)
def test_every_measured_inter_node_is_a_network(name: str) -> None:
    assert name in catalog.inter_link_names()
    assert catalog.network(name).scope == "inter"


@pytest.mark.parametrize("combo", MEASURED_COMBOS, ids=lambda c: "-".join(map(str, c)))
def test_measured_combinations_build(combo: tuple[Any, ...]) -> None:
    gpu, gpus, per_node, intra, inter, transport = combo
    cluster = build_cluster(gpu, gpus, per_node, intra, inter, transport)
    assert cluster.n_nodes * cluster.local_gpus == gpus
    assert cluster.transport in TRANSPORTS
    assert (cluster.nic is None) == (cluster.n_nodes == 1)
    if transport is not None:
        assert cluster.transport == transport


def test_transports_accepted_on_every_network() -> None:
    for name in NETWORKS:
        for transport in TRANSPORTS:
            cluster = build_cluster("v100-pcie", 16, 8, inter_node=name, transport=transport)
            assert cluster.transport == transport


def test_forward_looking_gpus_get_their_own_fabrics() -> None:
    assert build_cluster("a100", 8).intra_link == "nvlink-a100"
    assert build_cluster("h100", 8).intra_link == "nvlink-h100"
    assert catalog.device("a100").host_link == "pcie4"
    assert catalog.device("h100").host_link == "pcie5"
    # 'none': a CPU worker's tensors are in host memory (tests/test_hvdlocal.py)
    assert catalog.host_link_names() == ("pcie3", "pcie4", "pcie5", "none", "nvlink-c2c")


# --------------------------------------------------------------------------- names and aliases


def test_aliases_resolve_to_documented_defaults() -> None:
    assert catalog.device("p100").id == "p100-sxm2"
    assert catalog.device("v100").id == "v100-sxm2"
    assert catalog.device("V100 ").id == "v100-sxm2"  # case and blanks ignored
    assert catalog.device_aliases()["p100"] == "p100-sxm2"
    names = catalog.device_names()
    assert set(GPUS) | {"p100", "v100", "a100", "h100"} <= set(names)
    assert names[: len(GPUS)] == GPUS  # canonical ids first, file order
    assert build_cluster("v100", 8).device == catalog.device("v100-sxm2")


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="unknown gpu 'gtx1080'") as err:
        catalog.device("gtx1080")
    assert "k80" in str(err.value) and "v100" in str(err.value)
    with pytest.raises(UnknownNameError, match="ib-edr"):
        catalog.link("myrinet")
    with pytest.raises(UnknownNameError, match="pcie5"):
        catalog.host_link("agp")
    with pytest.raises(UnknownNameError, match="nvswitch"):
        catalog.intra_link("10gbe")  # a network is not an intra fabric
    with pytest.raises(UnknownNameError, match="azure-eth"):
        catalog.network("pcie3")


def test_link_lookup_prefers_intra_for_shared_ids() -> None:
    assert catalog.link("pcie3") is catalog.intra_link("pcie3")
    assert catalog.link("none") is catalog.intra_link("none")
    assert catalog.host_link("pcie3").scope == "host"
    assert catalog.link("ib-edr") is catalog.network("ib-edr")


# --------------------------------------------------------------------------- units and figures


def test_units_are_converted_once() -> None:
    assert catalog.network("25gbe").nominal_bandwidth_Bps == pytest.approx(3.125e9)
    assert catalog.network("ib-edr").nominal_bandwidth_Bps == pytest.approx(12.5e9)
    assert catalog.intra_link("pcie3").nominal_bandwidth_Bps == pytest.approx(15.75e9)
    assert catalog.host_link("pcie4").nominal_bandwidth_Bps == pytest.approx(31.5e9)
    assert catalog.network("25gbe").latency_s["tcp"] == pytest.approx(30e-6)
    k80 = catalog.device("k80")
    assert k80.peak_fp32_flops == pytest.approx(4.37e12)
    assert k80.peak_fp16_flops is None
    assert k80.mem_bandwidth_Bps == pytest.approx(240e9)
    assert k80.memory_bytes == 12 * 2**30
    v100 = catalog.device("v100-sxm2")
    assert v100.peak_fp16_flops == pytest.approx(125e12)
    assert catalog.device("p40").peak_fp16_flops is None
    assert catalog.device("v100-sxm3").memory_bytes == 32 * 2**30


def test_k80_is_one_die() -> None:
    k80 = catalog.device("k80")
    assert k80.peak_fp32_flops < 5e12  # a whole board would be 8.73 TFLOPS
    assert k80.memory_bytes == 12 * 2**30  # half of the board's 24 GB


@pytest.mark.parametrize("name", NETWORKS)
def test_rdma_is_faster_and_lower_latency_than_tcp(name: str) -> None:
    net = catalog.network(name)
    assert net.bandwidth_Bps("rdma") > net.bandwidth_Bps("tcp")
    assert net.message_latency_s("rdma") < net.message_latency_s("tcp")


def test_default_transports() -> None:
    for name in ("10gbe", "25gbe", "40gbe", "50gbe", "100gbe", "200gbe", "ec2", "azure-eth"):
        assert catalog.network(name).default_transport == "tcp", name
    for name in ("ib-fdr", "ib-edr", "ib-hdr", "ib-ndr", "ib", "aries"):
        assert catalog.network(name).default_transport == "rdma", name
    for name in catalog.intra_link_names():
        # GPU fabrics default to peer-to-peer; CPU workers' loopback is TCP
        expected = "tcp" if name == "loopback" else "rdma"
        assert catalog.intra_link(name).default_transport == expected, name


def test_efficiencies_and_latencies_are_sane() -> None:
    links = [catalog.link(n) for n in (*catalog.intra_link_names(), *catalog.inter_link_names())]
    links += [catalog.host_link(n) for n in catalog.host_link_names()]
    for link in links:
        assert set(link.efficiency) == set(TRANSPORTS) == set(link.latency_s), link.id
        assert all(0 < e <= 1 for e in link.efficiency.values()), link.id
        # loopback: Gloo's measured per-step latency on one shared core (see links.json)
        limit = 5e-3 if link.id == "loopback" else 1e-3
        assert all(0 <= t < limit for t in link.latency_s.values()), link.id
        if link.id != "none":
            assert math.isfinite(link.nominal_bandwidth_Bps) and link.nominal_bandwidth_Bps > 0


def test_fabric_ordering() -> None:
    def bw(name: str) -> float:
        return catalog.intra_link(name).bandwidth_Bps()

    assert bw("pcie3") < bw("nvlink-p100") < bw("nvlink-v100") <= bw("nvswitch")
    assert bw("nvswitch") < bw("nvlink-a100") < bw("nvlink-h100")
    # a ring over PCIe gen3 achieves roughly 10-12 GB/s
    assert 9e9 < bw("pcie3") < 13e9
    assert catalog.intra_link("pcie3").gpus_per_pcie_switch == 2


def test_ib_of_unknown_generation_is_fdr() -> None:
    ib, fdr = catalog.network("ib"), catalog.network("ib-fdr")
    assert ib.nominal_bandwidth_Bps == fdr.nominal_bandwidth_Bps
    assert ib.efficiency == fdr.efficiency and ib.latency_s == fdr.latency_s
    assert "FDR" in ib.sources["bandwidth_Gbps"]


def test_ec2_figures_follow_the_instance_type() -> None:
    assert catalog.network("ec2").nominal_bandwidth_Bps == pytest.approx(10e9 / 8)  # p2.8xlarge
    assert catalog.network("ec2", "k80").nominal_bandwidth_Bps == pytest.approx(10e9 / 8)
    p3 = catalog.network("ec2", "v100")
    assert p3.nominal_bandwidth_Bps == pytest.approx(25e9 / 8)
    assert "p3.16xlarge" in p3.description
    assert describe_cluster(build_cluster("k80", 16, inter_node="ec2"))["instance"] == "p2.8xlarge"


# --------------------------------------------------------------------------- sources


@pytest.mark.parametrize(
    "gpu", [g for g in catalog.device_names() if g in catalog._catalog().devices]
)
def test_every_device_figure_has_a_source(gpu: str) -> None:
    sources = catalog.device(gpu).sources
    for key in ("peak_fp32_TFLOPS", "peak_fp16_TFLOPS", "mem_bandwidth_GBps", "memory_GiB"):
        assert len(sources.get(key, "")) > 20, (gpu, key)
        assert any(ch.isdigit() for ch in sources[key]), (gpu, key)  # cites a year or figure
    assert "host_link" in sources


def test_every_link_figure_has_a_source_or_assumption() -> None:
    for scope, names, getter in (
        ("intra", catalog.intra_link_names(), catalog.intra_link),
        ("inter", catalog.inter_link_names(), catalog.network),
        ("host", catalog.host_link_names(), catalog.host_link),
    ):
        for name in names:
            link = getter(name)
            keys = ["efficiency", "latency_us"]
            if name != "none":
                keys.append("bandwidth_Gbps" if scope == "inter" else "bandwidth_GBps")
            if scope == "intra":
                keys.append("gpus_per_pcie_switch")
            for key in keys:
                assert len(link.sources.get(key, "")) > 10, (scope, name, key)


def test_assumptions_are_marked() -> None:
    assert catalog.network("25gbe").sources["efficiency"].startswith("assumption: ")
    assert not catalog.network("25gbe").sources["bandwidth_Gbps"].startswith("assumption")


# --------------------------------------------------------------------------- build_cluster


def test_defaults_single_gpu() -> None:
    c = build_cluster("v100-sxm2", 1)
    assert (c.gpus_per_node, c.n_nodes, c.local_gpus) == (1, 1, 1)
    assert c.intra_link == "none" and c.intra is None
    assert c.inter_link == "none" and c.nic is None
    assert c.gpus_per_pcie_switch == 1
    assert c.host.bandwidth_Bps == pytest.approx(15.75e9 * 0.8)


def test_defaults_single_node() -> None:
    c = build_cluster("p100", 8)
    assert (c.gpus_per_node, c.n_nodes) == (8, 1)
    assert c.intra_link == "nvlink-p100"
    assert c.intra is not None
    assert c.intra.bandwidth_Bps == pytest.approx(catalog.intra_link("nvlink-p100").bandwidth_Bps())
    assert c.inter_link == "none" and c.nic is None
    assert c.gpus_per_pcie_switch == 2
    assert build_cluster("v100-sxm3", 16).gpus_per_node == 16  # a DGX-2 is one 16-GPU node
    assert build_cluster("k80", 4).intra_link == "pcie3"
    assert build_cluster("p40", 2).intra_link == "pcie3"
    assert build_cluster("v100-pcie", 8).intra_link == "pcie3"
    assert build_cluster("v100-sxm2", 8).intra_link == "nvlink-v100"


def test_defaults_multi_node() -> None:
    c = build_cluster("v100", 32)
    assert (c.gpus_per_node, c.n_nodes, c.local_gpus) == (8, 4, 8)
    assert c.inter_link == "ib-edr" and c.transport == "rdma"
    edr = catalog.network("ib-edr")
    assert c.nic is not None
    assert c.nic.bandwidth_Bps == pytest.approx(12.5e9 * edr.efficiency["rdma"])
    assert c.nic.latency_s == pytest.approx(edr.latency_s["rdma"])
    assert build_cluster("v100-sxm3", 32).gpus_per_node == 16


def test_transport_default_and_override() -> None:
    tcp = build_cluster("p100-pcie", 16, 4, inter_node="25gbe")
    rdma = build_cluster("p100-pcie", 16, 4, inter_node="25gbe", transport="rdma")
    assert tcp.transport == "tcp" and rdma.transport == "rdma"
    assert tcp.nic is not None and rdma.nic is not None
    assert rdma.nic.bandwidth_Bps > tcp.nic.bandwidth_Bps
    assert rdma.nic.latency_s < tcp.nic.latency_s
    assert build_cluster("k80", 16, inter_node="ec2").transport == "tcp"
    assert build_cluster("v100", 16, inter_node="ib", transport="TCP").transport == "tcp"


def test_fewer_gpus_than_a_node_is_one_node() -> None:
    c = build_cluster("v100-sxm2", 4, 8)
    assert (c.n_nodes, c.local_gpus, c.gpus_per_node) == (1, 4, 8)
    assert c.intra_link == "nvlink-v100" and c.intra is not None
    one = build_cluster("k80", 1, 8, intra_node="pcie3")
    assert one.intra is None and one.local_gpus == 1


def test_one_gpu_per_node_across_nodes() -> None:
    c = build_cluster("p100-pcie", 4, 1, inter_node="10gbe")
    assert (c.n_nodes, c.local_gpus, c.intra_link) == (4, 1, "none")
    assert c.intra is None and c.nic is not None


def test_nics_per_node() -> None:
    assert build_cluster("v100", 16, nics_per_node=4).nics_per_node == 4


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"n_gpus": 0}, ConfigError, "n_gpus must be at least 1, got 0"),
        ({"n_gpus": -8}, ConfigError, "-8"),
        ({"n_gpus": 2.5}, ConfigError, "2.5"),
        ({"n_gpus": True}, ConfigError, "True"),
        ({"n_gpus": "8"}, ConfigError, "'8'"),
        ({"n_gpus": 2_000_000}, ConfigError, "2000000"),
        ({"n_gpus": 8, "gpus_per_node": 0}, ConfigError, "gpus_per_node must be at least 1"),
        ({"n_gpus": 8, "gpus_per_node": 73}, ConfigError, "gpus_per_node=73"),
        ({"n_gpus": 12, "gpus_per_node": 8}, ConfigError, "n_gpus=12 .* gpus_per_node=8"),
        ({"n_gpus": 16, "gpus_per_node": 8, "inter_node": "none"}, ConfigError, "2 nodes"),
        ({"gpus_per_node": 8, "intra_node": "none"}, ConfigError, "'none' connects at most 1"),
        ({"n_gpus": 16, "gpus_per_node": 16}, ConfigError, "'nvlink-v100' .* 8 GPU"),
        ({"n_gpus": 8, "nics_per_node": 0}, ConfigError, "nics_per_node"),
        ({"n_gpus": 8, "nics_per_node": 100}, ConfigError, "nics_per_node=100"),
        ({"device": "gtx1080"}, UnknownNameError, "unknown gpu 'gtx1080'; valid: .*v100"),
        ({"n_gpus": 8, "intra_node": "nvlink9"}, UnknownNameError, "'nvlink9'; valid: .*nvswitch"),
        ({"n_gpus": 8, "intra_node": "25gbe"}, UnknownNameError, "intra_node link '25gbe'"),
        ({"n_gpus": 16, "inter_node": "5g"}, UnknownNameError, "'5g'; valid: .*ib-edr"),
        ({"n_gpus": 16, "transport": "udp"}, UnknownNameError, "transport 'udp'; valid: rdma, tcp"),
    ],
)
def test_build_cluster_errors(
    kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    args = {"device": "v100-sxm2", "n_gpus": 8, **kwargs}
    with pytest.raises(error, match=fragment):
        build_cluster(**args)


def test_unknown_transport_is_unknown_name_even_on_one_node() -> None:
    with pytest.raises(UnknownNameError) as err:
        build_cluster("k80", 1, transport="infiniband")
    assert err.value.what == "transport" and err.value.valid == ["rdma", "tcp"]


def test_intra_fabric_limit_caps_the_default_node_size() -> None:
    c = build_cluster("v100-sxm3", 32, intra_node="nvlink-v100")
    assert c.gpus_per_node == 8 and c.n_nodes == 4


def test_intra_none_means_one_gpu_per_node() -> None:
    c = build_cluster("v100-pcie", 8, intra_node="none", inter_node="100gbe")
    assert (c.gpus_per_node, c.n_nodes, c.intra) == (1, 8, None)


def test_gpus_per_node_beyond_16_on_pcie_is_allowed() -> None:
    c = build_cluster("k80", 64, 32, intra_node="pcie3")
    assert (c.n_nodes, c.local_gpus) == (2, 32)


@given(
    per_node=st.integers(1, 64),
    factor=st.integers(1, 2000),
    below=st.booleans(),
    data=st.data(),
)
def test_nodes_times_local_gpus_is_n_gpus(
    per_node: int, factor: int, below: bool, data: st.DataObject
) -> None:
    n = data.draw(st.integers(1, per_node)) if below else per_node * factor
    cluster = build_cluster("k80", n, per_node, intra_node="none" if per_node == 1 else "pcie3")
    assert cluster.n_nodes * cluster.local_gpus == n
    assert cluster.local_gpus <= per_node
    assert 1 <= cluster.gpus_per_pcie_switch <= cluster.local_gpus
    assert (cluster.nic is None) == (cluster.n_nodes == 1)
    assert (cluster.intra is None) == (cluster.local_gpus == 1)
    assert {cluster.node_of(r) for r in range(0, n, max(1, n // 50))} <= set(range(cluster.n_nodes))


@given(n=st.integers(2, 5000), per_node=st.integers(2, 64))
def test_non_multiples_are_refused(n: int, per_node: int) -> None:
    if n <= per_node or n % per_node == 0:
        assert build_cluster("p40", n, per_node, intra_node="pcie3").n_gpus == n
    else:
        with pytest.raises(ConfigError, match=f"n_gpus={n} .*gpus_per_node={per_node}"):
            build_cluster("p40", n, per_node, intra_node="pcie3")


# --------------------------------------------------------------------------- describe_cluster


def test_describe_cluster_is_human_units_and_json_safe() -> None:
    d = describe_cluster(build_cluster("v100", 32, inter_node="25gbe", transport="rdma"))
    assert json.loads(json.dumps(d)) == d
    assert d["gpu"] == "v100-sxm2" and d["nodes"] == 4 and d["gpus_per_node"] == 8
    assert d["intra_node"] == "nvlink-v100" and d["inter_node"] == "25gbe"
    assert d["transport"] == "rdma"
    assert d["nic_nominal_Gbps"] == pytest.approx(25.0)
    assert d["nic_bandwidth_Gbps"] == pytest.approx(25.0 * 0.9)
    assert d["intra_bandwidth_GBps"] == pytest.approx(120.0)
    assert d["peak_fp32_TFLOPS"] == pytest.approx(15.7)
    single = describe_cluster(build_cluster("k80", 1))
    assert single["transport"] is None and single["nic_bandwidth_Gbps"] is None
    assert single["intra_bandwidth_GBps"] is None and single["peak_fp16_TFLOPS"] is None


def test_describe_accepts_a_hand_built_cluster() -> None:
    base = build_cluster("k80", 8)
    hand = Cluster(**{**base.__dict__, "inter_link": "custom"})
    assert describe_cluster(hand)["inter_node"] == "custom"


# --------------------------------------------------------------------------- data files


def test_shipped_files_load_from_any_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cat = catalog._load_catalog()
    assert set(GPUS) <= set(cat.devices)


def test_loading_is_cached() -> None:
    assert catalog._catalog() is catalog._catalog()
    assert catalog.device("k80") is catalog.device("k80")


def test_top_level_metadata() -> None:
    for name in ("devices.json", "links.json"):
        doc = _doc(name)
        assert doc["schema_version"] == catalog.SCHEMA_VERSION
        assert "units" in doc


def _corrupt_link(doc: dict[str, Any], scope: str, link: str, key: str, value: Any) -> None:
    if value is _DELETE:
        del doc[scope][link][key]
    else:
        doc[scope][link][key] = value


_DELETE = object()

LINK_CORRUPTIONS = [
    ("inter", "25gbe", "bandwidth_Gbps", _DELETE, "'bandwidth_Gbps': missing"),
    ("inter", "25gbe", "bandwidth_Gbps", -25, "'bandwidth_Gbps': must be a positive"),
    ("inter", "25gbe", "bandwidth_Gbps", 0, "must be a positive"),
    ("inter", "25gbe", "bandwidth_Gbps", "fast", "'fast'"),
    ("intra", "pcie3", "bandwidth_GBps", None, "only the 'none' entry"),
    ("inter", "ib-edr", "efficiency", {"tcp": 0.3, "rdma": 1.5}, "'efficiency.rdma'.*1.5"),
    ("inter", "ib-edr", "efficiency", {"tcp": 0.0, "rdma": 0.9}, "'efficiency.tcp'"),
    ("inter", "ib-edr", "efficiency", {"rdma": 0.9}, "must give exactly"),
    ("inter", "ib-edr", "latency_us", {"tcp": -1, "rdma": 3}, "'latency_us.tcp'"),
    ("inter", "ib-edr", "default_transport", "udp", "unknown transport 'udp'"),
    ("intra", "nvswitch", "gpus_per_pcie_switch", 0, "'gpus_per_pcie_switch'"),
    ("intra", "nvswitch", "max_gpus", 2.5, "'max_gpus'"),
    ("host", "pcie3", "bandwidth_Gbps", 126, "unknown key"),  # wrong unit for a host link
    ("host", "pcie3", "sources", {}, "'bandwidth_GBps': no source"),
    ("intra", "nvlink-p100", "nvlink_peers", [[1], [0]], "each of the 8 GPUs"),
    (
        "intra",
        "nvlink-p100",
        "nvlink_peers",
        [[1], [0], [3], [2], [5], [4], [7], [6, 6, 0]],
        "0 does not list 7",
    ),
    (
        "intra",
        "nvlink-p100",
        "nvlink_peers",
        [[0], [0], [3], [2], [5], [4], [7], [6]],
        "GPU 0: peers",
    ),
]


@pytest.mark.parametrize(
    ("scope", "link", "key", "value", "fragment"),
    LINK_CORRUPTIONS,
    ids=[f"{c[1]}-{c[2]}-{i}" for i, c in enumerate(LINK_CORRUPTIONS)],
)
def test_corrupted_links_file_is_a_catalog_error(
    tmp_path: Path, scope: str, link: str, key: str, value: Any, fragment: str
) -> None:
    doc = _doc("links.json")
    _corrupt_link(doc, scope, link, key, value)
    path = _write(tmp_path, "links.json", doc)
    with pytest.raises(CatalogError, match=fragment) as err:
        catalog._load_catalog(links_path=path)
    message = str(err.value)
    assert str(path) in message  # names the file
    assert repr(link) in message  # names the entry


DEVICE_CORRUPTIONS = [
    ("p40", "memory_GiB", _DELETE, "'memory_GiB': missing"),
    ("p40", "peak_fp32_TFLOPS", 0, "'peak_fp32_TFLOPS': must be a positive"),
    ("p40", "peak_fp16_TFLOPS", -1, "'peak_fp16_TFLOPS'"),
    ("p40", "mem_bandwidth_GBps", float("nan"), "'mem_bandwidth_GBps'"),
    ("p40", "host_link", "pcie9", "'pcie9' is not a host link"),
    ("p40", "default_intra_node", "25gbe", "'default_intra_node'"),
    ("p40", "default_gpus_per_node", 0, "'default_gpus_per_node'"),
    ("p40", "peak_fp32_GFLOPS", 12000, "unknown key"),
    ("p40", "sources", {"peak_fp32_TFLOPS": "datasheet"}, "no source"),
    ("p40", "sm_count", _DELETE, "'sm_count': required of a GPU"),
    ("p40", "sm_count", 0, "'sm_count': must be a positive integer"),
    ("m40", "sm_count", 24.0, "'sm_count': must be a positive integer"),
    ("epyc-zen4-core", "sm_count", 1, "'sm_count': required of a GPU, not allowed for a CPU"),
    ("a100", "peak_tf32_TFLOPS", 19.5, "'peak_tf32_TFLOPS': a GPU's tensor-core peak above"),
    ("epyc-zen4-core", "peak_tf32_TFLOPS", 5.0, "'peak_tf32_TFLOPS': a GPU's tensor-core"),
    ("p40", "peak_tf32_TFLOPS", 50.0, "'peak_tf32_TFLOPS': no source"),
    ("v100-sxm2-32gb", "silicon_of", "a100", "silicon_of 'a100' must name a device of the same"),
    ("v100-sxm2-32gb", "silicon_of", "gv100", "silicon_of 'gv100' must name"),
]


@pytest.mark.parametrize(
    ("gpu", "key", "value", "fragment"),
    DEVICE_CORRUPTIONS,
    ids=[f"{c[1]}-{i}" for i, c in enumerate(DEVICE_CORRUPTIONS)],
)
def test_corrupted_devices_file_is_a_catalog_error(
    tmp_path: Path, gpu: str, key: str, value: Any, fragment: str
) -> None:
    doc = _doc("devices.json")
    if value is _DELETE:
        del doc["devices"][gpu][key]
    else:
        doc["devices"][gpu][key] = value
    path = _write(tmp_path, "devices.json", doc)
    with pytest.raises(CatalogError, match=fragment) as err:
        catalog._load_catalog(devices_path=path)
    assert str(path) in str(err.value) and repr(gpu) in str(err.value)


def test_a_gpu_s_sm_count_needs_a_source(tmp_path: Path) -> None:
    doc = _doc("devices.json")
    del doc["devices"]["titanx-pascal"]["sources"]["sm_count"]
    with pytest.raises(CatalogError, match="'sm_count': no source"):
        catalog._load_catalog(devices_path=_write(tmp_path, "devices.json", doc))


def test_sm_counts_match_the_published_core_counts() -> None:
    """SMs x FP32 cores per SM x 2 x boost clock = the catalog's fp32 peak (datasheet cores)."""
    cores_per_sm = {"k80": 192, "p100-sxm2": 64, "v100-sxm2": 64, "a100": 64, "m40": 128}
    boost_ghz = {"k80": 0.875, "p100-sxm2": 1.48, "v100-sxm2": 1.53, "a100": 1.41, "m40": 1.114}
    for gpu, cores in cores_per_sm.items():
        d = catalog.device(gpu)
        peak = d.sm_count * cores * 2 * boost_ghz[gpu] * 1e9
        assert peak == pytest.approx(d.peak_fp32_flops, rel=0.01), gpu
    assert catalog.device("epyc-zen4-core").sm_count is None


def test_other_file_level_corruptions(tmp_path: Path) -> None:
    bad_json = tmp_path / "devices.json"
    bad_json.write_text("{ not json", encoding="utf-8")
    with pytest.raises(CatalogError, match="not valid JSON"):
        catalog._load_catalog(devices_path=bad_json)
    with pytest.raises(CatalogError, match="cannot read"):
        catalog._load_catalog(devices_path=tmp_path / "missing.json")

    doc = _doc("devices.json")
    doc["schema_version"] = 99
    with pytest.raises(CatalogError, match="schema_version 99"):
        catalog._load_catalog(devices_path=_write(tmp_path, "d1.json", doc))

    doc = _doc("devices.json")
    doc["aliases"]["v100"] = "v200"
    with pytest.raises(CatalogError, match=r"alias 'v100'.*'v200'"):
        catalog._load_catalog(devices_path=_write(tmp_path, "d2.json", doc))

    doc = _doc("devices.json")
    doc["aliases"]["k80"] = "p40"
    with pytest.raises(CatalogError, match="shadows"):
        catalog._load_catalog(devices_path=_write(tmp_path, "d3.json", doc))

    doc = _doc("devices.json")
    doc["devices"]["V100-SXM2"] = doc["devices"].pop("v100-sxm2")
    with pytest.raises(CatalogError, match=r"'V100-SXM2': ids must be .*lower-case"):
        catalog._load_catalog(devices_path=_write(tmp_path, "d4.json", doc))

    doc = _doc("links.json")
    del doc["inter"]["none"]
    with pytest.raises(CatalogError, match="'inter' has no 'none'"):
        catalog._load_catalog(links_path=_write(tmp_path, "l1.json", doc))

    doc = _doc("links.json")
    doc["inter"]["ec2"]["by_gpu"]["tpu"] = {"instance": "x", "bandwidth_Gbps": 1, "source": "y"}
    with pytest.raises(CatalogError, match="by_gpu 'tpu'"):
        catalog._load_catalog(links_path=_write(tmp_path, "l2.json", doc))


def test_faster_generations_of_a_family_are_faster_over_rdma() -> None:
    for family in (
        ("10gbe", "25gbe", "40gbe", "50gbe", "100gbe", "200gbe"),
        ("ib-fdr", "ib-edr", "ib-hdr", "ib-ndr"),
    ):
        rates = [catalog.network(name).bandwidth_Bps("rdma") for name in family]
        assert rates == sorted(rates) and len(set(rates)) == len(rates), family


# --------------------------------------------------------------------------- modern GPUs


#: FP32 lanes per SM (datasheets / architecture whitepapers): GA100 64, GA102 and GH100 128
_LANES = {"a100": 64, "a100-sxm4-80gb": 64, "a100-pcie-40gb": 64, "a100-pcie-80gb": 64,
          "h100": 128, "h100-pcie": 128, "a10": 128}  # fmt: skip


@pytest.mark.parametrize("gpu", sorted(_LANES))
def test_modern_gpus_peaks_follow_their_clocks(gpu: str) -> None:
    """fp32 peak = SMs x FP32 lanes x 2 x boost clock; dense fp16 tensor = 2 x dense TF32;
    base clock below boost; every figure has a source."""
    d = catalog.device(gpu)
    assert d.sm_count * _LANES[gpu] * 2 * d.boost_clock_hz == pytest.approx(
        d.peak_fp32_flops, rel=0.01
    )
    assert d.peak_fp16_flops == pytest.approx(2 * d.peak_tf32_flops)
    assert d.base_clock_hz < d.boost_clock_hz and d.max_power_w >= 150
    assert d.arch in ("ampere", "hopper")
    for key in ("base_clock_MHz", "boost_clock_MHz", "max_power_W", "peak_tf32_TFLOPS"):
        assert key in d.sources


def test_pcie_cards_are_pcie_servers_with_their_power_limits() -> None:
    for gpu, fabric in (("a100-pcie-40gb", "pcie4"), ("a100-pcie-80gb", "pcie4"),
                        ("h100-pcie", "pcie5"), ("a10", "pcie4")):  # fmt: skip
        d = catalog.device(gpu)
        assert build_cluster(gpu, 8).intra_link == fabric and d.host_link == fabric
        assert d.max_power_w < catalog.device("a100").max_power_w
    assert build_cluster("a100-sxm4-80gb", 8).intra_link == "nvlink-a100"
    # the 80 GB parts: HBM2e, faster than the 40 GB ones
    assert (
        catalog.device("a100-sxm4-80gb").mem_bandwidth_Bps
        > catalog.device("a100").mem_bandwidth_Bps
    )
    assert (
        catalog.device("a100-pcie-80gb").mem_bandwidth_Bps
        > catalog.device("a100-pcie-40gb").mem_bandwidth_Bps
    )
    # the H100 PCIe datasheet quotes its tensor cores at a lower clock than the SXM5's
    per_sm = {
        g: catalog.device(g).peak_fp16_flops / catalog.device(g).sm_count
        for g in ("h100", "h100-pcie")
    }
    assert per_sm["h100-pcie"] < 0.9 * per_sm["h100"]
    assert catalog.device("a100-80gb").id == "a100-sxm4-80gb"
    assert catalog.device("a100-pcie").id == "a100-pcie-40gb"


def test_pcie_generations_and_nvlink4() -> None:
    """x16 per direction: PCIe 3.0 15.75, 4.0 31.5, 5.0 63 GB/s; NVLink 4 through NVSwitch
    900 GB/s per H100 in both directions = 450 per direction."""
    nominal = {
        n: catalog.intra_link(n).nominal_bandwidth_Bps / 1e9
        for n in ("pcie3", "pcie4", "pcie5", "nvlink-h100")
    }
    assert nominal == {"pcie3": 15.75, "pcie4": 31.5, "pcie5": 63.0, "nvlink-h100": 450.0}
    for n in ("pcie4", "pcie5"):
        link = catalog.intra_link(n)
        assert (
            link.nccl_hop == "pcie"
            and catalog.host_link(n).nominal_bandwidth_Bps == link.nominal_bandwidth_Bps
        )


def test_clocks_come_all_together(tmp_path: Path) -> None:
    doc = _doc("devices.json")
    del doc["devices"]["a10"]["max_power_W"]
    with pytest.raises(
        CatalogError, match=r"'base_clock_MHz': clocks come all together.*max_power_W"
    ):
        catalog._load_catalog(devices_path=_write(tmp_path, "devices.json", doc))
    doc = _doc("devices.json")
    doc["devices"]["a10"]["base_clock_MHz"] = 2000
    with pytest.raises(CatalogError, match="above the boost clock"):
        catalog._load_catalog(devices_path=_write(tmp_path, "devices.json", doc))
    doc = _doc("devices.json")
    doc["devices"]["h100"]["tensor_clock_MHz"] = 2000
    with pytest.raises(CatalogError, match="outside base"):
        catalog._load_catalog(devices_path=_write(tmp_path, "devices.json", doc))
    doc = _doc("devices.json")
    doc["devices"]["a10"]["tensor_clock_MHz"] = 1500
    for key in ("base_clock_MHz", "boost_clock_MHz", "max_power_W"):
        del doc["devices"]["a10"][key]
    with pytest.raises(CatalogError, match="comes with the clocks"):
        catalog._load_catalog(devices_path=_write(tmp_path, "devices.json", doc))


def test_a_memory_variant_shares_its_silicons_calibrations(tmp_path) -> None:
    """v100-sxm2-32gb is v100-sxm2's die with twice the memory: the same peaks, its
    calibrations; a silicon_of naming another part or a part of other peaks is refused."""
    big, small = catalog.device("v100-sxm2-32gb"), catalog.device("v100-sxm2")
    assert big.silicon_of == "v100-sxm2" and big.memory_bytes == 2 * small.memory_bytes
    assert big.peak_fp16_flops == small.peak_fp16_flops
    a = ddlsim.predict("resnet50", 8, gpu="v100-sxm2-32gb")
    b = ddlsim.predict("resnet50", 8, gpu="v100-sxm2")
    assert a.images_per_sec == pytest.approx(b.images_per_sec)
