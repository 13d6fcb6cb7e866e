"""scaling_plot.py on reports made by the report code (benchmark_report.build_matrix / build_report) at 1, 3,
12 and 512 processes: each series on the axis of its unit, no legend or label over a point, one point per run.

DDP_PLOT_DIR=<folder> keeps the PNGs (scaling-<N>p.png) to look at.
"""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import build_matrix, build_report
from role_files import load

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

scaling_plot = load("ddp_benchmark", "scaling_plot.py")

SMALL_CNN = "small_cnn (torch.nn, 4 conv layers, CPU stand-in for ResNet-50)"
VARIANTS = [{"name": "rdma_off", "environment": {"NCCL_IB_DISABLE": "1"}, "gpu_only": True},
            {"name": "reference_baseline", "options": {"precision": "fp32"}}]


def _report(nodes, per_node, on_gpu):
    """A matrix as build_matrix makes it for ``nodes`` x ``per_node``, with throughputs a real run could give
    (efficiency falling with the process count; variants slower) and one Slurm job per run."""
    hosts = ["node%d" % i for i in range(1, nodes + 1)]
    matrix = build_matrix(hosts, hosts[0], per_node, variants=VARIANTS, on_gpu=on_gpu)
    runs = []
    for run in matrix["runs"]:
        world = run["world_size"]
        rate = 800.0 * world * (0.9 ** (world - 1) ** 0.5) * {None: 1.0, "rdma_off": 0.6}.get(run["variant"], 0.45)
        result = {"schema_version": 1, "model": "resnet50" if on_gpu else SMALL_CNN,
                  "backend": "nccl" if on_gpu else "gloo", "world_size": world, "nnodes": run["nnodes"],
                  "samples_per_s": rate, "samples_per_s_per_process": rate / world,
                  "hosts": {h: [i] for i, h in enumerate(run["hosts"])},
                  "scheduler": {"name": "slurm", "job_id": str(100 + run["index"])},
                  "started_at": "2026-12-04T09:00:00Z", "finished_at": "2026-12-04T09:01:00Z"}
        runs.append({"run": run, "run_id": "r%d" % run["index"], "result": result})
    return build_report(runs, "m", "0.2.0", launcher="slurm", skipped=matrix["skipped"])


SHAPES = {1: (1, 1, False), 3: (3, 1, False), 12: (3, 4, True), 512: (64, 8, True)}


@pytest.fixture(params=sorted(SHAPES), ids=lambda n: "%dp" % n)
def drawn(request, tmp_path):
    report = _report(*SHAPES[request.param])
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"rows": report["rows"]}))
    keep = os.environ.get("DDP_PLOT_DIR")
    png = os.path.join(keep, "scaling-%dp.png" % request.param) if keep else str(tmp_path / "scaling.png")
    assert scaling_plot.main(["scaling_plot.py", str(results), png]) == 0
    assert os.path.getsize(png) > 0
    fig, ax, eff_ax = scaling_plot.draw(report["rows"], plt)
    fig.canvas.draw()
    yield report, fig, ax, eff_ax
    plt.close(fig)


def _points(axis):
    """Display coordinates of every plotted point of an axis (lines through two or more points: their points)."""
    out = []
    for line in axis.get_lines():
        xs, ys = line.get_xdata(), line.get_ydata()
        if line.get_linestyle() == ":" and len(set(ys)) == 1 and len(xs) == 2 and list(xs) == [0, 1]:
            continue  # axhline: spans the axis, no data point
        out.extend(axis.transData.transform(list(zip(xs, ys))))
    return out


def test_each_series_is_on_the_axis_of_its_unit(drawn):
    report, _fig, ax, eff_ax = drawn
    rates = {round(r["global_images_per_s"], 6) for r in report["rows"]}
    effs = {round(100.0 * r["efficiency"], 6) for r in report["rows"] if r["efficiency"] is not None}
    one = next(r["global_images_per_s"] for r in report["rows"] if r["processes"] == 1)
    top_procs = max(r["processes"] for r in report["rows"])
    for line in ax.get_lines():
        for x, y in zip(line.get_xdata(), line.get_ydata()):
            assert round(y, 6) in rates or y == pytest.approx(x * one), (line.get_label(), y)
            assert x <= top_procs
    assert ax.get_ylabel() == "global images/s" and eff_ax.get_ylabel() == "scaling efficiency (%)"
    for line in eff_ax.get_lines():
        if line.get_label().startswith("100 %"):
            continue
        assert {round(y, 6) for y in line.get_ydata()} <= effs, line.get_label()


def test_no_legend_or_label_covers_a_point(drawn):
    _report_, fig, ax, eff_ax = drawn
    renderer = fig.canvas.get_renderer()
    points = _points(ax) + _points(eff_ax)
    assert points
    boxes = [axis.get_legend().get_window_extent(renderer) for axis in (ax, eff_ax) if axis.get_legend()]
    boxes += [t.get_window_extent(renderer) for axis in (ax, eff_ax) for t in axis.texts]
    assert boxes
    for box in boxes:
        for x, y in points:
            assert not box.contains(x, y), (box, x, y)
    for legend in (axis.get_legend() for axis in (ax, eff_ax)):
        if legend is not None:
            legend_box = legend.get_window_extent(renderer)
            for axis in (ax, eff_ax):
                assert not legend_box.overlaps(axis.get_window_extent(renderer))


def test_rows_of_one_run_are_one_point(drawn):
    report, _fig, ax, _eff_ax = drawn
    base = ax.get_lines()[0]
    runs = {r["run_id"] for r in report["rows"] if not r["variant"]}
    assert len(base.get_xdata()) == len(runs)
    if len(report["rows"]) > len({r["run_id"] for r in report["rows"]}):
        labels, _variants = scaling_plot.runs_of(report["rows"])
        assert "1 process = 1 node" in [r["label"] for r in labels][0]


def test_variants_have_their_own_legend_entry(drawn):
    report, _fig, ax, _eff_ax = drawn
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    for row in report["rows"]:
        if row["variant"]:
            assert any(n.startswith(row["variant"] + " (") for n in names), names
    assert "rdma_off" in " ".join(names) if report["rows"][0]["backend"] == "nccl" else "rdma_off" not in names
