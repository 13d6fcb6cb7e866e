"""ddp_health.py's CommandRunner (roles/node_health/files), the node command's runner: real processes, the deadline,
the process group killed."""
from __future__ import annotations

import os
import time

import pytest

from role_files import load

ddp_health = load("node_health", "ddp_health.py")


def test_runs_a_command_and_returns_text():
    runner = ddp_health.CommandRunner()
    sh = runner.get_bin_path("sh")
    assert sh and os.path.isabs(sh)
    rc, out, err = runner.run_command([sh, "-c", "echo out; echo err >&2; printf '\\377'; exit 3"])
    assert (rc, out, err) == (3, "out\n\ufffd", "err\n")  # undecodable bytes replaced, never an exception


def test_environ_update_reaches_the_command():
    runner = ddp_health.CommandRunner()
    rc, out, _err = runner.run_command([runner.get_bin_path("sh"), "-c", "echo $LC_ALL"], environ_update=ddp_health.health_io.C_LOCALE)
    assert (rc, out) == (0, "C\n")


def test_a_missing_command():
    runner = ddp_health.CommandRunner()
    assert runner.get_bin_path("no-such-command-ddp") is None
    rc, _out, err = runner.run_command(["/nonexistent/ddp-tool"])
    assert rc == 127 and "/nonexistent/ddp-tool" in err


def test_sbin_is_searched_as_ansible_does(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    found = ddp_health.CommandRunner().get_bin_path("sh", opt_dirs=["/bin", "/usr/bin"])
    assert found in ("/bin/sh", "/usr/bin/sh")


def test_the_deadline_kills_the_whole_process_group(tmp_path):
    """A command that outlives the deadline is killed with its children (timeout(1)'s child would survive it)."""
    runner = ddp_health.CommandRunner(deadline_s=1.0)
    script = "sleep 30 & echo $! > %s; wait" % (tmp_path / "pid")
    start = time.monotonic()
    with pytest.raises(ddp_health.health_io.DeadlineExceeded, match="did not finish before the deadline"):
        runner.run_command([runner.get_bin_path("sh"), "-c", script])
    assert time.monotonic() - start < 5
    child = int((tmp_path / "pid").read_text())
    time.sleep(0.2)
    try:
        os.kill(child, 0)
        with open("/proc/%d/stat" % child) as handle:
            alive = handle.read().split()[2] != "Z"
    except (OSError, IOError):
        alive = False
    assert not alive, "the child sleep %d survived" % child
    with pytest.raises(ddp_health.health_io.DeadlineExceeded, match="no time left"):
        runner.run_command(["true"])
    assert runner.remaining() < 0


def test_no_deadline():
    runner = ddp_health.CommandRunner()
    assert runner.remaining() is None
    assert runner.run_command(["true"])[0] == 0
