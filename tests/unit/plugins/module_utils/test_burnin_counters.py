"""GPU error counters and Xids before vs after the burn-in (burnin.counter_findings).

The readings are what gpu_health builds from real nvidia-smi and kernel-log fixtures (tests/unit/fixtures/gpu);
rows marked "derived" change one counter of a real reading, spelled out in the row.
"""
from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.gpu.burnin import counter_findings
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.health import build_facts

GPU_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu")
H100_CSV = "nvidia-smi_query-gpu_csv_all-fields_1xH100_driver590_idle__nvidia_gpu_exporter-captures.txt"
XID63_Q = "nvidia-smi_q_excerpt_A100-SXM4-80GB_xid63_dram-correctable_row-remap-pending__ml-engineering.txt"
XID63_LOG = "dmesg_NVRM_xid63_row-remapper__ml-engineering.txt"


def fixture(name):
    with open(os.path.join(GPU_FIXTURES, name)) as handle:
        return handle.read()


def reading(name, fmt, kernel_log=None):
    """What the gpu_health module returns for these outputs (its gpus and xids)."""
    raw = {"smi_found": True, "smi_rc": 0, "smi_out": fixture(name), "smi_format": fmt}
    if kernel_log is not None:
        raw.update(kernel_log=kernel_log, kernel_log_source="dmesg")
    facts = build_facts(raw)
    return {"gpus": facts["gpus"], "xids": facts["xids"]}


def changed(result, **values):
    """derived: ``result`` with dotted GPU-0 fields set, e.g. ``ecc__volatile_uncorrectable=2``."""
    out = copy.deepcopy(result)
    for key, value in values.items():
        group, field = key.split("__")
        out["gpus"][0][group][field] = value
    return out


H100 = reading(H100_CSV, "csv")


def found(before, after):
    result = counter_findings({"n1": before}, {"n1": after})
    return [(p["code"], p["severity"]) for p in result["problems"]], result["nodes"]


def test_nothing_changed():
    assert found(H100, H100) == ([], {})
    assert H100["gpus"][0]["ecc"]["volatile_uncorrectable"] == 0


@pytest.mark.parametrize("values, severity", [
    ({"ecc__volatile_uncorrectable": 1}, "error"),
    ({"ecc__aggregate_uncorrectable": 1}, "error"),
    ({"ecc__volatile_correctable": 12}, "warning"),
    ({"remapped_rows__uncorrectable": 1}, "error"),
    ({"remapped_rows__pending": True}, "error"),
    ({"remapped_rows__failure": True}, "error"),
])
def test_a_counter_that_grew(values, severity):
    problems, nodes = found(H100, changed(H100, **values))
    assert problems == [("BURNIN_GPU_ERRORS", severity)]
    assert nodes == ({"n1": ["BURNIN_GPU_ERRORS"]} if severity == "error" else {})


def test_new_xid_during_the_burn_in():
    # the A100 row-remapper excerpt read twice: before the stress the kernel log had no Xid, after it Xid 63
    before = reading(XID63_Q, "text", kernel_log="")
    after = reading(XID63_Q, "text", kernel_log=fixture(XID63_LOG))
    result = counter_findings({"n1": before}, {"n1": after})
    # Xid 63 (a row remap recorded) has the severity the Xid table gives it: a warning, the node stays
    assert [(p["code"], p["severity"], p["subject"]) for p in result["problems"]] == [
        ("BURNIN_GPU_ERRORS", "warning", "n1 GPU 0000:10:1c")]
    assert "1 new Xid 63 event(s)" in result["problems"][0]["message"] and result["nodes"] == {}
    # derived: the same log line as Xid 79 (fallen off the bus): an error, the node is removed
    fell = reading(XID63_Q, "text", kernel_log=fixture(XID63_LOG).replace("): 63, ", "): 79, "))
    assert fell["xids"][0]["xid"] == 79
    result = counter_findings({"n1": before}, {"n1": fell})
    assert [(p["severity"]) for p in result["problems"]] == ["error"] and result["nodes"] == {"n1": ["BURNIN_GPU_ERRORS"]}
    # the same Xid already in the log before the stress is not new
    assert counter_findings({"n1": after}, {"n1": after})["problems"] == []


def test_gpu_gone_after_the_stress_and_cpu_nodes():
    gone = {"gpus": [], "xids": []}
    problems, nodes = found(H100, gone)
    assert problems == [("BURNIN_GPU_ERRORS", "error")] and nodes == {"n1": ["BURNIN_GPU_ERRORS"]}
    cpu = {"gpus": [], "xids": []}
    assert found(cpu, cpu) == ([], {})
    # no second reading (the node stopped answering): the burn-in's own BURNIN_NOT_RUN says it
    assert counter_findings({"n1": H100}, {}) == {"problems": [], "nodes": {}}
