"""Unit tests for plugins/module_utils/report/benchmark.py (pure, table-driven)."""
from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import (
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


# --- the matrix, the report, the comparison, Horovod (issue 6) ----------------

from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import (  # noqa: E402
    build_matrix,
    build_report,
    compare_rows,
    horovod_build_problems,
    horovod_command,
    matrix_rows,
    nccl_provenance,
    option_args,
    parse_horovod_check_build,
    render_csv,
)

RDMA_OFF = {"name": "rdma_off", "environment": {"NCCL_IB_DISABLE": "1"}, "gpu_only": True}


@pytest.mark.parametrize("hosts, nproc, variants, on_gpu, names, skipped", [
    (["n1", "n2", "n3"], 4, [RDMA_OFF], True,
     ["1 process", "1 node", "all nodes", "all nodes / rdma_off"], []),
    (["n1", "n2", "n3"], 1, [RDMA_OFF], False, ["1 process = 1 node", "all nodes"], ["rdma_off"]),
    (["n1"], 4, [], True, ["1 process", "1 node = all nodes"], []),
    (["n1"], 1, [], False, ["1 process = 1 node = all nodes"], []),
    (["n1", "n2"], 2, [{"name": "loader", "options": {"data": "loader"}, "scope": "one_node"}], False,
     ["1 process", "1 node", "all nodes", "1 node / loader"], []),
])
def test_build_matrix(hosts, nproc, variants, on_gpu, names, skipped):
    matrix = build_matrix(hosts, "n1", nproc, variants=variants, on_gpu=on_gpu)
    assert [r["name"] for r in matrix["runs"]] == names
    assert [s["name"] for s in matrix["skipped"]] == skipped
    assert [r["index"] for r in matrix["runs"]] == list(range(len(names)))
    for run in matrix["runs"]:
        assert run["hosts"][0] == "n1"
        assert run["world_size"] == run["nnodes"] * run["nproc_per_node"]


def test_build_matrix_head_first_and_variant_env():
    matrix = build_matrix(["b", "a", "c"], "a", 2, variants=[RDMA_OFF], on_gpu=True)
    assert matrix["runs"][-1]["hosts"] == ["a", "b", "c"]
    assert matrix["runs"][-1]["environment"] == {"NCCL_IB_DISABLE": "1"}
    assert matrix["runs"][0]["world_size"] == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"hosts": [], "head": "a"}, "at least one host"),
    ({"hosts": ["a"], "head": "b"}, "not one of the hosts"),
    ({"hosts": ["a"], "head": "a", "scopes": ["two_nodes"]}, "ddp_benchmark_scopes"),
    ({"hosts": ["a"], "head": "a", "variants": [{"name": "bad name"}]}, "1-40 characters"),
    ({"hosts": ["a"], "head": "a", "variants": [{"name": "x"}, {"name": "x"}]}, "used twice"),
    ({"hosts": ["a"], "head": "a", "variants": [{"name": "x", "options": {"lr": 1}}]}, "not script options"),
    ({"hosts": ["a"], "head": "a", "variants": [{"name": "x", "colour": 1}]}, "unknown key"),
    ({"hosts": ["a"], "head": "a", "variants": [{"name": "x", "scope": "half"}]}, "scope"),
    ({"hosts": ["a"], "head": "a", "nproc_per_node": 0}, "nproc_per_node"),
    ({"hosts": ["a"], "head": "a", "launchers": []}, "launchers must be distinct names"),
    ({"hosts": ["a"], "head": "a", "launchers": ["horovod", "horovod"]}, "launchers must be distinct names"),
    ({"hosts": ["a"], "head": "a", "launchers": ["deepspeed"]}, "launchers must be distinct names"),
])
def test_build_matrix_refusals(kwargs, message):
    args = {"nproc_per_node": 1}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        build_matrix(**args)


def test_build_matrix_launchers_side_by_side():
    """Horovod first (the variants' launcher), then torchrun over the same scopes, each run named by its launcher."""
    matrix = build_matrix(["a", "b"], "a", 1, variants=[{"name": "reference_baseline"}],
                          launchers=["horovod", "torchrun"])
    got = [(r["name"], r["launcher"], r["hosts"]) for r in matrix["runs"]]
    assert got == [
        ("1 process = 1 node (horovod)", "horovod", ["a"]), ("all nodes (horovod)", "horovod", ["a", "b"]),
        ("1 process = 1 node (torchrun)", "torchrun", ["a"]), ("all nodes (torchrun)", "torchrun", ["a", "b"]),
        ("all nodes (horovod) / reference_baseline", "horovod", ["a", "b"]),
    ]
    assert [r["index"] for r in matrix["runs"]] == [0, 1, 2, 3, 4]
    # one launcher: names as before
    assert [r["name"] for r in build_matrix(["a", "b"], "a", 1)["runs"]] == ["1 process = 1 node", "all nodes"]


def test_matrix_rows_speedup_per_launcher():
    """Each launcher's rows are measured against its own 1-process row, and the rows say their launcher."""
    matrix = build_matrix(["a", "b"], "a", 1, launchers=["horovod", "torchrun"])
    sps = [100.0, 180.0, 110.0, 200.0]
    runs = [{"run": run, "run_id": "r%d" % i, "result": _result(run["world_size"], run["nnodes"], sps[i])}
            for i, run in enumerate(matrix["runs"])]
    rows = matrix_rows(runs)
    got = [(r["run"], r["launcher"], r["speedup"]) for r in rows]
    assert got == [("1 process (horovod)", "horovod", 1.0), ("1 node (horovod)", "horovod", 1.0),
                   ("all nodes (horovod)", "horovod", 1.8), ("1 process (torchrun)", "torchrun", 1.0),
                   ("1 node (torchrun)", "torchrun", 1.0), ("all nodes (torchrun)", "torchrun", 200.0 / 110.0)]
    assert "launcher" in render_csv(rows).splitlines()[0].split(",")


def test_option_args_sorted_and_dashed():
    args = option_args({"precision": "bf16", "batch_size": 64, "compile": None})
    assert args == ["--batch-size=64", "--precision=bf16"]


def _result(world, nnodes, sps, **extra):
    result = copy.deepcopy(RESULT_2P)
    result.update(world_size=world, nnodes=nnodes, samples_per_s=sps, samples_per_s_per_process=sps / world,
                  hosts={"n%d" % i: [i] for i in range(nnodes)})
    result.update(extra)
    return result


def _runs(*specs):
    """specs: (name-scopes, variant, world, nnodes, sps)."""
    out = []
    for index, (scopes, variant, world, nnodes, sps) in enumerate(specs):
        run = {"index": index, "name": variant and "all nodes / " + variant or " = ".join(scopes),
               "scopes": [s.replace("1 process", "one_process").replace("1 node", "one_node")
                          .replace("all nodes", "all_nodes") for s in scopes], "variant": variant}
        out.append({"run": run, "run_id": "r%d" % index, "result": _result(world, nnodes, sps)})
    return out


@pytest.mark.parametrize("specs, expected", [
    # 1 GPU 800, 1 node (4 GPUs) 3000, 3 nodes (12 GPUs) 8400: efficiency 93.75 %, 87.5 %.
    ([(["1 process"], None, 1, 1, 800.0), (["1 node"], None, 4, 1, 3000.0), (["all nodes"], None, 12, 3, 8400.0),
      (["all nodes"], "rdma_off", 12, 3, 4800.0)],
     [("1 process", 1.0, 1.0), ("1 node", 3.75, 0.9375), ("all nodes", 10.5, 0.875),
      ("all nodes / rdma_off", 6.0, 0.5)]),
    # CPU: one process per node, so 1 process and 1 node are one run and two rows.
    ([(["1 process", "1 node"], None, 1, 1, 839.2), (["all nodes"], None, 3, 3, 1104.1)],
     [("1 process", 1.0, 1.0), ("1 node", 1.0, 1.0), ("all nodes", 1104.1 / 839.2, 1104.1 / 839.2 / 3)]),
    # No 1-process run: no speed-up, no efficiency.
    ([(["all nodes"], None, 3, 3, 1000.0)], [("all nodes", None, None)]),
])
def test_matrix_rows_speedup_and_efficiency(specs, expected):
    rows = matrix_rows(_runs(*specs))
    got = [(r["run"], r["speedup"], r["efficiency"]) for r in rows]
    assert [g[0] for g in got] == [e[0] for e in expected]
    for (_name, speedup, eff), (_n, want_speedup, want_eff) in zip(got, expected):
        assert speedup == (pytest.approx(want_speedup) if want_speedup is not None else None)
        assert eff == (pytest.approx(want_eff) if want_eff is not None else None)


def test_matrix_rows_no_efficiency_across_precisions():
    runs = _runs((["1 process"], None, 1, 1, 800.0), (["all nodes"], "fp32", 12, 3, 4000.0))
    runs[1]["result"]["precision"] = "fp32"
    runs[0]["result"]["precision"] = "bf16"
    rows = matrix_rows(runs)
    assert rows[1]["efficiency"] is None and rows[1]["speedup"] is None


def test_render_csv_quotes_and_header():
    rows = matrix_rows(_runs((["1 process"], None, 1, 1, 800.0), (["all nodes"], None, 2, 2, 1500.0)))
    lines = render_csv(rows).splitlines()
    assert lines[0].startswith("run,scopes,variant,launcher,run_id,nodes,processes,model,")
    assert len(lines) == 3
    assert '"small_cnn (torch.nn, 4 conv layers, CPU stand-in for ResNet-50)"' in lines[1]
    header = lines[0].split(",")
    assert lines[2].split(",")[header.index("efficiency") + 2] == "0.9375"  # model cell holds 2 commas


def test_build_report_markdown_has_rows_efficiency_and_provenance():
    runs = _runs((["1 process", "1 node"], None, 1, 1, 839.2), (["all nodes"], None, 3, 3, 1104.1))
    report = build_report(runs, "20261130T064912Z", "0.1.0", skipped=[{"name": "rdma_off", "reason": "gpu_only"}])
    md = report["markdown"]
    for pattern in (r"\| 1 process +\| +1 \| +1 \|.*100\.0% \|", r"\| 1 node +\| +1 \|.*100\.0% \|",
                    r"\| all nodes +\| +3 \| +3 \|.*1104\.1 \|.*1\.32x \| +43\.9% \|"):
        assert re.search(pattern, md), md
    assert "Variant rdma_off not run: gpu_only." in md
    assert md.count("(`r0`)") == 1  # one provenance entry per run, not per row
    assert "torch 2.13.0+cpu" in md
    assert report["comparison"] is None and report["comparison_markdown"] == ""
    assert report["started_at"] == "2026-11-30T05:30:37Z"


def test_slurm_runs_carry_their_job_id_into_table_csv_and_provenance():
    runs = _runs((["1 process", "1 node"], None, 1, 1, 839.2), (["all nodes"], None, 3, 3, 1104.1))
    for index, item in enumerate(runs):
        item["result"]["scheduler"] = {"name": "slurm", "job_id": str(41 + index), "nodelist": "ddp-node[1-3]",
                                       "nodes": str(item["result"]["nnodes"]), "partition": "ddp"}
    report = build_report(runs, "20261201T040000Z", "0.2.0", launcher="slurm")
    header = report["table"].splitlines()[0]
    assert header.rstrip(" |").endswith("Slurm job")
    assert re.search(r"\| all nodes +\|.*\| +42 \|$", report["table"], re.M), report["table"]
    assert "- Slurm job 42 on ddp-node[1-3] (3 node(s), partition ddp)" in report["markdown"]
    csv_lines = report["csv"].splitlines()
    assert csv_lines[0].endswith(",slurm_job_id,slurm_state,slurm_elapsed,slurm_nodes")
    assert csv_lines[-1].endswith(",42,,,")
    assert "launcher slurm" in report["markdown"]


def test_slurm_column_takes_state_and_elapsed_time_from_sacct():
    """With the accounting database's record (sacct, module_utils/slurm/accounting.parse_sacct), the Slurm column
    shows each job's state and elapsed time; a job sacct does not list keeps its id alone."""
    runs = _runs((["1 process", "1 node"], None, 1, 1, 839.2), (["all nodes"], None, 3, 3, 1104.1))
    for index, item in enumerate(runs):
        item["result"]["scheduler"] = {"name": "slurm", "job_id": str(41 + index), "nodelist": "ddp-node[1-3]",
                                       "nodes": str(item["result"]["nnodes"]), "partition": "ddp"}
    sacct = {"42": {"state": "COMPLETED", "elapsed": "00:00:31", "elapsed_s": 31, "nodes": "ddp-node[1-3]",
                    "job_name": "ddp-bench-m-1", "exit_code": "0:0"}}
    report = build_report(runs, "20261201T040000Z", "0.2.0", launcher="slurm", accounting=sacct)
    assert report["table"].splitlines()[0].rstrip(" |").endswith("Slurm job (sacct)")
    assert re.search(r"\| all nodes +\|.*\| +42 COMPLETED 00:00:31 \|$", report["table"], re.M), report["table"]
    assert re.search(r"\| 1 process +\|.*\| +41 \|$", report["table"], re.M), report["table"]
    assert "sacct: COMPLETED after 00:00:31 on ddp-node[1-3]" in report["markdown"]
    assert report["csv"].splitlines()[-1].endswith(",42,COMPLETED,00:00:31,ddp-node[1-3]")


def test_the_table_says_when_two_rows_are_one_run():
    # CPU nodes: "1 process" and "1 node" are one Slurm job, two rows; the GPU shape has no such pair.
    runs = _runs((["1 process", "1 node"], None, 1, 1, 839.2), (["all nodes"], None, 3, 3, 1104.1))
    for index, item in enumerate(runs):
        item["result"]["scheduler"] = {"name": "slurm", "job_id": str(41 + index)}
    table = build_report(runs, "m", "0.2.0", launcher="slurm")["table"]
    assert table.splitlines()[-1] == "1 process and 1 node are one run (Slurm job 41): the same figures, shown once per scope."
    assert table.splitlines()[-2] == "" and table.count("one run") == 1
    torchrun = build_report(_runs((["1 process", "1 node"], None, 1, 1, 839.2)), "m", "0.2.0")
    assert "1 process and 1 node are one run (run id r0)" in torchrun["markdown"]
    gpu = build_report(_runs((["1 process"], None, 1, 1, 800.0), (["1 node"], None, 4, 1, 3000.0)), "m", "0.2.0")
    assert "one run" not in gpu["table"] and gpu["table"].splitlines()[-1].startswith("| 1 node ")


def test_runs_without_slurm_have_no_job_column():
    report = build_report(_runs((["all nodes"], None, 3, 3, 1104.1)), "m", "0.2.0")
    assert "Slurm job" not in report["table"] and "Slurm job" not in report["markdown"]


@pytest.mark.parametrize("now, before, threshold, regressions, changes", [
    ([("all nodes", 900.0)], [("all nodes", 1000.0)], 0.10, 0, [-0.10]),     # exactly 10 %: not above
    ([("all nodes", 880.0)], [("all nodes", 1000.0)], 0.10, 1, [-0.12]),
    ([("all nodes", 1200.0)], [("all nodes", 1000.0)], 0.10, 0, [0.20]),
    ([("all nodes", 940.0)], [("all nodes", 1000.0)], 0.05, 1, [-0.06]),
    ([("a", 1.0), ("b", 1.0)], [("b", 1.0), ("c", 1.0)], 0.10, 0, [0.0]),
])
def test_compare_rows(now, before, threshold, regressions, changes):
    current = [{"run": n, "global_images_per_s": v} for n, v in now]
    previous = [{"run": n, "global_images_per_s": v} for n, v in before]
    out = compare_rows(current, previous, threshold)
    assert out["regressions"] == regressions
    assert [r["change"] for r in out["rows"]] == [pytest.approx(c) for c in changes]
    assert out["only_current"] == [n for n, _v in now if n not in dict(before)]
    assert out["only_previous"] == [n for n, _v in before if n not in dict(now)]


@pytest.mark.parametrize("threshold", [-0.1, 1.0, "x"])
def test_compare_rows_bad_threshold(threshold):
    with pytest.raises(ValueError, match="threshold"):
        compare_rows([], [], threshold)


def test_build_report_with_previous_flags_regression():
    old = build_report(_runs((["1 process"], None, 1, 1, 800.0), (["all nodes"], None, 3, 3, 2000.0)), "old", "0.1.0")
    new = build_report(_runs((["1 process"], None, 1, 1, 800.0), (["all nodes"], None, 3, 3, 1500.0)), "new", "0.1.0",
                       previous_rows=old["rows"], compare_to="artifacts/benchmark/old")
    assert new["comparison"]["regressions"] == 1
    assert "REGRESSION" in new["comparison_markdown"] and "-25.0%" in new["comparison_markdown"]
    assert "## Comparison" in new["markdown"]


NCCL_IB_LOG = [
    "node0:1:1 [0] NCCL INFO NCCL version 2.18.3+cuda12.2",
    "node0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB ens1f0:10.0.0.1<0>",
    "node0:1:1 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0/GDRDMA",
]
NCCL_SOCKET_LOG = [
    "node1:1:1 [0] NCCL INFO NET/Socket : Using [0]ens1f0:10.0.0.2<0>",
    "node1:1:1 [0] NCCL INFO Channel 00/0 : 7[3] -> 0[0] [send] via NET/Socket/0",
]


@pytest.mark.parametrize("logs, transport, gdr, layers", [
    ([], None, None, []),
    ([{"rank": 0, "host": "node0", "lines": NCCL_IB_LOG}], "IB", True, ["RoCE"]),
    ([{"rank": 4, "host": "node1", "lines": NCCL_SOCKET_LOG}], "Socket", None, []),
    ([{"rank": 0, "host": "node0", "lines": NCCL_IB_LOG}, {"rank": 4, "host": "node1", "lines": NCCL_SOCKET_LOG}],
     "mixed", True, ["RoCE"]),
])
def test_nccl_provenance_uses_the_nccl_parsers(logs, transport, gdr, layers):
    out = nccl_provenance({"nccl_debug": logs})
    assert (out["captured"], out["transport"], out["gdr"], out["link_layers"]) == (bool(logs), transport, gdr, layers)
    if logs:
        assert out["per_host"][logs[0]["host"]]["transport"] == transport if transport != "mixed" else True


CHECK_BUILD_FULL = """Horovod v0.28.1:

Available Frameworks:
    [ ] TensorFlow
    [X] PyTorch
    [ ] MXNet

Available Controllers:
    [X] MPI
    [X] Gloo

Available Tensor Operations:
    [X] NCCL
    [ ] DDL
    [ ] CCL
    [X] MPI
    [X] Gloo
"""
CHECK_BUILD_C16 = "Controllers: [ ] MPI [X] Gloo; Tensor Operations: [ ] NCCL"


@pytest.mark.parametrize("text, controller, need_nccl, codes", [
    (CHECK_BUILD_FULL, "gloo", True, []),
    (CHECK_BUILD_FULL, "mpi", True, []),
    (CHECK_BUILD_C16, "gloo", False, []),
    (CHECK_BUILD_C16, "gloo", True, ["HOROVOD_NO_NCCL"]),
    (CHECK_BUILD_C16, "mpi", True, ["HOROVOD_NO_CONTROLLER", "HOROVOD_NO_NCCL"]),
    (CHECK_BUILD_FULL.replace("[X] PyTorch", "[ ] PyTorch"), "gloo", False, ["HOROVOD_NO_PYTORCH"]),
    ("bash: horovodrun: command not found", "gloo", False, ["HOROVOD_CHECK_UNREADABLE"]),
])
def test_horovod_check_build(text, controller, need_nccl, codes):
    problems = horovod_build_problems(parse_horovod_check_build(text), controller, need_nccl)
    assert [p["code"] for p in problems] == codes
    for problem in problems:
        assert problem["fix"]


def test_parse_horovod_check_build_full():
    parsed = parse_horovod_check_build(CHECK_BUILD_FULL)
    assert parsed["version"] == "0.28.1"
    assert parsed["frameworks"] == {"TensorFlow": False, "PyTorch": True, "MXNet": False}
    assert parsed["controllers"] == {"MPI": True, "Gloo": True}
    assert parsed["tensor_operations"]["NCCL"] is True and parsed["tensor_operations"]["DDL"] is False


C17_ENV = {"NCCL_SOCKET_IFNAME": "ens1f0", "NCCL_IB_GID_INDEX": "3", "HOME": "/root", "PATH": "/usr/bin"}


@pytest.mark.parametrize("controller, head, has_x", [
    ("mpi", ["mpirun", "-np", "16", "-H", "node0:8,node1:8", "-bind-to", "none", "-map-by", "slot"], True),
    ("gloo", ["horovodrun", "--gloo", "-np", "16", "-H", "node0:8,node1:8"], False),
])
def test_horovod_command_forwards_nccl_ld_library_path_and_path(controller, head, has_x):
    out = horovod_command(["node0", "node1"], 8, ["python", "ddp_bench.py", "--launcher=horovod"], C17_ENV, controller)
    assert out["argv"][:len(head)] == head
    assert out["argv"][-3:] == ["python", "ddp_bench.py", "--launcher=horovod"]
    assert out["np"] == 16
    assert out["forwarded"] == ["LD_LIBRARY_PATH", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "PATH"]
    xs = [out["argv"][i + 1] for i, a in enumerate(out["argv"]) if a == "-x"]
    assert xs == (out["forwarded"] if has_x else [])
    assert "ens1f0" not in out["argv"]  # values stay off the command line


@pytest.mark.parametrize("args, message", [
    ((["a"], 1, ["p"], {}, "slurm"), "gloo or mpi"),
    (([], 1, ["p"], {}, "gloo"), "at least one host"),
    ((["a"], 0, ["p"], {}, "gloo"), "slots"),
])
def test_horovod_command_refusals(args, message):
    with pytest.raises(ValueError, match=message):
        horovod_command(*args)


def _loader_runs(train_sps, feed, bound):
    """all nodes (synthetic) 1200 images/s, then reference_baseline (loader) with a loader figure."""
    runs = _runs((["all nodes"], None, 3, 3, 1200.0), (["all nodes"], "reference_baseline", 3, 3, train_sps))
    runs[1]["result"].update(precision="fp32", data="loader", workers=8, pin_memory=False,
                             loader={"samples_per_s_per_process": feed, "per_host": {"n0": feed},
                                     "headroom": round(feed / (train_sps / 3), 4), "input_bound": bound,
                                     "input_bound_share": 0.8})
    return runs


def test_reference_baseline_ratio_and_input_pipeline_lines():
    report = build_report(_loader_runs(300.0, 400.0, False), "m", "0.1.0")
    md = report["markdown"]
    assert "## Default settings vs the reference script" in md
    # 1200 / 300 from the same matrix, paired on nodes and processes.
    assert "all nodes (fp32, synthetic) 1200.0 images/s / all nodes / reference_baseline (fp32, loader) " \
           "300.0 images/s = **4.00x**" in md
    assert ("- **all nodes / reference_baseline**: the DataLoader alone fed 400.0 images/s per process (8 workers, "
            "pin_memory off, slowest rank); training consumed 100.0: headroom 4.00x, not input-bound") in md
    row = report["rows"][1]
    assert (row["loader_images_per_s_per_process"], row["loader_headroom"], row["input_bound"]) == (400.0, 4.0, False)
    header = report["csv"].splitlines()[0].split(",")
    assert {"loader_images_per_s_per_process", "loader_headroom", "input_bound"} <= set(header)


def test_input_bound_row_says_so_and_synthetic_rows_have_no_loader_line():
    report = build_report(_loader_runs(300.0, 110.0, True), "m", "0.1.0")
    lines = [line for line in report["markdown"].splitlines() if "DataLoader alone" in line]
    assert len(lines) == 1 and "input-bound: training took 80% or more" in lines[0]
    assert report["rows"][0]["input_bound"] is None


def test_no_reference_section_without_its_pair():
    runs = _loader_runs(300.0, 400.0, False)[1:]  # the baseline alone
    assert "Default settings vs the reference script" not in build_report(runs, "m", "0.1.0")["markdown"]


def test_build_report_horovod_build_in_provenance():
    runs = _runs((["1 process", "1 node"], None, 1, 1, 839.2))
    report = build_report(runs, "20261202T110000Z", "0.1.0", launcher="horovod",
                          horovod_build=parse_horovod_check_build(CHECK_BUILD_FULL))
    assert report["horovod_build"]["version"] == "0.28.1"
    assert ("- Horovod build (`horovodrun --check-build` on the head): v0.28.1; frameworks PyTorch; controllers Gloo, "
            "MPI; tensor operations Gloo, MPI, NCCL.") in report["markdown"]
    assert "Horovod build" not in build_report(runs, "20261202T110000Z", "0.1.0")["markdown"]
