"""The helpers the filter plugins share (plugins/plugin_utils/compat_data.py)."""
from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.plugin_utils import compat_data as C


class _Text(str):
    """A str subclass, as Ansible's tagged strings are."""


def test_plain_gives_builtin_types():
    got = C.plain({_Text("a"): [_Text("x"), True, 3, 1.5, None], 1: (2,)})
    assert got == {"a": ["x", True, 3, 1.5, None], "1": [2]}
    assert [t.__name__ for t in (type(got["a"][0]), type(list(got)[0]))] == ["str", "str"]


def test_load_matrix_file_names_a_missing_file(tmp_path):
    with pytest.raises(AnsibleFilterError, match="cannot read the compatibility matrix .*absent.yml"):
        C.load_matrix_file(str(tmp_path / "absent.yml"))


def test_load_matrix_file_refuses_a_file_without_the_matrix_structure(tmp_path):
    path = tmp_path / "matrix.yml"
    path.write_text("rows: [unclosed\n")
    with pytest.raises(AnsibleFilterError, match="matrix.yml"):
        C.load_matrix_file(str(path))


def test_load_matrix_file_reads_the_collection_matrix_once():
    assert C.load_matrix_file() is C.load_matrix_file()


@pytest.mark.parametrize("spec, message",
                         [(["2.1.0"], "expects a dict"), ({"torch": "2.1.0", "cudnn": "8"}, "unknown keys cudnn")])
def test_compat_resolve_refuses_a_bad_spec(spec, message):
    with pytest.raises(AnsibleFilterError, match=message):
        C.compat_resolve(spec)
