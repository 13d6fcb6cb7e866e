"""accounts_todo on real getent outputs (fixtures/slurm/SOURCES.md: a Debian 12 node after installing slurmd,
slurmctld and munge, and useradd -m ddp)."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.accounts import account_home, accounts_todo
from ansible_collections.ddp.cluster.plugins.module_utils.system import accounts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "slurm"
PASSWD = (FIXTURES / "getent_passwd_debian12_slurm-munge-installed.txt").read_text()
GROUP = (FIXTURES / "getent_group_debian12_slurm-munge-installed.txt").read_text()
LISTING = PASSWD.rstrip("\n") + "\n" + accounts.MARKER + "\n" + GROUP
SLURM_GROUPS = [{"name": "munge", "gid": 104}, {"name": "slurm", "gid": 64030}]
SLURM_USERS = [{"name": "munge", "uid": 103, "group": "munge", "home": "/nonexistent", "shell": "/usr/sbin/nologin"},
               {"name": "slurm", "uid": 64030, "group": "slurm", "home": "/nonexistent",
                "shell": "/usr/sbin/nologin"}]


def test_parse_reads_users_and_groups():
    users, groups = accounts.parse_listing(LISTING)
    assert users["munge"] == {"uid": 103, "gid": 104, "home": "/nonexistent", "shell": "/usr/sbin/nologin"}
    assert users["ddp"] == {"uid": 1000, "gid": 1000, "home": "/home/ddp", "shell": "/bin/sh"}
    assert groups["munge"] == 104 and groups["slurm"] == 64030
    assert "munge" not in accounts.parse_listing(PASSWD)[1]  # passwd lines are never read as groups


def test_accounts_as_wanted_need_nothing():
    assert accounts_todo(LISTING, SLURM_GROUPS, SLURM_USERS) == {"groups": [], "users": []}
    assert accounts_todo(LISTING.splitlines(), SLURM_GROUPS, SLURM_USERS) == {"groups": [], "users": []}


def test_each_difference_is_named():
    other_shell = dict(SLURM_USERS[1], shell="/bin/bash")
    other_uid = dict(SLURM_USERS[0], uid=2001)
    other_home = dict(SLURM_USERS[1], home="/var/lib/slurm")
    for user in (other_shell, other_uid, other_home):
        assert accounts_todo(LISTING, SLURM_GROUPS, [user]) == {"groups": [], "users": [user]}
    # a group with another gid is changed, and so is every user whose primary group it is
    moved = [{"name": "munge", "gid": 2002}, SLURM_GROUPS[1]]
    assert accounts_todo(LISTING, moved, SLURM_USERS) == {"groups": [moved[0]], "users": [SLURM_USERS[0]]}
    # a user whose primary group is another group
    regrouped = dict(SLURM_USERS[0], group="slurm")
    assert accounts_todo(LISTING, SLURM_GROUPS, [regrouped])["users"] == [regrouped]


def test_missing_accounts_and_unset_keys():
    fresh = "ddp:x:1000:1000::/home/ddp:/bin/sh\n--- group\nddp:x:1000:\n"
    todo = accounts_todo(fresh, SLURM_GROUPS, SLURM_USERS)
    assert todo == {"groups": SLURM_GROUPS, "users": SLURM_USERS}
    # only what is given is compared: no uid, home or shell asked for
    assert accounts_todo(fresh, [{"name": "ddp", "gid": None}], [{"name": "ddp", "group": "ddp"}]) == {
        "groups": [], "users": []}
    assert accounts_todo("", [], []) == {"groups": [], "users": []}


def test_bad_input_is_refused():
    with pytest.raises(AnsibleFilterError, match="string or a list of lines"):
        accounts_todo({"a": 1}, SLURM_GROUPS, SLURM_USERS)
    with pytest.raises(AnsibleFilterError, match="accounts_todo"):
        accounts_todo(LISTING, [{"gid": 1}], [])


def test_account_home_reads_the_passwd_part_only():
    assert account_home(LISTING, "ddp") == "/home/ddp"
    assert account_home(LISTING.splitlines(), "munge") == "/nonexistent"
    # a group of that name without a user (group lines are never read as users) and no such account
    assert account_home(accounts.MARKER + "\n" + "ddp:x:1000:\n", "ddp") == ""
    assert account_home(LISTING, "nosuch") == ""
    with pytest.raises(AnsibleFilterError):
        account_home(42, "ddp")
