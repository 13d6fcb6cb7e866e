"""RoCE diagnosis: cases C04, C05, C06, C07 (docs/cases.md) and the other codes."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import gid_entry, parse_sysfs_ib
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.roce_health import (
    check_gid_index, choose_fabric_interface, diagnose, interface_selection_problems, nccl_selected,
    nccl_settings, recommend_gid_index)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "rdma")

# C06: the table from the case (IPv4 v2 entry at index 3) ...
C06_TABLE_3 = [
    "GID[0]: fe80:0000:0000:0000:0ac0:ebff:fe00:0001, RoCE v1",
    "GID[1]: fe80::ac0:ebff:fe00:1, RoCE v2",
    "GID[2]: 0000:0000:0000:0000:0000:ffff:c000:020a, RoCE v1",
    "GID[3]: ::ffff:192.0.2.10, RoCE v2",
]
# ... and a host where it is index 7 (a VLAN/secondary address took 2-5, IPv6 global at 4/5).
C06_TABLE_7 = C06_TABLE_3[:2] + [
    "GID[2]: 0000:0000:0000:0000:0000:ffff:c633:640a, RoCE v1",
    "GID[3]: ::ffff:198.51.100.10, RoCE v2",
    "GID[4]: 2001:0db8:0000:0000:0000:0000:0000:000a, RoCE v1",
    "GID[5]: 2001:db8::a, RoCE v2",
    "GID[6]: 0000:0000:0000:0000:0000:ffff:c000:020a, RoCE v1",
    "GID[7]: ::ffff:192.0.2.10, RoCE v2",
]
FABRIC_IP = "192.0.2.10"


def codes(problems):
    return sorted((p["code"], p["severity"]) for p in problems)


def roce_port(device="mlx5_0", port=1, netdev="ens1f0", table=None, state="ACTIVE", phys="LinkUp", mtu=4096):
    from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import parse_gid_line
    gids = [parse_gid_line(line) for line in (C06_TABLE_3 if table is None else table)]
    for gid in gids:
        gid["ndev"] = netdev
    return {"device": device, "port": port, "state": state, "phys_state": phys, "link_layer": "Ethernet",
            "rate": "100 Gb/sec (4X EDR)", "rate_gbps": 100.0, "active_mtu": mtu, "max_mtu": 4096,
            "netdev": netdev, "netdev_mtu": 9000, "gids": gids}


def node(ports=None, interfaces=None, fabric="ens1f0", qos=None, nics=None):
    interfaces = {"lo": {"ipv4": ["127.0.0.1"]}, "ens1f0": {"ipv4": [FABRIC_IP], "mtu": 9000}} \
        if interfaces is None else interfaces
    return {"ports": [roce_port()] if ports is None else ports, "interfaces": interfaces,
            "fabric_interface": fabric, "fabric_ipv4": FABRIC_IP, "qos": qos or {},
            "mellanox_nics": nics if nics is not None else [{"address": "0000:3b:00.0"}]}


# ---------------------------------------------------------------- C06: GID index

@pytest.mark.parametrize("table, ipv4, expected", [
    (C06_TABLE_3, FABRIC_IP, 3),
    (C06_TABLE_7, FABRIC_IP, 7),                 # never assume 3
    (C06_TABLE_7, "198.51.100.10", 3),
    (C06_TABLE_3, "203.0.113.5", None),          # no GID for that address
    (C06_TABLE_3[:3], FABRIC_IP, None),          # only a v1 entry for the address
    (C06_TABLE_7, None, 3),                      # no address: first v2 IPv4-mapped entry
    ([], FABRIC_IP, None),
])
def test_recommend_gid_index(table, ipv4, expected):
    assert recommend_gid_index(table, ipv4) == expected


def test_recommend_gid_index_takes_parsed_dicts():
    table = [gid_entry(7, "0000:0000:0000:0000:0000:ffff:c000:020a", "RoCE v2"),
             gid_entry(1, "fe80::1", "RoCE v2")]
    assert recommend_gid_index(table, FABRIC_IP) == 7
    assert recommend_gid_index([{"index": 9, "gid": "::ffff:192.0.2.10", "type": "RoCE v2"}], FABRIC_IP) == 9


@pytest.mark.parametrize("table, configured, expected", [
    (C06_TABLE_3, 1, [("ROCE_GID_LINK_LOCAL", "error")]),       # the case: fe80 v2 entry
    (C06_TABLE_3, "0", [("ROCE_GID_LINK_LOCAL", "error")]),
    (C06_TABLE_3, 2, [("ROCE_GID_V1", "error")]),
    (C06_TABLE_3, 3, []),
    (C06_TABLE_3, "3", []),
    (C06_TABLE_3, 9, [("ROCE_GID_INDEX_MISMATCH", "error")]),   # empty slot
    (C06_TABLE_7, 3, [("ROCE_GID_INDEX_MISMATCH", "error")]),   # hard-coded 3 on a host where it is 7
    (C06_TABLE_7, 7, []),
    (C06_TABLE_7, "abc", [("ROCE_GID_INDEX_MISMATCH", "error")]),
    (C06_TABLE_7, None, []),
    (C06_TABLE_7, "", []),
    (C06_TABLE_7, -1, []),                                      # NCCL >= 2.21: auto
])
def test_check_gid_index(table, configured, expected):
    assert codes(check_gid_index(configured, table, FABRIC_IP)) == expected


def test_c06_message_names_the_right_index():
    [prob] = check_gid_index(1, C06_TABLE_7, FABRIC_IP)
    assert "NCCL_IB_GID_INDEX=7" in prob["fix"]


@pytest.mark.parametrize("table, configured, expected_codes, gid_index", [
    (C06_TABLE_3, 1, [("ROCE_GID_LINK_LOCAL", "error")], "3"),
    (C06_TABLE_7, 1, [("ROCE_GID_LINK_LOCAL", "error")], "7"),
    (C06_TABLE_7, 3, [("ROCE_GID_INDEX_MISMATCH", "error")], "7"),
    (C06_TABLE_7, None, [], "7"),
])
def test_c06_through_diagnose(table, configured, expected_codes, gid_index):
    facts = node(ports=[roce_port(table=table)])
    assert codes(diagnose(facts, {"nccl_ib_gid_index": configured})) == expected_codes
    assert nccl_settings(facts) == {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": gid_index,
                                    "NCCL_SOCKET_IFNAME": "ens1f0"}


# ---------------------------------------------------------------- C04: interface selection

@pytest.mark.parametrize("var, value, interfaces, expected", [
    ("NCCL_SOCKET_IFNAME", "^docker0", ["eth0", "docker0", "lo"], [("IFNAME_LOOPBACK", "error")]),
    ("NCCL_SOCKET_IFNAME", "^docker0,lo", ["eth0", "docker0", "lo"], []),
    ("NCCL_SOCKET_IFNAME", "eth2", ["eth0", "lo"], [("IFNAME_NOT_FOUND", "error")]),
    ("GLOO_SOCKET_IFNAME", "^lo,docker", ["eth0", "lo"], [("IFNAME_GLOO_SYNTAX", "error")]),
    ("GLOO_SOCKET_IFNAME", "eth0", ["eth0", "lo"], []),
    # more NCCL syntax
    ("NCCL_SOCKET_IFNAME", "eth", ["lo", "eth0", "eth1"], []),
    ("NCCL_SOCKET_IFNAME", "=eth", ["lo", "eth0"], [("IFNAME_NOT_FOUND", "error")]),
    ("NCCL_SOCKET_IFNAME", "=eth0", ["lo", "eth0"], []),
    ("NCCL_SOCKET_IFNAME", "eth0:29500", ["lo", "eth0"], []),
    ("NCCL_SOCKET_IFNAME", "eth0,ib9", ["lo", "eth0"], [("IFNAME_NOT_FOUND", "warning")]),
    ("NCCL_SOCKET_IFNAME", "^lo", ["lo", "eth0", "docker0"], [("IFNAME_VIRTUAL", "warning")]),
    ("NCCL_SOCKET_IFNAME", "eth0,", ["eth0"], [("IFNAME_SYNTAX", "error")]),
    ("nccl_socket_ifname", "", ["eth0"], []),
    ("NCCL_SOCKET_IFNAME", None, ["eth0"], []),
    # Gloo: concrete names, comma separated (PyTorch distributed docs)
    ("GLOO_SOCKET_IFNAME", "eth0,eth1", ["eth0", "eth1", "lo"], []),
    ("GLOO_SOCKET_IFNAME", "eth", ["eth0", "lo"], [("IFNAME_NOT_FOUND", "error")]),
    ("GLOO_SOCKET_IFNAME", "=eth0", ["eth0", "lo"], [("IFNAME_GLOO_SYNTAX", "error")]),
    ("GLOO_SOCKET_IFNAME", "lo", ["eth0", "lo"], [("IFNAME_LOOPBACK", "error")]),
])
def test_c04_interface_selection(var, value, interfaces, expected):
    assert codes(interface_selection_problems(value, interfaces, var)) == expected


def test_nccl_selected_order_and_exclusion():
    assert nccl_selected("^docker0", ["lo", "eth0", "docker0"]) == ["lo", "eth0"]
    assert nccl_selected("^=docker", ["docker", "docker0", "eth0"]) == ["docker0", "eth0"]


def test_c04_through_diagnose():
    facts = node(interfaces={"lo": {"ipv4": ["127.0.0.1"]}, "ens1f0": {"ipv4": [FABRIC_IP]},
                             "docker0": {"ipv4": ["172.17.0.1"]}})
    problems = diagnose(facts, {"nccl_socket_ifname": "^docker0", "gloo_socket_ifname": "^lo,docker"})
    assert codes(problems) == [("IFNAME_GLOO_SYNTAX", "error"), ("IFNAME_LOOPBACK", "error")]


# ---------------------------------------------------------------- C05: NIC without RDMA device

@pytest.mark.parametrize("nics, params, expected", [
    # the case: ConnectX-6 on the bus, no /sys/class/infiniband, NCCL_NET=Socket
    ([{"address": "0000:3b:00.0", "device_id": "0x101b", "class": "0x020000"}], {"nccl_net": "Socket"},
     [("ROCE_NCCL_NET_SOCKET", "warning"), ("ROCE_NIC_WITHOUT_RDMA_DEVICE", "error")]),
    ([{"address": "0000:3b:00.0"}], {}, [("ROCE_NIC_WITHOUT_RDMA_DEVICE", "error")]),
    ([], {}, [("NO_RDMA", "warning")]),
    ([], {"no_rdma_severity": "error"}, [("NO_RDMA", "error")]),
    ([], {"no_rdma_severity": "info", "nccl_net": "Socket"}, [("NO_RDMA", "info")]),  # sockets are right here
])
def test_c05_and_no_rdma(nics, params, expected):
    facts = node(ports=[], nics=nics, interfaces={"lo": {}, "eth0": {"ipv4": ["10.89.0.2"]}}, fabric="eth0")
    assert codes(diagnose(facts, params)) == expected
    assert nccl_settings(facts) == {"NCCL_SOCKET_IFNAME": "eth0"}


def test_nccl_net_socket_with_working_rdma():
    assert codes(diagnose(node(), {"nccl_net": "socket"})) == [("ROCE_NCCL_NET_SOCKET", "warning")]


# ---------------------------------------------------------------- C07: PFC

@pytest.mark.parametrize("qos, expected", [
    ({"ens1f0": {"trust": "pcp", "pfc": [0] * 8, "pfc_enabled": []}}, [("ROCE_PFC_DISABLED", "warning")]),
    ({"ens1f0": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0], "pfc_enabled": [3]}}, []),
    ({}, []),                                                     # mlnx_qos not installed: not checked
    ({"ens1f0": {"trust": None, "pfc": None, "pfc_enabled": []}}, []),  # output not understood
])
def test_c07_pfc(qos, expected):
    assert codes(diagnose(node(qos=qos))) == expected


def test_c07_from_the_case_text():
    from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_tools import parse_mlnx_qos
    qos = {"ens1f0": parse_mlnx_qos("Priority trust state: pcp; PFC enabled on priorities 0..7: 0 0 0 0 0 0 0 0")}
    assert codes(diagnose(node(qos=qos))) == [("ROCE_PFC_DISABLED", "warning")]


# ---------------------------------------------------------------- ports, GIDs, MTU

@pytest.mark.parametrize("ports, interfaces, params, expected", [
    ([roce_port()], None, {}, []),
    ([roce_port(state="DOWN", phys="Polling")], None, {}, [("ROCE_PORT_DOWN", "error")]),
    ([roce_port(state="INIT", phys="LinkUp")], None, {}, [("ROCE_PORT_DOWN", "error")]),
    # a second, unconfigured port that is down: reported, not fatal
    ([roce_port(), roce_port("mlx5_1", netdev="ens1f1", table=[], state="DOWN", phys="Disabled")], None, {},
     [("ROCE_PORT_DOWN", "warning")]),
    ([roce_port(table=C06_TABLE_3[:3])], None, {}, [("ROCE_NO_V2_GID", "error")]),
    ([roce_port(table=[])], None, {}, [("ROCE_NO_V2_GID", "error")]),
    ([roce_port(mtu=1024)], None, {}, [("ROCE_MTU_LOW", "warning")]),
    ([roce_port(mtu=2048)], None, {"min_mtu": 2048}, []),
    ([roce_port(mtu=None)], None, {}, []),
    # two rails whose IPv4 GIDs sit at different indexes
    ([roce_port(), roce_port("mlx5_1", netdev="ens2f0", table=C06_TABLE_7)],
     {"ens1f0": {"ipv4": [FABRIC_IP]}, "ens2f0": {"ipv4": [FABRIC_IP]}}, {},
     [("ROCE_GID_INDEX_VARIES", "info")]),
])
def test_port_checks(ports, interfaces, params, expected):
    assert codes(diagnose(node(ports=ports, interfaces=interfaces), params)) == expected


def test_nccl_settings_multi_rail_and_prefix_ambiguity():
    ports = [roce_port("mlx5_%d" % i, netdev="ens%df0" % i) for i in (0, 1, 10)]
    for port in ports:
        for gid in port["gids"]:
            gid["ndev"] = port["netdev"]
    ports[2]["state"] = "DOWN"
    interfaces = {"ens0f0": {"ipv4": ["192.0.2.10"]}, "ens1f0": {"ipv4": ["192.0.2.10"]},
                  "ens1f0np0": {"ipv4": []}, "ens10f0": {"ipv4": []}}
    conf = nccl_settings(node(ports=ports, interfaces=interfaces, fabric="ens1f0"))
    # mlx5_1 would also select mlx5_10 (prefix match), and ens1f0 would select ens1f0np0: exact '='
    assert conf == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "=ens1f0"}


def test_nccl_settings_two_indexes_omit_gid_index():
    ports = [roce_port(), roce_port("mlx5_1", netdev="ens2f0", table=C06_TABLE_7)]
    conf = nccl_settings(node(ports=ports, interfaces={"ens1f0": {"ipv4": [FABRIC_IP]},
                                                       "ens2f0": {"ipv4": [FABRIC_IP]}}))
    assert conf == {"NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "ens1f0"}


def test_choose_fabric_interface():
    ports = [roce_port("mlx5_0", netdev="ens1f0", table=[]), roce_port("mlx5_1", netdev="ens2f0")]
    interfaces = {"ens1f0": {"ipv4": []}, "ens2f0": {"ipv4": [FABRIC_IP]}}
    assert choose_fabric_interface(ports, interfaces, "eno1") == "ens2f0"
    assert choose_fabric_interface(ports[:1], {"ens1f0": {"ipv4": []}}, "eno1") == "ens1f0"
    assert choose_fabric_interface([], {}, "eno1") == "eno1"
    assert choose_fabric_interface([], {}, None) is None


def test_ib_fabric_from_gcm_sysfs_fixture():
    """gcm's 8-port InfiniBand node: all ACTIVE/LinkUp; no RoCE checks apply; every port in NCCL_IB_HCA."""
    with open(os.path.join(FIXTURES, "sysfs-ib-learned-state_bad-rate__facebookresearch-gcm.json")) as handle:
        ports = parse_sysfs_ib(json.load(handle))
    facts = {"ports": ports, "interfaces": {"ib0": {"ipv4": []}}, "fabric_interface": "ib0", "qos": {},
             "mellanox_nics": []}
    assert diagnose(facts, {"nccl_ib_gid_index": 3}) == []
    conf = nccl_settings(facts)
    assert conf["NCCL_IB_HCA"] == ",".join("mlx5_%d:1" % i for i in (0, 1, 2, 3, 6, 7, 8, 9))
    assert "NCCL_IB_GID_INDEX" not in conf
