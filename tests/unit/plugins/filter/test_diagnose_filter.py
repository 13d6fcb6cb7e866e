"""The diagnose filters (runtime_problems, diagnose_text) on real logs (tests/unit/fixtures/runtime, slurm)."""
from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.diagnose import FilterModule, diagnose_text, runtime_problems

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def read(path):
    with open(os.path.join(FIXTURES, path)) as handle:
        return handle.read()


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {"runtime_problems", "diagnose_text"}


def test_runtime_problems_takes_text_or_lines():
    text = read("runtime/torch_watchdog_timeout_old-format_1800000ms__OFA-271.txt")
    assert runtime_problems(text, "node1")[0]["code"] == "TORCH_NCCL_WATCHDOG_TIMEOUT"
    assert runtime_problems(text.splitlines(), "node1", 8)[0]["message"] == \
        runtime_problems(text, "node1", "8")[0]["message"]
    assert runtime_problems("", "node1") == []


def test_diagnose_text():
    out = diagnose_text(read("slurm/sinfo_lNe_down-not-responding__elasticluster-272.txt"))
    assert out["kind"] == "sinfo" and out["errors"] == ["SLURM_NODE_NOT_RESPONDING"]
    with pytest.raises(AnsibleFilterError, match="kind must be"):
        diagnose_text("x", "nosuch")
