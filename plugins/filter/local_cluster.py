# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""local_cluster_subnet_holds, local_cluster_addresses, local_cluster_mac: the local podman cluster's node
addresses and MACs (roles/local_cluster/tasks/present.yml); the arithmetic is plugins/module_utils/cluster/local_cluster.py
(Python's ipaddress, unit-tested). Documentation: the .yml files of the same names beside this."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import local_cluster


def local_cluster_subnet_holds(subnet, offset, count):
    """A subnet, the first node's host number, the node count -> whether it is IPv4 and holds the nodes."""
    try:
        return local_cluster.subnet_holds(subnet, offset, count)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("local_cluster_subnet_holds: %s" % exc)


def local_cluster_addresses(subnet, offset, names):
    """A subnet, the first node's host number, the node names -> {name: address}."""
    if not isinstance(names, (list, tuple)):
        raise AnsibleFilterError("local_cluster_addresses: expected a list of node names, got %s" % type(names).__name__)
    try:
        return local_cluster.node_addresses(subnet, offset, names)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("local_cluster_addresses: %s" % exc)


def local_cluster_mac(address):
    """A node's IPv4 address -> its MAC, 02:dd: and the address's four bytes."""
    try:
        return local_cluster.mac_address(address)
    except ValueError as exc:
        raise AnsibleFilterError("local_cluster_mac: %s" % exc)


class FilterModule(object):
    """ddp.cluster local cluster filters."""

    def filters(self):
        return {
            "local_cluster_subnet_holds": local_cluster_subnet_holds,
            "local_cluster_addresses": local_cluster_addresses,
            "local_cluster_mac": local_cluster_mac,
        }
