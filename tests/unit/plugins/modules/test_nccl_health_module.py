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


def make_env(tmp_path, torchrun=True, script=True, python=True):
    """A python_env as pytorch_env leaves it: bin/torchrun, bin/python and share/ddp-cluster/ddp_nccl_allreduce.py."""
    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    for name, wanted in (("torchrun", torchrun), ("python", python)):
        if wanted:
            (env / "bin" / name).write_text("#!/bin/sh\n")
            (env / "bin" / name).chmod(0o755)
    if script:
        (env / "share" / "ddp-cluster").mkdir(parents=True)
        (env / "share" / "ddp-cluster" / "ddp_nccl_allreduce.py").write_text("# stand-in\n")
    return str(env)


def fake_run(monkeypatch, calls, rc=1, out="", err="not faked", envs=None):
    def run_command(self, args, **kwargs):
        calls.append(list(args))
        if envs is not None:
            envs.append(dict(kwargs.get("environ_update") or {}))
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
    result = run_main(capsys, args(make_env(tmp_path, torchrun=False, script=False, python=False), fail_on="never"))
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


def test_one_process_per_node_with_a_rank_runs_without_torchrun(monkeypatch, capsys, tmp_path):
    """launcher auto, nproc 1, node_rank given: the script itself, with torchrun's variables for that one rank."""
    calls, envs = [], []
    fake_run(monkeypatch, calls, envs=envs)
    env = make_env(tmp_path)
    result = run_main(capsys, args(env, nnodes=3, node_rank=2, join_timeout=45, fail_on="never"))
    assert result["launcher"] == "direct"
    run = [c for c in calls if os.path.join(env, "bin", "python") in c]
    assert len(run) == 1 and not any("torchrun" in part for part in run[0])
    script = os.path.join(env, "share", "ddp-cluster", "ddp_nccl_allreduce.py")
    assert run[0][run[0].index(os.path.join(env, "bin", "python")) + 1] == script
    assert run[0][-2:] == ["--join-timeout", "45"]
    ranked = [e for e in envs if "RANK" in e]
    assert ranked and {k: ranked[0][k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR",
                                                 "MASTER_PORT")} == {
        "RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "GROUP_RANK": "2", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29599"}
    # the faked run failed: named as this rank's, not torchrun's
    assert [p["code"] for p in result["problems"]] == ["NCCL_RENDEZVOUS_FAILED"]
    assert result["problems"][0]["message"].startswith("the all-reduce rank (rank 0's store 127.0.0.1:29599)")


@pytest.mark.parametrize("extra", [{}, {"node_rank": 0, "nproc_per_node": 2}, {"node_rank": 0, "launcher": "torchrun"}])
def test_torchrun_where_one_process_per_node_with_a_rank_does_not_hold(monkeypatch, capsys, tmp_path, extra):
    calls = []
    fake_run(monkeypatch, calls)
    env = make_env(tmp_path)
    result = run_main(capsys, args(env, fail_on="never", nnodes=2, **extra))
    assert result["launcher"] == "torchrun"
    assert len([c for c in calls if os.path.join(env, "bin", "torchrun") in c]) == 1


def test_rank_0_where_the_endpoint_is_not_this_node_is_refused_before_running(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    env = make_env(tmp_path)
    # 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine
    result = run_main(capsys, args(env, rdzv_endpoint="192.0.2.1:29599", nnodes=2, node_rank=0, fail_on="never"))
    assert [p["code"] for p in result["problems"]] == ["NCCL_RUN_FAILED"]
    assert "192.0.2.1 is not an address of this node" in result["problems"][0]["message"]
    assert calls == []
    # rank 0 on this node's own address runs
    result = run_main(capsys, args(env, nnodes=2, node_rank=0, fail_on="never"))
    assert len(calls) == 1 and result["launcher"] == "direct"


def test_direct_without_python_is_said(monkeypatch, capsys, tmp_path):
    calls = []
    fake_run(monkeypatch, calls)
    env = make_env(tmp_path, python=False)
    result = run_main(capsys, args(env, nnodes=2, node_rank=1, launcher="direct", fail_on="never"))
    assert [p["message"] for p in result["problems"]] == ["no python in %s" % env]
    assert calls == []


@pytest.mark.parametrize("extra, words", [
    ({"node_rank": 2, "nnodes": 2}, "node_rank must be 0 to nnodes - 1 (1), got 2"),
    ({"node_rank": -1}, "node_rank must be 0 to nnodes - 1 (0), got -1"),
    ({"launcher": "direct"}, "launcher direct runs one process per node: it needs node_rank and nproc_per_node 1"),
    ({"launcher": "direct", "node_rank": 0, "nproc_per_node": 4}, "(got node_rank 0, nproc_per_node 4)"),
])
def test_bad_rank_or_launcher_is_refused(capsys, tmp_path, extra, words):
    result = run_main(capsys, args(make_env(tmp_path), **extra))
    assert result["failed"] and words in result["msg"]
