"""rdma role decisions: OFED install, MTU persistence per OS, /etc/nccl.conf, torch names (C06, C09)."""
from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.filter.crossnode import cluster_problems
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import rdma_config
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import parse_gid_line
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.roce_health import (
    diagnose, nccl_settings, recommend_gid_index)

FABRIC_IP = "192.0.2.10"
# C06: the IPv4 RoCE v2 GID at index 3 on one ConnectX host ...
TABLE_3 = [
    "GID[0]: fe80:0000:0000:0000:0ac0:ebff:fe00:0001, RoCE v1",
    "GID[1]: fe80::ac0:ebff:fe00:1, RoCE v2",
    "GID[2]: 0000:0000:0000:0000:0000:ffff:c000:020a, RoCE v1",
    "GID[3]: ::ffff:192.0.2.10, RoCE v2",
]
# ... and at index 7 on another (a secondary IPv4 and a global IPv6 address took 2-5).
TABLE_7 = TABLE_3[:2] + [
    "GID[2]: 0000:0000:0000:0000:0000:ffff:c633:640a, RoCE v1",
    "GID[3]: ::ffff:198.51.100.10, RoCE v2",
    "GID[4]: 2001:0db8:0000:0000:0000:0000:0000:000a, RoCE v1",
    "GID[5]: 2001:db8::a, RoCE v2",
    "GID[6]: 0000:0000:0000:0000:0000:ffff:c000:020a, RoCE v1",
    "GID[7]: ::ffff:192.0.2.10, RoCE v2",
]


def codes(problems):
    return sorted(p["code"] for p in problems)


def connectx_facts(table, netdev="ens1f0", netdev_mtu=9000, device="mlx5_0"):
    """A ConnectX RoCE node as roce_health's gather() returns it, from an inline GID table."""
    gids = [parse_gid_line(line) for line in table]
    for gid in gids:
        gid["ndev"] = netdev
    port = {"device": device, "port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "link_layer": "Ethernet",
            "rate": "100 Gb/sec (4X EDR)", "rate_gbps": 100.0, "active_mtu": 4096, "max_mtu": 4096,
            "netdev": netdev, "netdev_mtu": netdev_mtu, "gids": gids}
    return {"ports": [port], "mellanox_nics": [{"address": "0000:3b:00.0"}], "qos": {},
            "interfaces": {"lo": {"ipv4": ["127.0.0.1"], "mtu": 65536},
                           netdev: {"ipv4": [FABRIC_IP], "mtu": netdev_mtu}},
            "fabric_interface": netdev, "fabric_ipv4": FABRIC_IP}


def roce_result(facts):
    """The part of roce_health's result the role reads (the module's devices_view, built from pure functions)."""
    port = dict(facts["ports"][0])
    port["recommended_gid_index"] = recommend_gid_index(port["gids"], FABRIC_IP)
    return {"devices": [{"name": port["device"], "ports": [port]}], "nccl_conf": nccl_settings(facts),
            "fabric_interface": facts["fabric_interface"], "problems": diagnose(facts)}


# ---------------------------------------------------------------- /etc/nccl.conf from the facts

@pytest.mark.parametrize("table, overrides, expected_lines", [
    (TABLE_3, {}, ["NCCL_IB_HCA=mlx5_0:1", "NCCL_IB_GID_INDEX=3", "NCCL_SOCKET_IFNAME=ens1f0"]),
    (TABLE_7, {}, ["NCCL_IB_HCA=mlx5_0:1", "NCCL_IB_GID_INDEX=7", "NCCL_SOCKET_IFNAME=ens1f0"]),
    (TABLE_3, {"NCCL_IB_TC": 106, "NCCL_DEBUG": "WARN"},
     ["NCCL_IB_HCA=mlx5_0:1", "NCCL_IB_GID_INDEX=3", "NCCL_SOCKET_IFNAME=ens1f0", "NCCL_DEBUG=WARN", "NCCL_IB_TC=106"]),
    (TABLE_7, {"NCCL_IB_GID_INDEX": None, "NCCL_IB_SL": 3},
     ["NCCL_IB_HCA=mlx5_0:1", "NCCL_SOCKET_IFNAME=ens1f0", "NCCL_IB_SL=3"]),
    (TABLE_3, {"NCCL_SOCKET_IFNAME": "=ens1f0", "NCCL_IB_HCA": ""},
     ["NCCL_IB_GID_INDEX=3", "NCCL_SOCKET_IFNAME==ens1f0"]),
])
def test_nccl_conf_from_connectx_facts(table, overrides, expected_lines):
    facts = connectx_facts(table)
    assert not [p for p in diagnose(facts) if p["severity"] == "error"]
    text = rdma_config.render_nccl_conf(nccl_settings(facts), overrides)
    assert text.startswith("# Managed by ddp.cluster.rdma")
    assert [line for line in text.splitlines() if not line.startswith("#")] == expected_lines


def test_nccl_conf_says_where_each_value_came_from():
    text = rdma_config.render_nccl_conf({"NCCL_IB_GID_INDEX": "3"}, {"NCCL_IB_TC": 106})
    assert text.splitlines()[1:] == ["# derived", "NCCL_IB_GID_INDEX=3", "# rdma_nccl_overrides", "NCCL_IB_TC=106"]


def test_cpu_node_gets_only_socket_ifname():
    facts = {"ports": [], "mellanox_nics": [], "interfaces": {"eth0": {"ipv4": ["10.0.0.2"], "mtu": 1500}},
             "fabric_interface": "eth0"}
    assert rdma_config.nccl_conf_values(nccl_settings(facts)) == [("NCCL_SOCKET_IFNAME", "eth0")]


# ---------------------------------------------------------------- refused variables (C09)

@pytest.mark.parametrize("overrides, allow, expected", [
    ({"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": 3, "NCCL_IB_SL": 0, "NCCL_IB_TC": 106,
      "NCCL_SOCKET_IFNAME": "ens1f0", "NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring"}, (), []),
    ({"NCCL_TIMEOUT": 300}, (), ["RDMA_NCCL_VAR_UNDOCUMENTED"]),
    ({"NCCL_IB_GID_IDX": 3}, (), ["RDMA_NCCL_VAR_UNDOCUMENTED"]),
    ({"nccl_debug": "INFO"}, (), ["RDMA_NCCL_VAR_UNDOCUMENTED"]),
    ({"NCCL_SOMETHING_NEW": 1}, ("NCCL_SOMETHING_NEW",), []),
    ({"NCCL_ASYNC_ERROR_HANDLING": 1}, (), ["RDMA_NCCL_VAR_TORCH"]),
    ({"TORCH_NCCL_BLOCKING_WAIT": 1}, (), ["RDMA_NCCL_VAR_TORCH"]),
    ({"NCCL_DEBUG": "INFO\nNCCL_NET=Socket"}, (), ["RDMA_NCCL_VALUE_INVALID"]),
    ({"NCCL_IB_HCA": ["mlx5_0"]}, (), ["RDMA_NCCL_VALUE_INVALID"]),
    ({"NCCL_IB_GID_INDEX": None}, (), []),
])
def test_override_problems(overrides, allow, expected):
    assert codes(rdma_config.nccl_override_problems(overrides, allow)) == expected


def test_nccl_timeout_says_what_to_use():
    (p,) = rdma_config.nccl_override_problems({"NCCL_TIMEOUT": 300})
    assert p["severity"] == "error" and "init_process_group" in p["fix"] and "timeout" in p["fix"]


@pytest.mark.parametrize("torch, settings, env, expected", [
    # C09: torch 2.3.1 reads TORCH_NCCL_*; the old spelling is accepted as input and renamed.
    ("2.3.1", {"NCCL_ASYNC_ERROR_HANDLING": 1}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, []),
    ("2.2.0+cu121", {"ASYNC_ERROR_HANDLING": 1, "BLOCKING_WAIT": True},
     {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_BLOCKING_WAIT": "1"}, []),
    ("2.1.0", {"TORCH_NCCL_ASYNC_ERROR_HANDLING": 1, "AVOID_RECORD_STREAMS": 1},
     {"NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}, []),
    (None, {"DESYNC_DEBUG": 1}, {"TORCH_NCCL_DESYNC_DEBUG": "1"}, []),
    ("2.3.1", {"NCCL_TIMEOUT": 300}, {}, ["RDMA_TORCH_VAR_INVALID"]),
    ("2.3.1", {"TIMEOUT": 300}, {}, ["RDMA_TORCH_VAR_INVALID"]),
    ("2.3.1", {"bad name": 1, "TRACE_BUFFER_SIZE": None}, {}, ["RDMA_TORCH_VAR_INVALID", "RDMA_TORCH_VAR_INVALID"]),
])
def test_torch_names(torch, settings, env, expected):
    got, problems = rdma_config.torch_nccl_env(torch, settings)
    assert got == env
    assert codes(problems) == expected


def test_torch_profile_is_stable_across_local_tags():
    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    planned = rdma_config.render_torch_profile(env, "2.13.0")
    assert planned == rdma_config.render_torch_profile(env, "2.13.0+cpu")
    assert "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n" in planned
    assert rdma_config.render_env_file(env).endswith("TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n")


# ---------------------------------------------------------------- cross-node: MTU and forced GID index

def _nodes(**tables):
    return dict((name, roce_result(connectx_facts(table, netdev_mtu=mtu))) for name, (table, mtu) in tables.items())


@pytest.mark.parametrize("nodes, planned_mtu, forced, expected", [
    # per-node GID index (3 and 7) is fine when each node's own index goes to its nccl.conf
    (_nodes(n0=(TABLE_3, 9000), n1=(TABLE_7, 9000)), None, None, ["CLUSTER_GID_INDEX_INCONSISTENT"]),
    # one forced index that does not fit n1 is refused
    (_nodes(n0=(TABLE_3, 9000), n1=(TABLE_7, 9000)), None, "3", ["CLUSTER_GID_INDEX_INCONSISTENT"]),
    (_nodes(n0=(TABLE_3, 9000), n1=(TABLE_3, 9000)), None, "3", []),
    # a node pair with different MTUs is refused ...
    (_nodes(n0=(TABLE_3, 9000), n1=(TABLE_3, 1500)), None, None, ["CLUSTER_MTU_MISMATCH"]),
    # ... unless the role sets the same MTU on both
    (_nodes(n0=(TABLE_3, 9000), n1=(TABLE_3, 1500)), 9000, None, []),
])
def test_cluster_checks(nodes, planned_mtu, forced, expected):
    per_node = dict((n, rdma_config.node_fabric_facts(r, planned_mtu)) for n, r in nodes.items())
    problems = cluster_problems(per_node, forced)
    assert codes(problems) == expected
    severities = set(p["severity"] for p in problems)
    if forced is not None and expected:
        assert severities == {"error"}
    if forced is None and expected == ["CLUSTER_GID_INDEX_INCONSISTENT"]:
        assert severities == {"warning"}
    if expected == ["CLUSTER_MTU_MISMATCH"]:
        assert severities == {"error"} and "1500 on n1" in problems[0]["message"]


def test_node_fabric_facts_of_cpu_node():
    assert rdma_config.node_fabric_facts({"devices": [], "nccl_conf": {"NCCL_SOCKET_IFNAME": "eth0"}}, 9000) == \
        {"mtu": 9000, "gid_index": None}


# ---------------------------------------------------------------- OFED install decision

MLNX_23 = "MLNX_OFED_LINUX-23.10-1.1.9.0:\n"
DOCA_24 = "OFED-internal-24.10-1.1.4:\n"
KERNELS = "4.18.0-513.5.1.el8_9.x86_64\n5.14.0-362.8.1.el9_3.x86_64\n"


@pytest.mark.parametrize("installed, wanted, kernel, kernels, force, install, aks, argv_tail", [
    (MLNX_23, "23.10-1.1.9.0", "5.14.0-362.8.1.el9_3.x86_64", KERNELS, False, False, False, None),
    (MLNX_23, "23.10-1.1.9.0", "5.14.0-362.8.1.el9_3.x86_64", KERNELS, True, True, False, ["--without-fw-update"]),
    ("", "23.10-1.1.9.0", "5.14.0-362.8.1.el9_3.x86_64", KERNELS, False, True, False, ["--without-fw-update"]),
    (MLNX_23, "24.10-2.1.8.0", "5.14.0-427.13.1.el9_4.x86_64", KERNELS, False, True, True,
     ["--add-kernel-support", "--skip-repo"]),
    ("", "24.10-2.1.8.0", "5.14.0-427.13.1.el9_4.x86_64", None, False, True, False, ["--without-fw-update"]),
    (DOCA_24, "24.10-1.1.4", "6.1.0-18-amd64", None, False, False, False, None),
])
def test_ofed_plan(installed, wanted, kernel, kernels, force, install, aks, argv_tail):
    plan = rdma_config.ofed_plan(installed, wanted, kernel, kernels, force=force)
    assert plan["install"] is install
    assert plan["add_kernel_support"] is aks
    if argv_tail is None:
        assert plan["argv"] == [] and "already installed" in plan["reason"]
    else:
        assert plan["argv"][:2] == ["./mlnxofedinstall", "--force"]
        assert plan["argv"][-len(argv_tail):] == argv_tail


def test_ofed_plan_extra_args_and_no_version():
    plan = rdma_config.ofed_plan("", "24.10-2.1.8.0", "k", "k\n", extra_args=["--with-nvmf"])
    assert plan["argv"] == ["./mlnxofedinstall", "--force", "--without-fw-update", "--with-nvmf"]
    assert rdma_config.ofed_plan("", "", "k")["install"] is False


@pytest.mark.parametrize("text, version", [
    ("MLNX_OFED_LINUX-23.10-1.1.9.0:", "23.10-1.1.9.0"),
    ("MLNX_OFED_LINUX-5.8-3.0.7.0:\n", "5.8-3.0.7.0"),
    ("OFED-internal-24.10-1.1.4:", "24.10-1.1.4"),
    ("", None),
    ("bash: ofed_info: command not found", None),
])
def test_parse_ofed_info(text, version):
    assert rdma_config.parse_ofed_info(text) == version


@pytest.mark.parametrize("name, version", [
    ("MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz", "24.10-2.1.8.0"),
    ("https://mirror.example/ofed/MLNX_OFED_LINUX-5.8-3.0.7.0-ubuntu22.04-x86_64.tgz", "5.8-3.0.7.0"),
    ("/srv/ofed/custom.tgz", None),
])
def test_ofed_version_from_name(name, version):
    assert rdma_config.ofed_version_from_name(name) == version


# ---------------------------------------------------------------- MTU persistence per OS

MAC = "0c:42:a1:00:00:01"


@pytest.mark.parametrize("os_family, backend, nm, netfile, netplan, backend_out, paths, nmcli", [
    ("RedHat", "auto", "System ens1f0", None, False, "networkmanager", [],
     ["nmcli", "connection", "modify", "System ens1f0", "802-3-ethernet.mtu", "9000"]),
    ("RedHat", "auto", None, None, False, "link", ["/etc/systemd/network/10-ddp-rdma-ens1f0.link"], None),
    ("Debian", "auto", None, None, True, "netplan", ["/etc/netplan/60-ddp-rdma-ens1f0.yaml"], None),
    ("Debian", "auto", None, "/etc/systemd/network/10-ens1f0.network", False, "networkd",
     ["/etc/systemd/network/10-ens1f0.network.d/60-ddp-rdma-mtu.conf"], None),
    ("Debian", "auto", None, None, False, "link", ["/etc/systemd/network/10-ddp-rdma-ens1f0.link"], None),
    ("Debian", "none", None, None, True, "none", [], None),
])
def test_mtu_plan(os_family, backend, nm, netfile, netplan, backend_out, paths, nmcli):
    plan = rdma_config.mtu_plan(os_family, "ens1f0", 9000, backend, nm, netfile, netplan, MAC)
    assert plan["error"] is None
    assert plan["backend"] == backend_out
    assert [f["path"] for f in plan["files"]] == paths
    assert plan["nmcli"] == nmcli
    for item in plan["files"]:
        assert "9000" in item["content"]


def test_mtu_plan_renderings():
    link = rdma_config.mtu_plan("Debian", "ens1f0", 9000, mac=MAC)["files"][0]
    assert "[Match]\nMACAddress=%s\n" % MAC in link["content"] and "MTUBytes=9000\n" in link["content"]
    assert "Name=ens1f0\n" in link["content"] and link["mode"] == "0644"
    netplan = rdma_config.mtu_plan("Debian", "ens1f0", 9000, netplan=True)["files"][0]
    assert netplan["mode"] == "0600"
    assert "ethernets:\n    ens1f0:\n      mtu: 9000\n" in netplan["content"]
    nm = rdma_config.mtu_plan("RedHat", "ens1f0", 9000, nm_connection="ens1f0")
    assert nm["check"] == ["nmcli", "-g", "802-3-ethernet.mtu", "connection", "show", "ens1f0"]
    assert nm["nmcli_value"] == "9000"


@pytest.mark.parametrize("kwargs, error", [
    ({"backend": "networkmanager"}, "no connection"),
    ({"backend": "networkd"}, "does not manage"),
    ({"backend": "link"}, "no MAC"),
    ({"backend": "ifupdown"}, "must be one of"),
])
def test_mtu_plan_errors(kwargs, error):
    assert error in rdma_config.mtu_plan("Debian", "ens1f0", 9000, **kwargs)["error"]


@pytest.mark.parametrize("text, name", [
    ("System ens1f0\n", "System ens1f0"), ("\n", None), ("", None)])
def test_nmcli_connection(text, name):
    assert rdma_config.nmcli_connection(text) == name


def test_networkctl_network_file():
    text = ("● 2: ens1f0\n                     Link File: /usr/lib/systemd/network/99-default.link\n"
            "                  Network File: /etc/systemd/network/10-ens1f0.network\n")
    assert rdma_config.networkctl_network_file(text) == "/etc/systemd/network/10-ens1f0.network"
    assert rdma_config.networkctl_network_file("  Network File: n/a\n") is None
