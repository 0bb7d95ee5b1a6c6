"""Cloud instances by name (``--instance``): the provider's table fills the system settings."""

from __future__ import annotations

import pytest

import ddlsim
from ddlsim.errors import ConfigError
from ddlsim.system import catalog
from ddlsim.system.instances import instance, instance_names, with_instance


@pytest.mark.parametrize("name", instance_names())
def test_every_instance_names_catalog_hardware(name):
    inst = instance(name)
    catalog.device(inst.gpu)
    assert inst.intra in catalog.intra_link_names()
    assert catalog.network(inst.network).id in (inst.network, *catalog.inter_link_names())
    assert inst.gpus >= 1 and inst.nics >= 1 and inst.source


def test_an_instance_fills_what_the_job_leaves_unset():
    unset = {"gpu": None, "gpus_per_node": None, "intra_node": None, "inter_node": None,
             "nics_per_node": 1, "transport": None}  # fmt: skip
    got = with_instance(unset, "p4d.24xlarge")
    assert got == {"gpu": "a100", "gpus_per_node": 8, "intra_node": "nvlink-a100",
                   "inter_node": "efa", "nics_per_node": 4, "transport": "rdma"}  # fmt: skip
    assert with_instance(unset, "p3.16xlarge")["transport"] == "tcp"  # EC2's ENA: no RDMA
    assert (
        with_instance({**unset, "gpu": "a100-sxm4-40gb"}, "p4d.24xlarge")["gpu"] == "a100-sxm4-40gb"
    )


def test_an_instance_predicts_as_its_settings_do():
    """Before NCCL 2.5 (no socket helper threads) an instance is its settings; from 2.5 its
    NIC vendor (AWS ENA: 2 threads x 8 sockets per connection) makes the sockets faster."""
    hand = dict(gpu="v100-sxm2", gpus_per_node=8, intra_node="nvlink-v100", inter_node="25gbe")
    for version in ("2.4", "2.14"):
        by_name = ddlsim.predict("resnet50", 32, instance="p3.16xlarge", nccl_version=version)
        by_hand = ddlsim.predict("resnet50", 32, transport="tcp", nccl_version=version, **hand)
        if version == "2.4":
            assert by_name.images_per_sec == by_hand.images_per_sec
        else:
            assert by_name.images_per_sec > by_hand.images_per_sec


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"instance": "p3.16xlarge", "gpu": "a100"}, "--gpu a100 contradicts --instance"),
        ({"instance": "p2.xlarge"}, "not modelled: its network is published only as 'High'"),
        ({"instance": "p3.16xl"}, "nearest: p3.16xlarge"),
    ],
)
def test_bad_instances_are_one_line(kwargs, text):
    with pytest.raises(ConfigError, match=text):
        ddlsim.predict("resnet50", 16, **kwargs)


def test_the_cli_names_a_bad_instance(cli):
    code, out, err = cli("predict", "--instance", "p9.huge", "--gpus", "16")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "unknown instance" in err
