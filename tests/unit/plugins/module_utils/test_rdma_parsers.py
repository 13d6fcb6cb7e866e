"""RDMA / RoCE parsers on real outputs (tests/unit/fixtures/rdma, sources in SOURCES.md there)."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.fabric import rdma_parsers as rp
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import rdma_tools as rt
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import roce_health as rh

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "rdma")

IBV_2X = "ibv_devinfo_2xConnectX3-mlx4_IB_port1-ACTIVE_port2-DOWN__Heioy-Books.txt"
IBV_V_MLX4 = "ibv_devinfo_v_mlx4_port2-DOWN-POLLING_MLNX-OFED-exp-verbs__Heioy-Books.txt"
IBV_V_BNXT = "ibv_devinfo_v_excerpt_bnxt_re_RoCE-GID-types-v1-v2_elided__rdma-core-commit-bbce02e.txt"
SYSFS_GCM = "sysfs-ib-learned-state_bad-rate__facebookresearch-gcm.json"
RDMA_LINK_OLD = "rdma_link_show_mlx5_3-RoCE-netdev-ens7_plain-and-detailed_old-format__iproute2-commit-1525942.txt"
RDMA_LINK_JSON = "rdma_link_d_p_j_json_2xmlx5-IB__iproute2-commit-7fc7574.txt"
IBSTAT = "ibstat_2xConnectX3-mlx4_FDR56_all-Active__Heioy-Books.txt"
IBSTAT_GREP = "ibstat_grep-mlx5_8xCA__ml-engineering.txt"
IBSTATUS = "ibstatus_mlx4_FDR56_Active__Heioy-Books.txt"
IP_GCM = "ip-j-link-style_eth-bond_mtu1500-bad_gcm-learned-state__facebookresearch-gcm.json"
IBSTAT_DOWN_LINKUP = "ibstat_mlx5_7_State-Down_Physical-LinkUp_lid65535__network-operator-249.txt"
IBSTAT_DISABLED = "ibstat_excerpt_mlx4_port1-Down-Disabled_port2-Active__rdma-core-847.txt"
RDMA_LINK_LIDS = "rdma_link_10xmlx5_IB-DOWN-DISABLED-lid65535-sm_lid0_and-ACTIVE__sriov-network-operator-635.txt"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_every_fixture_is_listed_in_sources_and_used_here():
    names = sorted(n for n in os.listdir(FIXTURES) if n != "SOURCES.md")
    sources = fixture("SOURCES.md")
    used = [value for key, value in globals().items() if key.isupper() and isinstance(value, str)]
    for name in names:
        assert "| %s |" % name in sources, name
        assert name in used, "fixture %s is not used by a test" % name


# ---------------------------------------------------------------- normalisers

@pytest.mark.parametrize("text, state", [
    ("4: ACTIVE\n", "ACTIVE"), ("PORT_ACTIVE (4)", "ACTIVE"), ("Active", "ACTIVE"), ("ACTIVE", "ACTIVE"),
    ("1: DOWN", "DOWN"), ("PORT_DOWN (1)", "DOWN"), ("2: INIT", "INIT"), ("", None), (None, None),
])
def test_normalize_state(text, state):
    assert rp.normalize_state(text) == state


@pytest.mark.parametrize("text, phys", [
    ("5: LinkUp\n", "LinkUp"), ("LINK_UP (5)", "LinkUp"), ("LINK_UP", "LinkUp"), ("LinkUp", "LinkUp"),
    ("POLLING (2)", "Polling"), ("2: Polling", "Polling"), ("3: Disabled", "Disabled"), (None, None),
])
def test_normalize_phys_state(text, phys):
    assert rp.normalize_phys_state(text) == phys


@pytest.mark.parametrize("netdev_mtu, active", [
    (9000, 4096), (4200, 4096), (4191, 2048), (1500, 1024), (2044, 1024), (1120, 1024), (1119, 512), (300, None),
    ("9000\n", 4096), (None, None),
])
def test_roce_active_mtu_follows_iboe_get_mtu(netdev_mtu, active):
    assert rp.roce_active_mtu(netdev_mtu) == active


@pytest.mark.parametrize("line, index, version, ipv4, link_local", [
    ("GID[0]: fe80:0000:0000:0000:0ac0:ebff:fe00:0001, RoCE v1", 0, 1, None, True),
    ("GID[1]: fe80::ac0:ebff:fe00:1, RoCE v2", 1, 2, None, True),
    ("GID[2]: 0000:0000:0000:0000:0000:ffff:c000:020a, RoCE v1", 2, 1, "192.0.2.10", False),
    ("\tGID[  3]:       ::ffff:192.0.2.10, RoCE v2", 3, 2, "192.0.2.10", False),
    ("GID[4]: 2001:db8::1, RoCE v2", 4, 2, None, False),
])
def test_parse_gid_line(line, index, version, ipv4, link_local):
    entry = rp.parse_gid_line(line)
    assert (entry["index"], entry["version"], entry["ipv4"], entry["link_local"]) == (index, version, ipv4, link_local)


@pytest.mark.parametrize("line", ["GID[5]: 0000:0000:0000:0000:0000:0000:0000:0000, RoCE v2", "GID[x]: nope", "state: x"])
def test_parse_gid_line_skips_unset_and_garbage(line):
    assert rp.parse_gid_line(line) is None


# ---------------------------------------------------------------- ibv_devinfo

def _ports(devices):
    return [(d["hca_id"], p["port"], p["state"], p["phys_state"], p["link_layer"], p["active_mtu"])
            for d in devices for p in d["ports"]]


@pytest.mark.parametrize("name, expected", [
    (IBV_2X, [("mlx4_1", 1, "ACTIVE", None, "InfiniBand", 4096), ("mlx4_1", 2, "DOWN", None, "InfiniBand", 4096),
              ("mlx4_0", 1, "ACTIVE", None, "InfiniBand", 4096), ("mlx4_0", 2, "DOWN", None, "InfiniBand", 4096)]),
    (IBV_V_MLX4, [("mlx4_1", 2, "DOWN", "Polling", "InfiniBand", 4096)]),
    (IBV_V_BNXT, [("bnxt_re2", None, None, "LinkUp", None, None)]),
])
def test_parse_ibv_devinfo(name, expected):
    assert _ports(rp.parse_ibv_devinfo(fixture(name))) == expected


def test_ibv_devinfo_device_fields():
    dev = rp.parse_ibv_devinfo(fixture(IBV_V_MLX4))[0]
    assert (dev["fw_ver"], dev["vendor_id"], dev["vendor_part_id"], dev["phys_port_cnt"]) == \
        ("2.42.5000", "0x02c9", "4099", 2)


def test_ibv_devinfo_v_gid_types():
    port = rp.parse_ibv_devinfo(fixture(IBV_V_BNXT))[0]["ports"][0]
    assert [(g["index"], g["type"], g["ipv4"], g["link_local"]) for g in port["gids"]] == [
        (0, "RoCE v1", None, True), (1, "RoCE v2", None, True),
        (2, "RoCE v1", "192.170.1.101", False), (3, "RoCE v2", "192.170.1.101", False)]


@pytest.mark.parametrize("text", ["", "No IB devices found\n", "Failed to get IB devices list: Function not implemented"])
def test_ibv_devinfo_no_devices(text):
    assert rp.parse_ibv_devinfo(text) == []


def test_ibv_devinfo_roce_port_with_spaces():
    text = ("hca_id: mlx5_0\n    transport:   InfiniBand (0)\n    phys_port_cnt:  1\n    Device ports:\n"
            "        port:   1\n            state:          PORT_ACTIVE (4)\n            max_mtu:        4096 (5)\n"
            "            active_mtu:     1024 (3)\n            link_layer:     Ethernet\n")
    assert _ports(rp.parse_ibv_devinfo(text)) == [("mlx5_0", 1, "ACTIVE", None, "Ethernet", 1024)]


# ---------------------------------------------------------------- sysfs

def test_sysfs_gcm_learned_state():
    ports = rp.parse_sysfs_ib(json.loads(fixture(SYSFS_GCM)))
    assert [p["device"] for p in ports] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    first = ports[0]
    assert (first["port"], first["state"], first["phys_state"], first["link_layer"], first["rate"], first["rate_gbps"]) == \
        (1, "ACTIVE", "LinkUp", "InfiniBand", "100 Gb/sec (4X EDR)", 100.0)
    assert (first["pci_address"], first["netdev"], first["netdev_mtu"], first["netdev_operstate"]) == \
        ("0000:0c:00.0", "ib0", 2044, "up")
    assert ports[6]["netdev"] == "ib6"
    assert all(p["gids"] == [] for p in ports)


def test_sysfs_class_tree_with_gids():
    base = "/sys/class/infiniband/mlx5_0/ports/1/"
    tree = {
        base + "state": "4: ACTIVE\n", base + "phys_state": "5: LinkUp\n", base + "link_layer": "Ethernet\n",
        base + "rate": "100 Gb/sec (4X EDR)\n",
        base + "gids/0": "fe80:0000:0000:0000:0ac0:ebff:fe00:0001\n", base + "gid_attrs/types/0": "IB/RoCE v1\n",
        base + "gid_attrs/ndevs/0": "ens1f0\n",
        base + "gids/1": "fe80:0000:0000:0000:0ac0:ebff:fe00:0001\n", base + "gid_attrs/types/1": "RoCE v2\n",
        base + "gids/2": "0000:0000:0000:0000:0000:ffff:c000:020a\n", base + "gid_attrs/types/2": "IB/RoCE v1\n",
        base + "gids/3": "0000:0000:0000:0000:0000:ffff:c000:020a\n", base + "gid_attrs/types/3": "RoCE v2\n",
        base + "gid_attrs/ndevs/3": "ens1f0\n",
        base + "gids/4": "0000:0000:0000:0000:0000:0000:0000:0000\n", base + "gid_attrs/types/4": None,
        "/sys/class/infiniband/mlx5_0/device/net/ens1f0/mtu": "9000\n",
        "/sys/class/infiniband/mlx5_0/device/net/ens1f0/dev_port": "0\n",
    }
    port = rp.parse_sysfs_ib(tree)[0]
    assert (port["netdev"], port["netdev_mtu"], port["pci_address"]) == ("ens1f0", 9000, None)
    assert [(g["index"], g["type"], g["ipv4"]) for g in port["gids"]] == [
        (0, "RoCE v1", None), (1, "RoCE v2", None), (2, "RoCE v1", "192.0.2.10"), (3, "RoCE v2", "192.0.2.10")]


def test_sysfs_empty():
    assert rp.parse_sysfs_ib({}) == []


# ---------------------------------------------------------------- rdma link / show_gids / ibstat / ibstatus

@pytest.mark.parametrize("name, expected", [
    (RDMA_LINK_OLD, [("mlx5_3", 1, "ACTIVE", "LinkUp", "ens7", []),
                     ("mlx5_3", 1, "ACTIVE", "LinkUp", "ens7", ["CM", "IP_BASED_GIDS"])]),
    (RDMA_LINK_JSON, [("mlx5_0", 1, "ACTIVE", "LinkUp", None, ["AUTO_MIG"]),
                      ("mlx5_1", 1, "ACTIVE", "LinkUp", None, ["AUTO_MIG"])]),
])
def test_parse_rdma_link(name, expected):
    links = rp.parse_rdma_link(fixture(name))
    assert [(l["device"], l["port"], l["state"], l["phys_state"], l["netdev"], l["caps"]) for l in links] == expected


def test_parse_rdma_link_new_format_without_netdev():
    text = "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0np0\nlink mlx5_1/1 state DOWN physical_state DISABLED\n"
    links = rp.parse_rdma_link(text)
    assert [(l["device"], l["state"], l["phys_state"], l["netdev"]) for l in links] == [
        ("mlx5_0", "ACTIVE", "LinkUp", "ens1f0np0"), ("mlx5_1", "DOWN", "Disabled", None)]


def test_parse_ibstat():
    cas = rp.parse_ibstat(fixture(IBSTAT))
    assert [(c["ca"], c["ca_type"], c["fw_ver"]) for c in cas] == [
        ("mlx4_0", "MT4099", "2.42.5000"), ("mlx4_1", "MT4099", "2.42.5000")]
    assert {(p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"]) for c in cas for p in c["ports"]} == \
        {("ACTIVE", "LinkUp", 56.0, "InfiniBand")}
    assert sum(len(c["ports"]) for c in cas) == 4


def test_parse_ibstat_grep_only_names():
    assert [c["ca"] for c in rp.parse_ibstat(fixture(IBSTAT_GREP))] == ["mlx5_%d" % i for i in range(8)]


def test_parse_ibstatus():
    ports = rp.parse_ibstatus(fixture(IBSTATUS))
    assert [(p["device"], p["port"], p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"]) for p in ports] == [
        ("mlx4_0", 1, "ACTIVE", "LinkUp", 56.0, "InfiniBand"), ("mlx4_0", 2, "ACTIVE", "LinkUp", 56.0, "InfiniBand")]
    assert ports[0]["default_gid"] == "fe80:0000:0000:0000:0002:c903:00a4:e721"


# ---------------------------------------------------------------- ip -j

def test_parse_ip_json_gcm_wrapper_mtu():
    interfaces = rp.parse_ip_json(fixture(IP_GCM))
    assert sorted(interfaces) == ["enp225s0f0", "enp97s0f0", "front0"]
    assert {i["mtu"] for i in interfaces.values()} == {1500}
    assert interfaces["enp97s0f0"]["master"] == "front0"
    # the fixture's addresses are redacted placeholders ("local"): none parse
    assert interfaces["front0"]["ipv4"] == []


def test_parse_ip_json_addr_and_route():
    addr = json.dumps([
        {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP"], "mtu": 65536,
         "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
        {"ifindex": 2, "ifname": "ens1f0", "flags": ["UP"], "mtu": 9000,
         "addr_info": [{"family": "inet", "local": "192.0.2.10"}, {"family": "inet6", "local": "fe80::1"}]}])
    interfaces = rp.parse_ip_json(addr)
    assert list(interfaces) == ["lo", "ens1f0"]
    assert interfaces["ens1f0"]["ipv4"] == ["192.0.2.10"]
    assert rp.default_route_interface('[{"dst":"default","gateway":"192.0.2.1","dev":"eno1"}]') == "eno1"
    assert rp.default_route_interface("") is None
    assert rp.default_route_interface("not json") is None


# ---------------------------------------------------------------- tools

@pytest.mark.parametrize("text, trust, pfc_enabled", [
    # C07 as the case states it
    ("Priority trust state: pcp; PFC enabled on priorities 0..7: 0 0 0 0 0 0 0 0", "pcp", []),
    # layout of NVIDIA's mlnx_qos page (MLNX_OFED 4.2)
    ("DCBX mode: OS controlled\nPriority trust state: dscp\ndscp2prio mapping:\n\tprio:0 dscp:07,06,05,04,03,02,01,00,\n"
     "Cable len: 7\nPFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n"
     "\tenabled     0   0   0   1   0   0   0   0   \n\tbuffer      0   0   0   1   0   0   0   0   \n", "dscp", [3]),
    ("Priority trust mode: pcp\nPFC configuration:\n priority 0 1 2 3 4 5 6 7\n enabled 1 0 1 0 0 0 1 1\n", "pcp", [0, 2, 6, 7]),
    ("", None, []),
])
def test_parse_mlnx_qos(text, trust, pfc_enabled):
    qos = rt.parse_mlnx_qos(text)
    assert (qos["trust"], qos["pfc_enabled"]) == (trust, pfc_enabled)
    assert qos["pfc"] is None if not text else len(qos["pfc"]) == 8


# ---------------------------------------------------------------- InfiniBand LIDs and subnet manager (issue 34)

def _codes(problems):
    return sorted((p["code"], p["severity"], p["subject"].split()[0] + "/" + p["subject"].split()[2])
                  for p in problems)


def test_ibstat_reads_lid_and_sm_lid():
    ports = [p for ca in rp.parse_ibstat(fixture(IBSTAT)) for p in ca["ports"]]
    assert [(p["device"], p["port"], p["lid"], p["sm_lid"]) for p in ports] == [
        ("mlx4_0", 1, 10, 9), ("mlx4_0", 2, 12, 9), ("mlx4_1", 1, 1, 7), ("mlx4_1", 2, 4, 7)]
    assert rh.diagnose({"ports": ports}) == []


def test_an_ib_port_with_a_link_but_down_is_an_error_without_any_ip():
    ports = [p for ca in rp.parse_ibstat(fixture(IBSTAT_DOWN_LINKUP)) for p in ca["ports"]]
    assert (ports[0]["state"], ports[0]["phys_state"], ports[0]["lid"]) == ("DOWN", "LinkUp", 65535)
    problems = rh.diagnose({"ports": ports})
    assert _codes(problems) == [("ROCE_PORT_DOWN", "error", "mlx5_7/1")]
    assert "LinkUp" in problems[0]["message"] and "part of the fabric" in problems[0]["message"]


def test_an_administratively_disabled_ib_port_alone_is_a_warning():
    ports = [p for ca in rp.parse_ibstat(fixture(IBSTAT_DISABLED)) for p in ca["ports"]]
    assert _codes(rh.diagnose({"ports": ports})) == [("ROCE_PORT_DOWN", "warning", "mlx4_0/1")]
    assert _codes(rh.diagnose({"ports": ports}, {"nccl_ib_hca": "mlx4_0:1"})) == [("ROCE_PORT_DOWN", "error", "mlx4_0/1")]
    assert _codes(rh.diagnose({"ports": ports}, {"nccl_ib_hca": "^mlx4_0:1"})) == [("ROCE_PORT_DOWN", "warning", "mlx4_0/1")]


def test_rdma_link_reads_lids_and_a_down_rail_among_active_ones_is_an_error():
    links = rp.parse_rdma_link(fixture(RDMA_LINK_LIDS))
    assert [(link["device"], link["lid"], link["sm_lid"]) for link in links[:2]] == [("mlx5_0", 3, 1), ("mlx5_1", 65535, 0)]
    ports = []
    for link in links:
        port = rp.new_port(link["device"], link["port"])
        port.update(state=link["state"], phys_state=link["phys_state"], lid=link["lid"], sm_lid=link["sm_lid"],
                    link_layer="Ethernet" if link["netdev"] else "InfiniBand", netdev=link["netdev"])
        ports.append(port)
    # the SR-IOV VFs are administratively DISABLED: warnings; the same port down on one rail (Polling) is an error
    assert set(c[:2] for c in _codes(rh.diagnose({"ports": ports[:4]}))) == {("ROCE_PORT_DOWN", "warning")}
    ports[1]["phys_state"] = "Polling"
    assert ("ROCE_PORT_DOWN", "error", "mlx5_1/1") in _codes(rh.diagnose({"ports": ports[:4]}))


def test_no_subnet_manager_and_no_lid():
    port = rp.new_port("mlx5_0", 1)
    port.update(state="INIT", phys_state="LinkUp", link_layer="InfiniBand", lid=65535, sm_lid=0)
    assert _codes(rh.diagnose({"ports": [port]})) == [("IB_PORT_NO_SM", "error", "mlx5_0/1")]
    port.update(state="ACTIVE", lid=0, sm_lid=1)
    assert _codes(rh.diagnose({"ports": [port]})) == [("IB_PORT_NO_LID", "error", "mlx5_0/1")]
    port.update(lid=4, sm_lid=0)
    assert _codes(rh.diagnose({"ports": [port]})) == [("IB_PORT_NO_SM", "error", "mlx5_0/1")]
    gid = {"index": 3, "gid": "::ffff:192.0.2.10", "type": "RoCE v2", "version": 2, "ipv4": "192.0.2.10",
           "link_local": False, "ndev": None}
    port.update(link_layer="Ethernet", lid=0, sm_lid=0, gids=[gid])
    assert rh.diagnose({"ports": [port]}) == []


def test_ibv_devinfo_without_phys_state_unused_second_ports_stay_warnings():
    ports = [p for dev in rp.parse_ibv_devinfo(fixture(IBV_2X)) for p in dev["ports"]]
    found = _codes(rh.diagnose({"ports": ports}))
    assert found == [("ROCE_PORT_DOWN", "warning", "mlx4_0/2"), ("ROCE_PORT_DOWN", "warning", "mlx4_1/2")]
