"""Slurm logic on real outputs (tests/unit/fixtures/slurm, captured on the local cluster; SOURCES.md there)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.gpu import parsers as gpu_parsers
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import nodes as slurm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "slurm")
GPU_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu")


def fixture(name, folder=FIXTURES):
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


def test_every_fixture_is_listed_in_sources():
    sources = fixture("SOURCES.md")
    for name in os.listdir(FIXTURES):
        if name != "SOURCES.md":
            assert name in sources, name


# ------------------------------------------------------------------ slurmd -C and node lines

def test_slurmd_c_of_a_real_node():
    hw = slurm.parse_slurmd_c(fixture("slurmd_C_debian12_podman_2cpu.txt"))
    assert hw == {"NodeName": "ddp-node1", "CPUs": 2, "Boards": 1, "SocketsPerBoard": 1, "CoresPerSocket": 2,
                  "ThreadsPerCore": 1, "RealMemory": 24105}


@pytest.mark.parametrize("text, needle", [
    ("", "no NodeName"),
    ("slurmd: error: Unable to open config\n", "no NodeName"),
    ("NodeName=n1 CPUs=2 Boards=1\n", "lacks SocketsPerBoard"),
    ("NodeName=n1 CPUs=two Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1", "not a number"),
    (fixture("sinfo_N_drained-ours_draining-operator.txt"), "no NodeName"),
])
def test_slurmd_c_refuses_other_text(text, needle):
    with pytest.raises(slurm.SlurmParseError, match=needle):
        slurm.parse_slurmd_c(text)


def test_cpu_node_line_has_no_gres_and_keeps_the_reserve():
    entry = slurm.node_entry(slurm.parse_slurmd_c(fixture("slurmd_C_debian12_podman_2cpu.txt")), [], 1024)
    assert entry["line"] == ("NodeName=ddp-node1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 "
                             "ThreadsPerCore=1 RealMemory=23081")
    assert entry["gres"] == [] and entry["gpus"] == 0 and entry["gres_type"] is None
    assert entry["mem_per_cpu"] == 23081 // 2


def test_gpu_node_from_real_nvidia_smi_names():
    text = fixture("nvidia-smi_query-gpu_name-busid-vbios_csv_8xH100_elided__ml-engineering.txt", GPU_FIXTURES)
    csv = "\n".join(line for line in text.splitlines() if not line.startswith(("$", "[...]")))
    gpus = gpu_parsers.parse_query_gpu(csv)["gpus"]
    assert len(gpus) >= 2
    hw = {"NodeName": "gpu1", "CPUs": 224, "Boards": 1, "SocketsPerBoard": 2, "CoresPerSocket": 56,
          "ThreadsPerCore": 2, "RealMemory": 2063937}
    entry = slurm.node_entry(hw, gpus, 4096, addr="10.0.0.11")
    assert entry["gres_type"] == "h100"
    assert entry["line"].startswith("NodeName=gpu1 NodeAddr=10.0.0.11 CPUs=224 ")
    assert entry["line"].endswith("RealMemory=2059841 Gres=gpu:h100:%d" % len(gpus))
    assert entry["gres"][0] == "NodeName=gpu1 Name=gpu Type=h100 File=/dev/nvidia0"
    assert len(entry["gres"]) == len(gpus)


@pytest.mark.parametrize("name, kind", [
    ("NVIDIA A100-SXM4-80GB", "a100"),          # telegraf a100-sxm4-v12.xml product name
    ("NVIDIA H100 80GB HBM3", "h100"),          # nvidia_gpu_exporter capture
    ("NVIDIA A100 80GB PCIe", "a100"),
    ("Tesla V100-SXM2-32GB", "v100"),
    ("NVIDIA GeForce RTX 4090", "4090"),
    ("NVIDIA L40S", "l40s"),
    ("", "gpu"),
    (None, "gpu"),
])
def test_gres_type(name, kind):
    assert slurm.gres_type(name) == kind


def test_mixed_gpu_models_need_an_explicit_type():
    hw = slurm.parse_slurmd_c(fixture("slurmd_C_debian12_podman_2cpu.txt"))
    gpus = [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"index": 1, "name": "NVIDIA H100 80GB HBM3"}]
    with pytest.raises(slurm.SlurmParseError, match="slurm_gres_type"):
        slurm.node_entry(hw, gpus)
    entry = slurm.node_entry(hw, gpus, gpu_type="mixed")
    assert entry["line"].endswith("Gres=gpu:mixed:2")


# ------------------------------------------------------------------ process tracking

@pytest.mark.parametrize("vtype, vrole, writable, choice, mode", [
    ("podman", "guest", True, "auto", "linuxproc"),
    ("container", "guest", False, "auto", "linuxproc"),
    ("kvm", "guest", True, "auto", "cgroup"),
    ("NA", "NA", True, "auto", "cgroup"),
    ("NA", "NA", False, "auto", "linuxproc"),
    ("podman", "guest", True, "cgroup", "cgroup"),
    ("kvm", "host", True, "linuxproc", "linuxproc"),
])
def test_process_tracking(vtype, vrole, writable, choice, mode):
    out = slurm.process_tracking(vtype, vrole, writable, choice)
    assert out["mode"] == mode
    if mode == "cgroup":
        assert out["proctrack"] == "proctrack/cgroup" and "task/cgroup" in out["task"]
    else:
        assert out["proctrack"] == "proctrack/linuxproc" and out["task"] == "task/none"


def test_process_tracking_refuses_an_unknown_choice():
    with pytest.raises(slurm.SlurmParseError, match="auto, cgroup or linuxproc"):
        slurm.process_tracking("kvm", "guest", True, "pgid")


# ------------------------------------------------------------------ sinfo states

def test_sinfo_drains_ours_and_operators():
    states = slurm.parse_sinfo_nodes(fixture("sinfo_N_drained-ours_draining-operator.txt"))
    assert states["ddp-node1"] == {"state": "idle", "raw": "idle", "responding": True, "drain": False,
                                   "reason": "", "ours": False}
    assert states["ddp-node2"]["drain"] and states["ddp-node2"]["ours"]
    assert states["ddp-node2"]["reason"] == "ddp:IFNAME_NOT_FOUND"
    assert states["ddp-node3"]["drain"] and not states["ddp-node3"]["ours"]
    assert states["ddp-node3"]["state"] == "draining"


@pytest.mark.parametrize("name, unavailable", [
    ("sinfo_N_drained-ours_draining-operator.txt", ["ddp-node2", "ddp-node3"]),
    ("sinfo_N_completing-not-responding.txt", ["ddp-node3"]),
    ("sinfo_N_unknown-not-responding.txt", ["ddp-node2", "ddp-node3"]),
])
def test_unavailable_nodes(name, unavailable):
    states = slurm.parse_sinfo_nodes(fixture(name))
    assert [u["node"] for u in slurm.unavailable_nodes(states)] == unavailable


def test_unavailable_names_a_node_missing_from_sinfo():
    states = slurm.parse_sinfo_nodes(fixture("sinfo_N_completing-not-responding.txt"))
    out = slurm.unavailable_nodes(states, ["ddp-node1", "ddp-node9"])
    assert out == [{"node": "ddp-node9", "state": "missing", "reason": "not in sinfo (not in slurm.conf?)"}]


@pytest.mark.parametrize("text", [
    fixture("slurmd_C_debian12_podman_2cpu.txt"),
    "slurmd: error: Unable to open config\n",
])
def test_sinfo_parser_refuses_other_formats(text):
    with pytest.raises(slurm.SlurmParseError, match="unexpected line"):
        slurm.parse_sinfo_nodes(text)


def test_sinfo_parser_reads_slurms_other_formats_into_the_same_keys():
    states = slurm.parse_sinfo_nodes("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\nddp*  up infinite 1 idle ddp-node1\n")
    assert states["ddp-node1"]["state"] == "idle" and states["ddp-node1"]["drain"] is False
    states = slurm.parse_sinfo_nodes(fixture("sinfo_Node_long_drained-Low-RealMemory__integrated_methane_inversion-30.txt"))
    assert states["ip-172-31-79-91"]["drain"] and states["ip-172-31-79-91"]["reason"] == "Low RealMemory"
    assert not states["ip-172-31-79-91"]["ours"]


def test_drain_plan_names_a_drain_slurm_set_itself_apart_from_an_operators():
    text = fixture("sinfo_Node_long_drained-Low-RealMemory__integrated_methane_inversion-30.txt")
    text += "ip-9 1 debug* drained 36 1:36:1 70235 0 1 (null) swap disk\n"
    states = slurm.parse_sinfo_nodes(text)
    plan = slurm.drain_plan(states, {"ip-172-31-79-91": [], "ip-9": []})
    assert plan["slurm"] == {"ip-172-31-79-91": "Low RealMemory"} and plan["operator"] == ["ip-9"]


# ------------------------------------------------------------------ drain / resume

@pytest.mark.parametrize("errors, drain, resume, operator", [
    # node2 drained by us and now healthy -> resumed; node3's operator drain left alone even with errors.
    ({"ddp-node1": [], "ddp-node2": [], "ddp-node3": ["GPU_ECC_UNCORRECTABLE"]}, {}, ["ddp-node2"], ["ddp-node3"]),
    # node1 gets errors -> drained with every code, sorted; node2 still broken with the same code -> unchanged.
    ({"ddp-node1": ["IFNAME_NOT_FOUND", "GPU_XID", "GPU_XID"], "ddp-node2": ["IFNAME_NOT_FOUND"]},
     {"ddp-node1": "ddp:GPU_XID,IFNAME_NOT_FOUND"}, [], []),
    # node2 still broken but with another code -> the reason is updated (still ours).
    ({"ddp-node2": ["GPU_ECC_UNCORRECTABLE"]}, {"ddp-node2": "ddp:GPU_ECC_UNCORRECTABLE"}, [], []),
    # A node Slurm does not know is not touched.
    ({"ddp-node9": ["X"]}, {}, [], []),
])
def test_drain_plan(errors, drain, resume, operator):
    states = slurm.parse_sinfo_nodes(fixture("sinfo_N_drained-ours_draining-operator.txt"))
    plan = slurm.drain_plan(states, errors)
    assert plan["drain"] == drain
    assert plan["resume"] == resume
    assert plan["operator"] == operator


# ------------------------------------------------------------------ accounts

WANTED = [{"name": "ddp", "uid": 2000, "gid": 2000, "variable": "ddp_cluster_uid"},
          {"name": "slurm", "uid": 64030, "gid": 64030, "variable": "slurm_uid / slurm_gid"},
          {"name": "munge", "uid": 950, "gid": 950, "variable": "slurm_munge_uid / slurm_munge_gid"}]


def test_accounts_made_by_the_packages_are_refused_with_the_node():
    problems = slurm.account_problems("ddp-node1", fixture("getent_passwd_debian12_slurm-munge-installed.txt"),
                                      fixture("getent_group_debian12_slurm-munge-installed.txt"), WANTED)
    subjects = [p["subject"] for p in problems]
    assert subjects == ["ddp-node1: user ddp", "ddp-node1: group ddp", "ddp-node1: user munge",
                        "ddp-node1: group munge"]
    assert all(p["code"] == "ACCOUNT_ID_MISMATCH" and p["severity"] == "error" for p in problems)
    assert "has id 103 on ddp-node1, the cluster needs 950" in problems[2]["message"]


def test_the_combined_listing_of_one_command_gives_the_same_problems():
    """preflight reads ``getent passwd; echo '--- group'; getent group`` in one command per node."""
    passwd = fixture("getent_passwd_debian12_slurm-munge-installed.txt")
    group = fixture("getent_group_debian12_slurm-munge-installed.txt")
    combined = passwd.rstrip("\n") + "\n--- group\n" + group
    expected = slurm.account_problems("ddp-node1", passwd, group, WANTED)
    assert expected
    assert slurm.account_problems("ddp-node1", combined, None, WANTED) == expected
    # without the marker nothing is read as a group: only the users' problems are left
    users_only = slurm.account_problems("ddp-node1", passwd, None, WANTED)
    assert [p["subject"] for p in users_only] == ["ddp-node1: user ddp", "ddp-node1: user munge"]


def test_ids_that_match_or_do_not_exist_yet_are_fine():
    wanted = [dict(WANTED[1]), {"name": "newuser", "uid": 3000, "gid": 3000, "variable": "v"}]
    assert slurm.account_problems("n", fixture("getent_passwd_debian12_slurm-munge-installed.txt"),
                                  fixture("getent_group_debian12_slurm-munge-installed.txt"), wanted) == []


def test_an_id_taken_by_another_name_is_refused():
    wanted = [{"name": "ddp", "uid": 64030, "gid": 64030, "variable": "ddp_cluster_uid"}]
    passwd = "\n".join(l for l in fixture("getent_passwd_debian12_slurm-munge-installed.txt").splitlines()
                       if not l.startswith("ddp:"))
    group = "\n".join(l for l in fixture("getent_group_debian12_slurm-munge-installed.txt").splitlines()
                      if not l.startswith("ddp:"))
    problems = slurm.account_problems("n2", passwd, group, wanted)
    assert [p["message"] for p in problems] == ["id 64030 for user ddp is already taken on n2 by slurm",
                                                "id 64030 for group ddp is already taken on n2 by slurm"]


# ------------------------------------------------------------------ failed jobs

def test_failed_job_names_the_node_whose_slurmd_stopped():
    states = slurm.parse_sinfo_nodes(fixture("sinfo_N_completing-not-responding.txt"))
    out = slurm.job_failure_nodes(["ddp-node1", "ddp-node2", "ddp-node3"], states,
                                  fixture("srun_task_launch_failed_slurmd_stopped.txt"))
    assert [o["node"] for o in out] == ["ddp-node3"]
    assert "Communication connection failure" in out[0]["why"]
    assert "completing*" in out[0]["why"]


def test_failed_job_without_a_node_to_blame():
    states = slurm.parse_sinfo_nodes("ddp-node1|idle|none\nddp-node2|idle|none\n")
    assert slurm.job_failure_nodes(["ddp-node1", "ddp-node2"], states, "Traceback ...\nValueError: x") == []


# ------------------------------------------------------------------ jobs on a drained node

def test_job_ids_of_the_jobs_running_on_a_node():
    assert slurm.parse_job_ids(fixture("squeue_h_A_running-on-node.txt")) == [4, 5]
    assert slurm.parse_job_ids("") == [] and slurm.parse_job_ids("12\n\n7\n12\n") == [7, 12]


@pytest.mark.parametrize("text", ["JOBID\n4\n", "4 ddp-el2\n", "4_1\n"])
def test_job_ids_refuse_other_formats(text):
    with pytest.raises(slurm.SlurmParseError, match="squeue -h -o %A"):
        slurm.parse_job_ids(text)
