"""roce_health through its I/O edge: a fake sysfs tree under tmp_path, commands stubbed."""
from __future__ import annotations

import json

import pytest

from ansible.module_utils.basic import AnsibleModule
from module_args import patch_module_args
from ansible_collections.ddp.cluster.plugins.modules import roce_health as mod

IP_ADDR = json.dumps([
    {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP"], "mtu": 65536,
     "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifindex": 2, "ifname": "eno1", "flags": ["UP"], "mtu": 1500,
     "addr_info": [{"family": "inet", "local": "198.51.100.7", "prefixlen": 24}]},
    {"ifindex": 4, "ifname": "ens1f0", "flags": ["UP", "LOWER_UP"], "mtu": 9000,
     "addr_info": [{"family": "inet", "local": "192.0.2.10", "prefixlen": 24}]},
])
IP_ROUTE = json.dumps([{"dst": "default", "gateway": "198.51.100.1", "dev": "eno1"}])


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def roce_tree(root, gid_index=3, pfc=None):
    """One ConnectX-6 function with one RoCE port; its IPv4 RoCE v2 GID at ``gid_index``."""
    pci = root / "bus" / "pci" / "devices" / "0000:3b:00.0"
    write(pci / "vendor", "0x15b3\n")
    write(pci / "device", "0x101b\n")
    write(pci / "class", "0x020000\n")
    port = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    write(port / "state", "4: ACTIVE\n")
    write(port / "phys_state", "5: LinkUp\n")
    write(port / "link_layer", "Ethernet\n")
    write(port / "rate", "100 Gb/sec (4X EDR)\n")
    gids = {0: ("fe80:0000:0000:0000:0ac0:ebff:fe00:0001", "IB/RoCE v1"),
            1: ("fe80:0000:0000:0000:0ac0:ebff:fe00:0001", "RoCE v2"),
            gid_index - 1: ("0000:0000:0000:0000:0000:ffff:c000:020a", "IB/RoCE v1"),
            gid_index: ("0000:0000:0000:0000:0000:ffff:c000:020a", "RoCE v2")}
    for index in range(gid_index + 3):
        gid, gtype = gids.get(index, ("0000:0000:0000:0000:0000:0000:0000:0000", None))
        write(port / "gids" / str(index), gid + "\n")
        if gtype:  # the kernel answers EINVAL for the type of an unset GID: leave the file out
            write(port / "gid_attrs" / "types" / str(index), gtype + "\n")
            write(port / "gid_attrs" / "ndevs" / str(index), "ens1f0\n")
    net = root / "class" / "infiniband" / "mlx5_0" / "device" / "net" / "ens1f0"
    write(net / "mtu", "9000\n")
    write(net / "operstate", "up\n")
    write(net / "dev_port", "0\n")
    return root


def run_module(args, monkeypatch, capsys, tools=None):
    """Run main() with ``tools``: {binary: {argv-tail-tuple: (rc, stdout)}}; others are absent."""
    tools = tools or {}
    monkeypatch.setattr(AnsibleModule, "get_bin_path",
                        lambda module, name, required=False, opt_dirs=None: "/usr/bin/" + name if name in tools else None)

    def fake_run(module, argv, **kwargs):
        assert kwargs.get("environ_update") == {"LC_ALL": "C", "LANG": "C"}
        name = argv[0].rsplit("/", 1)[-1]
        return tools[name].get(tuple(argv[1:]), (1, "")) + ("",)
    monkeypatch.setattr(AnsibleModule, "run_command", fake_run)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            mod.main()
    return json.loads(capsys.readouterr().out)


IP_TOOLS = {"ip": {("-j", "addr", "show"): (0, IP_ADDR), ("-j", "route", "show", "default"): (0, IP_ROUTE)}}


def test_empty_sysfs_reports_no_rdma(tmp_path, monkeypatch, capsys):
    out = run_module({"sysfs_root": str(tmp_path)}, monkeypatch, capsys)
    assert not out.get("failed")
    assert [(p["code"], p["severity"]) for p in out["problems"]] == [("NO_RDMA", "warning")]
    assert out["healthy"] is True
    assert out["devices"] == [] and out["mellanox_nics"] == [] and out["changed"] is False


def test_empty_sysfs_no_rdma_as_error_fails(tmp_path, monkeypatch, capsys):
    out = run_module({"sysfs_root": str(tmp_path), "no_rdma_severity": "error"}, monkeypatch, capsys, IP_TOOLS)
    assert out["failed"] is True
    assert "[NO_RDMA]" in out["msg"]
    assert out["fabric_interface"] == "eno1" and out["fabric_ipv4"] == "198.51.100.7"
    assert out["nccl_conf"] == {"NCCL_SOCKET_IFNAME": "eno1"}


def test_empty_sysfs_with_real_commands(tmp_path, capsys):
    """No stubs: whatever ip/ibv_devinfo this machine has, an empty tree gives NO_RDMA, not a traceback."""
    with patch_module_args({"sysfs_root": str(tmp_path)}):
        with pytest.raises(SystemExit):
            mod.main()
    out = json.loads(capsys.readouterr().out)
    assert [p["code"] for p in out["problems"] if p["code"].startswith(("NO_RDMA", "ROCE"))] == ["NO_RDMA"]


def test_mellanox_nic_without_rdma_device_fails(tmp_path, monkeypatch, capsys):
    """C05 through the module: NIC on the bus, /sys/class/infiniband absent."""
    pci = tmp_path / "bus" / "pci" / "devices" / "0000:3b:00.0"
    write(pci / "vendor", "0x15b3\n")
    write(pci / "device", "0x101b\n")
    write(pci / "class", "0x020000\n")
    out = run_module({"sysfs_root": str(tmp_path), "nccl_net": "Socket"}, monkeypatch, capsys, IP_TOOLS)
    assert out["failed"] is True
    assert sorted(p["code"] for p in out["problems"]) == ["ROCE_NCCL_NET_SOCKET", "ROCE_NIC_WITHOUT_RDMA_DEVICE"]


@pytest.mark.parametrize("gid_index", [3, 7])
def test_one_roce_port_gives_nccl_conf(tmp_path, monkeypatch, capsys, gid_index):
    out = run_module({"sysfs_root": str(roce_tree(tmp_path, gid_index))}, monkeypatch, capsys, IP_TOOLS)
    assert not out.get("failed"), out
    assert out["problems"] == [] and out["healthy"] is True
    assert out["nccl_conf"] == {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": str(gid_index),
                                "NCCL_SOCKET_IFNAME": "ens1f0"}
    assert (out["fabric_interface"], out["fabric_ipv4"]) == ("ens1f0", "192.0.2.10")
    [dev] = out["devices"]
    assert dev["name"] == "mlx5_0"
    [port] = dev["ports"]
    assert (port["state"], port["phys_state"], port["link_layer"], port["netdev"]) == ("ACTIVE", "LinkUp", "Ethernet", "ens1f0")
    assert (port["active_mtu"], port["active_mtu_source"], port["recommended_gid_index"]) == (4096, "netdev_mtu", gid_index)
    assert [g["index"] for g in port["gids"]] == [0, 1, gid_index - 1, gid_index]
    assert out["mellanox_nics"][0]["address"] == "0000:3b:00.0"


def test_one_roce_port_checks_gid_mtu_and_pfc(tmp_path, monkeypatch, capsys):
    tools = dict(IP_TOOLS)
    verbs = ("hca_id:\tmlx5_0\n\tDevice ports:\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
             "\t\t\tactive_mtu:\t\t1024 (3)\n\t\t\tlink_layer:\t\tEthernet\n")
    qos = ("Priority trust state: pcp\nPFC configuration:\n"
           "\tpriority    0   1   2   3   4   5   6   7\n"
           "\tenabled     0   0   0   0   0   0   0   0\n")
    tools["ibv_devinfo"] = {(): (0, verbs)}
    tools["mlnx_qos"] = {("-i", "ens1f0"): (0, qos)}
    out = run_module({"sysfs_root": str(roce_tree(tmp_path, 7)), "nccl_ib_gid_index": "1", "fail_on": "never"},
                     monkeypatch, capsys, tools)
    assert not out.get("failed")
    assert sorted((p["code"], p["severity"]) for p in out["problems"]) == [
        ("ROCE_GID_LINK_LOCAL", "error"), ("ROCE_MTU_LOW", "warning"), ("ROCE_PFC_DISABLED", "warning")]
    assert out["healthy"] is False
    assert out["devices"][0]["ports"][0]["active_mtu_source"] == "ibv_devinfo"
    assert out["qos"]["ens1f0"]["trust"] == "pcp"


def test_bad_min_mtu(tmp_path, monkeypatch, capsys):
    out = run_module({"sysfs_root": str(tmp_path), "min_mtu": 0}, monkeypatch, capsys)
    assert out["failed"] is True and "min_mtu" in out["msg"]
