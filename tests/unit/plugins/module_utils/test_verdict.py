"""One verdict per node and the history (module_utils/cluster/verdict.py, filter health_verdicts).

The problems are what gpu_health, roce_health and node_stack returned on a Molecule node (no GPU, no RDMA device:
two warnings) and an IFNAME_NOT_FOUND error as the health stage drained a node with it (tests/integration).
"""
from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.crossnode import health_verdicts as verdicts_filter
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import verdict

NO_GPU = {"code": "NO_GPU", "severity": "warning", "subject": "node", "message": "no NVIDIA GPU", "fix": "-"}
NO_RDMA = {"code": "NO_RDMA", "severity": "warning", "subject": "node", "message": "no RDMA device", "fix": "-"}
IFNAME = {"code": "IFNAME_NOT_FOUND", "severity": "error", "subject": "NCCL_SOCKET_IFNAME", "message": "-", "fix": "-"}
INFO = {"code": "NCCL_CONF_ABSENT", "severity": "info", "subject": "node", "message": "-", "fix": "-"}
DAY = 86400.0
NOW = 1796169600.0  # 2026-12-02 00:00 UTC


@pytest.mark.parametrize("problems, errors, ran, expected", [
    ([], (), True, ("PASS", [], [])),
    ([INFO], (), True, ("PASS", [], [])),
    ([NO_GPU, NO_RDMA], (), True, ("WARN", [], ["NO_GPU", "NO_RDMA"])),
    ([NO_GPU, IFNAME], (), True, ("FAIL", ["IFNAME_NOT_FOUND"], ["NO_GPU"])),
    ([NO_GPU], ["PAIRWISE_NODE", "PAIRWISE_NODE"], True, ("FAIL", ["PAIRWISE_NODE"], ["NO_GPU"])),
    ([], (), False, ("UNKNOWN", [], [])),
])
def test_node_verdict(problems, errors, ran, expected):
    found = verdict.node_verdict(problems, errors, ran)
    assert (found["verdict"], found["errors"], found["warnings"]) == expected


def test_node_verdict_refuses_a_problem_without_severity():
    with pytest.raises(ValueError, match="code and severity"):
        verdict.node_verdict([{"code": "X"}])


def history(*records):
    return "".join(json.dumps(r) + "\n" for r in records)


def test_records_and_lines_of_a_run():
    found = verdict.health_verdicts({"a": {"problems": [NO_GPU, NO_RDMA]}, "b": {"problems": [IFNAME]},
                                     "c": {"problems": [], "ran": False}}, "", NOW)
    assert {n: v["verdict"] for n, v in found["nodes"].items()} == {"a": "WARN", "b": "FAIL", "c": "UNKNOWN"}
    assert found["problems"] == []  # a first failure is not a repeat
    assert [json.loads(line) for line in found["lines"].splitlines()] == found["records"]
    assert found["records"][1] == {"time": NOW, "node": "b", "verdict": "FAIL", "errors": ["IFNAME_NOT_FOUND"],
                                   "warnings": []}


def test_node_failing_again_within_the_window_is_flagged():
    past = history({"time": NOW - 2 * DAY, "node": "b", "verdict": "FAIL", "errors": ["BURNIN_SLOW"], "warnings": []},
                   {"time": NOW - 9 * DAY, "node": "b", "verdict": "FAIL", "errors": ["XID"], "warnings": []},
                   {"time": NOW - 1 * DAY, "node": "a", "verdict": "FAIL", "errors": ["ECC"], "warnings": []})
    found = verdict.health_verdicts({"a": {"problems": []}, "b": {"problems": [IFNAME]}}, past, NOW)
    assert [(p["code"], p["subject"], p["severity"]) for p in found["problems"]] == [
        ("HEALTH_REPEAT_FAIL", "b", "warning")]
    assert "failed 2 times within 7 days" in found["problems"][0]["message"]
    assert "BURNIN_SLOW, IFNAME_NOT_FOUND" in found["problems"][0]["message"]  # the 9-day-old XID is outside
    assert found["nodes"]["b"]["failures_in_window"] == 2 and found["nodes"]["a"]["failures_in_window"] == 1


def test_threshold_and_window_are_settable():
    past = history({"time": NOW - 2 * DAY, "node": "b", "verdict": "FAIL", "errors": ["X"], "warnings": []})
    assert verdict.health_verdicts({"b": {"problems": [IFNAME]}}, past, NOW, threshold=3)["problems"] == []
    assert verdict.health_verdicts({"b": {"problems": [IFNAME]}}, past, NOW, window_s=DAY)["problems"] == []


def test_history_lines_that_are_not_records_are_skipped_and_counted():
    text = "not json\n" + json.dumps({"node": "b", "verdict": "MAYBE", "time": NOW}) + "\n\n" + history(
        {"time": NOW - DAY, "node": "b", "verdict": "FAIL", "errors": [], "warnings": []})
    records, skipped = verdict.parse_history(text)
    assert len(records) == 1 and skipped == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"window_s": 0}, "window_s must be > 0"),
    ({"threshold": 1}, "threshold must be >= 2"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        verdict.health_verdicts({"a": {"problems": []}}, "", NOW, **kwargs)


def test_filter_reads_problems_errors_and_not_run():
    found = verdicts_filter({"a": [NO_GPU], "b": None, "c": []}, {"c": ["STACK_DRIFT"]}, "", NOW, 7, 2)
    assert {n: v["verdict"] for n, v in found["nodes"].items()} == {"a": "WARN", "b": "UNKNOWN", "c": "FAIL"}
    with pytest.raises(AnsibleFilterError, match="the problems of a are not a list"):
        verdicts_filter({"a": "NO_GPU"})
    with pytest.raises(AnsibleFilterError, match="expects a dict of node -> problems"):
        verdicts_filter([])
    with pytest.raises(AnsibleFilterError, match="health_verdicts: window_s must be > 0"):
        verdicts_filter({"a": []}, {}, "", NOW, 0)
