"""nccl_health (mode torch) through its I/O edge: main() with a fake environment in tmp_path, torchrun faked."""
from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.basic import AnsibleModule
from module_args import patch_module_args
from ansible_collections.ddp.cluster.plugins.modules import nccl_health

FIX = "install the PyTorch environment (pytorch_env role) or set script"


def run_main(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            nccl_health.main()
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return json.loads(out)


def make_env(tmp_path, torchrun=True, script=True):
    """A python_env as pytorch_env leaves it: bin/torchrun and share/ddp-cluster/ddp_nccl_allreduce.py."""
    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    if torchrun:
        (env / "bin" / "torchrun").write_text("#!/bin/sh\n")
        (env / "bin" / "torchrun").chmod(0o755)
    if script:
        (env / "share" / "ddp-cluster").mkdir(parents=True)
        (env / "share" / "ddp-cluster" / "ddp_nccl_allreduce.py").write_text("# stand-in\n")
    return str(env)


def fake_run(monkeypatch, calls, rc=1, out="", err="not faked"):
    def run_command(self, args, **kwargs):
        calls.append(list(args))
        return rc, out, err

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)


def args(python_env, **extra):
    base = {"python_env": python_env, "rdzv_endpoint": "127.0.0.1:29599", "sysfs_root": "/nonexistent"}
    base.update(extra)
    return base


def test_missing_script_is_a_clear_problem(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    env = make_env(tmp_path, script=False)
    result = run_main(capsys, args(env))
    assert result["failed"] is True and result["healthy"] is False
    default = os.path.join(env, "share", "ddp-cluster", "ddp_nccl_allreduce.py")
    assert [(p["code"], p["fix"]) for p in result["problems"]] == [("NCCL_RUN_FAILED", FIX)]
    assert default in result["problems"][0]["message"]
    assert default in result["command"]
    assert calls == []  # nothing ran


def test_missing_torchrun_and_script_are_both_said(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    result = run_main(capsys, args(make_env(tmp_path, torchrun=False, script=False), fail_on="never"))
    assert not result.get("failed")
    assert [p["code"] for p in result["problems"]] == ["NCCL_RUN_FAILED", "NCCL_RUN_FAILED"]
    assert "no torchrun or python" in result["problems"][0]["message"] and result["problems"][1]["fix"] == FIX
    assert calls == []


def test_script_option_replaces_the_default(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    mine = tmp_path / "elsewhere.py"
    result = run_main(capsys, args(make_env(tmp_path, script=False), script=str(mine)))
    assert [p["code"] for p in result["problems"]] == ["NCCL_RUN_FAILED"]
    assert str(mine) in result["problems"][0]["message"] and str(mine) in result["command"]
    mine.write_text("# stand-in\n")
    result = run_main(capsys, args(make_env(tmp_path / "b", script=False), script=str(mine)))
    assert calls and str(mine) in calls[0]  # torchrun was started with it (and failed: faked)


def test_relative_script_is_refused(capsys, tmp_path):
    result = run_main(capsys, args(make_env(tmp_path), script="ddp_nccl_allreduce.py"))
    assert result["failed"] is True and "absolute path" in result["msg"]


def test_installed_script_runs_from_the_environment(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    env = make_env(tmp_path)
    result = run_main(capsys, args(env, fail_on="never"))
    script = os.path.join(env, "share", "ddp-cluster", "ddp_nccl_allreduce.py")
    torchrun = [c for c in calls if os.path.join(env, "bin", "torchrun") in c]
    assert len(torchrun) == 1 and script in torchrun[0]
    output = torchrun[0][torchrun[0].index("--output") + 1]
    assert os.path.basename(output) == "result.json" and not os.path.exists(os.path.dirname(output))  # removed
    assert [p["code"] for p in result["problems"]] == ["NCCL_RENDEZVOUS_FAILED"]  # the faked run failed


def test_check_mode_shows_the_real_script(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    env = make_env(tmp_path, script=False)
    result = run_main(capsys, args(env, _ansible_check_mode=True))
    assert not result.get("failed") and result["problems"] == []
    assert os.path.join(env, "share", "ddp-cluster", "ddp_nccl_allreduce.py") in result["command"]
    assert "<tmpdir>/result.json" in result["command"]
    assert calls == []


NCCL_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "nccl")


@pytest.mark.parametrize("name, floor, source, codes", [
    # 8 x A100-SXM4 on one node at 8 GiB: OCI's 185 GB/s floor, 235 measured
    ("nccl-tests_all_reduce_perf_1node-8xA100-SXM4-40GB_NVLink_g8__ocitutorials.txt", 185.0, "nvlink", []),
    # a failed run: NCCL's own text kept and classified
    ("nccl-tests_failure_internal-error_bootstrap__nccl-tests-204.txt", None, "unknown", ["NCCL_PEER_EXITED"]),
])
def test_nccl_tests_mode_floor_and_failure(monkeypatch, capsys, tmp_path, name, floor, source, codes):
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    with open(os.path.join(NCCL_FIXTURES, name)) as handle:
        text = handle.read()
    calls = []
    fake_run(monkeypatch, calls, rc=0 if not codes else 1, out=text, err="")
    result = run_main(capsys, {"mode": "nccl-tests", "nccl_tests_path": str(binary), "sysfs_root": "/nonexistent",
                               "fail_on": "never", "sizes": [1 << 30, 8 << 30]})
    assert (result["busbw_floor"]["floor_gbps"], result["busbw_floor"]["source"]) == (floor, source)
    assert [p["code"] for p in result["problems"] if p["severity"] == "error"] == codes
    if codes:
        assert result["failure"]["class"] == "process"
