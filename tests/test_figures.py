"""Figures people can read (issue 23, item 7): the README's 48-configuration sweep and a
1,000-configuration one, drawn by ``ddlsim plot``, checked from the renderer's own text extents.

- no two visible texts overprint (tick labels, titles, bar annotations, legend entries);
- one panel per baseline (model) and one legend for the figure;
- scaling: one ideal-linear line per panel (per baseline), not one per series, and no two
  series of a panel drawn alike (colour, line style, marker);
- breakdown: every configuration's compute visible (its share drawn, not its milliseconds
  beside another configuration's 80 s).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ddlsim.tools.analysis.plot import figure
from ddlsim.tools.analysis.sweep import read_rows, rows_to_csv, run_grid

pytest.importorskip("matplotlib")

#: the README's sweep: 3 models x 4 GPU counts x 2 networks x 2 methods
README_GRID = {
    "model": ["alexnet", "googlenet", "resnet50"],
    "gpus": [1, 8, 64, 256],
    "inter_node": ["10gbe", "ib-edr"],
    "comm": ["horovod-nccl", "ps"],
}


@pytest.fixture(scope="module")
def readme_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path = tmp_path_factory.mktemp("sweep") / "study.csv"
    path.write_text(rows_to_csv(run_grid(README_GRID)))
    rows = read_rows(path)
    assert len(rows) == 48
    return rows


def thousand_rows() -> list[dict[str, Any]]:
    """1,000 configurations (5 models x 10 GPU counts x 5 networks x 4 methods) with the
    shape of real results (the figure does not care where the numbers came from)."""
    models = {
        "alexnet": 0.044,
        "googlenet": 0.108,
        "resnet50": 0.292,
        "vgg16": 0.35,
        "inception3": 0.2,
    }
    networks = {"10gbe": 8.0, "25gbe": 3.0, "ib-fdr": 1.5, "ib-edr": 1.0, "ib-hdr": 0.5}
    methods = {"horovod-nccl": 0.2, "horovod-mpi": 0.4, "ps": 1.0, "byteps": 0.3}
    rows = []
    grid = itertools.product(models, [2**k for k in range(10)], networks, methods)
    for model, gpus, net, comm in grid:
        compute = models[model]
        exposed = 0.0 if gpus == 1 else compute * networks[net] * methods[comm] * (gpus / 64) ** 0.5
        total = compute + exposed + 0.002
        rows.append(
            {
                "model": model,
                "gpu": "p100-sxm2",
                "gpus": float(gpus),
                "inter_node": net,
                "comm": comm,
                "batch_per_gpu": 64.0,
                "precision": "fp32",
                "images_per_sec": 64 * gpus / total,
                "single_gpu_images_per_sec": 64 / (compute + 0.002),
                "scaling_efficiency": (compute + 0.002) / total,
                "iteration_time_s": total,
                "compute_s": compute,
                "comm_hidden_s": 0.3 * compute,
                "comm_exposed_s": exposed,
                "input_stall_s": 0.0,
                "coordination_s": 0.002,
            }
        )
    return rows


def _texts(fig: Any) -> list[Any]:
    """The texts the renderer draws: tick labels only of ticks inside the view (matplotlib
    keeps labels of ticks beyond the limits, visible but not drawn)."""
    from matplotlib.text import Text

    ticks, drawn = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                for label in (tick.label1, tick.label2):
                    ticks.add(id(label))
                    loc = tick.get_loc()
                    inside = loc is not None and lo - 1e-9 * abs(lo) <= loc <= hi + 1e-9 * abs(hi)
                    if inside and label.get_visible() and ax.get_visible():
                        drawn.append(label)
    for t in fig.findobj(Text):
        if id(t) not in ticks and t.get_visible() and (t.axes is None or t.axes.get_visible()):
            drawn.append(t)
    return [t for t in drawn if t.get_text().strip()]


def overlaps(fig: Any) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose rendered boxes overlap, or on the same line touch (closer
    than a pixel: ``128256512`` is no way to write three numbers)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = sorted(
        ((t.get_window_extent(renderer), t.get_text()) for t in _texts(fig)),
        key=lambda b: b[0].x0,
    )
    found = []
    for i, (a, ta) in enumerate(boxes):
        for b, tb in boxes[i + 1 :]:
            if b.x0 >= a.x1 - 1:
                break
            side_by_side = min(a.y1, b.y1) - max(a.y0, b.y0) > 1
            if side_by_side and min(a.x1, b.x1) - max(a.x0, b.x0) > -1:  # not even a pixel apart
                found.append((ta, tb))
    return found


def _panels(fig: Any) -> list[Any]:
    return [ax for ax in fig.axes if ax.get_visible() and type(ax).__name__ != "SecondaryAxis"]


def _check_lines(fig: Any, kind: str, models: int, series: int) -> None:
    assert overlaps(fig) == []
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    axes = _panels(fig)
    assert len(axes) == models
    for ax in axes:
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
        ideal = [ln for ln in lines if ln.get_zorder() == 1]
        drawn = [ln for ln in lines if ln.get_zorder() != 1]
        assert len(ideal) == 1, ax.get_title()  # one per baseline
        assert len(drawn) == series
        looks = {(str(ln.get_color()), ln.get_linestyle(), ln.get_marker()) for ln in drawn}
        assert len(looks) == series  # no two series drawn alike
        if kind == "scaling":
            assert "1 GPU:" in ax.get_title()


def _check_bars(fig: Any, rows: list[dict[str, Any]]) -> None:
    assert overlaps(fig) == []
    assert len(fig.legends) == 1
    axes = _panels(fig)
    bars = [p for ax in axes for p in ax.patches]
    compute = [
        p
        for p in bars
        if p.get_facecolor()[:3] == pytest.approx((0x4C / 255, 0x72 / 255, 0xB0 / 255))
    ]
    assert len(compute) == len(rows)
    assert all(p.get_height() > 0 for p in compute)  # drawn, whatever the others take
    shares = sorted(p.get_height() for p in compute)
    assert shares[0] >= 100 * min(r["compute_s"] / r["iteration_time_s"] for r in rows) * 0.999
    assert max(fig.get_size_inches()) <= 40  # a figure one can open


@pytest.mark.parametrize("kind", ["scaling", "efficiency", "goodput"])
def test_readme_sweep_lines(readme_rows, kind):
    _check_lines(figure(kind, readme_rows), kind, models=3, series=4)


def test_readme_sweep_time_to_train(readme_rows):
    """Issue 33: the expected time-to-train with failures as the % it exceeds the failure-free
    time (on a log axis of both, four series were one pale line); the axis spans the data."""
    fig = figure("time-to-train", readme_rows)
    assert overlaps(fig) == []
    assert len(fig.legends) == 1
    for ax in _panels(fig):
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
        free = [ln for ln in lines if ln.get_zorder() == 1]
        drawn = [ln for ln in lines if ln.get_zorder() != 1]
        assert len(free) == 1 and set(free[0].get_ydata()) == {0.0} and len(drawn) == 4
        ys = [y for ln in drawn for y in ln.get_ydata()]
        assert min(ys) > 0  # never below the failure-free time
        assert ax.get_ylim()[1] == pytest.approx(1.15 * max(ys))
        assert ax.get_ylabel() == "% longer than failure-free"


@pytest.fixture(scope="module")
def study_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The rows of the README's YAML sweep (``ddlsim sweep --grid examples/study.yaml``)."""
    from pathlib import Path

    from ddlsim.tools.analysis.grid import load_grid_file, normalise_grid

    study = Path(__file__).resolve().parents[1] / "examples" / "study.yaml"
    path = tmp_path_factory.mktemp("study") / "study.csv"
    path.write_text(rows_to_csv(run_grid(normalise_grid(load_grid_file(str(study))))))
    return read_rows(path)


@pytest.mark.parametrize("kind", ["scaling", "efficiency", "time-to-train"])
def test_the_readme_yaml_sweep_is_faceted_by_what_the_grid_varies(study_rows, kind):
    """Issue 33: examples/study.yaml varies model, gpus, inter_node and comm; the resolved
    transport (rdma / tcp from 64 GPUs, none below) is no series: every series runs unbroken
    from 1 to 256 GPUs, and of two equal series the first is drawn wider (it shows)."""
    fig = figure(kind, study_rows)
    assert overlaps(fig) == []
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not any("transport" in t for t in legend), legend
    assert {"inter_node=25gbe", "inter_node=ib-edr", "comm=ps"} <= set(legend)
    for ax in _panels(fig):
        drawn = [ln for ln in ax.get_lines() if ln.get_zorder() == 3]
        assert len(drawn) == 4 and all(list(ln.get_xdata()) == [1, 8, 64, 256] for ln in drawn)
        widths = [ln.get_linewidth() for ln in drawn]
        assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]


def test_the_readme_yaml_sweep_breakdown_groups_by_what_the_grid_varies(study_rows):
    fig = figure("breakdown", study_rows)
    assert overlaps(fig) == []
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert "GPUs, by inter_node, comm" in texts
    assert not any("rdma" in t or "tcp" in t for t in texts)


def test_readme_sweep_breakdown(readme_rows):
    _check_bars(figure("breakdown", readme_rows), readme_rows)


@pytest.mark.parametrize("kind", ["scaling", "efficiency"])
def test_a_thousand_configurations_lines(kind):
    _check_lines(figure(kind, thousand_rows()), kind, models=5, series=20)


@pytest.mark.slow
def test_a_thousand_configurations_breakdown():
    rows = thousand_rows()
    _check_bars(figure("breakdown", rows), rows)


def test_the_overlap_check_finds_overprinted_labels():
    """The check itself: the old breakdown of the README sweep overprinted its labels."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.set_xticks(range(20), [f"configuration {i}" for i in range(20)])
    assert overlaps(fig)


def test_a_sweep_of_more_baselines_than_a_figure_holds_is_refused(tmp_path, cli):
    rows = [dict(r, batch_per_gpu=float(b)) for r in thousand_rows()[:40] for b in range(1, 71)]
    path = tmp_path / "big.csv"
    path.write_text(rows_to_csv(rows))
    code, _, err = cli("plot", str(path), "-o", str(tmp_path / "f.png"))
    assert code == 2 and "more than the 60 one figure holds readably" in err
    assert not (tmp_path / "f.png").exists()


def off_canvas(fig: Any) -> list[str]:
    """Drawn texts whose rendered box leaves the figure (clipped titles, cut-off labels)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = canvas.get_width_height()
    out = []
    for t in _texts(fig):
        box = t.get_window_extent(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
            out.append(t.get_text())
    return out


def _smallest_font(fig: Any) -> float:
    return min(t.get_fontsize() for t in _texts(fig))


@pytest.fixture(scope="module")
def shipped_validation():
    from pathlib import Path

    from ddlsim.tools.validate.core import validate_file
    from ddlsim.tools.validate.mapping import ValidateOptions
    from ddlsim.tools.validate.runs import load_runs

    runs = Path(__file__).resolve().parents[1] / "traces" / "measured" / "runs.csv"
    table = load_runs(str(runs))
    return validate_file(table), validate_file(table, ValidateOptions(absolute=True))


def test_validate_plot_is_readable(shipped_validation):
    """Issue 33: was 60 panels at 1382 x 2520 px with ~5 px text and titles running into each
    other; now the scatter and the 12 worst families, each a line once through its GPU counts."""
    from ddlsim.tools.validate.plot import DPI, validation_figure

    fig = validation_figure(shipped_validation[0], "traces/measured/runs.csv")
    assert overlaps(fig) == [] and off_canvas(fig) == []
    assert _smallest_font(fig) >= 8  # points: 11 px at the figure's 100 dpi
    width, height = (DPI * v for v in fig.get_size_inches())
    assert width <= 2000 and height <= 1300
    panels = [ax for ax in fig.axes if ax.get_title().endswith("% off")]
    assert len(panels) == 12
    errors = [float(ax.get_title().rsplit(": ", 1)[1].split("%")[0]) for ax in panels]
    assert errors == sorted(errors, reverse=True)  # the worst first
    for ax in panels:
        for line in ax.get_lines():
            x = list(line.get_xdata())
            if line.get_linestyle() not in ("None", ""):
                assert x == sorted(x) and len(set(x)) == len(x)  # no zigzag


def test_validate_absolute_plot_is_the_scatter_alone(shipped_validation):
    """Issue 33: --absolute said "anchored" on its y axis, cut its x label off and left two
    thirds of the figure blank."""
    from ddlsim.tools.validate.plot import validation_figure

    fig = validation_figure(shipped_validation[1], "traces/measured/runs.csv")
    assert overlaps(fig) == [] and off_canvas(fig) == []
    (ax,) = fig.axes
    assert "anchored" not in ax.get_ylabel() and "no anchor" in ax.get_ylabel()
    assert ax.get_xlabel() == "measured images/s"
    assert ax.get_position().width > 0.7  # the scatter fills the figure


def test_kernels_plot_of_one_gpu_keeps_its_title(tmp_path):
    """Issue 33: a one-GPU file drew 336 x 368 px with the title clipped on both sides."""
    from pathlib import Path

    from ddlsim.cli.kernels import kernels_figure
    from ddlsim.compute.kernel_check import predict_rows, read_kernel_csv

    csv = Path(__file__).resolve().parents[1] / "traces/measured/kernels/deepbench_conv_fp32.csv"
    results = predict_rows(r for r in read_kernel_csv(csv)[0] if r.gpu == "m40")
    fig = kernels_figure(results, str(csv))
    assert overlaps(fig) == [] and off_canvas(fig) == []
    assert min(fig.get_size_inches()) >= 5.5


def test_validate_figures_give_every_comm_value_its_own_colour() -> None:
    """Each method, a 1-GPU row ("single"), an unmodelled method ("other") and an empty cell
    are told apart in the scatter's legend: no two share a colour."""
    from ddlsim.comm import METHODS
    from ddlsim.tools.validate.plot import OTHER_COMMS, _colours

    colours = _colours()
    assert set(colours) == {*METHODS, *OTHER_COMMS}
    assert len(set(colours.values())) == len(colours)
