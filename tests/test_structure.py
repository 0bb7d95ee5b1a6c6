"""The package's shape: layers import downward only, no import circles, small modules and
functions, and one keyword per field of the job (:mod:`ddlsim.config.groups`) through the API,
the record and the CLI."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import networkx as nx
import pytest

from ddlsim.cli.config_args import predict_kwargs
from ddlsim.cli.main import build_parser
from ddlsim.config.groups import GROUP_OF, GROUPS, JobConfig, job

PKG = Path(__file__).resolve().parents[1] / "ddlsim"
#: the architecture, bottom up: a module may import its own layer or a lower one
LAYERS = (
    # shared leaves
    (
        "ddlsim.version",
        "ddlsim.errors",
        "ddlsim.units",
        "ddlsim.inputs",
        "ddlsim.atomic",
        "ddlsim.extras",
    ),
    ("ddlsim.signals",),
    # the model: system, workload and compute, calibrations, communication, execution, engine
    ("ddlsim.system", "ddlsim.execution", "ddlsim.config.track_record"),
    ("ddlsim.workload", "ddlsim.compute", "ddlsim.comm", "ddlsim.execution.schedules"),
    ("ddlsim.calibration", "ddlsim.workload.workload"),
    ("ddlsim.execution.strategy", "ddlsim.execution.sharded"),
    ("ddlsim.execution.dag", "ddlsim.resilience"),
    ("ddlsim.engine",),
    # the job: its groups, its record, its resolution, and the package's face
    ("ddlsim.config",),
    ("ddlsim.config.record",),
    ("ddlsim.resolve",),
    ("ddlsim.api",),
    # the tools over the model, and the command line over them
    ("ddlsim.tools", "ddlsim.tools.calibrate", "ddlsim.tools.traces", "ddlsim.tools.netcal"),
    ("ddlsim.tools.analysis",),
    ("ddlsim.tools.validate",),
    ("ddlsim.tools.hvdlocal",),
    ("ddlsim.cli", "ddlsim.__main__", "ddlsim"),
)
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
#: functions over MAX_FUNCTION_LINES that are being split now: remove each one once it is short
LONG_FUNCTIONS_BEING_SPLIT = {
    "ddlsim/tools/validate/mapping.py:plan_row",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking_only(tree: ast.AST) -> set[ast.AST]:
    """Import nodes under ``if TYPE_CHECKING:`` (for annotations only: never run)."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and (
            (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
        ):
            skipped.update(n for stmt in node.body for n in ast.walk(stmt))
    return skipped


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports anywhere it runs (top level or inside functions;
    not under ``if TYPE_CHECKING:``)."""
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                target = sub if sub in modules else node.module
                if target in modules:
                    found.add(target)
    found.discard(name)
    return found


def _layer(module: str) -> int:
    """The layer of the most specific unit that holds ``module`` (a module may sit above the
    rest of its folder: ``ddlsim.workload.workload`` joins a model to its calibration)."""
    best: tuple[int, int] | None = None
    for rank, units in enumerate(LAYERS):
        for unit in units:
            holds = module == unit or (unit != "ddlsim" and module.startswith(unit + "."))
            if holds and (best is None or len(unit) > best[0]):
                best = (len(unit), rank)
    if best is None:
        raise AssertionError(f"{module} is in no layer of tests/test_structure.py: place it")
    return best[1]


def test_no_import_circles():
    modules = _modules()
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        graph.add_edges_from((name, t) for t in _imports(name, path, modules))
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == []


def test_layers_import_downward_only():
    modules = _modules()
    upward = [
        f"{name} (layer {_layer(name)}) imports {target} (layer {_layer(target)})"
        for name, path in sorted(modules.items())
        for target in sorted(_imports(name, path, modules))
        if _layer(target) > _layer(name)
    ]
    assert upward == []


def test_no_module_is_over_500_lines():
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_every_field_of_the_job_is_in_exactly_one_group():
    names = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)) == len(GROUP_OF)


def test_flat_keywords_round_trip_through_the_groups():
    j = job("vgg16", 64, batch=32, inter_node="25gbe", comm="ps", n_ps=8, engine="detailed")
    assert j.workload.batch == 32 and j.system.inter_node == "25gbe"
    assert j.execution.n_ps == 8 and j.simulation.engine == "detailed"
    assert JobConfig.from_kwargs(**j.kwargs()) == j
    assert j.replace(gpus=128).system.gpus == 128


def test_an_unknown_keyword_is_named():
    from ddlsim.errors import ConfigError

    with pytest.raises(ConfigError, match="colour"):
        job("resnet50", 8, colour="blue")


def test_every_field_of_the_job_has_a_predict_flag():
    kwargs = predict_kwargs(build_parser().parse_args(["predict"]))
    assert set(kwargs) == set(GROUP_OF)
    assert JobConfig.from_kwargs(**kwargs) == JobConfig()  # the flags' defaults are the job's


def _function_lines() -> dict[str, int]:
    """``path:name`` (``Class.method`` inside a class) of every function in the package -> its
    length in lines, docstring included (``def`` line to last line)."""
    lengths = {}

    def visit(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                lengths[f"{where}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, where, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, where, f"{prefix}{child.name}.")
            else:
                visit(child, where, prefix)

    for path in sorted(PKG.rglob("*.py")):
        where = path.relative_to(PKG.parent).as_posix()
        visit(ast.parse(path.read_text(encoding="utf-8")), where, "")
    return lengths


def test_no_function_is_over_80_lines():
    long = [
        f"{name} ({n} lines)"
        for name, n in sorted(_function_lines().items())
        if n > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS_BEING_SPLIT
    ]
    assert long == [], f"split these into helpers of at most {MAX_FUNCTION_LINES} lines: {long}"
