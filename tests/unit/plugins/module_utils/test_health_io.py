"""health_io.CommandRunner, the node command's runner: real processes, the deadline, the process group killed."""
from __future__ import annotations

import os
import time

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils import health_io


def test_runs_a_command_and_returns_text():
    runner = health_io.CommandRunner()
    sh = runner.get_bin_path("sh")
    assert sh and os.path.isabs(sh)
    rc, out, err = runner.run_command([sh, "-c", "echo out; echo err >&2; printf '\\377'; exit 3"])
    assert (rc, out, err) == (3, "out\n\ufffd", "err\n")  # undecodable bytes replaced, never an exception


def test_environ_update_reaches_the_command():
    runner = health_io.CommandRunner()
    rc, out, _err = runner.run_command([runner.get_bin_path("sh"), "-c", "echo $LC_ALL"], environ_update=health_io.C_LOCALE)
    assert (rc, out) == (0, "C\n")


def test_a_missing_command():
    runner = health_io.CommandRunner()
    assert runner.get_bin_path("no-such-command-ddp") is None
    rc, _out, err = runner.run_command(["/nonexistent/ddp-tool"])
    assert rc == 127 and "/nonexistent/ddp-tool" in err


def test_sbin_is_searched_as_ansible_does(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    found = health_io.CommandRunner().get_bin_path("sh", opt_dirs=["/bin", "/usr/bin"])
    assert found in ("/bin/sh", "/usr/bin/sh")


def test_the_deadline_kills_the_whole_process_group(tmp_path):
    """A command that outlives the deadline is killed with its children (timeout(1)'s child would survive it)."""
    runner = health_io.CommandRunner(deadline_s=1.0)
    script = "sleep 30 & echo $! > %s; wait" % (tmp_path / "pid")
    start = time.monotonic()
    with pytest.raises(health_io.DeadlineExceeded, match="did not finish before the deadline"):
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
    with pytest.raises(health_io.DeadlineExceeded, match="no time left"):
        runner.run_command(["true"])
    assert runner.remaining() < 0


def test_no_deadline():
    runner = health_io.CommandRunner()
    assert runner.remaining() is None
    assert runner.run_command(["true"])[0] == 0


def test_is_virtual_interface(tmp_path):
    is_virtual_interface = health_io.is_virtual_interface
    assert is_virtual_interface("/sys", "lo") is True  # this machine's loopback: no device behind it
    nic = tmp_path / "class" / "net" / "ens1f0"
    nic.mkdir(parents=True)
    (tmp_path / "pci0000:00").mkdir()
    os.symlink(str(tmp_path / "pci0000:00"), str(nic / "device"))
    (tmp_path / "class" / "net" / "veth0").mkdir()
    assert is_virtual_interface(str(tmp_path), "ens1f0") is False
    assert is_virtual_interface(str(tmp_path), "veth0") is True
    assert is_virtual_interface(str(tmp_path), "absent0") is None


def test_read_nic_rates_takes_the_fastest_active_port_then_the_netdev_speed(tmp_path):
    pci = tmp_path / "devices" / "pci0000:00" / "0000:3b:00.0"
    pci.mkdir(parents=True)
    eth = tmp_path / "devices" / "pci0000:00" / "0000:5e:00.0"
    eth.mkdir(parents=True)
    for num, state, rate in (("1", "4: ACTIVE", "100 Gb/sec (4X EDR)"), ("2", "1: DOWN", "200 Gb/sec (4X HDR)")):
        port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / num
        port.mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (port / "rate").write_text(rate + "\n")
    os.symlink(str(pci), str(tmp_path / "class" / "infiniband" / "mlx5_0" / "device"))
    net = tmp_path / "class" / "net" / "ens2f0"
    net.mkdir(parents=True)
    (net / "operstate").write_text("up\n")
    (net / "speed").write_text("25000\n")
    os.symlink(str(eth), str(net / "device"))
    assert health_io.read_nic_rates(str(tmp_path)) == {"0000:3b:00.0": 100.0, "0000:5e:00.0": 25.0}
