"""gpu_health through its I/O edge: main() with sysfs and commands faked at the edge."""
from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.basic import AnsibleModule
from module_args import patch_module_args
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import health_io
from ansible_collections.ddp.cluster.plugins.modules import gpu_health

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu")
HOST_BRIDGE = {"address": "0000:00:00.0", "vendor": "0x8086", "device": "0x09a2", "class": "0x060000"}
A100 = {"address": "0000:01:00.0", "vendor": "0x10de", "device": "0x20b2", "class": "0x030200"}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def run_main(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_health.main()
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return json.loads(out)


def fake_tools(monkeypatch, tools, outputs, calls):
    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if name in tools else None

    def run_command(self, args, **kwargs):
        calls.append((list(args), kwargs.get("environ_update")))
        argv = [os.path.basename(a) for a in args]
        for key, value in outputs.items():
            if " ".join(argv).endswith(key):
                return value
        return (1, "", "not faked")

    monkeypatch.setattr(AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(AnsibleModule, "run_command", run_command)


def test_no_gpu_no_nvidia_smi(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(health_io, "read_pci_devices", lambda root=health_io.PCI_ROOT: ([HOST_BRIDGE], {}))
    fake_tools(monkeypatch, ["journalctl", "dmesg", "lspci", "lsmod", "timeout"], {}, calls)
    result = run_main(capsys, {})
    assert not result.get("failed")
    assert [(p["code"], p["severity"]) for p in result["problems"]] == [("NO_GPU", "warning")]
    assert result["gpus"] == [] and result["healthy"] is True and result["changed"] is False
    assert calls == []  # nothing to run on a node without a GPU


def test_no_gpu_fails_when_asked(monkeypatch, capsys):
    monkeypatch.setattr(health_io, "read_pci_devices", lambda root=health_io.PCI_ROOT: ([], {}))
    fake_tools(monkeypatch, [], {}, [])
    result = run_main(capsys, {"no_gpu_severity": "error"})
    assert result["failed"] is True and "[NO_GPU]" in result["msg"]


def test_no_gpu_real_sysfs_of_this_machine(monkeypatch, capsys):
    """The real /sys here, with nvidia-smi absent: a NO_GPU or a GPU problem, never a traceback."""
    fake_tools(monkeypatch, [], {}, [])
    result = run_main(capsys, {"fail_on": "never", "check_xid": False, "pcie_check": False})
    codes = [p["code"] for p in result["problems"]]
    assert codes and set(codes) <= {"NO_GPU", "GPU_DRIVER_NOT_INSTALLED"}


def test_a100_through_the_edge(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(health_io, "read_pci_devices",
                        lambda root=health_io.PCI_ROOT: ([HOST_BRIDGE, A100], {"0000:01:00.0": ["0000:00:01.0"]}))
    outputs = {
        "nvidia-smi -q -x": (0, fixture("nvidia-smi_q_x_A100-SXM4-80GB_driver535__telegraf.xml"), ""),
        "nvidia-smi nvlink --status": (0, fixture("nvidia-smi_nvlink_status_A100_good__azurehpc-health-checks.txt"), ""),
        "nvidia-smi topo -m": (0, fixture("nvidia-smi_topo_m_8xA100-SXM4_NV12_no-NICs__ml-engineering.txt"), ""),
        "journalctl -k --no-pager -q -o short -b": (0, "kernel: " + fixture("dmesg_NVRM_xid63_row-remapper__ml-engineering.txt"), ""),
        "lsmod": (0, "Module  Size  Used by\nnvidia  56000000  10\n", ""),
        "lspci -k -D -d 10de:": (0, "0000:01:00.0 3D controller: NVIDIA Corporation GA100\n\tKernel driver in use: nvidia\n", ""),
        "lspci -vvv -D": (0, "0000:00:01.0 PCI bridge: X\n\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n", ""),
    }
    fake_tools(monkeypatch, ["nvidia-smi", "journalctl", "lspci", "lsmod", "timeout"], outputs, calls)
    result = run_main(capsys, {"expected_gpus": 1, "min_driver": "530.30.02"})
    assert not result.get("failed")
    assert result["driver_version"] == "535.54.03" and result["cuda_version"] == "12.2"
    assert result["gpus"][0]["bus_id"] == "0000:01:00.0" and result["kernel_log_source"] == "journalctl"
    assert result["topology"]["matrix"]["GPU0"]["GPU1"] == "NV12"
    # the faked lspci -vvv shows the bridge's ACS line but no link capability: the path links are said unchecked
    assert sorted(p["code"] for p in result["problems"]) == ["GPU_PERSISTENCE_OFF", "GPU_XID", "PCIE_LINKS_UNREADABLE"]
    assert all(env == {"LC_ALL": "C", "LANG": "C"} for _args, env in calls)
    assert all(args[0] == "/usr/bin/timeout" for args, _env in calls)


def test_driver_not_loaded_fails(monkeypatch, capsys):
    monkeypatch.setattr(health_io, "read_pci_devices", lambda root=health_io.PCI_ROOT: ([A100], {}))
    outputs = {
        "nvidia-smi -q -x": (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", ""),
        "modinfo -k %s -F version nvidia" % health_io.platform.release(): (1, "", "modinfo: ERROR: Module nvidia not found."),
        "dkms status": (0, "nvidia/535.104.05, 4.18.0-477.10.1.el8_8.x86_64, x86_64: installed\n", ""),
    }
    fake_tools(monkeypatch, ["nvidia-smi", "modinfo", "dkms"], outputs, [])
    result = run_main(capsys, {"check_xid": False})
    assert result["failed"] is True
    # lspci is not among the faked tools: the PCIe path check says it could not run (info)
    assert [p["code"] for p in result["problems"]] == ["GPU_NO_MODULE_FOR_KERNEL", "PCIE_LINKS_UNREADABLE"]
    assert result["nvidia_smi"]["failure"]["kind"] == "driver_not_loaded"


def test_kernel_log_unreadable_is_info(monkeypatch, capsys):
    monkeypatch.setattr(health_io, "read_pci_devices", lambda root=health_io.PCI_ROOT: ([A100], {}))
    outputs = {"nvidia-smi -q -x": (0, fixture("nvidia-smi_q_x_A100-SXM4-80GB_driver535__telegraf.xml"), ""),
               "dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted")}
    fake_tools(monkeypatch, ["nvidia-smi", "dmesg"], outputs, [])
    result = run_main(capsys, {"persistence_required": False})
    assert not result.get("failed")
    assert [(p["code"], p["severity"]) for p in result["problems"]] == [("GPU_XID_LOG_UNREADABLE", "info"),
                                                                        ("PCIE_LINKS_UNREADABLE", "info")]
    assert "lspci is not installed (pciutils)" in result["problems"][1]["message"]


def test_bad_min_driver(monkeypatch, capsys):
    monkeypatch.setattr(health_io, "read_pci_devices", lambda root=health_io.PCI_ROOT: ([], {}))
    result = run_main(capsys, {"min_driver": "latest"})
    assert result["failed"] is True and "min_driver" in result["msg"]
