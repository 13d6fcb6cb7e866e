# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The all-reduce bus bandwidth floor the health stage applies by default, from what every node's fabric can carry.

An explicit floor (``ddp_health_min_busbw_gbps``) wins; ``0`` turns the floor off. Otherwise, from each node's
``roce_health`` result (its RDMA ports and the fabric interface's link speed), on the slowest node:

* **NCCL over RDMA** (every node has GPUs and active RDMA ports): ``rdma_fraction`` x the rate of the node's active
  RDMA ports its ranks use (NCCL gives each rank its nearest HCA: with one rank per node, the health stage's default,
  one port; with a rank per GPU, every rail). Default 0.25. Sources: NVSentinel's preflight
  multi-node floor, 100 GB/s at 4 GB on 8 x 400 Gb/s per node (400 GB/s), is 0.25 of line rate; at the quick tier's
  largest size (16 MiB, where the floor is judged), healthy clusters reach more: DeepOps' 4-node DGX A100
  (8 x HDR 200 Gb/s = 200 GB/s per node) 85 GB/s = 0.43, 2-node 104 GB/s = 0.52 (``nccl-tests all_reduce_perf``
  outputs, tests/unit/fixtures/nccl). An untuned fabric falls below it: the 2-node H200 run with
  ``NCCL_IB_DISABLE=1`` (sockets on one NIC) reached 73 GB/s at 16 MiB, 0.18 of its 8 x 400 Gb/s.
* **Sockets** (Gloo on CPU nodes, or nodes without RDMA): ``tcp_fraction`` x what the network carries: the fabric
  interface's link speed (``/sys/class/net/<if>/speed``, on the slowest node). Where that speed means nothing (a
  virtual fabric interface, ``roce_health``'s ``fabric_virtual``: veth reports 10 Gb/s whatever it carries; or no
  speed at all) and the health stage measured plain TCP between the nodes in the same run (``tcp_probe``
  ``measure_mib``: each node sends to the next one of the ring), the measured throughput, when lower, is the base
  instead (the upper median over the ring's links, so that one slow node, which the floor is there to catch, does not
  lower it). A negotiated NIC speed is not replaced: one short stream over the probe's (management) addresses says
  less about the fabric than the NIC does. Default 0.05, ours: Gloo's all-reduce is bound by the CPU
  long before the link on small hosts; the slowest healthy run measured here (6 local nodes on 2 shared cores,
  10 Gb/s veth) reached 0.12 GB/s, 0.10 of the link, and a port capped at 300 Mb/s (``tc tbf``) holds a ring below
  0.0375 GB/s, 0.03.

Units: rates and speeds in Gb/s (1e9 bit/s) as the kernel reports them; floors in GB/s (1e9 byte/s) as busbw is
(nccl-tests doc/PERFORMANCE.md). A node without a known capacity leaves the cluster without a derived floor (said).
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import fraction

RDMA_FRACTION = 0.25
TCP_FRACTION = 0.05


def _active(port):
    return port.get("state") == "ACTIVE" and port.get("phys_state") in (None, "LinkUp")


def node_capacity(roce):
    """What one node's fabric can carry.

    :param roce: the node's ``roce_health`` result (``devices`` with ``ports``, ``fabric_interface``,
        ``fabric_speed_mbps``), or None when it did not run.
    :returns: ``{"rdma_gbps": sum of the active ports' rates or None, "rdma_ports": their count, "rdma_port_gbps":
        the slowest one's rate, "rdma": "mlx5_0/1 100 Gb/s, ...", "ethernet_gbps": float or None, "ethernet":
        "eth0 10000 Mb/s"}`` (Gb/s).
    """
    out = {"rdma_gbps": None, "rdma_ports": 0, "rdma_port_gbps": None, "rdma": None, "ethernet_gbps": None,
           "ethernet": None, "virtual": False}
    if not isinstance(roce, dict):
        return out
    ports = [(d.get("name"), p) for d in roce.get("devices") or [] for p in d.get("ports") or []
             if _active(p) and (p.get("rate_gbps") or 0) > 0]
    if ports:
        out["rdma_ports"] = len(ports)
        out["rdma_port_gbps"] = float(min(p["rate_gbps"] for _d, p in ports))
        out["rdma_gbps"] = float(sum(p["rate_gbps"] for _d, p in ports))
        out["rdma"] = ", ".join("%s/%s %g Gb/s" % (d, p.get("port"), p["rate_gbps"]) for d, p in ports)
    speed = roce.get("fabric_speed_mbps")
    if isinstance(speed, (int, float)) and not isinstance(speed, bool) and speed > 0:
        out["ethernet_gbps"] = speed / 1000.0
        out["ethernet"] = "%s %d Mb/s" % (roce.get("fabric_interface") or "?", speed)
    out["virtual"] = roce.get("fabric_virtual") is True
    return out


def busbw_floor(per_node, explicit=None, rdma_fraction=RDMA_FRACTION, tcp_fraction=TCP_FRACTION, ranks_per_node=1):
    """The floor for the all-node all-reduce.

    :param per_node: ``{node: {"gpus": int (NVIDIA GPUs), "roce": roce_health result or None, "tcp_gbps": GB/s this
        node sent to the next one in the same run, or None}}``: the nodes that run the all-reduce (not the ones left
        out).
    :param explicit: the operator's floor in GB/s (None: derive one; 0: no floor).
    :param ranks_per_node: processes per node in the all-reduce: NCCL gives each rank its nearest HCA, so with fewer
        ranks than HCAs only ``ranks_per_node`` of them carry traffic (counted at the slowest port's rate).
    :returns: ``{"floor_gbps": GB/s or None, "source": "explicit" | "rdma" | "ethernet" | "tcp" | "off" | "unknown",
        "why": one sentence, "nodes": {node: node_capacity(...)}}``.
    :raises ValueError: a fraction outside (0, 1], a negative explicit floor, a malformed node entry.
    """
    rdma_fraction = fraction(rdma_fraction, "rdma_fraction")
    tcp_fraction = fraction(tcp_fraction, "tcp_fraction")
    if not isinstance(per_node, dict):
        raise ValueError("per_node must be a dict of node -> {gpus, roce}, got %s" % type(per_node).__name__)
    nodes = {}
    gpus = {}
    for node in sorted(per_node):
        entry = per_node[node]
        if not isinstance(entry, dict):
            raise ValueError("the entry of %s must be a dict with gpus and roce, got %r" % (node, entry))
        nodes[node] = node_capacity(entry.get("roce"))
        gpus[node] = int(entry.get("gpus") or 0)
        tcp = entry.get("tcp_gbps")
        if tcp is not None and (isinstance(tcp, bool) or not isinstance(tcp, (int, float)) or tcp < 0):
            raise ValueError("tcp_gbps of %s must be a number of GB/s >= 0, got %r" % (node, tcp))
        # 0 (a transfer too slow to show at the probe's precision) counts as not measured
        nodes[node]["tcp_gbps"] = float(tcp) if tcp else None
    out = {"floor_gbps": None, "source": "unknown", "why": "", "nodes": nodes}
    if explicit is not None:
        floor = float(explicit)
        if floor < 0:
            raise ValueError("the explicit floor must be >= 0 GB/s, got %r" % explicit)
        out.update(floor_gbps=floor or None, source="explicit" if floor else "off",
                   why="ddp_health_min_busbw_gbps=%g%s" % (floor, "" if floor else " (no floor)"))
        return out
    if not nodes:
        out["why"] = "no node to derive a floor from"
        return out
    ranks = int(ranks_per_node)
    if ranks < 1:
        raise ValueError("ranks_per_node must be >= 1, got %r" % ranks_per_node)
    if all(gpus[n] > 0 and nodes[n]["rdma_gbps"] for n in nodes):
        for cap in nodes.values():
            used = min(ranks, cap["rdma_ports"])
            cap["rdma_used_gbps"] = cap["rdma_gbps"] if used == cap["rdma_ports"] else used * cap["rdma_port_gbps"]
        slowest = min(nodes, key=lambda n: nodes[n]["rdma_used_gbps"])
        cap = nodes[slowest]
        line = cap["rdma_used_gbps"]
        out.update(floor_gbps=round(rdma_fraction * line / 8.0, 4), source="rdma",
                   why="%g x %g Gb/s, the RDMA ports %d rank(s) per node use on %s, the slowest node (%s), / 8 bits"
                   % (rdma_fraction, line, ranks, slowest, cap["rdma"]))
        return out
    sockets = "Gloo on CPU nodes" if not any(gpus.values()) else "not every node has GPUs and active RDMA ports"
    measured = sorted(nodes[n]["tcp_gbps"] for n in nodes if nodes[n]["tcp_gbps"])
    tcp = measured[len(measured) // 2] if len(measured) == len(nodes) else None
    missing = sorted(n for n in nodes if not nodes[n]["ethernet_gbps"])
    if missing and tcp is None:
        out["why"] = "no link speed known on %s (no fabric interface, or a virtual one without speed)" % ", ".join(missing)
        return out
    if not missing:
        slowest = min(nodes, key=lambda n: nodes[n]["ethernet_gbps"])
        line = nodes[slowest]["ethernet_gbps"] / 8.0
        if tcp is None or line <= tcp or not any(nodes[n]["virtual"] for n in nodes):
            out.update(floor_gbps=round(tcp_fraction * line, 4), source="ethernet",
                       why="%g x the %s link of %s, the slowest node, / 8 bits (sockets: %s)%s"
                       % (tcp_fraction, nodes[slowest]["ethernet"], slowest, sockets,
                          "" if tcp is None else "; plain TCP between the nodes carried %.4g GB/s" % tcp))
            return out
    out.update(floor_gbps=round(tcp_fraction * tcp, 4), source="tcp",
               why="%g x %.4g GB/s, the plain TCP throughput measured between the nodes in this run (upper median of "
                   "%d ring links: %s)%s (sockets: %s)"
               % (tcp_fraction, tcp, len(measured), ", ".join("%.4g" % v for v in measured),
                  "" if missing else ", below the nominal speed of the virtual %s link" % nodes[slowest]["ethernet"],
                  sockets))
    return out


# nccl-tests on one node of 8 SXM GPUs (NVLink/NVSwitch), at sizes of 1 GiB and more: OCI's active health check
# floors (oracle-quickstart/oci-hpc healthchecks: A100 185 GB/s, H100/H200 440 GB/s, "Avg bus bandwidth" over 1-10/16
# GiB); measured 235 GB/s on 8 x A100-SXM4-40GB at 8 GiB (tests/unit/fixtures/nccl). Other shapes get no default.
SINGLE_NODE_FLOORS = ((r"H100|H200", 440.0), (r"A100", 185.0))
SINGLE_NODE_MIN_BYTES = 1 << 30
# Across nodes the quick tier's fraction of line rate is judged from 16 MiB on (as for the torch all-reduce).
MULTI_NODE_MIN_BYTES = 16 << 20


def nccl_tests_floor(parsed, roce=None, explicit=None, rdma_fraction=RDMA_FRACTION):
    """The default busbw floor of an nccl-tests run, from the hardware it ran on, like the torch mode's.

    :param parsed: ``nccl_parsers.parse_nccl_tests`` output (its ``devices``, ``hosts``, ``results``).
    :param roce: this node's ``roce_health``-shaped result (``devices`` with ``ports``), for runs across nodes (every
        node is taken to have the same fabric as this one).
    :param explicit: the operator's floor in GB/s (wins; 0 turns it off).
    :returns: ``{"floor_gbps": GB/s or None, "source": "explicit"|"off"|"rdma"|"nvlink"|"unknown", "why": str}``.
    """
    if explicit is not None:
        floor = float(explicit)
        return {"floor_gbps": floor or None, "source": "explicit" if floor else "off",
                "why": "min_busbw_gbps=%g" % floor}
    results = parsed.get("results") or []
    largest = max((r["bytes"] for r in results), default=0)
    hosts = parsed.get("hosts") or []
    devices = parsed.get("devices") or []
    if len(hosts) > 1:
        if largest < MULTI_NODE_MIN_BYTES:
            return {"floor_gbps": None, "source": "unknown",
                    "why": "the largest size (%d bytes) is below 16 MiB: no default floor" % largest}
        per_node = max(1, len(devices) // len(hosts))
        derived = busbw_floor({"node": {"gpus": per_node, "roce": roce}}, None, rdma_fraction=rdma_fraction,
                              ranks_per_node=per_node)
        if derived["source"] == "rdma":
            return {"floor_gbps": derived["floor_gbps"], "source": "rdma",
                    "why": "%d nodes, %d ranks each: %s" % (len(hosts), per_node, derived["why"])}
        return {"floor_gbps": None, "source": "unknown",
                "why": "no active RDMA port on this node to derive a floor from (%s)" % (derived["why"] or "sockets")}
    names = sorted(set(d.get("name") or "" for d in devices))
    if len(devices) == 8 and len(names) == 1 and largest >= SINGLE_NODE_MIN_BYTES:
        for pattern, floor in SINGLE_NODE_FLOORS:
            if re.search(pattern, names[0]) and re.search(r"SXM|HBM3|H200", names[0]):
                return {"floor_gbps": floor, "source": "nvlink",
                        "why": "8 x %s on one node at %d bytes: OCI's floor %g GB/s" % (names[0], largest, floor)}
    return {"floor_gbps": None, "source": "unknown",
            "why": "no default floor for %d x %s on one node at %d bytes (8 SXM A100/H100/H200 at >= 1 GiB have one)"
                   % (len(devices), ", ".join(names) or "unknown GPUs", largest)}
