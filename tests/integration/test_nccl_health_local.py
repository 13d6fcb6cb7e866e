"""Run nccl_health's all-reduce script (roles/pytorch_env/files/ddp_nccl_allreduce.py) for real: 2 CPU
processes, Gloo, tiny sizes. The shipped file runs where it is, from a temp dir that gets the result,
as the module runs it from the environment's share/ddp-cluster.

Needs torch in the interpreter running pytest (skipped otherwise), e.g.
``/tmp/nccl-venv/bin/python -m pytest tests/integration/test_nccl_health_local.py``.
A few seconds on 2 cores.
"""
from __future__ import annotations

import json
import os
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
