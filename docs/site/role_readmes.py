# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write roles/<role>/README.md from the role's meta/argument_specs.yml (the role's contract).

Galaxy shows a role's README and refuses a collection whose role has none. The README says what the
role does (the main entry point's description, Ansible markup rendered as Markdown by
antsibull-docs-parser), which playbook runs it, and where its variables are documented (ansible-doc,
the docs site); it does not copy the variables, so there is one place to keep them.

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
        "Every variable, with its type, default and meaning, is in the role's argument specification",
        "(`meta/argument_specs.yml`, checked when the role runs):",
        "",
        "```sh",
        "ansible-doc -t role %s.%s" % (COLLECTION, role),
        "```",
        "",
        "and on the role's page of the collection's docs site (`make docs`:",
        "`artifacts/docs/html/collections/ddp/cluster/%s_role.html`)." % role,
        "",
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


def main(argv):
    check = "--check" in argv
    stale = []
    for spec in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = spec.split(os.sep)[-3]
        path = os.path.join(ROOT, "roles", role, "README.md")
        text = readme(role)
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
        sys.stderr.write("not generated from meta/argument_specs.yml (run .venv/bin/python docs/site/role_readmes.py): %s\n"
                         % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
