"""ddp_bench.py's options (issue 6) run for real: 2 CPU processes, Gloo, tiny sizes.

Precision, channels_last, torch.compile (the ``eager`` backend: no C++ compiler needed), the
DataLoader input (torch-only CPU-transform dataset where torchvision is absent), the LR scaling
rule and the provenance keys. Needs torch in the interpreter running pytest (skipped otherwise).
"""
from __future__ import annotations

import json
import math
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


def run_bench(tmp_path, *options):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = "1"
    output = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", SCRIPT,
           "--image-size", "32", "--batch-size", "4", "--num-classes", "10", "--warmup-steps", "1", "--steps", "2",
           "--init-timeout-s", "60", "--output", str(output)] + list(options)
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, "torchrun failed (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr[-4000:])
    with open(str(output)) as fh:
        return json.load(fh)


@pytest.mark.parametrize("options, expected", [
    ([], {"precision": "fp32", "memory_format": "contiguous", "compile": "off", "data": "synthetic", "workers": 0,
          "lr_scaling": "linear", "lr": 0.2, "launcher": "torchrun"}),
    (["--precision", "bf16", "--memory-format", "channels_last"], {"precision": "bf16", "memory_format": "channels_last"}),
    (["--precision", "tf32"], {"precision": "tf32"}),
    (["--compile", "on", "--compile-backend", "eager"], {"compile": "on (eager)"}),
    (["--data", "loader", "--workers", "1", "--pin-memory", "off"], {"data": "loader", "workers": 1, "pin_memory": False}),
    (["--lr-scaling", "sqrt", "--base-lr", "0.1"], {"lr_scaling": "sqrt", "lr": round(0.1 * math.sqrt(2), 8)}),
    (["--lr-scaling", "linear", "--lr-reference-batch", "16"], {"lr": 0.05, "lr_reference_batch": 16}),
])
def test_options_are_applied_and_reported(tmp_path, options, expected):
    result = run_bench(tmp_path, *options)
    for key, value in expected.items():
        assert result[key] == value, (key, result[key])
    assert result["samples_per_s"] > 0
    assert result["global_batch_size"] == 8
    assert result["seed"] == 1234
    assert result["runtime_versions"]["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert result["nccl_debug"] == [] and result["nccl_debug_capture"] is False  # gloo: nothing to capture
    assert result["launch_env"]["OMP_NUM_THREADS"] == "1"


def test_loader_names_its_dataset(tmp_path):
    result = run_bench(tmp_path, "--data", "loader", "--workers", "0")
    try:
        import torchvision  # noqa: F401
        assert result["data_note"].startswith("torchvision FakeData")
    except ImportError:
        assert result["data_note"].startswith("cpu_transform_dataset")


def test_cpu_transform_dataset_is_seeded_and_shaped():
    sys.path.insert(0, os.path.dirname(SCRIPT))
    try:
        import ddp_bench
    finally:
        sys.path.pop(0)
    first = ddp_bench.CpuTransformDataset(4, 32, 10, seed=7)
    again = ddp_bench.CpuTransformDataset(4, 32, 10, seed=7)
    other = ddp_bench.CpuTransformDataset(4, 32, 10, seed=8)
    x, y = first[1]
    assert tuple(x.shape) == (3, 32, 32) and 0 <= y < 10
    assert torch.equal(x, again[1][0]) and y == again[1][1]
    assert not torch.equal(x, other[1][0])
    assert ddp_bench.scaled_lr(0.1, "linear", 512, 256) == pytest.approx(0.2)
    assert ddp_bench.scaled_lr(0.1, "sqrt", 1024, 256) == pytest.approx(0.2)
    assert ddp_bench.scaled_lr(0.1, "none", 1024, 256) == pytest.approx(0.1)


def test_horovod_launcher_without_horovod_fails_with_one_line(tmp_path):
    try:
        import horovod.torch  # noqa: F401
        pytest.skip("horovod is installed here")
    except ImportError:
        pass
    proc = subprocess.run([sys.executable, SCRIPT, "--launcher", "horovod", "--output", str(tmp_path / "r.json")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "--launcher horovod needs horovod.torch" in proc.stderr
