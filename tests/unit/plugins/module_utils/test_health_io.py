"""health_io's readers on this machine (the node command's runner, CommandRunner, is tested in
tests/unit/roles/test_ddp_health_runner.py)."""
from __future__ import annotations

import os

from ansible_collections.ddp.cluster.plugins.module_utils import health_io


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
