"""The health stage as a role (roles/ddp_health): its variables written once (defaults/main.yml, the argument spec
beside it, and the validate stage's table agreeing), and playbooks/health.yml a list of plays, one tier each."""
from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import validate
from role_files import ROOT

ROLE = os.path.join(ROOT, "roles", "ddp_health")


def _yaml(*parts):
    with open(os.path.join(*parts)) as handle:
        return yaml.safe_load(handle)


OPTIONS = _yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
# Three of its variables node_health reads too: their defaults are in the cluster-wide role ddp.cluster.ddp.
HOME = _yaml(ROOT, "roles", "ddp", "defaults", "main.yml")
DEFAULTS = dict(_yaml(ROLE, "defaults", "main.yml"), **{name: HOME[name] for name in OPTIONS if name in HOME})


def test_every_variable_has_a_default_and_a_spec():
    assert sorted(DEFAULTS) == sorted(OPTIONS)
    for name, option in OPTIONS.items():
        assert option.get("default") == DEFAULTS[name], name


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_the_spec_agrees_with_the_validate_stage(name):
    """The validate stage checks these values before any node is contacted; its table and the spec say the same."""
    mine, theirs = OPTIONS[name], validate.CLUSTER_OPTIONS[name]
    templated = isinstance(mine.get("default"), str) and "{{" in mine["default"]
    assert mine["type"] == theirs["type"] or (templated and mine["type"] == "raw"), (mine, theirs)
    assert mine.get("choices") == theirs.get("choices")
    assert mine.get("elements") == theirs.get("elements")


def test_no_inline_default_of_a_health_variable():
    """The role's defaults (and ddp.cluster.ddp's, for the three node_health reads too) are their one home: no task
    of the stage, no other role and no playbook gives one of them a default of its own."""
    pattern = re.compile(r"\b(%s)\s*\|\s*default\(" % "|".join(sorted(OPTIONS)))
    found = []
    for path in glob.glob(os.path.join(ROOT, "roles", "**", "*.yml"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True):
        with open(path) as handle:
            for number, line in enumerate(handle, 1):
                if pattern.search(line):
                    found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert found == []


def test_the_playbook_runs_each_tier_as_a_play_in_the_role_order():
    plays = _yaml(ROOT, "playbooks", "health.yml")
    assert plays[0]["ansible.builtin.import_playbook"] == "validate.yml"
    tiers = []
    for play in plays[1:]:
        assert [list(task) for task in play["tasks"]] == [["name", "ansible.builtin.import_role"]], play["name"]
        role = play["tasks"][0]["ansible.builtin.import_role"]
        assert role["name"] == "ddp.cluster.ddp_health"
        assert os.path.isfile(os.path.join(ROLE, "tasks", role["tasks_from"] + ".yml")), role
        tiers.append(role["tasks_from"])
    main = [task["ansible.builtin.include_tasks"] for task in _yaml(ROLE, "tasks", "main.yml")]
    assert main == [tier + ".yml" for tier in tiers]
