"""firewalld listing parser and what-to-add planning, on real firewall-cmd outputs (fixtures/firewalld/SOURCES.md)."""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.firewalld import firewalld_rich_rules_todo, firewalld_zone_todo
from ansible_collections.ddp.cluster.plugins.module_utils.system import firewalld

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "firewalld"
COMPLETE = (FIXTURES / "list-all_ddp-cluster_complete__firewalld-1.3.3-debian12.txt").read_text()
RUNTIME_LACKS = (FIXTURES / "list-all_ddp-cluster_runtime-lacks-source__firewalld-1.3.3-debian12.txt").read_text()
MERGED = (FIXTURES / "list-all_ddp-cluster_merged-port-range__firewalld-1.3.3-debian12.txt").read_text()
INVALID = (FIXTURES / "list-all_invalid-zone__firewalld-1.3.3-debian12.txt").read_text()
NODES = ["10.89.0.10", "10.89.0.11", "10.89.0.12"]
PORTS = ["29400/tcp", "32768-60999/tcp"]


def test_parse_list_all_reads_the_three_lists():
    permanent, runtime = firewalld.split_permanent_runtime(COMPLETE)
    for text in (permanent, runtime):
        assert firewalld.parse_list_all(text) == {"sources": NODES, "services": ["ssh"], "ports": PORTS}


def test_complete_zone_needs_nothing():
    assert firewalld_zone_todo(COMPLETE, sources=NODES, services=["ssh"], ports=PORTS) == {
        "sources": [], "services": [], "ports": []}


def test_lines_as_the_role_passes_them():
    """The firewall role passes stdout_lines after the port range line; a text whose lines were joined with a
    backslash and an n (not a newline) parses as nothing, so every item is still to add."""
    assert firewalld_zone_todo(COMPLETE.splitlines(), sources=NODES, services=["ssh"], ports=PORTS) == {
        "sources": [], "services": [], "ports": []}
    assert firewalld_zone_todo(RUNTIME_LACKS.splitlines(), sources=NODES)["sources"] == ["10.89.0.12"]
    assert firewalld_zone_todo([], sources=NODES)["sources"] == NODES
    assert firewalld_zone_todo("\\n".join(COMPLETE.splitlines()), sources=NODES)["sources"] == NODES
    with pytest.raises(AnsibleFilterError, match="a list of its lines"):
        firewalld_zone_todo([1, 2], sources=NODES)


def test_ports_inside_a_merged_range_are_open():
    """firewalld merged 29400, the ephemeral range and the Slurm ports into 1024-65535: nothing to add again."""
    assert firewalld.parse_list_all(firewalld.split_permanent_runtime(MERGED)[0])["ports"] == ["1024-65535/tcp"]
    todo = firewalld_zone_todo(MERGED, sources=NODES[:2], services=["ssh"],
                               ports=PORTS + ["6818/tcp", "62000-63999/tcp", "1024-65535/tcp"])
    assert todo == {"sources": [], "services": [], "ports": []}
    # another protocol, a range reaching past the listed one, or text that is not a port are still to add
    todo = firewalld_zone_todo(MERGED, ports=["29400/udp", "1000-2000/tcp", "65535-65536/tcp", "ssh"])
    assert todo["ports"] == ["29400/udp", "1000-2000/tcp", "65535-65536/tcp", "ssh"]
    assert firewalld.covered("65535/tcp", ["1024-65535/tcp"]) and not firewalld.covered("1023/tcp", ["1024-65535/tcp"])
    # the range in the permanent configuration only (runtime reloaded without it): the port is still to add
    permanent, runtime = firewalld.split_permanent_runtime(MERGED)
    lacking = permanent + "\n" + firewalld.RUNTIME_MARKER + "\n" + runtime.replace("1024-65535/tcp", "22/tcp")
    assert firewalld_zone_todo(lacking, ports=["29400/tcp"])["ports"] == ["29400/tcp"]


def test_item_missing_at_runtime_only_is_added():
    todo = firewalld_zone_todo(RUNTIME_LACKS, sources=NODES, services=["ssh"], ports=PORTS)
    assert todo == {"sources": ["10.89.0.12"], "services": [], "ports": ["29400/tcp"]}


def test_new_node_and_extra_port_are_added_in_order_without_repeats():
    todo = firewalld_zone_todo(COMPLETE, sources=NODES + ["10.89.0.13", "10.89.0.13"], services=["ssh"],
                               ports=PORTS + ["29500/tcp"])
    assert todo == {"sources": ["10.89.0.13"], "services": [], "ports": ["29500/tcp"]}


def test_missing_zone_needs_everything():
    assert firewalld_zone_todo(INVALID, sources=NODES, services=["ssh"], ports=PORTS) == {
        "sources": NODES, "services": ["ssh"], "ports": PORTS}


def test_without_the_runtime_part_everything_is_added():
    permanent, _runtime = firewalld.split_permanent_runtime(COMPLETE)
    assert firewalld_zone_todo(permanent, sources=NODES)["sources"] == NODES


@pytest.mark.parametrize("listing, kwargs", [(None, {}), (COMPLETE, {"sources": "10.0.0.1"})])
def test_bad_input_is_a_filter_error(listing, kwargs):
    with pytest.raises(AnsibleFilterError):
        firewalld_zone_todo(listing, **kwargs)


RICH = (FIXTURES / "list-all_ddp-cluster_rich-rule__firewalld-1.3.3-debian12.txt").read_text()
EXPORTER_RULE = 'rule family="ipv4" source address="10.89.0.10" port port="9100" protocol="tcp" accept'


def test_rich_rules_are_the_tab_indented_lines_after_their_header():
    permanent, runtime = firewalld.split_permanent_runtime(RICH)
    assert firewalld.parse_rich_rules(permanent) == [EXPORTER_RULE]
    assert firewalld.parse_rich_rules(runtime) == [EXPORTER_RULE]
    # the other lists still parse beside them (the slurm stage's ports came before)
    assert firewalld.parse_list_all(permanent)["ports"] == PORTS + ["6818/tcp", "62000-63999/tcp"]
    for text in (COMPLETE, INVALID, ""):
        assert firewalld.parse_rich_rules(text) == []


def test_rich_rule_todo_from_the_listing_or_its_lines():
    other = EXPORTER_RULE.replace("9100", "9400")
    assert firewalld_rich_rules_todo(RICH, [EXPORTER_RULE]) == []
    assert firewalld_rich_rules_todo(RICH.splitlines(), [other, EXPORTER_RULE, other]) == [other]
    # a rule missing at runtime only (the permanent part alone) is to add; so is every rule of a missing zone
    permanent_only = firewalld.split_permanent_runtime(RICH)[0]
    assert firewalld_rich_rules_todo(permanent_only, [EXPORTER_RULE]) == [EXPORTER_RULE]
    assert firewalld_rich_rules_todo(INVALID, [EXPORTER_RULE]) == [EXPORTER_RULE]
    # a rule not in firewalld's normalized form is never found (so it is added, and firewalld normalizes it)
    assert firewalld_rich_rules_todo(RICH, [EXPORTER_RULE.replace('"', "'")]) == [EXPORTER_RULE.replace('"', "'")]


@pytest.mark.parametrize("listing, rules, match", [
    (None, [EXPORTER_RULE], "a list of its lines"),
    (RICH, EXPORTER_RULE, "rules must be a list"),
])
def test_rich_rule_todo_bad_input_is_a_filter_error(listing, rules, match):
    with pytest.raises(AnsibleFilterError, match=match):
        firewalld_rich_rules_todo(listing, rules)
