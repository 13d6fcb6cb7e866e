from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import crossnode


def codes(problems):
    return [p["code"] for p in problems]


@pytest.mark.parametrize("versions, expected", [
    ({"n0": {"torch": "2.1.0", "nccl": "2.18.3"}, "n1": {"torch": "2.1.0", "nccl": "2.18.3"}}, []),
    ({"n0": {"torch": "2.1.0"}, "n1": {"torch": "2.2.0"}}, ["CLUSTER_VERSION_MISMATCH"]),
    ({"n0": {"driver": "535.104.05", "nccl": "2.18.3"}, "n1": {"driver": "530.30.02", "nccl": "2.19.3"}},
     ["CLUSTER_VERSION_MISMATCH", "CLUSTER_VERSION_MISMATCH"]),
    ({"n0": {"driver": None}, "n1": {"driver": ""}}, []),
])
def test_version_problems(versions, expected):
    assert codes(crossnode.version_problems(versions)) == expected


def test_version_problem_names_nodes():
    (p,) = crossnode.version_problems({"n0": {"torch": "2.1.0"}, "n1": {"torch": "2.2.0"}})
    assert "2.1.0 on n0" in p["message"] and "2.2.0 on n1" in p["message"]


@pytest.mark.parametrize("mtus, expected", [
    ({"n0": 9000, "n1": "9000"}, []),
    ({"n0": 9000, "n1": 1500}, ["CLUSTER_MTU_MISMATCH"]),
    ({"n0": 4096}, []),
])
def test_mtu_problems(mtus, expected):
    assert codes(crossnode.mtu_problems(mtus)) == expected


@pytest.mark.parametrize("gids, configured, expected, severity", [
    ({"n0": 3, "n1": 3}, None, [], None),
    ({"n0": 3, "n1": 7}, None, ["CLUSTER_GID_INDEX_INCONSISTENT"], "warning"),
    ({"n0": 3, "n1": 7}, "3", ["CLUSTER_GID_INDEX_INCONSISTENT"], "error"),   # C06
    ({"n0": 3, "n1": 3}, 3, [], None),
])
def test_gid_index_problems(gids, configured, expected, severity):
    found = crossnode.gid_index_problems(gids, configured)
    assert codes(found) == expected
    if severity:
        assert found[0]["severity"] == severity


def test_ssh_modes_c18():
    modes = {"/home/ddp/.ssh": ("dir", "775"), "/home/ddp/.ssh/authorized_keys": ("authorized_keys", "664"),
             "/home/ddp/.ssh/id_rsa": ("private_key", "640"), "/home/ddp/.ssh/known_hosts": ("known_hosts", "0600")}
    found = crossnode.ssh_mode_problems("node1", modes)
    assert [p["subject"] for p in found] == ["node1:/home/ddp/.ssh", "node1:/home/ddp/.ssh/authorized_keys",
                                             "node1:/home/ddp/.ssh/id_rsa"]
    good = {"/home/ddp/.ssh": ("dir", "0700"), "/home/ddp/.ssh/id_ed25519": ("private_key", 0o600)}
    assert crossnode.ssh_mode_problems("node1", good) == []


def test_known_hosts_c18():
    (p,) = crossnode.known_hosts_problems("node0", ["node1"])
    assert p["code"] == "SSH_KNOWN_HOSTS_MISSING" and "Host key verification failed" in p["message"]
