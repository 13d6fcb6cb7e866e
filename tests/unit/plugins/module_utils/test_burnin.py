"""Burn-in verdicts on a real ddp_burnin.py output (fixtures/burnin/SOURCES.md) and nodes derived from it."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.crossnode import burnin_findings as burnin_filter
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.burnin import burnin_findings

REAL = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "burnin" / "ddp_burnin_cpu_2s_512.json").read_text())


def node(tflops=None, digest=None, **device):
    result = copy.deepcopy(REAL)
    if tflops is not None:
        result["devices"][0]["tflops"] = tflops
    if digest is not None:
        result["devices"][0]["digest"] = digest
    result["devices"][0].update(device)
    return result


def gpus(*specs):
    """One GPU node: (tflops, digest) per device, bf16 at n = 8192."""
    result = {"device_type": "cuda", "dtype": "bf16", "size": 8192, "torch": "2.1.0+cu121", "seconds": 300.0,
              "devices": []}
    for index, (tflops, digest) in enumerate(specs):
        result["devices"].append({"index": index, "name": "NVIDIA A100-SXM4-80GB", "tflops": tflops, "digest": digest,
                                  "products": 1000, "seconds": 300.0})
    return result


def codes(findings):
    return sorted((p["code"], p["subject"]) for p in findings["problems"])


def test_identical_nodes_pass():
    out = burnin_findings({"n1": node(), "n2": node(), "n3": node()})
    assert out["problems"] == [] and out["nodes"] == {}
    assert [d["ratio"] for d in out["devices"]] == [1.0, 1.0, 1.0]
    assert all(d["digest_ok"] for d in out["devices"])


def test_slow_node_is_named_against_the_median():
    real = REAL["devices"][0]["tflops"]
    out = burnin_findings({"n1": node(), "n2": node(), "n3": node(tflops=real * 0.5)})
    assert codes(out) == [("BURNIN_SLOW", "n3 CPU 0")]
    assert out["nodes"] == {"n3": ["BURNIN_SLOW"]}
    assert "50% of the median of the 3" in out["problems"][0]["message"]
    # The floor is a parameter: at 0.4 the same node passes.
    assert burnin_findings({"n1": node(), "n2": node(), "n3": node(tflops=real * 0.5)}, 0.4)["problems"] == []


def test_wrong_product_is_named_by_the_majority():
    out = burnin_findings({"n1": node(), "n2": node(), "n3": node(digest="0" * 64)})
    assert codes(out) == [("BURNIN_MISMATCH", "n3 CPU 0")]
    assert "differs from the one 2 of the 3" in out["problems"][0]["message"]


def test_two_devices_that_disagree_are_both_named():
    out = burnin_findings({"n1": node(), "n2": node(digest="0" * 64)})
    assert codes(out) == [("BURNIN_MISMATCH", "n1 CPU 0"), ("BURNIN_MISMATCH", "n2 CPU 0")]


def test_gpus_within_a_node_and_across_nodes():
    good = "a" * 64
    out = burnin_findings({"g1": gpus((250.0, good), (248.0, good), (251.0, good), (249.0, good)),
                           "g2": gpus((250.0, good), (180.0, good), (250.0, "b" * 64), (252.0, good))})
    assert codes(out) == [("BURNIN_MISMATCH", "g2 GPU 2"), ("BURNIN_SLOW", "g2 GPU 1")]
    assert out["nodes"] == {"g2": ["BURNIN_SLOW", "BURNIN_MISMATCH"]}


def test_devices_of_other_models_or_settings_are_not_compared():
    cpu_other = node(tflops=0.001, digest="c" * 64, name="AMD EPYC 7763 64-Core Processor")
    out = burnin_findings({"n1": node(), "n2": cpu_other})
    assert out["problems"] == [] and {d["ratio"] for d in out["devices"]} == {None}


def test_not_run_and_failed_device():
    failed = node(tflops=0, error="RuntimeError: CUDA error: an illegal memory access was encountered")
    out = burnin_findings({"n1": {"error": "rc 2: torch does not import"}, "n2": failed, "n3": node()})
    assert codes(out) == [("BURNIN_NOT_RUN", "n1"), ("BURNIN_NOT_RUN", "n2 CPU 0")]
    assert "illegal memory access" in out["problems"][1]["message"]


@pytest.mark.parametrize("ratio", [0, 1.5, "x", None])
def test_bad_ratio_is_refused(ratio):
    with pytest.raises(ValueError, match="min_ratio"):
        burnin_findings({"n1": node()}, ratio)


def test_filter_refuses_other_shapes():
    with pytest.raises(AnsibleFilterError, match="expects a dict"):
        burnin_filter([node()])
    with pytest.raises(AnsibleFilterError, match="must be a dict"):
        burnin_filter({"n1": "text"})
    assert burnin_filter({"n1": node()})["problems"] == []


def test_registered_results_are_read():
    ok = {"finished": 1, "rc": 0, "stdout": json.dumps(REAL), "stderr_lines": []}
    failed = {"finished": 1, "rc": 2, "stdout": "",
              "stderr_lines": ["ddp_burnin.py: error: torch does not import in /opt/ddp/venv/bin/python: No module"]}
    out = burnin_filter({"n1": ok, "n2": copy.deepcopy(ok), "n3": failed, "n4": {}})
    assert codes(out) == [("BURNIN_NOT_RUN", "n3"), ("BURNIN_NOT_RUN", "n4")]
    assert "rc 2: ddp_burnin.py: error: torch does not import" in out["problems"][0]["message"]
    assert "no result (the node stopped answering Ansible)" in out["problems"][1]["message"]
    assert [d["digest_ok"] for d in out["devices"]] == [True, True]


def test_filter_adds_counters_and_dcgm():
    healthy = {"gpus": [{"index": 0, "bus_id": "0000:41:00.0", "ecc": {"volatile_uncorrectable": 0}}], "xids": []}
    worse = {"gpus": [{"index": 0, "bus_id": "0000:41:00.0", "ecc": {"volatile_uncorrectable": 2}}], "xids": []}
    dcgm_missing = {"rc": 2, "stdout": "", "msg": "[Errno 2] No such file or directory: b'dcgmi'"}
    out = burnin_filter({"n1": node(), "n2": node()}, 0.9, before={"n1": healthy, "n2": healthy},
                        after={"n1": healthy, "n2": worse}, dcgm={"n1": dcgm_missing, "n2": dcgm_missing}, dcgm_level=2)
    assert codes(out) == [("BURNIN_GPU_ERRORS", "n2 GPU 0 (0000:41:00.0)")]
    assert out["nodes"] == {"n2": ["BURNIN_GPU_ERRORS"]} and out["dcgm_ran"] == []
    with pytest.raises(AnsibleFilterError, match="before expects a dict"):
        burnin_filter({"n1": node()}, 0.9, before=[healthy])
