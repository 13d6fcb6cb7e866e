"""Bad inventory input stops site.yml in its validate stage (the preflight rules), on the controller, before any change.

Each case runs the real ``ansible-playbook site.yml`` against nodes that do not exist
(tests/integration/inventory): a refusal must come from the preflight check with the variable
named; a good input must get past it (and then fail to reach the absent nodes).
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


def run_site(extra_vars, inventory=INVENTORY):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    cmd = [PLAYBOOK_BIN, "-i", inventory, "site.yml", "-e", json.dumps(extra_vars)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("extra_vars, code, variable", [
    ({"ddp_head_group": "no_such_group"}, "PREFLIGHT_NO_HEAD", "ddp_head_group"),
    ({"ddp_rdzv_addr": "localhost"}, "PREFLIGHT_LOOPBACK_RDZV", "ddp_rdzv_addr"),
    ({"ddp_rdzv_addr": "127.0.0.1"}, "PREFLIGHT_LOOPBACK_RDZV", "ddp_rdzv_addr"),
    ({"ddp_nproc_per_node": 0}, "PREFLIGHT_BAD_NPROC", "ddp_nproc_per_node"),
    ({"ddp_rdzv_port": 70000}, "PREFLIGHT_BAD_PORT", "ddp_rdzv_port"),
    ({"ddp_rdzv_port": 0}, "PREFLIGHT_BAD_PORT", "ddp_rdzv_port"),
    ({"ddp_torch_version": "2.99.0"}, "STACK_UNKNOWN_TORCH", "ddp_torch_version"),
    ({"ddp_torch_version": "2.1.0", "ddp_torchvision_version": "0.17.0"},
     "STACK_TORCHVISION_MISMATCH", "ddp_torchvision_version"),
    ({"ddp_torch_version": "2.1.0", "ddp_cuda_version": "12.1", "ddp_nvidia_driver_version": "525.60.13"},
     "STACK_DRIVER_TOO_OLD", "ddp_nvidia_driver_version"),
])
def test_bad_input_is_refused_before_any_change(extra_vars, code, variable):
    proc = run_site(extra_vars)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Refused before any change: the validate stage found" in out, out[-3000:]
    assert "[%s] %s:" % (code, variable) in out, out[-3000:]
    # Nothing was attempted on a node: the refusal is the only failure, and no task changed anything.
    assert "Look for a Python" not in out
    assert "changed=0" in out and "unreachable=0" in out


def test_seed_stack_passes_preflight():
    proc = run_site({"ddp_torch_version": "2.1.0", "ddp_torchvision_version": "0.16.0",
                     "ddp_cuda_version": "12.1", "ddp_nvidia_driver_version": "535.104.05"})
    out = proc.stdout + proc.stderr
    # Past the refusal, the play goes on to the (absent) nodes and fails to reach them.
    assert "Refused before any change" not in out, out[-3000:]
    assert "Look for a Python" in out


def test_empty_nodes_group_is_refused(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("---\nall:\n  hosts: {}\n")
    proc = run_site({}, inventory=str(inventory))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "[PREFLIGHT_NO_NODES] ddp_nodes_group" in out, out[-3000:]
