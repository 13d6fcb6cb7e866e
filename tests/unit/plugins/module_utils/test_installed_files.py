"""Which wanted files and folders a node does not hold as wanted: find's real result shape (ansible.builtin.find,
file_type any, get_checksum) as the slurm role's read returns it on a Debian 12 node (fixtures/find, SOURCES.md)."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ddp.cluster.plugins.filter.files import paths_todo
from ansible_collections.ddp.cluster.plugins.module_utils.system.installed_files import differing

FIND = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "find", "find_slurm_debian12.json")


def found():
    with open(FIND) as fh:
        return json.load(fh)["files"]


def by_path(path):
    return [e for e in found() if e["path"] == path][0]


def want_file(path, **kw):
    entry = by_path(path)
    out = {"path": path, "checksum": entry["checksum"], "mode": entry["mode"], "owner": entry["pw_name"], "group": entry["gr_name"]}
    out.update(kw)
    return out


def test_files_and_folders_as_wanted_are_not_named():
    wanted = [want_file("/etc/slurm/slurm.conf"), want_file("/etc/slurm/gres.conf"),
              {"path": "/var/log/slurm/", "state": "directory", "mode": "0755", "owner": "slurm", "group": "slurm"}]
    assert differing(found(), wanted) == []


@pytest.mark.parametrize("change", [
    {"checksum": "0" * 40},        # other content
    {"mode": "0600"},              # other mode
    {"mode": "644"},               # the same mode written without the leading zero: as wanted
    {"owner": "slurm"},            # other owner
    {"group": "slurm"},            # other group
])
def test_a_file_that_differs_in_one_attribute_is_named(change):
    want = want_file("/etc/slurm/slurm.conf", **change)
    expected = [] if change == {"mode": "644"} else ["/etc/slurm/slurm.conf"]
    assert differing(found(), [want]) == expected


def test_missing_paths_wrong_types_and_links_are_named():
    wanted = [{"path": "/etc/ddp/slurm-job.conf"},                               # not there
              {"path": "/etc/slurm/slurm.conf", "state": "directory"},           # a file, wanted a folder
              {"path": "/var/log/slurm", "state": "file"},                       # a folder, wanted a file
              {"path": "/usr/sbin/slurmd", "state": "file"}]                     # a link (find does not follow)
    assert differing(found(), wanted) == [w["path"] for w in wanted]


def test_keys_left_out_are_not_compared():
    assert differing(found(), [{"path": "/etc/slurm/slurm.conf"}]) == []


@pytest.mark.parametrize("want", [{"path": "etc/x"}, {"path": "/etc/x", "state": "link"}, {}])
def test_bad_wanted_entries_are_refused(want):
    with pytest.raises(Exception, match="absolute path"):
        paths_todo(found(), [want])


def test_find_without_checksum_is_refused_for_a_file_with_one():
    entries = [dict(by_path("/etc/slurm/slurm.conf"))]
    del entries[0]["checksum"]
    with pytest.raises(ValueError, match="get_checksum"):
        differing(entries, [want_file("/etc/slurm/slurm.conf")])


@pytest.mark.parametrize("path", ["/var/log/slurm/", "/var/log//slurm", "/var/log/./slurm"])
def test_wanted_paths_are_compared_normalised(path):
    # a setting with a trailing or doubled slash names the same folder find reports
    assert differing(found(), [{"path": path, "state": "directory", "owner": "slurm"}]) == []
    assert differing(found(), [{"path": path, "state": "directory", "owner": "root"}]) == [path]


def test_a_link_to_a_folder_is_not_the_folder():
    link = dict(by_path("/usr/sbin/slurmd"), path="/opt/ddp/link")
    assert differing([link], [{"path": "/opt/ddp/link", "state": "directory"}]) == ["/opt/ddp/link"]
