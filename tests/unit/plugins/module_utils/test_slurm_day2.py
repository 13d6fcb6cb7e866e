"""Day 2 logic of the slurm role on real files: the nodes a running cluster's slurm.conf defines, how a new slurm.conf
is applied (none / scontrol reconfigure / restart), and what a joining node's health check decides
(tests/unit/fixtures/slurm, SOURCES.md there)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.slurm import nodes as slurm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "slurm")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


CONF3 = fixture("slurm_conf_3nodes.txt")
CONF4 = fixture("slurm_conf_4nodes.txt")


def test_the_nodes_of_a_running_cluster():
    nodes = slurm.conf_nodes(CONF3, "")
    assert sorted(nodes) == ["ddp-dt1", "ddp-dt2", "ddp-dt3"]
    node = nodes["ddp-dt2"]
    assert node["line"].startswith("NodeName=ddp-dt2 CPUs=") and "State=" not in node["line"]
    assert node["gres"] == [] and node["gpus"] == 0
    cpus = int(node["line"].split("CPUs=")[1].split()[0])
    memory = int(node["line"].split("RealMemory=")[1].split()[0])
    assert node["mem_per_cpu"] == memory // cpus


def test_gres_lines_go_with_their_node():
    gres = "# managed\nNodeName=ddp-dt1 Name=gpu Type=a100 File=/dev/nvidia0\nNodeName=ddp-dt1 Name=gpu Type=a100 File=/dev/nvidia1\n"
    nodes = slurm.conf_nodes(CONF3, gres)
    assert nodes["ddp-dt1"]["gpus"] == 2 and nodes["ddp-dt2"]["gres"] == []


def test_the_tracking_of_a_running_cluster():
    tracking = slurm.conf_tracking(CONF3)
    assert tracking["mode"] == "linuxproc" and tracking["proctrack"] == "proctrack/linuxproc"
    assert slurm.conf_tracking("ClusterName=x\n") is None


def test_a_conf_line_that_is_not_key_value_is_refused():
    with pytest.raises(slurm.SlurmParseError, match="not a KEY=value line"):
        slurm.parse_conf("ClusterName=x\nsomething odd\n")
    with pytest.raises(slurm.SlurmParseError, match="numeric CPUs or RealMemory"):
        slurm.conf_nodes("NodeName=n1 CPUs=two RealMemory=100\n")


def test_a_new_node_restarts_the_daemons():
    plan = slurm.apply_plan(CONF3, CONF4)
    assert plan["action"] == "restart" and plan["added"] == ["ddp-dt4"] and plan["removed"] == []
    assert "added: ddp-dt4" in plan["why"]
    back = slurm.apply_plan(CONF4, CONF3)
    assert back["action"] == "restart" and back["removed"] == ["ddp-dt4"]


def test_nothing_changed_is_nothing_to_do():
    assert slurm.apply_plan(CONF3, CONF3)["action"] == "none"
    # comments and the ansible_managed line do not count
    assert slurm.apply_plan(CONF3, "# another header\n" + CONF3)["action"] == "none"


@pytest.mark.parametrize("key, old, new, action", [
    ("SlurmdTimeout", "120", "150", "reconfigure"),
    ("HealthCheckInterval", "300", "60", "reconfigure"),
    ("ReturnToService", "2", "1", "reconfigure"),
    ("SlurmctldPort", "6817", "6819", "restart"),
    ("SelectTypeParameters", "CR_Core_Memory", "CR_Core", "restart"),
])
def test_a_changed_key_reconfigures_or_restarts(key, old, new, action):
    line = "%s=%s\n" % (key, old)
    assert line in CONF3, key
    plan = slurm.apply_plan(CONF3, CONF3.replace(line, "%s=%s\n" % (key, new)))
    assert plan["action"] == action and plan["changed"] == [key], plan


@pytest.mark.parametrize("key, new", [
    ("AccountingStorageType", "accounting_storage/slurmdbd"),
    ("JobAcctGatherType", "jobacct_gather/cgroup"),
])
def test_a_changed_accounting_key_restarts(key, new):
    old = [line for line in CONF3.splitlines() if line.startswith(key + "=")][0]
    plan = slurm.apply_plan(CONF3, CONF3.replace(old, "%s=%s" % (key, new)))
    assert plan["action"] == "restart" and plan["changed"] == [key], plan


def test_turning_on_accounting_and_requeue_restarts():
    """The keys the accounting and requeue work added to slurm.conf, new to a running cluster's file: a restart."""
    added = {"AccountingStorageHost": "ddp-dt1", "AccountingStoragePort": "6819", "AuthInfo": "cred_expire=120",
             "DisableRootJobs": "YES", "JobRequeue": "1"}
    new = CONF3.replace("AccountingStorageType=accounting_storage/none",
                        "AccountingStorageType=accounting_storage/slurmdbd\n"
                        + "\n".join("%s=%s" % item for item in sorted(added.items())))
    plan = slurm.apply_plan(CONF3, new)
    assert plan["action"] == "restart", plan
    assert plan["changed"] == sorted(list(added) + ["AccountingStorageType"])
    for key, value in added.items():
        line = "%s=%s" % (key, value)
        changed = new.replace(line, line + "0")
        assert slurm.apply_plan(new, changed)["action"] == "restart", key


def test_a_new_key_from_extra_config_restarts_and_other_files_restart():
    assert slurm.apply_plan(CONF3, CONF3 + "MaxJobCount=20000\n")["action"] == "restart"
    assert slurm.apply_plan(CONF3, CONF3, other_files_changed=True)["action"] == "restart"


def test_a_changed_node_line_restarts():
    old = [line for line in CONF3.splitlines() if line.startswith("NodeName=ddp-dt3")][0]
    plan = slurm.apply_plan(CONF3, CONF3.replace(old, old.replace("RealMemory=", "RealMemory=1")))
    assert plan["action"] == "restart" and "ddp-dt3" in plan["why"]


def test_no_conf_before_is_a_restart_of_whatever_runs():
    assert slurm.apply_plan("", CONF3)["action"] == "restart"


def test_a_joining_node_that_passes_is_resumed():
    assert slurm.join_outcome(0, "ddp-health: WARN on ddp-dt4 in 0.03 s: NO_GPU, NO_RDMA\n") == \
        {"action": "resume", "reason": None}


def test_a_joining_node_that_fails_keeps_its_error_codes():
    out = fixture("ddp_health_fail_ifname.txt")
    assert slurm.join_outcome(1, out) == {"action": "drain", "reason": "ddp:IFNAME_NOT_FOUND"}
    # only the first line (another command printing one line): its codes
    assert slurm.join_outcome(1, out.splitlines()[0])["reason"].startswith("ddp:IFNAME_NOT_FOUND,")


@pytest.mark.parametrize("rc, out, reason", [
    (1, "something failed\n", "ddp:JOIN_HEALTH_FAILED"),
    (2, "ddp-health: UNKNOWN on n in 0.1 s: HEALTH_CONFIG\n", "ddp:JOIN_HEALTH_UNKNOWN"),
    (127, "", "ddp:JOIN_HEALTH_UNKNOWN"),
])
def test_a_joining_node_without_codes(rc, out, reason):
    assert slurm.join_outcome(rc, out) == {"action": "drain", "reason": reason}


def test_the_running_node_set_wins_over_a_file_an_interrupted_run_wrote():
    # an earlier run wrote the 4-node file, then stopped before the restart: the daemons still run the 3 nodes
    plan = slurm.apply_plan(CONF4, CONF4, running_nodes=["ddp-dt1", "ddp-dt2", "ddp-dt3"])
    assert plan["action"] == "restart" and plan["added"] == ["ddp-dt4"]
    assert slurm.apply_plan(CONF4, CONF4, running_nodes=["ddp-dt1", "ddp-dt2", "ddp-dt3", "ddp-dt4"])["action"] == "none"
