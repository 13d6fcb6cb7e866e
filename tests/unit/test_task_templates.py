"""Jinja in the collection's YAML says what it means once Ansible has templated it.

With ansible-core 2.19, a string literal such as ``'\\n'`` inside ``{{ }}`` in a YAML scalar that is not
double-quoted (plain, single-quoted, ``>-`` or ``|``) reaches the template as a backslash and an ``n``, not a
newline: ``lines | join('\\n')`` joined lines with the two characters, so the firewall role's zone listing parsed
as empty and every source, service and port was sent to ``ansible.posix.firewalld`` again on every run. Only
regular expressions (the ``regex_*`` filters and tests, where ``re`` reads the escape itself) may hold one.
"""
from __future__ import annotations

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDERS = ("roles", "playbooks", "molecule", "benchmarks", "extensions", "inventory")
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
# a quoted Jinja string literal holding a backslash escape of a control character (\n, \t, \r)
ESCAPE_LITERAL = re.compile(r"""(?P<q>['"])(?:(?!(?P=q)).)*?(?<!\\)\\[ntr](?:(?!(?P=q)).)*?(?P=q)""", re.S)
REGEX_USE = re.compile(r"regex(_replace|_search|_findall|_escape)?\s*\(\s*$|\b(match|search|regex)\s*\(\s*$")


def yaml_files():
    for folder in FOLDERS:
        for base, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if d not in (".cache", "collections", "__pycache__")]
            for name in sorted(files):
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(base, name)


def scalars(node):
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from scalars(key)
            yield from scalars(value)


def escaped_literals(text):
    """(line offset, literal) for each escape-holding string literal in the Jinja of ``text`` not used as a regex."""
    found = []
    for block in JINJA.finditer(text):
        for literal in ESCAPE_LITERAL.finditer(block.group(0)):
            before = block.group(0)[:literal.start()]
            if REGEX_USE.search(before):
                continue
            found.append(literal.group(0))
    return found


def findings():
    out = []
    for path in yaml_files():
        with open(path, encoding="utf-8") as handle:
            try:
                documents = list(yaml.compose_all(handle, Loader=yaml.SafeLoader))
            except yaml.YAMLError:
                continue  # not plain YAML (a Jinja template of YAML): yamllint and ansible-lint read those
        for document in documents:
            for node in scalars(document) if document is not None else ():
                if node.style == '"':
                    continue  # YAML itself turns "\n" into a newline before Jinja sees it
                for literal in escaped_literals(node.value):
                    out.append("%s:%d: %s" % (os.path.relpath(path, ROOT), node.start_mark.line + 1, literal))
    return out


def test_no_escape_in_jinja_outside_double_quotes():
    assert findings() == []


@pytest.mark.parametrize("text, count", [
    ("{{ lines | join('\\n') }}", 1),
    ("{{ a ~ \"\\t\" ~ b }}", 1),
    ("{{ x | regex_replace('\\n', ' ') }}", 0),
    ("{{ x is search('a\\nb') }}", 0),
    ("{{ lines | join(' ') }}", 0),
    ("plain \\n outside Jinja", 0),
    ("{{ '\\\\n' }}", 0),
])
def test_the_check_itself(text, count):
    assert len(escaped_literals(text)) == count
