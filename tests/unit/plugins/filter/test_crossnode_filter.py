from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.crossnode import cluster_problems


def test_combines_every_check():
    found = cluster_problems({
        "n0": {"versions": {"torch": "2.1.0"}, "mtu": 9000, "gid_index": 3},
        "n1": {"versions": {"torch": "2.2.0"}, "mtu": 1500, "gid_index": 7,
               "ssh_modes": {"/home/ddp/.ssh": ["dir", "0775"]}, "known_hosts_missing": ["n0"],
               "pairs": [{"src": "n1", "dst": "n0", "port": 40000, "verdict": "timeout", "message": ""}]},
    }, 3)
    assert [p["code"] for p in found] == ["CLUSTER_VERSION_MISMATCH", "CLUSTER_MTU_MISMATCH",
                                          "CLUSTER_GID_INDEX_INCONSISTENT", "SSH_MODE_TOO_OPEN",
                                          "SSH_KNOWN_HOSTS_MISSING", "CLUSTER_PORT_BLOCKED"]


def test_all_good_is_empty():
    assert cluster_problems({"n0": {"versions": {"torch": "2.1.0"}}, "n1": {"versions": {"torch": "2.1.0"}}}) == []


@pytest.mark.parametrize("bad", [[], {"n0": []}, {"n0": {"version": {}}}])
def test_bad_input(bad):
    with pytest.raises(AnsibleFilterError):
        cluster_problems(bad)


def test_mesh_plan_from_hostvars():
    from ansible_collections.ddp.cluster.plugins.filter.crossnode import mesh_plan
    plan = mesh_plan(["a", "b", "c"], {"a": {"ansible_host": "10.0.0.1"}, "b": {}, "c": {"ansible_host": "10.0.0.3"}},
                     forks=2)
    assert plan["nodes"]["b"] == [{"name": "c", "host": "10.0.0.3"}, {"name": "a", "host": "10.0.0.1"}]
    assert plan["window_s"] == 24.0
    with pytest.raises(AnsibleFilterError, match="not in hostvars"):
        mesh_plan(["a", "z"], {"a": {}})
    with pytest.raises(AnsibleFilterError, match="addresses repeat"):
        mesh_plan(["a", "b"], {"a": {"ansible_host": "x"}, "b": {"ansible_host": "x"}})
    with pytest.raises(AnsibleFilterError, match="list of host names"):
        mesh_plan("a,b")


def test_mesh_problems_from_registered_results():
    from ansible_collections.ddp.cluster.plugins.filter.crossnode import mesh_problems

    def pair(src, dst, verdict="ok"):
        return {"src": src, "dst": dst, "verdict": verdict, "message": verdict}
    results = {
        "a": {"pairs": [pair("a", "b"), pair("a", "c", "host_key_unknown")]},
        "b": {"pairs": [pair("b", "c", "host_key_unknown"), pair("b", "a")]},
        "c": {"failed": True, "msg": "sudo: unknown user ddp"},
        "d": {"skipped": True},
    }
    found = mesh_problems(results, "ssh", ["a", "b", "c"])
    assert [(p["code"], p["subject"]) for p in found] == [("SSH_CHECK_NOT_RUN", "c")]
    assert "unknown user" in found[0]["message"]
    del results["c"]
    found = mesh_problems(results, "ssh", ["a", "b", "c"])
    assert [(p["code"], p["subject"]) for p in found] == [("SSH_NODE_UNREACHABLE", "c")]
    with pytest.raises(AnsibleFilterError, match="ssh or port"):
        mesh_problems(results, "tcp")
