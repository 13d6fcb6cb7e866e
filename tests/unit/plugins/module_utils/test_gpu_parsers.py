"""Parsers for nvidia-smi and system output, on the real outputs in tests/unit/fixtures/gpu/."""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.gpu import parsers as P
from ansible_collections.ddp.cluster.plugins.module_utils.gpu import system as S
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import pci as PCI
from ansible_collections.ddp.cluster.plugins.module_utils import versions as V

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# (file, parser, driver, cuda, number of GPUs, {dotted path in GPU 0: expected})
SMI_ROWS = [
    ("nvidia-smi_q_x_A100-SXM4-80GB_driver535__telegraf.xml", P.parse_smi_xml, "535.54.03", "12.2", 1,
     {"bus_id": "0000:01:00.0", "persistence_mode": False, "mig_mode": True, "pcie.gen_current": 4,
      "pcie.width_max": 16, "ecc.volatile_uncorrectable": 0, "remapped_rows.pending": None,
      "retired_pages.pending": None, "temperature_c": 27, "clock_event_reasons": []}),
    ("nvidia-smi_q_1xH100-80GB-HBM3_driver590_idle_full__nvidia_gpu_exporter-captures.txt", P.parse_smi_q_text,
     "590.48.01", "13.1", 1,
     {"bus_id": "0000:00:09.0", "persistence_mode": True, "mig_mode": False, "pcie.gen_max": 5,
      "pcie.width_current": 16, "ecc.volatile_uncorrectable": 0, "ecc.aggregate_uncorrectable": 0,
      "remapped_rows.pending": False, "remapped_rows.failure": False, "clock_event_reasons": ["gpu_idle"],
      "utilization_gpu": 0, "temperature_c": 41, "temperature_tlimit_c": 46}),
    ("nvidia-smi_q_excerpt_A100-SXM4-80GB_xid63_dram-correctable_row-remap-pending__ml-engineering.txt",
     P.parse_smi_q_text, "510.73.08", "11.6", 1,
     {"bus_id": "0000:10:1c.0", "name": "NVIDIA A100-SXM4-80GB", "ecc.volatile_correctable": 177,
      "ecc.volatile_uncorrectable": 0, "remapped_rows.pending": True, "remapped_rows.correctable": 1,
      "retired_pages.single_bit": None, "persistence_mode": None}),
    ("nvidia-smi_q_excerpt_ECC-Errors_sram-uncorrectable-volatile1-aggregate5__ml-engineering.txt",
     P.parse_smi_q_text, None, None, 1,
     {"bus_id": None, "ecc.volatile_uncorrectable": 1, "ecc.aggregate_uncorrectable": 5}),
    ("nvidia-smi_q_page-retirement_8xA100_good__azurehpc-health-checks.txt", P.parse_smi_q_text,
     "535.86.10", "12.2", 8,
     {"bus_id": "0001:00:00.0", "retired_pages.single_bit": 0, "retired_pages.double_bit": 0,
      "retired_pages.pending": False}),
    ("nvidia-smi_query-gpu_csv_all-fields_1xH100_driver590_idle__nvidia_gpu_exporter-captures.txt",
     P.parse_query_gpu, "590.48.01", None, 1,
     {"index": 0, "bus_id": "0000:00:09.0", "persistence_mode": True, "pcie.gen_current": 5,
      "pcie.width_max": 16, "ecc.volatile_uncorrectable": 0, "remapped_rows.pending": False,
      "retired_pages.pending": None, "clock_event_reasons": ["gpu_idle"], "temperature_tlimit_c": 46,
      "utilization_gpu": 0}),
]


def _get(gpu, path):
    value = gpu
    for key in path.split("."):
        value = value[key]
    return value


@pytest.mark.parametrize("name, parser, driver, cuda, count, expected", SMI_ROWS, ids=[r[0][:60] for r in SMI_ROWS])
def test_smi_parsers(name, parser, driver, cuda, count, expected):
    parsed = parser(fixture(name))
    assert parsed["driver_version"] == driver
    assert parsed["cuda_version"] == cuda
    assert len(parsed["gpus"]) == count
    for path, value in expected.items():
        assert _get(parsed["gpus"][0], path) == value, path


def test_query_csv_with_prompt_and_elision():
    rows = P.parse_query_csv(fixture("nvidia-smi_query-gpu_name-busid-vbios_csv_8xH100_elided__ml-engineering.txt"))
    assert [r["pci.bus_id"] for r in rows] == ["00000000:04:00.0", "00000000:8B:00.0"]
    assert rows[0]["vbios_version"] == "96.00.89.00.01"
    gpus = [P.gpu_from_query_row(r, i) for i, r in enumerate(rows)]
    assert [g["bus_id"] for g in gpus] == ["0000:04:00.0", "0000:8b:00.0"]


def test_query_csv_noheader_nounits():
    text = "0, 00000000:41:00.0, Enabled, 16, 8, [N/A], [Not Supported]\n"
    fields = ["index", "pci.bus_id", "persistence_mode", "pcie.link.width.max", "pcie.link.width.current",
              "remapped_rows.pending", "temperature.gpu"]
    gpu = P.parse_query_gpu(text, fields)["gpus"][0]
    assert gpu["index"] == 0 and gpu["bus_id"] == "0000:41:00.0"
    assert gpu["pcie"]["width_current"] == 8 and gpu["pcie"]["width_max"] == 16
    assert gpu["remapped_rows"]["pending"] is None and gpu["temperature_c"] is None


def test_reasons_from_mask():
    assert P.reasons_from_mask("0x0000000000000001") == ["gpu_idle"]
    assert P.reasons_from_mask("0x00000000000000C4") == ["sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown"]
    assert P.reasons_from_mask("[N/A]") is None


def test_xml_rejects_other_text():
    with pytest.raises(ValueError):
        P.parse_smi_xml("No devices were found")


TOPO_ROWS = [
    ("nvidia-smi_topo_m_1xH100_ANSI-escapes_driver590__nvidia_gpu_exporter-captures.txt", ["GPU0"],
     ("GPU0", "GPU0", "X"), ("GPU0", {"cpu": "0-19", "numa": "0", "gpu_numa_id": None}), {}),
    ("nvidia-smi_topo_m_8xA100-SXM4_NV12_no-NICs__ml-engineering.txt", ["GPU%d" % i for i in range(8)],
     ("GPU4", "GPU0", "NV12"), ("GPU4", {"cpu": "24-47", "numa": "1", "gpu_numa_id": None}), {}),
    ("nvidia-smi_topo_m_8xH100-SXM_NV18_no-NICs__ml-engineering.txt", ["GPU%d" % i for i in range(8)],
     ("GPU7", "GPU6", "NV18"), ("GPU7", {"cpu": "52-103", "numa": "1", "gpu_numa_id": None}), {}),
    ("nvidia-smi_topo_mp_1xGPU-10xNIC_NIC-legend_R760xa__schmaustech-nvidia-tools-image.txt",
     ["GPU0"] + ["NIC%d" % i for i in range(10)], ("NIC1", "NIC2", "PIX"),
     ("GPU0", {"cpu": "0,2,4,6,8,10", "numa": "0", "gpu_numa_id": None}), dict(("NIC%d" % i, "mlx5_%d" % i) for i in range(10))),
]


@pytest.mark.parametrize("name, devices, cell, affinity, nics", TOPO_ROWS, ids=[r[0][:50] for r in TOPO_ROWS])
def test_topo(name, devices, cell, affinity, nics):
    topo = P.parse_topo_matrix(fixture(name))
    assert topo["devices"] == devices
    row, col, value = cell
    assert topo["matrix"][row][col] == value
    assert topo["affinity"][affinity[0]] == affinity[1]
    assert topo["nics"] == nics
    assert "\x1b" not in repr(topo)


NVLINK_ROWS = [
    ("nvidia-smi_nvlink_status_A100_good__azurehpc-health-checks.txt", 7, 12, 25.0),
    ("nvidia-smi_nvlink_status_H100_elided__ml-engineering.txt", 0, 2, 26.562),
    ("nvidia-smi_nvlink_s_1xH100_driver590__nvidia_gpu_exporter-captures.txt", 0, 18, 26.562),
]


@pytest.mark.parametrize("name, index, links, speed", NVLINK_ROWS, ids=[r[0][:50] for r in NVLINK_ROWS])
def test_nvlink_status(name, index, links, speed):
    (gpu,) = P.parse_nvlink_status(fixture(name))
    assert gpu["index"] == index and not gpu["all_inactive"]
    assert len(gpu["links"]) == links
    assert all(link["active"] and link["speed_gbps"] == speed for link in gpu["links"])


def test_nvlink_inactive_forms():
    text = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
            "GPU 1: NVIDIA A100-PCIE-40GB (UUID: GPU-y)\nNVML: Unable to retrieve NVLink information as all links are inactive\n")
    gpus = P.parse_nvlink_status(text)
    assert gpus[0]["links"][1] == {"link": 1, "active": False, "speed_gbps": None}
    assert gpus[1]["all_inactive"] is True


def test_xid_fixture():
    (event,) = S.parse_xid_lines(fixture("dmesg_NVRM_xid63_row-remapper__ml-engineering.txt"))
    assert event["pci"] == "0000:10:1c" and event["xid"] == 63 and event["pid"] == "1896"
    assert event["message"].startswith("Row Remapper: New row marked for remapping")
    assert S.xid_info(63)[1] == "warning" and S.xid_info(79)[1] == "error" and S.xid_info(9999)[1] == "warning"


def test_xid_journal_prefix():
    line = "May 01 10:00:00 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    (event,) = S.parse_xid_lines(line)
    assert event["xid"] == 79 and event["pci"] == "0000:3b:00" and "fallen off the bus" in event["message"]


SMI_FAILURES = [
    (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.", "driver_not_loaded"),
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.183", "library_mismatch"),
    (6, "No devices were found", "no_devices"),
    (12, "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", "nvml_missing"),
    (15, "Unable to determine the device handle for GPU0000:41:00.0: GPU is lost.", "fallen_off_bus"),
    (124, "", "hung"),
    (255, "Unknown Error", "other"),
]


@pytest.mark.parametrize("rc, output, kind", SMI_FAILURES, ids=[r[2] for r in SMI_FAILURES])
def test_classify_smi(rc, output, kind):
    assert P.classify_smi(rc, output)["kind"] == kind


def test_classify_smi_ok_and_absent():
    assert P.classify_smi(0, "<nvidia_smi_log/>") is None
    assert P.classify_smi(None, "", found=False)["kind"] == "not_installed"


def test_acs_lines_c08():
    text = ("0000:40:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge\n"
            "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
            "0000:40:03.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge\n"
            "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n")
    entries = PCI.parse_lspci_acs(text)
    assert [(e["address"], e["redirect"]) for e in entries] == [("0000:40:01.1", True), ("0000:40:03.1", False)]
    assert entries[0]["acsctl"]["SrcValid"] is True and entries[1]["acsctl"]["ReqRedir"] is False


def test_lspci_k_lsmod_dkms():
    lspci = "0000:3b:00.0 3D controller: NVIDIA Corporation Device 20b0 (rev a1)\n\tKernel driver in use: nouveau\n\tKernel modules: nvidiafb, nouveau\n"
    assert PCI.parse_lspci_k(lspci) == [{"address": "0000:3b:00.0", "description": "3D controller: NVIDIA Corporation Device 20b0 (rev a1)",
                                         "driver": "nouveau", "modules": ["nvidiafb", "nouveau"]}]
    assert PCI.parse_lspci_k("3b:00.0 3D controller: NVIDIA\n\tKernel driver in use: nvidia\n")[0]["address"] == "0000:3b:00.0"
    assert "nouveau" in S.parse_lsmod("Module                  Size  Used by\nnouveau  2285568  0\n")
    new, old = S.parse_dkms_status("nvidia/535.104.05, 4.18.0-477.10.1.el8_8.x86_64, x86_64: installed\n"
                                   "nvidia, 470.57.02, 4.18.0-305.el8.x86_64, x86_64: installed\n")
    assert (new["module"], new["version"], new["kernel"], new["status"]) == ("nvidia", "535.104.05", "4.18.0-477.10.1.el8_8.x86_64", "installed")
    assert (old["version"], old["kernel"]) == ("470.57.02", "4.18.0-305.el8.x86_64")


def test_versions_and_ancestors():
    assert V.version_lt("525.60.13", "530.30.02") is True
    assert V.version_lt("530.30.02", "530.30.02") is False
    assert V.version_lt("418.39", "418.39") is False
    assert V.version_lt("abc", "1.0") is None
    assert PCI.pci_ancestors("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0") == ["0000:00:01.0", "0000:01:00.0"]
    assert P.normalize_bus_id("00000000:10:1C.0") == "0000:10:1c.0"
