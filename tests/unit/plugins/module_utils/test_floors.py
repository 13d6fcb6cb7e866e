"""floors: the default all-reduce floor from real fabric facts, and its fractions against real nccl-tests outputs."""
from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.nccl import floors
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import parse_nccl_tests
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import parse_sysfs_ib
from ansible_collections.ddp.cluster.plugins.modules.roce_health import devices_view

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
MIB16 = 16777216


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


VETH = json.loads(fixture("floors", "roce_health_ddp-mol1_veth-10000_no-rdma.json"))


def edr_node():
    """A roce_health result with the 8 EDR HCAs of gcm's sysfs capture (one reports a lower rate)."""
    ports = parse_sysfs_ib(json.loads(fixture("rdma", "sysfs-ib-learned-state_bad-rate__facebookresearch-gcm.json")))
    return {"devices": devices_view({"ports": ports, "interfaces": {}}), "fabric_interface": "ib0",
            "fabric_speed_mbps": None}


def busbw_at(name, size=MIB16):
    rows = parse_nccl_tests(fixture("nccl", name))["results"]
    return [r for r in rows if r["bytes"] == size][0]["out_of_place"]["busbw_gbps"]


def test_local_cluster_cpu_nodes_get_the_socket_floor():
    out = floors.busbw_floor({"ddp-mol1": {"gpus": 0, "roce": VETH}, "ddp-mol2": {"gpus": 0, "roce": VETH}})
    assert (out["source"], out["floor_gbps"]) == ("ethernet", 0.0625)  # 0.05 x 10 Gb/s / 8
    assert out["why"] == "0.05 x the eth0 10000 Mb/s link of ddp-mol1, the slowest node, / 8 bits (sockets: Gloo on CPU nodes)"


def test_gpu_nodes_with_rdma_get_the_line_rate_floor():
    node = edr_node()
    cap = floors.node_capacity(node)
    rates = [p["rate_gbps"] for d in node["devices"] for p in d["ports"] if p["state"] == "ACTIVE"]
    assert cap["rdma_gbps"] == sum(rates) and len(rates) == 8
    slow = copy.deepcopy(node)
    slow["devices"][0]["ports"][0]["state"] = "DOWN"  # one rail down on the second node
    out = floors.busbw_floor({"a": {"gpus": 8, "roce": node}, "b": {"gpus": 8, "roce": slow}}, ranks_per_node=8)
    assert out["source"] == "rdma" and out["floor_gbps"] == round(0.25 * (cap["rdma_gbps"] - rates[0]) / 8, 4)
    assert out["why"].startswith("0.25 x %g Gb/s, the RDMA ports 8 rank(s) per node use on b" % (cap["rdma_gbps"] - rates[0]))
    # One rank per node (the health stage's default) drives one HCA: the floor is a quarter of one port.
    one = floors.busbw_floor({"a": {"gpus": 8, "roce": node}, "b": {"gpus": 8, "roce": slow}})
    assert one["floor_gbps"] == round(0.25 * min(rates) / 8, 4) and "1 rank(s) per node" in one["why"]
    with pytest.raises(ValueError, match="ranks_per_node"):
        floors.busbw_floor({"a": {"gpus": 8, "roce": node}}, ranks_per_node=0)


def test_rdma_without_gpus_is_judged_as_sockets():
    """Gloo on CPU nodes does not use the HCAs: the link speed decides, and a node without one leaves no floor."""
    node = edr_node()
    out = floors.busbw_floor({"a": {"gpus": 0, "roce": node}, "b": {"gpus": 0, "roce": VETH}})
    assert out["source"] == "unknown" and out["floor_gbps"] is None and "no link speed known on a" in out["why"]
    node["fabric_speed_mbps"] = 100000
    out = floors.busbw_floor({"a": {"gpus": 0, "roce": node}, "b": {"gpus": 0, "roce": VETH}})
    assert out["source"] == "ethernet" and out["floor_gbps"] == 0.0625  # the slower node b


@pytest.mark.parametrize("explicit, source, floor", [(1.5, "explicit", 1.5), (0, "off", None), ("0.2", "explicit", 0.2)])
def test_an_explicit_floor_wins(explicit, source, floor):
    out = floors.busbw_floor({"a": {"gpus": 8, "roce": edr_node()}}, float(explicit))
    assert (out["source"], out["floor_gbps"]) == (source, floor)


def test_a_node_that_was_not_checked_leaves_no_floor():
    out = floors.busbw_floor({"a": {"gpus": 0, "roce": VETH}, "b": {"gpus": 0, "roce": None}})
    assert out["floor_gbps"] is None and out["why"].startswith("no link speed known on b")


@pytest.mark.parametrize("kwargs, message", [
    ({"explicit": -1}, "must be >= 0"), ({"rdma_fraction": 0}, "rdma_fraction"), ({"tcp_fraction": 2}, "tcp_fraction"),
])
def test_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        floors.busbw_floor({"a": {"gpus": 0, "roce": VETH}}, **kwargs)
    with pytest.raises(ValueError, match="must be a dict"):
        floors.busbw_floor({"a": []})


def test_the_rdma_fraction_passes_healthy_clusters_and_fails_an_untuned_one():
    """At 16 MiB (the quick tier's largest size) on real nccl-tests runs: 8 x HDR 200 Gb/s DGX A100 nodes pass
    0.25 of their line rate; 8 x H200 nodes on sockets (NCCL_IB_DISABLE=1) fall below 0.25 of 8 x 400 Gb/s."""
    def floor(rate_gbps, count):
        ports = [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": rate_gbps}]
        roce = {"devices": [{"name": "mlx5_%d" % i, "ports": ports} for i in range(count)]}
        return floors.busbw_floor({"a": {"gpus": 8, "roce": roce}, "b": {"gpus": 8, "roce": roce}},
                                  ranks_per_node=8)["floor_gbps"]  # nccl-tests ran a rank per GPU, 8 per node
    assert floor(200, 8) == 50.0
    assert busbw_at("nccl-tests_all_reduce_perf_2node-DGX-A100_IB-8xHDR200_k8s__deepops.txt") >= 2 * floor(200, 8)
    assert busbw_at("nccl-tests_all_reduce_perf_4node-DGX-A100_IB-8xHDR_32gpu__deepops.txt") >= 1.5 * floor(200, 8)
    untuned = busbw_at("nccl-tests_all_reduce_perf_2node-8xH200_NCCL_IB_DISABLE-socket_single-NIC__"
                       "schmaustech-nvidia-tools-image.txt")
    assert untuned < floor(400, 8) == 100.0


# derived: the ddp-mol1 result with the fabric_virtual flag roce_health now adds (eth0 there is a veth: no device)
VIRTUAL = dict(VETH, fabric_virtual=True)


def test_measured_tcp_below_a_virtual_link_speed_sets_the_socket_floor():
    # veth reports 10 Gb/s (1.25 GB/s); plain TCP between the nodes carried less in this run
    nodes = {"a": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 0.9}, "b": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 1.1},
             "c": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 0.03}}  # c's egress is throttled
    out = floors.busbw_floor(nodes)
    # the upper median of the three ring links (0.03, 0.9, 1.1): the slow node does not lower the floor
    assert (out["source"], out["floor_gbps"]) == ("tcp", round(0.05 * 0.9, 4))
    assert "upper median of 3 ring links: 0.03, 0.9, 1.1" in out["why"]
    assert "below the nominal speed of the virtual eth0 10000 Mb/s link" in out["why"]
    # a NIC's negotiated speed is not replaced by the measurement (the probe may have gone over another network)
    real = dict((n, dict(e, roce=VETH)) for n, e in nodes.items())
    out = floors.busbw_floor(real)
    assert (out["source"], out["floor_gbps"]) == ("ethernet", 0.0625) and "carried 0.9 GB/s" in out["why"]


def test_measured_tcp_above_the_link_speed_leaves_the_link_floor():
    nodes = {"a": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 2.5}, "b": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 2.1}}
    out = floors.busbw_floor(nodes)
    assert (out["source"], out["floor_gbps"]) == ("ethernet", 0.0625)
    assert out["why"].endswith("; plain TCP between the nodes carried 2.5 GB/s")


def test_measured_tcp_without_a_link_speed_and_partial_measurements():
    no_speed = dict(VETH, fabric_speed_mbps=None)
    out = floors.busbw_floor({"a": {"gpus": 0, "roce": no_speed, "tcp_gbps": 0.8},
                              "b": {"gpus": 0, "roce": no_speed, "tcp_gbps": 0.6}})
    assert (out["source"], out["floor_gbps"]) == ("tcp", 0.04)  # upper median of 0.6, 0.8
    # a node whose transfer failed leaves the measurement out: the link speed decides
    out = floors.busbw_floor({"a": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 0.8}, "b": {"gpus": 0, "roce": VIRTUAL}})
    assert out["source"] == "ethernet" and "carried" not in out["why"]
    # 0.0: a transfer too slow for the probe's precision counts as not measured
    out = floors.busbw_floor({"a": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 0.8},
                              "b": {"gpus": 0, "roce": VIRTUAL, "tcp_gbps": 0.0}})
    assert out["source"] == "ethernet"
    with pytest.raises(ValueError, match="tcp_gbps of a must be a number"):
        floors.busbw_floor({"a": {"gpus": 0, "roce": VETH, "tcp_gbps": "fast"}})


# ------------------------------------------------------------------ nccl-tests mode's default floor (issue 34)

def _nccl_tests(name):
    from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import parse_nccl_tests
    path = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "nccl", name)
    with open(path) as handle:
        return parse_nccl_tests(handle.read())


def _rails(n, rate):
    return {"devices": [{"name": "mlx5_%d" % i, "ports": [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                                                           "rate_gbps": rate}]} for i in range(n)]}


def test_nccl_tests_floor_on_one_node_of_8_a100():
    parsed = _nccl_tests("nccl-tests_all_reduce_perf_1node-8xA100-SXM4-40GB_NVLink_g8__ocitutorials.txt")
    floor = floors.nccl_tests_floor(parsed)
    assert (floor["floor_gbps"], floor["source"]) == (185.0, "nvlink")
    assert floors.nccl_tests_floor(parsed, explicit=0)["source"] == "off"
    assert floors.nccl_tests_floor(parsed, explicit=200)["floor_gbps"] == 200


def test_nccl_tests_floor_across_nodes_from_the_rdma_ports():
    parsed = _nccl_tests("nccl-tests_all_reduce_perf_2node-H100_RoCEv2-16x200G_OCI__ocitutorials.txt")
    floor = floors.nccl_tests_floor(parsed, _rails(16, 200.0))
    # 8 ranks per node use 8 of the 16 ports: 0.25 x 8 x 200 Gb/s / 8 bits
    assert (floor["floor_gbps"], floor["source"]) == (50.0, "rdma")
    assert floors.nccl_tests_floor(parsed, None)["floor_gbps"] is None


def test_the_socket_run_fails_the_floor_its_rdma_ports_would_set():
    from ansible_collections.ddp.cluster.plugins.module_utils.nccl.health import diagnose_nccl_tests
    name = "nccl-tests_all_reduce_perf_2node-8xH200_NCCL_IB_DISABLE-socket_single-NIC__schmaustech-nvidia-tools-image.txt"
    parsed = _nccl_tests(name)
    floor = floors.nccl_tests_floor(parsed, _rails(8, 400.0))
    assert floor["floor_gbps"] == 100.0
    path = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "nccl", name)
    with open(path) as handle:
        problems, _facts = diagnose_nccl_tests(0, handle.read(), "node n1", min_busbw_gbps=floor["floor_gbps"])
    assert "NCCL_BUSBW_LOW" in [p["code"] for p in problems]
