"""ddp.cluster.local_cluster_subnet_holds, local_cluster_addresses, local_cluster_mac: the node addresses and MACs of
roles/local_cluster/tasks/present.yml, the same as the Jinja arithmetic they replaced, and their documentation."""
from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from jinja2 import Environment

from ansible_collections.ddp.cluster.plugins.filter import local_cluster as local_cluster_filter
from ansible_collections.ddp.cluster.plugins.filter.local_cluster import (
    local_cluster_addresses,
    local_cluster_mac,
    local_cluster_subnet_holds,
)

FILTERS = local_cluster_filter.FilterModule().filters()
PRESENT = pathlib.Path(__file__).resolve().parents[4] / "roles" / "local_cluster" / "tasks" / "present.yml"
NAMES = ["ddp-node1", "ddp-node2", "ddp-node3"]

# The Jinja the filters replaced (present.yml before issue 35 item 6), rendered with plain Jinja2 to compare.
OLD_ADDRESSES = """\
{%- set octets = subnet.split('/')[0].split('.') | map('int') | list -%}
{%- set base = ((octets[0] * 256 + octets[1]) * 256 + octets[2]) * 256 + octets[3] -%}
{%- set out = [] -%}
{%- for i in range(names | length) -%}
{%-   set n = base | int + offset + i -%}
{%-   set _ = out.append([n // 16777216, n // 65536 % 256, n // 256 % 256, n % 256] | join('.')) -%}
{%- endfor -%}
{{ out | join(' ') }}"""
OLD_HOLDS = """\
{{ (subnet is search('^[0-9.]+/[0-9]+$') and
    2 ** (32 - (subnet.split('/')[1] | int)) > offset + (names | length) + 1) | string }}"""
OLD_MAC = "{{ '02:dd:%02x:%02x:%02x:%02x' | format(*(address.split('.') | map('int'))) }}"


def old(template, **values):
    env = Environment()
    env.tests["search"] = lambda value, pattern: re.search(pattern, value) is not None  # Ansible's search test
    return env.from_string(template).render(**values)


def test_filters_are_registered():
    assert FILTERS == {"local_cluster_subnet_holds": local_cluster_subnet_holds,
                       "local_cluster_addresses": local_cluster_addresses,
                       "local_cluster_mac": local_cluster_mac}


def test_a_24_with_the_default_offset():
    assert local_cluster_addresses("10.89.0.0/24", 10, NAMES) == {
        "ddp-node1": "10.89.0.10", "ddp-node2": "10.89.0.11", "ddp-node3": "10.89.0.12"}
    assert [local_cluster_mac(a) for a in local_cluster_addresses("10.89.0.0/24", 10, NAMES).values()] == [
        "02:dd:0a:59:00:0a", "02:dd:0a:59:00:0b", "02:dd:0a:59:00:0c"]


def test_a_16_across_an_octet_boundary():
    names = ["n1", "n2", "n3"]
    assert local_cluster_addresses("10.88.0.0/16", 255, names) == {"n1": "10.88.0.255", "n2": "10.88.1.0", "n3": "10.88.1.1"}
    assert local_cluster_mac("10.88.1.0") == "02:dd:0a:58:01:00"


@pytest.mark.parametrize("subnet, offset, count", [
    ("10.89.0.0/24", 10, 3), ("10.89.0.0/24", 10, 244), ("10.89.0.0/24", 1, 12), ("10.89.0.0/28", 10, 4),
    ("10.88.0.0/16", 250, 12), ("10.88.0.0/16", 65530, 4), ("172.16.0.0/12", 65535, 3), ("10.0.0.0/8", 16777210, 4),
    ("192.168.124.0/22", 1020, 2),
])
def test_the_same_addresses_and_macs_as_the_jinja_it_replaced(subnet, offset, count):
    names = ["ddp-node%d" % i for i in range(1, count + 1)]
    new = local_cluster_addresses(subnet, offset, names)
    assert list(new) == names
    assert " ".join(new.values()) == old(OLD_ADDRESSES, subnet=subnet, offset=offset, names=names)
    for address in new.values():
        assert local_cluster_mac(address) == old(OLD_MAC, address=address)


@pytest.mark.parametrize("subnet, offset, count", [
    ("10.89.0.0/24", 10, 3), ("10.89.0.0/24", 10, 244), ("10.89.0.0/24", 10, 245), ("10.89.0.0/28", 10, 4),
    ("10.89.0.0/28", 10, 5), ("10.89.0.0/30", 1, 1), ("10.89.0.0/30", 1, 2), ("10.89.0.0/32", 0, 1),
    ("10.88.0.0/16", 65530, 4), ("10.88.0.0/16", 65530, 5), ("fd00:dd::/64", 10, 3), ("10.89.0.0", 10, 3),
])
def test_the_same_refusals_as_the_assert_it_replaced(subnet, offset, count):
    names = ["n%d" % i for i in range(count)]
    assert str(local_cluster_subnet_holds(subnet, offset, count)) == old(OLD_HOLDS, subnet=subnet, offset=offset, names=names)


def test_a_subnet_too_small_is_refused():
    assert local_cluster_subnet_holds("10.89.0.0/28", 10, 5) is False
    with pytest.raises(AnsibleFilterError, match=r"^local_cluster_addresses: subnet '10\.89\.0\.0/28' is not an IPv4 "
                                                 r"subnet that holds 5 node\(s\) from host number 10"):
        local_cluster_addresses("10.89.0.0/28", 10, ["n1", "n2", "n3", "n4", "n5"])


def test_an_ipv6_subnet_is_refused():
    assert local_cluster_subnet_holds("fd00:dd::/64", 10, 3) is False
    with pytest.raises(AnsibleFilterError, match="^local_cluster_addresses: subnet 'fd00:dd::/64' is not an IPv4 subnet"):
        local_cluster_addresses("fd00:dd::/64", 10, NAMES)


def test_bad_arguments_are_filter_errors():
    with pytest.raises(AnsibleFilterError, match="expected a list of node names, got str"):
        local_cluster_addresses("10.89.0.0/24", 10, "ddp-node1")
    with pytest.raises(AnsibleFilterError, match="^local_cluster_subnet_holds: offset must be a whole number"):
        local_cluster_subnet_holds("10.89.0.0/24", "ten", 3)
    with pytest.raises(AnsibleFilterError, match="^local_cluster_mac: "):
        local_cluster_mac("fd00:dd::a")


def test_the_tasks_use_the_filters_and_no_arithmetic():
    tasks = {task["name"]: task for task in yaml.safe_load(PRESENT.read_text())}
    check = tasks["present | Check that the subnet holds every node's address"]["ansible.builtin.assert"]
    assert check["that"] == ["__local_cluster_network_info.networks[0].subnets[0].subnet "
                             "| ddp.cluster.local_cluster_subnet_holds(local_cluster_address_offset, "
                             "__local_cluster_node_names | length)"]
    assert check["fail_msg"].startswith("Network {{ local_cluster_network }} has subnet ")
    give = tasks["present | Give each node a fixed address (the ssh_config names it; it survives a node restart)"]
    assert "ddp.cluster.local_cluster_addresses(local_cluster_address_offset, __local_cluster_node_names)" in \
        give["ansible.builtin.set_fact"]["__local_cluster_node_addresses"]
    start = tasks["present | Start the nodes"]["containers.podman.podman_container"]
    assert start["mac_address"] == "{{ __local_cluster_node_addresses[item] | ddp.cluster.local_cluster_mac }}"
    names = list(tasks)
    assert names.index("present | Check that the subnet holds every node's address") < names.index(
        "present | Give each node a fixed address (the ssh_config names it; it survives a node restart)")
    text = yaml.safe_dump([check, give, start])
    for arithmetic in ("256", "**", "//", "%02x", "split(", "+ i", "| int"):
        assert arithmetic not in text
