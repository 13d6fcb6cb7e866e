"""dpkg-query status parsing, on a real output (fixtures/packages/SOURCES.md)."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.packages import dpkg_installed

OUTPUT = (Path(__file__).resolve().parents[2] / "fixtures" / "packages"
          / "dpkg-query_status-abbrev_installed-missing-removed__debian12.txt").read_text()


def test_installed_are_the_status_i_lines_only():
    # ii bash (twice: two calls), dpkg-query's "no packages found" lines and the rc= lines are not packages,
    # "un less" was removed
    assert dpkg_installed(OUTPUT) == ["bash", "bash"]
    assert dpkg_installed(OUTPUT.splitlines()) == ["bash", "bash"]
    assert dpkg_installed([]) == [] and dpkg_installed("") == []
    assert dpkg_installed(["hi  slurmd", "rc  munge", "un  less"]) == ["slurmd"]  # held is installed


def test_missing_is_what_the_roles_hand_to_apt():
    wanted = ["munge", "slurm-client", "slurmd", "bash", "less"]
    assert [p for p in wanted if p not in dpkg_installed(OUTPUT)] == ["munge", "slurm-client", "slurmd", "less"]


def test_bad_input_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="dpkg-query's output or its lines"):
        dpkg_installed(None)
