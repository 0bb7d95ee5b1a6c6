"""``--intra-node none`` with several GPUs: each GPU a node of its own (issue 33, 15).

The fabric connects no GPUs, so 8 GPUs become 8 nodes x 1 GPU over the network: predict says so
(a note on stderr, and in the report's assumptions). It predicts ResNet-50 faster than the same
8 GPUs in one NVLink node only because no host is shared: with the host contention between
co-located GPUs set to 0 the two are equal, and where the network is the bottleneck (VGG-16,
AlexNet) the NVLink node is the faster.
"""

from __future__ import annotations

import pytest

import ddlsim
from ddlsim.cli.main import main


def test_predict_says_what_intra_node_none_made_of_8_gpus(capsys):
    assert main(["predict", "--gpus", "8", "--intra-node", "none"]) == 0
    out, err = capsys.readouterr()
    notes = [line for line in err.splitlines() if line.startswith("ddlsim: note:")]
    assert len(notes) == 1 and "8 GPUs became 8 nodes x 1 GPU over ib-edr" in notes[0]
    assert "intra-node     none (one GPU per node: the 8 GPUs became 8 nodes x 1 GPU" in out
    for argv in (["--gpus-per-node", "1"], ["--gpus", "1"], []):  # asked for, or nothing to say
        assert main(["predict", "--gpus", "8", *argv]) == 0
        out, err = capsys.readouterr()
        assert "ddlsim: note" not in err and "one GPU per node" not in out


def ips(model: str, **kwargs) -> float:
    return ddlsim.predict(model, 8, **kwargs).images_per_sec


def test_only_the_shared_host_makes_one_gpu_nodes_faster():
    nvlink, alone = ips("resnet50"), ips("resnet50", intra_node="none")
    assert nvlink == pytest.approx(1630.6, abs=0.05) and alone == pytest.approx(1695.4, abs=0.05)
    no_sharing = ips("resnet50", host_contention=0)
    assert no_sharing == pytest.approx(alone, rel=1e-9)  # the whole difference
    assert ips("resnet50", intra_node="none", host_contention=0) == pytest.approx(alone, rel=1e-9)
    for model in ("vgg16", "alexnet"):  # the network costs more than NVLink: no longer faster
        assert ips(model, host_contention=0) > ips(model, intra_node="none", host_contention=0)


def test_the_note_reaches_json_timeline_and_sweep(capsys, tmp_path):
    """The same note in --json (inputs.one_gpu_nodes), on timeline's stderr and, once for the
    grid, on sweep's."""
    import json

    assert main(["predict", "--gpus", "8", "--intra-node", "none", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["inputs"]["one_gpu_nodes"].startswith("one GPU per node: the 8 GPUs")
    assert "ddlsim: note: --intra-node none" in err
    assert main(["predict", "--gpus", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"]["one_gpu_nodes"] is None
    trace = tmp_path / "t.json"
    assert main(["timeline", "--gpus", "8", "--intra-node", "none", "-o", str(trace)]) == 0
    assert "8 GPUs became 8 nodes x 1 GPU" in capsys.readouterr().err
    sweep = tmp_path / "s.csv"
    argv = ["sweep", "--gpus", "8", "16", "--intra-node", "none", "--serial", "-o", str(sweep)]
    assert main(argv) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "ddlsim: note" in ln]
    assert len(notes) == 1 and "2 configuration(s)" in notes[0]
