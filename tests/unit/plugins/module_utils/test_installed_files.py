"""Which wanted files and folders a node does not hold as wanted, and those wants built from paths and texts: find's
real result shape (ansible.builtin.find, file_type any, get_checksum) as the slurm role's read returns it on a Debian 12
node (fixtures/find, SOURCES.md)."""
from __future__ import annotations

import json
import os

import pytest

from ansible.errors import AnsibleFilterError
from ansible.utils.hashing import secure_hash_s

from ansible_collections.ddp.cluster.plugins.filter.files import dir_wants, paths_todo
from ansible_collections.ddp.cluster.plugins.filter.files import file_wants as file_wants_filter
from ansible_collections.ddp.cluster.plugins.module_utils.system.installed_files import (
    differing, directory_wants, file_wants)

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


# dir_wants and file_wants: the wants paths_todo takes, built from paths (and what is written to each).

def test_dir_wants_gives_one_folder_entry_per_path_with_the_owners_group_by_default():
    assert directory_wants(["/var/spool/slurmd", "/var/log/slurm"], "slurm") == [
        {"path": "/var/spool/slurmd", "state": "directory", "owner": "slurm", "group": "slurm", "mode": "0755"},
        {"path": "/var/log/slurm", "state": "directory", "owner": "slurm", "group": "slurm", "mode": "0755"}]
    assert directory_wants(iter(["/srv/ddp/checkpoints"]), "root", "ddp", "01777") == [
        {"path": "/srv/ddp/checkpoints", "state": "directory", "owner": "root", "group": "ddp", "mode": "01777"}]


def test_dir_wants_compare_with_the_real_find_result():
    # /var/log/slurm is a slurm-owned folder (0755) on the node the fixture was read from
    assert differing(found(), directory_wants(["/var/log/slurm"], "slurm")) == []
    assert differing(found(), directory_wants(["/var/log/slurm"], "root")) == ["/var/log/slurm"]


@pytest.mark.parametrize("text", [
    "# Managed by ddp.cluster.net_tuning\nbr_netfilter\n",
    "",
    "NCCL_SOCKET_IFNAME=eth0 # übertragen, 日本\n",
    b"\x00\xffraw bytes\n",
])
def test_file_wants_checksum_is_what_ansibles_sha1_gives_for_the_text(text):
    # ansible.utils.hashing.secure_hash_s is what the hash('sha1') filter and the copy module's checksum use
    (want,) = file_wants(["/etc/modules-load.d/br_netfilter.conf"], [text])
    assert want == {"path": "/etc/modules-load.d/br_netfilter.conf", "state": "file", "owner": "root", "group": "root",
                    "mode": "0644", "checksum": secure_hash_s(text)}


def test_file_wants_name_a_file_whose_content_differs_and_not_one_that_matches():
    entry = by_path("/etc/slurm/slurm.conf")
    wanted = file_wants(["/etc/slurm/slurm.conf", "/etc/slurm/gres.conf"], ["ClusterName=x\n", "Name=gpu\n"],
                        entry["pw_name"], entry["gr_name"], entry["mode"])
    assert differing(found(), wanted) == ["/etc/slurm/slurm.conf", "/etc/slurm/gres.conf"]
    # the same want with the node's own checksum: only the content was compared differently
    wanted[0]["checksum"] = entry["checksum"]
    assert differing(found(), wanted) == ["/etc/slurm/gres.conf"]


@pytest.mark.parametrize("call, words", [
    (lambda: directory_wants("/etc/ddp"), "list of paths"),                         # one text, not a list
    (lambda: directory_wants(["etc/ddp"]), "absolute"),
    (lambda: directory_wants([None]), "absolute"),
    (lambda: directory_wants(["/etc/ddp"], ""), "owner"),
    (lambda: directory_wants(["/etc/ddp"], "root", 0), "group"),
    (lambda: directory_wants(["/etc/ddp"], mode=493), "octal text"),                # YAML's unquoted 0755
    (lambda: directory_wants(["/etc/ddp"], mode="0855"), "octal text"),
    (lambda: directory_wants(["/etc/ddp"], mode="u+rwx"), "octal text"),
    (lambda: file_wants(["/a", "/b"], ["x"]), "2 path\\(s\\) and 1 content\\(s\\)"),
    (lambda: file_wants(["/a"], "x"), "list of contents"),
    (lambda: file_wants(["/a"], {"/a": "x"}), "list of contents"),
    (lambda: file_wants(["/a"], [None]), "not text"),
])
def test_bad_wants_are_refused_with_what_is_wrong(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_the_filters_wrap_the_errors_for_ansible():
    assert dir_wants(["/etc/ddp"]) == directory_wants(["/etc/ddp"])
    assert file_wants_filter(["/a"], ["x"], mode="0755")[0]["mode"] == "0755"
    with pytest.raises(AnsibleFilterError, match="^dir_wants: .*octal"):
        dir_wants(["/etc/ddp"], mode=755)
    with pytest.raises(AnsibleFilterError, match="^file_wants: .*one content per path"):
        file_wants_filter(["/a"], [])
