# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a firewalld zone still lacks, from ``firewall-cmd --list-all`` (pure parsing, no I/O).

The firewall role reads the cluster zone once per node, permanent and runtime
(``firewall-cmd --permanent --zone=Z --list-all`` and ``firewall-cmd --zone=Z --list-all``), and calls
``ansible.posix.firewalld`` only for the sources, services and ports that one of the two lacks. A no-change
run then costs one command per node instead of one module call per cluster address (N per node, N² in all).

Output format (firewalld 1.x, ``firewall-cmd(1)`` ``--list-all``): a header line with the zone name, then
indented ``key: value value ...`` lines; ``sources``, ``services`` and ``ports`` are space-separated lists
(ports as ``PORT[-PORT]/PROTOCOL``). The ``rich rules:`` line is followed by one line per rule, each
indented with a tab, in firewalld's own normalized form (the form ``--list-rich-rules`` prints). A zone that
does not exist prints ``Error: INVALID_ZONE: <zone>``: it has nothing, so everything is to be added.

The slurm and metrics roles read the same zone: where the firewall role ran earlier in the run and changed
nothing in it, they use its listing (``__firewall_zone_listing``) instead of reading the zone again, so a
no-change run reads each node's zone once, not three times.
"""
from __future__ import annotations

import re

KINDS = ("sources", "services", "ports")
RUNTIME_MARKER = "--- runtime"
_LINE = re.compile(r"^\s+(?P<key>[a-z-]+):(?P<value>.*)$")


def parse_list_all(text):
    """The lists of one ``firewall-cmd --list-all`` output.

    :param text: the command's output (str); an error or empty output gives empty lists.
    :returns: ``{"sources": [...], "services": [...], "ports": [...]}`` (lists of str, in output order).
    """
    found = {kind: [] for kind in KINDS}
    for line in (text or "").splitlines():
        match = _LINE.match(line)
        if match and match.group("key") in found:
            found[match.group("key")] = match.group("value").split()
    return found


def parse_rich_rules(text):
    """The rich rules of one ``firewall-cmd --list-all`` output.

    :param text: the command's output (str); an error or empty output gives [].
    :returns: the rules (list of str, stripped, in output order): the tab-indented lines after ``rich rules:``.
    """
    rules, inside = [], False
    for line in (text or "").splitlines():
        if line.strip().startswith("rich rules:"):
            inside = True
        elif inside and line.startswith("\t") and line.strip():
            rules.append(line.strip())
        else:
            inside = False
    return rules


def split_permanent_runtime(text):
    """Split the role's combined output (permanent listing, a ``--- runtime`` line, runtime listing).

    :returns: ``(permanent_text, runtime_text)``; without the marker line the runtime part is empty.
    """
    permanent, _sep, runtime = (text or "").partition("\n" + RUNTIME_MARKER + "\n")
    if not _sep and (text or "").startswith(RUNTIME_MARKER + "\n"):
        return "", text[len(RUNTIME_MARKER) + 1:]
    return permanent, runtime


def zone_todo(permanent_text, runtime_text, wanted):
    """What to enable: each wanted item that the permanent or the runtime configuration lacks.

    :param wanted: ``{"sources": [...], "services": [...], "ports": [...]}``; missing kinds count as empty.
    :returns: the same keys, each the wanted items (as str, in the given order, without repeats) to enable.
    :raises TypeError: when a wanted kind is not a list.
    """
    permanent, runtime = parse_list_all(permanent_text), parse_list_all(runtime_text)
    todo = {}
    for kind in KINDS:
        items = wanted.get(kind) or []
        if not isinstance(items, (list, tuple)):
            raise TypeError("%s must be a list, got %s" % (kind, type(items).__name__))
        have = set(permanent[kind]) & set(runtime[kind])
        todo[kind] = []
        for item in (str(i) for i in items):
            if kind == "ports" and covered(item, permanent[kind]) and covered(item, runtime[kind]):
                continue
            if item not in have and item not in todo[kind]:
                todo[kind].append(item)
    return todo


def rich_rules_todo(listing, wanted):
    """The wanted rich rules that the permanent or the runtime configuration lacks.

    :param listing: the combined output (permanent ``--list-all``, ``--- runtime``, runtime ``--list-all``).
    :param wanted: rules (list of str) in firewalld's normalized form, e.g.
        ``rule family="ipv4" source address="10.0.0.1" port port="9100" protocol="tcp" accept``.
    :returns: the wanted rules (in the given order, without repeats) to enable.
    :raises TypeError: when ``wanted`` is not a list.
    """
    if not isinstance(wanted, (list, tuple)):
        raise TypeError("rules must be a list, got %s" % type(wanted).__name__)
    permanent_text, runtime_text = split_permanent_runtime(listing)
    permanent, runtime = set(parse_rich_rules(permanent_text)), set(parse_rich_rules(runtime_text))
    todo = []
    for rule in (str(r) for r in wanted):
        if not (rule in permanent and rule in runtime) and rule not in todo:
            todo.append(rule)
    return todo


_PORT = re.compile(r"^(?P<lo>\d+)(?:-(?P<hi>\d+))?/(?P<proto>[a-z]+)$")


def covered(port, listed):
    """Whether ``port`` (``PORT[-PORT]/PROTOCOL``) lies within one of the ``listed`` ports of its protocol.

    firewalld (0.9 and later) merges overlapping and adjacent ranges as it adds them: after
    ``29400/tcp`` and ``1024-65535/tcp`` it lists only ``1024-65535/tcp``, and ``--query-port=29400/tcp``
    answers no. A port inside a listed range is open; asking for it again would change nothing but the report.
    Text that is not a port is never covered.
    """
    want = _PORT.match(port)
    if not want:
        return False
    lo, hi = int(want.group("lo")), int(want.group("hi") or want.group("lo"))
    for item in listed:
        have = _PORT.match(item)
        if have and have.group("proto") == want.group("proto") \
                and int(have.group("lo")) <= lo and hi <= int(have.group("hi") or have.group("lo")):
            return True
    return False
