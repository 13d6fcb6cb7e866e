"""Which units to start, from real `systemctl show` output of Debian 12 nodes (fixtures/systemd, SOURCES.md)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.filter.systemd import systemd_to_start
from ansible_collections.ddp.cluster.plugins.module_utils.system.systemd_units import parse_show, to_start

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "systemd")


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def test_started_and_enabled_units_are_left_alone():
    assert to_start(fixture("show-debian12.txt"), ["munge", "slurmctld", "slurmd"]) == []


def test_a_stopped_or_disabled_unit_is_started():
    assert to_start(fixture("show-stopped-disabled-debian12.txt"), ["munge", "slurmd"]) == ["munge", "slurmd"]


def test_a_unit_not_installed_or_not_read_is_started():
    text = fixture("show-debian12.txt")
    assert parse_show(text)["nosuch.service"]["UnitFileState"] == ""
    assert to_start(text, ["nosuch", "slurmd", "other.service"]) == ["nosuch", "other.service"]


def test_blocks_are_read_by_their_id_not_their_order():
    text = "UnitFileState=enabled\nId=b.service\nActiveState=active\n\nId=a.service\nActiveState=failed\nUnitFileState=enabled\n"
    assert to_start(text, ["a", "b"]) == ["a"]


def test_crlf_output_reads_the_same():
    text = fixture("show-debian12.txt")
    assert to_start(text.replace("\n", "\r\n"), ["munge", "slurmd"]) == []


@pytest.mark.parametrize("text", ["", "garbage without equals\n"])
def test_nothing_read_means_everything_is_started(text):
    assert systemd_to_start(text, ["munge"]) == ["munge"]


def test_enabled_false_names_only_the_units_that_do_not_run():
    # munge runs but is disabled, slurmd is stopped but enabled: is-active would fail for slurmd alone
    text = fixture("show-stopped-disabled-debian12.txt")
    assert to_start(text, ["munge", "slurmd"], enabled=False) == ["slurmd"]
    assert systemd_to_start(text, ["munge", "slurmd"], enabled=False) == ["slurmd"]
    assert to_start(fixture("show-debian12.txt"), ["munge", "slurmd", "nosuch"], enabled=False) == ["nosuch"]
