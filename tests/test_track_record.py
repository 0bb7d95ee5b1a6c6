"""The measured error predict quotes: the shipped table is what the current model gives on
traces/measured/runs.csv, looked up by method and node count, shown in the report and JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import ddlsim
from ddlsim.cli.main import main
from ddlsim.config import track_record
from ddlsim.config.track_record import format_line, lookup, regime

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("track_record_script", ROOT / "scripts" /
                                                  "track_record.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("nodes", "label"),
    [(1, "1 node"), (2, "2-8 nodes"), (8, "2-8 nodes"), (9, "9-64 nodes"), (64, "9-64 nodes"),
     (65, "65+ nodes"), (512, "65+ nodes")],
)  # fmt: skip
def test_regimes(nodes, label):
    assert regime(nodes) == label
    with pytest.raises(ValueError):
        regime(0)


def test_the_shipped_table_is_what_the_model_gives_now():
    """Regenerate with python scripts/track_record.py --write after a change of the model."""
    script = _script()
    shipped = (ROOT / "ddlsim" / "config" / "data" / track_record.FILE).read_text()
    assert script.render(script.build()) == shipped


def test_lookup_and_its_line():
    hvd = lookup("horovod-nccl", 4)
    # DLPERF2020's 6 rows on IB EDR and HKBU_DDLBENCH2020's 12 on 10 GbE (its IB rows rest on
    # the catalog's assumption for InfiniBand of unstated generation and are not counted)
    assert hvd["regime"] == "2-8 nodes" and hvd["n"] == 18 and hvd["n_assumed"] == 0
    assert 0 < hvd["mape"] < 1 and hvd["worst_run_id"].startswith(("DLPERF2020", "HKBU"))
    big = lookup("horovod-nccl", 128)
    assert big["n"] == big["n_assumed"] == 3 and big["mape"] < 0.05
    assert "3 measured run(s) (3 efficiency-only, batch assumed)" in format_line(big)
    none = lookup("byteps", 16)
    assert none["n"] == 0 and none["mape"] is None
    assert format_line(none) == "byteps, 9-64 nodes: no measured run (unchecked there)"


def test_predict_quotes_it(capsys):
    assert main(["predict", "--model", "resnet50", "--gpus", "32", "--inter-node", "ib-edr"]) == 0
    out = capsys.readouterr().out
    assert "  measured error (ddlsim validate)" in out
    assert f"    scaling        {format_line(lookup('horovod-nccl', 4))}" in out
    p = ddlsim.predict(model="resnet50", gpus=32, inter_node="ib-edr")
    assert json.loads(json.dumps(p.to_dict()))["track_record"] == lookup("horovod-nccl", 4)
    assert ddlsim.predict(model="resnet50").to_dict()["track_record"] is None


def test_a_transformer_quotes_the_transformer_runs_error() -> None:
    """A transformer's prediction quotes runs_transformers.csv's figures, not the CNNs'; a
    sharded method's, from its --absolute pass."""
    from ddlsim.config.track_record import lookup, lookup_absolute

    ddp = lookup("ddp", 1, transformer=True)
    assert ddp["n"] >= 200 and "runs_transformers" in ddp["source"]
    assert lookup("ddp", 1)["n"] != ddp["n"]  # the CNN runs are another family
    assert lookup("fsdp", 4, transformer=True)["n"] >= 30
    own = lookup_absolute("v100-sxm2", "fp32", "tensorflow", transformer=True)
    assert own["n"] >= 15 and own["framework"] == "tensorflow"
    p = ddlsim.predict(
        "bert-base", 8, gpu="v100-sxm2", batch=8, seq_len=128, comm="ddp", framework="pytorch"
    )
    assert p.track_record["n"] == ddp["n"]
