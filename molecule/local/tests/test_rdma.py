"""The rdma role on the Molecule nodes (Debian 12 containers, no RDMA device, rdma_install_without_device: true)."""
from __future__ import annotations

import json

import pytest

from nodes import TESTINFRA_HOSTS

testinfra_hosts = TESTINFRA_HOSTS  # nodes.py: both nodes over SSH
PACKAGES = ("rdma-core", "ibverbs-utils", "infiniband-diags", "perftest")


@pytest.mark.parametrize("name", PACKAGES)
def test_inbox_packages_installed(host, name):
    assert host.package(name).is_installed


def test_verbs_tools_present(host):
    for path in ("/usr/bin/ibv_devinfo", "/usr/sbin/ibstat", "/usr/bin/ib_write_bw"):
        assert host.file(path).exists, path


def test_rdma_units_debian(host):
    # Debian's rdma-core ships no rdma.service: udev starts rdma-hw.target / rdma-load-modules@ when a device
    # appears; rdma-ndd.service is static (no [Install] section), so the role leaves it alone.
    assert not host.file("/lib/systemd/system/rdma.service").exists
    assert host.run("systemctl is-enabled rdma-ndd.service").stdout.strip() == "static"
    assert host.file("/lib/systemd/system/rdma-hw.target").exists


def test_no_rdma_reported_at_configured_severity(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/ddp_rdma.fact").content_string)
    assert fact["mode"] == "inbox" and fact["installed"] is True
    assert fact["rdma_devices"] == [] and fact["mellanox_nics"] == []
    assert {"code": "NO_RDMA", "severity": "warning", "subject": "node"} in fact["problems"]
    assert host.file("/etc/ansible/facts.d/ddp_rdma.fact").mode == 0o644


def test_nothing_written_without_a_device(host):
    assert not host.file("/etc/nccl.conf").exists
    assert not host.file("/etc/systemd/system/ddp-rdma-roce.service").exists
    assert not host.file("/usr/local/sbin/ddp-rdma-roce").exists
    assert host.run("ls /etc/systemd/network/10-ddp-rdma-*.link /etc/netplan/60-ddp-rdma-*.yaml").rc != 0


def test_torch_side_names(host):
    # torch >= 2.2 (the matrix's torch) reads TORCH_NCCL_ASYNC_ERROR_HANDLING (case C09).
    profile = host.file("/etc/profile.d/ddp-torch-nccl.sh")
    assert profile.mode == 0o644
    assert "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in profile.content_string
    assert not [line for line in profile.content_string.splitlines() if line.startswith("export NCCL_")]
    assert host.file("/etc/ddp/torch-nccl.env").content_string.splitlines()[-1] == "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"
    out = host.run("bash -lc 'echo $TORCH_NCCL_ASYNC_ERROR_HANDLING'")
    assert out.stdout.strip() == "1"
