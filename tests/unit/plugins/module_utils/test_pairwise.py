"""Pair plans and the bad-node verdict (module_utils/nccl/pairwise.py, filters pair_plan / pair_findings).

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
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import pairwise

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


# Seen on the 6-node local cluster (benchmarks/find_bad_node.sh, ddp-node6 cut off, three pairs per round on 2
# cores): n1-n2 ran at 25 % of the best pair next to the failed pairs of n6, so the ring named n1 as well.
SIX = {("n1", "n2"): 0.1163, ("n2", "n3"): 0.2762, ("n3", "n4"): 0.3733, ("n4", "n5"): 0.4739, ("n5", "n6"): None,
       ("n6", "n1"): None}
SIX_HOSTS = [("n%d" % i, "10.0.0.%d" % i) for i in range(1, 7)]


def test_neighbours_whose_every_pair_is_bad_are_ambiguous():
    found = pairwise.pair_findings(runs(SIX), 0.25)
    assert sorted(found["nodes"]) == ["n1", "n6"]
    assert found["ambiguous"] == ["n1", "n6"]
    single = pairwise.pair_findings(runs({("a", "b"): 1.0, ("b", "c"): 0.02, ("c", "a"): 0.03}))
    assert single["ambiguous"] == []


def test_confirm_plan_pairs_each_suspect_with_a_good_node_it_has_not_met():
    found = pairwise.pair_findings(runs(SIX), 0.25)
    plan = pairwise.confirm_plan(SIX_HOSTS, found, 29400, "c")
    # references: n2..n5 (a good pair each, not named); n1 met n2, so it gets n3; n6 met n5 and gets n2
    assert plan["rounds"] == [[{"id": "c-r0-p0", "nodes": ["n3", "n1"], "endpoint": "10.0.0.3:29400"},
                               {"id": "c-r0-p1", "nodes": ["n2", "n6"], "endpoint": "10.0.0.2:29400"}]]
    assert plan["by_node"]["n4"] == [None]


def test_confirmation_clears_the_healthy_neighbour():
    found = pairwise.pair_findings(runs(SIX), 0.25)
    plan = pairwise.confirm_plan(SIX_HOSTS, found, 29400, "c")
    figures = dict(SIX)
    figures[tuple(plan["rounds"][0][0]["nodes"])] = 0.30  # n3-n1: n1 is fine
    figures[tuple(plan["rounds"][0][1]["nodes"])] = None  # n2-n6: n6 is not
    final = pairwise.pair_findings(runs(figures), 0.25)
    assert codes(final) == [("PAIRWISE_LINK", "link n1-n2"), ("PAIRWISE_NODE", "node n6")]
    assert final["nodes"] == {"n6": ["PAIRWISE_NODE"]}


def test_confirmation_keeps_two_bad_neighbours():
    ring = {("n0", "n1"): 1.0, ("n1", "n2"): 0.9, ("n2", "n3"): 0.05, ("n3", "n4"): 0.04, ("n4", "n5"): 0.03,
            ("n5", "n0"): 1.1}
    found = pairwise.pair_findings(runs(ring))
    assert found["ambiguous"] == ["n3", "n4"]
    plan = pairwise.confirm_plan([("n%d" % i, "a%d" % i) for i in range(6)], found, 29400, "c")
    for pair in plan["rounds"][0]:
        ring[tuple(pair["nodes"])] = 0.02
    assert sorted(pairwise.pair_findings(runs(ring))["nodes"]) == ["n3", "n4"]


def test_confirm_plan_without_a_reference_or_a_suspect_has_no_rounds():
    found = pairwise.pair_findings(runs({("a", "b"): None, ("b", "c"): None, ("c", "a"): None}))
    assert pairwise.confirm_plan([("a", "1"), ("b", "2"), ("c", "3")], found, 29400, "c")["rounds"] == []
    healthy = pairwise.pair_findings(runs({("a", "b"): 1.0, ("b", "c"): 1.0, ("c", "a"): 1.0}))
    assert pairwise.confirm_plan([("a", "1"), ("b", "2"), ("c", "3")], healthy, 29400, "c")["rounds"] == []


def test_confirm_plan_uses_more_rounds_when_suspects_outnumber_references():
    found = {"ambiguous": ["s1", "s2", "s3"], "nodes": {"s1": [], "s2": [], "s3": []},
             "pairs": [{"nodes": ["r", "x"], "bad": False}]}
    plan = pairwise.confirm_plan([("r", "1"), ("x", "2"), ("s1", "3"), ("s2", "4"), ("s3", "5")], found, 1, "c")
    assert [[p["nodes"] for p in r] for r in plan["rounds"]] == [[["r", "s1"], ["x", "s2"]], [["r", "s3"]]]


def test_error_text_in_messages_is_shortened():
    per_node = runs({("a", "b"): 1.0, ("b", "c"): 1.0, ("c", "a"): 1.0})
    long_failure = dict(FAILED, msg="x " * 500)
    for node in ("b", "c"):
        per_node[node] = [r if r["pair"] != ["b", "c"] else {"pair": ["b", "c"], "result": long_failure}
                          for r in per_node[node]]
    pair = next(p for p in pairwise.pair_findings(per_node)["pairs"] if p["nodes"] == ["b", "c"])
    assert pair["error"].startswith("b: x x") and len(pair["error"]) < 600
