# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the local podman cluster's nodes sit on their network (pure, standard library only).

roles/local_cluster gives node i (1..N) host number ``offset + i - 1`` of the podman network's subnet, a fixed
address that its ssh_config names and that a restarted node keeps, and a MAC derived from that address, so that the
controller's ARP entry for a restarted node stays valid. The address arithmetic is Python's ``ipaddress``.

The rule for a subnet that holds the nodes is the one the role has always applied: an IPv4 subnet whose size
``2 ** (32 - prefix)`` is more than ``offset + count + 1``: the last node's host number, ``offset + count - 1``,
stays below the broadcast address's with one to spare.
"""
from __future__ import annotations

import ipaddress

MAC_FORMAT = "02:dd:%02x:%02x:%02x:%02x"


def _whole(value, what):
    """An int from an int or a string of one (``-e`` passes strings); anything else raises TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError("%s must be a whole number, got %s" % (what, type(value).__name__))
    try:
        return int(value)
    except ValueError:
        raise ValueError("%s must be a whole number, got %r" % (what, value)) from None


def ipv4_network(subnet):
    """The IPv4 network of ``subnet`` (``"10.89.0.0/24"``; host bits are ignored), else ``None``."""
    if not isinstance(subnet, str):
        return None
    try:
        network = ipaddress.ip_network(subnet, strict=False)
    except ValueError:
        return None
    return network if isinstance(network, ipaddress.IPv4Network) else None


def subnet_holds(subnet, offset, count):
    """Whether ``subnet`` is an IPv4 subnet with room for ``count`` nodes from host number ``offset``.

    :param subnet: the subnet as podman reports it, e.g. ``"10.89.0.0/24"``.
    :param offset: the first node's host number (``local_cluster_address_offset``).
    :param count: the number of nodes.
    :returns: ``2 ** (32 - prefix) > offset + count + 1`` for an IPv4 subnet, ``False`` for anything else.
    :raises TypeError, ValueError: ``offset`` or ``count`` is not a whole number.
    """
    offset = _whole(offset, "offset")
    count = _whole(count, "count")
    network = ipv4_network(subnet)
    return network is not None and network.num_addresses > offset + count + 1


def node_addresses(subnet, offset, names):
    """Each node's address: the i-th of ``names`` (from 0) gets host number ``offset + i`` of ``subnet``.

    :param subnet: the subnet as podman reports it, e.g. ``"10.89.0.0/24"``.
    :param offset: the first node's host number.
    :param names: the node names, in order.
    :returns: ``{name: address}`` (dotted IPv4 strings), in the order of ``names``.
    :raises ValueError: the subnet is not IPv4 or cannot hold the nodes (see :func:`subnet_holds`).
    """
    names = list(names)
    if not subnet_holds(subnet, offset, len(names)):
        raise ValueError("subnet %r is not an IPv4 subnet that holds %d node(s) from host number %s "
                         "(it needs 2 ** (32 - prefix) > offset + count + 1)" % (subnet, len(names), offset))
    first = ipv4_network(subnet).network_address + _whole(offset, "offset")
    return {name: str(first + index) for index, name in enumerate(names)}


def mac_address(address):
    """The MAC a node with IPv4 ``address`` gets: ``02:dd:`` (locally administered) and the address's four bytes.

    :raises ValueError: ``address`` is not an IPv4 address.
    """
    if not isinstance(address, (str, ipaddress.IPv4Address)):
        raise ValueError("expected an IPv4 address, got %s" % type(address).__name__)
    return MAC_FORMAT % tuple(ipaddress.IPv4Address(address).packed)
