"""The Molecule nodes as testinfra reaches them, for every test module of this scenario (``testinfra_hosts``).

Over SSH with the ssh_config that create.yml wrote (roles/local_cluster: the controller's key for these nodes, their
known_hosts, host keys checked): testinfra's SSH backend, one ssh command per check on a ControlMaster socket.
(``"ddp_nodes"`` through the Ansible inventory would fall back to one ``ansible`` run per check, seconds each:
testinfra maps only a plain "ssh" connection, and reads the inventory plugin's ansible_host as an unsafe-tagged dict.)
"""
from __future__ import annotations

import os

NODES = ("ddp-mol1", "ddp-mol2")
SSH_CONFIG = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), ".cache", "local_cluster", "ssh", "ddp-mol",
                          "config")
TESTINFRA_HOSTS = ["ssh://%s?ssh_config=%s&controlpersist=120" % (node, SSH_CONFIG) for node in NODES]
