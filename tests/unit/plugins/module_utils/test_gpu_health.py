"""GPU diagnosis, table-driven: one row per fixture or case (input, expected facts, expected problem codes).

Rows marked "derived" change one value of a real fixture to make the failing form of a check; the
change is spelled out in the row.
"""
from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import should_fail
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.health import DEFAULTS, build_facts, diagnose, form_factor

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu")
H100_Q = "nvidia-smi_q_1xH100-80GB-HBM3_driver590_idle_full__nvidia_gpu_exporter-captures.txt"
H100_CSV = "nvidia-smi_query-gpu_csv_all-fields_1xH100_driver590_idle__nvidia_gpu_exporter-captures.txt"
A100_XML = "nvidia-smi_q_x_A100-SXM4-80GB_driver535__telegraf.xml"
XID63_Q = "nvidia-smi_q_excerpt_A100-SXM4-80GB_xid63_dram-correctable_row-remap-pending__ml-engineering.txt"
ECC_Q = "nvidia-smi_q_excerpt_ECC-Errors_sram-uncorrectable-volatile1-aggregate5__ml-engineering.txt"
RETIRE_Q = "nvidia-smi_q_page-retirement_8xA100_good__azurehpc-health-checks.txt"
NVLINK_H100 = "nvidia-smi_nvlink_s_1xH100_driver590__nvidia_gpu_exporter-captures.txt"
NVLINK_A100 = "nvidia-smi_nvlink_status_A100_good__azurehpc-health-checks.txt"
XID63_LOG = "dmesg_NVRM_xid63_row-remapper__ml-engineering.txt"

GPU_PCI = {"address": "0000:3b:00.0", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200"}
HOST_BRIDGE = {"address": "0000:00:00.0", "vendor": "0x8086", "device": "0x09a2", "class": "0x060000"}
# case C08, the two lspci -vvv lines as given
C08_REDIRECT = "ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
C08_CLEAN = "ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
C11_MESSAGE = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
               "the latest NVIDIA driver is installed and running.")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def smi(name, fmt, **extra):
    raw = {"smi_found": True, "smi_rc": 0, "smi_out": fixture(name), "smi_format": fmt}
    raw.update(extra)
    return raw


def smi_driver(version):
    """derived: the H100 -q capture with its driver version replaced (C13 rows)."""
    text = fixture(H100_Q).replace(": 590.48.01\nCUDA", ": %s\nCUDA" % version)
    assert version in text
    return {"smi_found": True, "smi_rc": 0, "smi_out": text, "smi_format": "text"}


def smi_renamed(name, **extra):
    """derived: the H100 -q capture with its product name replaced."""
    text = fixture(H100_Q).replace(": NVIDIA H100 80GB HBM3\n", ": %s\n" % name)
    assert name in text
    raw = {"smi_found": True, "smi_rc": 0, "smi_out": text, "smi_format": "text"}
    raw.update(extra)
    return raw


# derived: the H100 nvlink -s capture with every link's speed replaced by <inactive>
ALL_INACTIVE = fixture(NVLINK_H100).replace("26.562 GB/s", "<inactive>")


def set_gpu(path, value):
    def mutate(facts):
        node = facts["gpus"][0]
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return mutate


# id, raw input, params, mutate(facts) or None, expected facts {path: value}, expected [(code, severity)]
ROWS = [
    ("telegraf A100 XML: persistence off", smi(A100_XML, "xml"), {}, None,
     {"driver_version": "535.54.03", "cuda_version": "12.2", "gpus.0.mig_mode": True},
     [("GPU_PERSISTENCE_OFF", "warning")]),
    ("telegraf A100 XML, persistence not required", smi(A100_XML, "xml"), {"persistence_required": False}, None,
     {}, []),
    ("H100 -q idle: healthy", smi(H100_Q, "text"), {"expected_gpus": 1, "min_driver": "530.30.02"}, None,
     {"driver_version": "590.48.01", "gpus.0.bus_id": "0000:00:09.0"}, []),
    ("H100 CSV all fields idle: healthy", smi(H100_CSV, "csv"), {"expected_gpus": 1}, None,
     {"gpus.0.pcie.gen_current": 5}, []),
    ("H100 -q + nvlink -s 18 links up", smi(H100_Q, "text", nvlink=fixture(NVLINK_H100)), {}, None,
     {"gpus.0.nvlinks.all_inactive": False}, []),
    ("derived: H100 nvlink -s with link 3 <inactive>",
     smi(H100_Q, "text", nvlink=fixture(NVLINK_H100).replace("Link 3: 26.562 GB/s", "Link 3: <inactive>")), {}, None,
     {}, [("GPU_NVLINK_INACTIVE", "error")]),
    ("derived: H100 SXM5 (80GB HBM3) nvlink -s with all 18 links <inactive>, the node's only GPU: warning",
     smi(H100_Q, "text", nvlink=ALL_INACTIVE), {}, None, {"gpus.0.nvlinks.all_inactive": False},
     [("GPU_NVLINK_INACTIVE", "warning")]),
    ("derived: the same with a second H100 on the node: NVLink missing on an SXM module",
     smi(H100_Q, "text", nvlink=ALL_INACTIVE), {}, lambda f: f["gpus"].append(dict(f["gpus"][0], index=1)), {},
     [("GPU_NVLINK_INACTIVE", "error"), ("GPU_NVLINK_INACTIVE", "error")]),
    ("derived: the same, product name 'NVIDIA H100 PCIe': a PCIe card without a bridge is fine",
     smi_renamed("NVIDIA H100 PCIe", nvlink=ALL_INACTIVE), {}, None, {"gpus.0.name": "NVIDIA H100 PCIe"}, []),
    ("derived: the same, a name that says no form factor: warning",
     smi_renamed("NVIDIA Graphics Device", nvlink=ALL_INACTIVE), {}, None, {},
     [("GPU_NVLINK_INACTIVE", "warning")]),
    ("A100 nvlink status for GPU 7 does not attach to GPU 0", smi(H100_Q, "text", nvlink=fixture(NVLINK_A100)), {}, None,
     {"gpus.0.nvlinks": None}, []),
    ("Xid 63 excerpt + dmesg: row remap pending and the Xid", smi(XID63_Q, "text", kernel_log=fixture(XID63_LOG),
                                                                  kernel_log_source="dmesg"), {}, None,
     {"gpus.0.remapped_rows.pending": True, "xids.0.xid": 63},
     [("GPU_ROW_REMAP_PENDING", "error"), ("GPU_XID", "warning")]),
    ("ECC excerpt: SRAM uncorrectable volatile 1 aggregate 5", smi(ECC_Q, "text"), {}, None,
     {"gpus.0.ecc.volatile_uncorrectable": 1}, [("GPU_ECC_UNCORRECTABLE", "error")]),
    ("page retirement 8xA100 good", smi(RETIRE_Q, "text"), {"expected_gpus": 8}, None, {}, []),
    ("page retirement 8xA100, 4 expected", smi(RETIRE_Q, "text"), {"expected_gpus": 4}, None, {},
     [("GPU_COUNT_MISMATCH", "error")]),
    ("derived: retired pages pending", smi(RETIRE_Q, "text"), {}, set_gpu("retired_pages.pending", True), {},
     [("GPU_RETIRED_PAGES_PENDING", "warning")]),
    ("derived: retired pages pending, table full (62)", smi(RETIRE_Q, "text"), {},
     lambda f: f["gpus"][0]["retired_pages"].update(single_bit=60, double_bit=2, pending=True), {},
     [("GPU_RETIRED_PAGES_PENDING", "error")]),
    ("derived: aggregate-only uncorrectable ECC", smi(H100_CSV, "csv"), {}, set_gpu("ecc.aggregate_uncorrectable", 3), {},
     [("GPU_ECC_UNCORRECTABLE", "warning")]),
    ("derived: row remap failure", smi(H100_CSV, "csv"), {}, set_gpu("remapped_rows.failure", True), {},
     [("GPU_ROW_REMAP_FAILED", "error")]),
    ("derived: PCIe x8 of x16", smi(H100_CSV, "csv"), {}, set_gpu("pcie.width_current", 8), {},
     [("GPU_PCIE_DEGRADED", "error")]),
    ("derived: PCIe Gen3 of Gen5 while idle (power saving, not a problem)", smi(H100_CSV, "csv"), {},
     set_gpu("pcie.gen_current", 3), {}, []),
    ("derived: PCIe Gen3 of Gen5 while busy", smi(H100_CSV, "csv"), {},
     lambda f: f["gpus"][0].update(clock_event_reasons=[], utilization_gpu=97, pcie=dict(f["gpus"][0]["pcie"], gen_current=3)),
     {}, [("GPU_PCIE_DEGRADED", "error")]),  # judged like a width downgrade (issue 34)
    ("derived: PCIe Gen3 busy, pcie_check off", smi(H100_CSV, "csv"), {"pcie_check": False},
     lambda f: f["gpus"][0].update(clock_event_reasons=[], utilization_gpu=97, pcie=dict(f["gpus"][0]["pcie"], gen_current=3)),
     {}, []),
    ("derived: HW thermal slowdown", smi(H100_CSV, "csv"), {}, set_gpu("clock_event_reasons", ["hw_thermal_slowdown"]), {},
     [("GPU_THROTTLED", "warning")]),
    ("derived: SW power cap only (normal)", smi(H100_CSV, "csv"), {}, set_gpu("clock_event_reasons", ["sw_power_cap"]), {}, []),
    ("derived: 90 C", smi(H100_CSV, "csv"), {}, set_gpu("temperature_c", 90), {}, [("GPU_TEMPERATURE_HIGH", "warning")]),
    ("derived: 90 C under a 95 C limit", smi(H100_CSV, "csv"), {"max_temperature_c": 95}, set_gpu("temperature_c", 90), {}, []),
    ("derived: T.Limit margin -1 C", smi(H100_CSV, "csv"), {}, set_gpu("temperature_tlimit_c", -1), {},
     [("GPU_TEMPERATURE_HIGH", "warning")]),
    ("derived: Xid 79 on the H100", smi(H100_Q, "text", kernel_log_source="journalctl",
                                        kernel_log="kernel: NVRM: Xid (PCI:0000:00:09): 79, pid='<unknown>', name=<unknown>, "
                                                   "GPU has fallen off the bus.\n"), {}, None,
     {}, [("GPU_XID", "error")]),
    ("Xid check off", smi(XID63_Q, "text", kernel_log=fixture(XID63_LOG)), {"check_xid": False}, None, {},
     [("GPU_ROW_REMAP_PENDING", "error")]),
    ("kernel log unreadable", smi(H100_Q, "text", kernel_log=None), {}, None, {},
     [("GPU_XID_LOG_UNREADABLE", "info")]),
    # no GPU
    ("no NVIDIA PCI device, no nvidia-smi", {"pci_devices": [HOST_BRIDGE], "smi_found": False}, {}, None,
     {"gpus": [], "pci_gpus": []}, [("NO_GPU", "warning")]),
    ("no GPU at info", {"pci_devices": [HOST_BRIDGE], "smi_found": False}, {"no_gpu_severity": "info"}, None, {},
     [("NO_GPU", "info")]),
    ("no GPU, 4 expected", {"pci_devices": [], "smi_found": False}, {"expected_gpus": 4}, None, {},
     [("NO_GPU", "warning"), ("GPU_COUNT_MISMATCH", "error")]),
    ("GPU on the bus, nvidia-smi not installed", {"pci_devices": [GPU_PCI], "smi_found": False}, {}, None,
     {"pci_gpus": ["0000:3b:00.0"]}, [("GPU_DRIVER_NOT_INSTALLED", "error")]),
    ("GPU on the bus, library mismatch", {"pci_devices": [GPU_PCI], "smi_found": True, "smi_rc": 18,
                                          "smi_out": "Failed to initialize NVML: Driver/library version mismatch\n"
                                                     "NVML library version: 535.183"}, {}, None,
     {"smi.failure.kind": "library_mismatch"}, [("GPU_DRIVER_LIBRARY_MISMATCH", "error")]),
    ("GPU on the bus, No devices were found", {"pci_devices": [GPU_PCI], "smi_found": True, "smi_rc": 6,
                                               "smi_out": "No devices were found"}, {}, None, {},
     [("GPU_DRIVER_NOT_LOADED", "error")]),
    ("GPU on the bus, fallen off", {"pci_devices": [GPU_PCI], "smi_found": True, "smi_rc": 15,
                                    "smi_out": "Unable to determine the device handle for GPU0000:3b:00.0: GPU is lost."},
     {}, None, {}, [("GPU_NVIDIA_SMI_FAILED", "error")]),
    ("H100 on the bus twice, nvidia-smi sees one",
     smi(H100_Q, "text", pci_devices=[dict(GPU_PCI, address="0000:00:09.0"), GPU_PCI]), {}, None, {},
     [("GPU_COUNT_MISMATCH", "error")]),
    # cases
    ("C08 ACS ReqRedir+/CmpltRedir+", smi(H100_Q, "text", lspci_vvv=C08_REDIRECT + "\n"), {}, None,
     {}, [("GPU_ACS_REDIRECT", "error")]),
    ("C08 ACS all minus", smi(H100_Q, "text", lspci_vvv=C08_CLEAN + "\n"), {}, None, {}, []),
    ("C08 redirect on a bridge not above a GPU or NIC",
     smi(H100_Q, "text", pci_ancestors={"0000:00:09.0": ["0000:00:01.0"]},
         lspci_vvv="0000:00:03.1 PCI bridge: X\n\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"),
     {}, None, {"acs": []}, []),
    ("C08 redirect on the bridge above the GPU",
     smi(H100_Q, "text", pci_ancestors={"0000:00:09.0": ["0000:00:01.0"]},
         lspci_vvv="0000:00:01.0 PCI bridge: X\n\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"),
     {}, None, {"acs.0.devices_below": ["0000:00:09.0"]}, [("GPU_ACS_REDIRECT", "error")]),
    ("C11 no module for the running kernel",
     {"pci_devices": [GPU_PCI], "smi_found": True, "smi_rc": 9, "smi_out": C11_MESSAGE,
      "kernel_release": "4.18.0-513.5.1.el8_9.x86_64", "modinfo_rc": 1,
      "dkms": "nvidia/535.104.05, 4.18.0-477.10.1.el8_8.x86_64, x86_64: installed\n"}, {}, None,
     {"smi.failure.kind": "driver_not_loaded", "module_for_kernel": False},
     [("GPU_NO_MODULE_FOR_KERNEL", "error")]),
    ("C11 variant: module exists, not loaded",
     {"pci_devices": [GPU_PCI], "smi_found": True, "smi_rc": 9, "smi_out": C11_MESSAGE,
      "kernel_release": "4.18.0-513.5.1.el8_9.x86_64", "modinfo_rc": 0}, {}, None, {},
     [("GPU_DRIVER_NOT_LOADED", "error")]),
    ("C12 nouveau bound",
     {"pci_devices": [GPU_PCI], "smi_found": True, "smi_rc": 9, "smi_out": C11_MESSAGE,
      "lsmod": "Module                  Size  Used by\nnouveau  2285568  0\n",
      "lspci_k": "0000:3b:00.0 3D controller: NVIDIA Corporation Device 20b0\n\tKernel driver in use: nouveau\n",
      "kernel_log": "NVRM: The NVIDIA probe routine was not called for 3 device(s).\n", "kernel_log_source": "dmesg"},
     {}, None, {"nouveau.bound": ["0000:3b:00.0"], "nouveau.probe_not_called": 3}, [("GPU_NOUVEAU_BOUND", "error")]),
    ("C13 driver 410.48, needs 418.39 (cu101)", smi_driver("410.48"), {"min_driver": "418.39"}, None, {},
     [("GPU_DRIVER_TOO_OLD", "error")]),
    ("C13 driver 418.39, needs 418.39 (cu101)", smi_driver("418.39"), {"min_driver": "418.39"}, None, {}, []),
    ("C13 driver 525.60.13, needs 530.30.02 (cu121)", smi_driver("525.60.13"), {"min_driver": "530.30.02"}, None, {},
     [("GPU_DRIVER_TOO_OLD", "error")]),
]


def _get(data, path):
    for key in path.split("."):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


@pytest.mark.parametrize("raw, params, mutate, expected_facts, expected", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_diagnose(raw, params, mutate, expected_facts, expected):
    facts = build_facts(copy.deepcopy(raw))
    if mutate:
        mutate(facts)
    for path, value in expected_facts.items():
        assert _get(facts, path) == value, path
    problems = diagnose(facts, params)
    assert sorted((p["code"], p["severity"]) for p in problems) == sorted(expected)
    for p in problems:
        assert p["subject"] and p["message"] and p["fix"]


def test_c13_states_the_minor_version_floor():
    (prob,) = diagnose(build_facts(smi_driver("525.60.13")), {"min_driver": "530.30.02"})
    assert "530.30.02" in prob["message"] and "minor-version compatibility floor (525.60.13)" in prob["message"]
    (prob,) = diagnose(build_facts(smi_driver("410.48")), {"min_driver": "418.39"})
    assert "floor" not in prob["message"]


def test_xid_subject_names_the_gpu():
    facts = build_facts(smi(XID63_Q, "text", kernel_log=fixture(XID63_LOG)))
    xid = [p for p in diagnose(facts) if p["code"] == "GPU_XID"][0]
    assert xid["subject"] == "GPU 0 (0000:10:1c.0)"
    assert "Xid 63" in xid["message"] and "1 time" in xid["message"]


def test_fail_on_and_defaults():
    problems = diagnose(build_facts({"pci_devices": [], "smi_found": False}))
    assert not should_fail(problems, "error") and should_fail(problems, "warning")
    assert DEFAULTS["max_temperature_c"] == 85 and DEFAULTS["no_gpu_severity"] == "warning"


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA A100-SXM4-80GB", "sxm"),          # telegraf / ml-engineering fixtures
    ("NVIDIA H100 80GB HBM3", "sxm"),          # nvidia_gpu_exporter capture, 18 NVLinks
    ("NVIDIA H200", "sxm"),
    ("NVIDIA GH200 480GB", "sxm"),
    ("NVIDIA B200", "sxm"),
    ("NVIDIA A100 80GB PCIe", "pcie"),         # ml-engineering table fixture
    ("NVIDIA A100-PCIE-40GB", "pcie"),
    ("NVIDIA H100 NVL", None),                 # PCIe boards sold with NVLink bridges: a missing bridge warns
    ("NVIDIA H200 NVL", None),
    ("NVIDIA L40S", None),
    ("", None),
    (None, None),
])
def test_form_factor(name, expected):
    assert form_factor(name) == expected
