"""docs/site/role_readmes.py: every variable of every role's argument specification is in its README's table."""
from __future__ import annotations

import glob
import importlib.util
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("role_readmes", os.path.join(ROOT, "docs", "site", "role_readmes.py"))
role_readmes = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(role_readmes)

ROLES = sorted(path.split(os.sep)[-3] for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))


@pytest.mark.parametrize("role", ROLES)
def test_readme_table_lists_every_option_of_every_entry_point(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    expected = sorted(name for entry in specs.values() for name in (entry.get("options") or {}))
    text = role_readmes.readme(role)
    listed = sorted(re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M))
    assert listed == expected
    # Each row has exactly four cells: no bare | or line break from a description or a Jinja default.
    for row in text.splitlines():
        if row.startswith("| `"):
            assert len(re.split(r"(?<!\\)\|", row)) == 6, row


def test_cell_escapes_pipes_and_folds_lines():
    assert role_readmes.cell("a | b\n  c") == "a \\| b c"


@pytest.mark.parametrize("option, shown", [
    ({"type": "list", "default": []}, "`[]`"),
    ({"type": "dict", "default": {"MaxJobCount": "20000"}}, "`{MaxJobCount: '20000'}`"),
    ({"type": "bool", "default": False}, "`false`"),
    ({"type": "int", "default": 600}, "`600`"),
    ({"type": "str", "default": ""}, '`""`'),
    ({"type": "str", "default": "{{ ddp_rdzv_port | default(29400) }}"}, "`{{ ddp_rdzv_port | default(29400) }}`"),
    ({"type": "str"}, "(none)"),
    ({"type": "str", "required": True}, "(required)"),
])
def test_default_cell(option, shown):
    assert role_readmes.default_cell(option) == shown


def test_type_cell_names_elements_and_choices():
    assert role_readmes.type_cell({"type": "list", "elements": "str"}) == "list of str"
    assert role_readmes.type_cell({"type": "str", "choices": ["conda", "venv"]}) == "str; one of `conda`, `venv`"
    assert role_readmes.type_cell({}) == "str"


def test_committed_readmes_are_generated():
    assert role_readmes.main(["--check"]) == 0
