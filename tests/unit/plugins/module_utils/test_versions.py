"""The one dotted-version helper (module_utils/versions.py) the checks and plans compare versions with."""
from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils import versions as V


@pytest.mark.parametrize("text, expected", [("530.30.02", (530, 30, 2)), (535, (535,)), (" 2.18.1 ", (2, 18, 1))])
def test_version_tuple_reads_dotted_integers(text, expected):
    assert V.version_tuple(text) == expected


@pytest.mark.parametrize("text", ["2.3.1+cu121", "535.x", "", "v535"])
def test_version_tuple_refuses_what_is_not_dotted_integers(text):
    with pytest.raises(ValueError, match="not a dotted numeric version"):
        V.version_tuple(text)
    assert V.version_tuple_or_none(text) is None


def test_version_tuple_or_none_of_none():
    assert V.version_tuple_or_none(None) is None


@pytest.mark.parametrize("left, right, expected",
                         [("535", "535.0.0", 0), ("535", "530.30.02", 1), ("525.60.13", "530.30.02", -1)])
def test_compare_versions_pads_missing_fields_with_zero(left, right, expected):
    assert V.compare_versions(left, right) == expected


def test_version_lt_is_none_when_either_side_is_not_a_version():
    assert V.version_lt("525.60.13", "530") is True
    assert V.version_lt("530.0", "530") is False
    assert V.version_lt("abc", "530") is None and V.version_lt("530", None) is None


@pytest.mark.parametrize("text, expected",
                         [("2.3.1+cu121", (2, 3)), (" 2.1", (2, 1)), ("2", None), (None, None), ("", None)])
def test_major_minor_is_the_release_series(text, expected):
    assert V.major_minor(text) == expected
