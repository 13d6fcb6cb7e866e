"""Naming the node a failed horovodrun / mpirun could not start, on their real outputs (fixtures/horovod)."""
from __future__ import annotations

import os
import re

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import horovod_unstarted_nodes

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "horovod")
HOSTS = ["10.89.0.10", "10.89.0.11"]
NAMES = ["ddp-mol1", "ddp-mol2"]


def fixture_lines(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return fh.read().splitlines()


@pytest.mark.parametrize("name, reason", [
    ("horovodrun_ssh_refused.txt",
     "ssh not successful for host 10.89.0.11: ddp@10.89.0.11: Permission denied (publickey,password)."),
    ("mpirun_ssh_refused.txt", "ddp@10.89.0.11: Permission denied (publickey,password)."),
    ("mpirun_env_missing.txt", "Node: 10.89.0.11"),
])
def test_the_node_the_launcher_names(name, reason):
    assert horovod_unstarted_nodes(fixture_lines(name), HOSTS, NAMES, 1) == [{"host": "ddp-mol2", "reason": reason}]


def test_horovodrun_that_says_nothing_names_nobody():
    # horovodrun exits 127 in silence when a node has no Python for the rank (the role's check-build on every
    # node refuses that before a launch); the SSH check after a failure is what names a node then.
    lines = fixture_lines("horovodrun_env_missing.txt")
    assert lines == []
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES, 1) == []


@pytest.mark.parametrize("line, slots, host", [
    # horovodrun's prefix [rank]<stderr>: and mpirun --tag-output's [jobid,rank]<stderr>:; ranks laid out by slot
    ("[3]<stderr>:ModuleNotFoundError: No module named 'horovod'", 2, "ddp-mol2"),
    ("[1,1]<stderr>:/opt/ddp/venv/bin/python: can't open file '/opt/ddp/bench/ddp_bench.py'", 2, "ddp-mol1"),
    ("[1,2]<stderr>:RuntimeError: Gloo connectFullMesh failed", 2, "ddp-mol2"),
])
def test_a_rank_line_names_its_node(line, slots, host):
    assert [f["host"] for f in horovod_unstarted_nodes([line], HOSTS, NAMES, slots)] == [host]


def test_rank_output_that_is_not_an_error_names_nobody():
    assert horovod_unstarted_nodes(["[1,1]<stdout>:step 3 loss 6.9", "[1]<stderr>:warming up"], HOSTS, NAMES, 1) == []


def test_an_address_that_only_starts_like_a_node_is_not_that_node():
    lines = ["ssh: connect to host 10.89.0.1 port 22: Connection refused",
             "ssh: connect to host 10.89.0.110 port 22: No route to host"]
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES, 1) == []


def test_one_entry_per_node_the_first_line_and_hosts_order():
    lines = ["ssh: connect to host 10.89.0.11 port 22: Connection refused",
             "mpirun noticed that process rank 0 with PID 0 on node 10.89.0.10 exited on signal 9 (Killed).",
             "ssh: Could not resolve hostname 10.89.0.11: Name or service not known"]
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES, 1) == [
        {"host": "ddp-mol1", "reason": lines[1]},
        {"host": "ddp-mol2", "reason": "ssh: connect to host 10.89.0.11 port 22: Connection refused"}]


def test_names_default_to_the_hosts():
    got = horovod_unstarted_nodes(["ssh: Could not resolve hostname node1: Name or service not known"],
                                  ["node0", "node1"])
    assert got == [{"host": "node1", "reason": "ssh: Could not resolve hostname node1: Name or service not known"}]


@pytest.mark.parametrize("args, message", [
    (([], ["a", "b"], ["a"], 1), "names (1) and hosts (2) differ"),
    (([], ["a"], ["a"], 0), "slots"),
])
def test_refusals(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        horovod_unstarted_nodes(*args)


def test_ssh_lines_ending_in_cr_lf():
    # ssh prints its errors with CR LF (the fixtures were given LF for the line-endings sanity test)
    lines = "ssh not successful for host 10.89.0.11:\r\nddp@10.89.0.11: Permission denied (publickey).\r\n".split("\n")
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES) == [
        {"host": "ddp-mol2", "reason": "ssh not successful for host 10.89.0.11: ddp@10.89.0.11: Permission denied (publickey)."}]


def test_when_every_node_ranks_fail_alike_nobody_is_singled_out():
    lines = ["[1,0]<stderr>:RuntimeError: Gloo connectFullMesh failed with ...",
             "[1,1]<stderr>:RuntimeError: Gloo connectFullMesh failed with ..."]
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES, 1) == []


def test_a_line_naming_a_host_beats_rank_lines():
    lines = ["[1,0]<stderr>:RuntimeError: Gloo connectFullMesh failed with ...",
             "ssh: connect to host 10.89.0.11 port 22: Connection refused"]
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES, 1) == [
        {"host": "ddp-mol2", "reason": "ssh: connect to host 10.89.0.11 port 22: Connection refused"}]


def test_warnings_and_local_host_lines_name_nobody():
    lines = ["[1,1]<stderr>:UserWarning: Failed to load image Python extension: libc10_cuda.so: cannot open shared "
             "object file: No such file or directory",
             "  Local host:   10.89.0.10"]
    assert horovod_unstarted_nodes(lines, HOSTS, NAMES, 1) == []


def test_a_lost_daemon_is_named_by_remote_host():
    lines = ["ORTE has lost communication with a remote daemon.", "", "  HNP daemon   : [[1234,0],0] on node 10.89.0.10",
             "  Remote daemon: [[1234,0],1] on node 10.89.0.11", "", "  Local host:    10.89.0.10",
             "  Remote host:   10.89.0.11"]
    assert [f["host"] for f in horovod_unstarted_nodes(lines, HOSTS, NAMES, 1)] == ["ddp-mol2"]
