"""Issue 40's security items on running nodes (after site.yml or the access and scheduler stages):

- (b) the cluster key is authorized only from the nodes' own addresses (authorized_keys ``from=``), and SSH between
  the nodes as the cluster user still works;
- (d) the firewall role stops on a node where firewalld does not run (FIREWALL_NOT_RUNNING), unless
  ``firewall_site_managed`` says the site manages its firewall (then it changes nothing and names the ports);
- (e) Slurm refuses root's jobs (``DisableRootJobs=YES``) and runs the cluster user's;
- (g) the node_health role refuses an interpreter for HealthCheckProgram that the cluster user owns
  (HEALTH_INTERPRETER_UNSAFE) and leaves the installed command as it was.

Nodes: DDP_IT_NODES (head first, default the Molecule nodes ddp-mol1,ddp-mol2), inventory DDP_IT_INVENTORY (default
molecule/local/inventory/nodes); the cluster user is ddp. Skipped when the nodes are not running; every test restores
what it changed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from checkout_env import checkout_env
from podman_nodes import running

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = os.environ.get("DDP_IT_NODES", "ddp-mol1,ddp-mol2").split(",")
HEAD, OTHER = NODES[0], NODES[1]
INVENTORY = os.environ.get("DDP_IT_INVENTORY", os.path.join(ROOT, "molecule", "local", "inventory", "nodes"))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
USER = "ddp"


def node(name, *argv, user=None, check=False):
    cmd = ["podman", "exec"] + (["--user", user] if user else []) + [name] + list(argv)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def _ready():
    return all(running(n) for n in NODES) and node(HEAD, "id", USER).returncode == 0


pytestmark = pytest.mark.skipif(not _ready(), reason="the nodes %s are not running with the cluster user %s (make test "
                                                     "starts the Molecule nodes)" % (",".join(NODES), USER))


def play(tmp_path, host, tasks, extra=None):
    path = tmp_path / "play.yml"
    path.write_text("- hosts: %s\n  gather_facts: false\n  become: true\n  tasks:\n%s" % (host, tasks))
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    cmd = [PLAYBOOK_BIN, "-i", INVENTORY, str(path), "-e", json.dumps(extra or {})]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc, proc.stdout + proc.stderr


def addresses(name):
    out = node(name, "hostname", "-I", check=True).stdout.split()
    return [a for a in out if ":" not in a or not a.lower().startswith("fe80")]


def test_cluster_key_is_authorized_from_the_nodes_only():
    home = node(HEAD, "sh", "-c", "getent passwd %s | cut -d: -f6" % USER, check=True).stdout.strip()
    lines = [l for l in node(HEAD, "cat", home + "/.ssh/authorized_keys", check=True).stdout.splitlines()
             if "ssh-ed25519" in l]
    assert lines and all(l.startswith('from="') for l in lines), lines
    allowed = lines[0].split('"')[1].split(",")
    for name in NODES:
        assert set(addresses(name)) <= set(allowed), (name, addresses(name), allowed)
    assert "0.0.0.0/0" not in allowed and "*" not in allowed
    ssh = node(HEAD, "ssh", "-o", "BatchMode=yes", OTHER, "true", user=USER)
    assert ssh.returncode == 0, ssh.stderr


def test_firewall_role_stops_without_firewalld_unless_the_site_manages_it(tmp_path):
    if node(OTHER, "firewall-cmd", "--state").returncode != 0:
        pytest.skip("firewalld does not run on %s" % OTHER)
    tasks = "    - ansible.builtin.include_role:\n        name: ddp.cluster.firewall\n"
    node(OTHER, "systemctl", "stop", "firewalld", check=True)
    try:
        proc, out = play(tmp_path, OTHER, tasks)
        assert proc.returncode != 0
        assert "[FIREWALL_NOT_RUNNING] firewall_site_managed" in out, out[-3000:]
        assert node(OTHER, "systemctl", "is-active", "firewalld").stdout.strip() != "active"  # never started by the role
        proc, out = play(tmp_path, OTHER, tasks, {"firewall_site_managed": True})
        assert proc.returncode == 0, out[-3000:]
        assert "firewall_site_managed is true" in out and "/tcp" in out, out[-3000:]
    finally:
        node(OTHER, "systemctl", "start", "firewalld", check=True)


def test_slurm_refuses_root_jobs_and_runs_the_cluster_users():
    if node(HEAD, "sinfo", "-h").returncode != 0:
        pytest.skip("Slurm is not set up on %s" % HEAD)
    assert "DisableRootJobs=YES" in node(HEAD, "cat", "/etc/slurm/slurm.conf", check=True).stdout
    root = node(HEAD, "srun", "-N1", "--time=1", "true")
    assert root.returncode != 0 and "Invalid user id" in root.stderr, root.stderr
    user = node(HEAD, "srun", "-N1", "--time=1", "true", user=USER)
    assert user.returncode == 0, user.stderr


def test_health_check_interpreter_of_the_cluster_user_is_refused(tmp_path):
    launcher = "/opt/ddp/bin/ddp-health-slurm"
    before = node(HEAD, "sha256sum", launcher).stdout
    node(HEAD, "install", "-d", "-o", USER, "-g", USER, "/opt/ddp-it-python", check=True)
    try:
        node(HEAD, "sh", "-c", "cp \"$(readlink -f /usr/bin/python3)\" /opt/ddp-it-python/python3 && "
                               "chown %s /opt/ddp-it-python/python3" % USER, check=True)
        tasks = "    - ansible.builtin.include_role:\n        name: ddp.cluster.node_health\n"
        proc, out = play(tmp_path, HEAD, tasks, {"node_health_python": "/opt/ddp-it-python/python3"})
        assert proc.returncode != 0
        assert "[HEALTH_INTERPRETER_UNSAFE] node_health_python" in out, out[-3000:]
        assert node(HEAD, "sha256sum", launcher).stdout == before
    finally:
        node(HEAD, "rm", "-rf", "/opt/ddp-it-python")
