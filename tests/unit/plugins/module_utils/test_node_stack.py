"""node_stack: parsers on real outputs (fixtures/node_stack/SOURCES.md), library shadowing, drift, and the
cross-node outlier logic up to 64 nodes."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.filter.crossnode import stack_outliers as stack_outliers_filter
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import node_stack as ns

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "node_stack"
PROBE_PATH = Path(__file__).resolve().parents[4] / "roles" / "pytorch_env" / "files" / "ddp_stack_probe.py"
SPEC = importlib.util.spec_from_file_location("ddp_stack_probe", str(PROBE_PATH))
probe = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe)
SITE = "/opt/ddp/venv/lib/python3.11/site-packages"


def fixture(name):
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize("name, version", [
    ("proc-driver-nvidia-version_open-580.95.05.txt", "580.95.05"),
    ("proc-driver-nvidia-version_proprietary-515.76.txt", "515.76"),
])
def test_kernel_module_version(name, version):
    assert ns.parse_proc_driver_version(fixture(name)) == version


@pytest.mark.parametrize("text", [None, "", "GCC version:  gcc version 12.2.0\n",
                                  fixture("ldconfig-p_grep-libcuda-libnvidia-ml_ubuntu22.txt")])
def test_kernel_module_version_absent_or_other_output(text):
    assert ns.parse_proc_driver_version(text) is None


def test_nvml_library_from_ldconfig_and_its_file_name():
    found = ns.parse_ldconfig(fixture("ldconfig-p_grep-libcuda-libnvidia-ml_ubuntu22.txt"), "libnvidia-ml.so.1")
    assert found == {"libnvidia-ml.so.1": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}
    # The symlink's target as the driver installs it (libnvidia-ml.so.1 -> libnvidia-ml.so.580.65.06).
    assert ns.nvml_library_version("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.65.06") == "580.65.06"
    assert ns.nvml_library_version("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") is None


def test_ldconfig_without_nvidia_or_plugins():
    text = fixture("ldconfig-p_debian12-controller.txt")
    assert ns.parse_ldconfig(text, "libnvidia-ml") == {}
    assert ns.parse_ldconfig(text, "libnccl-net") == {}
    assert ns.parse_ldconfig(text, "libz3.so.4") == {"libz3.so.4": "/lib/x86_64-linux-gnu/libz3.so.4"}


def test_ofed_and_cuda_toolkit():
    assert ns.parse_ofed_info("MLNX_OFED_LINUX-5.8-1.0.1.1:\n") == "MLNX_OFED_LINUX-5.8-1.0.1.1"
    assert ns.parse_ofed_info("bash: ofed_info: command not found\n") is None
    assert ns.cuda_toolkit_version({"cuda": {"name": "CUDA SDK", "version": "12.6.3"}}) == "12.6.3"
    assert ns.cuda_toolkit_version({"libcudart": {}}) is None


def test_probe_reads_real_maps_lines(monkeypatch):
    monkeypatch.setattr(probe, "INTERESTING", ("libc.so", "libm.so"))
    found = probe.mapped_libraries(str(FIXTURES / "proc-self-maps_python3.11_debian12.txt"))
    assert found == ["/usr/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]  # mapping order
    monkeypatch.setattr(probe, "INTERESTING", ("libnccl",))
    assert probe.mapped_libraries(str(FIXTURES / "proc-self-maps_python3.11_debian12.txt")) == []


WHEEL_NCCL = SITE + "/nvidia/nccl/lib"


def test_wheel_nccl_loaded_is_fine_and_system_nccl_is_shadowing():
    wheel_dirs = {WHEEL_NCCL: ["libnccl.so.2"], SITE + "/nvidia/cudnn/lib": ["libcudnn.so.9"]}
    good = ns.loaded_libraries([WHEEL_NCCL + "/libnccl.so.2"], wheel_dirs)
    assert good["libnccl"] == {"loaded": WHEEL_NCCL + "/libnccl.so.2", "wheel": WHEEL_NCCL + "/libnccl.so.2"}
    assert good["libcudnn"] == {"loaded": None, "wheel": SITE + "/nvidia/cudnn/lib/libcudnn.so.9"}
    assert ns.library_problems(good) == []
    bad = ns.loaded_libraries(["/usr/lib/x86_64-linux-gnu/libnccl.so.2"], wheel_dirs)
    problems = ns.library_problems(bad)
    assert [(p["code"], p["subject"]) for p in problems] == [("STACK_LIBRARY_SHADOWED", "libnccl")]
    assert "/usr/lib/x86_64-linux-gnu/libnccl.so.2" in problems[0]["message"]


def test_system_nccl_without_a_wheel_copy_is_not_shadowing():
    only_system = ns.loaded_libraries(["/usr/lib/x86_64-linux-gnu/libnccl.so.2"], {})
    assert ns.library_problems(only_system) == []


def test_driver_mismatch():
    assert ns.driver_problems("580.95.05", "580.95.05") == []
    assert ns.driver_problems(None, "580.95.05") == []
    found = ns.driver_problems("595.71.05", "595.80")
    assert found[0]["code"] == "STACK_DRIVER_MISMATCH" and "595.71.05" in found[0]["message"]


def _stack(**over):
    stack = {"kernel": "6.1.0-28-amd64", "driver_kernel": None, "driver_user": None, "cuda_toolkit": None,
             "rdma_core": "44.0-2", "ofed": None, "hpcx": None, "hca_firmware": {}, "nccl_net_plugin_env": None,
             "nccl_net_plugins": [], "torch": {"version": "2.13.0", "cuda": None, "cudnn": None, "nccl": None},
             "files": {"/etc/nccl.conf": "a" * 64, "/etc/slurm/slurm.conf": "b" * 64}}
    stack.update(over)
    return stack


def test_flatten_and_drift():
    flat = ns.flatten(_stack())
    assert flat["torch"] == "2.13.0" and flat["file:/etc/nccl.conf"] == "a" * 64 and "torch_cuda" not in flat
    assert ns.drift_problems(_stack(), {"pytorch_env": {"torch": "2.13.0", "torch_cuda": None}}) == []
    drift = ns.drift_problems(_stack(), {"pytorch_env": {"torch": "2.1.0"}})
    assert [(p["code"], p["subject"]) for p in drift] == [("STACK_DRIFT", "torch")]
    assert "pytorch_env role installed torch 2.1.0, the node now has 2.13.0" in drift[0]["message"]


def test_one_odd_node_is_named_and_taken_out():
    nodes = {"n%d" % i: _stack() for i in range(1, 4)}
    nodes["n2"] = _stack(files={"/etc/nccl.conf": "c" * 64, "/etc/slurm/slurm.conf": "b" * 64})
    found = ns.stack_outliers(nodes)
    assert found["nodes"] == {"n2": ["STACK_MISMATCH"]}
    assert [(p["code"], p["severity"], p["subject"]) for p in found["problems"]] == [
        ("STACK_MISMATCH", "error", "file:/etc/nccl.conf")]
    assert "on n2" in found["problems"][0]["message"] and "n1" not in found["problems"][0]["message"]


def test_a_warning_key_names_the_node_but_keeps_it_in():
    nodes = {"n1": _stack(), "n2": _stack(), "n3": _stack(kernel="6.1.0-27-amd64")}
    found = ns.stack_outliers(nodes)
    assert found["nodes"] == {}
    assert [(p["severity"], p["subject"]) for p in found["problems"]] == [("warning", "kernel")]


def test_two_nodes_that_differ_have_no_majority():
    found = ns.stack_outliers({"n1": _stack(), "n2": _stack(torch={"version": "2.1.0"})})
    assert found["nodes"] == {"n1": ["STACK_MISMATCH"], "n2": ["STACK_MISMATCH"]}
    assert "no value is held by most of them" in found["problems"][0]["message"]


def test_a_node_without_a_stack_is_skipped_and_a_missing_file_counts_as_a_value():
    nodes = {"n1": _stack(), "n2": _stack(), "n3": None,
             "n4": _stack(files={"/etc/nccl.conf": "a" * 64, "/etc/slurm/slurm.conf": None})}
    found = ns.stack_outliers(nodes)
    assert found["nodes"] == {"n4": ["STACK_MISMATCH"]}
    assert "none on n4" in found["problems"][0]["message"]


@pytest.mark.parametrize("count", [3, 12, 64])
def test_scales_to_64_nodes_naming_only_the_odd_ones(count):
    nodes = {"node%02d" % i: _stack() for i in range(count)}
    odd = ["node%02d" % (count - 1)] + (["node01"] if count > 4 else [])
    for name in odd:
        nodes[name] = _stack(nccl_net_plugin_env="libnccl-net-ofi.so")
    found = ns.stack_outliers(nodes)
    assert sorted(found["nodes"]) == sorted(odd)
    assert len(found["problems"]) == 1


def test_filter_rejects_what_is_not_a_stack():
    with pytest.raises(AnsibleFilterError):
        stack_outliers_filter(["n1"])
    with pytest.raises(AnsibleFilterError):
        stack_outliers_filter({"n1": "2.13.0"})
    assert stack_outliers_filter({"n1": _stack(), "n2": None}) == {"problems": [], "nodes": {}}


def test_probe_lists_the_wheel_library_folders(tmp_path):
    lib = tmp_path / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2").write_bytes(b"")
    (tmp_path / "nvidia" / "nccl" / "include").mkdir()
    assert probe.wheel_lib_dirs([str(tmp_path), os.devnull]) == {str(lib): ["libnccl.so.2"]}


# ------------------------------------------------------------------ shadowing without torch importing (issue 34)

def _fx(name):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "node_stack", name)) as handle:
        return handle.read()


def _found(problems):
    return [(p["code"], p["severity"], p["subject"]) for p in problems]


def test_a_cudnn_on_ld_library_path_shadows_the_wheels():
    cudnn = _fx("ldconfig-p_grep-libcudnn_cuDNN8-in-usr-local-cuda.txt")
    found = ns.shadowing_problems("LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:/usr/lib", None, cudnn)
    assert _found(found) == [("STACK_LIBRARY_SHADOWED", "error", "cuDNN (libcudnn)")]
    assert "/usr/local/cuda/targets/x86_64-linux/lib/libcudnn.so.8" in found[0]["message"]
    # the same copies only in the linker cache: a warning where the wheel ships cuDNN 8, nothing where that is unknown
    wheel = {"/venv/site-packages/nvidia/cudnn/lib": ["libcudnn.so.8", "libcudnn_ops_infer.so.8"]}
    assert _found(ns.shadowing_problems("", None, cudnn, wheel)) == [
        ("STACK_LIBRARY_SHADOWED", "warning", "cuDNN (libcudnn)")]
    assert ns.shadowing_problems("", None, cudnn) == []


def test_a_listed_folder_and_the_wheels_own_folder():
    wheel = {"/venv/lib/python3.11/site-packages/nvidia/nccl/lib": ["libnccl.so.2"]}
    listing = {"/opt/nccl/lib": ["libnccl.so.2", "libnccl.so.2.18.1", "libnccl_static.a"],
               "/venv/lib/python3.11/site-packages/nvidia/nccl/lib": ["libnccl.so.2"]}
    path = "/opt/nccl/lib:/venv/lib/python3.11/site-packages/nvidia/nccl/lib"
    assert _found(ns.shadowing_problems(path, listing, "", wheel)) == [
        ("STACK_LIBRARY_SHADOWED", "error", "NCCL (libnccl)")]
    assert ns.shadowing_problems("/venv/lib/python3.11/site-packages/nvidia/nccl/lib", listing, "", wheel) == []


def test_the_load_error_names_the_library_instead_of_being_swallowed():
    nccl = _fx("ldconfig-p_grep-nccl_libnccl2-deb_ubuntu22.txt")
    error = _fx("torch_import_error_undefined-symbol-ncclCommRegister__pytorch-120186.txt")
    assert ns.load_error_libraries(error)[0][0] == "libnccl.so.2"
    assert _found(ns.shadowing_problems("", None, nccl, None, error)) == [
        ("STACK_LIBRARY_SHADOWED", "error", "NCCL (libnccl)")]
    cudnn_error = _fx("torch_cudnn_load_error_undefined-symbol-version-libcudnn_ops_infer__pytorch-104591.txt")
    found = ns.shadowing_problems("", None, "", None, cudnn_error)
    assert _found(found) == [("STACK_LIBRARY_SHADOWED", "error", "cuDNN (libcudnn)")]
    assert "libcudnn_ops_infer.so.8" in found[0]["message"]


@pytest.mark.parametrize("text, folders", [
    ("/a:/b", ["/a", "/b"]), ("export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$X", ["/usr/local/cuda/lib64", "$X"]),
    ("", []), ("/a::/b", ["/a", ".", "/b"]),
])
def test_parse_ld_library_path(text, folders):
    assert ns.parse_ld_library_path(text) == folders


def test_the_controllers_cache_has_nothing_to_shadow():
    assert ns.shadowing_problems("", None, _fx("ldconfig-p_debian12-controller.txt")) == []


def test_probe_lists_the_cuda_libraries_of_ld_library_path(tmp_path):
    for name in ("libnccl.so.2", "libnccl.so.2.18.1", "libz.so.1", "libcudnn_ops_infer.so.8"):
        (tmp_path / name).write_text("")
    value = "%s:%s:" % (tmp_path, tmp_path / "absent")
    assert probe.ld_path_libs(value) == {str(tmp_path): ["libcudnn_ops_infer.so.8", "libnccl.so.2", "libnccl.so.2.18.1"]}
