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
