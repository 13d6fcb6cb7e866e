"""health_io's readers on this machine (the node command's runner, CommandRunner, is tested in
tests/unit/roles/test_ddp_health_runner.py)."""
from __future__ import annotations

import os

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import health_io


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
