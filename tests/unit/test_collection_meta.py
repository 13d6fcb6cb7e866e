"""galaxy.yml and requirements.yml declare every collection the shipped content uses, and agree.

A collection is "used" when a task, module_defaults group, inventory plugin or filter of the tree names
it by FQCN (``<namespace>.<name>.<plugin>``). An undeclared one breaks an install from the tarball on a
machine without it (as community.crypto did for ssh_trust before 0.2.0).
"""
from __future__ import annotations

import os
import re

import ansible_collections
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Folders shipped in the tarball that hold Ansible content (tests/ only holds Python tests and fixtures).
CONTENT = ("roles", "playbooks", "plugins", "benchmarks", "molecule", "inventory", "meta")
SELF_AND_CORE = {"ddp.cluster", "ansible.builtin", "ansible.legacy"}
# `<ns>.<coll>.<plugin>` as a task key, a module_defaults group, a plugin setting or a filter/lookup call.
FQCN = re.compile(r"(?:^|[\s\-\"'|(/])([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\b(?=\s*[:(,'\"\n]|\s*$)",
                  re.MULTILINE)


def _load(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def known_collection(name):
    """True for a collection that galaxy.yml declares, or that the `ansible` package (or any collection path
    on sys.path) holds. The declared ones count whether installed or not: the `ansible` package 14 (unlike 12)
    no longer holds awx.awx."""
    if name in _load("galaxy.yml")["dependencies"]:
        return True
    namespace, collection = name.split(".")
    return any(os.path.isfile(os.path.join(base, namespace, collection, "MANIFEST.json"))
               for base in ansible_collections.__path__)


def used_collections():
    used = {}
    for top in CONTENT:
        for folder, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith((".yml", ".yaml", ".j2")):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                for match in FQCN.finditer(text):
                    collection = "%s.%s" % match.group(1, 2)
                    if collection not in SELF_AND_CORE and known_collection(collection):
                        used.setdefault(collection, set()).add(os.path.relpath(path, ROOT))
    return used


def test_the_scan_finds_known_uses():
    assert known_collection("community.general") and not known_collection("net.core")
    used = used_collections()
    assert "roles/ssh_trust/tasks/main.yml" in used["community.crypto"]
    assert "playbooks/awx_setup.yml" in used["awx.awx"]


def test_every_used_collection_is_declared():
    declared = set(_load("galaxy.yml")["dependencies"])
    used = used_collections()
    missing = dict((name, sorted(paths)) for name, paths in used.items() if name not in declared)
    assert missing == {}, "used but not in galaxy.yml dependencies"
    assert sorted(declared - set(used)) == [], "declared but not used"


def test_requirements_yml_matches_galaxy_yml():
    galaxy = _load("galaxy.yml")["dependencies"]
    requirements = dict((c["name"], c["version"]) for c in _load("requirements.yml")["collections"])
    assert requirements == galaxy


def test_every_dependency_has_a_bounded_range():
    for name, spec in _load("galaxy.yml")["dependencies"].items():
        assert re.match(r"^>=\d+\.\d+\.\d+,<\d+\.\d+\.\d+$", spec), (name, spec)


def test_execution_environment_installs_requirements_yml():
    assert _load("execution-environment.yml")["dependencies"]["galaxy"] == "requirements.yml"
