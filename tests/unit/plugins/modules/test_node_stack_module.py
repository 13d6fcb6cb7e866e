"""node_stack through its I/O edge on this machine: main() with an environment whose Python is this test's own, the
shipped probe, and a stand-in torch package first on its path (a CPU build's attributes: version 2.13.0+cpu, no CUDA),
so the test does not depend on a torch install. Real torch on real nodes: the Molecule verify and the health stage."""
from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from module_args import patch_module_args
from ansible_collections.ddp.cluster.plugins.modules import node_stack

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "pytorch_env",
                     "files", "ddp_stack_probe.py")


def run_main(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            node_stack.main()
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return json.loads(out)


def make_env(tmp_path, probe=True):
    """A python_env as pytorch_env leaves it: bin/python (this interpreter) and share/ddp-cluster/ddp_stack_probe.py."""
    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    standin = tmp_path / "standin" / "torch"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text('__version__ = "2.13.0+cpu"\nfrom . import version  # noqa\n')
    (standin / "version.py").write_text("cuda = None\n")
    # A wrapper, not a symlink: a linked interpreter would not find the venv (its pyvenv.cfg) it belongs to.
    (env / "bin" / "python").write_text('#!/bin/sh\nPYTHONPATH="%s" exec "%s" "$@"\n' % (standin.parent, sys.executable))
    (env / "bin" / "python").chmod(0o755)
    if probe:
        (env / "share" / "ddp-cluster").mkdir(parents=True)
        shutil.copy(PROBE, str(env / "share" / "ddp-cluster" / "ddp_stack_probe.py"))
    return str(env)


def args(tmp_path, env, **extra):
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_SOCKET_IFNAME=eth0\n")
    base = {"python_env": env, "launcher": str(tmp_path / "no-ddp-env"), "manifest_dir": str(tmp_path / "expected"),
            "files": [str(conf), str(tmp_path / "absent.conf")]}
    base.update(extra)
    return base


def test_reads_the_environment_and_the_files(capsys, tmp_path):
    want = "2.13.0"
    result = run_main(capsys, args(tmp_path, make_env(tmp_path)))
    assert result["healthy"] is True, result["problems"]
    stack = result["stack"]
    assert stack["torch"]["version"] == want
    assert stack["kernel"] == os.uname().release
    assert stack["files"][str(tmp_path / "absent.conf")] is None
    assert len(stack["files"][str(tmp_path / "nccl.conf")]) == 64
    assert result["flat"]["torch"] == want and result["changed"] is False


def test_drift_from_the_manifest(capsys, tmp_path):
    (tmp_path / "expected").mkdir()
    (tmp_path / "expected" / "pytorch_env.json").write_text(json.dumps({"torch": "2.1.0", "torch_cuda": None}))
    result = run_main(capsys, args(tmp_path, make_env(tmp_path)))
    assert result["failed"] is True
    assert [(p["code"], p["subject"]) for p in result["problems"]] == [("STACK_DRIFT", "torch")]
    assert result["expected"] == {"pytorch_env": {"torch": "2.1.0", "torch_cuda": None}}


def test_missing_probe_is_a_clear_problem(capsys, tmp_path):
    result = run_main(capsys, args(tmp_path, make_env(tmp_path, probe=False), fail_on="never"))
    assert "failed" not in result or result["failed"] is False
    assert [p["code"] for p in result["problems"]] == ["STACK_PROBE_FAILED"]
    assert "is not installed (the pytorch_env role installs it)" in result["problems"][0]["message"]
    assert result["stack"]["torch"] is None


def test_torch_that_does_not_import_is_named(capsys, tmp_path):
    env = make_env(tmp_path)
    (tmp_path / "standin" / "torch" / "__init__.py").write_text("raise ImportError('libtorch_cpu.so: cannot open')\n")
    result = run_main(capsys, args(tmp_path, env))
    assert [p["code"] for p in result["problems"]] == ["STACK_PROBE_FAILED"]
    assert "torch does not import" in result["problems"][0]["message"]
    assert "libtorch_cpu.so: cannot open" in result["problems"][0]["message"]


def test_relative_probe_is_refused(capsys, tmp_path):
    result = run_main(capsys, args(tmp_path, make_env(tmp_path), probe="ddp_stack_probe.py"))
    assert result["failed"] is True and "absolute path" in result["msg"]


def test_probe_output_of_this_run_is_used_without_running_the_probe(capsys, tmp_path):
    """What pytorch_env's run of the probe printed (pytorch_env_stack_probe) stands for the probe: nothing is run,
    the other reads are made."""
    env = make_env(tmp_path, probe=False)  # no probe installed: running it would be STACK_PROBE_FAILED
    given = {"torch": {"version": "2.13.0", "cuda": None, "cudnn": None, "nccl": None, "cuda_available": False},
             "mapped": [], "wheel_lib_dirs": {}, "env": {"NCCL_NET_PLUGIN": None, "LD_LIBRARY_PATH": None,
                                                         "LD_PRELOAD": None, "HPCX_DIR": None}}
    result = run_main(capsys, args(tmp_path, env, probe_output=given))
    assert result["healthy"] is True, result["problems"]
    assert result["probe_ran"] is False
    assert result["stack"]["torch"] == given["torch"]
    assert result["stack"]["files"][str(tmp_path / "absent.conf")] is None
    # the probe's own failure, as it printed it, is still a problem
    failed = run_main(capsys, args(tmp_path, env, probe_output={"torch": None, "error": "ImportError: no torch"},
                                   fail_on="never"))
    assert [p["code"] for p in failed["problems"]] == ["STACK_PROBE_FAILED"]
    assert "ImportError: no torch" in failed["problems"][0]["message"]
    # anything else is refused, naming what it got
    refused = run_main(capsys, args(tmp_path, env, probe_output={"version": "2.13.0"}))
    assert refused["failed"] is True and "no key 'torch' or 'error'" in refused["msg"] and "version" in refused["msg"]


def test_probe_runs_without_probe_output(capsys, tmp_path):
    assert run_main(capsys, args(tmp_path, make_env(tmp_path)))["probe_ran"] is True


def test_probe_user_that_does_not_exist_is_named(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(node_stack.os, "geteuid", lambda: 0)
    result = run_main(capsys, args(tmp_path, make_env(tmp_path), probe_user="ddp-no-such-user", fail_on="never"))
    assert [p["code"] for p in result["problems"]] == ["STACK_PROBE_FAILED"]
    assert "probe_user ddp-no-such-user does not exist" in result["problems"][0]["message"]


def test_probe_runs_as_probe_user_with_its_home(capsys, tmp_path, monkeypatch):
    """As root, the probe (torch's import) runs through runuser as the cluster user, never as root."""
    seen = []
    real = node_stack.AnsibleModule.run_command

    def spy(self, argv, *a, **kw):
        if "runuser" in argv:
            seen.append((list(argv), dict(kw.get("environ_update") or {})))
            argv = argv[argv.index("--") + 1:]  # run it here as ourselves: the test only checks the command
        return real(self, argv, *a, **kw)

    monkeypatch.setattr(node_stack.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node_stack.AnsibleModule, "run_command", spy)
    result = run_main(capsys, args(tmp_path, make_env(tmp_path), probe_user="nobody"))
    assert result["stack"]["torch"]["version"] == "2.13.0"
    (argv, environ), = seen
    assert argv[:6] == ["timeout", "120", "runuser", "-u", "nobody", "--"]
    assert environ["HOME"] == node_stack.pwd.getpwnam("nobody").pw_dir
