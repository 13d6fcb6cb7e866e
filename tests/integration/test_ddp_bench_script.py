"""Run roles/ddp_benchmark/files/ddp_bench.py for real: 2 CPU processes, Gloo.

Needs torch in the interpreter running pytest (skipped otherwise). Tiny sizes
keep it to a few seconds on 2 cores.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable in this interpreter; the DDP script test needs it")

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "roles", "ddp_benchmark", "files", "ddp_bench.py",
)
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RUN_ID", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE")

EXPECTED_KEYS = {
    "schema_version", "model", "model_note", "backend", "device", "world_size", "nnodes", "nproc_per_node",
    "batch_size_per_process", "global_batch_size", "image_size", "warmup_steps", "steps", "elapsed_s",
    "samples_per_s", "samples_per_s_per_process", "cpu_threads_per_process", "hosts", "per_rank", "versions", "started_at", "finished_at", "env",
}


def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.fixture(scope="module")
def two_rank_result(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ddp_bench")
    output = workdir / "out" / "result.json"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        SCRIPT, "--backend", "auto", "--model", "auto", "--image-size", "32", "--batch-size", "4",
        "--num-classes", "10", "--warmup-steps", "2", "--steps", "3", "--init-timeout-s", "60",
        "--output", str(output),
    ]
    proc = subprocess.run(cmd, cwd=str(workdir), env=_clean_env(), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, "torchrun failed (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    with open(str(output)) as fh:
        result = json.load(fh)
    leftovers = [p.name for p in output.parent.iterdir() if p.name != output.name]
    return result, leftovers


def test_result_shape(two_rank_result):
    result, leftovers = two_rank_result
    assert set(result) >= EXPECTED_KEYS
    assert leftovers == [], "temp files left beside the result: %s" % leftovers
    assert result["schema_version"] == 1
    assert result["world_size"] == 2
    assert result["nnodes"] == 1
    assert result["nproc_per_node"] == 2
    assert result["backend"] == "gloo"
    assert result["device"] == "cpu"
    assert result["model"].startswith("small_cnn")
    assert result["batch_size_per_process"] == 4
    assert result["global_batch_size"] == 8
    assert (result["image_size"], result["warmup_steps"], result["steps"]) == (32, 2, 3)


def test_result_figures(two_rank_result):
    result = two_rank_result[0]
    assert result["samples_per_s"] > 0
    assert result["elapsed_s"] > 0
    assert result["cpu_threads_per_process"] == 1  # OMP_NUM_THREADS=1 in _clean_env
    assert result["samples_per_s_per_process"] == pytest.approx(result["samples_per_s"] / 2, rel=1e-3)
    per_rank = result["per_rank"]
    assert [r["rank"] for r in per_rank] == [0, 1]
    assert sorted(r["local_rank"] for r in per_rank) == [0, 1]
    for r in per_rank:
        assert r["samples_per_s"] > 0
        assert r["step_time_mean_s"] > 0
        assert r["host"] in result["hosts"]
    assert sorted(sum(result["hosts"].values(), [])) == [0, 1]


def test_result_provenance(two_rank_result):
    result = two_rank_result[0]
    assert result["versions"]["torch"] == torch.__version__
    assert set(result["versions"]) == {"torch", "cuda", "cudnn", "nccl"}
    assert result["started_at"].endswith("Z") and result["finished_at"] >= result["started_at"]
    assert all(k.startswith(("NCCL_", "TORCH_NCCL_", "GLOO_")) for k in result["env"])


def test_without_torchrun_env_fails_with_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--output", str(tmp_path / "r.json")],
        cwd=str(tmp_path), env=_clean_env(), capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if "ddp_bench.py: error:" in line]
    assert len(lines) == 1, proc.stderr
    assert "missing torchrun environment variable(s)" in lines[0]
    assert "LOCAL_RANK" in lines[0] and "torchrun" in lines[0]
    assert not (tmp_path / "r.json").exists()
