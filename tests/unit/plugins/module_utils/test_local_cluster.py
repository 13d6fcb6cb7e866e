"""module_utils/cluster/local_cluster: the local podman cluster's node addresses and MACs (roles/local_cluster/tasks/
present.yml), on exact addresses and on the rule a subnet must meet."""
from __future__ import annotations

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.cluster.local_cluster import (
    ipv4_network,
    mac_address,
    node_addresses,
    subnet_holds,
)

NAMES = ["ddp-node1", "ddp-node2", "ddp-node3"]


def test_a_24_from_the_default_offset():
    assert node_addresses("10.89.0.0/24", 10, NAMES) == {
        "ddp-node1": "10.89.0.10", "ddp-node2": "10.89.0.11", "ddp-node3": "10.89.0.12"}


def test_the_result_keeps_the_names_order():
    assert list(node_addresses("10.89.0.0/24", 10, list(reversed(NAMES)))) == list(reversed(NAMES))


def test_a_16_carries_into_the_next_octet():
    names = ["n%d" % i for i in range(1, 6)]
    assert node_addresses("172.30.0.0/16", 254, names) == {
        "n1": "172.30.0.254", "n2": "172.30.0.255", "n3": "172.30.1.0", "n4": "172.30.1.1", "n5": "172.30.1.2"}
    assert node_addresses("10.88.0.0/16", 300, ["a"]) == {"a": "10.88.1.44"}


def test_host_bits_of_the_subnet_are_ignored():
    assert ipv4_network("10.89.0.7/24").with_prefixlen == "10.89.0.0/24"
    assert node_addresses("10.89.0.7/24", 10, ["a"]) == {"a": "10.89.0.10"}


def test_an_offset_given_as_a_string_counts():
    """-e local_cluster_address_offset=20 reaches the filter as a string."""
    assert node_addresses("10.89.0.0/24", "20", ["a"]) == {"a": "10.89.0.20"}


@pytest.mark.parametrize("offset", [1.5, None, True, "ten"])
def test_an_offset_that_is_not_a_whole_number_is_refused(offset):
    with pytest.raises((TypeError, ValueError), match="offset must be a whole number"):
        subnet_holds("10.89.0.0/24", offset, 3)


@pytest.mark.parametrize("subnet, offset, count, holds", [
    ("10.89.0.0/24", 10, 3, True),
    ("10.89.0.0/24", 10, 244, True),      # 256 > 10 + 244 + 1: the last node is 10.89.0.253
    ("10.89.0.0/24", 10, 245, False),     # 256 > 256 is false
    ("10.89.0.0/28", 10, 4, True),        # 16 > 15
    ("10.89.0.0/28", 10, 5, False),       # 16 > 16 is false
    ("10.89.0.0/30", 1, 2, False),
    ("10.89.0.0/32", 0, 1, False),
    ("10.88.0.0/16", 300, 3, True),
])
def test_the_rule_two_to_the_host_bits_more_than_offset_count_and_one(subnet, offset, count, holds):
    assert subnet_holds(subnet, offset, count) is holds


@pytest.mark.parametrize("subnet", ["fd00:dd::/64", "10.89.0.0/33", "10.89.0/24", "10.89.0.0/24 ", "", None, 176750592])
def test_what_is_not_an_ipv4_subnet_holds_nothing(subnet):
    assert subnet_holds(subnet, 10, 1) is False


def test_a_subnet_too_small_is_refused_with_the_numbers():
    with pytest.raises(ValueError, match=r"'10\.89\.0\.0/28' is not an IPv4 subnet that holds 5 node\(s\) from host number 10"):
        node_addresses("10.89.0.0/28", 10, ["n%d" % i for i in range(5)])


def test_an_ipv6_subnet_is_refused():
    with pytest.raises(ValueError, match="'fd00:dd::/64' is not an IPv4 subnet"):
        node_addresses("fd00:dd::/64", 10, NAMES)


@pytest.mark.parametrize("address, mac", [
    ("10.89.0.10", "02:dd:0a:59:00:0a"),
    ("172.30.1.0", "02:dd:ac:1e:01:00"),
    ("192.168.255.254", "02:dd:c0:a8:ff:fe"),
])
def test_the_mac_is_02_dd_and_the_four_bytes(address, mac):
    assert mac_address(address) == mac


@pytest.mark.parametrize("address", ["10.89.0", "fd00:dd::a", "10.89.0.256", 176750602, None])
def test_a_mac_needs_an_ipv4_address(address):
    with pytest.raises(ValueError):
        mac_address(address)
