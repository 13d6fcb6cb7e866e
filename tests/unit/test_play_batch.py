"""The roles that playbooks/rolling.yml runs batch by batch name the nodes of the run ``ansible_play_batch``.

Under ``serial`` (rolling.yml's ``ddp_rolling_batch``) ansible-core's ``ansible_play_hosts`` lists every host of the
play, the later batches' included, while ``ansible_play_batch`` lists the batch that runs (ansible-core's
VariableManager: ``ansible_play_hosts`` is the play's hosts less the failed ones, ``ansible_play_batch`` the current
batch less the failed ones; the two are the same in a play without ``serial``). A role that reads a result of every
host of ``ansible_play_hosts`` fails in the first batch on a host whose batch has not run ("has no attribute"), and one
that takes the nodes outside ``ansible_play_hosts`` for the nodes outside a ``--limit`` finds none. With
``ansible_play_batch`` a batch is a run limited to its nodes, which the roles already handle (the nodes outside it get
their known_hosts, firewall sources and slurm.conf from the batch's run). ``ansible_play_hosts_all`` is not flagged:
the roles read it with a default for each host (the failed hosts' findings included).
"""
from __future__ import annotations

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAY_HOSTS = re.compile(r"\bansible_play_hosts\b(?!_all)")
# A role another role includes (include_role/import_role ... name: ddp.cluster.nvidia_repo) runs in the same play.
INCLUDED = re.compile(r"(?:include|import)_role:\s*\n(?:\s+\w+:.*\n)*?\s+name:\s*ddp\.cluster\.(\w+)")


def rolling_roles():
    """The roles of rolling.yml's batch play (the play with ``serial``), without the ddp.cluster. prefix."""
    with open(os.path.join(ROOT, "playbooks", "rolling.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    batch = [play for play in plays if "serial" in play]
    assert len(batch) == 1, "rolling.yml has one play with serial"
    names = [entry["role"] if isinstance(entry, dict) else entry for entry in batch[0]["roles"]]
    roles = [name.split(".")[-1] for name in names]
    for role in roles:  # grows while it is walked: the roles they include, and so on
        for path in role_files(role):
            with open(path, encoding="utf-8") as handle:
                roles.extend(name for name in INCLUDED.findall(handle.read()) if name not in roles)
    return roles


def role_files(role):
    """The role's YAML and templates (not files/, which the role copies to the nodes as they are)."""
    return [path for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "**", "*"), recursive=True))
            if os.path.isfile(path) and "/files/" not in path and path.endswith((".yml", ".yaml", ".j2"))]


def play_hosts_uses(role):
    """``path:line`` of each use of ``ansible_play_hosts`` in the role's YAML and templates (not in comment lines)."""
    found = []
    for path in role_files(role):
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                # a comment may name it (this rule's own explanation); a YAML comment line is not templated
                if PLAY_HOSTS.search(line) and not line.lstrip().startswith("#"):
                    found.append("%s:%d" % (os.path.relpath(path, ROOT), number))
    return found


def test_the_scan_finds_play_hosts_and_leaves_play_hosts_all():
    assert PLAY_HOSTS.search("{{ ansible_play_hosts | length }}")
    assert PLAY_HOSTS.search("difference(ansible_play_hosts)")
    assert not PLAY_HOSTS.search("{{ ansible_play_hosts_all | length }}")
    assert not PLAY_HOSTS.search("{{ ansible_play_batch | length }}")


def test_rolling_runs_the_site_roles_and_those_they_include():
    roles = rolling_roles()
    assert {"preflight", "rdma", "ssh_trust", "firewall", "node_health", "slurm", "pytorch_env"} <= set(roles), roles
    assert "nvidia_repo" in roles, roles  # included by nvidia_driver, cuda_toolkit, cudnn and nccl
    assert INCLUDED.findall("- name: x\n  ansible.builtin.include_role:\n    name: ddp.cluster.nvidia_repo\n") == [
        "nvidia_repo"]


def test_the_roles_rolling_runs_name_the_batch_not_every_host_of_the_play():
    uses = {role: play_hosts_uses(role) for role in rolling_roles()}
    assert not {role: found for role, found in uses.items() if found}, (
        "under rolling.yml's serial, ansible_play_hosts lists the later batches' hosts too: use ansible_play_batch")
