#!/usr/bin/python
# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: roce_health
short_description: Check RDMA / RoCE ports, GIDs, MTU and PFC on a node and derive NCCL settings
version_added: 0.2.0
description:
  - Reads C(/sys/class/infiniband/*/ports/*) (state, physical state, link layer, rate, GID table with
    types and netdevs), C(/sys/bus/pci/devices) (Mellanox NICs, vendor 0x15b3), and C(ip -j addr) /
    C(ip -j route show default) to map the fabric interface to its IPv4 address.
  - Runs C(ibv_devinfo) for the ports' C(active_mtu) and C(mlnx_qos -i <netdev>) for PFC, each only
    where the binary exists. Without C(ibv_devinfo) the RoCE active MTU is derived from the netdev MTU
    the way the kernel does (MTU less 96 bytes of RoCE headers, rounded down to an IB MTU).
  - Returns the verdict shape shared by the health modules (RV(healthy), RV(problems) with stable codes)
    plus the derived RV(nccl_conf) to write to C(/etc/nccl.conf).
  - A node without RDMA hardware is reported with the code C(NO_RDMA) at O(no_rdma_severity), never a
    traceback.
options:
  fabric_interface:
    description:
      - The interface that carries training traffic between nodes.
      - Default is the netdev of the first RoCE port that has an IPv4 address, else of the first RDMA
        port, else the interface of the default route.
    type: str
  nccl_ib_gid_index:
    description:
      - The C(NCCL_IB_GID_INDEX) the jobs will use, to check against this node's GID table. Unset, empty
        or V(-1) means NCCL chooses (NCCL 2.21 and later) and is not checked.
    type: raw
  nccl_socket_ifname:
    description:
      - The C(NCCL_SOCKET_IFNAME) the jobs will use (NCCL syntax, comma list of prefixes, C(^) to
        exclude, C(=) for exact names), checked against this node's interfaces.
    type: str
  gloo_socket_ifname:
    description:
      - The C(GLOO_SOCKET_IFNAME) the jobs will use. Gloo takes concrete interface names (comma
        separated); NCCL's C(^) and prefix syntax is an error.
    type: str
  nccl_net:
    description:
      - The C(NCCL_NET) the jobs will use. V(Socket) on a node with RDMA hardware is reported.
    type: str
  nccl_ib_hca:
    description:
      - The C(NCCL_IB_HCA) the jobs will use (C(mlx5_0:1,mlx5_1), C(^) to exclude, C(=) for exact names). A port
        it selects is part of the fabric, so that port being down is an error even without an IP address.
      - Without it, a down port is still an error when its link is trained, it has an IPv4 address, it is the
        fabric interface's, or (InfiniBand) the same port number is ACTIVE on the node's other InfiniBand HCAs.
    type: str
    version_added: 0.3.0
  min_mtu:
    description:
      - Lowest acceptable RoCE C(active_mtu) in bytes (an IB MTU 256, 512, 1024, 2048 or 4096).
      - 4096 is what a RoCE fabric with jumbo frames (netdev MTU 9000) runs at; a netdev MTU of 1500
        gives 1024 (Linux C(include/rdma/ib_addr.h) C(iboe_get_mtu)).
    type: int
    default: 4096
  no_rdma_severity:
    description:
      - Severity of C(NO_RDMA) (no RDMA device and no Mellanox NIC). V(warning) by default so that CPU
        test nodes report it; make it V(error) where every node must have RDMA.
    type: str
    choices: [error, warning, info]
    default: warning
  sysfs_root:
    description:
      - Root of the sysfs tree to read; tests point it at a copy.
    type: path
    default: /sys
author:
  - ddp.cluster maintainers (@ddp-cluster)
extends_documentation_fragment:
  - ddp.cluster.health
  - ddp.cluster.health.read_only
notes:
  - C(mlnx_qos) usually needs root; run the task with C(become) to get the PFC check.
"""

EXAMPLES = r"""
- name: Check RoCE and derive the NCCL settings
  ddp.cluster.roce_health:
    nccl_socket_ifname: "{{ ddp_nccl_socket_ifname | default(omit) }}"
  become: true
  register: roce

- name: Check a forced GID index without failing the play
  ddp.cluster.roce_health:
    fabric_interface: ens1f0
    nccl_ib_gid_index: 3
    fail_on: never
  register: roce_report

- name: Show the settings for /etc/nccl.conf
  ansible.builtin.debug:
    var: roce.nccl_conf
"""

RETURN = r"""
healthy:
  description: True when no problem has severity C(error).
  returned: always
  type: bool
  sample: true
problems:
  description: Problems found, errors first. Codes are listed in docs/troubleshooting.md.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "ROCE_GID_LINK_LOCAL", "severity": "error", "subject": "NCCL_IB_GID_INDEX",
            "message": "NCCL_IB_GID_INDEX=1 is the link-local GID fe80::ac0:ebff:fe00:1 (RoCE v2) ...",
            "fix": "set NCCL_IB_GID_INDEX=3 ..."}]
devices:
  description: RDMA devices and their ports.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
            "link_layer": "Ethernet", "rate": "100 Gb/sec (4X EDR)", "netdev": "ens1f0", "netdev_mtu": 9000,
            "active_mtu": 4096, "active_mtu_source": "netdev_mtu", "ipv4": "192.0.2.10",
            "recommended_gid_index": 3,
            "gids": [{"index": 3, "gid": "0000:0000:0000:0000:0000:ffff:c000:020a", "type": "RoCE v2",
                      "version": 2, "ipv4": "192.0.2.10", "link_local": false, "ndev": "ens1f0"}]}]}]
mellanox_nics:
  description: Mellanox (NVIDIA networking) PCI network functions, sorted by address.
  returned: always
  type: list
  elements: dict
  sample: [{"address": "0000:3b:00.0", "device_id": "0x101b", "class": "0x020000"}]
nccl_conf:
  description:
    - Derived NCCL settings for C(/etc/nccl.conf); only keys that could be worked out are present.
    - C(NCCL_IB_HCA) lists the ACTIVE ports (RoCE ports only with a RoCE v2 IPv4 GID), with a leading
      C(=) when a name is a prefix of another device on the node. C(NCCL_IB_GID_INDEX) is present only
      when every listed RoCE port has its IPv4 RoCE v2 GID at the same index. C(NCCL_SOCKET_IFNAME) is
      the fabric interface.
  returned: always
  type: dict
  sample: {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "ens1f0"}
fabric_interface:
  description: The fabric interface used for the checks (given or chosen).
  returned: always
  type: str
  sample: ens1f0
fabric_ipv4:
  description: The fabric interface's IPv4 address, or null when it has none.
  returned: always
  type: str
  sample: 192.0.2.10
fabric_speed_mbps:
  description:
    - The fabric interface's link speed in Mb/s, from C(/sys/class/net/<if>/speed) (the negotiated speed of a NIC;
      virtual interfaces report a nominal one, a veth 10000); null when the link is down or reports none.
    - The health stage derives its default bus bandwidth floor from it on socket fabrics (C(plugins/module_utils/nccl/floors.py)).
  returned: always
  type: int
  sample: 100000
fabric_virtual:
  description:
    - True when the fabric interface has no device behind it (no C(/sys/class/net/<if>/device) - a veth, bridge, bond
      or tunnel), so its speed is nominal; null when there is no fabric interface.
    - The health stage then bounds its sockets floor by plain TCP measured between the nodes (C(plugins/module_utils/nccl/floors.py)).
  returned: always
  type: bool
  sample: false
qos:
  description: Parsed C(mlnx_qos -i) per RoCE netdev, where it ran.
  returned: always
  type: dict
  sample: {"ens1f0": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0], "pfc_enabled": [3]}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import (
    FAIL_ON_CHOICES, result, should_fail, summary)
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.health_io import gather_roce
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.roce_health import (
    NO_RDMA_SEVERITIES, diagnose, nccl_settings, recommend_gid_index)


# ------------------------------------------------------------------ I/O edge

def gather(module, params):
    """Everything read from the node (module_utils.health_io, shared with the node command)."""
    return gather_roce(module, params)


# ------------------------------------------------------------------ orchestration

def devices_view(facts):
    """Ports grouped by device, with the per-port IPv4 and recommended GID index."""
    interfaces = facts.get("interfaces") or {}
    devices = {}
    order = []
    for port in facts.get("ports") or []:
        name = port["device"]
        if name not in devices:
            devices[name] = {"name": name, "pci_address": port.get("pci_address"), "ports": []}
            order.append(name)
        ipv4_list = (interfaces.get(port.get("netdev") or "") or {}).get("ipv4") or []
        ipv4 = ipv4_list[0] if ipv4_list else None
        view = dict((k, v) for k, v in port.items() if k not in ("device", "pci_address"))
        view["ipv4"] = ipv4
        view["recommended_gid_index"] = recommend_gid_index(port.get("gids"), ipv4) \
            if port.get("link_layer") == "Ethernet" else None
        devices[name]["ports"].append(view)
    return [devices[name] for name in order]


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            fabric_interface=dict(type="str"),
            nccl_ib_gid_index=dict(type="raw"),
            nccl_socket_ifname=dict(type="str"),
            gloo_socket_ifname=dict(type="str"),
            nccl_net=dict(type="str"),
            nccl_ib_hca=dict(type="str"),
            min_mtu=dict(type="int", default=4096),
            no_rdma_severity=dict(type="str", choices=list(NO_RDMA_SEVERITIES), default="warning"),
            fail_on=dict(type="str", choices=list(FAIL_ON_CHOICES), default="error"),
            sysfs_root=dict(type="path", default="/sys"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    if params["min_mtu"] <= 0:
        module.fail_json(msg="min_mtu must be a positive number of bytes (4096 for RoCE with jumbo frames)")
    facts = gather(module, params)
    problems = diagnose(facts, params)
    res = result(problems,
                 devices=devices_view(facts),
                 mellanox_nics=facts["mellanox_nics"],
                 nccl_conf=nccl_settings(facts),
                 fabric_interface=facts["fabric_interface"],
                 fabric_ipv4=facts["fabric_ipv4"],
                 fabric_speed_mbps=facts["fabric_speed_mbps"],
                 fabric_virtual=facts.get("fabric_virtual"),
                 qos=facts["qos"])
    if should_fail(problems, params["fail_on"]):
        module.fail_json(msg=summary(res["problems"]), changed=False, **res)
    module.exit_json(changed=False, **res)


if __name__ == "__main__":
    main()
