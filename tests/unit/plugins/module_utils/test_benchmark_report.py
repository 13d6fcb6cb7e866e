"""Unit tests for plugins/module_utils/benchmark_report.py (pure, table-driven)."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.benchmark_report import (
    render_table,
    scaling_efficiency,
    summarize,
)

SMALL_CNN = "small_cnn (torch.nn, 4 conv layers, CPU stand-in for ResNet-50)"

# Trimmed from a real ddp_bench.py run (torchrun --standalone --nproc-per-node 2, CPU, gloo).
RESULT_2P = {
    "schema_version": 1,
    "model": SMALL_CNN,
    "model_note": "auto: no CUDA device, so small_cnn; figures are not comparable to ResNet-50",
    "backend": "gloo",
    "device": "cpu",
    "world_size": 2,
    "nnodes": 1,
    "nproc_per_node": 2,
    "batch_size_per_process": 4,
    "global_batch_size": 8,
    "image_size": 32,
    "warmup_steps": 2,
    "steps": 3,
    "elapsed_s": 0.026867,
    "samples_per_s": 888.157,
    "samples_per_s_per_process": 444.079,
    "hosts": {"vm": [0, 1]},
    "per_rank": [
        {"rank": 0, "local_rank": 0, "host": "vm", "samples_per_s": 446.641, "step_time_mean_s": 0.008956},
        {"rank": 1, "local_rank": 1, "host": "vm", "samples_per_s": 444.079, "step_time_mean_s": 0.009007},
    ],
    "versions": {"torch": "2.13.0+cpu", "cuda": None, "cudnn": None, "nccl": None},
    "started_at": "2026-11-30T05:30:37Z",
    "finished_at": "2026-11-30T05:30:38Z",
    "env": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
}


def _row(nodes, processes, sps, model="resnet50", backend="nccl"):
    return {
        "nodes": nodes,
        "processes": processes,
        "samples_per_s": sps,
        "samples_per_s_per_process": sps / processes,
        "model": model,
        "backend": backend,
    }


# --- summarize -------------------------------------------------------------

def test_summarize_real_result():
    assert summarize(RESULT_2P) == {
        "nodes": 1,
        "processes": 2,
        "samples_per_s": 888.157,
        "samples_per_s_per_process": 444.079,
        "model": SMALL_CNN,
        "backend": "gloo",
    }


@pytest.mark.parametrize(
    "missing",
    ["nnodes", "world_size", "samples_per_s", "samples_per_s_per_process", "model", "backend"],
)
def test_summarize_missing_key_names_it(missing):
    result = copy.deepcopy(RESULT_2P)
    del result[missing]
    with pytest.raises(KeyError, match=missing):
        summarize(result)


@pytest.mark.parametrize(
    "key, value",
    [
        ("samples_per_s", 0),
        ("samples_per_s", -1.0),
        ("samples_per_s", "fast"),
        ("samples_per_s", None),
        ("samples_per_s", float("nan")),
        ("world_size", 0),
        ("world_size", 1.5),
        ("nnodes", True),
    ],
)
def test_summarize_rejects_bad_numbers(key, value):
    result = copy.deepcopy(RESULT_2P)
    result[key] = value
    with pytest.raises(ValueError, match=key):
        summarize(result)


def test_summarize_rejects_non_dict():
    with pytest.raises(TypeError):
        summarize([RESULT_2P])


# --- scaling_efficiency ----------------------------------------------------

@pytest.mark.parametrize(
    "throughput_n, n, throughput_1, expected",
    [
        (100.0, 1, 100.0, 1.0),        # the baseline against itself
        (800.0, 8, 100.0, 1.0),        # linear
        (9120.0, 12, 800.0, 0.95),     # 3 nodes x 4 GPUs, 95 %
        (150.0, 2, 100.0, 0.75),       # CPU contention
        (220.0, 2, 100.0, 1.1),        # superlinear is reported, not clipped
        ("300", "4", "100", 0.75),     # numeric strings from Jinja
    ],
)
def test_scaling_efficiency(throughput_n, n, throughput_1, expected):
    assert scaling_efficiency(throughput_n, n, throughput_1) == pytest.approx(expected)


@pytest.mark.parametrize(
    "args, name",
    [
        ((0, 2, 100.0), "throughput_n"),
        ((-5.0, 2, 100.0), "throughput_n"),
        ((100.0, 0, 100.0), "n"),
        ((100.0, -1, 100.0), "n"),
        ((100.0, 2, 0), "throughput_1"),
        ((100.0, 2, None), "throughput_1"),
    ],
)
def test_scaling_efficiency_rejects_non_positive(args, name):
    with pytest.raises(ValueError, match=name):
        scaling_efficiency(*args)


# --- render_table ----------------------------------------------------------

def test_render_table_exact():
    rows = [_row(1, 1, 780.0), _row(1, 4, 3050.0), _row(3, 12, 9120.0)]
    assert render_table(rows) == (
        "| nodes | processes | model    | backend | global samples/s | samples/s per process | efficiency |\n"
        "|------:|----------:|----------|---------|-----------------:|----------------------:|-----------:|\n"
        "|     1 |         1 | resnet50 | nccl    |            780.0 |                 780.0 |     100.0% |\n"
        "|     1 |         4 | resnet50 | nccl    |           3050.0 |                 762.5 |      97.8% |\n"
        "|     3 |        12 | resnet50 | nccl    |           9120.0 |                 760.0 |      97.4% |\n"
    )


def test_render_table_lines_have_equal_width():
    rows = [_row(1, 1, 95.5, model=SMALL_CNN, backend="gloo"), summarize(RESULT_2P)]
    lines = render_table(rows).splitlines()
    assert len(lines) == 4
    assert len({len(line) for line in lines}) == 1
    assert SMALL_CNN in lines[2]


@pytest.mark.parametrize(
    "rows, expected_efficiency",
    [
        # no 1-process row: efficiency blank everywhere
        ([_row(1, 4, 3000.0), _row(2, 8, 5800.0)], ["", ""]),
        # baseline only counts for the same model and backend
        ([_row(1, 1, 100.0, backend="gloo"), _row(1, 2, 180.0)], ["100.0%", ""]),
        # baseline may come after the row it serves; the first 1-process row wins
        ([_row(2, 8, 600.0), _row(1, 1, 100.0), _row(1, 1, 50.0)], ["75.0%", "100.0%", "50.0%"]),
    ],
)
def test_render_table_efficiency_column(rows, expected_efficiency):
    lines = render_table(rows).splitlines()[2:]
    got = [line.split("|")[-2].strip() for line in lines]
    assert got == expected_efficiency


def test_render_table_empty_has_header_only():
    assert render_table([]).splitlines()[0].startswith("| nodes | processes |")
    assert len(render_table([]).splitlines()) == 2


def test_render_table_escapes_pipes():
    table = render_table([_row(1, 1, 10.0, model="a|b")])
    assert "a\\|b" in table


@pytest.mark.parametrize("missing", ["nodes", "processes", "samples_per_s", "samples_per_s_per_process", "model", "backend"])
def test_render_table_missing_key_names_it(missing):
    row = _row(1, 1, 10.0)
    del row[missing]
    with pytest.raises(KeyError, match="row 0 .*%s" % missing):
        render_table([row])


def test_render_table_rejects_non_positive_throughput():
    with pytest.raises(ValueError, match="row 1 samples_per_s"):
        render_table([_row(1, 1, 10.0), dict(_row(1, 2, 10.0), samples_per_s=0)])
