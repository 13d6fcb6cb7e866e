"""Table-driven tests for plugins/module_utils/validate.py (the validate stage's pure rules)."""
from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils import validate as v

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _specs():
    specs = {}
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs[path.split(os.sep)[-3]] = yaml.safe_load(handle)["argument_specs"]
    return specs


SPECS = _specs()


def run(values=None, nodes=None, heads=("node0",)):
    nodes = nodes if nodes is not None else {"node0": {}, "node1": {}}
    nodes = dict((h, dict(vals, **(values or {}))) for h, vals in nodes.items())
    return v.validate({"nodes": nodes, "head_hosts": list(heads), "role_specs": SPECS})


def found(problems):
    return sorted((p["code"], p["variable"]) for p in problems)


BAD = [
    # (values, expected code, variable, a word the message or fix must hold)
    ({"rdma_mod": "ofed"}, "VALIDATE_UNKNOWN_VAR", "rdma_mod", "rdma_mode"),
    ({"ddp_torch_verison": "2.1.0"}, "VALIDATE_UNKNOWN_VAR", "ddp_torch_verison", "ddp_torch_version"),
    ({"ddp_benchmark_stpes": 5}, "VALIDATE_UNKNOWN_VAR", "ddp_benchmark_stpes", "ddp_benchmark_steps"),
    ({"rdma_mode": "ofd"}, "VALIDATE_CHOICE", "rdma_mode", "'ofed'"),
    ({"ddp_benchmark_launcher": "torchrum"}, "VALIDATE_CHOICE", "ddp_benchmark_launcher", "'torchrun'"),
    ({"ddp_scheduler": "slurmm"}, "VALIDATE_CHOICE", "ddp_scheduler", "'slurm'"),
    ({"ddp_benchmark_scopes": ["one_node", "all_node"]}, "VALIDATE_CHOICE", "ddp_benchmark_scopes", "all_nodes"),
    ({"rdma_cma_roce_mode": "RoCE v2'; touch /tmp/x; echo '"}, "VALIDATE_CHOICE", "rdma_cma_roce_mode", "RoCE v2"),
    ({"rdma_qos_pfc": "1; reboot"}, "VALIDATE_CHOICE", "rdma_qos_pfc", "eight"),
    ({"rdma_cma_roce_tos": "106 x"}, "VALIDATE_CHOICE", "rdma_cma_roce_tos", "ToS"),
    ({"rdma_mtu": 100000}, "VALIDATE_RANGE", "rdma_mtu", "1280"),
    ({"rdma_mtu": 500}, "VALIDATE_RANGE", "rdma_mtu", "9216"),
    ({"firewall_extra_ports": [70000]}, "VALIDATE_RANGE", "firewall_extra_ports", "65535"),
    ({"firewall_extra_ports": ["9000-8000"]}, "VALIDATE_RANGE", "firewall_extra_ports", "65535"),
    ({"slurm_ctld_port": 0}, "VALIDATE_RANGE", "slurm_ctld_port", "65535"),
    ({"node_health_deadline_s": 60}, "VALIDATE_RANGE", "node_health_deadline_s", "1 to 55"),
    ({"node_health_expected_gpus": "four"}, "VALIDATE_TYPE", "node_health_expected_gpus", "integer"),
    ({"node_health_expected_gpus": -1}, "VALIDATE_RANGE", "node_health_expected_gpus", "at least 0"),
    ({"slurm_health_check_interval": -5}, "VALIDATE_RANGE", "slurm_health_check_interval", "at least 0"),
    ({"slurm_health_check_node_state": "NONDRAINED_IDLE"}, "VALIDATE_CHOICE", "slurm_health_check_node_state", "'IDLE'"),
    ({"ddp_health_probe_port": 99999}, "VALIDATE_RANGE", "ddp_health_probe_port", "65535"),
    ({"pytorch_env_wheelhouse_port": -1}, "VALIDATE_RANGE", "pytorch_env_wheelhouse_port", "0 to 65535"),
    ({"pytorch_env_wheelhouse_transport": "htp"}, "VALIDATE_CHOICE", "pytorch_env_wheelhouse_transport", "'http'"),
    ({"ddp_benchmark_timeout": -5}, "VALIDATE_RANGE", "ddp_benchmark_timeout", "greater than 0"),
    ({"ddp_health_join_timeout": 0}, "VALIDATE_RANGE", "ddp_health_join_timeout", "greater than 0"),
    ({"ddp_benchmark_variants": "rdma_off"}, "VALIDATE_TYPE", "ddp_benchmark_variants", "list"),
    ({"ddp_benchmark_steps": "ten"}, "VALIDATE_TYPE", "ddp_benchmark_steps", "integer"),
    ({"rdma_enabled": "maybe"}, "VALIDATE_TYPE", "rdma_enabled", "boolean"),
    ({"rdma_nccl_overrides": "NCCL_DEBUG=INFO"}, "VALIDATE_TYPE", "rdma_nccl_overrides", "mapping"),
    ({"ddp_torch_version": 2.1}, "VALIDATE_VERSION_NUMBER", "ddp_torch_version", "quote it"),
    ({"ddp_cuda_version": 12.1}, "VALIDATE_VERSION_NUMBER", "ddp_cuda_version", "quote it"),
    ({"nccl_version": 2}, "VALIDATE_VERSION_NUMBER", "nccl_version", "quote it"),
    ({"ddp_rdzv_addr": ["10.0.0.1"]}, "VALIDATE_BAD_ADDRESS", "ddp_rdzv_addr", "one"),
    ({"ddp_rdzv_addr": 10}, "VALIDATE_BAD_ADDRESS", "ddp_rdzv_addr", "quoted"),
    ({"ddp_rdzv_addr": "head node"}, "VALIDATE_BAD_ADDRESS", "ddp_rdzv_addr", "spaces"),
    ({"ddp_rdzv_addr": "127.0.0.1"}, "PREFLIGHT_LOOPBACK_RDZV", "ddp_rdzv_addr", "loopback"),
    ({"ddp_rdzv_port": 70000}, "PREFLIGHT_BAD_PORT", "ddp_rdzv_port", "65535"),
    ({"ddp_cluster_user": "root"}, "VALIDATE_ROOT_USER", "ddp_cluster_user", "unprivileged"),
    ({"ddp_cluster_user": "Bad User"}, "VALIDATE_BAD_USER", "ddp_cluster_user", "^[a-z_]"),
    ({"ddp_cluster_user": "a" * 33}, "VALIDATE_BAD_USER", "ddp_cluster_user", "32"),
    ({"ssh_trust_user": "root"}, "VALIDATE_ROOT_USER", "ssh_trust_user", "unprivileged"),
    ({"pytorch_env_kind": "conda"}, "VALIDATE_CONDA_NO_INSTALLER", "pytorch_env_miniforge_installer", "sha256"),
    ({"pytorch_env_kind": "conda", "pytorch_env_miniforge_installer": "https://example.invalid/m.sh"},
     "VALIDATE_CONDA_NO_CHECKSUM", "pytorch_env_miniforge_sha256", "sha256"),
    ({"rdma_nccl_overrides": {"NCCL_TIMEOUT": 5}}, "RDMA_NCCL_VAR_UNDOCUMENTED", "rdma_nccl_overrides.NCCL_TIMEOUT",
     "timeout"),
    ({"rdma_nccl_overrides": {"NCCL_IB_GID_IDX": 3}}, "RDMA_NCCL_VAR_UNDOCUMENTED",
     "rdma_nccl_overrides.NCCL_IB_GID_IDX", "NCCL"),
    ({"rdma_mode": "ofed", "rdma_ofed_url": "https://mirror.invalid/MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz"},
     "VALIDATE_DOWNLOAD_NO_CHECKSUM", "rdma_ofed_checksum", "sha256"),
    ({"rdma_ofed_checksum": "abc123"}, "VALIDATE_DOWNLOAD_NO_CHECKSUM", "rdma_ofed_checksum", "<algorithm>:<hex>"),
    ({"nccl_tests_enabled": True, "nccl_tests_source": "http://mirror.invalid/nccl-tests-2.13.11.tar.gz"},
     "VALIDATE_DOWNLOAD_NO_CHECKSUM", "nccl_tests_checksum", "sha256"),
    ({"nccl_tests_checksum": "md5:" + "a" * 32}, "VALIDATE_DOWNLOAD_NO_CHECKSUM", "nccl_tests_checksum", "sha512"),
    ({"rdma_mode": "ofed", "rdma_ofed_kind": "doca", "rdma_ofed_doca_repo_url": "https://mirror.invalid/doca/"},
     "VALIDATE_REPO_KEY", "rdma_ofed_doca_key_url", "gpgcheck"),
    ({"rdma_mode": "ofed", "rdma_ofed_kind": "doca", "rdma_ofed_doca_key_url": "https://mirror.invalid/k.pub"},
     "VALIDATE_REPO_KEY", "rdma_ofed_doca_key_fingerprint", "fingerprint"),
    ({"nvidia_repo_key_fingerprint": "3bf863cc"}, "VALIDATE_REPO_KEY", "nvidia_repo_key_fingerprint", "40"),
    ({"slurm_epel_gpg_key_fingerprint": "3228467c"}, "VALIDATE_REPO_KEY", "slurm_epel_gpg_key_fingerprint", "40"),
    ({"nvidia_repo_epel_gpg_key_fingerprint": "0x2F86D6A1"}, "VALIDATE_REPO_KEY",
     "nvidia_repo_epel_gpg_key_fingerprint", "40"),
    ({"pytorch_env_require_hashes": True}, "VALIDATE_REQUIRE_HASHES", "pytorch_env_require_hashes",
     "pytorch_env_wheelhouse"),
    ({"pytorch_env_require_hashes": "yes", "pytorch_env_wheelhouse": " "}, "VALIDATE_REQUIRE_HASHES",
     "pytorch_env_require_hashes", "lock file"),
    ({"ddp_benchmark_launcher": "slurm"}, "VALIDATE_LAUNCHER_NEEDS_SLURM", "ddp_benchmark_launcher", "ddp_scheduler"),
    ({"ddp_benchmark_compare_launchers": ["torchrun", "slurm"]}, "VALIDATE_LAUNCHER_NEEDS_SLURM", "ddp_benchmark_compare_launchers",
     "ddp_scheduler"),
    ({"pytorch_env_path": "/opt/other"}, "VALIDATE_ENV_PATH", "pytorch_env_path", "ddp_env_path"),
    ({"ddp_env_path": "/srv/env", "ddp_benchmark_env_path": "/opt/ddp/venv"}, "VALIDATE_ENV_PATH",
     "ddp_benchmark_env_path", "ddp_env_path"),
]


@pytest.mark.parametrize("name, fix", [
    # NCCL settings: the fix names the variable the rdma argument spec documents for them, not the nearest spelling
    # (ddp_nccl_env was sent to ddp_nccl_socket_ifname, rdma_nccl_env to rdma_torch_nccl_env).
    ("ddp_nccl_env", "NCCL settings go in rdma_nccl_overrides"),
    ("rdma_nccl_env", "NCCL settings go in rdma_nccl_overrides"),
    ("ddp_nccl_overrides", "NCCL settings go in rdma_nccl_overrides"),
    ("ddp_benchmark_nccl_env", "NCCL settings go in rdma_nccl_overrides"),
    # a misspelling of an NCCL variable (one or two letters) is still named back
    ("rdma_nccl_override", "did you mean rdma_nccl_overrides? Rename it."),
    ("rdma_nccl_debg", "did you mean rdma_nccl_debug? Rename it."),
])
def test_unknown_nccl_names_point_at_the_documented_variable(name, fix):
    problems = [p for p in run({name: "x"}) if p["code"] == "VALIDATE_UNKNOWN_VAR"]
    assert [p["variable"] for p in problems] == [name]
    assert problems[0]["fix"].startswith(fix), problems[0]["fix"]
    if fix.startswith("NCCL"):
        assert "rdma_nccl_overrides" in SPECS["rdma"]["main"]["options"]
        assert "rdma_torch_nccl_env" in problems[0]["fix"]


@pytest.mark.parametrize("values, code, variable, word", BAD, ids=[row[1] + ":" + row[2] for row in BAD])
def test_bad_value_is_refused(values, code, variable, word):
    problems = run(values)
    assert (code, variable) in found(problems), found(problems)
    p = [p for p in problems if p["code"] == code and p["variable"] == variable][0]
    assert word in p["message"] + " " + p["fix"]
    assert p["message"] and p["fix"]


GOOD = [
    {},
    {"ddp_torch_version": "2.1.0", "ddp_cuda_version": "12.1", "ddp_scheduler": "slurm",
     "ddp_benchmark_launcher": "slurm"},
    {"rdma_mtu": 0}, {"rdma_mtu": 9000}, {"rdma_mode": "ofed"}, {"rdma_enabled": "yes"},
    {"firewall_extra_ports": [8080, "9000-9100"]}, {"ddp_benchmark_steps": "10"},
    {"rdma_cma_roce_mode": ""}, {"rdma_cma_roce_tos": "106"}, {"rdma_qos_pfc": "0,0,0,1,0,0,0,0"},
    {"rdma_nccl_overrides": {"NCCL_DEBUG": "INFO", "NCCL_IB_GID_INDEX": None}},
    {"pytorch_env_kind": "conda", "pytorch_env_miniforge_installer": "files/Miniforge3.sh",
     "pytorch_env_miniforge_sha256": "a" * 64},
    {"ddp_env_path": "/srv/env", "pytorch_env_path": "/srv/env"},
    {"ddp_awx_anything": 1}, {"ddp_health_gpu": {"problems": []}},
    {"ddp_cluster_user": "train_01"}, {"ddp_rdzv_addr": "10.0.0.1"},
    {"rdma_mode": "ofed", "rdma_ofed_url": "https://mirror.invalid/MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz",
     "rdma_ofed_checksum": "sha256:" + "a" * 64},
    {"rdma_ofed_url": "https://mirror.invalid/MLNX_OFED.tgz"},
    {"rdma_mode": "ofed", "rdma_ofed_tarball": "files/MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz"},
    {"nccl_tests_enabled": True, "nccl_tests_source": "files/nccl-tests.tar.gz"},
    {"nccl_tests_enabled": True, "nccl_tests_source": "https://mirror.invalid/nccl-tests.tar.gz",
     "nccl_tests_checksum": "sha512:" + "b" * 128},
    {"rdma_mode": "ofed", "rdma_ofed_kind": "doca", "rdma_ofed_doca_key_url": "https://mirror.invalid/k.pub",
     "rdma_ofed_doca_key_fingerprint": "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC"},
    {"nvidia_repo_key_fingerprint": "610C7B14E068A878070DA4E99CD0A493D42D0685"},
    {"pytorch_env_require_hashes": True, "pytorch_env_wheelhouse": "/srv/wheelhouse"},
    {"pytorch_env_require_hashes": False},
    {"pytorch_env_wheelhouse_port": 0}, {"pytorch_env_wheelhouse_port": 8765, "pytorch_env_wheelhouse_transport": "copy"},
    {"slurm_epel_gpg_key_fingerprint": "FF8A D134 4597 106E CE81  3B91 8A38 72BF 3228 467C",
     "slurm_epel_gpg_key_url": "https://mirror.invalid/epel/RPM-GPG-KEY-EPEL-9",
     "nvidia_repo_epel_gpg_key_fingerprint": "94E279EB8D8F25B21810ADF121EA45AB2F86D6A1"},
]


@pytest.mark.parametrize("values", GOOD)
def test_good_values_pass(values):
    assert run(values) == []


def test_duplicate_ansible_host():
    problems = run(nodes={"node0": {"ansible_host": "10.0.0.1"}, "node1": {"ansible_host": "10.0.0.1"}})
    assert found(problems) == [("VALIDATE_DUPLICATE_HOST", "ansible_host")]
    assert "node0, node1" in problems[0]["message"]


@pytest.mark.parametrize("name", ["bad node", "node,1", "-node", "node]"])
def test_bad_inventory_hostname(name):
    problems = run(nodes={name: {}, "node0": {}})
    assert ("VALIDATE_BAD_HOSTNAME", "inventory_hostname") in found(problems)


def test_ansible_host_list_is_refused():
    problems = run(nodes={"node0": {"ansible_host": ["10.0.0.1"]}, "node1": {}})
    assert found(problems) == [("VALIDATE_BAD_ADDRESS", "ansible_host")]


def test_inventory_shape_comes_from_preflight():
    assert ("PREFLIGHT_NO_HEAD", "ddp_head_group") in found(run(heads=()))
    assert ("PREFLIGHT_NO_NODES", "ddp_nodes_group") in found(run(nodes={}, heads=()))


def test_every_code_is_listed():
    codes = set(p["code"] for row in BAD for p in run(row[0]) if p["code"].startswith("VALIDATE_"))
    codes.add("VALIDATE_DUPLICATE_HOST")
    codes.add("VALIDATE_BAD_HOSTNAME")
    assert codes == set(v.PROBLEM_CODES)


def test_known_options_cover_every_role():
    known = v.known_options(SPECS)
    for name in ("rdma_mode", "pytorch_env_kind", "ddp_benchmark_launcher", "slurm_ctld_port", "ddp_rdzv_addr"):
        assert name in known
