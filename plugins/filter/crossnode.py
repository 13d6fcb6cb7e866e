# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: compare facts gathered on every node, once, on the controller."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils import crossnode

_KEYS = ("versions", "mtu", "gid_index", "ssh_modes", "known_hosts_missing", "pairs")


def cluster_problems(per_node, gid_configured=None):
    """Run every cross-node comparison over ``{node: facts}`` (see the sidecar documentation)."""
    if not isinstance(per_node, dict):
        raise AnsibleFilterError("cluster_problems expects a dict of node -> facts, got %s" % type(per_node).__name__)
    for node, facts in per_node.items():
        if not isinstance(facts, dict):
            raise AnsibleFilterError("cluster_problems: the facts of %s are not a dict" % node)
        unknown = sorted(set(facts) - set(_KEYS))
        if unknown:
            raise AnsibleFilterError("cluster_problems: %s has unknown keys %s (known: %s)"
                                     % (node, ", ".join(unknown), ", ".join(_KEYS)))
    nodes = sorted(per_node)
    problems = []
    problems += crossnode.version_problems(dict((n, per_node[n].get("versions") or {}) for n in nodes))
    problems += crossnode.mtu_problems(dict((n, per_node[n].get("mtu")) for n in nodes))
    problems += crossnode.gid_index_problems(dict((n, per_node[n].get("gid_index")) for n in nodes), gid_configured)
    for node in nodes:
        modes = per_node[node].get("ssh_modes") or {}
        problems += crossnode.ssh_mode_problems(node, dict((path, tuple(km)) for path, km in modes.items()))
    for node in nodes:
        problems += crossnode.known_hosts_problems(node, per_node[node].get("known_hosts_missing") or [])
    problems += crossnode.pair_problems([p for n in nodes for p in (per_node[n].get("pairs") or [])])
    return problems


class FilterModule(object):
    """ddp.cluster cross-node filters."""

    def filters(self):
        return {"cluster_problems": cluster_problems}
