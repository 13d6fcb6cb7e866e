"""Table-driven tests for plugins/module_utils/compat.py (cases C13, C14)."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils import compat

# A small matrix with the same structure as data/compat_matrix.yml, so these tests
# pin the rules independently of the data file (test_compat_filter.py covers the file).
MATRIX = {
    "schema_version": 1,
    "default_torch": "2.1.0",
    "index_url_pattern": "https://download.pytorch.org/whl/{tag}",
    "torch_releases": [
        {"torch": "2.0.1", "torchvision": "0.15.2", "torchaudio": "2.0.2",
         "cuda": ["11.7", "11.8", "cpu"], "default_cuda": "11.7",
         "cudnn": {"11.7": "8.5.0.96", "11.8": "8.7.0.84"}, "nccl": {"11.7": "2.14.3", "11.8": None},
         "sources": ["https://pytorch.org/get-started/previous-versions/"]},
        {"torch": "2.1.0", "torchvision": "0.16.0", "torchaudio": "2.1.0",
         "cuda": ["11.8", "12.1", "cpu"], "default_cuda": "12.1",
         "cudnn": {"11.8": "8.7.0.84", "12.1": "8.9.2.26"}, "nccl": {"11.8": None, "12.1": "2.18.1"},
         "sources": ["https://pytorch.org/get-started/previous-versions/"]},
        {"torch": "2.1.1", "torchvision": "0.16.1", "torchaudio": "2.1.1",
         "cuda": ["11.8", "12.1", "cpu"], "default_cuda": "12.1",
         "cudnn": {"12.1": "8.9.2.26"}, "nccl": {"12.1": "2.18.1"},
         "sources": ["https://pytorch.org/get-started/previous-versions/"]},
        {"torch": "2.2.0", "torchvision": "0.17.0", "torchaudio": "2.2.0",
         "cuda": ["11.8", "12.1", "cpu"], "default_cuda": "12.1",
         "cudnn": {"12.1": "8.9.2.26"}, "nccl": {"12.1": "2.19.3"},
         "sources": ["https://pytorch.org/get-started/previous-versions/"]},
        {"torch": "2.13.0", "torchvision": "0.28.0", "torchaudio": "2.11.0",
         "cuda": ["12.6", "13.0", "13.2", "cpu"], "default_cuda": "12.6",
         "cudnn": {"12.6": "9.10.2.21"}, "nccl": {"12.6": "2.29.3"},
         "sources": ["https://pytorch.org/get-started/previous-versions/"]},
    ],
    "cuda_drivers": [
        {"cuda": "11.7", "min_driver": "515.43.04"},
        {"cuda": "11.8", "min_driver": "520.61.05"},
        {"cuda": "12.1", "min_driver": "530.30.02", "release": "12.1 GA"},
        {"cuda": "12.6", "min_driver": "560.28.03"},
        {"cuda": "13.2", "min_driver": None},
    ],
    "minor_version_compat": [
        {"cuda_major": 11, "min_driver": "450.80.02"},
        {"cuda_major": 12, "min_driver": "525.60.13"},
        {"cuda_major": 13, "min_driver": "580.65.06"},
    ],
}


def codes(result):
    return [p["code"] for p in result["problems"]]


@pytest.mark.parametrize("text, expected", [
    ("2.1.0+cu121", ("2.1.0", "12.1")),
    ("2.0.1+cu117", ("2.0.1", "11.7")),
    ("2.9.0+cu130", ("2.9.0", "13.0")),
    ("1.3.0+cu92", ("1.3.0", "9.2")),
    ("2.1.0+cpu", ("2.1.0", "cpu")),
    ("2.1.0", ("2.1.0", None)),
    (" 0.16.0+cu121 ", ("0.16.0", "12.1")),
])
def test_parse_version(text, expected):
    assert compat.parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "2.1.0+", "2.1.0+rocm6.0", "latest", "2.1.0a0", None])
def test_parse_version_rejects(text):
    with pytest.raises(ValueError):
        compat.parse_version(text)


@pytest.mark.parametrize("value, expected", [
    ("12.1", "12.1"), ("12.1.1", "12.1"), ("cu121", "12.1"), (12.1, "12.1"), ("CPU", "cpu"),
    ("auto", None), (None, None), ("", None), ("cu130", "13.0"),
])
def test_normalize_cuda(value, expected):
    assert compat.normalize_cuda(value) == expected


@pytest.mark.parametrize("value", ["rocm6.0", "twelve", "12"])
def test_normalize_cuda_rejects(value):
    with pytest.raises(ValueError):
        compat.normalize_cuda(value)


@pytest.mark.parametrize("cuda, tag", [("12.1", "cu121"), ("13.0", "cu130"), ("9.2", "cu92"), ("cpu", "cpu")])
def test_cuda_tag(cuda, tag):
    assert compat.cuda_tag(cuda) == tag


@pytest.mark.parametrize("left, right, expected", [
    ("525.60.13", "530.30.02", -1),
    ("535", "530.30.02", 1),
    ("530.30.02", "530.30.2", 0),
    ("535", "535.0.0", 0),
    ("0.17.0", "0.9.0", 1),  # numeric, not lexical
    ("2.10.0", "2.9.1", 1),
])
def test_compare_versions(left, right, expected):
    assert compat.compare_versions(left, right) == expected


def test_matrix_fixture_is_valid():
    assert compat.validate_matrix(MATRIX) == []
    assert compat.load_matrix(MATRIX) is MATRIX


def _broken(mutate):
    data = copy.deepcopy(MATRIX)
    mutate(data)
    return data


@pytest.mark.parametrize("mutate, fragment", [
    (lambda m: m.pop("torch_releases"), "torch_releases"),
    (lambda m: m.update(default_torch="9.9.9"), "default_torch"),
    (lambda m: m["torch_releases"][0].update(default_cuda="12.4"), "default_cuda"),
    (lambda m: m["torch_releases"][0].update(cuda=["11.7", 11.8]), "cuda build"),
    (lambda m: m["torch_releases"][0]["cudnn"].update({"12.4": "9.1.0.70"}), "cudnn key"),
    (lambda m: m["torch_releases"][0].update(torchvision=0.15), "torchvision"),
    (lambda m: m["torch_releases"].append(copy.deepcopy(m["torch_releases"][0])), "listed twice"),
    (lambda m: m.update(index_url_pattern="https://download.pytorch.org/whl/"), "{tag}"),
    (lambda m: m["torch_releases"][1].pop("sources"), "sources"),
    (lambda m: m["cuda_drivers"].append({"cuda": "12.9"}), "cuda_drivers"),
    (lambda m: m["minor_version_compat"].append({"cuda_major": "12", "min_driver": "1"}), "minor_version_compat"),
])
def test_validate_matrix_finds_errors(mutate, fragment):
    errors = compat.validate_matrix(_broken(mutate))
    assert any(fragment in e for e in errors), errors
    with pytest.raises(compat.MatrixError):
        compat.load_matrix(_broken(mutate))


# Rows: (torch, torchvision, cuda, driver, expected codes)
RESOLVE_CASES = [
    # C14
    ("2.1.0+cu121", "0.17.0+cu121", None, None, ["STACK_TORCHVISION_MISMATCH"]),
    ("2.0.1+cu117", "0.15.2+cu118", None, None, ["STACK_CUDA_BUILD_MISMATCH"]),
    ("2.0.1+cu118", "0.15.2+cu118", None, None, []),
    ("2.1.0+cu121", "0.16.0+cu121", None, None, []),
    # C13
    ("2.1.0+cu121", None, None, "525.60.13", ["STACK_DRIVER_TOO_OLD"]),
    ("2.1.0", None, "12.1", "535", []),
    ("2.1.0", None, "12.1", "530.30.02", []),
    ("2.1.0", None, "cpu", "390.1", []),  # no driver check for CPU builds
    # others
    ("2.1.0", "0.16.1", None, None, ["STACK_TORCHVISION_MISMATCH"]),
    ("2.1.0", "0.99.0", None, None, ["STACK_TORCHVISION_MISMATCH"]),
    ("2.1.0", None, "12.4", None, ["STACK_CUDA_UNSUPPORTED"]),
    ("2.1.0+cu118", None, "12.1", None, ["STACK_CUDA_BUILD_MISMATCH"]),
    ("2.1.0+cpu", "0.16.0+cu121", None, None, ["STACK_CUDA_BUILD_MISMATCH"]),
    ("2.1.0+cu117", None, None, None, ["STACK_CUDA_UNSUPPORTED"]),
    ("3.0.0", None, None, None, ["STACK_UNKNOWN_TORCH"]),
    ("two", None, None, None, ["STACK_BAD_VERSION"]),
    ("2.1.0", None, "rocm", None, ["STACK_BAD_VERSION"]),
    ("2.1.0", None, None, "latest", ["STACK_BAD_VERSION"]),
    ("2.13.0", None, "13.2", "570.26", ["STACK_DRIVER_TOO_OLD"]),  # GA min unknown: 13.x floor applies
    ("2.13.0", None, "13.2", "580.65.06", []),
]


@pytest.mark.parametrize("torch, torchvision, cuda, driver, expected", RESOLVE_CASES)
def test_resolve_stack_codes(torch, torchvision, cuda, driver, expected):
    result = compat.resolve_stack(MATRIX, torch, torchvision=torchvision, cuda=cuda, driver=driver)
    assert codes(result) == expected
    assert result["ok"] is (expected == [])
    for problem in result["problems"]:
        assert set(problem) == {"code", "variable", "message", "fix"}
        assert problem["code"] in compat.PROBLEM_CODES
        assert problem["message"] and problem["fix"]


def test_c14_torchvision_message_names_both_pairs():
    result = compat.resolve_stack(MATRIX, "2.1.0+cu121", torchvision="0.17.0+cu121")
    problem = result["problems"][0]
    assert problem["variable"] == "ddp_torchvision_version"
    assert problem["message"] == "torchvision 0.17 goes with torch 2.2; torch 2.1.0 needs torchvision 0.16.0"
    assert result["stack"]["torchvision"] == "0.16.0"  # the stack carries the fix


def test_c14_cuda_builds_differ_message():
    problem = compat.resolve_stack(MATRIX, "2.0.1+cu117", torchvision="0.15.2+cu118")["problems"][0]
    assert "CUDA builds differ" in problem["message"]
    assert "11.7" in problem["message"] and "11.8" in problem["message"]


def test_c13_driver_message_names_minimum_and_floor():
    problem = compat.resolve_stack(MATRIX, "2.1.0+cu121", driver="525.60.13")["problems"][0]
    assert problem["variable"] == "ddp_nvidia_driver_version"
    assert ">= 530.30.02" in problem["message"]
    assert "minor-version-compatibility floor is 525.60.13" in problem["message"]


def test_unknown_torch_lists_known_versions():
    problem = compat.resolve_stack(MATRIX, "1.0.0")["problems"][0]
    assert problem["variable"] == "ddp_torch_version"
    for known in ("2.0.1", "2.1.0", "2.2.0", "2.13.0"):
        assert known in problem["message"]


def test_cuda_unsupported_names_variable_and_builds():
    problem = compat.resolve_stack(MATRIX, "2.1.0", cuda="12.4")["problems"][0]
    assert problem["variable"] == "ddp_cuda_version"
    assert "11.8, 12.1, cpu" in problem["message"]


def test_reference_stack():
    result = compat.resolve_stack(MATRIX, "2.1.0", cuda="auto")
    assert result["ok"]
    assert result["stack"] == {
        "torch": "2.1.0", "torchvision": "0.16.0", "torchaudio": "2.1.0", "cuda": "12.1", "cuda_tag": "cu121",
        "min_driver": "530.30.02", "min_driver_release": "12.1 GA", "driver_minor_compat_floor": "525.60.13",
        "cudnn": "8.9.2.26", "nccl": "2.18.1", "index_url": "https://download.pytorch.org/whl/cu121",
        "sources": ["https://pytorch.org/get-started/previous-versions/"], "numpy": None,
    }


def test_numpy_below_2_for_torch_built_against_numpy_1():
    matrix = dict(MATRIX, numpy2_first_torch="2.3.0")
    assert compat.resolve_stack(matrix, "2.1.0")["stack"]["numpy"] == "<2"
    assert compat.resolve_stack(matrix, "2.13.0", cuda="cpu")["stack"]["numpy"] is None
    assert compat.validate_matrix(dict(MATRIX, numpy2_first_torch=2.3)) == [
        "numpy2_first_torch must be a quoted dotted version"]


@pytest.mark.parametrize("torch", [None, "", "auto"])
def test_default_torch_when_unset(torch):
    result = compat.resolve_stack(MATRIX, torch)
    assert result["ok"] and result["stack"]["torch"] == MATRIX["default_torch"]


def test_cpu_stack_has_no_gpu_libraries():
    stack = compat.resolve_stack(MATRIX, "2.13.0", cuda="cpu")["stack"]
    assert stack["cuda"] == "cpu" and stack["index_url"].endswith("/whl/cpu")
    assert stack["cudnn"] is None and stack["nccl"] is None and stack["min_driver"] is None


def test_torchvision_tag_picks_build_when_torch_untagged():
    stack = compat.resolve_stack(MATRIX, "2.1.0", torchvision="0.16.0+cu118")["stack"]
    assert stack["cuda"] == "11.8" and stack["index_url"].endswith("/cu118")
