"""Slurm's own view of its nodes, on real outputs (tests/unit/fixtures/slurm; SOURCES.md there)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.slurm import diag as sd

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "slurm")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def codes(problems):
    return sorted(set((p["code"], p["severity"]) for p in problems))


@pytest.mark.parametrize("expr, names", [
    ("compute[001-003]", ["compute001", "compute002", "compute003"]),
    ("hb120v2-[1,3-4]", ["hb120v2-1", "hb120v2-3", "hb120v2-4"]),
    ("d[001-002],f[004,006-007]", ["d001", "d002", "f004", "f006", "f007"]),
    ("ip-10-0-1-23", ["ip-10-0-1-23"]),
    ("n[1-2]-ib", ["n1-ib", "n2-ib"]),
])
def test_expand_hostlist(expr, names):
    assert sd.expand_hostlist(expr) == names


def test_expand_hostlist_refuses_a_backwards_range():
    with pytest.raises(sd.SlurmTextError, match="ends below"):
        sd.expand_hostlist("n[5-3]")


def test_scontrol_show_node_of_a_node_slurm_drained_for_missing_gpus():
    nodes = sd.parse_scontrol_nodes(fixture("scontrol_show_node_IDLE+DRAIN_gres-gpu-count-lower__awsome-distributed-ai-195.txt"))
    node = nodes["yigou-dev-102-68"]
    assert (node["state"], node["flags"], node["drain"]) == ("idle", ["drain"], True)
    assert node["reason"] == "gres/gpu count reported lower than configured (0 < 1)"
    assert (node["reason_user"], node["reason_time"]) == ("slurm", "2024-12-19T11:03:34")
    assert (node["gres"], node["gres_gpus"], node["cpus"], node["real_memory"]) == ("gpu:nvidia-rtx-3090:1", 1, 8, 1)
    assert node["version"] == "24.05.0-0rc1" and node["partitions"] == ["compute100"]
    problems = sd.node_problems(nodes)
    assert codes(problems) == [("SLURM_GRES_MISMATCH", "error")]
    assert "slurm at 2024-12-19T11:03:34" in problems[0]["message"]


def test_scontrol_one_line_form_keeps_os_and_reason_apart():
    line = ("NodeName=n1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=8 Gres=gpu:a100:8(S:0-1) "
            "OS=Linux 5.10.0 #1 SMP Wed Jun 28 RealMemory=1000 State=DOWN+DRAIN+INVALID_REG "
            "Reason=Low RealMemory [slurm@2024-01-01T00:00:00]")
    node = sd.parse_scontrol_nodes(line)["n1"]
    assert node["gres_gpus"] == 8 and node["real_memory"] == 1000 and node["reason"] == "Low RealMemory"
    assert node["state"] == "down" and "invalid_reg" in node["flags"]
    assert codes(sd.node_problems({"n1": node})) == [("SLURM_NODE_LOW_RESOURCES", "error")]


def test_gres_below_the_gpus_the_node_has_is_named_before_slurm_does():
    nodes = sd.parse_scontrol_nodes("NodeName=n1 State=IDLE Gres=gpu:h100:8\n")
    assert codes(sd.node_problems(nodes, gpus={"n1": 7})) == [("SLURM_GRES_MISMATCH", "error")]
    assert sd.node_problems(nodes, gpus={"n1": 8}) == []


@pytest.mark.parametrize("name, expected", [
    ("scontrol_show_node_excerpt_DOWN-NOT_RESPONDING__slurm_exporter-243.txt",
     {"g1": "SLURM_NODE_NOT_RESPONDING"}),
    ("sinfo_default_3-drain__clusterinthecloud-terraform-11.txt",
     {"compute001": "SLURM_NODE_DRAINED", "compute003": "SLURM_NODE_DRAINED"}),
    ("sinfo_list-reasons_Format-reason40-nodelist_Low-RealMemory__clusterinthecloud-terraform-11.txt",
     {"compute001": "SLURM_NODE_LOW_RESOURCES", "compute002": "SLURM_NODE_LOW_RESOURCES"}),
    ("sinfo_lNe_down-not-responding__elasticluster-272.txt", {"compute004": "SLURM_NODE_NOT_RESPONDING"}),
    ("sinfo_Node_long_drained-Low-RealMemory__integrated_methane_inversion-30.txt",
     {"ip-172-31-79-91": "SLURM_NODE_LOW_RESOURCES"}),
    ("sinfo_R_headerless_Kill-task-failed__awsome-distributed-ai-185.txt", {"ip-10-0-1-23": "SLURM_KILL_TASK_FAILED"}),
    ("sinfo_default_drng-fail-maint-mix__ArjunaUsers-69.txt",
     {"f005": "SLURM_NODE_NOT_RESPONDING", "c021": "SLURM_NODE_NOT_RESPONDING", "d032": "SLURM_NODE_DRAINED"}),
    ("sinfo_N_unknown-not-responding.txt", {"ddp-node2": "SLURM_NODE_NOT_RESPONDING"}),
])
def test_every_reader_names_the_cause_at_error(name, expected):
    states = sd.parse_node_states(fixture(name))
    problems = sd.node_problems(states)
    found = dict((p["subject"].split()[-1], p) for p in problems)
    for node, code in expected.items():
        assert found[node]["code"] == code, (node, found.get(node))
        assert found[node]["severity"] == "error"


def test_default_sinfo_reads_every_partition_and_state():
    states = sd.parse_node_states(fixture("sinfo_default_drng-fail-maint-mix__ArjunaUsers-69.txt"))
    assert len(states) == 87
    assert states["d001"]["state"] == "draining" and "pending reboot" in states["d001"]["flags"]
    assert states["f005"]["responding"] is False and states["c003"]["state"] == "maint"
    assert states["e001"]["partitions"] == ["debug", "idle"]
    idle_or_maint = [n for n, p in ((p["subject"].split()[-1], p) for p in sd.node_problems(states))
                     if n.startswith("e") or n in ("c003", "c006")]
    assert idle_or_maint == []


def test_an_operators_drain_is_a_warning_and_our_own_is_info():
    states = sd.parse_node_states(fixture("sinfo_N_drained-ours_draining-operator.txt"))
    problems = dict((p["subject"].split()[-1], p) for p in sd.node_problems(states))
    assert (problems["ddp-node3"]["code"], problems["ddp-node3"]["severity"]) == ("SLURM_NODE_DRAINED", "warning")
    assert (problems["ddp-node2"]["code"], problems["ddp-node2"]["severity"]) == ("SLURM_NODE_DRAINED", "info")
    assert "ddp-node1" not in problems


@pytest.mark.parametrize("text", ["", "slurm_load_node error: Unable to contact slurm controller",
                                  "NodeName=n1 CPUs=2 Boards=1 RealMemory=100"])
def test_node_states_refuse_other_text(text):
    with pytest.raises(sd.SlurmTextError):
        sd.parse_node_states(text)


@pytest.mark.parametrize("name, expected", [
    ("slurmctld_log_low-real-memory-drain__aws-parallelcluster-1517.txt",
     [("SLURM_NODE_LOW_RESOURCES", "error")]),
    ("slurmctld_log_low-real-memory-registration-invalid__az-hop-686.txt",
     [("SLURM_NODE_INVALID", "error"), ("SLURM_NODE_LOW_RESOURCES", "error")]),
    ("slurmctld_journal_gres-count-lower-INVAL__puppet-magic_castle-361.txt",
     [("SLURM_GRES_MISMATCH", "error"), ("SLURM_NODE_INVALID", "error")]),
    ("slurmctld_journal_munge-invalid-credential__trinity-759.txt", [("SLURM_MUNGE_KEY_MISMATCH", "error")]),
    ("slurmctld_log_munge-expired-credential_clock-skew__ansible-slurm-appliance-114.txt",
     [("SLURM_MUNGE_CLOCK_SKEW", "error")]),
    ("slurmd_log_munge-expired-credential__trinity-424.txt", [("SLURM_MUNGE_CLOCK_SKEW", "error")]),
])
def test_log_lines(name, expected):
    assert codes(sd.log_problems(sd.parse_slurm_log(fixture(name)))) == expected


def test_clock_skew_names_the_offset_and_not_the_key():
    problems = sd.log_problems(sd.parse_slurm_log(fixture("slurmd_log_munge-expired-credential__trinity-424.txt")))
    assert "-304 s" in problems[0]["message"] and "key is fine" in problems[0]["message"]
    key = sd.log_problems(sd.parse_slurm_log(fixture("slurmctld_journal_munge-invalid-credential__trinity-759.txt")))
    assert "not a clock problem" in key[0]["message"]


def test_log_names_the_node_and_the_figures():
    problems = sd.log_problems(sd.parse_slurm_log(fixture("slurmctld_log_low-real-memory-drain__aws-parallelcluster-1517.txt")))
    assert problems[0]["subject"] == "slurm node ip-10-2-1-120"
    assert "63622" in problems[0]["message"] and "64000" in problems[0]["message"]


def test_health_program_line_of_our_own_node_log():
    line = ("[2026-12-02T10:00:00.000] error: health_check failed: rc:1 output:ddp-health: FAIL on ddp-mol2 in 0.02 s: "
            "IFNAME_NOT_FOUND, NO_GPU, NO_RDMA")
    assert codes(sd.log_problems(sd.parse_slurm_log(line))) == [("SLURM_HEALTH_CHECK_FAILED", "error")]


def test_clock_offsets_read_per_node():
    problems = sd.log_problems([], clock_offsets={"n1": 0.2, "n2": -42.0, "n3": None})
    assert [(p["code"], p["subject"]) for p in problems] == [("SLURM_MUNGE_CLOCK_SKEW", "slurm node n2")]
    assert sd.log_problems([], clock_offsets={"n2": -42.0}, max_offset_s=60) == []


def test_each_nodes_clock_offset_from_chronyc_tracking():
    skewed = sd.parse_chronyc_tracking(fixture("chronyc_tracking_1557s-slow_kube30__code-index-18590833163.txt"))
    good = sd.parse_chronyc_tracking(fixture("chronyc_tracking_synchronised__code-index-6414492728.txt"))
    assert skewed == {"offset_s": -1557.763061523, "synchronised": True}
    assert good == {"offset_s": -0.000107969, "synchronised": True}
    problems = sd.clock_problems({"kube30": skewed, "n2": good})
    assert codes(problems) == [("SLURM_MUNGE_CLOCK_SKEW", "error")] and "kube30" in problems[0]["subject"]
    assert "-1557.8 s" in problems[0]["message"]
    unsynced = dict(good, synchronised=False)
    assert codes(sd.clock_problems({"n3": unsynced})) == [("SLURM_CLOCK_UNSYNCED", "warning")]


def test_gres_and_cfgtres_compared_only_where_cfgtres_tracks_gpus():
    nodes = sd.parse_scontrol_nodes("NodeName=n1 State=IDLE Gres=gpu:a100:8 CfgTRES=cpu=64,mem=500G,billing=64\n")
    assert sd.node_problems(nodes) == []
    nodes = sd.parse_scontrol_nodes("NodeName=n1 State=IDLE Gres=gpu:a100:8 CfgTRES=cpu=64,mem=500G,gres/gpu=4\n")
    assert codes(sd.node_problems(nodes)) == [("SLURM_GRES_MISMATCH", "warning")]
