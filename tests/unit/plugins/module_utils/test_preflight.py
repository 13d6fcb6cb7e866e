"""Table-driven tests for plugins/module_utils/cluster/preflight.py (cases C01, C02)."""
from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import preflight

THREE = ["node0", "node1", "node2"]


def cfg(**overrides):
    base = {"nodes": list(THREE), "head_hosts": ["node0"], "rdzv_addr": "192.0.2.10",
            "rdzv_port": 29500, "nproc_per_node": "auto"}
    base.update(overrides)
    return base


def codes(problems):
    return [p["code"] for p in problems]


@pytest.mark.parametrize("addr, expected", [
    ("localhost", True), ("LOCALHOST.", True), ("localhost.localdomain", True), ("ip6-localhost", True),
    ("127.0.0.1", True), ("127.0.1.1", True), ("127.255.255.254", True), ("::1", True), ("[::1]", True),
    ("::ffff:127.0.0.1", True), ("foo.localhost", True),
    ("192.0.2.10", False), ("10.0.0.1", False), ("node0", False), ("fe80::1%eth0", False),
    ("", False), (None, False),
])
def test_is_loopback(addr, expected):
    assert preflight.is_loopback(addr) is expected


# (overrides, expected codes)
INVENTORY_CASES = [
    ({}, []),
    # C02: loopback rendezvous with more than one node is refused; one node is fine
    ({"rdzv_addr": "localhost"}, ["PREFLIGHT_LOOPBACK_RDZV"]),
    ({"rdzv_addr": "127.0.0.1"}, ["PREFLIGHT_LOOPBACK_RDZV"]),
    ({"rdzv_addr": "::1"}, ["PREFLIGHT_LOOPBACK_RDZV"]),
    ({"rdzv_addr": "localhost", "nodes": ["node0", "node1"]}, ["PREFLIGHT_LOOPBACK_RDZV"]),
    ({"rdzv_addr": "localhost", "nodes": ["node0"]}, []),
    ({"rdzv_addr": "127.0.0.1", "nodes": ["node0"]}, []),
    ({"rdzv_addr": "::1", "nodes": ["node0"]}, []),
    ({"rdzv_addr": ""}, ["PREFLIGHT_NO_RDZV_ADDR"]),
    ({"rdzv_addr": None}, ["PREFLIGHT_NO_RDZV_ADDR"]),
    # inventory groups
    ({"nodes": []}, ["PREFLIGHT_NO_NODES"]),
    ({"head_hosts": []}, ["PREFLIGHT_NO_HEAD"]),
    ({"head_hosts": None}, ["PREFLIGHT_NO_HEAD"]),
    ({"head_hosts": ["node0", "node1"]}, ["PREFLIGHT_MANY_HEADS"]),
    ({"head_hosts": ["login0"]}, ["PREFLIGHT_HEAD_NOT_NODE"]),
    # ports
    ({"rdzv_port": 0}, ["PREFLIGHT_BAD_PORT"]),
    ({"rdzv_port": 70000}, ["PREFLIGHT_BAD_PORT"]),
    ({"rdzv_port": "abc"}, ["PREFLIGHT_BAD_PORT"]),
    ({"rdzv_port": None}, ["PREFLIGHT_BAD_PORT"]),
    ({"rdzv_port": True}, ["PREFLIGHT_BAD_PORT"]),
    ({"rdzv_port": "29500"}, []),
    ({"rdzv_port": 65535}, []),
    ({"ports": {"ddp_benchmark_port": 0, "ddp_ssh_port": 22}}, ["PREFLIGHT_BAD_PORT"]),
    # nproc
    ({"nproc_per_node": 0}, ["PREFLIGHT_BAD_NPROC"]),
    ({"nproc_per_node": -1}, ["PREFLIGHT_BAD_NPROC"]),
    ({"nproc_per_node": "four"}, ["PREFLIGHT_BAD_NPROC"]),
    ({"nproc_per_node": 1.5}, ["PREFLIGHT_BAD_NPROC"]),
    ({"nproc_per_node": None}, ["PREFLIGHT_BAD_NPROC"]),
    ({"nproc_per_node": "auto"}, []),
    ({"nproc_per_node": 4}, []),
    ({"nproc_per_node": "8"}, []),
]


@pytest.mark.parametrize("overrides, expected", INVENTORY_CASES)
def test_inventory_problems(overrides, expected):
    problems = preflight.inventory_problems(cfg(**overrides))
    assert codes(problems) == expected
    for problem in problems:
        assert set(problem) == {"code", "variable", "message", "fix"}
        assert problem["code"] in preflight.PROBLEM_CODES


@pytest.mark.parametrize("overrides, code, variable", [
    ({"head_hosts": []}, "PREFLIGHT_NO_HEAD", "ddp_head_group"),
    ({"head_hosts": ["node0", "node1"]}, "PREFLIGHT_MANY_HEADS", "ddp_head_group"),
    ({"rdzv_port": 0}, "PREFLIGHT_BAD_PORT", "ddp_rdzv_port"),
    ({"ports": {"ddp_benchmark_port": 70000}}, "PREFLIGHT_BAD_PORT", "ddp_benchmark_port"),
    ({"nproc_per_node": 0}, "PREFLIGHT_BAD_NPROC", "ddp_nproc_per_node"),
    ({"rdzv_addr": "127.0.0.1"}, "PREFLIGHT_LOOPBACK_RDZV", "ddp_rdzv_addr"),
])
def test_inventory_problem_names_variable(overrides, code, variable):
    problems = [p for p in preflight.inventory_problems(cfg(**overrides)) if p["code"] == code]
    assert [p["variable"] for p in problems] == [variable]


def test_group_names_appear_in_messages():
    problems = preflight.inventory_problems({"nodes": [], "head_hosts": [], "nodes_group": "gpu", "head_group": "rdzv"})
    assert codes(problems) == ["PREFLIGHT_NO_NODES", "PREFLIGHT_NO_HEAD"]
    assert "'gpu'" in problems[0]["message"] and "'rdzv'" in problems[1]["message"]


def test_loopback_message_names_address():
    problem = preflight.inventory_problems(cfg(rdzv_addr="127.0.0.1"))[0]
    assert "127.0.0.1" in problem["message"]


def test_empty_cfg_reports_missing_groups_only():
    assert codes(preflight.inventory_problems({})) == ["PREFLIGHT_NO_NODES", "PREFLIGHT_NO_HEAD"]


# getent outputs (C01: both /etc/hosts variants; pass on the fabric address)
GETENT_DEBIAN = "127.0.1.1       node0.cluster.internal node0\n"
GETENT_LOCALHOST_LINE = "127.0.0.1 localhost node0\n"
GETENT_AHOSTSV4_LOOP = "127.0.1.1       STREAM node0.cluster.internal\n127.0.1.1       DGRAM  \n127.0.1.1       RAW    \n"
GETENT_FABRIC = "192.0.2.10      node0.cluster.internal node0\n"
GETENT_AHOSTSV4_FABRIC = "192.0.2.10      STREAM node0\n192.0.2.10      DGRAM  \n192.0.2.10      RAW    \n"


@pytest.mark.parametrize("output, expected", [
    (GETENT_DEBIAN, ["PREFLIGHT_HOST_LOOPBACK"]),
    (GETENT_LOCALHOST_LINE, ["PREFLIGHT_HOST_LOOPBACK"]),
    (GETENT_AHOSTSV4_LOOP, ["PREFLIGHT_HOST_LOOPBACK"]),
    (GETENT_LOCALHOST_LINE.splitlines(), ["PREFLIGHT_HOST_LOOPBACK"]),
    ("::1             localhost ip6-localhost node0\n", ["PREFLIGHT_HOST_LOOPBACK"]),
    (GETENT_FABRIC, []),
    (GETENT_AHOSTSV4_FABRIC, []),
    (GETENT_AHOSTSV4_FABRIC.splitlines(), []),
    ("", ["PREFLIGHT_HOST_UNRESOLVED"]),
    (None, ["PREFLIGHT_HOST_UNRESOLVED"]),
    ([], ["PREFLIGHT_HOST_UNRESOLVED"]),
    ("getent: something odd\n", ["PREFLIGHT_HOST_UNRESOLVED"]),
])
def test_resolve_problems(output, expected):
    assert codes(preflight.resolve_problems("node0", output)) == expected


def test_resolve_problem_message_and_variable():
    problem = preflight.resolve_problems("node0", GETENT_DEBIAN, variable="ddp_rdzv_addr")[0]
    assert "node0" in problem["message"] and "127.0.1.1" in problem["message"]
    assert problem["variable"] == "ddp_rdzv_addr"
    assert preflight.resolve_problems("node0", GETENT_DEBIAN)[0]["variable"] is None


def test_parse_getent_dedups_in_order():
    out = "10.0.0.2 STREAM a\n10.0.0.2 DGRAM\n10.0.0.1 STREAM a\n"
    assert preflight.parse_getent(out) == ["10.0.0.2", "10.0.0.1"]
