"""Run nccl_health's all-reduce script (roles/pytorch_env/files/ddp_nccl_allreduce.py) for real: 2 CPU
processes, Gloo, tiny sizes. The shipped file runs where it is, from a temp dir that gets the result,
as the module runs it from the environment's share/ddp-cluster: under torchrun, and as the module starts one
rank per node without torchrun (launcher direct: the command and variables of nh.direct_argv / nh.direct_env).

Needs torch in the interpreter running pytest (skipped otherwise), e.g.
``/tmp/nccl-venv/bin/python -m pytest tests/integration/test_nccl_health_local.py``.
A few seconds on 2 cores.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable in this interpreter; the all-reduce test needs it")

from ansible_collections.ddp.cluster.plugins.module_utils.nccl import health as nh  # noqa: E402

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE")
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "roles", "pytorch_env", "files", nh.SCRIPT_NAME)
SIZES = [4096, 65536, 262144]
NPROC = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("nccl_health")
    output = workdir / "result.json"
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(NPROC),
           SCRIPT] + nh.script_argv(SIZES, 5, 2, "gloo", 60, str(output))
    proc = subprocess.run(cmd, cwd=str(workdir), env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, "torchrun failed (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    with open(str(output)) as handle:
        data = json.load(handle)
    return data, proc.stdout + proc.stderr, sorted(p.name for p in workdir.iterdir())


def test_result_shape(run):
    data, _output, files = run
    assert files == ["result.json"], "temp files left behind: %s" % files
    assert data["backend"] == "gloo" and data["world_size"] == NPROC and data["nnodes"] == 1
    assert data["nproc_per_node"] == NPROC and data["op"] == "all_reduce" and data["dtype"] == "float32"
    assert [r["bytes"] for r in data["results"]] == SIZES
    assert data["torch_version"] == torch.__version__
    assert list(data["nccl_versions"].values()) == [None]  # CPU: torch reports no NCCL
    assert sorted(sum(data["hosts"].values(), [])) == list(range(NPROC))


def test_busbw_formula(run):
    data = run[0]
    factor = 2.0 * (NPROC - 1) / NPROC
    assert data["busbw_factor"] == pytest.approx(factor)
    for row in data["results"]:
        assert row["wrong"] == 0
        assert row["time_us"] > 0 and row["algbw_gbps"] > 0 and row["busbw_gbps"] > 0
        assert row["busbw_gbps"] / row["algbw_gbps"] == pytest.approx(factor, rel=1e-3)
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-3)
    mean = sum(r["busbw_gbps"] for r in data["results"]) / len(data["results"])
    assert data["avg_busbw_gbps"] == pytest.approx(mean, rel=1e-4)


def test_diagnosis_of_the_real_run(run):
    data, output, _files = run
    problems, facts = nh.diagnose_torch_run(0, output, data, "node local", "127.0.0.1:0", min_busbw_gbps=0.0001)
    assert [p["code"] for p in problems] == ["NO_GPU"]
    assert facts["transport"] == "gloo" and facts["world_size"] == NPROC and len(facts["busbw"]) == len(SIZES)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_direct(rank, nnodes, port, workdir, join_timeout=60):
    """One rank as nccl_health starts it with launcher direct (node_rank = rank, one process per node)."""
    output = workdir / ("rank%d.json" % rank)
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env.update(nh.direct_env(rank, nnodes, "127.0.0.1:%d" % port))
    argv = nh.direct_argv(sys.executable, SCRIPT, nh.script_argv(SIZES, 5, 2, "gloo", 60, str(output)), join_timeout)
    proc = subprocess.Popen(argv, cwd=str(workdir), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    return proc, output


def test_direct_launch_one_rank_per_node_without_torchrun(tmp_path):
    port = free_port()
    started = [start_direct(rank, 2, port, tmp_path) for rank in (0, 1)]
    outputs = [proc.communicate(timeout=120)[0] for proc, _path in started]
    for (proc, _path), text in zip(started, outputs):
        assert proc.returncode == 0, "rank failed (rc %d):\n%s" % (proc.returncode, text)
    with open(str(started[0][1])) as handle:
        data = json.load(handle)
    # two "nodes" (group ranks 0 and 1) of one process each, here on one host
    assert data["world_size"] == 2 and data["nnodes"] == 2 and data["nproc_per_node"] == 1
    assert list(data["hosts"].values()) == [[0, 1]] and all(r["wrong"] == 0 for r in data["results"])
    with open(str(started[1][1])) as handle:
        assert json.load(handle)["results"] == data["results"]  # every rank writes the same result
    problems, facts = nh.diagnose_torch_run(0, outputs[0], data, "node local", "127.0.0.1:%d" % port,
                                            min_busbw_gbps=0.0001, launcher="direct")
    assert [p["code"] for p in problems] == ["NO_GPU"] and facts["world_size"] == 2


def test_direct_launch_rank_0_alone_gives_up_after_join_timeout_and_says_so(tmp_path):
    port = free_port()
    proc, output = start_direct(0, 3, port, tmp_path, join_timeout=3)
    text = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0 and not output.exists()
    problems, _facts = nh.diagnose_torch_run(proc.returncode, text, None, "node local", "127.0.0.1:%d" % port,
                                             launcher="direct")
    assert [p["code"] for p in problems] == ["NCCL_RENDEZVOUS_FAILED"]
    assert "not every rank connected to rank 0's store within join_timeout (1 of 3 joined" in problems[0]["message"]
