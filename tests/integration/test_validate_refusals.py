"""Every bad input class is refused by the validate stage, on the controller, before any node is contacted.

The real ``ansible-playbook`` runs ``site.yml`` and each stage playbook alone against nodes that do not
exist (tests/integration/inventory: any connection to them fails). A refusal must come from the validate
play on localhost with ``[CODE] variable:``, and nothing may have been attempted on a node.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from checkout_env import checkout_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(ROOT, "tests", "integration", "inventory", "hosts.yml")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
STAGES = ["bootstrap", "preflight", "gpu_stack", "network", "access", "scheduler", "pytorch_env", "health",
          "benchmark"]

# (extra vars, code, variable): one row per bad input class.
CASES = [
    ({"rdma_mod": "ofed"}, "VALIDATE_UNKNOWN_VAR", "rdma_mod"),
    ({"rdma_mode": "ofd"}, "VALIDATE_CHOICE", "rdma_mode"),
    ({"ddp_benchmark_launcher": "torchrum"}, "VALIDATE_CHOICE", "ddp_benchmark_launcher"),
    ({"ddp_scheduler": "pbs"}, "VALIDATE_CHOICE", "ddp_scheduler"),
    ({"rdma_cma_roce_mode": "RoCE v2'; touch /tmp/x; echo '"}, "VALIDATE_CHOICE", "rdma_cma_roce_mode"),
    ({"rdma_mtu": 100000}, "VALIDATE_RANGE", "rdma_mtu"),
    ({"firewall_extra_ports": [70000]}, "VALIDATE_RANGE", "firewall_extra_ports"),
    ({"ddp_health_join_timeout": -1}, "VALIDATE_RANGE", "ddp_health_join_timeout"),
    ({"ddp_benchmark_variants": "rdma_off"}, "VALIDATE_TYPE", "ddp_benchmark_variants"),
    ({"ddp_torch_version": 2.10}, "VALIDATE_VERSION_NUMBER", "ddp_torch_version"),
    ({"ddp_rdzv_addr": "head node"}, "VALIDATE_BAD_ADDRESS", "ddp_rdzv_addr"),
    ({"ddp_rdzv_addr": ["10.0.0.1"]}, "VALIDATE_BAD_ADDRESS", "ddp_rdzv_addr"),
    ({"ddp_rdzv_addr": 10}, "VALIDATE_BAD_ADDRESS", "ddp_rdzv_addr"),
    ({"ddp_rdzv_addr": "127.0.0.1"}, "PREFLIGHT_LOOPBACK_RDZV", "ddp_rdzv_addr"),
    ({"ansible_host": "10.0.0.5"}, "VALIDATE_DUPLICATE_HOST", "ansible_host"),
    ({"ddp_cluster_user": "root"}, "VALIDATE_ROOT_USER", "ddp_cluster_user"),
    ({"ddp_cluster_user": "Bad User"}, "VALIDATE_BAD_USER", "ddp_cluster_user"),
    ({"pytorch_env_kind": "conda"}, "VALIDATE_CONDA_NO_INSTALLER", "pytorch_env_miniforge_installer"),
    ({"rdma_nccl_overrides": {"NCCL_TIMEOUT": 5}}, "RDMA_NCCL_VAR_UNDOCUMENTED", "rdma_nccl_overrides.NCCL_TIMEOUT"),
    ({"ddp_benchmark_launcher": "slurm", "ddp_scheduler": "none"}, "VALIDATE_LAUNCHER_NEEDS_SLURM",
     "ddp_benchmark_launcher"),
    ({"pytorch_env_path": "/srv/other"}, "VALIDATE_ENV_PATH", "pytorch_env_path"),
    ({"ddp_torch_version": "2.1.0", "ddp_torchvision_version": "0.17.0"}, "STACK_TORCHVISION_MISMATCH",
     "ddp_torchvision_version"),
    ({"slurm_job_elastic": "3:2"}, "VALIDATE_ELASTIC_NODES", "slurm_job_elastic"),
    ({"ddp_shared_dir": "/tmp/checkpoints"}, "VALIDATE_SHARED_DIR", "ddp_shared_dir"),
    ({"ddp_rdzv_addr": "{{ ansible_default_ipv4.address }}"}, "VALIDATE_FACT_VARIABLE", "ddp_rdzv_addr"),
]
# A few classes against each stage playbook run alone (an AWX job template).
STAGE_CASES = [CASES[0], CASES[5], CASES[9], CASES[15]]


def run(playbook, extra_vars, inventory=INVENTORY):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    cmd = [PLAYBOOK_BIN, "-i", inventory, playbook, "-e", json.dumps(extra_vars)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc, proc.stdout + proc.stderr


def assert_refused_before_contact(proc, out, code, variable):
    assert proc.returncode != 0
    assert "Refused before any change: the validate stage found" in out, out[-3000:]
    assert "[%s] %s:" % (code, variable) in out, out[-3000:]
    # Only localhost ran a task: no node was contacted (any connection to the absent nodes fails).
    assert "UNREACHABLE" not in out and "ddp-absent" not in out.split("PLAY RECAP")[-1], out[-3000:]
    assert "localhost" in out.split("PLAY RECAP")[-1]


@pytest.mark.parametrize("extra_vars, code, variable", CASES, ids=["%s-%s" % (c[1], c[2]) for c in CASES])
def test_site_refuses_before_contact(extra_vars, code, variable):
    proc, out = run("site.yml", extra_vars)
    assert_refused_before_contact(proc, out, code, variable)


@pytest.mark.parametrize("stage", STAGES)
def test_stage_alone_refuses_before_contact(stage):
    for extra_vars, code, variable in STAGE_CASES:
        proc, out = run("playbooks/%s.yml" % stage, extra_vars)
        assert_refused_before_contact(proc, out, code, variable)


@pytest.mark.parametrize("name", ["bad node", "node,1"])
def test_bad_inventory_hostname(tmp_path, name):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "ddp_nodes:\n  hosts:\n    ddp-absent1:\n    '%s':\n  vars:\n    ansible_connection: containers.podman.podman\n"
        "ddp_head:\n  hosts:\n    ddp-absent1:\n" % name)
    proc, out = run("site.yml", {}, inventory=str(inventory))
    assert_refused_before_contact(proc, out, "VALIDATE_BAD_HOSTNAME", "inventory_hostname")


def test_group_vars_are_validated(tmp_path):
    """Values set in the nodes group's vars (not only extra vars) are seen on the controller."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "ddp_nodes:\n  hosts:\n    ddp-absent1:\n    ddp-absent2:\n  vars:\n"
        "    ansible_connection: containers.podman.podman\n    ddp_torch_version: 2.10\n    rdma_mod: ofed\n"
        "ddp_head:\n  hosts:\n    ddp-absent1:\n")
    proc, out = run("playbooks/network.yml", {}, inventory=str(inventory))
    assert_refused_before_contact(proc, out, "VALIDATE_VERSION_NUMBER", "ddp_torch_version")
    assert "[VALIDATE_UNKNOWN_VAR] rdma_mod:" in out and "rdma_mode" in out


def test_a_per_host_value_of_a_play_wide_variable_is_refused(tmp_path):
    """ssh_trust's summaries and stop follow the first node's ssh_trust_verify: one host's own value is refused, on
    the access stage alone too (where ssh_trust runs)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "ddp_nodes:\n  hosts:\n    ddp-absent1:\n    ddp-absent2:\n      ssh_trust_verify: false\n"
        "  vars:\n    ansible_connection: containers.podman.podman\nddp_head:\n  hosts:\n    ddp-absent1:\n")
    for playbook in ("site.yml", "playbooks/access.yml"):
        proc, out = run(playbook, {}, inventory=str(inventory))
        assert_refused_before_contact(proc, out, "VALIDATE_NOT_CLUSTER_WIDE", "ssh_trust_verify")
        assert "True (the default) on ddp-absent1; False on ddp-absent2" in out, out[-3000:]


def test_good_input_passes_validate_once_and_reaches_the_nodes():
    proc, out = run("site.yml", {"ddp_torch_version": "2.1.0"})
    assert "Refused before any change" not in out, out[-3000:]
    # Validated once: the later stage imports skip the check.
    assert out.count("validate | Check every input") == 1, out[-3000:]
    assert "Look for a Python" in out


# playbooks/shrink.yml's refusals (ddp_shrink_nodes): the head, the last node (every node named), a host not in the
# inventory; each refused by the validate stage before any node is contacted, so nothing is changed.
SHRINK_CASES = [
    (["ddp-absent1"], "the head node"),
    (["ddp-absent1", "ddp-absent2"], "the last node cannot be removed"),
    (["ddp-absent9"], "ddp-absent9: not a node of this inventory"),
]


@pytest.mark.parametrize("leaving, words", SHRINK_CASES, ids=["head", "last-node", "not-in-inventory"])
def test_shrink_refuses_before_contact(leaving, words):
    proc, out = run("playbooks/shrink.yml", {"ddp_shrink_nodes": leaving})
    assert_refused_before_contact(proc, out, "VALIDATE_SHRINK", "ddp_shrink_nodes")
    assert words in out, out[-3000:]


def test_shrink_without_nodes_is_refused_on_the_controller():
    proc, out = run("playbooks/shrink.yml", {})
    assert proc.returncode != 0 and "[DAY2_SHRINK_NOTHING]" in out, out[-3000:]
    assert "UNREACHABLE" not in out, out[-3000:]


def test_rolling_refuses_a_bad_batch_before_contact():
    proc, out = run("playbooks/rolling.yml", {"ddp_rolling_batch": 0})
    assert_refused_before_contact(proc, out, "VALIDATE_RANGE", "ddp_rolling_batch")
