"""``ddlsim calibrate network``: log parsing, the fit, the calibration file and its use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ddlsim
from ddlsim.calibration import network as calfile
from ddlsim.comm.nccl_allreduce import NcclAllreduceModel
from ddlsim.config.record import file_sha256
from ddlsim.errors import CalibrationError, ConfigError
from ddlsim.system import catalog
from ddlsim.tools.netcal import names
from ddlsim.tools.netcal.fit import Target, fit_link, with_link
from ddlsim.tools.netcal.logs import _version_from_code, read_log

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "traces" / "measured" / "collectives" / "logs"
SWEEP = REPO / "traces" / "horovod" / "allreduce_sweep.json"

HEADER = """\
# nccl-tests version 2.13.9 nccl-headers=21805 nccl-library=21805
# Collective test starting: {name}_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 4(factor) warmup iters: 5 iters: 20 \
agg iters: 1 validation: 1 graph: 0
#
# Using devices
{ranks}
{extra}
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""  # noqa: E501
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.234\n#\n"
SIZES = [8 * 4**k for k in range(13)]  # 8 B .. 128 MiB


def _ranks(nodes: int, per: int, device: str) -> str:
    return "\n".join(
        f"#  Rank {r:2d} Group  0 Pid  {4000 + r:5d} on   host-{r // per} device {r % per:2d} "
        f"[0x{16 + r % per:02x}] {device}"
        for r in range(nodes * per)
    )


def _row(size: int, time_s: float) -> str:
    us = time_s * 1e6
    algbw = size / time_s / 1e9
    cells = f"{us:8.2f} {algbw:7.3f} {algbw:7.3f}      0"
    return f"{size:12d} {size // 4:13d}     float     sum      -1 {cells} {cells}"


def _model_log(
    tmp_path: Path,
    bandwidth_Bps: float,
    latency_s: float,
    *,
    nodes: int = 2,
    per: int = 8,
    algo: str = "auto",
    name: str = "all_reduce",
) -> Path:
    """An nccl-tests log whose times are ddlsim's own model with known network terms."""
    target = Target("v100-sxm2", per, "nvlink-v100", "ib-edr", "rdma", 1, "2.18", "nccl")
    cluster = with_link(target.cluster(nodes * per), "network", bandwidth_Bps, latency_s)
    model = NcclAllreduceModel(cluster, version="2.18", algorithm=algo)
    extra = "NCCL version 2.18.5+cuda12.2"
    if algo != "auto":
        extra += f"\nhost-0:4000:4000 [0] NCCL INFO NCCL_ALGO set by environment to {algo}"
    text = HEADER.format(name=name, ranks=_ranks(nodes, per, "Tesla V100-SXM2-32GB"), extra=extra)
    text += "\n".join(
        _row(s, model.collective_choice(name, s).time_s) for s in SIZES
    )  # fmt: skip
    path = tmp_path / f"{name}_{nodes}x{per}_{algo}.log"
    path.write_text(text + "\n" + FOOTER)
    return path


# --------------------------------------------------------------------------- parsing


def test_a_log_states_its_cluster_version_and_forced_algorithm(tmp_path):
    m = read_log(_model_log(tmp_path, 10e9, 5e-6, algo="ring"))
    assert (m.format, m.library, m.collective) == ("nccl-tests", "nccl", "all_reduce")
    assert (m.n_ranks, m.nodes, m.gpus_per_node) == (16, 2, 8)
    assert m.nccl_version == "2.18.5" and m.algorithm == "ring" and m.protocol == "auto"
    assert set(m.devices) == {"Tesla V100-SXM2-32GB"}
    assert m.sizes_bytes == tuple(float(s) for s in SIZES)


def test_the_rebuilt_old_format_log_parses():
    m = read_log(LOGS / "S15_all_reduce_perf.log", "all_reduce")
    assert (m.n_ranks, m.nodes, m.nccl_version, m.algorithm) == (16, 2, "2.4.8", "ring")
    assert m.transport == "rdma" and len(m.sizes_bytes) == 28
    assert m.times_s[0] == pytest.approx(145.4e-6)


@pytest.mark.parametrize(("code", "version"), [("21805", "2.18.5"), ("2408", "2.4.8")])
def test_nccl_version_codes(code, version):
    assert _version_from_code(code) == version


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.split("#       size")[0], "no size rows"),
        (lambda t: t.replace(FOOTER, ""), "truncated table"),
        (lambda t: t.replace("     float     sum      -1", "     float", 1), "truncated table"),
        (
            lambda t: t.replace(
                "starting: all_reduce_perf",
                "starting: all_reduce_perf\n# Collective test starting: all_gather_perf",
            ),
            "mixed collectives",
        ),
    ],
    ids=["no-rows", "no-footer", "short-row", "mixed"],
)
def test_a_bad_log_is_one_line_exit_2_and_nothing_written(tmp_path, cli, mutate, message):
    good = _model_log(tmp_path, 10e9, 5e-6)
    bad = tmp_path / "bad.log"
    bad.write_text(mutate(good.read_text()))
    out = tmp_path / "cal.json"
    code, stdout, err = cli(
        "calibrate", "network", str(bad), "--inter-node", "ib-edr", "-o", str(out)
    )
    assert code == 2 and stdout == ""
    assert err.startswith("ddlsim: error:") and message in err and err.count("\n") == 1
    assert not out.exists() and list(tmp_path.glob("*.tmp*")) == []


def test_osu_output_needs_the_rank_count(tmp_path, cli):
    osu = tmp_path / "osu.txt"
    osu.write_text(
        "# OSU MPI Allreduce Latency Test v5.6.2\n# Size       Avg Latency(us)\n"
        + "".join(f"{s:<10d}{20 + s / 1e3:18.2f}\n" for s in (4, 64, 1024, 65536, 1048576))
    )
    m = read_log(osu)
    assert (m.format, m.library, m.collective, len(m.sizes_bytes)) == (
        "osu",
        "mpi",
        "all_reduce",
        5,
    )
    out = tmp_path / "c.json"
    code, _, err = cli("calibrate", "network", str(osu), "--gpu", "v100", "-o", str(out))
    assert code == 2 and "--gpus and --gpus-per-node" in err and not out.exists()
    flags = ("--gpus", "16", "--gpus-per-node", "8", "--inter-node", "100gbe", "-o", str(out))
    code, _, err = cli("calibrate", "network", str(osu), "--gpu", "v100", *flags)
    doc = json.loads(out.read_text())
    assert code == 0 and doc["library"] == "mpi" and doc["cluster"]["transport"] == "tcp"
    assert doc["sources"][0]["format"] == "osu" and doc["fits"][0]["n_points"] == 5


# --------------------------------------------------------------------------- the fit


@pytest.mark.parametrize("algo", ["auto", "ring", "tree"])
def test_the_fit_recovers_the_terms_the_log_was_made_with(tmp_path, algo):
    logs = [read_log(_model_log(tmp_path, 7.5e9, 40e-6, nodes=n, algo=algo)) for n in (2, 4)]
    target = Target("v100-sxm2", 8, "nvlink-v100", "ib-edr", "rdma", 1, "2.18", "nccl")
    fit = fit_link(target, logs, "network")
    assert fit.bandwidth_Bps == pytest.approx(7.5e9, rel=0.01)
    assert fit.latency_s == pytest.approx(40e-6, rel=0.03)
    assert fit.max_abs_residual < 0.01 and fit.bandwidth_determined and fit.latency_determined


def test_all_gather_logs_fit_through_the_ring_half(tmp_path):
    log = read_log(_model_log(tmp_path, 5e9, 20e-6, name="all_gather"))
    target = Target("v100-sxm2", 8, "nvlink-v100", "ib-edr", "rdma", 1, "2.18", "nccl")
    fit = fit_link(target, [log], "network")
    assert fit.bandwidth_Bps == pytest.approx(5e9, rel=0.01)
    assert fit.latency_s == pytest.approx(20e-6, rel=0.05)


def test_the_horovod_gloo_sweep_gives_the_catalog_loopback_link():
    """The catalog's loopback figures were fitted to the same sweep by ddlsim.tools.hvdlocal."""
    target = Target("epyc-zen4-core", 2, "loopback", "none", None, 1, "2.14", "gloo")
    fit = fit_link(target, [read_log(SWEEP)], "intra")
    loop = catalog.intra_link("loopback")
    assert fit.bandwidth_Bps == pytest.approx(loop.bandwidth_Bps(), rel=0.05)
    assert fit.latency_s == pytest.approx(loop.message_latency_s(), rel=0.05)


def test_measured_efa_log_latency_and_bandwidth():
    """AWS's p3dn EFA sample (rebuilt from nccl_tests.csv): fitted 7-8 GB/s and ~50 us per
    network hop, where the catalog assumed 11.25 GB/s and 15 us."""
    log = read_log(LOGS / "S15_all_reduce_perf.log")
    target = Target("v100-sxm2", 8, "nvlink-v100", "efa", "rdma", 1, "2.4", "nccl")
    fit = fit_link(target, [log], "network")
    assert 6.5e9 < fit.bandwidth_Bps < 8.5e9
    assert 35e-6 < fit.latency_s < 65e-6
    assert fit.rms_log_residual < 0.2


# --------------------------------------------------------------------------- the file, predict


@pytest.fixture
def edr_cal(tmp_path, cli):
    log = _model_log(tmp_path, 6e9, 30e-6)
    out = tmp_path / "edr.json"
    code, stdout, err = cli(
        "calibrate", "network", str(log), "--inter-node", "ib-edr", "-o", str(out)
    )
    assert code == 0, err
    assert "network" in stdout and "6.000 GB/s" in stdout and str(out) in stdout
    return out


def test_the_file_records_provenance_and_terms(edr_cal):
    doc = json.loads(edr_cal.read_text())
    assert doc["schema"] == calfile.SCHEMA and doc["schema_version"] == 1
    assert doc["cluster"] == {
        "gpu": "v100-sxm2", "gpus_per_node": 8, "intra_node": "nvlink-v100",
        "inter_node": "ib-edr", "transport": "rdma", "nics_per_node": 1, "nccl_version": "2.18",
    }  # fmt: skip
    (src,) = doc["sources"]
    assert src["sha256"] == file_sha256(src["path"]) and src["nccl_version"] == "2.18.5"
    assert src["devices"] == ["Tesla V100-SXM2-32GB"] and (src["nodes"], src["n_ranks"]) == (2, 16)
    assert doc["terms"]["network"]["bandwidth_GBps"] == pytest.approx(6.0, rel=0.01)
    assert doc["terms"]["network"]["latency_us"] == pytest.approx(30.0, rel=0.03)
    (fit,) = doc["fits"]
    assert len(fit["residuals"]) == len(SIZES) and fit["max_abs_residual"] < 0.01


def test_predict_uses_reports_and_records_it(edr_cal, cli, tmp_path):
    kw = dict(model="resnet50", gpu="v100-sxm2", gpus=32, inter_node="ib-edr")
    slower = ddlsim.predict(**kw, network_calibration=str(edr_cal))
    setup = ddlsim.prepare(ddlsim.job(**kw, network_calibration=str(edr_cal)))
    assert setup.cluster.nic.bandwidth_Bps == (pytest.approx(6e9, rel=0.01))
    assert slower.images_per_sec < ddlsim.predict(**kw).images_per_sec  # 6 GB/s < 11.25
    rec = slower.inputs["network_calibration"]
    assert rec["sha256"] == file_sha256(edr_cal) and rec["terms"]["network"]["latency_us"] > 0
    code, out, _ = cli(
        "predict", "--gpus", "32", "--gpu", "v100", "--network-calibration", str(edr_cal)
    )
    assert code == 0 and "network cal" in out and str(edr_cal) in out
    result = tmp_path / "r.json"
    code, out, _ = cli("predict", "--gpus", "32", "--gpu", "v100", "--network-calibration",
                       str(edr_cal), "--json")  # fmt: skip
    result.write_text(out)
    assert cli("predict", "--from-json", str(result))[0] == 0
    edr_cal.write_text(edr_cal.read_text() + " ")
    code, _, err = cli("predict", "--from-json", str(result))
    assert code == 2 and "network calibration file" in err and "changed" in err


def test_another_network_is_refused_a_single_node_unchanged(edr_cal, cli):
    code, _, err = cli("predict", "--gpus", "32", "--inter-node", "25gbe", "--network-calibration",
                       str(edr_cal))  # fmt: skip
    assert code == 2 and "measured ib-edr over rdma" in err and err.count("\n") == 1
    one = ddlsim.predict("resnet50", 8, network_calibration=str(edr_cal))
    assert one.images_per_sec == ddlsim.predict("resnet50", 8).images_per_sec


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "invalid JSON"), ('{"schema": "x"}', "not a ddlsim network calibration")],
)
def test_a_bad_calibration_file_is_one_error(tmp_path, cli, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(CalibrationError, match=message):
        calfile.load(bad)
    code, _, err = cli("predict", "--gpus", "16", "--network-calibration", str(bad))
    assert code == 2 and message in err


def test_validate_applies_it_to_the_rows_on_its_network(edr_cal, cli, tmp_path):
    runs = tmp_path / "runs.csv"
    runs.write_text(
        "run_id,source_id,model,gpu,gpus,gpus_per_node,intra_node,inter_node,transport,comm,"
        "batch_per_gpu,precision,data,images_per_sec\n"
        "a-1,a,resnet50,v100-sxm2,1,1,nvlink-v100,none,,single,64,fp32,synthetic,300\n"
        "a-2,a,resnet50,v100-sxm2,16,8,nvlink-v100,ib-edr,rdma,horovod-nccl,64,fp32,synthetic,4500\n"
        "a-3,a,resnet50,v100-sxm2,16,8,nvlink-v100,25gbe,,horovod-nccl,64,fp32,synthetic,4500\n"
    )
    code, out, _ = cli("validate", str(runs), "--json", "--network-calibration", str(edr_cal))
    assert code == 0
    notes = {r["run_id"]: " ".join(r["notes"]) for r in json.loads(out)["rows"]}
    assert "network calibration" in notes["a-2"] and "network calibration" not in notes["a-3"]


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("text", "intra", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", "", "h100"),
        ("A100-SXM4-40GB", "NVSwitch", "a100"),
        ("Tesla V100-SXM2-32GB", "", "v100-sxm2"),
        ("V100-16GB", "NVLink (2 links per pair)", "v100-sxm2"),
        ("Tesla V100-PCIE-32GB", "", "v100-pcie"),
        ("Tesla T4", "", "t4"),
        ("A100", "NVLink NV12 (pairwise bridge)", None),
    ],
)
def test_gpu_names(text, intra, gpu):
    assert names.gpu_name(text, intra).name == gpu


@pytest.mark.parametrize(
    ("text", "network"),
    [
        ("ib-edr (1x 100G per node)", "ib-edr"),
        ("ib-hdr (4x 200G per node)", "ib-hdr"),
        ("efa (p4d, 4x100G)", "efa"),
        ("roce 100G x8", "100gbe"),
        ("ec2-ena 100G (p3dn.24xlarge)", "100gbe"),
        ("gcp-a3mega", "gcp-tcpxo"),
        ("roce (OCI cluster network, RoCEv2)", None),
    ],
)
def test_network_names(text, network):
    assert names.network_name(text).name == network


def test_transport_names():
    assert names.transport_name("tcp (NET/Socket)").name == "tcp"
    assert names.transport_name("EFA via aws-ofi-nccl").name == "rdma"
    assert names.transport_name("gpudirect-tcpxo (inferred)").name == "tcp"


def test_a_missing_network_flag_names_the_choices(tmp_path, cli):
    log = _model_log(tmp_path, 6e9, 30e-6)
    code, _, err = cli("calibrate", "network", str(log), "-o", str(tmp_path / "c.json"))
    assert code == 2 and "--inter-node" in err and "ib-edr" in err


def test_a_flag_may_not_contradict_the_log(tmp_path, cli):
    log = _model_log(tmp_path, 6e9, 30e-6)
    out = str(tmp_path / "c.json")
    code, _, err = cli("calibrate", "network", str(log), "--inter-node", "ib-edr",
                       "--nccl-version", "2.4", "-o", out)  # fmt: skip
    assert code == 2 and "2.18" in err and "--nccl-version" in err
    with pytest.raises(ConfigError):
        calfile.apply({"cluster": {"inter_node": "10gbe", "transport": "tcp"},
                       "terms": {"network": {"latency_us": 1.0}}},
                      catalog.build_cluster("v100", 16))  # fmt: skip


def test_a_gpu_that_contradicts_the_logs_is_refused(cli, tmp_path):
    log = (
        Path(__file__).resolve().parents[1]
        / "traces/measured/collectives/logs/S08_all_reduce_perf.log"
    )
    out = tmp_path / "n.json"
    code, _, err = cli("calibrate", "network", str(log), "--gpu", "v100", "--inter-node", "efa",
                       "-o", str(out))  # fmt: skip
    assert code == 2 and "--gpu v100 contradicts the logs, which ran on a100" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("scope", "key", "value", "text"),
    [
        ("network", "bandwidth_GBps", 1e308, "must be a number in 0.001..1e+06 GB/s"),
        ("network", "bandwidth_per_nic_GBps", 5000.0, "must be a number in 0.001..1250 GB/s"),
        ("network", "latency_us", -1.0, "must be a number in 0..1e+06 us"),
        ("network", "latency_us", True, "got True"),
        ("network", "bandwidth_GBps", 0, "must be a number in 0.001..1e+06 GB/s"),
    ],
)
def test_a_term_outside_its_physical_range_refuses_the_file(
    edr_cal, tmp_path, cli, scope, key, value, text
):
    """Issue 33, 9: a file's numbers are held to the flags' ranges (1e308 GB/s was taken)."""
    doc = json.loads(edr_cal.read_text())
    doc["terms"][scope][key] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    argv = ["predict", "--gpus", "16", "--gpu", "v100", "--inter-node", "ib-edr"]
    code, _, err = cli(*argv, "--network-calibration", str(bad))
    assert code == 2 and f"terms.{scope}.{key} must be" in err and text in err
    assert err.count("\n") == 1
