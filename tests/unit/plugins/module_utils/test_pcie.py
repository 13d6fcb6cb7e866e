"""PCIe path links and kernel PCIe messages, on real outputs (tests/unit/fixtures/pcie/SOURCES.md).

Rows marked "derived" change one value of a real fixture to make the failing form of a check; the
change is spelled out in the row.
"""
from __future__ import annotations

import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.gpu.health import build_facts, diagnose
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import pci_ancestors
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import (
    PcieFormatError,
    kernel_problems,
    link_chain,
    link_problems,
    parse_kernel_pcie,
    parse_lspci_links,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "pcie")
H100_SWITCH = "lspci_vvv_h100_pex890xx_switch_cx7__gpud.txt"
LIMITED = "dmesg_limited-by_GTX1060M-x4-of-x16__linux-surface-374.txt"
AER_NEW = "journal_aer-corrected_new-format__gsconnect-1052.txt"
AER_OLD = "dmesg_aer-corrected_old-format-id__endlessm-linux-226.txt"
AER_UNCORRECTED = "dmesg_aer-uncorrected-nonfatal_CmpltTO-MalfTLP__raspberry-pi-pcie-devices-116.txt"

GPU, HCA, NVME = "0000:4c:00.0", "0000:4d:00.0", "0000:4b:00.0"
ROOT, SWITCH_UP = "0000:48:01.0", "0000:49:00.0"
# The bridges above each device, as sysfs gives them: the fixture's "Bus: primary=, secondary=" lines
# put 49:00.0 below root port 48:01.0, the switch's downstream ports 4a:xx.0 below it, and the NVMe
# (bus 4b), the H100 (4c) and the ConnectX-7 (4d) below ports 4a:00.0, 4a:01.0 and 4a:02.0.
ANCESTORS = {
    GPU: pci_ancestors("/sys/devices/pci0000:48/0000:48:01.0/0000:49:00.0/0000:4a:01.0/0000:4c:00.0"),
    HCA: pci_ancestors("/sys/devices/pci0000:48/0000:48:01.0/0000:49:00.0/0000:4a:02.0/0000:4d:00.0"),
    NVME: pci_ancestors("/sys/devices/pci0000:48/0000:48:01.0/0000:49:00.0/0000:4a:00.0/0000:4b:00.0"),
}
TARGETS = {GPU: "GPU", HCA: "HCA"}


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def replace_in_block(text, address, old, new):
    """derived: ``old`` -> ``new`` inside the lspci block of ``address`` only ("(ok)" is only in LnkSta)."""
    start = 0 if text.startswith(address + " ") else text.index("\n" + address + " ") + 1
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end
    block = text[start:end]
    assert old in block, (address, old)
    return text[:start] + block.replace(old, new, 1) + text[end:]


def codes(problems):
    return sorted((p["code"], p["severity"], p["subject"]) for p in problems)


def test_parse_lspci_links_reads_every_express_device():
    links = parse_lspci_links(fixture(H100_SWITCH))
    assert links[ROOT] == {"description": "PCI bridge: Intel Corporation Device 352a (rev 04) (prog-if 00 [Normal decode])",
                           "port_type": "Root Port", "cap_speed_gts": 32.0, "cap_width": 16,
                           "speed_gts": 32.0, "width": 16}
    assert links[SWITCH_UP]["port_type"] == "Upstream Port"
    assert links["0000:4a:01.0"]["port_type"] == "Downstream Port"
    assert links[GPU]["port_type"] == "Endpoint" and links[GPU]["cap_speed_gts"] == 32.0
    assert links[HCA]["description"].startswith("Ethernet controller: Mellanox")
    # the NVMe's port is Gen5-capable but runs Gen4 ("downgraded" in lspci's words): the drive is Gen4
    assert links["0000:4a:00.0"]["speed_gts"] == 16.0 and links["0000:4a:00.0"]["cap_speed_gts"] == 32.0
    assert links[NVME]["cap_speed_gts"] == 16.0


def test_link_chain_expects_the_lower_end():
    links = parse_lspci_links(fixture(H100_SWITCH))
    chain = link_chain(NVME, ANCESTORS[NVME], links)
    # root port -> switch upstream port, then switch downstream port -> NVMe; the switch-internal hop is not a link
    assert [(c["upstream"], c["downstream"]) for c in chain] == [(ROOT, SWITCH_UP), ("0000:4a:00.0", NVME)]
    assert chain[1]["expected_speed_gts"] == 16.0 and chain[1]["speed_gts"] == 16.0
    assert link_problems({NVME: "HCA"}, ANCESTORS, links) == []


def test_healthy_h100_switch_has_no_problem():
    links = parse_lspci_links(fixture(H100_SWITCH))
    assert link_problems(TARGETS, ANCESTORS, links, busy_gpus=[GPU]) == []


LINK_ROWS = [
    # id, device whose LnkSta changes, old, new, busy GPUs, expected (code, severity, subject)
    ("derived: switch upstream link at x8 (both ends)", (SWITCH_UP, ROOT), "Width x16 (ok)", "Width x8 (downgraded)", [],
     [("PCIE_LINK_DEGRADED", "error", "PCIe link 0000:48:01.0 -> 0000:49:00.0 (above GPU 0000:4c:00.0)")]),
    ("derived: switch upstream link at Gen4, GPU idle: judged on the HCA's path only", (SWITCH_UP, ROOT),
     "Speed 32GT/s (ok)", "Speed 16GT/s (downgraded)", [],
     [("PCIE_LINK_DEGRADED", "warning", "PCIe link 0000:48:01.0 -> 0000:49:00.0 (above HCA 0000:4d:00.0)")]),
    ("derived: the same while the GPU is busy: an error, as a width downgrade is", (SWITCH_UP, ROOT),
     "Speed 32GT/s (ok)", "Speed 16GT/s (downgraded)", [GPU],
     [("PCIE_LINK_DEGRADED", "error", "PCIe link 0000:48:01.0 -> 0000:49:00.0 (above GPU 0000:4c:00.0)")]),
    ("derived: ConnectX-7 at Gen4", (HCA, "0000:4a:02.0"), "Speed 32GT/s (ok)", "Speed 16GT/s (downgraded)", [],
     [("PCIE_LINK_DEGRADED", "warning", "PCIe link 0000:4a:02.0 -> HCA 0000:4d:00.0")]),
    ("derived: ConnectX-7 at x8", (HCA, "0000:4a:02.0"), "Width x16 (ok)", "Width x8 (downgraded)", [],
     [("PCIE_LINK_DEGRADED", "error", "PCIe link 0000:4a:02.0 -> HCA 0000:4d:00.0")]),
    ("derived: the H100's own link at x8 is GPU_PCIE_DEGRADED's (nvidia-smi), not this check",
     (GPU, "0000:4a:01.0"), "Width x16 (ok)", "Width x8 (downgraded)", [GPU], []),
]


@pytest.mark.parametrize("row", LINK_ROWS, ids=[r[0] for r in LINK_ROWS])
def test_link_problems(row):
    _id, addresses, old, new, busy, expected = row
    text = fixture(H100_SWITCH)
    for address in addresses:
        text = replace_in_block(text, address[5:], old, new)
    links = parse_lspci_links(text)
    assert codes(link_problems(TARGETS, ANCESTORS, links, busy_gpus=busy)) == sorted(expected)


@pytest.mark.parametrize("text", [
    "-[0000:00]-+-00.0\n           +-01.0-[01]----00.0\n",                 # lspci -t
    '[{"slot": "0000:41:00.0", "class": "3D controller"}]',               # JSON
    "pcilib: Cannot open /proc/bus/pci\nlspci: Cannot find any working access method.\n",
])
def test_parse_lspci_links_rejects_other_formats(text):
    with pytest.raises(PcieFormatError, match="not `lspci -vvv` output"):
        parse_lspci_links(text)


def test_parse_lspci_links_empty_and_without_capabilities():
    assert parse_lspci_links("") == {}
    # lspci -vvv as a normal user: the header and "Capabilities: <access denied>", no LnkCap
    assert parse_lspci_links("4c:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
                             "\tCapabilities: <access denied>\n") == {}


def test_parse_kernel_limited_by():
    messages = parse_kernel_pcie(fixture(LIMITED))
    assert messages["limited"] == [{
        "address": "0000:02:00.0", "available_gbps": 31.504, "speed_gts": 8.0, "width": 4, "at": "0000:00:1c.4",
        "capable_gbps": 126.016, "cap_speed_gts": 8.0, "cap_width": 16}]
    assert messages["aer"] == {}
    problems = kernel_problems({"0000:02:00.0": "GPU"}, {"0000:02:00.0": ["0000:00:1c.4"]}, messages)
    assert codes(problems) == [("PCIE_BANDWIDTH_LIMITED", "warning", "GPU 0000:02:00.0")]
    assert "limited by a 8 GT/s x4 link at 0000:00:1c.4" in problems[0]["message"]
    # the same line for a device that is neither GPU nor HCA is not ours
    assert kernel_problems({"0000:41:00.0": "GPU"}, {}, messages) == []


def test_limited_by_speed_only_counts_for_an_hca():
    # derived: the fixture's line with the x16 link at 2.5 GT/s (how a GPU is enumerated before its driver loads)
    text = fixture(LIMITED).replace("limited by 8.0 GT/s PCIe x4", "limited by 2.5 GT/s PCIe x16")
    messages = parse_kernel_pcie(text)
    assert kernel_problems({"0000:02:00.0": "GPU"}, {}, messages) == []
    assert codes(kernel_problems({"0000:02:00.0": "HCA"}, {}, messages)) == [
        ("PCIE_BANDWIDTH_LIMITED", "warning", "HCA 0000:02:00.0")]


@pytest.mark.parametrize("name, address, counts", [
    (AER_NEW, "0000:00:1c.5", {"corrected": 3, "nonfatal": 0, "fatal": 0}),
    (AER_OLD, "0000:00:1c.0", {"corrected": 1, "nonfatal": 0, "fatal": 0}),
    (AER_UNCORRECTED, "0000:00:00.0", {"corrected": 0, "nonfatal": 2, "fatal": 0}),
])
def test_parse_kernel_aer(name, address, counts):
    assert parse_kernel_pcie(fixture(name))["aer"] == {address: counts}


def test_aer_on_a_gpu_path_only():
    corrected = parse_kernel_pcie(fixture(AER_NEW))
    # a GPU below root port 00:1c.5
    assert codes(kernel_problems({"0000:3b:00.0": "GPU"}, {"0000:3b:00.0": ["0000:00:1c.5"]}, corrected)) == [
        ("PCIE_AER_CORRECTED", "warning", "PCIe 0000:00:1c.5 (above GPU 0000:3b:00.0)")]
    # the same errors on a port with no GPU or HCA below it (a laptop's Wi-Fi port): not ours
    assert kernel_problems({"0000:3b:00.0": "GPU"}, {"0000:3b:00.0": ["0000:00:01.0"]}, corrected) == []
    uncorrected = parse_kernel_pcie(fixture(AER_UNCORRECTED))
    problems = kernel_problems({"0000:01:00.0": "HCA"}, {"0000:01:00.0": ["0000:00:00.0"]}, uncorrected)
    assert codes(problems) == [("PCIE_AER_UNCORRECTED", "error", "PCIe 0000:00:00.0 (above HCA 0000:01:00.0)")]
    assert "2 uncorrected PCIe error report(s) (0 fatal, 2 non-fatal)" in problems[0]["message"]


def test_gpu_health_reads_the_path_and_the_log():
    """build_facts/diagnose end to end: the H100 behind the switch, its switch uplink at x8, AER on the root port."""
    text = replace_in_block(fixture(H100_SWITCH), "49:00.0", "Width x16 (ok)", "Width x8 (downgraded)")
    log = fixture(AER_NEW).replace("0000:00:1c.5", ROOT)  # derived: the corrected errors on the H100's root port
    raw = {"pci_devices": [{"address": GPU, "vendor": "0x10de", "device": "0x2330", "class": "0x030200"},
                           {"address": HCA, "vendor": "0x15b3", "device": "0x1021", "class": "0x020000"}],
           "smi_found": False, "lspci_vvv": text, "pci_ancestors": dict((a, ANCESTORS[a]) for a in TARGETS),
           "kernel_log": log, "kernel_log_source": "journalctl"}
    facts = build_facts(raw)
    assert facts["pcie_links"][GPU]["cap_width"] == 16
    found = [(p["code"], p["severity"]) for p in diagnose(facts) if p["code"].startswith("PCIE_")]
    assert sorted(found) == [("PCIE_AER_CORRECTED", "warning"), ("PCIE_LINK_DEGRADED", "error")]
    assert [p["code"] for p in diagnose(facts, {"pcie_check": False}) if p["code"].startswith("PCIE_")] == []


def test_gpu_health_says_when_lspci_output_is_not_lspci():
    raw = {"pci_devices": [{"address": GPU, "vendor": "0x10de", "device": "0x2330", "class": "0x030200"}],
           "smi_found": False, "lspci_vvv": "lspci: Cannot find any working access method.\n"}
    found = [(p["code"], p["severity"]) for p in diagnose(build_facts(raw)) if p["code"].startswith("PCIE_")]
    assert found == [("PCIE_LINKS_UNREADABLE", "info")]


@pytest.mark.parametrize("name, expected", [
    # Linux 6.x words: "Correctable", the GPU itself (driver nvidia) reporting, below root port 00:03.1
    ("journal_aer_correctable_nvidia_gpu_6x_form__pop-3363.txt",
     {"0000:00:03.1": {"corrected": 1, "nonfatal": 0, "fatal": 0},
      "0000:07:00.0": {"corrected": 1, "nonfatal": 0, "fatal": 0},
      "0000:07:00.1": {"corrected": 1, "nonfatal": 0, "fatal": 0}}),
    ("dmesg_aer_uncorrected_fatal_nvidia__returnn-1500.txt", {"0000:00:03.0": {"corrected": 0, "nonfatal": 0, "fatal": 1}}),
    ("journal_aer_uncorrectable_nonfatal_6x_form__ms-02-ultra-10.txt",
     {"0000:80:1b.4": {"corrected": 0, "nonfatal": 1, "fatal": 0}}),
])
def test_parse_kernel_aer_other_kernels(name, expected):
    assert parse_kernel_pcie(fixture(name))["aer"] == expected


def test_aer_fatal_above_a_gpu_and_on_the_gpu():
    fatal = parse_kernel_pcie(fixture("dmesg_aer_uncorrected_fatal_nvidia__returnn-1500.txt"))
    assert codes(kernel_problems({"0000:03:00.0": "GPU"}, {"0000:03:00.0": ["0000:00:03.0"]}, fatal)) == [
        ("PCIE_AER_UNCORRECTED", "error", "PCIe 0000:00:03.0 (above GPU 0000:03:00.0)")]
    own = parse_kernel_pcie(fixture("journal_aer_correctable_nvidia_gpu_6x_form__pop-3363.txt"))
    assert codes(kernel_problems({"0000:07:00.0": "GPU"}, {"0000:07:00.0": ["0000:00:03.1"]}, own)) == [
        ("PCIE_AER_CORRECTED", "warning", "PCIe 0000:00:03.1 (above GPU 0000:07:00.0)"),
        ("PCIE_AER_CORRECTED", "warning", "PCIe 0000:07:00.0")]


def test_limited_by_old_kernel_format_on_a_connectx():
    messages = parse_kernel_pcie(fixture("dmesg_pcie_bw_limited_mlx5_oldformat__l2fwd-nv-6.txt"))
    assert messages["limited"][0]["speed_gts"] == 8.0 and messages["limited"][0]["cap_width"] == 16
    assert codes(kernel_problems({"0000:b3:00.1": "HCA"}, {}, messages)) == [
        ("PCIE_BANDWIDTH_LIMITED", "warning", "HCA 0000:b3:00.1")]


def test_vmd_domains_are_their_own_blocks():
    # derived: the fixture's NVMe block renumbered into an Intel VMD domain (5 hex digits) after the ConnectX-7
    text = fixture(H100_SWITCH)
    nvme = text[text.index("4b:00.0 "):text.index("\n\n", text.index("4b:00.0 ")) + 1]
    links = parse_lspci_links(text + "\n" + nvme.replace("4b:00.0 ", "10000:e1:00.0 ", 1))
    assert links["10000:e1:00.0"]["cap_speed_gts"] == 16.0
    assert links[HCA]["port_type"] == "Endpoint" and links[HCA]["cap_speed_gts"] == 32.0  # not overwritten
    # and the kernel's lines of a VMD device are not read as the 4-digit domain's
    line = "pcieport 10000:e0:1d.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
    assert parse_kernel_pcie(line)["aer"] == {"10000:e0:1d.0": {"corrected": 1, "nonfatal": 0, "fatal": 0}}


def test_limited_by_the_platform_is_not_a_fault():
    # derived: the ConnectX line of the l2fwd-nv fixture, the port at 0000:b2:00.0 being a Gen3 x8 slot per lspci:
    # the link runs at what the slot can do (a faster NIC in a slower server), which is not a fault
    messages = parse_kernel_pcie(fixture("dmesg_pcie_bw_limited_mlx5_oldformat__l2fwd-nv-6.txt"))
    slot = {"0000:b2:00.0": {"description": "PCI bridge", "port_type": "Root Port", "cap_speed_gts": 8.0,
                             "cap_width": 8, "speed_gts": 8.0, "width": 8}}
    assert kernel_problems({"0000:b3:00.1": "HCA"}, {}, messages, slot) == []
    slot["0000:b2:00.0"]["cap_width"] = 16  # the slot can do x16: the x8 link is a fault again
    assert codes(kernel_problems({"0000:b3:00.1": "HCA"}, {}, messages, slot)) == [
        ("PCIE_BANDWIDTH_LIMITED", "warning", "HCA 0000:b3:00.1")]


def test_gpu_health_says_when_the_links_cannot_be_read():
    gpu = {"address": GPU, "vendor": "0x10de", "device": "0x2330", "class": "0x030200"}
    # lspci -vvv as a normal user: headers, "Capabilities: <access denied>", no LnkCap
    denied = "4c:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n\tCapabilities: <access denied>\n"
    for raw in ({"pci_devices": [gpu], "smi_found": False, "lspci_vvv": denied},
                {"pci_devices": [gpu], "smi_found": False, "lspci_missing": True}):
        found = [(p["code"], p["severity"]) for p in diagnose(build_facts(raw)) if p["code"].startswith("PCIE_")]
        assert found == [("PCIE_LINKS_UNREADABLE", "info")], raw


# ------------------------------------------------------------------ line rate of NICs, nodes without GPUs (issue 34)

def test_link_gbps_matches_the_kernels_figures():
    from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import link_gbps
    assert round(link_gbps(8, 8), 3) == 63.015 and round(link_gbps(8, 16), 1) == 126.0
    assert round(link_gbps(16, 16)) == 252 and link_gbps(2.5, 1) == 2.0 and link_gbps(None, 16) is None


def test_a_nic_whose_link_cannot_carry_its_port_is_an_error():
    # derived: the ConnectX-7 of the real H100 fixture trained at Gen4 (16 GT/s x16 = 252 Gb/s) with a 400 Gb/s port
    text = replace_in_block(fixture(H100_SWITCH), "4d:00.0", "Speed 32GT/s (ok)", "Speed 16GT/s (downgraded)")
    links = parse_lspci_links(text)
    found = codes(link_problems(TARGETS, ANCESTORS, links, line_rates={HCA: 400.0}))
    assert [c[:2] for c in found] == [("PCIE_LINK_BELOW_LINE_RATE", "error")]
    # the same link under a 200 Gb/s port still carries it: a warning
    assert [c[:2] for c in codes(link_problems(TARGETS, ANCESTORS, links, line_rates={HCA: 200.0}))] == [
        ("PCIE_LINK_DEGRADED", "warning")]


def test_the_kernels_limited_line_of_a_connectx_below_its_port_rate_is_an_error():
    messages = parse_kernel_pcie(fixture("dmesg_pcie_bw_limited_mlx5_oldformat__l2fwd-nv-6.txt"))
    targets = {"0000:b3:00.1": "HCA"}
    found = kernel_problems(targets, {}, messages, line_rates={"0000:b3:00.1": 100.0})
    assert [(p["code"], p["severity"]) for p in found] == [("PCIE_LINK_BELOW_LINE_RATE", "error")]
    assert "63.008 Gb/s" in found[0]["message"] and "100 Gb/s line rate" in found[0]["message"]


def test_a_node_without_gpus_still_has_its_nics_links_checked():
    text = replace_in_block(fixture(H100_SWITCH), "4d:00.0", "Width x16 (ok)", "Width x8 (downgraded)")
    facts = build_facts({"pci_devices": [{"address": HCA, "vendor": "0x15b3", "device": "0x1021", "class": "0x020000"}],
                         "pci_ancestors": {HCA: ANCESTORS[HCA]}, "lspci_vvv": text, "nic_rates": {HCA: 400.0}})
    assert facts["pci_gpus"] == [] and facts["pci_nics"] == [HCA]
    found = [(p["code"], p["severity"]) for p in diagnose(facts, {"no_gpu_severity": "info"})]
    assert ("PCIE_LINK_BELOW_LINE_RATE", "error") in found and ("NO_GPU", "info") in found


def test_lspci_text_alone():
    from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import lspci_text_problems
    assert lspci_text_problems(fixture(H100_SWITCH)) == []
    # derived: the H100 at 2.5 GT/s at full width while busy is judged as a narrow link is
    gpu_slow = replace_in_block(fixture(H100_SWITCH), "4c:00.0", "Speed 32GT/s (ok)", "Speed 2.5GT/s (downgraded)")
    found = lspci_text_problems(gpu_slow)
    assert [(p["code"], p["severity"]) for p in found] == [("PCIE_LINK_DEGRADED", "error")]
    assert "idle" in found[0]["fix"] and lspci_text_problems(gpu_slow, busy=False) == []
    # derived: the ConnectX-7 (a 400 Gb/s model) at x8 Gen5 = 252 Gb/s: below its line rate
    nic_narrow = replace_in_block(fixture(H100_SWITCH), "4d:00.0", "Width x16 (ok)", "Width x8 (downgraded)")
    assert [(p["code"], p["severity"]) for p in lspci_text_problems(nic_narrow)] == [
        ("PCIE_LINK_BELOW_LINE_RATE", "error")]
    assert [(p["code"], p["severity"]) for p in lspci_text_problems(nic_narrow, {"*": 200.0})] == [
        ("PCIE_LINK_DEGRADED", "error")]
