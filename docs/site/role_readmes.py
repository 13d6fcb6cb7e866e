# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write roles/<role>/README.md from the role's meta/argument_specs.yml (the role's contract).

The cluster-wide role ddp.cluster.ddp has no argument specification (it would add a validation task to every
play that lists it; the validate stage checks its values): its README is written from its defaults file, the
comment above each variable being its meaning.

Galaxy shows a role's README and refuses a collection whose role has none. The README says what the
role does (the main entry point's description, Ansible markup rendered as Markdown by
antsibull-docs-parser), which playbook runs it, and a table of every variable of each entry point: its
name, type (with the element type and the allowed values), default and meaning. The argument
specification stays the one place the variables are written; --check fails where a README no longer
matches it.

    python docs/site/role_readmes.py            write the READMEs
    python docs/site/role_readmes.py --check    exit 1 naming each README that differs (make collection-checks)
"""
from __future__ import annotations

import glob
import os
import re
import sys

import yaml
from antsibull_docs_parser import dom
from antsibull_docs_parser.md import to_md
from antsibull_docs_parser.parser import Context, parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = "ddp.cluster"


def markdown(text, role):
    """Ansible docs markup (C(), O(), P() ...) of one paragraph as Markdown."""
    context = Context(current_plugin=dom.PluginIdentifier(fqcn="%s.%s" % (COLLECTION, role), type="role"),
                      role_entrypoint="main")
    return to_md(parse(text, context, errors="exception"))


def cell(text):
    """One Markdown table cell: no line breaks, no bare ``|``."""
    return " ".join(str(text).split()).replace("|", "\\|")


def default_cell(option):
    if "default" not in option:
        return "(none)" if not option.get("required") else "(required)"
    value = option["default"]
    if isinstance(value, str):
        shown = value if value else '""'
    else:
        shown = yaml.safe_dump(value, default_flow_style=True, width=10000).strip()
        if shown.endswith("\n..."):
            shown = shown[:-4].strip()
    return "`%s`" % shown.replace("`", "'")


def type_cell(option):
    kind = option.get("type", "str")
    if option.get("elements"):
        kind = "%s of %s" % (kind, option["elements"])
    if option.get("choices"):
        kind += "; one of %s" % ", ".join("`%s`" % c for c in option["choices"])
    return kind


def variables_table(options, role):
    """Markdown table rows of an entry point's options (sorted by name), each description paragraph rendered."""
    rows = ["| Variable | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
    for name in sorted(options):
        option = options[name] or {}
        description = option.get("description") or []
        if isinstance(description, str):
            description = [description]
        meaning = "<br>".join(cell(markdown(paragraph, role)) for paragraph in description)
        rows.append("| `%s` | %s | %s | %s |" % (name, cell(type_cell(option)), cell(default_cell(option)), meaning))
    return rows


def playbooks_using(role):
    pattern = re.compile(r"\b%s\.%s\b" % (re.escape(COLLECTION), re.escape(role)))
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            if pattern.search(handle.read()):
                found.append(os.path.relpath(path, ROOT))
    return found


def readme(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    main = specs["main"]
    description = main.get("description") or []
    if isinstance(description, str):
        description = [description]
    lines = ["<!-- Generated from meta/argument_specs.yml by docs/site/role_readmes.py: edit those, then run it. -->",
             "# %s.%s" % (COLLECTION, role), "", markdown(main["short_description"], role), ""]
    for paragraph in description:
        lines += [markdown(paragraph, role), ""]
    used = playbooks_using(role)
    if used:
        lines += ["Run by %s." % ", ".join("`%s`" % p for p in used), ""]
    others = sorted(name for name in specs if name != "main")
    if others:
        lines += ["Entry points besides `main`: %s." % ", ".join("`%s`" % n for n in others), ""]
    lines += [
        "## Variables",
        "",
        "From the role's argument specification (`meta/argument_specs.yml`, checked when the role runs; also",
        "`ansible-doc -t role %s.%s` and the role's page of the docs site, `make docs`). A default in" % (COLLECTION, role),
        "`{{ }}` takes a cluster-wide `ddp_*` value: those have their defaults in the role `%s.ddp`" % COLLECTION,
        "(`roles/ddp/README.md`), which this role depends on.",
        "",
    ]
    for entry in ["main"] + others:
        options = specs[entry].get("options") or {}
        if others:
            lines += ["### Entry point `%s`" % entry, "", markdown(specs[entry]["short_description"], role), ""]
        lines += variables_table(options, role) if options else ["No variables."]
        lines += [""]
    lines += [
        "## Example",
        "",
        "```yaml",
        "- name: Apply %s.%s" % (COLLECTION, role),
        "  hosts: %s" % ("localhost" if role == "local_cluster" else "ddp_nodes"),
        "  roles:",
        "    - role: %s.%s" % (COLLECTION, role),
        "```",
        "",
        "License: GPL-3.0-or-later. Part of the [%s](../../README.md) collection." % COLLECTION,
    ]
    return "\n".join(lines) + "\n"


def commented_defaults(path):
    """(name, default, meaning) of each top-level variable of a defaults file, in file order.

    The meaning is the block of ``#`` lines right above the variable; the file's opening comment (the one
    followed by a blank line) belongs to no variable. Raises ValueError naming a variable without a comment.
    """
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    values = yaml.safe_load(text) or {}
    found, comment = [], []
    for line in text.splitlines():
        if line.startswith("#"):
            comment.append(line.lstrip("#").strip())
        elif not line.strip():
            comment = []
        else:
            match = re.match(r"^([a-z][a-z0-9_]*):", line)
            if match:
                name = match.group(1)
                if not comment:
                    raise ValueError("%s: %s has no comment above it" % (path, name))
                found.append((name, values[name], " ".join(comment)))
            comment = []
    return found


def defaults_readme(role):
    path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
    with open(os.path.join(ROOT, "roles", role, "meta", "main.yml"), encoding="utf-8") as handle:
        description = yaml.safe_load(handle)["galaxy_info"]["description"]
    lines = ["<!-- Generated from defaults/main.yml by docs/site/role_readmes.py: edit that, then run it. -->",
             "# %s.%s" % (COLLECTION, role), "", description + ".", "",
             "It has no tasks. Every stage play of the collection lists it first under `roles:`, and every role",
             "that reads one of these variables depends on it, so each variable has one default, here. Set them in",
             "the inventory (`group_vars`) or as extra vars; the validate stage checks every value before any node",
             "is contacted.", "",
             "## Variables", "",
             "| Variable | Default | Meaning |", "| --- | --- | --- |"]
    for name, value, meaning in commented_defaults(path):
        lines.append("| `%s` | %s | %s |" % (name, cell(default_cell({"default": value})), cell(meaning)))
    lines += ["", "## Example", "", "```yaml", "- name: A play of your own that reads the cluster-wide settings",
              "  hosts: \"{{ ddp_nodes_group }}\"", "  become: \"{{ ddp_become }}\"", "  roles:",
              "    - role: %s.%s" % (COLLECTION, role), "    - role: %s.firewall" % COLLECTION, "```", "",
              "License: GPL-3.0-or-later. Part of the [%s](../../README.md) collection." % COLLECTION]
    return "\n".join(lines) + "\n"


def main(argv):
    check = "--check" in argv
    stale = []
    roles = [(spec.split(os.sep)[-3], readme)
             for spec in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))]
    # A role without an argument spec (ddp.cluster.ddp, the cluster-wide defaults) is described by its defaults file.
    roles += [(role, defaults_readme) for role in sorted(os.listdir(os.path.join(ROOT, "roles")))
              if not os.path.exists(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))]
    for role, write in roles:
        path = os.path.join(ROOT, "roles", role, "README.md")
        text = write(role)
        current = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                current = handle.read()
        if current == text:
            continue
        if check:
            stale.append(os.path.relpath(path, ROOT))
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    if stale:
        sys.stderr.write("not generated from the role's argument specs or defaults"
                         " (run .venv/bin/python docs/site/role_readmes.py): %s\n"
                         % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
