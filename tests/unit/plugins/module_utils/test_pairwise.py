"""Pair plans and the bad-node verdict (module_utils/pairwise.py, filters pair_plan / pair_findings).

The registered results are what ddp.cluster.nccl_health returned on the Molecule nodes for one pair run and for
one pair whose partner never joined (fixtures/pairwise/SOURCES.md); other figures are derived from them.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.crossnode import pair_findings as findings_filter
from ansible_collections.ddp.cluster.plugins.filter.crossnode import pair_plan as plan_filter
from ansible_collections.ddp.cluster.plugins.module_utils import pairwise

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pairwise"
OK = json.loads((FIXTURES / "nccl_health_pair_ok.json").read_text())
FAILED = json.loads((FIXTURES / "nccl_health_pair_join_timeout.json").read_text())


def ok(busbw):
    """The real completed run with its largest size's busbw set to ``busbw`` GB/s."""
    result = copy.deepcopy(OK)
    largest = max(result["busbw"], key=lambda row: row["bytes"])
    largest["busbw_gbps"] = busbw
    return result


def runs(figures):
    """{node: [{pair, result}]} where both nodes of every pair report ``figures[(a, b)]`` (a float or FAILED)."""
    per_node = {}
    for (a, b), value in figures.items():
        result = FAILED if value is None else ok(value)
        for node in (a, b):
            per_node.setdefault(node, []).append({"pair": [a, b], "result": result})
    return per_node


def codes(found):
    return sorted((p["code"], p["subject"]) for p in found["problems"])


@pytest.mark.parametrize("count, expected", [
    (1, []),
    (2, [[("n0", "n1")]]),
    (3, [[("n0", "n1")], [("n1", "n2")], [("n2", "n0")]]),
    (4, [[("n0", "n1"), ("n2", "n3")], [("n1", "n2"), ("n3", "n0")]]),
    (5, [[("n0", "n1"), ("n2", "n3")], [("n1", "n2"), ("n3", "n4")], [("n4", "n0")]]),
])
def test_ring_rounds(count, expected):
    assert pairwise.ring_rounds(["n%d" % i for i in range(count)]) == expected


@pytest.mark.parametrize("count", [3, 4, 5, 6, 7, 12, 13])
def test_ring_rounds_cover_the_ring_with_disjoint_pairs(count):
    nodes = ["n%d" % i for i in range(count)]
    rounds = pairwise.ring_rounds(nodes)
    assert len(rounds) == (2 if count % 2 == 0 else 3)
    edges = [pair for r in rounds for pair in r]
    assert sorted(edges) == sorted((nodes[i], nodes[(i + 1) % count]) for i in range(count))
    for r in rounds:
        members = [n for pair in r for n in pair]
        assert len(members) == len(set(members)), r
    for node in nodes:
        assert len([pair for pair in edges if node in pair]) == 2


def test_ring_rounds_refuse_repeated_names():
    with pytest.raises(ValueError, match="repeat: n1"):
        pairwise.ring_rounds(["n0", "n1", "n1"])


def test_pair_plan_endpoints_ids_and_rounds_per_node():
    plan = pairwise.pair_plan([("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")], 29400, "run7")
    assert plan["rounds"] == [
        [{"id": "run7-r0-p0", "nodes": ["a", "b"], "endpoint": "10.0.0.1:29400"}],
        [{"id": "run7-r1-p0", "nodes": ["b", "c"], "endpoint": "10.0.0.2:29400"}],
        [{"id": "run7-r2-p0", "nodes": ["c", "a"], "endpoint": "10.0.0.3:29400"}],
    ]
    assert [p and p["id"] for p in plan["by_node"]["a"]] == ["run7-r0-p0", None, "run7-r2-p0"]
    assert [p and p["id"] for p in plan["by_node"]["b"]] == ["run7-r0-p0", "run7-r1-p0", None]


@pytest.mark.parametrize("hosts, port, message", [
    ([("a", "10.0.0.1"), ("b", "10.0.0.1")], 29400, "addresses repeat: 10.0.0.1"),
    ([("a", "10.0.0.1"), ("b", "10.0.0.2")], 70000, "port must be in 1-65535"),
])
def test_pair_plan_refuses(hosts, port, message):
    with pytest.raises(ValueError, match=message):
        pairwise.pair_plan(hosts, port, "x")


def test_plan_filter_reads_fabric_address_then_ansible_host():
    hostvars = {"a": {"ddp_fabric_address": "192.168.1.1", "ansible_host": "10.0.0.1"}, "b": {"ansible_host": "10.0.0.2"},
                "c": {}}
    plan = plan_filter(["a", "b", "c"], hostvars, 29500, "r")
    assert [p["endpoint"] for r in plan["rounds"] for p in r] == ["192.168.1.1:29500", "10.0.0.2:29500", "c:29500"]
    with pytest.raises(AnsibleFilterError, match="pair_plan: d is not in hostvars"):
        plan_filter(["a", "d"], hostvars)
    with pytest.raises(AnsibleFilterError, match="expects a list of host names"):
        plan_filter("a,b", hostvars)


def test_run_result_reads_the_largest_size_or_the_message():
    assert pairwise.run_result(OK) == {"busbw_gbps": max(OK["busbw"], key=lambda r: r["bytes"])["busbw_gbps"],
                                       "error": None}
    failed = pairwise.run_result(FAILED)
    assert failed["busbw_gbps"] is None and "NCCL_RENDEZVOUS_FAILED" in failed["error"]
    assert pairwise.run_result({}) == {"busbw_gbps": None, "error": "no result (the node stopped answering Ansible)"}


def test_healthy_ring_has_no_finding():
    found = pairwise.pair_findings(runs({("a", "b"): 1.0, ("b", "c"): 0.8, ("c", "a"): 0.9}))
    assert found["problems"] == [] and found["nodes"] == {}
    assert found["best_gbps"] == 1.0
    assert {"-".join(p["nodes"]): p["ratio"] for p in found["pairs"]} == {"a-b": 1.0, "b-c": 0.8, "c-a": 0.9}


def test_throttled_node_of_three_is_named_not_its_partners():
    found = pairwise.pair_findings(runs({("a", "b"): 1.0, ("b", "c"): 0.02, ("c", "a"): 0.03}))
    assert codes(found) == [("PAIRWISE_NODE", "node c")]
    assert found["nodes"] == {"c": ["PAIRWISE_NODE"]}
    message = found["problems"][0]["message"]
    assert "b-c 0.02 GB/s" in message and "c-a 0.03 GB/s" in message and "a-b reached 1 GB/s" in message
    assert "below 50% of the best pair (1 GB/s)" in message


def test_node_that_does_not_join_is_named_from_failed_pairs():
    found = pairwise.pair_findings(runs({("a", "b"): 0.9, ("b", "c"): None, ("c", "a"): None}))
    assert codes(found) == [("PAIRWISE_NODE", "node c")]
    assert "b-c failed (" in found["problems"][0]["message"]


def test_one_side_missing_fails_the_pair():
    per_node = runs({("a", "b"): 1.0, ("b", "c"): 1.0, ("c", "a"): 1.0})
    per_node["c"] = []  # c's runs never came back (the node stopped answering)
    found = pairwise.pair_findings(per_node)
    assert codes(found) == [("PAIRWISE_NODE", "node c")]
    assert "c: no result (the node did not run its side)" in found["problems"][0]["message"]


def test_lower_report_of_a_pair_counts():
    per_node = runs({("a", "b"): 1.0, ("b", "c"): 1.0, ("c", "a"): 1.0})
    per_node["c"][0]["result"] = ok(0.1)  # c saw b-c at 0.1
    found = pairwise.pair_findings(per_node)
    assert codes(found) == [("PAIRWISE_LINK", "link b-c")]
    assert found["nodes"] == {}


def test_two_bad_nodes_of_six_are_both_named():
    ring = {("n0", "n1"): 1.0, ("n1", "n2"): 0.9, ("n2", "n3"): 0.05, ("n3", "n4"): 0.04, ("n4", "n5"): 0.03,
            ("n5", "n0"): 1.1}
    found = pairwise.pair_findings(runs(ring))
    assert codes(found) == [("PAIRWISE_NODE", "node n3"), ("PAIRWISE_NODE", "node n4")]


def test_every_pair_bad_names_no_node():
    found = pairwise.pair_findings(runs({("a", "b"): None, ("b", "c"): None, ("c", "a"): None}))
    assert codes(found) == [("PAIRWISE_ALL", "every pair")] and found["nodes"] == {}


def test_floor_makes_uniformly_slow_pairs_bad():
    figures = {("a", "b"): 0.5, ("b", "c"): 0.45, ("c", "a"): 0.48}
    assert pairwise.pair_findings(runs(figures))["problems"] == []
    found = pairwise.pair_findings(runs(figures), floor_gbps=1.0)
    assert codes(found) == [("PAIRWISE_ALL", "every pair")]


def test_two_nodes_cannot_be_told_apart():
    found = pairwise.pair_findings(runs({("a", "b"): None}))
    assert codes(found) == [("PAIRWISE_UNDECIDED", "nodes a and b")] and found["nodes"] == {}
    assert pairwise.pair_findings(runs({("a", "b"): 1.0}))["problems"] == []


@pytest.mark.parametrize("kwargs, message", [
    ({"min_ratio": 0}, "min_ratio must be a number in"),
    ({"min_ratio": "x"}, "min_ratio must be a number in"),
    ({"floor_gbps": -1}, "floor_gbps must be >= 0"),
])
def test_findings_refuse_bad_thresholds(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pairwise.pair_findings(runs({("a", "b"): 1.0}), **kwargs)


def test_findings_filter_wraps_errors():
    with pytest.raises(AnsibleFilterError, match="pair_findings: a pair run of a has no two-node 'pair'"):
        findings_filter({"a": [{"pair": ["a"], "result": OK}]})
    with pytest.raises(AnsibleFilterError, match="expects a dict of node -> pair runs"):
        findings_filter([])
    assert findings_filter(runs({("a", "b"): 1.0, ("b", "c"): 0.01, ("c", "a"): 1.0}), 0.5)["nodes"] == {}
