"""Which shipped files a node holds as shipped: find's real result shape (ansible.builtin.find, get_checksum)."""
from __future__ import annotations

import hashlib

import pytest

from ansible_collections.ddp.cluster.plugins.filter.files import installed_as_shipped
from ansible_collections.ddp.cluster.plugins.module_utils.installed_files import unchanged

A = hashlib.sha1(b"a\n").hexdigest()
B = hashlib.sha1(b"b\n").hexdigest()


def entry(name, checksum, mode="0644", owner="root", group="root"):
    # the keys ansible.builtin.find returns per file (a subset), as on a Debian 12 node
    return {"path": "/opt/ddp/lib/pkg/" + name, "checksum": checksum, "mode": mode, "pw_name": owner,
            "gr_name": group, "isreg": True, "size": 2}


def test_same_content_mode_and_owner_is_installed():
    assert unchanged([entry("a.py", A), entry("b.py", B)], {"a.py": A, "b.py": B}, "0644", "root", "root") == ["a.py", "b.py"]


@pytest.mark.parametrize("found", [
    entry("a.py", B),                       # other content
    entry("a.py", A, mode="0664"),          # other mode
    entry("a.py", A, owner="ddp"),          # other owner
    entry("a.py", A, group="ddp"),          # other group
    entry("c.py", A),                       # not shipped
])
def test_anything_else_is_copied_again(found):
    assert unchanged([found], {"a.py": A}, "0644", "root", "root") == []


def test_modes_compare_as_numbers():
    assert unchanged([entry("a.py", A, mode="644")], {"a.py": A}, "0644", "root", "root") == ["a.py"]


def test_find_without_checksums_is_refused():
    with pytest.raises(ValueError, match="get_checksum"):
        unchanged([{"path": "/x/a.py", "mode": "0644"}], {"a.py": A}, "0644", "root", "root")


def test_the_filter_hashes_the_shipped_files(tmp_path):
    (tmp_path / "a.py").write_bytes(b"a\n")
    (tmp_path / "b.py").write_bytes(b"changed\n")
    found = [entry("a.py", A), entry("b.py", B), entry("gone.py", A)]
    assert installed_as_shipped(found, str(tmp_path)) == ["a.py"]
