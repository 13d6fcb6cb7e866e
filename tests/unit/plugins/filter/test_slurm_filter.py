"""Tests for plugins/filter/slurm.py's slurm_account_problems as roles/preflight/tasks/accounts.yml calls it."""
from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter import slurm as slurm_filter

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "slurm")
FILTERS = slurm_filter.FilterModule().filters()
account_problems = FILTERS["slurm_account_problems"]
WANTED = [{"name": "munge", "uid": 950, "gid": 950, "variable": "slurm_munge_uid / slurm_munge_gid"}]


def read(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_keywords_on_the_combined_listing_match_the_two_listings():
    passwd = read("getent_passwd_debian12_slurm-munge-installed.txt")
    group = read("getent_group_debian12_slurm-munge-installed.txt")
    combined = passwd + "--- group\n" + group
    two = account_problems(passwd, group, WANTED, "ddp-node2")
    one = account_problems(combined, wanted=WANTED, node="ddp-node2")
    assert [p["subject"] for p in one] == ["ddp-node2: user munge", "ddp-node2: group munge"]
    assert one == two


def test_the_node_is_required():
    with pytest.raises(AnsibleFilterError, match="node is required"):
        account_problems("", wanted=WANTED)


def test_job_ids_filter_as_the_health_stage_calls_it():
    assert FILTERS["slurm_job_ids"](read("squeue_h_A_running-on-node.txt")) == [4, 5]
    with pytest.raises(AnsibleFilterError):
        FILTERS["slurm_job_ids"]("JOBID\n4\n")
