"""Table-driven tests for plugins/module_utils/gpu/stack.py (cases C10-C14 where they touch the GPU stack)."""
from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils import compat
from ansible_collections.ddp.cluster.plugins.module_utils.gpu import stack as gs

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "gpu_stack")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def codes(problems):
    return [p["code"] for p in problems]


# A small matrix with the structure of data/compat_matrix.yml, so the rules are pinned independently of the
# data file (tests/unit/plugins/filter/test_gpu_stack_filter.py covers the file).
MATRIX = {
    "schema_version": 1,
    "default_torch": "2.13.0",
    "index_url_pattern": "https://download.pytorch.org/whl/{tag}",
    "torch_releases": [
        {"torch": "1.3.0", "torchvision": "0.4.1", "torchaudio": None,
         "cuda": ["9.2", "10.1", "cpu"], "default_cuda": "10.1",
         "cudnn": {"9.2": None, "10.1": None}, "nccl": {"9.2": None, "10.1": None},
         "sources": ["https://pytorch.org/get-started/previous-versions/#v130"]},
        {"torch": "2.0.1", "torchvision": "0.15.2", "torchaudio": "2.0.2",
         "cuda": ["11.7", "11.8", "cpu"], "default_cuda": "11.7",
         "cudnn": {"11.7": "8.5.0.96", "11.8": "8.7.0.84"}, "nccl": {"11.7": "2.14.3", "11.8": None},
         "sources": ["https://pytorch.org/get-started/previous-versions/#v201"]},
        {"torch": "2.1.0", "torchvision": "0.16.0", "torchaudio": "2.1.0",
         "cuda": ["11.8", "12.1", "cpu"], "default_cuda": "12.1",
         "cudnn": {"11.8": "8.7.0.84", "12.1": "8.9.2.26"}, "nccl": {"11.8": None, "12.1": "2.18.1"},
         "sources": ["https://pytorch.org/get-started/previous-versions/#v210"]},
        {"torch": "2.2.0", "torchvision": "0.17.0", "torchaudio": "2.2.0",
         "cuda": ["11.8", "12.1", "cpu"], "default_cuda": "12.1",
         "cudnn": {"12.1": "8.9.2.26"}, "nccl": {"12.1": "2.19.3"},
         "sources": ["https://pytorch.org/get-started/previous-versions/#v220"]},
        {"torch": "2.7.0", "torchvision": "0.22.0", "torchaudio": "2.7.0",
         "cuda": ["11.8", "12.6", "12.8", "cpu"], "default_cuda": "12.6",
         "cudnn": {"12.6": "9.5.1.17", "12.8": "9.7.1.26"}, "nccl": {"12.6": "2.26.2", "12.8": "2.26.2"},
         "sources": ["https://pytorch.org/get-started/previous-versions/#v270"]},
        {"torch": "2.13.0", "torchvision": "0.28.0", "torchaudio": "2.11.0",
         "cuda": ["12.6", "13.0", "13.2", "cpu"], "default_cuda": "12.6",
         "cudnn": {"12.6": "9.10.2.21", "13.0": "9.20.0.48", "13.2": "9.20.0.48"},
         "nccl": {"12.6": "2.29.3", "13.0": "2.29.7", "13.2": "2.29.7"},
         "sources": ["https://pytorch.org/get-started/previous-versions/"]},
    ],
    "cuda_drivers": [
        {"cuda": "9.2", "min_driver": "396.26"},
        {"cuda": "10.1", "min_driver": "418.39", "release": "10.1.105 GA"},
        {"cuda": "11.7", "min_driver": "515.43.04"},
        {"cuda": "11.8", "min_driver": "520.61.05"},
        {"cuda": "12.1", "min_driver": "530.30.02", "release": "12.1 GA"},
        {"cuda": "12.6", "min_driver": "560.28.03"},
        {"cuda": "12.8", "min_driver": "570.26"},
        {"cuda": "13.0", "min_driver": "580.65.06"},
        {"cuda": "13.2", "min_driver": None},
    ],
    "minor_version_compat": [
        {"cuda_major": 11, "min_driver": "450.80.02"},
        {"cuda_major": 12, "min_driver": "525.60.13"},
        {"cuda_major": 13, "min_driver": "580.65.06"},
    ],
    "system_stacks": [
        {"cuda": "12.1", "driver_branch": "535", "cudnn": "8.9.2.26", "nccl": "2.18.3", "sources": ["seeds"]},
        {"cuda": "12.6", "driver_branch": "580", "cudnn": None, "nccl": None, "sources": ["dc-drivers"]},
        {"cuda": "13.0", "driver_branch": "580", "cudnn": None, "nccl": None, "sources": ["dc-drivers"]},
    ],
}

A100, V100, T4, H100, L40, B200, K80, P100 = "0x20b2", "0x1db1", "0x1eb8", "0x2330", "0x26b5", "0x2901", "0x102d", "0x15f8"


# --------------------------------------------------------------------------- matrix validation
def test_matrix_fixture_is_valid():
    assert compat.validate_matrix(MATRIX) == []


def _broken(mutate):
    data = copy.deepcopy(MATRIX)
    mutate(data)
    return data


@pytest.mark.parametrize("mutate, fragment", [
    (lambda m: m.update(system_stacks={"cuda": "12.1"}), "system_stacks must be a list"),
    (lambda m: m["system_stacks"].append({"cuda": "12.9", "driver_branch": "575", "sources": ["x"]}), "cuda_drivers"),
    (lambda m: m["system_stacks"][0].update(cuda=12.1), "cuda_drivers"),
    (lambda m: m["system_stacks"][0].update(driver_branch=535), "driver_branch"),
    (lambda m: m["system_stacks"][0].update(driver_branch="535.104.05"), "driver_branch"),
    (lambda m: m["system_stacks"][0].update(cudnn=8.9), "cudnn"),
    (lambda m: m["system_stacks"][1].update(sources=[]), "sources"),
    (lambda m: m["system_stacks"].append(copy.deepcopy(m["system_stacks"][0])), "listed twice"),
])
def test_validate_matrix_checks_system_stacks(mutate, fragment):
    errors = compat.validate_matrix(_broken(mutate))
    assert any(fragment in e for e in errors), errors


def test_system_stacks_are_optional():
    assert compat.validate_matrix(_broken(lambda m: m.pop("system_stacks"))) == []


# --------------------------------------------------------------------------- GPU generations
@pytest.mark.parametrize("device_id, generation", [
    (K80, "Kepler"), ("0x13bd", "Maxwell"), ("0x17fd", "Maxwell"), (P100, "Pascal"), ("0x1bb3", "Pascal"),
    (V100, "Volta"), ("0x1df6", "Volta"), (T4, "Turing"), ("0x2182", "Turing"),
    (A100, "Ampere"), ("20B0", "Ampere"), ("10de:2235", "Ampere"), (0x20F1, "Ampere"),
    (H100, "Hopper"), ("0x2335", "Hopper"), (L40, "Ada Lovelace"), ("0x27b8", "Ada Lovelace"),
    (B200, "Blackwell"), ("0x2941", "Blackwell"), ("0x2b85", "Blackwell"),
    ("0x2000", "Turing or newer (not in table)"), ("0x3182", "Blackwell or newer (not in table)"),
    ("0x0400", None), ("0x1100", None),
])
def test_gpu_generation(device_id, generation):
    assert gs.gpu_generation(device_id) == generation


@pytest.mark.parametrize("device_id", ["zz", "0x12345", "", None, True, -1, 0x10000, "10de"])
def test_gpu_generation_rejects(device_id):
    if device_id == "10de":  # a bare vendor id is a valid 16-bit number: it reads as an unknown old id
        assert gs.gpu_generation(device_id) is None
        return
    with pytest.raises(ValueError):
        gs.gpu_generation(device_id)


# --------------------------------------------------------------------------- flavor
# (branch, device ids, requested, flavor, problem codes)
FLAVOR_CASES = [
    ("580", [], "auto", "open", []),                      # no GPU seen, branch >= 560
    ("580", [A100] * 4, "auto", "open", []),
    ("580", [T4, H100, L40], "auto", "open", []),
    ("580", [V100], "auto", "proprietary", []),           # pre-Turing
    ("580", [A100, V100], "auto", "proprietary", []),     # mixed: proprietary
    ("580", ["0x1100"], "auto", "proprietary", []),       # unknown old id: not known Turing+
    ("535", [A100], "auto", "proprietary", []),           # the seeds: before R560 proprietary is the default
    ("535", [], "auto", "proprietary", []),
    ("580", [B200], "auto", "open", []),
    ("560", [B200], "auto", "open", ["GPU_STACK_BRANCH_TOO_OLD"]),
    ("580", [B200, V100], "auto", "open", ["GPU_STACK_OPEN_UNSUPPORTED"]),
    ("580", [B200], "proprietary", "proprietary", ["GPU_STACK_OPEN_REQUIRED"]),
    ("580", ["0x3182"], "proprietary", "proprietary", ["GPU_STACK_OPEN_REQUIRED"]),
    ("580", [A100], "proprietary", "proprietary", []),
    ("535", [A100], "open", "open", []),
    ("580", [V100], "open", "open", ["GPU_STACK_OPEN_UNSUPPORTED"]),
    ("470", [A100], "open", "open", ["GPU_STACK_OPEN_UNSUPPORTED"]),
    (580, [A100], " Open ", "open", []),
    ("580", [A100], "closed", "open", ["GPU_STACK_BAD_VALUE"]),
    ("580", ["zz", A100], "auto", "open", ["GPU_STACK_BAD_VALUE"]),
    ("580.95.05", [A100], "auto", "proprietary", ["GPU_STACK_BAD_VALUE"]),
    ("580", V100, "auto", "proprietary", []),             # one id given as a string, not iterated per character
    ("580", None, "auto", "open", []),
]


@pytest.mark.parametrize("branch, ids, requested, flavor, expected", FLAVOR_CASES)
def test_select_driver_flavor(branch, ids, requested, flavor, expected):
    result = gs.select_driver_flavor(branch, ids, requested)
    assert result["flavor"] == flavor
    assert codes(result["problems"]) == expected
    assert result["reason"]
    for p in result["problems"]:
        assert p["fix"] and p["variable"]


def test_flavor_messages_name_the_gpu():
    (p,) = gs.select_driver_flavor("580", [B200], "proprietary")["problems"]
    assert "0x2901 (Blackwell)" in p["message"] and "open" in p["fix"]
    (p,) = gs.select_driver_flavor("580", [V100], "open")["problems"]
    assert "0x1db1 (Volta)" in p["message"] and "proprietary" in p["fix"]
    assert "0x1db1" in gs.select_driver_flavor("580", [V100])["reason"]


# --------------------------------------------------------------------------- packages
@pytest.mark.parametrize("branch, flavor, stream", [
    ("580", "open", "580-open"), ("580", "proprietary", "580-dkms"),
    ("535", "proprietary", "535-dkms"), (535, "OPEN", "535-open"),
])
def test_el_module_stream(branch, flavor, stream):
    assert gs.el_module_stream(branch, flavor) == stream


@pytest.mark.parametrize("branch, flavor", [("580.95", "open"), ("580", "closed"), ("latest", "open")])
def test_el_module_stream_rejects(branch, flavor):
    with pytest.raises(ValueError):
        gs.el_module_stream(branch, flavor)


# (os_family, distribution, source, branch, flavor, install, lock, pin, codes)
PACKAGE_CASES = [
    ("RedHat", "Rocky", "nvidia", "580", "open", ["@nvidia-driver:580-open/default"], gs.EL_LOCK_GLOBS, "580.*", []),
    ("RedHat", "RedHat", "nvidia", "535", "proprietary", ["@nvidia-driver:535-dkms/default"], gs.EL_LOCK_GLOBS,
     "535.*", []),
    ("Debian", "Debian", "nvidia", "580", "open", ["nvidia-open"], ["nvidia-open", "nvidia-persistenced"], "580.*", []),
    ("Debian", "Ubuntu", "nvidia", "535", "proprietary", ["cuda-drivers"], ["cuda-drivers", "nvidia-persistenced"],
     "535.*", []),
    ("Debian", "Ubuntu", "distribution", "580", "open", ["nvidia-driver-580-server-open"],
     ["nvidia-driver-580-server-open"], "580.*", []),
    ("Debian", "Ubuntu", "distribution", "535", "proprietary", ["nvidia-driver-535-server"],
     ["nvidia-driver-535-server"], "535.*", []),
    ("Debian", "Debian", "distribution", "580", "open", [], [], "580.*", ["GPU_STACK_BAD_VALUE"]),
    ("RedHat", "Rocky", "distribution", "580", "open", [], [], "580.*", ["GPU_STACK_BAD_VALUE"]),
    ("Debian", "Ubuntu", "ppa", "580", "open", [], [], None, ["GPU_STACK_BAD_VALUE"]),
    ("Suse", "SLES", "nvidia", "580", "open", [], [], None, ["GPU_STACK_BAD_VALUE"]),
    ("Debian", "Ubuntu", "nvidia", "580", "closed", [], [], None, ["GPU_STACK_BAD_VALUE"]),
]


@pytest.mark.parametrize("family, dist, source, branch, flavor, install, lock, pin, expected", PACKAGE_CASES)
def test_driver_packages(family, dist, source, branch, flavor, install, lock, pin, expected):
    out = gs.driver_packages(family, dist, source, branch, flavor)
    assert (out["install"], out["lock"], out["pin_glob"]) == (install, lock, pin)
    assert codes(out["problems"]) == expected


@pytest.mark.parametrize("cuda, package, home", [
    ("12.6", "cuda-toolkit-12-6", "/usr/local/cuda-12.6"), ("cu121", "cuda-toolkit-12-1", "/usr/local/cuda-12.1"),
    ("13.0", "cuda-toolkit-13-0", "/usr/local/cuda-13.0"), ("12.6.3", "cuda-toolkit-12-6", "/usr/local/cuda-12.6"),
])
def test_cuda_toolkit_names(cuda, package, home):
    assert gs.cuda_toolkit_package(cuda) == package
    assert gs.cuda_home(cuda) == home


@pytest.mark.parametrize("cuda", ["cpu", "auto", None, "rocm6.0"])
def test_cuda_toolkit_rejects(cuda):
    with pytest.raises(ValueError):
        gs.cuda_toolkit_package(cuda)
    with pytest.raises(ValueError):
        gs.cuda_home(cuda)


# (os_family, cudnn, cuda, devel, major, specs)
CUDNN_CASES = [
    ("Debian", "8.9.2.26", "12.1", True, 8, ["libcudnn8=8.9.2.26-1+cuda12.1", "libcudnn8-dev=8.9.2.26-1+cuda12.1"]),
    ("RedHat", "8.9.2.26", "12.1", True, 8, ["libcudnn8-8.9.2.26-1.cuda12.1", "libcudnn8-devel-8.9.2.26-1.cuda12.1"]),
    ("Debian", "8.5.0.96", "cu117", False, 8, ["libcudnn8=8.5.0.96-1+cuda11.7"]),
    ("Debian", "9.10.2.21", "12.6", True, 9, ["libcudnn9-cuda-12=9.10.2.21-1", "libcudnn9-dev-cuda-12=9.10.2.21-1"]),
    ("RedHat", "9.10.2.21", "12.6", True, 9, ["libcudnn9-cuda-12-9.10.2.21-1", "libcudnn9-devel-cuda-12-9.10.2.21-1"]),
    ("Debian", "9.20.0.48", "13.0", False, 9, ["libcudnn9-cuda-13=9.20.0.48-1"]),
]


@pytest.mark.parametrize("family, version, cuda, devel, major, specs", CUDNN_CASES)
def test_cudnn_packages(family, version, cuda, devel, major, specs):
    out = gs.cudnn_packages(family, version, cuda, devel=devel)
    assert out["major"] == major
    assert out["specs"] == specs
    assert out["names"] == [s.split("=")[0] if family == "Debian" else s[:-len(out["package_version"]) - 1]
                            for s in specs]


@pytest.mark.parametrize("family, version, cuda", [
    ("Suse", "9.10.2.21", "12.6"), ("Debian", "7.6.5.32", "10.1"), ("Debian", "9.x", "12.6"),
    ("Debian", "9.10.2.21", "cpu"),
])
def test_cudnn_packages_rejects(family, version, cuda):
    with pytest.raises(ValueError):
        gs.cudnn_packages(family, version, cuda)


def test_nccl_package_names():
    assert gs.nccl_package_names("Debian") == ["libnccl2", "libnccl-dev"]
    assert gs.nccl_package_names("RedHat") == ["libnccl", "libnccl-devel"]
    assert gs.nccl_package_names("RedHat", devel=False) == ["libnccl"]
    with pytest.raises(ValueError):
        gs.nccl_package_names("Suse")


@pytest.mark.parametrize("family, dist, major, expected", [
    ("Debian", "Ubuntu", "22", "ubuntu2204"), ("Debian", "Ubuntu", "24", "ubuntu2404"),
    ("Debian", "Debian", "12", "debian12"), ("RedHat", "Rocky", "8", "rhel8"), ("RedHat", "AlmaLinux", 9, "rhel9"),
    ("RedHat", "RedHat", "9.4", "rhel9"), ("Debian", "Debian", "11", None), ("Debian", "Ubuntu", "20", None),
    ("RedHat", "Rocky", "10", None),
])
def test_repo_distro(family, dist, major, expected):
    assert gs.repo_distro(family, dist, major) == expected


# --------------------------------------------------------------------------- parsers
def test_parse_apt_madison_real_output():
    rows = gs.parse_apt_madison(fixture("apt-cache_madison_libnccl2_ubuntu2204_2.25.1__public-note.txt"))
    assert [r["version"] for r in rows] == ["2.25.1-1+cuda12.8", "2.25.1-1+cuda12.4", "2.25.1-1+cuda12.2"]
    assert {r["package"] for r in rows} == {"libnccl2"}
    assert rows[0]["source"].startswith("https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64")


def test_parse_apt_madison_two_packages_and_noise():
    text = "N: Unable to locate package foo\n" + fixture(
        "apt-cache_madison_libnccl2_libnccl-dev_ubuntu2004_2.18.3__reconstructed.txt") + "\n\n"
    rows = gs.parse_apt_madison(text)
    assert [r["package"] for r in rows] == ["libnccl2"] * 3 + ["libnccl-dev"] * 3
    assert rows[1] == {"package": "libnccl2", "version": "2.18.3-1+cuda12.1",
                       "source": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2004/x86_64  Packages"}
    assert gs.parse_apt_madison("") == [] and gs.parse_apt_madison(None) == []


def test_parse_dnf_showduplicates():
    rows = gs.parse_dnf_showduplicates(fixture(
        "dnf_showduplicates_list_libnccl_rhel9_2.30__reconstructed-from-nccl-issue-2281.txt"))
    assert len(rows) == 6
    assert rows[0] == {"package": "libnccl", "arch": "x86_64", "version": "2.30.3-1+cuda12.9", "repo": "cuda-rhel9-x86_64"}
    assert rows[-1]["version"] == "2.30.7-1+cuda13.3"


def test_parse_yum_list_installed():
    (row,) = gs.parse_dnf_showduplicates(fixture("yum_list_installed_libnccl_rhel7_2.18.3-cuda12.1__public-note.txt"))
    assert row == {"package": "libnccl", "arch": "x86_64", "version": "2.18.3-1+cuda12.1", "repo": "@cuda-rhel7-x86_64"}


def test_parse_dnf_showduplicates_wrapped_and_sections():
    # dnf puts the version on the next line when name.arch fills the first column (synthetic, dnf's layout)
    text = ("Installed Packages\n"
            "libnccl-devel.x86_64   2.18.3-1+cuda12.1   @cuda-rhel8-x86_64\n"
            "Available Packages\n"
            "libnccl-static-with-a-very-long-name.x86_64\n"
            "                       2.18.3-1+cuda12.2   cuda-rhel8-x86_64\n"
            "Error: No matching Packages to list\n")
    rows = gs.parse_dnf_showduplicates(text)
    assert [(r["package"], r["version"], r["repo"]) for r in rows] == [
        ("libnccl-devel", "2.18.3-1+cuda12.1", "@cuda-rhel8-x86_64"),
        ("libnccl-static-with-a-very-long-name", "2.18.3-1+cuda12.2", "cuda-rhel8-x86_64"),
    ]


@pytest.mark.parametrize("name, expected", [
    ("nvcc_version_10.1__k2-fsa-k2-pr584.txt", {"release": "10.1", "version": "10.1.243"}),
    ("nvcc_version_11.1__pytorch-builder-pr580.txt", {"release": "11.1", "version": "11.1.105"}),
    ("nvcc_version_12.1__public-issue-log.txt", {"release": "12.1", "version": "12.1.105"}),
    ("nvcc_version_12.6__public-readme.txt", {"release": "12.6", "version": "12.6.85"}),
])
def test_parse_nvcc_version(name, expected):
    assert gs.parse_nvcc_version(fixture(name)) == expected


@pytest.mark.parametrize("text", ["", None, "bash: nvcc: command not found", "Cuda compilation tools"])
def test_parse_nvcc_version_absent(text):
    assert gs.parse_nvcc_version(text) is None


@pytest.mark.parametrize("name, module, expected", [
    ("dnf_module_list_nvidia-driver_el8_latest-enabled__yum-packaging-precompiled-kmod-issue50.txt", "nvidia-driver",
     "latest"),
    ("dnf_module_list_nvidia-driver_el9_580-open-enabled__reconstructed.txt", "nvidia-driver", "580-open"),
    ("dnf_module_list_nvidia-driver_el9_none-enabled__reconstructed.txt", "nvidia-driver", None),
    ("dnf_module_list_nvidia-driver_el9_580-open-enabled__reconstructed.txt", "nodejs", None),
])
def test_parse_dnf_module_enabled(name, module, expected):
    assert gs.parse_dnf_module_enabled(fixture(name), module) == expected


def test_parse_dnf_module_enabled_joined_flags():
    assert gs.parse_dnf_module_enabled("nvidia-driver   open-dkms [d][e]   default [d], fm, ks   summary") == "open-dkms"
    assert gs.parse_dnf_module_enabled("nvidia-driver   535 [x]   default [d]   summary") is None
    assert gs.parse_dnf_module_enabled(None) is None


# --------------------------------------------------------------------------- NCCL build
MADISON_2_18_3 = fixture("apt-cache_madison_libnccl2_libnccl-dev_ubuntu2004_2.18.3__reconstructed.txt")
MADISON_2_25_1 = fixture("apt-cache_madison_libnccl2_ubuntu2204_2.25.1__public-note.txt")
DNF_2_30 = fixture("dnf_showduplicates_list_libnccl_rhel9_2.30__reconstructed-from-nccl-issue-2281.txt")

# (rows, nccl, cuda, version, cuda used, exact, codes)
NCCL_CASES = [
    # the seeds' NCCL 2.18.3 for CUDA 12.1: the exact build
    (gs.parse_apt_madison(MADISON_2_18_3), "2.18.3", "12.1", "2.18.3-1+cuda12.1", "12.1", True, []),
    (gs.parse_apt_madison(MADISON_2_18_3), "2.18.3-1", "cu121", "2.18.3-1+cuda12.1", "12.1", True, []),
    # no +cuda12.6 build of 2.25.1: the newest 12.x build, said in the note
    (gs.parse_apt_madison(MADISON_2_25_1), "2.25.1", "12.6", "2.25.1-1+cuda12.8", "12.8", False, []),
    (gs.parse_apt_madison(MADISON_2_25_1), "2.25.1", "12.4", "2.25.1-1+cuda12.4", "12.4", True, []),
    # NVIDIA/nccl issue 2281: 2.30.4 exists for 12.9 and 13.2 but not 13.0
    (gs.parse_dnf_showduplicates(DNF_2_30), "2.30.4", "13.0", "2.30.4-1+cuda13.2", "13.2", False, []),
    (gs.parse_dnf_showduplicates(DNF_2_30), "2.30.4", "12.9", "2.30.4-1+cuda12.9", "12.9", True, []),
    (["2.18.3-2+cuda12.1", "2.18.3-1+cuda12.1", "garbage", None], "2.18.3", "12.1", "2.18.3-2+cuda12.1", "12.1",
     True, []),
    # nothing for that release and CUDA major
    (gs.parse_apt_madison(MADISON_2_25_1), "2.18.3", "12.1", None, None, False, ["NCCL_BUILD_NOT_FOUND"]),
    (gs.parse_apt_madison(MADISON_2_18_3), "2.18.3", "13.0", None, None, False, ["NCCL_BUILD_NOT_FOUND"]),
    ([], "2.18.3", "12.1", None, None, False, ["NCCL_BUILD_NOT_FOUND"]),
    (gs.parse_apt_madison(MADISON_2_18_3), "two", "12.1", None, None, False, ["GPU_STACK_BAD_VALUE"]),
]


@pytest.mark.parametrize("rows, nccl, cuda, version, used, exact, expected", NCCL_CASES)
def test_select_nccl_build(rows, nccl, cuda, version, used, exact, expected):
    out = gs.select_nccl_build(rows, nccl, cuda)
    assert (out["version"], out["cuda"], out["exact"]) == (version, used, exact)
    assert codes(out["problems"]) == expected


def test_select_nccl_build_note_and_listing():
    out = gs.select_nccl_build(gs.parse_apt_madison(MADISON_2_25_1), "2.25.1", "12.6")
    assert "no +cuda12.6 build" in out["note"] and "2.25.1-1+cuda12.8" in out["note"]
    (p,) = gs.select_nccl_build(gs.parse_apt_madison(MADISON_2_25_1), "2.18.3", "12.1")["problems"]
    assert "2.25.1" in p["message"] and "2.25.1" in p["fix"] and p["variable"] == "nccl_version"
    (p,) = gs.select_nccl_build([], "2.18.3", "12.1")["problems"]
    assert "repository" in p["message"]


def test_select_nccl_build_needs_a_cuda_build():
    with pytest.raises(ValueError):
        gs.select_nccl_build([], "2.18.3", "cpu")


# --------------------------------------------------------------------------- dnf streams
@pytest.mark.parametrize("enabled, wanted, expected", [
    (None, "580-open", []), ("580-open", "580-open", []), ("latest", "580-open", ["DNF_STREAM_CONFLICT"]),
    ("535-dkms", "580-dkms", ["DNF_STREAM_CONFLICT"]),
])
def test_stream_conflict_problems(enabled, wanted, expected):
    found = gs.stream_conflict_problems(enabled, wanted)
    assert codes(found) == expected
    if found:
        assert "dnf module reset -y nvidia-driver" in found[0]["fix"]
        assert enabled in found[0]["message"] and wanted in found[0]["message"]


def test_stream_conflict_from_real_listing():
    enabled = gs.parse_dnf_module_enabled(fixture(
        "dnf_module_list_nvidia-driver_el8_latest-enabled__yum-packaging-precompiled-kmod-issue50.txt"))
    assert codes(gs.stream_conflict_problems(enabled, gs.el_module_stream("580", "open"))) == ["DNF_STREAM_CONFLICT"]


# --------------------------------------------------------------------------- nouveau (C12)
# (conf_changed, nouveau_loaded, initramfs_has_conf, rebuild, reboot)
NOUVEAU_CASES = [
    (False, True, True, False, True),     # C12: blacklisted and in the initramfs, still loaded -> reboot
    (False, True, False, True, True),     # C12: blacklisted on disk, not in the initramfs -> rebuild + reboot
    (True, True, None, True, True),       # first run on a node where nouveau owns the GPU
    (True, False, None, True, False),     # file written, nouveau not loaded (no GPU / already nvidia)
    (False, False, True, False, False),   # steady state
    (False, False, False, True, False),   # conf not in the initramfs: rebuild so the next boot honours it
    (False, False, None, False, False),   # initramfs not checked: nothing to do
]


@pytest.mark.parametrize("changed, loaded, has_conf, rebuild, reboot", NOUVEAU_CASES)
def test_nouveau_actions(changed, loaded, has_conf, rebuild, reboot):
    out = gs.nouveau_actions(changed, loaded, has_conf)
    assert (out["rebuild_initramfs"], out["reboot"]) == (rebuild, reboot)
    assert len(out["reasons"]) == int(rebuild) + int(reboot)


# --------------------------------------------------------------------------- the plan
def plan_for(torch=None, torchvision=None, cuda=None, driver=None, os_family="Debian", distribution="Ubuntu",
             os_major="22", device_ids=(), **kwargs):
    resolved = compat.resolve_stack(MATRIX, torch, torchvision=torchvision, cuda=cuda, driver=driver)
    plan = gs.system_stack_plan(MATRIX, resolved["stack"], os_family, distribution, os_major, list(device_ids),
                                **kwargs)
    return resolved, plan


def test_seeds_stack_plan():
    # issue #3: driver >= 530.30.02, CUDA 12.1, cuDNN 8.9, NCCL 2.18.3, torch 2.1.0, torchvision 0.16.0
    resolved, plan = plan_for("2.1.0", "0.16.0", "12.1", "535.104.05", device_ids=[A100] * 4)
    assert resolved["ok"] and plan["ok"], plan["problems"]
    driver = plan["driver"]
    assert driver["branch"] == "535" and "system_stacks" in driver["branch_reason"]
    assert driver["min_driver"] == "530.30.02"
    assert driver["flavor"] == "proprietary" and driver["stream"] is None
    assert driver["packages"] == ["cuda-drivers"] and driver["pin_glob"] == "535.*"
    assert plan["cuda"] == {"version": "12.1", "package": "cuda-toolkit-12-1", "home": "/usr/local/cuda-12.1"}
    assert plan["cudnn"]["major"] == 8
    assert plan["cudnn"]["specs"] == ["libcudnn8=8.9.2.26-1+cuda12.1", "libcudnn8-dev=8.9.2.26-1+cuda12.1"]
    assert plan["nccl"] == {"version": "2.18.3", "cuda": "12.1", "names": ["libnccl2", "libnccl-dev"]}
    assert plan["repo_distro"] == "ubuntu2204"


def test_seeds_stack_on_el():
    _resolved, plan = plan_for("2.1.0", cuda="12.1", os_family="RedHat", distribution="Rocky", os_major="8",
                               device_ids=[A100])
    assert plan["ok"]
    assert plan["driver"]["stream"] == "535-dkms"
    assert plan["driver"]["packages"] == ["@nvidia-driver:535-dkms/default"]
    assert plan["cudnn"]["specs"] == ["libcudnn8-8.9.2.26-1.cuda12.1", "libcudnn8-devel-8.9.2.26-1.cuda12.1"]
    assert plan["nccl"]["names"] == ["libnccl", "libnccl-devel"]


# (device ids, requested flavor, os_family, flavor, stream, codes)
DEFAULT_CASES = [
    ([], "auto", "Debian", "open", None, []),
    ([A100] * 8, "auto", "Debian", "open", None, []),
    ([V100] * 8, "auto", "Debian", "proprietary", None, []),
    ([B200] * 8, "proprietary", "Debian", "proprietary", None, ["GPU_STACK_OPEN_REQUIRED"]),
    ([], "auto", "RedHat", "open", "580-open", []),
    ([V100], "auto", "RedHat", "proprietary", "580-dkms", []),
    ([A100], "proprietary", "RedHat", "proprietary", "580-dkms", []),
]


@pytest.mark.parametrize("ids, flavor, family, expected_flavor, stream, expected", DEFAULT_CASES)
def test_default_stack_plan(ids, flavor, family, expected_flavor, stream, expected):
    dist = "Rocky" if family == "RedHat" else "Debian"
    resolved, plan = plan_for(os_family=family, distribution=dist, os_major="9" if family == "RedHat" else "12",
                              device_ids=ids, flavor=flavor)
    assert resolved["stack"]["torch"] == "2.13.0" and resolved["stack"]["cuda"] == "12.6"
    assert plan["driver"]["branch"] == "580"
    assert (plan["driver"]["flavor"], plan["driver"]["stream"]) == (expected_flavor, stream)
    assert codes(plan["problems"]) == expected
    assert plan["ok"] is (not expected)
    if family == "Debian":
        assert plan["cudnn"]["specs"][0] == "libcudnn9-cuda-12=9.10.2.21-1"
    else:
        assert plan["cudnn"]["specs"][0] == "libcudnn9-cuda-12-9.10.2.21-1"
    assert plan["nccl"]["version"] == "2.29.3"


def test_default_stack_el_packages():
    _resolved, plan = plan_for(os_family="RedHat", distribution="Rocky", os_major="9")
    assert plan["driver"]["packages"] == ["@nvidia-driver:580-open/default"]
    assert "kmod-nvidia*" in plan["driver"]["lock"]
    assert plan["cuda"]["package"] == "cuda-toolkit-12-6"


def test_cuda_without_system_row_takes_the_minimum_drivers_branch():
    _resolved, plan = plan_for("2.7.0", cuda="12.8")
    assert plan["ok"]
    assert plan["driver"]["branch"] == "570"
    assert "no system_stacks row for CUDA 12.8" in plan["driver"]["branch_reason"]
    assert plan["cudnn"]["version"] == "9.7.1.26" and plan["nccl"]["version"] == "2.26.2"


def test_cuda_without_minimum_takes_the_floor_branch():
    _resolved, plan = plan_for("2.13.0", cuda="13.2")
    assert plan["driver"]["branch"] == "580" and "floor" in plan["driver"]["branch_reason"]


@pytest.mark.parametrize("kwargs, expected", [
    ({"branch": "525"}, ["GPU_STACK_BRANCH_TOO_OLD"]),          # CUDA 12.1 needs >= 530.30.02
    ({"branch": "530"}, []),
    ({"branch": 550}, []),
    ({"branch": "auto"}, []),
    ({"branch": "535.104.05"}, ["GPU_STACK_BAD_VALUE"]),
    ({"cudnn": "9.1.0.70"}, []),
    ({"cudnn": "7.6.5.32"}, ["GPU_STACK_BAD_VALUE"]),
    ({"nccl": "2.19.3"}, []),
    ({"nccl": "latest"}, ["GPU_STACK_BAD_VALUE"]),
    ({"source": "distribution"}, []),
    ({"flavor": "open"}, []),
])
def test_seeds_stack_overrides(kwargs, expected):
    _resolved, plan = plan_for("2.1.0", cuda="12.1", device_ids=[A100], **kwargs)
    assert codes(plan["problems"]) == expected
    for p in plan["problems"]:
        assert p["variable"] and p["fix"]


def test_branch_too_old_names_the_minimum():
    _resolved, plan = plan_for("2.1.0", cuda="12.1", branch="525")
    (p,) = plan["problems"]
    assert "530.30.02" in p["message"] and "530" in p["fix"] and p["variable"] == "nvidia_driver_branch"


def test_distribution_source_packages_on_ubuntu():
    _resolved, plan = plan_for("2.1.0", cuda="12.1", device_ids=[A100], source="distribution")
    assert plan["driver"]["packages"] == ["nvidia-driver-535-server"]


@pytest.mark.parametrize("torch, cuda, variable", [
    ("2.0.1", "11.8", "nccl_version"),     # nccl null for 2.0.1 cu118
    ("1.3.0", "10.1", "cudnn_version"),    # cuDNN and NCCL unconfirmed for 1.3.0
])
def test_unknown_versions_are_problems(torch, cuda, variable):
    _resolved, plan = plan_for(torch, cuda=cuda)
    assert "GPU_STACK_UNKNOWN_VERSION" in codes(plan["problems"])
    assert variable in [p["variable"] for p in plan["problems"]]
    assert not plan["ok"]


@pytest.mark.parametrize("torch, cuda", [("2.1.0", "cpu"), ("9.9.9", None)])
def test_no_cuda(torch, cuda):
    _resolved, plan = plan_for(torch, cuda=cuda)
    assert codes(plan["problems"]) == ["GPU_STACK_NO_CUDA"]
    assert plan["driver"] is plan["cuda"] is plan["cudnn"] is plan["nccl"] is None


def test_unsupported_os_family():
    _resolved, plan = plan_for("2.1.0", cuda="12.1", os_family="Suse", distribution="SLES", os_major="15")
    assert codes(plan["problems"]) == ["GPU_STACK_BAD_VALUE"]


# C13 through the resolver and the plan: the driver must reach the CUDA build's minimum.
@pytest.mark.parametrize("torch, driver, compat_codes, branch", [
    ("1.3.0+cu101", "410.48", ["STACK_DRIVER_TOO_OLD"], "418"),
    ("1.3.0+cu101", "418.39", [], "418"),
    ("2.1.0+cu121", "525.60.13", ["STACK_DRIVER_TOO_OLD"], "535"),
    ("2.1.0+cu121", "530.30.02", [], "535"),
])
def test_c13_driver_minimum(torch, driver, compat_codes, branch):
    resolved, plan = plan_for(torch, driver=driver)
    assert codes(resolved["problems"]) == compat_codes
    assert plan["driver"]["branch"] == branch
    assert compat.compare_versions(plan["driver"]["branch"], plan["driver"]["min_driver"].split(".")[0]) >= 0


def test_c13_message_states_the_minor_version_floor():
    resolved, _plan = plan_for("2.1.0+cu121", driver="525.60.13")
    (p,) = resolved["problems"]
    assert "530.30.02" in p["message"] and "525.60.13" in p["message"] and "minor-version" in p["message"]


# C14 through the resolver: the plan is not asked for a refused pair, the stack carries the pair that fits.
@pytest.mark.parametrize("torch, torchvision, expected, fragment", [
    ("2.1.0+cu121", "0.17.0+cu121", ["STACK_TORCHVISION_MISMATCH"], "0.16"),
    ("2.0.1+cu117", "0.15.2+cu118", ["STACK_CUDA_BUILD_MISMATCH"], "CUDA builds differ"),
])
def test_c14_pairs_refused(torch, torchvision, expected, fragment):
    resolved, _plan = plan_for(torch, torchvision)
    assert codes(resolved["problems"]) == expected
    assert fragment in resolved["problems"][0]["message"] + resolved["problems"][0]["fix"]


def test_every_emitted_code_is_listed():
    source = open(gs.__file__).read()
    for code in gs.PROBLEM_CODES:
        assert '"%s"' % code in source
