# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of the firewall role: a thin wrapper over plugins/module_utils/system/firewalld.py (pure, unit-tested)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.system import firewalld


def _listing_text(listing, name):
    if isinstance(listing, (list, tuple)) and all(isinstance(line, str) for line in listing):
        listing = "\n".join(listing)
    if not isinstance(listing, str):
        raise AnsibleFilterError("%s expects the command's output (a string, or a list of its lines), got %s"
                                 % (name, type(listing).__name__))
    return listing


def firewalld_zone_todo(listing, sources=None, services=None, ports=None):
    """{sources, services, ports} still to enable, from the permanent + runtime ``--list-all`` listing.

    ``listing`` is the command's output (str) or its lines (a list of str, as ``stdout_lines``). Lines need no
    join in the task: with ansible-core 2.19, ``join('\\n')`` inside a YAML block scalar (``>-``) joined with a
    backslash and an n, so nothing parsed and every item looked missing on every run.
    """
    permanent, runtime = firewalld.split_permanent_runtime(_listing_text(listing, "firewalld_zone_todo"))
    try:
        return firewalld.zone_todo(permanent, runtime,
                                   {"sources": sources or [], "services": services or [], "ports": ports or []})
    except TypeError as exc:
        raise AnsibleFilterError("firewalld_zone_todo: %s" % exc)


def firewalld_rich_rules_todo(listing, rules):
    """The rich rules (list of str, firewalld's normalized form) the zone lacks, permanent or runtime, from the same
    permanent + runtime ``--list-all`` listing as :func:`firewalld_zone_todo` (a string or its lines)."""
    try:
        return firewalld.rich_rules_todo(_listing_text(listing, "firewalld_rich_rules_todo"), rules)
    except TypeError as exc:
        raise AnsibleFilterError("firewalld_rich_rules_todo: %s" % exc)


class FilterModule(object):
    """ddp.cluster firewalld filters."""

    def filters(self):
        return {"firewalld_zone_todo": firewalld_zone_todo, "firewalld_rich_rules_todo": firewalld_rich_rules_todo}
