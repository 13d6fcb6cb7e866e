# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure preflight checks: inventory shape, rendezvous address, ports, name resolution.

No I/O here. ``inventory_problems`` runs on the controller before any change;
``resolve_problems`` diagnoses the output of ``getent ahostsv4 <name>`` /
``getent hosts <name>`` that a task collected on a live node.

Every problem is ``{code, variable, message, fix}``; ``variable`` names the
inventory variable to change, or is None when the fix is not a variable (for
example /etc/hosts on a node).

Cases (docs/cases.md): C01 (a hostname that resolves to 127.0.1.1 makes
Gloo advertise loopback to its peers; pytorch/gloo issue 223) and C02 (a
loopback rendezvous address with more than one node; pytorch/pytorch 65992).
"""
from __future__ import annotations

import ipaddress

__all__ = [
    "LOOPBACK_NAMES",
    "PROBLEM_CODES",
    "inventory_problems",
    "is_loopback",
    "parse_getent",
    "resolve_problems",
]

PROBLEM_CODES = (
    "PREFLIGHT_NO_NODES",
    "PREFLIGHT_NO_HEAD",
    "PREFLIGHT_MANY_HEADS",
    "PREFLIGHT_HEAD_NOT_NODE",
    "PREFLIGHT_NO_RDZV_ADDR",
    "PREFLIGHT_LOOPBACK_RDZV",
    "PREFLIGHT_BAD_NPROC",
    "PREFLIGHT_BAD_PORT",
    "PREFLIGHT_HOST_UNRESOLVED",
    "PREFLIGHT_HOST_LOOPBACK",
)

# Names that resolve to loopback on common distributions (/etc/hosts on Debian,
# Ubuntu, RHEL) and by RFC 6761 (anything under .localhost).
LOOPBACK_NAMES = frozenset((
    "localhost", "localhost.localdomain", "localhost4", "localhost4.localdomain4",
    "localhost6", "localhost6.localdomain6", "ip6-localhost", "ip6-loopback",
))

VAR_NODES_GROUP = "ddp_nodes_group"
VAR_HEAD_GROUP = "ddp_head_group"
VAR_RDZV_ADDR = "ddp_rdzv_addr"
VAR_RDZV_PORT = "ddp_rdzv_port"
VAR_NPROC = "ddp_nproc_per_node"


def _problem(code, variable, message, fix):
    return {"code": code, "variable": variable, "message": message, "fix": fix}


def _ip(text):
    """Return an ipaddress object for text (brackets and %zone stripped), or None."""
    value = str(text).strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    value = value.split("%", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def is_loopback(addr):
    """True when addr is a loopback address or a name that always means loopback.

    Loopback: 127.0.0.0/8, ::1, IPv4-mapped ::ffff:127.x.y.z, and the names in
    LOOPBACK_NAMES or under ``.localhost`` (case-insensitive, trailing dot ignored).
    Other names return False: whether they resolve to loopback is a question for
    resolve_problems on a live node. None and "" return False.
    """
    if addr is None:
        return False
    text = str(addr).strip().lower().rstrip(".")
    if not text:
        return False
    if text in LOOPBACK_NAMES or text.endswith(".localhost"):
        return True
    ip = _ip(text)
    if ip is None:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        return mapped.is_loopback
    return ip.is_loopback


def _int_like(value):
    """Return value as int when it is an int or a string of digits; else None. Bools are not ints."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _port_problem(variable, value):
    port = _int_like(value)
    if port is not None and 1 <= port <= 65535:
        return None
    return _problem(
        "PREFLIGHT_BAD_PORT", variable,
        "%s is %r; a TCP port is an integer from 1 to 65535" % (variable, value),
        "Set %s to a free port between 1 and 65535 (e.g. 29500 for the c10d rendezvous)." % variable)


def inventory_problems(cfg):
    """Check the inventory and launch settings before any change is made.

    cfg keys (all optional):
        nodes           list of inventory hostnames in the nodes group
        nodes_group     that group's name (default 'ddp_nodes')
        head_hosts      list of hostnames in the head group
        head_group      that group's name (default 'ddp_head')
        rdzv_addr       rendezvous host (name or IP); checked only when the key is present
        rdzv_port       rendezvous TCP port; checked only when the key is present
        nproc_per_node  int-like >= 1 or "auto"; checked only when the key is present
        ports           dict variable name -> value of other ports to range-check

    Returns a list of problems (empty when the inventory is fine).
    """
    cfg = cfg or {}
    problems = []
    nodes = list(cfg.get("nodes") or [])
    nodes_group = cfg.get("nodes_group") or "ddp_nodes"
    heads = list(cfg.get("head_hosts") or [])
    head_group = cfg.get("head_group") or "ddp_head"

    problems.extend(_group_problems(nodes, nodes_group, heads, head_group))

    if "rdzv_addr" in cfg:
        problems.extend(_rdzv_addr_problems(cfg.get("rdzv_addr"), nodes))

    if "rdzv_port" in cfg:
        found = _port_problem(VAR_RDZV_PORT, cfg.get("rdzv_port"))
        if found:
            problems.append(found)

    for variable, value in sorted((cfg.get("ports") or {}).items()):
        found = _port_problem(variable, value)
        if found:
            problems.append(found)

    if "nproc_per_node" in cfg:
        problems.extend(_nproc_problems(cfg.get("nproc_per_node")))

    return problems


def _group_problems(nodes, nodes_group, heads, head_group):
    """Check the nodes group and the head group (one host, also a node).

    :returns: a list of problems (empty when both groups are fine).
    """
    problems = []
    if not nodes:
        problems.append(_problem(
            "PREFLIGHT_NO_NODES", VAR_NODES_GROUP,
            "inventory group '%s' has no hosts; there is nothing to train on" % nodes_group,
            "Add the GPU servers to group '%s' (or point %s at the group that holds them)."
            % (nodes_group, VAR_NODES_GROUP)))

    if not heads:
        problems.append(_problem(
            "PREFLIGHT_NO_HEAD", VAR_HEAD_GROUP,
            "inventory group '%s' is missing or empty; one host must run the c10d rendezvous" % head_group,
            "Put exactly one node in group '%s' (or set %s to the group that holds it)." % (head_group, VAR_HEAD_GROUP)))
    elif len(heads) > 1:
        problems.append(_problem(
            "PREFLIGHT_MANY_HEADS", VAR_HEAD_GROUP,
            "inventory group '%s' has %d hosts (%s); exactly one runs the rendezvous"
            % (head_group, len(heads), ", ".join(str(h) for h in heads)),
            "Leave exactly one host in group '%s'." % head_group))
    else:
        missing = [h for h in heads if h not in nodes]
        if missing and nodes:
            problems.append(_problem(
                "PREFLIGHT_HEAD_NOT_NODE", VAR_HEAD_GROUP,
                "head host %s (group '%s') is not in the nodes group '%s'"
                % (", ".join(str(h) for h in missing), head_group, nodes_group),
                "Add %s to group '%s' too: the head is also a training node." % (missing[0], nodes_group)))
    return problems


def _rdzv_addr_problems(addr, nodes):
    """Check the rendezvous address: set, and not a loopback address when there are several nodes.

    :returns: a list of problems (empty when the address is fine).
    """
    problems = []
    if addr is None or not str(addr).strip():
        problems.append(_problem(
            "PREFLIGHT_NO_RDZV_ADDR", VAR_RDZV_ADDR,
            "%s is empty; every node must be told where the rendezvous runs" % VAR_RDZV_ADDR,
            "Set %s to the head node's fabric address or a name every node resolves to it." % VAR_RDZV_ADDR))
    elif is_loopback(addr) and len(nodes) > 1:
        problems.append(_problem(
            "PREFLIGHT_LOOPBACK_RDZV", VAR_RDZV_ADDR,
            "%s is %s, a loopback address, but there are %d nodes: the other nodes would dial "
            "themselves and never join" % (VAR_RDZV_ADDR, addr, len(nodes)),
            "Set %s to the head node's address on the training network (not localhost / 127.x / ::1)."
            % VAR_RDZV_ADDR))
    return problems


def _nproc_problems(value):
    """Check nproc_per_node: 'auto' or an integer >= 1.

    :returns: a list of problems (empty when the value is fine).
    """
    problems = []
    is_auto = isinstance(value, str) and value.strip().lower() == "auto"
    count = _int_like(value)
    if not is_auto and (count is None or count < 1):
        problems.append(_problem(
            "PREFLIGHT_BAD_NPROC", VAR_NPROC,
            "%s is %r; it must be 'auto' (one process per GPU) or an integer >= 1" % (VAR_NPROC, value),
            "Set %s to auto or to the number of GPUs to use per node." % VAR_NPROC))
    return problems


def parse_getent(output):
    """Return the addresses, in order and without repeats, from getent output.

    Accepts a string or a list of lines (Ansible's stdout_lines). Lines whose first
    field is not an IP address are ignored. Works for ``getent hosts`` (address
    then names) and ``getent ahosts``/``ahostsv4`` (address, socket type, name).
    """
    if output is None:
        return []
    lines = output.splitlines() if isinstance(output, str) else list(output)
    addrs = []
    for line in lines:
        fields = str(line).split()
        if not fields or _ip(fields[0]) is None:
            continue
        if fields[0] not in addrs:
            addrs.append(fields[0])
    return addrs


def resolve_problems(hostname, getent_output, variable=None):
    """Diagnose how a node resolves ``hostname`` from its getent output.

    PREFLIGHT_HOST_UNRESOLVED: no address (getent exit 2 prints nothing).
    PREFLIGHT_HOST_LOOPBACK: the first address is loopback (so is the one Gloo and
    c10d pick; the usual cause is a Debian/Ubuntu '127.0.1.1 <hostname>' line or the
    hostname appended to the '127.0.0.1 localhost' line in /etc/hosts).
    ``variable`` is copied into the problems (e.g. 'ddp_rdzv_addr' when the name is
    the rendezvous address); default None.
    """
    addrs = parse_getent(getent_output)
    if not addrs:
        return [_problem(
            "PREFLIGHT_HOST_UNRESOLVED", variable,
            "%s does not resolve on this node (getent returned no address)" % hostname,
            "Add %s to DNS or to /etc/hosts on every node, with its training-network address." % hostname)]
    if is_loopback(addrs[0]):
        return [_problem(
            "PREFLIGHT_HOST_LOOPBACK", variable,
            "%s resolves to loopback %s (all addresses: %s); peers would be told to dial loopback"
            % (hostname, addrs[0], ", ".join(addrs)),
            "In /etc/hosts, remove %s from the 127.0.0.1 / 127.0.1.1 lines and map it to its "
            "training-network address (e.g. '192.0.2.10 %s')." % (hostname, hostname))]
    return []
