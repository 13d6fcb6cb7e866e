"""Tests for plugins/filter/compat.py against the real data/compat_matrix.yml."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter import compat as compat_filter
from ansible_collections.ddp.cluster.plugins.module_utils.compat import validate_matrix

FILTERS = compat_filter.FilterModule().filters()
resolve = FILTERS["compat_resolve"]


def codes(result):
    return [p["code"] for p in result["problems"]]


def test_filters_are_registered():
    assert set(FILTERS) == {"compat_resolve", "compat_matrix", "preflight_inventory_problems",
                            "preflight_resolve_problems"}


def test_data_file_is_valid():
    matrix = FILTERS["compat_matrix"](None)
    assert validate_matrix(matrix) == []
    assert matrix["default_torch"] == "2.13.0"


@pytest.mark.parametrize("torch, torchvision", [
    ("2.0.1", "0.15.2"), ("2.1.0", "0.16.0"), ("2.2.0", "0.17.0"), ("2.2.2", "0.17.2"),
    ("2.13.0", "0.28.0"), ("2.14.1", "0.29.1"),
])
def test_required_rows_present(torch, torchvision):
    rows = {r["torch"]: r for r in FILTERS["compat_matrix"]("ignored")["torch_releases"]}
    assert rows[torch]["torchvision"] == torchvision


def test_torchvision_minor_is_torch_minor_plus_15_for_2x():
    for row in FILTERS["compat_matrix"](None)["torch_releases"]:
        t_major, t_minor = (int(x) for x in row["torch"].split(".")[:2])
        if t_major == 2:
            assert int(row["torchvision"].split(".")[1]) == t_minor + 15, row["torch"]
            if t_minor >= 1:  # 2.0.1 pairs with 0.15.2 (0.15.1 was a 2.0.0 respin)
                assert row["torch"].split(".")[2] == row["torchvision"].split(".")[2], row["torch"]


def test_every_cuda_build_has_a_driver_row():
    matrix = FILTERS["compat_matrix"](None)
    known = {d["cuda"] for d in matrix["cuda_drivers"]}
    for row in matrix["torch_releases"]:
        for build in row["cuda"]:
            assert build == "cpu" or build in known, (row["torch"], build)


# (spec, expected codes) - C13 and C14 through the real data file
CASES = [
    ({"torch": "2.1.0+cu121", "torchvision": "0.17.0+cu121"}, ["STACK_TORCHVISION_MISMATCH"]),
    ({"torch": "2.0.1+cu117", "torchvision": "0.15.2+cu118"}, ["STACK_CUDA_BUILD_MISMATCH"]),
    ({"torch": "2.0.1+cu118", "torchvision": "0.15.2+cu118"}, []),
    ({"torch": "2.1.0+cu121", "torchvision": "0.16.0+cu121"}, []),
    ({"torch": "2.1.0+cu121", "driver": "525.60.13"}, ["STACK_DRIVER_TOO_OLD"]),
    ({"torch": "2.1.0", "cuda": "12.1", "driver": "535"}, []),
    ({"torch": "1.3.0+cu101", "driver": "410.48"}, ["STACK_DRIVER_TOO_OLD"]),
    ({"torch": "1.3.0+cu101", "driver": "418.39"}, []),
    ({"torch": "2.13.0", "cuda": "cpu"}, []),
    ({"torch": "2.13.0", "cuda": "12.1"}, ["STACK_CUDA_UNSUPPORTED"]),
    ({"torch": "2.99.0"}, ["STACK_UNKNOWN_TORCH"]),
    ({}, []),
]


@pytest.mark.parametrize("spec, expected", CASES)
def test_compat_resolve_cases(spec, expected):
    result = resolve(spec)
    assert codes(result) == expected
    assert result["ok"] is (expected == [])


def test_c14_message():
    result = resolve({"torch": "2.1.0+cu121", "torchvision": "0.17.0+cu121"})
    assert result["problems"][0]["message"] == \
        "torchvision 0.17 goes with torch 2.2; torch 2.1.0 needs torchvision 0.16.0"


def test_c13_message_names_ga_minimum_and_floor():
    message = resolve({"torch": "2.1.0+cu121", "driver": "525.60.13"})["problems"][0]["message"]
    assert "530.30.02" in message and "minor-version-compatibility floor is 525.60.13" in message


def test_reference_stack():
    stack = resolve({"torch": "2.1.0", "torchvision": "0.16.0", "cuda": "auto"})["stack"]
    assert stack["cuda"] == "12.1"
    assert stack["cudnn"].startswith("8.9.")
    assert stack["nccl"].startswith("2.18.")
    assert stack["min_driver"] == "530.30.02"
    assert stack["driver_minor_compat_floor"] == "525.60.13"
    assert stack["index_url"] == "https://download.pytorch.org/whl/cu121"
    assert stack["torchaudio"] == "2.1.0"
    assert stack["sources"]
    # torch 2.1's wheels are built against NumPy 1.x
    assert stack["numpy"] == "<2"


def test_default_stack_is_current_torch():
    stack = resolve({})["stack"]
    assert stack["torch"] == "2.13.0" and stack["torchvision"] == "0.28.0"
    assert stack["numpy"] is None


def test_default_torch_cpu():
    result = resolve({"torch": None, "cuda": "cpu"})
    assert result["ok"]
    assert result["stack"]["torch"] == "2.13.0"
    assert result["stack"]["index_url"] == "https://download.pytorch.org/whl/cpu"


def test_compat_resolve_rejects_bad_input():
    with pytest.raises(AnsibleFilterError):
        resolve("2.1.0")
    with pytest.raises(AnsibleFilterError):
        resolve({"torch": "2.1.0", "pytorch": "2.1.0"})


def test_compat_resolve_with_matrix_override():
    matrix = FILTERS["compat_matrix"](None)
    assert resolve({"torch": "2.1.0"}, matrix)["ok"]
    with pytest.raises(AnsibleFilterError):
        resolve({"torch": "2.1.0"}, {"torch_releases": []})


def test_preflight_filters():
    inv = FILTERS["preflight_inventory_problems"]
    assert codes({"problems": inv({"nodes": ["a", "b"], "head_hosts": ["a"], "rdzv_addr": "localhost"})}) == \
        ["PREFLIGHT_LOOPBACK_RDZV"]
    assert inv({"nodes": ["a"], "head_hosts": ["a"], "rdzv_addr": "localhost"}) == []
    res = FILTERS["preflight_resolve_problems"]
    assert codes({"problems": res("127.0.1.1       node0.cluster.internal node0", "node0")}) == \
        ["PREFLIGHT_HOST_LOOPBACK"]
    assert res("192.0.2.10 node0", "node0") == []
    with pytest.raises(AnsibleFilterError):
        inv(["not", "a", "dict"])
