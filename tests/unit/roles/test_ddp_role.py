"""The cluster-wide settings have one home, the role ddp.cluster.ddp (roles/ddp/defaults/main.yml), issue 35 item 2.

Every stage play lists the role first under ``roles:`` (so a play's ``hosts:`` and ``become:`` see the values) and
every role that reads one of its variables depends on it (so the role works in a playbook of one's own); no task,
template, role default or playbook gives a ``ddp_*`` variable an inline ``| default(...)`` of its own.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import validate
from role_files import ROOT

HOME_PATH = os.path.join(ROOT, "roles", "ddp", "defaults", "main.yml")
# The AWX controller's own connection settings, read by playbooks/awx_setup.yml on the controller alone and left out
# (omit) when unset, so that awx.awx falls back to CONTROLLER_HOST and the like: no value to give a home.
OWN_NAMESPACE = "ddp_awx_"
# A ddp_* name not preceded by a word character or a dot: __ddp_* facts and hostvars[...].ddp_* keys are not it.
INLINE_DEFAULT = re.compile(r"(?<![\w.'\"])(ddp_[a-z0-9_]+)\s*\|\s*default\(")
# Plays on the controller that read no cluster-wide setting: the local podman cluster and the AWX setup.
CONTROLLER_PLAYBOOKS = ("local_cluster.yml", "awx_setup.yml")


def _yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


HOME = _yaml(HOME_PATH)
_NAME = re.compile(r"(?<![\w.])(%s)(?![\w])" % "|".join(sorted(HOME, key=len, reverse=True)))


def _role_files(role):
    for path in glob.glob(os.path.join(ROOT, "roles", role, "**", "*"), recursive=True):
        if os.path.isfile(path) and path.endswith((".yml", ".j2")) and os.sep + "meta" + os.sep not in path:
            yield path


def _reads(path):
    """The home's variable names a YAML or template file reads outside its comments."""
    found = set()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.lstrip().startswith("#"):
                found.update(_NAME.findall(line))
    return found


ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if name != "ddp")


def test_no_inline_default_of_a_cluster_variable():
    files = [path for role in ROLES + ["ddp"] for path in _role_files(role)]
    files += glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "benchmarks", "*.yml")) + [os.path.join(ROOT, "site.yml")]
    files += glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))
    found = []
    for path in sorted(files):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for match in INLINE_DEFAULT.finditer(text):
            if not match.group(1).startswith(OWN_NAMESPACE):
                found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), text.count("\n", 0, match.start()) + 1,
                                            match.group(0)))
    assert found == []


def test_the_check_finds_an_inline_default():
    hits = [m.group(1) for m in INLINE_DEFAULT.finditer(
        "{{ ddp_env_path | default('/opt/ddp/venv') }} {{ __ddp_x | default(1) }} {{ hostvars[h].ddp_y | default(2) }}")]
    assert hits == ["ddp_env_path"]


@pytest.mark.parametrize("role", ROLES)
def test_a_role_that_reads_a_cluster_variable_depends_on_the_home(role):
    reads = set()
    for path in _role_files(role):
        reads |= _reads(path)
    dependencies = [d["role"] if isinstance(d, dict) else d
                    for d in _yaml(os.path.join(ROOT, "roles", role, "meta", "main.yml")).get("dependencies") or []]
    assert ("ddp.cluster.ddp" in dependencies) == bool(reads), sorted(reads)


def _plays():
    for path in sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) + glob.glob(os.path.join(ROOT, "benchmarks", "*.yml"))):
        if os.path.basename(path) in CONTROLLER_PLAYBOOKS:
            continue
        for play in _yaml(path) or []:
            if isinstance(play, dict) and "hosts" in play:
                yield pytest.param(play, id="%s: %s" % (os.path.relpath(path, ROOT), play["name"][:40]))


@pytest.mark.parametrize("play", list(_plays()))
def test_every_play_lists_the_home_first(play):
    first = play.get("roles", [None])[0]
    assert (first["role"] if isinstance(first, dict) else first) == "ddp.cluster.ddp"


def test_the_controller_plays_read_no_cluster_variable():
    for name in CONTROLLER_PLAYBOOKS:
        assert _reads(os.path.join(ROOT, "playbooks", name)) == set(), name


def test_the_home_has_no_tasks_and_no_argument_spec():
    """A spec would add a validation task on every node to every play (issue 36); the validate stage checks the values."""
    assert sorted(os.listdir(os.path.join(ROOT, "roles", "ddp"))) == ["README.md", "defaults", "meta"]
    assert os.listdir(os.path.join(ROOT, "roles", "ddp", "meta")) == ["main.yml"]


@pytest.mark.parametrize("name", sorted(HOME))
def test_every_home_variable_is_known_to_the_validate_stage(name):
    specs = [_yaml(p)["argument_specs"] for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))]
    options = {n: o for spec in specs for entry in spec.values() for n, o in (entry.get("options") or {}).items()}
    assert name in validate.CLUSTER_OPTIONS or name in options
    if name in options and "default" in options[name]:
        assert options[name]["default"] == HOME[name]


def test_every_home_variable_has_its_meaning_in_the_readme():
    spec = importlib.util.spec_from_file_location("role_readmes", os.path.join(ROOT, "docs", "site", "role_readmes.py"))
    role_readmes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(role_readmes)
    listed = role_readmes.commented_defaults(HOME_PATH)
    assert [name for name, _value, _meaning in listed] == list(HOME)
    with open(os.path.join(ROOT, "roles", "ddp", "README.md"), encoding="utf-8") as handle:
        assert handle.read() == role_readmes.defaults_readme("ddp")
