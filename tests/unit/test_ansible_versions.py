"""tests/ansible_versions.txt (the ansible-core versions `make ansible-versions` tests) against what the
collection claims and what the README says.

The first line is the oldest ansible-core the collection claims (meta/runtime.yml ``requires_ansible``); each
line's ``ansible`` package is the one built on that ansible-core (ansible N ships ansible-core 2.(N+7): 9 with
2.16, 14 with 2.21, see the ansible package's porting guides); the README names every version tested.
"""
from __future__ import annotations

import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _versions(path=os.path.join(ROOT, "tests", "ansible_versions.txt")):
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.split("#", 1)[0].split()
            if fields:
                core, ansible, pythons = fields
                rows.append({"core": core, "ansible": ansible, "pythons": pythons.split(",")})
    return rows


def _tuple(version):
    return tuple(int(part) for part in version.split("."))


def test_the_list_runs_from_the_claimed_oldest_upwards():
    rows = _versions()
    assert len(rows) >= 2
    cores = [_tuple(row["core"]) for row in rows]
    assert cores == sorted(cores) and len(set(cores)) == len(cores)
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as handle:
        claim = yaml.safe_load(handle)["requires_ansible"]
    oldest = re.fullmatch(r">=(\d+\.\d+)\.\d+", claim)
    assert oldest, claim
    assert cores[0][:2] == _tuple(oldest.group(1)), (rows[0]["core"], claim)


def test_each_ansible_package_is_the_one_of_its_ansible_core():
    for row in _versions():
        major, minor = _tuple(row["core"])[:2]
        assert major == 2 and _tuple(row["ansible"])[0] + 7 == minor, row


def test_each_line_names_pythons_as_major_minor():
    for row in _versions():
        assert row["pythons"] and all(re.fullmatch(r"3\.\d+", p) for p in row["pythons"]), row


def test_the_readme_names_every_version_tested():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = " ".join(handle.read().split())  # line breaks as spaces
    for row in _versions():
        assert re.search(r"\b%s\b" % re.escape(row["core"]), readme), row["core"]
        assert "`ansible` %s" % row["ansible"] in readme, row["ansible"]
