"""Flags (issue 11, items 5 and 9): every numeric flag refused with the value and the reason, a
flag that does not apply warned about once, every flag of every sub-command described in its
``--help``, install hints that work from a checkout.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from ddlsim.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
LOG = REPO / "tests" / "data" / "logs" / "hvd_tf2_synthetic_resnet50_4gpu.log"
PS_LOG = REPO / "tests" / "data" / "logs" / "tf_cnn_benchmarks_resnet50_2x8k80_ps.log"
RUNS = REPO / "tests" / "data" / "validate_runs_small.csv"
SHIPPED = REPO / "calibration" / "p100-sxm2" / "alexnet" / "b64-fp32.json"


pytestmark = pytest.mark.usefixtures("no_user_calibration")


DETAILED = ["predict", "--gpus", "8", "--engine", "detailed"]
#: (argv, text the one error line must contain: the value and why)
BAD_NUMBERS = [
    ([*DETAILED, "--stragglers", "0:inf"], ["0:inf", "finite"]),
    ([*DETAILED, "--stragglers", "0:nan"], ["0:nan", "finite"]),
    ([*DETAILED, "--stragglers", "0:0"], ["0:0", "(0, 100]"]),
    ([*DETAILED, "--stragglers", "0:1.2,0:1.5"], ["rank 0 is given twice"]),
    ([*DETAILED, "--stragglers", "8:1.5"], ["8:1.5", "ranks are 0..7"]),
    ([*DETAILED, "--stragglers", ","], ["RANK:SLOWDOWN"]),
    ([*DETAILED, "--jitter", "2"], ["jitter", "got 2"]),
    ([*DETAILED, "--max-events", "0"], ["max events", "got 0"]),
    (["predict", "--gpus", "0"], ["--gpus", "got 0"]),
    (["predict", "--batch", "0"], ["--batch", "got 0"]),
    (["predict", "--gpus-per-node", "0", "--gpus", "8"], ["gpus_per_node", "got 0"]),
    (["predict", "--gpus", "8", "--n-ps", "0", "--comm", "ps"], ["parameter servers", "got 0"]),
    (["predict", "--data", "real", "--host-input-rate", "0"], ["host input rate", "got 0"]),
    (["predict", "--fusion-threshold-mb", "-1"], ["fusion threshold", "-1"]),
    (["predict", "--cycle-time-ms", "1e300"], ["cycle time", "1e+300"]),
    (["predict", "--single-gpu-throughput", "0"], ["single-GPU throughput", "0"]),
    (["predict", "--rank-sigma", "-1"], ["rank sigma", "-1"]),
    (["predict", "--seed", "-1"], ["seed", "-1"]),
    (["predict", "--epochs", "0"], ["epochs", "0"]),
    (["predict", "--dataset-images", "0"], ["dataset images", "0"]),
    (["predict", "--gpus", "inf"], ["integer", "'inf'"]),
    (["predict", "--epochs", "nan"], ["finite", "'nan'"]),
    (["timeline", "-o", "-", "--iterations", "0"], ["iterations", "got 0"]),
    (["timeline", "-o", "-", "--workers", "5"], ["rank(s) [5]", "0..0"]),
    (["sweep", "--gpus", "1", "--workers", "0", "-o", "-"], ["--workers", "got 0"]),
    (["sweep", "--gpus", "0", "-o", "-"], ["gpus", "got 0"]),
    (["sweep", "--gpus", "1", "--max-configs", "0", "-o", "-"], ["--max-configs", "got 0"]),
    (["traces", "import", str(LOG), "--gpus-per-node", "0"], ["--gpus-per-node", "got 0"]),
    (["traces", "import", str(LOG), "--gpus-per-node", "3"], ["4 GPUs do not fill", "of 3"]),
    (["traces", "import", str(PS_LOG), "--gpus-per-node", "3"], ["16 GPUs", "of 3"]),
    (["traces", "import", str(LOG), "--batch", "-2"], ["--batch", "got -2"]),
    (["validate", str(RUNS), "--rank-sigma", "-1"], ["rank sigma", "-1"]),
    (["validate", str(RUNS), "--fusion-threshold-mb", "-5"], ["fusion threshold", "-5"]),
    (["validate", str(RUNS), "--cycle-time-ms", "-5"], ["cycle time", "-5"]),
    (
        ["calibrate", "--calibration", str(SHIPPED), "--anchor-throughput", "0"],
        ["--anchor-throughput", "got 0"],
    ),
    (["calibrate", "--device", "cpu", "--steps", "0"], ["--steps", "got 0"]),
    (["calibrate", "--device", "cpu", "--warmup-steps", "5000"], ["--warmup-steps", "got 5000"]),
    (["calibrate", "--device", "cpu", "--batch", "0"], ["--batch", "got 0"]),
]


@pytest.mark.parametrize("argv, expected", BAD_NUMBERS, ids=[" ".join(a) for a, _ in BAD_NUMBERS])
def test_bad_numbers_name_the_value_and_the_reason(argv, expected, tmp_path, cli):
    if argv[0] == "calibrate":
        (tmp_path / "cal").mkdir()  # an output folder must exist
        argv = [*argv, "--output", str(tmp_path / "cal")]
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("ddlsim: error: "), err
    for text in expected:
        assert text in err, f"{text!r} not in {err!r}"
    assert not (tmp_path / "cal").exists() or list((tmp_path / "cal").iterdir()) == []


# ------------------------------------------------------------------- flags that do not apply

INAPPLICABLE = [
    (["--gpus", "8", "--n-ps", "4"], "--n-ps", "--comm horovod-nccl"),
    (["--gpus", "8", "--ps-dedicated"], "--ps-dedicated", "--comm horovod-nccl"),
    (["--gpus", "8", "--ps-placement", "gpu"], "--ps-placement", "--comm horovod-nccl"),
    (["--gpus", "8", "--comm", "ps", "--fusion-threshold-mb", "64"], "--fusion-threshold-mb", "ps"),
    (["--gpus", "8", "--comm", "ps", "--cycle-time-ms", "5"], "--cycle-time-ms", "ps"),
    (["--gpus", "8", "--comm", "horovod-mpi", "--hierarchical"], "--hierarchical", "horovod-mpi"),
    (["--gpus", "8", "--hierarchical", "--algorithm", "tree"], "--algorithm", "--hierarchical on"),
    (["--input-pipeline", "dali"], "--input-pipeline", "--data synthetic"),
    (["--host-input-rate", "5000"], "--host-input-rate", "--data synthetic"),
    (["--data", "real", "--input-pipeline", "dali", "--host-input-rate", "9"], "--host", "dali"),
    (["--seed", "3"], "--seed", "--engine fast"),
    (["--max-events", "1e9"], "--max-events", "--engine fast"),
]


@pytest.mark.parametrize("argv, flag, context", INAPPLICABLE, ids=[i[1] for i in INAPPLICABLE])
def test_a_flag_that_does_not_apply_warns_once(argv, flag, context, cli):
    code, out, err = cli("predict", "--model", "alexnet", *argv)
    assert code == 0 and out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ddlsim: warning: {flag}"), err
    assert context in lines[0] and lines[0].endswith("ignored")


@pytest.mark.parametrize(
    "argv",
    [
        ["--gpus", "16", "--comm", "ps", "--n-ps", "4", "--ps-dedicated"],
        ["--gpus", "16", "--comm", "ps", "--ps-placement", "gpu"],
        ["--gpus", "8", "--fusion-threshold-mb", "64", "--cycle-time-ms", "5", "--hierarchical"],
        ["--gpus", "8", "--algorithm", "tree"],
        ["--data", "real", "--host-input-rate", "5000"],
        ["--gpus", "8", "--engine", "detailed", "--seed", "3", "--max-events", "1e12"],
    ],
)
def test_flags_that_apply_do_not_warn(argv, cli):
    code, _, err = cli("predict", "--model", "alexnet", *argv)
    assert code == 0 and err == ""


def test_an_error_is_alone_no_warning_before_it(cli):
    code, _, err = cli("predict", "--n-ps", "4", "--seed", "-1")
    assert code == 2 and err.count("\n") == 1 and "warning" not in err


def test_a_sweep_warns_only_about_a_flag_no_configuration_uses(tmp_path, cli):
    out = str(tmp_path / "rows.csv")
    base = ["sweep", "--model", "alexnet", "--gpus", "8", "--serial", "--quiet", "-o", out]
    code, _, err = cli(*base, "--comm", "horovod-nccl", "ps", "--n-ps", "2")
    assert code == 0 and err == ""
    code, _, err = cli(*base, "--comm", "horovod-nccl", "horovod-mpi", "--n-ps", "2")
    assert code == 0
    assert err == (
        "ddlsim: warning: --n-ps has no effect with --comm horovod-mpi/horovod-nccl (it "
        "applies to ps, distributed-replicated, byteps); ignored\n"
    )


# -------------------------------------------------------------------------------- --help


def _sub_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _sub_parsers(sub, (*path, name))


def test_every_flag_of_every_sub_command_is_described():
    subs = list(_sub_parsers(build_parser()))
    names = {" ".join(p) for p, _ in subs}
    assert {"predict", "sweep", "timeline", "plot", "validate", "calibrate"} <= names
    assert {"traces import", "traces timeline-summary"} <= names
    undescribed = [
        f"{' '.join(path)} {action.option_strings or action.dest}"
        for path, sub in subs
        for action in sub._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        and not (action.help or "").strip()
    ]
    assert undescribed == []


def test_sweep_help_lists_its_grid_flags_with_predicts_meaning(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep", "--help"])
    text = capsys.readouterr().out
    assert "total GPUs" in text and "--max-configs" in text and "zoo model" in text


# --------------------------------------------------------------------------- install hints


def test_no_install_hint_names_an_unpublished_package():
    pattern = re.compile(r"pip install ['\"]?ddlsim\[")
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "ddlsim").rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "module, argv",
    [
        ("matplotlib", ["plot", str(RUNS), "-o", "{tmp}/f.png"]),
        ("matplotlib", ["validate", str(RUNS), "--plot", "{tmp}/f.png"]),
        ("pandas", ["sweep", "--gpus", "1", "--serial", "-o", "{tmp}/r.parquet"]),
        ("pyarrow", ["sweep", "--gpus", "1", "--serial", "-o", "{tmp}/r.parquet"]),
        ("dask", ["sweep", "--gpus", "1", "-o", "{tmp}/r.csv"]),
        ("yaml", ["sweep", "--grid", str(RUNS), "-o", "{tmp}/r.csv"]),
    ],
)
def test_a_missing_extra_says_the_command_that_installs_it(
    module, argv, tmp_path, monkeypatch, cli
):
    for name in [m for m in sys.modules if m == module or m.startswith(f"{module}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)
    code, _, err = cli(*[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert code == 2 and err.count("\n") == 1
    assert "python3 -m pip install -e '.[" in err and "in the ddlsim checkout" in err
    assert list(tmp_path.iterdir()) == []
