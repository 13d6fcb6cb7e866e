"""module_utils/slurm/accounting.py on outputs captured on real nodes (tests/unit/fixtures/slurm_accounting/SOURCES.md)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.slurm import accounting as sa

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures",
                        "slurm_accounting")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ------------------------------------------------------------------ sacctmgr: what to register

def test_nothing_to_add_once_registered():
    assert sa.sacctmgr_todo(fixture("sacctmgr_listing_registered.txt"), "ddp", "ddp", ["ddp"]) == []


def test_a_fresh_database_gets_cluster_account_and_user_in_that_order():
    # slurmdbd's own root account and user, as a new database has them (the registered listing without ours).
    listing = "\n".join(line for line in fixture("sacctmgr_listing_registered.txt").splitlines()
                        if not line.startswith("ddp"))
    assert sa.sacctmgr_todo(listing, "ddp", "ddp", ["ddp"]) == [
        ["sacctmgr", "-i", "add", "cluster", "ddp"],
        ["sacctmgr", "-i", "add", "account", "ddp", "Cluster=ddp", "Description=ddp.cluster users", "Organization=ddp"],
        ["sacctmgr", "-i", "add", "user", "ddp", "Account=ddp", "DefaultAccount=ddp", "Cluster=ddp"],
    ]


def test_another_cluster_and_user_are_added_but_a_known_user_keeps_its_account():
    listing = fixture("sacctmgr_listing_registered.txt")
    assert sa.sacctmgr_todo(listing, "gpu2", "ddp", ["ddp", "alice"]) == [
        ["sacctmgr", "-i", "add", "cluster", "gpu2"],
        ["sacctmgr", "-i", "add", "user", "alice", "Account=ddp", "DefaultAccount=ddp", "Cluster=gpu2"],
    ]


def test_a_listing_of_another_command_is_refused():
    with pytest.raises(sa.AccountingParseError, match="--- accounts"):
        sa.sacctmgr_todo("ddp\n", "ddp", "ddp", ["ddp"])


def test_registration():
    text = fixture("sacctmgr_show_cluster_registered.txt")
    assert sa.parse_cluster_registration(text, "ddp") == {"registered": True, "control_host": "10.89.2.10",
                                                          "control_port": "6817"}
    assert sa.parse_cluster_registration("ddp||0\n", "ddp")["registered"] is False
    assert sa.parse_cluster_registration(text, "other")["registered"] is False
    assert sa.not_registered("ddp", "ddp-mx1", sa.parse_cluster_registration(text, "ddp")) is None
    found = sa.not_registered("ddp", "ddp-mx1", {"registered": False},
                              "[2026-12-04T10:04:38.100] error: slurmdbd: Sending PersistInit msg: Connection refused\n")
    assert found["code"] == "ACCOUNTING_NOT_REGISTERED" and "Connection refused" in found["message"]


# ------------------------------------------------------------------ why slurmdbd does not answer

@pytest.mark.parametrize("name, code, words", [
    ("read_healthy.txt", None, ()),
    ("read_wrong_password.txt", "ACCOUNTING_DB_AUTH", ("1045 Access denied for user 'slurm'@'localhost'",)),
    ("read_unreachable.txt", "ACCOUNTING_DB_UNREACHABLE", ("2002 Can't connect to server on '127.0.0.1'",)),
    ("read_db_stopped.txt", "ACCOUNTING_DB_STOPPED", ("MariaDB is inactive", "through socket")),
    ("read_slurmdbd_stopped.txt", "ACCOUNTING_SLURMDBD_DOWN", ("slurmdbd is inactive",)),
])
def test_problems_on_real_reads(name, code, words):
    found = sa.problems(fixture(name), "ddp-mx1")
    assert [p["code"] for p in found] == ([code] if code else [])
    for word in words:
        assert word in found[0]["message"], found[0]["message"]
    for p in found:
        assert p["severity"] == "error" and p["fix"] and "ddp-mx1" in p["subject"]


def test_nothing_is_judged_before_slurmdbd_is_set_up():
    """The role's first run: MariaDB just installed, no slurmdbd.conf yet (the read stops after systemctl show)."""
    units = fixture("read_slurmdbd_stopped.txt").split("--- sacctmgr")[0]
    assert sa.problems(units, "ddp-mx1") == []


def test_a_stale_error_before_the_last_start_does_not_count():
    """slurmdbd that failed earlier and started since: the start line is the last event, so only the state counts."""
    read = fixture("read_slurmdbd_stopped.txt")
    assert "error: mysql_real_connect failed: 2002" in read
    assert [p["code"] for p in sa.problems(read, "ddp-mx1")] == ["ACCOUNTING_SLURMDBD_DOWN"]
    assert "last database error" not in sa.problems(read, "ddp-mx1")[0]["message"]


# ------------------------------------------------------------------ sacct

def test_parse_sacct_on_the_benchmarks_jobs():
    jobs = sa.parse_sacct(fixture("sacct_benchmark_jobs.txt"))
    assert sorted(jobs) == ["1", "2", "3", "4", "5"]
    assert jobs["5"] == {"job_name": "ddp-bench-20261204T105314Z-1", "state": "COMPLETED", "elapsed": "00:03:05",
                         "elapsed_s": 185, "nodes": "ddp-mx[1-3]", "exit_code": "0:0"}
    assert (jobs["2"]["state"], jobs["2"]["exit_code"], jobs["2"]["elapsed_s"]) == ("FAILED", "2:0", 3)


@pytest.mark.parametrize("text, seconds", [
    ("00:03:36", 216), ("1-02:03:04", 93784), ("05:07", 307), ("INVALID", None), ("", None)])
def test_elapsed_seconds(text, seconds):
    """sacct(1), Elapsed: [DD-[HH:]]MM:SS."""
    assert sa.elapsed_seconds(text) == seconds


def test_sacct_of_another_format_is_refused():
    with pytest.raises(sa.AccountingParseError, match="6"):
        sa.parse_sacct("1|x|COMPLETED\n")
