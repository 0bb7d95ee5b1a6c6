"""The knob table (ddlsim.config.knobs) is the one home of every option: the groups' fields, the
flags, the grid's checks, the applicability warnings and the README's flag tables follow it."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlsim import comm
from ddlsim.cli.applies import inapplicable
from ddlsim.cli.main import build_parser
from ddlsim.config.checks import Range, Vocabulary
from ddlsim.config.groups import GROUPS, JobConfig
from ddlsim.config.knobs import BY_NAME, KNOBS, in_group
from ddlsim.errors import ConfigError
from ddlsim.tools.analysis.grid import normalise_grid

README = Path(__file__).resolve().parents[1] / "README.md"
#: predict flags that are not knobs of the job (what to print, what to re-run)
NOT_KNOBS = {"--json", "--from-json"}


def _readme_flag_rows() -> list[tuple[list[str], str, str]]:
    """(flags, group or '', default cell) of each row of the README's predict flag tables."""
    rows, inside = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("| flag | default | meaning |") or line.startswith(
            "| flag (group) | default | meaning |"
        ):
            inside = True
            continue
        if inside and not line.startswith("|"):
            inside = False
        if inside and line.startswith("| `--"):
            first, default = (cell.strip() for cell in line.split("|")[1:3])
            flags = re.findall(r"`(--[a-zA-Z0-9-]+)", first)
            group = re.search(r"\((workload|system|execution|simulation)\)", first)
            rows.append((flags, group.group(1) if group else "", default))
    return rows


def _all_flags() -> set[str]:
    return {k.flag for k in KNOBS} | {flag for k in KNOBS for flag, _, _ in k.extra}


def test_the_groups_fields_are_the_tables_rows_in_order():
    for group, cls in GROUPS.items():
        assert [f.name for f in dataclasses.fields(cls)] == [k.name for k in in_group(group)]
        assert [f.default for f in dataclasses.fields(cls)] == [k.default for k in in_group(group)]


def test_the_readme_documents_every_flag_and_no_other():
    documented = {flag for flags, _, _ in _readme_flag_rows() for flag in flags}
    assert documented - NOT_KNOBS == _all_flags()


def test_the_readme_names_each_flags_group():
    by_flag = {k.flag: k for k in KNOBS}
    for flags, group, _ in _readme_flag_rows():
        for flag in flags:
            if group and flag in by_flag:
                assert by_flag[flag].group == group, flag


def test_the_readme_states_the_plain_defaults():
    """A default cell that is one plain value (a number, a word, off) is the knob's default."""
    by_flag = {k.flag: k for k in KNOBS}
    checked = 0
    for flags, _, cell in _readme_flag_rows():
        value = cell.strip("`").replace(",", "")
        if len(flags) != 1 or flags[0] not in by_flag or not re.fullmatch(r"[\w.]+", value):
            continue
        knob = by_flag[flags[0]]
        if knob.default is None:  # none, or the word that stands for it (auto)
            assert value == "none" or knob.words.get(value, ...) is None, knob.flag
        elif knob.negate or knob.switch:
            assert value == "off", knob.flag  # the switch is not given by default
        elif isinstance(knob.default, (int, float)) and not isinstance(knob.default, bool):
            if not re.fullmatch(r"[\d.e+-]+", value):
                continue  # worded (fitted, auto): the flag's help says it
            assert math.isclose(float(value), knob.default, rel_tol=1e-3), knob.flag
        else:
            assert value == str(knob.default), knob.flag
        checked += 1
    assert checked >= 15


def test_the_comm_methods_are_declared_once():
    check = BY_NAME["comm"].check
    assert isinstance(check, Vocabulary) and tuple(check.names()) == comm.METHODS
    assert BY_NAME["comm"].choices() == comm.METHODS


def test_every_flag_of_predict_is_a_knob():
    predict = build_parser()._subparsers._group_actions[0].choices["predict"]
    options = {o for a in predict._actions for o in a.option_strings if o.startswith("--")}
    assert options - {"--help"} - NOT_KNOBS == _all_flags()


@pytest.mark.parametrize("knob", [k for k in KNOBS if isinstance(k.check, Range)], ids=str)
def test_a_range_takes_its_bounds_and_refuses_beyond(knob):
    r = knob.check
    if not r.open_low:
        r(r.low)
    r(r.high)
    for bad in (r.high * 2 + 1, -1.0 if r.low >= 0 else r.low * 2 - 1, float("nan"), True, "8"):
        with pytest.raises(ConfigError, match=re.escape(r.what)):
            r(bad)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_a_range_decides_as_its_bounds_say(value):
    r = BY_NAME["partition_mb"].check
    assert r.ok(value) == (r.low <= value <= r.high)


@pytest.mark.parametrize(
    "name, bad",
    [("comm", "mpi-magic"), ("schedule", "eager"), ("fusion_threshold_mb", -1), ("n_ps", 0),
     ("cycle_time_ms", 1e-9), ("batch", 0), ("engine", "exact"), ("mc_seed", -1)],
)  # fmt: skip
def test_the_job_and_the_grid_refuse_the_same_values(name, bad):
    with pytest.raises(ConfigError) as job_error:
        JobConfig.from_kwargs(**{name: bad})
    with pytest.raises(ConfigError) as grid_error:
        normalise_grid({name: [bad]})
    grid_text = str(grid_error.value)
    assert str(bad) in str(job_error.value)
    assert name in grid_text or name.replace("_", " ") in grid_text


def test_every_sweep_knob_is_a_grid_axis_with_its_default():
    for knob in KNOBS:
        if knob.sweep and knob.default is not None:
            assert normalise_grid({knob.name: [knob.default]})[knob.name] == [knob.default]


def _outside(knob):
    """A resolved job in which ``knob`` has no effect, and a value of it that is given."""
    cases = {
        "tf32": ({"resolved_gpu": "v100-sxm2"}, False),  # Volta: no TF32 tensor cores
        "nics_per_node": ({"nodes": 1}, 4),
        "host_input_images_per_s": ({"data": "synthetic"}, 1000.0),
        "partition_mb": ({"schedule": "auto"}, 8.0),
        "bucket_cap_mb": ({"comm": "horovod-nccl"}, 10.0),
        "n_ps": ({"comm": "horovod-nccl"}, 4),
        "ps_colocated": ({"comm": "horovod-nccl"}, False),
        "ps_placement": ({"comm": "horovod-nccl"}, "gpu"),
        "input_pipeline": ({"data": "synthetic"}, "dali"),
        "hierarchical": ({"comm": "ps"}, True),
        "interference": ({"comm": "ps"}, False),
        "seed": ({"engine": "fast"}, 3),
        "max_events": ({"engine": "fast"}, 1e6),
        "mc_seed": ({"mc_draws": 0}, 5),
        "activation_checkpointing": ({"resolved_model": "resnet50"}, True),
        "attention": ({"resolved_model": "resnet50"}, "flash"),
        "optimizer_kernels": ({"resolved_model": "resnet50"}, "fused"),
        "flash_version": ({"resolved_model": "resnet50"}, "2"),
        "task": ({"resolved_model": "resnet50"}, "span"),
        "train_tokens": ({"resolved_model": "resnet50"}, 1e9),
        "loss_kernel": ({"resolved_model": "resnet50"}, "fused"),
        "cuda_graphs": ({"framework": "tensorflow", "comm": "horovod-nccl"}, True),
        "epochs": ({"resolved_model": "bert-base"}, 3.0),
        "dataset_images": ({"resolved_model": "bert-base"}, 1000),
    }
    if knob.name in cases:
        return cases[knob.name]
    if "node_mtbf_hours" in knob.applies.context:
        return {"node_mtbf_hours": 0}, {"optimizer": "adam", "recovery": "elastic"}.get(
            knob.name, 7.0 if "mc" not in knob.name else 3
        )
    return {"comm": "ps"}, {"nccl_version": "2.4", "horovod_version": "0.16", "algorithm": "ring",
                            "nccl_protocol": "LL"}.get(knob.name, 7.0)  # fmt: skip


@pytest.mark.parametrize("knob", [k for k in KNOBS if k.applies], ids=lambda k: k.name)
def test_a_flag_without_effect_is_named_once(knob):
    facts, value = _outside(knob)
    kwargs = {knob.name: value, **{k: v for k, v in facts.items() if k in BY_NAME}}
    inputs = None
    if "nodes" in facts:
        inputs = {"nodes": facts["nodes"]}
    if "resolved_gpu" in facts:  # as a prediction's inputs state it
        inputs = {"nodes": 2, "gpu": facts["resolved_gpu"], "precision": "fp32"}
    if "resolved_model" in facts:
        inputs = {"nodes": 2, "model": facts["resolved_model"]}
    messages = [m for m in inapplicable([(kwargs, inputs)]) if m.startswith(knob.flag + " ")]
    assert len(messages) == 1 and knob.applies.scope in messages[0]


def test_two_flags_that_set_one_knob_differently_are_refused(cli):
    code, out, err = cli("predict", "--xla", "--fusion", "bn-act")
    assert (code, out) == (2, "") and "--fusion contradicts --xla" in err
    code, _, _ = cli("predict", "--xla", "--fusion", "xla", "--gpus", "2")
    assert code == 0  # the same value twice agrees


def test_a_horovod_release_that_never_was_is_refused():
    with pytest.raises(ConfigError, match=r"no Horovod release 0\.99"):
        JobConfig.from_kwargs(horovod_version="0.99")


def test_a_grid_file_that_gives_a_key_twice_is_refused(tmp_path):
    from ddlsim.tools.analysis.grid import load_grid_file

    path = tmp_path / "grid.yaml"
    path.write_text("model: resnet50\ngpus: [8, 16]\nmodel: vgg16\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 3: 'model' is given twice"):
        load_grid_file(path)
    path.write_bytes(b"\xef\xbb\xbfmodel: resnet50\ngpus: [8]\n")  # a byte-order mark
    assert load_grid_file(path) == {"model": "resnet50", "gpus": [8]}


def _other_value(knob):
    """A value of ``knob`` other than predict's default (None where none is obvious)."""
    from ddlsim.config.record import keyword_defaults

    default = keyword_defaults().get(knob.name)
    if isinstance(default, bool):
        return not default
    special = {"nccl_version": "2.4", "horovod_version": "0.16", "mpi": "openmpi-3.0"}
    if knob.name in special:
        return special[knob.name]
    choices = knob.choices() if callable(knob.choices) else knob.choices
    for choice in choices or ():
        if choice not in (default, "auto"):
            return choice
    if isinstance(default, int | float) and default:
        return default * 2
    return None


@pytest.mark.parametrize(
    "base",
    [
        {"model": "resnet50", "gpu": "v100-sxm2", "precision": "amp"},
        {"model": "gpt2", "gpu": "a100", "precision": "bf16", "batch": 4},
    ],
    ids=["cnn", "transformer"],
)
def test_a_flag_called_ignored_changes_nothing(base) -> None:
    """Every (comm method, flag) where the warning says "no effect ... ignored": giving the
    flag leaves the iteration time exactly as it was (the knob table's ``applies`` tells the
    truth; --nccl-version on ddp / fsdp, --no-interference on the sharded methods and
    --fsdp-unit-blocks on zero3 did not)."""
    import ddlsim
    from ddlsim.cli.applies import resolved_facts
    from ddlsim.config.record import keyword_defaults

    defaults = keyword_defaults()
    lies = []
    for method in comm.METHODS:
        job = {**base, "gpus": 16, "gpus_per_node": 8, "comm": method}
        try:
            before = ddlsim.predict(**job)
        except ConfigError:
            continue
        facts = resolved_facts(before.inputs)
        for knob in KNOBS:
            value = _other_value(knob)
            if knob.applies is None or knob.name in job or value is None:
                continue
            if knob.applies.when({**defaults, **job, knob.name: value, **facts}):
                continue
            try:
                after = ddlsim.predict(**{**job, knob.name: value})
            except ConfigError:
                continue
            if after.iteration_time_s != before.iteration_time_s:
                lies.append((method, knob.flag, value))
    assert lies == []
