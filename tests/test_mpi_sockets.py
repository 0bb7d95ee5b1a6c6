"""Horovod-MPI bounded per process on the host, and NCCL's sockets bounded by their flows."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ddlsim.comm import make_comm_model
from ddlsim.comm.executor import execute
from ddlsim.comm.mpi import (
    SUM_PER_COPY,
    XFER_PER_COPY,
    HostRates,
    MPIModel,
    MpiRelease,
)
from ddlsim.comm.nccl import TCP_WIRE_EFFICIENCY, NcclVersion, socket_net_Bps
from ddlsim.errors import ConfigError
from ddlsim.system.catalog import build_cluster
from ddlsim.system.hosts import default_host_cpu, host_cpu

ROOT = Path(__file__).resolve().parents[1]
S = 100e6


def _mpi(n=16, g=4, net="25gbe", transport="tcp", mpi="openmpi-4.1", host=None):
    return MPIModel(build_cluster("p100-pcie", n, g, None, net, transport), mpi, host)


def test_mpi_time_is_the_per_process_closed_form():
    """T = 2 (alpha_h + m S / B_h) + 2 (N-1) max(shm hop, NIC hop) + (N-1) (S/N) / R."""
    m = _mpi()
    c, r = m.cluster, m.rates
    n, chunk = c.n_gpus, S / c.n_gpus
    copy = c.host.latency_s + m.fabric.switch_gpus * S / c.host.bandwidth_Bps
    nic = min(r.xfer_Bps, c.nic.bandwidth_Bps)
    hop = max(1e-6 + chunk / r.xfer_Bps, c.nic.latency_s + chunk / nic)
    expected = 2 * copy + 2 * (n - 1) * hop + (n - 1) * chunk / r.sum_Bps
    assert m.time_s(S) == pytest.approx(expected, rel=1e-12)


def test_the_detailed_schedule_agrees_with_the_closed_form():
    for m in (_mpi(), _mpi(8, 8, "none"), _mpi(16, 1)):
        done = execute(m.schedule(S), np.zeros(m.cluster.n_gpus))
        assert float(done.max()) == pytest.approx(m.time_s(S), rel=1e-6)


def test_a_process_rate_is_its_own_not_a_share_of_the_node():
    """Per process: the host ring of 8 ranks on one node costs what 2(N-1)/N + (N-1)/N of S
    at one thread's rates costs, whatever the node's count of ranks."""
    for g in (2, 4, 8):
        m = _mpi(g, g, "none")
        r, chunk = m.rates, S / g
        per_hop = 1e-6 + chunk / r.xfer_Bps
        assert m.host_ring_s(S) == pytest.approx(
            2 * (g - 1) * per_hop + (g - 1) * chunk / r.sum_Bps
        )


def test_mpi_time_falls_as_the_host_core_speeds_up():
    slow = host_cpu("broadwell-ep")
    fast = replace(slow, core_copy_Bps=2 * slow.core_copy_Bps)
    t_slow, t_fast = _mpi(host=slow).host_ring_s(S), _mpi(host=fast).host_ring_s(S)
    assert t_fast < t_slow
    # one node, no wire: the ring is all host work, so twice the core halves it (the latency
    # aside)
    one_slow = _mpi(4, 4, "none", host=slow).host_ring_s(S)
    one_fast = _mpi(4, 4, "none", host=fast).host_ring_s(S)
    assert one_fast == pytest.approx(one_slow / 2, rel=1e-3)


def test_tcp_and_rdma_are_alike_when_the_host_binds():
    """The Horovod README's 2017 rows: MPI over TCP and RDMA within a few per cent."""
    tcp, rdma = _mpi(transport="tcp").time_s(S), _mpi(transport="rdma").time_s(S)
    assert tcp == pytest.approx(rdma, rel=0.01)


def test_the_mpi_release_switches_the_summation_loop():
    assert MpiRelease.parse("openmpi-4.0.5").summation == "scalar"
    assert MpiRelease.parse("Open MPI 4.1").summation == "vector"
    assert MpiRelease.parse("openmpi-3.0").summation == "scalar"
    assert MpiRelease.parse("intel-mpi-2019").summation == "vector"
    assert MpiRelease.parse("mvapich2-2.3").summation == "scalar"
    old, new = _mpi(mpi="openmpi-3.0"), _mpi(mpi="openmpi-4.1")
    assert old.rates.sum_Bps / new.rates.sum_Bps == pytest.approx(
        SUM_PER_COPY["scalar"] / SUM_PER_COPY["vector"]
    )
    assert old.time_s(S) > new.time_s(S)


@pytest.mark.parametrize("bad", ["", "openmpi", "mpich-3.2", "openmpi-x", 4.1])
def test_a_bad_mpi_is_one_error_naming_it(bad):
    with pytest.raises(ConfigError, match="MPI must name"):
        MpiRelease.parse(bad)


def test_the_host_follows_the_gpus_pcie_generation():
    cluster = build_cluster("p100-pcie", 1)
    assert default_host_cpu(cluster.device).id == "broadwell-ep"
    assert default_host_cpu(build_cluster("a100", 1).device).id == "zen2"
    assert default_host_cpu(build_cluster("h100", 1).device).id == "sapphire-rapids"


def test_the_constants_are_the_measurement():
    """XFER_PER_COPY and SUM_PER_COPY are what traces/mpi/allreduce.json says (within the
    spread of its runs)."""
    doc = json.loads((ROOT / "traces/mpi/allreduce.json").read_text())
    avx, base = doc["vader_avx"], doc["vader_base"]
    copy = avx["copy_Bps"]
    xfer = 1 / (1 / avx["allreduce_algbw_Bps"] - 1 / (2 * avx["reduce_local_Bps"]))
    assert xfer / copy == pytest.approx(XFER_PER_COPY, rel=0.05)
    assert avx["reduce_local_Bps"] / copy == pytest.approx(SUM_PER_COPY["vector"], rel=0.05)
    scalar = statistics.median(r["reduce_local_Bps"] / r["copy_Bps"] for r in base["runs"])
    assert scalar == pytest.approx(SUM_PER_COPY["scalar"], rel=0.1)
    assert host_cpu("epyc-zen4-kvm").core_copy_Bps == pytest.approx(copy, rel=0.01)
    assert HostRates.of(host_cpu("epyc-zen4-kvm")).xfer_Bps == pytest.approx(xfer, rel=0.05)


# ------------------------------------------------------------------------- NCCL over TCP


def _tcp(vendor="aws", cap_Gbps=10.0, net="25gbe", gpu="v100-sxm2"):
    c = build_cluster(gpu, 16, 8, None, net, "tcp", nccl=True)
    return replace(c, socket_vendor=vendor, socket_flow_cap_Bps=cap_Gbps * 1e9 / 8)


def test_sockets_closed_form_per_release():
    """Before 2.5: min(one stream per NIC, channels x cap); from 2.5 on AWS: min(line at TCP's
    wire efficiency, channels x 2 x 8 flows x cap, channels x 2 threads x stream)."""
    c = _tcp(cap_Gbps=1.0)
    ch, stream = c.nccl_channels, c.nic.bandwidth_Bps
    assert socket_net_Bps(c, NcclVersion(2, 4)) == min(stream, ch * 1e9 / 8)
    line = 25e9 / 8 * TCP_WIRE_EFFICIENCY
    expected = min(line, ch * 16 * 1e9 / 8, ch * 2 * stream)
    assert socket_net_Bps(c, NcclVersion(2, 5)) == pytest.approx(expected)


def test_a_nic_of_no_listed_vendor_runs_one_socket_in_every_release():
    c = _tcp(vendor="", cap_Gbps=math.inf)
    assert socket_net_Bps(c, NcclVersion(2, 3)) == socket_net_Bps(c, NcclVersion(2, 14))
    assert socket_net_Bps(c, NcclVersion(2, 14)) == c.nic.bandwidth_Bps


def test_socket_rate_is_monotone_in_the_flow_cap_and_never_above_the_line():
    for version in (NcclVersion(2, 3), NcclVersion(2, 14)):
        rates = [socket_net_Bps(_tcp(cap_Gbps=cap), version) for cap in (0.5, 1, 2, 5, 10, 100)]
        assert rates == sorted(rates)
        assert max(rates) <= 25e9 / 8 * TCP_WIRE_EFFICIENCY


def test_tcp_allreduce_time_is_bytes_over_the_flow_bound():
    """A bandwidth-bound ring over a capped socket: time ~ 2(N-1)/N S / min(flows x cap, NIC)."""
    c = _tcp(vendor="", cap_Gbps=1.0)
    m = make_comm_model("horovod-nccl", c, nccl_version="2.3")
    bus = min(c.nic.bandwidth_Bps, c.nccl_channels * 1e9 / 8)
    assert m.topology.net_Bps == bus
    n = c.n_gpus
    big = 1e9
    assert m.time_s(big) == pytest.approx(2 * (n - 1) / n * big / bus, rel=0.02)


def test_an_aws_instance_carries_its_vendor_and_cap():
    from ddlsim.config import SystemConfig
    from ddlsim.resolve.system import resolve_system

    for kw in ({"inter_node": "ec2"}, {"instance": "p3.16xlarge"}):
        s = SystemConfig(gpus=16, gpus_per_node=8, transport="tcp", **kw)
        c = resolve_system(s, "v100-sxm2", nccl=True)
        assert (c.socket_vendor, c.socket_flow_cap_Bps) == ("aws", 10e9 / 8)
    assert build_cluster("v100-sxm2", 16, 8, None, "25gbe", "tcp").socket_vendor == ""
