"""Tests, make and Molecule use this checkout's ddp.cluster only: a copy in ~/.ansible/collections (or one that
an ANSIBLE_COLLECTIONS_PATH of the caller names) never shadows it.

The Ansible commands are read-only look-ups (ansible-doc, ansible-galaxy collection list) against stand-in
copies of ddp.cluster made in a temporary HOME; nothing is installed anywhere.
"""
from __future__ import annotations

import configparser
import glob
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from checkout_env import CONFIG, ROOT, SHADOWING, checkout_env

BIN = os.path.dirname(sys.executable)
COLLECTIONS = os.path.join(ROOT, "collections", "ansible_collections")
SHADOW_DOC = '''DOCUMENTATION = r"""
module: tcp_probe
short_description: a stale copy of ddp.cluster
description: [not the checkout]
author: nobody
"""
'''
# Tests that start Ansible without checkout_env, and why that cannot pick another ddp.cluster.
OWN_RESOLUTION = {
    "tests/unit/test_awx_surveys.py": "renders a vars file with ansible.builtin.debug only: no ddp.cluster content",
    "tests/integration/test_awx_runner.py": "ansible-runner runs the job's own copy of the project, which the test "
                                            "asserts is the one used",
}


def _shadow(base):
    """A stand-in ddp.cluster 9.9.9 under ``base``/ansible_collections (what a stale `ansible-galaxy install` leaves)."""
    path = os.path.join(str(base), "ansible_collections", "ddp", "cluster")
    os.makedirs(os.path.join(path, "plugins", "modules"))
    with open(os.path.join(path, "MANIFEST.json"), "w") as handle:
        json.dump({"collection_info": {"namespace": "ddp", "name": "cluster", "version": "9.9.9"},
                   "file_manifest_file": {"name": "FILES.json", "ftype": "file", "format": 1}}, handle)
    with open(os.path.join(path, "FILES.json"), "w") as handle:
        json.dump({"files": [], "format": 1}, handle)
    with open(os.path.join(path, "plugins", "modules", "tcp_probe.py"), "w") as handle:
        handle.write(SHADOW_DOC)
    return str(base)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A caller's environment with a stale copy in ~/.ansible/collections and another in ANSIBLE_COLLECTIONS_PATH."""
    tmp = tmp_path_factory.mktemp("shadows")
    home = tmp / "home"
    _shadow(home / ".ansible" / "collections")
    elsewhere = _shadow(tmp / "elsewhere")
    env = dict(os.environ, HOME=str(home), ANSIBLE_COLLECTIONS_PATH=elsewhere, ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"))
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_ROLES_PATH"):
        env.pop(name, None)
    return {"env": env, "outside": str(tmp), "elsewhere": elsewhere}


def _doc_file(env, cwd):
    proc = subprocess.run([os.path.join(BIN, "ansible-doc"), "-t", "module", "ddp.cluster.tcp_probe", "--json"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return os.path.realpath(json.loads(proc.stdout)["ddp.cluster.tcp_probe"]["doc"]["filename"])


def _listed(env, cwd):
    proc = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "list", "ddp.cluster", "--format", "json"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _inside_checkout(path):
    return os.path.realpath(path).startswith(os.path.realpath(ROOT) + os.sep)


def test_checkout_env_resolves_the_checkout_from_anywhere(hostile):
    env = checkout_env(hostile["env"])
    for cwd in (ROOT, hostile["outside"]):
        filename = _doc_file(env, cwd)
        assert _inside_checkout(filename) and filename.endswith(os.path.join("plugins", "modules", "tcp_probe.py"))
        # The only ddp.cluster Ansible sees at all is the checkout's (not ~/.ansible, /usr/share/ansible ...).
        assert list(_listed(env, cwd)) == [COLLECTIONS]


def test_ansible_cfg_alone_ignores_the_copy_in_home(hostile):
    env = dict(hostile["env"])
    env.pop("ANSIBLE_COLLECTIONS_PATH")
    assert _inside_checkout(_doc_file(env, ROOT))


def test_the_check_sees_a_shadow_when_there_is_one(hostile):
    # What checkout_env prevents: the caller's ANSIBLE_COLLECTIONS_PATH beats ansible.cfg.
    assert _doc_file(hostile["env"], ROOT).startswith(os.path.realpath(hostile["elsewhere"]))


def test_python_imports_come_from_the_checkout():
    from ansible_collections.ddp.cluster.plugins.module_utils.system import openpgp
    assert _inside_checkout(openpgp.__file__)


def test_ansible_cfg_points_at_the_checkout():
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    assert parser.get("defaults", "collections_path") == "./collections"
    assert parser.get("defaults", "roles_path") == "./roles"
    assert os.path.realpath(os.path.join(COLLECTIONS, "ddp", "cluster")) == os.path.realpath(ROOT)


def test_make_does_not_pass_on_variables_that_beat_ansible_cfg():
    with open(os.path.join(ROOT, "Makefile")) as handle:
        text = handle.read()
    unexported = set()
    for line in re.findall(r"^unexport (.+)$", text, re.M):
        unexported.update(line.split())
    assert set(SHADOWING) <= unexported
    assert not re.search(r"^\s*(export\s+)?(%s)\s*[:?]?=" % "|".join(SHADOWING), text, re.M)


@pytest.mark.parametrize("scenario", sorted(glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml"))),
                         ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_molecule_uses_the_checkout(scenario):
    with open(scenario) as handle:
        config = yaml.safe_load(handle)
    env = dict((config.get("provisioner") or {}).get("env") or {})
    env.update((config.get("ansible") or {}).get("env") or {})
    assert env.get("ANSIBLE_COLLECTIONS_PATH") == "${MOLECULE_PROJECT_DIRECTORY}/collections"


def test_tests_that_start_ansible_use_checkout_env():
    starts_ansible = re.compile(r"ansible-playbook|ansible-doc|ansible-galaxy|ansible-runner|ANSIBLE_BIN|PLAYBOOK_BIN"
                                r"|RUNNER_BIN|\"ansible\"")
    offenders = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if rel in OWN_RESOLUTION or rel == "tests/unit/test_checkout_collection.py":
            continue
        with open(path) as handle:
            text = handle.read()
        if "subprocess" not in text or not starts_ansible.search(text):
            continue
        # checkout_env, or an explicit ANSIBLE_COLLECTIONS_PATH (the tests of the built tarball install it there).
        if "checkout_env(" not in text and "ANSIBLE_COLLECTIONS_PATH=" not in text:
            offenders.append(rel)
    assert offenders == []
