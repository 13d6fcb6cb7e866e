"""split_sections / output_sections: a combined read cut back into its commands' outputs."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.sections import output_sections
from ansible_collections.ddp.cluster.plugins.module_utils.system.sections import split_sections

READ = ("net.core.rmem_max = 212992\n"
        "\n"
        "--- the file\n"
        "net.core.rmem_max = 134217728\n"
        "\n"
        "--- writable\n"
        "/proc/sys/net/core/rmem_max")


def test_parts_in_order():
    assert split_sections(READ, ["--- the file", "--- writable"]) == [
        "net.core.rmem_max = 212992\n", "net.core.rmem_max = 134217728\n", "/proc/sys/net/core/rmem_max"]


def test_lines_as_stdout_lines_and_blanks_around_a_separator():
    assert split_sections(["a", "  --- x  ", "b"], ["--- x"]) == ["a", "b"]


def test_a_line_that_only_contains_the_separator_is_not_cut():
    assert split_sections("echo --- x here\n--- x\nb", ["--- x"]) == ["echo --- x here", "b"]


def test_a_missing_separator_leaves_its_part_empty():
    assert split_sections("a\n--- two\nc", ["--- one", "--- two"]) == ["a", "", "c"]
    assert split_sections("", ["--- one"]) == ["", ""]


def test_separators_only_in_order():
    # a separator seen again after a later one is output, not a cut
    assert split_sections("a\n--- two\n--- one\nb", ["--- one", "--- two"]) == ["a", "", "--- one\nb"]


@pytest.mark.parametrize("text, separators", [(None, ["--- x"]), ("a", "--- x"), ("a", ["", "--- x"]), ("a", [1])])
def test_refuses(text, separators):
    with pytest.raises(TypeError):
        split_sections(text, separators)


def test_filter_wraps_errors():
    assert output_sections("a\n--- x\nb", ["--- x"]) == ["a", "b"]
    with pytest.raises(AnsibleFilterError, match="output_sections"):
        output_sections(None, ["--- x"])
