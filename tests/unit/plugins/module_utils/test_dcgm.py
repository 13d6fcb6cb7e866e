"""dcgmi diag tables (real outputs, tests/unit/fixtures/dcgm/SOURCES.md) and the per-node verdict."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.gpu.dcgm import DcgmFormatError, diag_findings, parse_dcgmi_diag

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "dcgm")
ALL_PASS = "dcgmi_diag_r4_8xGPU_all-pass__facebookresearch-gcm.txt"
THERMAL = "dcgmi_diag_r2_excerpt_GPU-Memory-fail-GPU0_thermal__ml-engineering.txt"
REMAP = "dcgmi_diag_excerpt_Deployment-Error_row-remap-pending-GPU3__ml-engineering.txt"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_all_pass_r4():
    parsed = parse_dcgmi_diag(fixture(ALL_PASS))
    names = [t["name"] for t in parsed["tests"]]
    assert names[0] == "Blacklist" and "Memtest" in names and len(names) == 18
    assert all(r["status"] == "pass" for t in parsed["tests"] for r in t["results"])
    assert parsed["tests"][names.index("SM Stress")]["results"] == [{"status": "pass", "gpus": "all"}]
    assert parsed["messages"] == []
    assert diag_findings({"n1": {"rc": 0, "stdout": fixture(ALL_PASS)}}, 4) == {"problems": [], "nodes": {}, "ran": ["n1"]}


def test_gpu_memory_fails_on_gpu0_with_its_wrapped_reason():
    parsed = parse_dcgmi_diag(fixture(THERMAL))
    assert parsed["tests"] == [{"name": "GPU Memory", "results": [{"status": "pass", "gpus": [1, 2, 3, 4, 5, 6, 7]},
                                                                  {"status": "fail", "gpus": [0]}]}]
    assert parsed["messages"][0]["text"].startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7")
    assert "cooling on this machine is functional" in parsed["messages"][0]["text"]
    found = diag_findings({"n1": {"rc": 226, "stdout": fixture(THERMAL)}}, 2)
    assert [(p["code"], p["severity"], p["subject"]) for p in found["problems"]] == [("DCGM_DIAG_FAIL", "error", "n1 GPU 0")]
    assert found["nodes"] == {"n1": ["DCGM_DIAG_FAIL"]}


def test_deployment_error_row():
    found = diag_findings({"n2": {"rc": 0, "stdout": fixture(REMAP)}}, 3)
    assert [(p["code"], p["subject"]) for p in found["problems"]] == [("DCGM_DIAG_FAIL", "n2")]
    assert "GPU 3 has uncorrectable memory errors and row remappings are pending" in found["problems"][0]["message"]


def test_warn_result():
    # derived: the GPU Memory failure row of the ml-engineering excerpt as a Warn
    found = diag_findings({"n1": {"rc": 0, "stdout": fixture(THERMAL).replace("Fail - GPU: 0 ", "Warn - GPU: 0 ")}}, 2)
    assert [(p["code"], p["severity"]) for p in found["problems"]] == [("DCGM_DIAG_WARN", "warning")]
    assert found["nodes"] == {"n1": ["DCGM_DIAG_WARN"]}


@pytest.mark.parametrize("text", [
    "Error: unable to establish a connection to the specified host: localhost\n",
    '{"DCGM GPU Diagnostic": {"test_categories": []}}',
])
def test_other_formats_are_refused(text):
    with pytest.raises(DcgmFormatError, match="not `dcgmi diag` table output"):
        parse_dcgmi_diag(text)


def test_not_installed_and_not_run():
    per_node = {
        "a": {"rc": 2, "cmd": "dcgmi diag -r 2", "msg": "[Errno 2] No such file or directory: b'dcgmi'", "stdout": ""},
        "b": {"rc": 255, "stdout": "Error: unable to establish a connection to the specified host: localhost\n"},
        "c": {"skipped": True},
        # coreutils timeout could not start it (what the play runs: timeout -k 10 <s> dcgmi diag -r 2)
        "e": {"rc": 127, "stdout": "", "stderr": "timeout: failed to run command 'dcgmi': No such file or directory"},
        # killed at the time limit
        "f": {"rc": 124, "stdout": "", "stderr": "", "finished": 1},
        # what ansible-core 2.19 registers for a command it cannot start (ddp-mol1, no DCGM), failed_when: false
        "d": {"changed": False, "cmd": "dcgmi diag -r 2", "failed": False, "failed_when_result": False,
              "failed_when_suppressed_exception": "(traceback unavailable)", "msg": "Error executing command.",
              "rc": 2, "stderr": "", "stderr_lines": [], "stdout": "", "stdout_lines": []},
    }
    found = diag_findings(per_node, 2)
    assert [(p["code"], p["severity"], p["subject"]) for p in found["problems"]] == [
        ("DCGM_DIAG_NOT_RUN", "warning", "b"), ("DCGM_DIAG_NOT_RUN", "warning", "f")]
    assert "did not finish within its time limit" in found["problems"][1]["message"]
    assert found["ran"] == []
