"""The environment for an Ansible command that must use this checkout's ddp.cluster.

The repository's ansible.cfg gives ``collections_path = ./collections`` (a committed symlink back to the
checkout) and ``roles_path = ./roles``, so ~/.ansible/collections and /usr/share/ansible/collections are not
searched at all. What can still shadow the checkout is the caller's environment: ``ANSIBLE_COLLECTIONS_PATH``
(or the old ``ANSIBLE_COLLECTIONS_PATHS``), ``ANSIBLE_ROLES_PATH``, or ``ANSIBLE_CONFIG`` naming another
file, all of which beat ansible.cfg. :func:`checkout_env` drops them and names the checkout's ansible.cfg, so the
command reads it from any working directory. (The collections that the ``ansible`` package ships, on sys.path,
are still found: they are other collections, never ddp.cluster.)

pytest puts tests/ on sys.path (tests/conftest.py, no __init__.py), so any test can ``from checkout_env import``.
tests/unit/test_checkout_collection.py checks this, the Makefile and the Molecule scenarios.
"""
from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "ansible.cfg")
# Environment variables that beat ansible.cfg and could make Ansible find another ddp.cluster (or its roles).
SHADOWING = ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_ROLES_PATH")


def checkout_env(base=None, **extra):
    """``base`` (default os.environ) without :data:`SHADOWING`, with ANSIBLE_CONFIG = the checkout's, and ``extra``."""
    env = dict((k, v) for k, v in (os.environ if base is None else base).items() if k not in SHADOWING)
    env["ANSIBLE_CONFIG"] = CONFIG
    env.update(extra)
    return env
