"""The node-to-node plan (who probes whom, how long) and the attribution of failed pairs."""
from __future__ import annotations

import itertools

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import peermesh


def names(n):
    return ["node%d" % i for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 6, 12, 33, 64])
def test_plan_covers_every_ordered_pair_once(n):
    hosts = [(name, "10.0.%d.%d" % (i // 250, i % 250 + 2)) for i, name in enumerate(names(n))]
    plan = peermesh.mesh_plan(hosts, forks=n)
    pairs = [(src, p["name"]) for src, peers in plan["nodes"].items() for p in peers]
    assert sorted(pairs) == sorted(itertools.permutations(names(n), 2))
    # each peer carries its own address
    assert all(p["host"] == dict(hosts)[p["name"]] for peers in plan["nodes"].values() for p in peers)


@pytest.mark.parametrize("n", [2, 3, 12, 64])
def test_each_step_is_a_permutation(n):
    """At step k every node targets a different node: no node gets every connection at once."""
    plan = peermesh.mesh_plan([(x, x) for x in names(n)], forks=n)
    for k in range(n - 1):
        targets = [plan["nodes"][src][k]["name"] for src in names(n)]
        assert sorted(targets) == sorted(names(n))


@pytest.mark.parametrize("n", [3, 12, 64, 500])
def test_window_does_not_grow_with_nodes_when_forks_suffice(n):
    assert peermesh.mesh_window(n, forks=n) == peermesh.mesh_window(3, forks=3) == 22.0


def test_window_covers_start_batches():
    # 64 nodes started 12 at a time: 6 batches of 2 s after the 20 s base
    assert peermesh.mesh_window(64, forks=12) == 32.0
    assert peermesh.mesh_window(64, forks=12, base_s=5, launch_s=0.5) == 8.0


@pytest.mark.parametrize("args", [(0, 5), (3, 0), (3, 5, -1)])
def test_window_refuses_nonsense(args):
    with pytest.raises(ValueError):
        peermesh.mesh_window(*args)


def test_plan_refuses_repeated_names_and_addresses():
    with pytest.raises(ValueError, match="names repeat: a"):
        peermesh.mesh_plan([("a", "1"), ("a", "2")], forks=5)
    with pytest.raises(ValueError, match="addresses repeat: 10.0.0.2"):
        peermesh.mesh_plan([("a", "10.0.0.2"), ("b", "10.0.0.2")], forks=5)
    with pytest.raises(ValueError, match="not one of the nodes"):
        peermesh.rotated_peers(["a", "b"], "c")


def mesh(n, bad=lambda src, dst: None):
    """Pairs of an n-node mesh; ``bad(src, dst)`` returns a failing verdict or None."""
    out = []
    for src, dst in itertools.permutations(names(n), 2):
        verdict = bad(src, dst) or "open"
        out.append({"src": src, "dst": dst, "verdict": verdict, "message": verdict})
    return out


def codes(problems):
    return [(p["code"], p["subject"]) for p in problems]


@pytest.mark.parametrize("n", [3, 6, 12, 64])
def test_one_node_firewalled_is_named_once(n):
    bad = "node%d" % (n - 1)
    pairs = mesh(n, lambda s, d: "firewall_reject" if d == bad else None)
    found = peermesh.mesh_problems(names(n), pairs, port=40000)
    assert codes(found) == [("CLUSTER_NODE_PORT_BLOCKED", "%s:40000" % bad)]
    assert "%d firewall_reject" % (n - 1) in found[0]["message"]


@pytest.mark.parametrize("n", [3, 12, 64])
def test_one_node_cannot_reach_anyone(n):
    pairs = mesh(n, lambda s, d: "unresolved" if s == "node1" else None)
    found = peermesh.mesh_problems(names(n), pairs, port=40000)
    assert codes(found) == [("CLUSTER_NODE_EGRESS_BLOCKED", "node1")]


@pytest.mark.parametrize("n", [3, 6, 12, 64])
def test_network_wide_block_is_one_problem(n):
    pairs = mesh(n, lambda s, d: "timeout")
    found = peermesh.mesh_problems(names(n), pairs, port=40000)
    assert [p["code"] for p in found] == ["CLUSTER_PORT_BLOCKED_EVERYWHERE"]
    assert "%d of %d node pairs failed" % (n * (n - 1), n * (n - 1)) in found[0]["message"]


def test_every_node_but_one_cut_is_network_wide():
    # node0 reaches everyone and everyone reaches node0; the rest cannot talk to each other
    pairs = mesh(6, lambda s, d: "timeout" if "node0" not in (s, d) else None)
    assert [p["code"] for p in peermesh.mesh_problems(names(6), pairs, port=1)] == ["CLUSTER_PORT_BLOCKED_EVERYWHERE"]


def test_single_link_is_a_pair():
    pairs = mesh(6, lambda s, d: "firewall_reject" if (s, d) == ("node2", "node4") else None)
    assert codes(peermesh.mesh_problems(names(6), pairs, port=40000)) == [("CLUSTER_PORT_BLOCKED", "node2 -> node4:40000")]


def test_two_nodes_cannot_be_told_apart():
    pairs = mesh(2, lambda s, d: "refused" if d == "node1" else None)
    assert codes(peermesh.mesh_problems(names(2), pairs, port=40000)) == [("CLUSTER_PORT_BLOCKED", "node0 -> node1:40000")]


def test_node_whose_probe_did_not_run():
    # node3 never listened: its peers saw 'refused'; that is the node's problem, not four pairs
    pairs = [p for p in mesh(4, lambda s, d: "refused" if d == "node3" else None) if p["src"] != "node3"]
    found = peermesh.mesh_problems(names(4), pairs, not_run={"node3": "cannot listen on 0.0.0.0:40000"}, port=40000)
    assert codes(found) == [("CLUSTER_PROBE_NOT_RUN", "node3")]
    assert "cannot listen" in found[0]["message"]


def test_node_cut_and_a_separate_pair():
    pairs = mesh(5, lambda s, d: "timeout" if d == "node4" else ("refused" if (s, d) == ("node0", "node1") else None))
    assert codes(peermesh.mesh_problems(names(5), pairs, port=9)) == [
        ("CLUSTER_NODE_PORT_BLOCKED", "node4:9"), ("CLUSTER_PORT_BLOCKED", "node0 -> node1:9")]


def test_ssh_codes():
    pairs = [dict(p, verdict="ok" if p["verdict"] == "open" else p["verdict"])
             for p in mesh(3, lambda s, d: "host_key_unknown" if d == "node2" else None)]
    found = peermesh.mesh_problems(names(3), pairs, what="ssh", fix="run ssh_trust")
    assert codes(found) == [("SSH_NODE_UNREACHABLE", "node2")]


def test_all_good_is_empty():
    assert peermesh.mesh_problems(names(12), mesh(12), port=40000) == []
