"""Find the bad node among three: the health all-reduce, then the pairs it triggers, end to end.

Two Molecule nodes cannot tell a bad node from its partner, so the tests add a third: ddp-mol2 as converged,
committed to an image and started as ``ddp-mol3`` on the same network (its own address, hostname and systemd;
the cluster firewall of ddp-mol1/ddp-mol2 lets its address in at run time). The three are reached with podman
exec (an inventory written per test run) and run ``health.yml --tags allreduce,pairwise``:

- healthy, ``ddp_health_pairwise=always``: every pair passes, nothing is named (the control);
- ddp-mol3's interface capped at 300mbit with ``tc qdisc ... tbf``: the all-node all-reduce falls below the default floor
  (derived from the nodes' links, ddp.cluster.busbw_floor), the pairs name ddp-mol3 (PAIRWISE_NODE) and nobody else;
- ddp-mol3 cut off from its peers (blackhole routes: every packet between them dropped, no reply, as with a bad
  VLAN or route): the all-reduce times out, the pairs name ddp-mol3 within their timeouts, and no torchrun is left
  on any node. (A firewall that drops only what comes in does not fail every collective: one side of each pair of
  ranks opens the connection, so such a node still talks to the peers it connects to itself.)

They need the nodes `molecule test -s local` leaves running (``make test``); without them they are skipped.
Everything is restored (the third node and its image removed, the firewalls reloaded, the qdisc and routes deleted).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from checkout_env import checkout_env
from podman_nodes import running, system_state, systemd_up

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = ("ddp-mol1", "ddp-mol2")
THIRD = "ddp-mol3"
IMAGE = "localhost/ddp-mol-pairwise:test"


pytestmark = pytest.mark.skipif(
    not all(running(n) for n in NODES),
    reason="the Molecule nodes ddp-mol1/ddp-mol2 are not running (make test starts them with molecule)")


def podman(*argv, check=True):
    return subprocess.run(["podman"] + list(argv), capture_output=True, text=True, check=check)


def address(node):
    return podman("exec", node, "hostname", "-I").stdout.split()[0]


def leftovers(nodes):
    found = []
    for node in nodes:
        out = podman("exec", node, "ps", "-eo", "args", check=False).stdout
        found += ["%s: %s" % (node, line) for line in out.splitlines()
                  if "torchrun" in line or "ddp_nccl_allreduce" in line]
    return found


def _remove_third():
    podman("rm", "-f", "-t", "0", THIRD, check=False)
    podman("rmi", "-f", IMAGE, check=False)


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory):
    """ddp-mol1, ddp-mol2 and a copy of ddp-mol2 as ddp-mol3; yields the inventory path."""
    _remove_third()
    network = podman("container", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
                     "ddp-mol2").stdout.strip()
    podman("commit", "-q", "ddp-mol2", IMAGE)
    try:
        podman("run", "-d", "--name", THIRD, "--hostname", THIRD, "--network", network, "--runtime", "runc",
               "--systemd=always", "--shm-size", "1g", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
               "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW", "--cap-add", "SYS_PTRACE",
               "--label", "ddp.cluster=molecule",
               "--label", "ddp.cluster.service=pairwise-test", "--label", "ddp.cluster.head=false", IMAGE, "/sbin/init")
        assert systemd_up(THIRD), "%s: systemd did not boot: %r" % (THIRD, system_state(THIRD))
        addresses = {node: address(node) for node in NODES + (THIRD,)}
        for node in NODES:
            podman("exec", node, "firewall-cmd", "-q", "--zone=ddp-cluster", "--add-source=%s" % addresses[THIRD])
        inventory = tmp_path_factory.mktemp("pairwise") / "hosts.yml"
        hosts = "\n".join("        %s: {ddp_fabric_address: %s}" % (n, a) for n, a in addresses.items())
        inventory.write_text(
            "all:\n  vars:\n    ansible_connection: containers.podman.podman\n"
            "    ansible_python_interpreter: /usr/bin/python3\n    ddp_scheduler: none\n"
            "    ddp_rdzv_addr: %s\n    ddp_rdzv_port: 29400\n"
            "  children:\n    ddp_nodes:\n      hosts:\n%s\n    ddp_head:\n      hosts:\n        ddp-mol1: {}\n"
            % (addresses["ddp-mol1"], hosts))
        yield str(inventory)
    finally:
        for node in NODES:
            podman("exec", node, "firewall-cmd", "-q", "--reload", check=False)
        _remove_third()


def run_health(inventory, *extra, timeout=600):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    # Pairs of one healthy fabric here differ by up to 2x (three nodes and Ansible's polling share 2 cores): the
    # floor is a quarter of the best pair, still far above a 300mbit port (under a tenth of it).
    cmd = [PLAYBOOK_BIN, "-i", inventory, "--tags", "allreduce,pairwise", "-e", "ddp_health_pair_min_ratio=0.25"] + list(
        extra) + ["playbooks/health.yml"]
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return proc.stdout + proc.stderr, proc.returncode, time.time() - start


@pytest.fixture(scope="module")
def healthy_busbw(three_nodes):
    """The control: a healthy run with the pairs forced; returns the all-node busbw (GB/s)."""
    out, rc, _elapsed = run_health(three_nodes, "-e", "ddp_health_pairwise=always")
    assert rc == 0, out[-4000:]
    assert "gloo all-reduce across 3 ranks" in out, out[-3000:]
    pairs = re.findall(r"pair (ddp-mol\d-ddp-mol\d): ([0-9.]+) GB/s busbw", out)
    assert sorted(p for p, _bw in pairs) == ["ddp-mol1-ddp-mol2", "ddp-mol2-ddp-mol3", "ddp-mol3-ddp-mol1"], out[-3000:]
    assert "PAIRWISE_" not in out and not re.search(r"of the best pair\) BAD", out), out[-3000:]
    return float(re.search(r"average busbw ([0-9.]+) GB/s", out).group(1))


def named(out):
    return sorted(set(re.findall(r"\[PAIRWISE_NODE\] \(error\) node (\S+):", out)))


def test_throttled_node_is_named_by_the_pairs(three_nodes, healthy_busbw):
    ifname = podman("exec", THIRD, "ip", "-o", "-4", "route", "show", "default").stdout.split()[4]
    podman("exec", THIRD, "tc", "qdisc", "replace", "dev", ifname, "root", "tbf", "rate", "300mbit", "burst", "256kb",
           "latency", "400ms")
    try:
        # No explicit floor: the default one, derived from the nodes' links (0.05 x 10 Gb/s veth = 0.0625 GB/s), is
        # under a fifth of the healthy busbw here and above what a 300mbit port lets through (0.0375 GB/s).
        out, rc, _elapsed = run_health(three_nodes)
    finally:
        podman("exec", THIRD, "tc", "qdisc", "del", "dev", ifname, "root", check=False)
    assert rc != 0, out[-3000:]
    assert "all-reduce floor: 0.0625 GB/s busbw at the largest size (ethernet: 0.05 x the eth0 10000 Mb/s link" in out
    assert healthy_busbw > 3 * 0.0625, healthy_busbw  # the healthy run above passed the same floor with room
    assert "NCCL_BUSBW_LOW" in out, out[-3000:]
    assert named(out) == [THIRD], out[-4000:]
    assert re.search(r"pair ddp-mol1-ddp-mol2: [0-9.]+ GB/s busbw \(100% of the best pair\)(?! BAD)", out), out[-3000:]
    assert "Health errors on ddp-mol3: PAIRWISE_NODE" in out, out[-3000:]
    assert "PAIRWISE_LINK" not in out and "PAIRWISE_ALL" not in out


def test_node_cut_off_from_its_peers_is_named_within_the_timeouts(three_nodes, healthy_busbw):
    peers = [address(node) for node in NODES]
    for addr in peers:
        podman("exec", THIRD, "ip", "route", "add", "blackhole", "%s/32" % addr)
    try:
        out, rc, elapsed = run_health(three_nodes, "-e", "ddp_health_nccl_timeout=30", "-e", "ddp_health_join_timeout=15",
                                      "-e", "ddp_health_pair_join_timeout=10", "-e", "ddp_health_pair_timeout=20")
        left = leftovers(NODES + (THIRD,))
    finally:
        for addr in peers:
            podman("exec", THIRD, "ip", "route", "del", "blackhole", "%s/32" % addr, check=False)
    assert rc != 0, out[-3000:]
    assert named(out) == [THIRD], out[-4000:]
    assert re.search(r"pair ddp-mol1-ddp-mol2: [0-9.]+ GB/s busbw", out), out[-3000:]
    assert len(re.findall(r"pair ddp-mol\d-ddp-mol\d: failed: ", out)) == 2, out[-3000:]
    assert left == []
    # all-node run (30 s + kill grace) and three rounds of at most 10 + 20 s, plus Ansible's own time
    assert elapsed < 240, elapsed
