"""Tests for plugins/filter/gpu_stack.py against the real data/compat_matrix.yml and the fixture outputs."""
from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter import gpu_stack as gpu_filter
from ansible_collections.ddp.cluster.plugins.plugin_utils.compat_data import load_matrix_file
from ansible_collections.ddp.cluster.plugins.module_utils.compat import validate_matrix

FILTERS = gpu_filter.FilterModule().filters()
plan = FILTERS["gpu_stack_plan"]
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu_stack")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def codes(result):
    return [p["code"] for p in result["problems"]]


def test_filters_are_registered():
    assert set(FILTERS) == {"gpu_stack_plan", "nccl_select_build", "kernel_devel_plan", "secure_boot_state",
                            "secure_boot_problems", "nvcc_release", "dnf_enabled_stream", "dnf_stream_problems",
                            "nouveau_actions"}


def test_data_file_system_stacks():
    matrix = load_matrix_file()
    assert validate_matrix(matrix) == []
    rows = {row["cuda"]: row for row in matrix["system_stacks"]}
    assert rows["12.1"] == dict(rows["12.1"], driver_branch="535", cudnn="8.9.2.26", nccl="2.18.3")
    assert rows["12.6"]["driver_branch"] == "580" and rows["12.6"]["cudnn"] is None and rows["12.6"]["nccl"] is None
    assert rows["13.0"]["driver_branch"] == "580"
    minimum = {d["cuda"]: d["min_driver"] for d in matrix["cuda_drivers"]}
    for cuda, row in rows.items():
        assert int(row["driver_branch"]) >= int(minimum[cuda].split(".")[0]), cuda
        assert all(s.startswith("https://") for s in row["sources"])


def test_seeds_stack():
    out = plan({"torch": "2.1.0", "torchvision": "0.16.0", "cuda": "12.1", "driver": "535.104.05"},
               "Debian", "Ubuntu", "22", [{"address": "0000:41:00.0", "device_id": "0x20b2", "class": "0x030200"}])
    assert out["ok"], out["problems"]
    assert out["stack"]["torch"] == "2.1.0" and out["stack"]["nccl"] == "2.18.1"   # the wheel's NCCL
    assert out["nccl"]["version"] == "2.18.3"                                        # the system NCCL
    assert out["driver"]["branch"] == "535" and out["driver"]["flavor"] == "proprietary"
    assert out["cudnn"]["specs"][0] == "libcudnn8=8.9.2.26-1+cuda12.1"
    assert out["cuda"]["package"] == "cuda-toolkit-12-1"


@pytest.mark.parametrize("family, dist, major, ids, flavor, stream, expected", [
    ("Debian", "Debian", "12", [], "open", None, []),
    ("Debian", "Debian", "12", ["0x20b2"], "open", None, []),
    ("Debian", "Ubuntu", "24", ["0x1db1"], "proprietary", None, []),
    ("RedHat", "Rocky", "9", [], "open", "580-open", []),
    ("RedHat", "Rocky", "8", ["0x1db1", "0x1db1"], "proprietary", "580-dkms", []),
])
def test_default_stack(family, dist, major, ids, flavor, stream, expected):
    out = plan({}, family, dist, major, ids)
    assert out["stack"]["torch"] == "2.13.0" and out["stack"]["cuda"] == "12.6"
    assert out["driver"]["branch"] == "580"
    assert (out["driver"]["flavor"], out["driver"]["stream"]) == (flavor, stream)
    assert codes(out) == expected
    assert out["cudnn"]["version"] == "9.10.2.21" and out["nccl"]["version"] == "2.29.3"


def test_blackwell_proprietary_refused():
    out = plan({}, "Debian", "Ubuntu", "24", ["0x2901"] * 8, flavor="proprietary")
    assert codes(out) == ["GPU_STACK_OPEN_REQUIRED"] and not out["ok"]


def test_compat_problems_come_first_c14():
    out = plan({"torch": "2.1.0+cu121", "torchvision": "0.17.0+cu121"}, "Debian", "Ubuntu", "22", [])
    assert codes(out)[0] == "STACK_TORCHVISION_MISMATCH" and not out["ok"]
    out = plan({"torch": "2.0.1+cu117", "torchvision": "0.15.2+cu118"}, "Debian", "Ubuntu", "22", [])
    assert codes(out)[0] == "STACK_CUDA_BUILD_MISMATCH"


@pytest.mark.parametrize("driver, expected", [("410.48", ["STACK_DRIVER_TOO_OLD"]), ("418.39", [])])
def test_c13_through_the_plan(driver, expected):
    out = plan({"torch": "1.3.0+cu101", "driver": driver}, "Debian", "Ubuntu", "22", [])
    assert [c for c in codes(out) if c.startswith("STACK_")] == expected
    assert out["driver"]["branch"] == "418"


def test_unresolved_torch_does_not_also_say_no_cuda():
    out = plan({"torch": "9.9.9"}, "Debian", "Debian", "12", [])
    assert codes(out) == ["STACK_UNKNOWN_TORCH"]
    assert codes(plan({"cuda": "cpu"}, "Debian", "Debian", "12", [])) == ["GPU_STACK_NO_CUDA"]


def test_plan_bad_spec():
    with pytest.raises(AnsibleFilterError):
        plan({"pytorch": "2.1.0"}, "Debian", "Debian", "12", [])
    with pytest.raises(AnsibleFilterError):
        plan({}, "Debian", "Debian", "12", [{"address": "0000:41:00.0"}])


@pytest.mark.parametrize("name, family, nccl, cuda, version, exact", [
    ("apt-cache_madison_libnccl2_libnccl-dev_ubuntu2004_2.18.3__reconstructed.txt", "Debian", "2.18.3", "12.1",
     "2.18.3-1+cuda12.1", True),
    ("apt-cache_madison_libnccl2_ubuntu2204_2.25.1__public-note.txt", "Debian", "2.25.1", "12.6",
     "2.25.1-1+cuda12.8", False),
    ("dnf_showduplicates_list_libnccl_rhel9_2.30__reconstructed-from-nccl-issue-2281.txt", "RedHat", "2.30.4",
     "13.0", "2.30.4-1+cuda13.2", False),
    ("yum_list_installed_libnccl_rhel7_2.18.3-cuda12.1__public-note.txt", "RedHat", "2.18.3", "12.1",
     "2.18.3-1+cuda12.1", True),
])
def test_nccl_select_build(name, family, nccl, cuda, version, exact):
    out = FILTERS["nccl_select_build"](fixture(name), nccl, cuda, family)
    assert (out["version"], out["exact"], out["problems"]) == (version, exact, [])


def test_nccl_select_build_lines_and_errors():
    lines = fixture("apt-cache_madison_libnccl2_ubuntu2204_2.25.1__public-note.txt").splitlines()
    out = FILTERS["nccl_select_build"](lines, "2.18.3", "12.1", "Debian")
    assert codes(out) == ["NCCL_BUILD_NOT_FOUND"]
    with pytest.raises(AnsibleFilterError):
        FILTERS["nccl_select_build"]("", "2.18.3", "12.1", "Suse")
    with pytest.raises(AnsibleFilterError):
        FILTERS["nccl_select_build"]("", "2.18.3", "cpu", "Debian")


@pytest.mark.parametrize("installed, available, action", [
    ("kernel-devel-4.18.0-477.10.1.el8_8.x86_64\n", "", "refuse"),                      # C10
    (["kernel-devel-4.18.0-477.10.1.el8_8.x86_64"], "false", "refuse"),
    (["kernel-devel-4.18.0-477.10.1.el8_8.x86_64"], ["kernel-devel-4.18.0-513.5.1.el8_9.x86_64"], "install"),
    ("kernel-devel-4.18.0-477.10.1.el8_8.x86_64", True, "install"),
    ("kernel-devel-4.18.0-513.5.1.el8_9.x86_64", False, "present"),
])
def test_kernel_devel_plan(installed, available, action):
    out = FILTERS["kernel_devel_plan"]("4.18.0-513.5.1.el8_9.x86_64\n", "RedHat", installed, available)
    assert out["action"] == action
    assert out["package"] == "kernel-devel-4.18.0-513.5.1.el8_9.x86_64"
    if action == "refuse":
        assert [p["code"] for p in out["problems"]] == ["KERNEL_DEVEL_UNAVAILABLE"]
    with pytest.raises(AnsibleFilterError):
        FILTERS["kernel_devel_plan"]("5.14", "Suse", installed, available)


@pytest.mark.parametrize("name, rc, state", [
    ("mokutil_sb-state_enabled__sosreport-issue1574.txt", 0, "enabled"),
    ("mokutil_sb-state_unsupported_rc255__leapp-actor-test.txt", "255", "unsupported"),
    ("mokutil_sb-state_disabled_setup-mode__public-guide.txt", 0, "disabled"),
])
def test_secure_boot_state(name, rc, state):
    assert FILTERS["secure_boot_state"](fixture(name), rc) == state
    assert FILTERS["secure_boot_state"](fixture(name).splitlines(), rc) == state


@pytest.mark.parametrize("state, signing, expected", [
    ("enabled", False, ["SECURE_BOOT_UNSIGNED"]), ("enabled", "true", []), ("unknown", "no", ["SECURE_BOOT_UNSIGNED"]),
    ("disabled", False, []), ("unsupported", False, []),
])
def test_secure_boot_problems(state, signing, expected):
    assert codes({"problems": FILTERS["secure_boot_problems"](state, signing)}) == expected


def test_secure_boot_from_mokutil_to_problems():
    state = FILTERS["secure_boot_state"](fixture("mokutil_sb-state_enabled__sosreport-issue1574.txt"), 0)
    (p,) = FILTERS["secure_boot_problems"](state, False)
    assert p["severity"] == "error"


def test_nvcc_release():
    assert FILTERS["nvcc_release"](fixture("nvcc_version_12.6__public-readme.txt")) == {
        "release": "12.6", "version": "12.6.85"}
    assert FILTERS["nvcc_release"]("") is None


def test_dnf_enabled_stream():
    text = fixture("dnf_module_list_nvidia-driver_el9_580-open-enabled__reconstructed.txt")
    assert FILTERS["dnf_enabled_stream"](text) == "580-open"
    assert FILTERS["dnf_enabled_stream"](text.splitlines(), "nvidia-driver") == "580-open"


@pytest.mark.parametrize("name, wanted, expected", [
    ("dnf_module_list_nvidia-driver_el8_latest-enabled__yum-packaging-precompiled-kmod-issue50.txt", "580-open",
     ["DNF_STREAM_CONFLICT"]),
    ("dnf_module_list_nvidia-driver_el9_580-open-enabled__reconstructed.txt", "580-open", []),
    ("dnf_module_list_nvidia-driver_el9_580-open-enabled__reconstructed.txt", "580-dkms", ["DNF_STREAM_CONFLICT"]),
    ("dnf_module_list_nvidia-driver_el9_none-enabled__reconstructed.txt", "535-dkms", []),
])
def test_dnf_stream_problems(name, wanted, expected):
    assert codes({"problems": FILTERS["dnf_stream_problems"](fixture(name), wanted)}) == expected
    assert FILTERS["dnf_stream_problems"]("", wanted) == []


@pytest.mark.parametrize("changed, loaded, has_conf, rebuild, reboot", [
    (False, True, True, False, True),          # C12
    ("False", "True", "False", True, True),    # C12, as Jinja may pass them
    (True, False, None, True, False),
    ("no", "no", "", False, False),
])
def test_nouveau_actions(changed, loaded, has_conf, rebuild, reboot):
    out = FILTERS["nouveau_actions"](changed, loaded, has_conf)
    assert (out["rebuild_initramfs"], out["reboot"]) == (rebuild, reboot)
