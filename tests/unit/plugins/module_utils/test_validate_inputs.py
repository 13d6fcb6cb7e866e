"""A wide sweep of plausible and bad inputs through the validate stage's rules (plugins/module_utils/cluster/validate.py).

test_validate.py asserts the code, variable and wording of one row per rule; this file checks breadth: each of the
bad inputs below (issue 40's classes, tried as a new user would) is refused with some VALIDATE_*/RDMA_*/PREFLIGHT_*
code, and none of the plausible good inputs is refused.
"""
from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import validate as v

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SPECS = dict((p.split(os.sep)[-3], yaml.safe_load(open(p))["argument_specs"])
             for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))


def run(values):
    return v.validate({"nodes": {"n0": dict(values), "n1": dict(values)}, "head_hosts": ["n0"], "role_specs": SPECS})


# Values a user would plausibly give (names, ports, paths, NCCL syntax, sizes): none may be refused.
PLAUSIBLE = [
    {"ddp_cluster_user": "alice"}, {"ddp_cluster_user": "train-01"}, {"ssh_trust_user": "mlops"}, {"slurm_check_user": "ddp"},
    {"ddp_cluster_uid": 5000}, {"ssh_trust_user_uid": 3000}, {"slurm_ctld_port": 7817, "slurm_d_port": 7818, "ddp_scheduler": "slurm"},
    {"slurm_srun_port_range": "60001-63000"}, {"firewall_extra_ports": ["8888/tcp", "5000-5100/udp"]}, {"ddp_rdzv_port": 29500},
    {"ddp_health_probe_port": 41000}, {"ddp_health_nccl_port": 29401}, {"slurm_cluster_name": "gpu-cluster_1"}, {"slurm_partition": "gpu"},
    {"slurm_gres_type": "h100"}, {"slurm_node_addr": "10.1.0.5"}, {"rdma_nccl_ib_hca": "mlx5_0:1,mlx5_1:1"}, {"rdma_nccl_ib_hca": "=mlx5_0"},
    {"rdma_nccl_ib_hca": "^mlx5_2"}, {"rdma_nccl_socket_ifname": "^lo,docker"}, {"rdma_nccl_socket_ifname": "=eth0"}, {"rdma_nccl_debug": "WARN"},
    {"rdma_nccl_overrides": {"NCCL_ALGO": "Ring", "NCCL_IB_TIMEOUT": 22}}, {"slurm_extra_config": {"SchedulerParameters": "bf_continue", "MaxJobCount": 20000}},
    {"slurm_extra_config": {"PrologFlags": "Alloc,Contain"}}, {"net_tuning_sysctls": {"net.core.rmem_max": 268435456}},
    {"ddp_benchmark_environment": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}},
    {"ddp_benchmark_output_dir": "/var/lib/ddp/bench2"}, {"ddp_benchmark_dir": "/opt/ddp/bench"}, {"ddp_env_path": "/opt/venvs/torch"},
    {"ddp_env_path": "/srv/ddp/venv"}, {"node_health_config_file": "/etc/ddp/health2.json"}, {"node_health_bin_dir": "/usr/local/bin"},
    {"node_health_python": "/usr/bin/python3.11"}, {"slurm_health_check_program": ""}, {"slurm_health_check_program": "/usr/sbin/nhc"},
    {"ssh_trust_user_shell": "/bin/zsh"}, {"rdma_nccl_conf_path": "/etc/nccl.conf"}, {"rdma_torch_profile_path": "/etc/profile.d/x.sh"},
    {"nccl_tests_prefix": "/opt/nccl-tests"}, {"pytorch_env_miniforge_dir": "/root/.ddp-miniforge"}, {"rdma_ofed_workdir": "/var/cache/ddp/ofed"},
    {"ddp_benchmark_base_lr": 0.05}, {"ddp_benchmark_base_lr": "0.1"}, {"ddp_benchmark_regression_threshold": 0.05}, {"ddp_health_min_busbw_gbps": 0},
    {"ddp_benchmark_batch_size": 256}, {"ddp_benchmark_image_size": 32}, {"ddp_benchmark_workers": 0}, {"ddp_benchmark_warmup_steps": 0},
    {"ddp_benchmark_max_restarts": 3}, {"ddp_benchmark_timeout": 3600}, {"slurm_mem_reserve_mb": 0}, {"slurm_mem_reserve_mb": 4096},
    {"rdma_ofed_timeout": 7200}, {"nvidia_driver_reboot_timeout": 3600}, {"ddp_health_pair_sizes": [1073741824, 4294967296]},
    {"ddp_health_burnin_seconds": 600}, {"node_health_slurm_prefix": "nhc:"}, {"node_health_min_driver": "550.54.15"},
    {"node_health_xid_since": "-2h"}, {"node_health_xid_since": "2024-01-01 00:00:00"}, {"node_health_expected_gpus": 8},
    {"ddp_benchmark_variants": []}, {"ddp_benchmark_variants": [{"name": "tf32", "options": {"precision": "tf32"}}]},
    {"ddp_benchmark_variants": [{"name": "ring", "environment": {"NCCL_ALGO": "Ring"}, "gpu_only": True, "scope": "all_nodes"}]},
    {"pytorch_env_index_url": "https://pypi.example.com/simple"}, {"pytorch_env_index_url": "http://10.0.0.1:8080/simple/"},
    {"pytorch_env_extra_index_urls": ["https://download.pytorch.org/whl/cu121"]}, {"pytorch_env_find_links": ["/opt/wheels", "https://x.example/wheels/"]},
    {"pytorch_env_extra_packages": ["numpy<2", "pandas==2.2.2", "torchmetrics>=1.0"]}, {"ddp_nvidia_repo_url": "https://mirror.example.com/cuda"},
    {"firewall_sources": ["10.0.0.0/16", "192.168.1.10", "fd00::/64"]}, {"firewall_zone": "ddp"}, {"firewall_zone": "hpc", "slurm_firewall_zone": "hpc"},
    {"ssh_trust_from_extra": ["10.8.0.0/24"]}, {"rdma_mtu": 4200}, {"rdma_cma_roce_tos": 106}, {"rdma_nccl_ib_gid_index": 3},
    {"rdma_nccl_ib_sl": 3}, {"ddp_benchmark_nproc_per_node": "auto"}, {"ddp_benchmark_nproc_per_node": 8}, {"slurm_nproc_per_node": "4"},
    {"ddp_nccl_ib_gid_index": 3}, {"slurm_uid": 64030, "slurm_munge_uid": 951}, {"ddp_scheduler": "none"},
    {"slurm_health_check_node_state": "ALLOC"}, {"slurm_return_to_service": 1}, {"pytorch_env_probe_user": "ddp"},
    {"slurm_munge_key": "a" * 32}, {"pytorch_env_wheelhouse": "/home/me/wheels"}, {"ddp_benchmark_results_dir": "/tmp/results"},
    {"rdma_ofed_tarball": "files/MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz"}, {"ddp_health_history_file": "artifacts/h.json"},
    {"ddp_benchmark_compare_to": "/home/me/artifacts/benchmark/20240101"}, {"ddp_benchmark_compile": "on"}, {"ddp_health_pairwise": "always"},
    {"ddp_benchmark_pin_memory": "off"}, {"ddp_benchmark_loader_probe": "off"}, {"pytorch_env_wheelhouse_bind": "10.0.0.1"},
    {"ddp_health_level": "burnin"}, {"ddp_rdzv_addr": "gpu01"}, {"ddp_fabric_address": "192.168.100.1"}, {"net_tuning_unsettable": "auto"},
]

# One or more bad values of each class of issue 40, as a new user would try them: every one is refused.
BAD_INPUTS = [
    {"ddp_cluster_user": "bin"}, {"ssh_trust_user": "ROOT"}, {"slurm_check_user": ""}, {"ddp_benchmark_user": "www-data"},
    {"ddp_cluster_user": "sshd"}, {"ddp_cluster_user": "_apt"}, {"ddp_cluster_user": "games"}, {"ddp_cluster_user": 0},
    {"slurm_ctld_port": 6817, "slurm_d_port": 6817}, {"slurm_d_port": 99999}, {"slurm_srun_port_range": "62000"},
    {"slurm_srun_port_range": "62000:63999"}, {"slurm_srun_port_range": "60000-70000"}, {"firewall_extra_ports": [29500]},
    {"firewall_extra_ports": ["29500/tcp", "29500-29400/tcp"]}, {"ddp_health_probe_port": 6818, "ddp_scheduler": "slurm"},
    {"ddp_rdzv_port": 40000}, {"ddp_health_nccl_port": 70000}, {"firewall_rdzv_port": "abc"}, {"slurm_srun_port_range": ["62000-63999"]},
    {"slurm_cluster_name": "ddp cluster"}, {"slurm_cluster_name": "ddp\nx"}, {"slurm_partition": "a=b"}, {"slurm_gres_type": "a 100"},
    {"slurm_node_addr": "10.0.0.1 x"}, {"rdma_nccl_ib_hca": "mlx5_0:1 mlx5_1:1"}, {"rdma_nccl_debug": "INFO WARN"},
    {"rdma_nccl_overrides": {"NCCL_ALGO": "Ring\nTree"}}, {"slurm_extra_config": {"MaxJobCount": "10\n20"}},
    {"net_tuning_sysctls": {"net.core.rmem_max": "1\n2"}}, {"rdma_arp_sysctls": {"bad key": 1}},
    {"ddp_benchmark_environment": {"A": "b\nc"}}, {"rdma_torch_nccl_env": {"BLOCKING_WAIT": "1\n"}},
    {"ddp_benchmark_dir": "opt/ddp/bench"}, {"ddp_benchmark_dir": "/opt/ddp/../bench"}, {"ddp_benchmark_dir": "/tmp/bench"},
    {"node_health_lib_dir": "/var/tmp/x"}, {"pytorch_env_node_wheelhouse": "/dev/shm/w"}, {"rdma_ofed_workdir": "/tmp/ofed"},
    {"net_tuning_sysctl_file": "/etc/passwd"}, {"rdma_arp_sysctl_file": "/etc/shadow"}, {"node_health_bin_dir": "/usr/bin"},
    {"pytorch_env_conda_prefix": "/usr"}, {"ddp_env_path": "/"}, {"nccl_tests_prefix": "/etc"}, {"slurm_bin_dir": "~/bin"},
    {"ssh_trust_user_shell": "bash"}, {"ssh_trust_user_shell": "/tmp/sh"}, {"node_health_python": "python3"},
    {"ddp_benchmark_base_lr": float("nan")}, {"ddp_benchmark_regression_threshold": float("inf")}, {"ddp_health_min_busbw_gbps": "nan"},
    {"preflight_connect_timeout": float("inf")}, {"ddp_benchmark_steps": -5}, {"ddp_benchmark_workers": -1}, {"rdma_ofed_timeout": -1},
    {"slurm_slurmd_timeout": -1}, {"ddp_health_burnin_seconds": -1}, {"ddp_health_pair_sizes": [-1]}, {"ddp_benchmark_batch_size": 2**40},
    {"slurm_mem_reserve_mb": 2**40}, {"ddp_health_tcp_measure_mib": 10**9}, {"ddp_benchmark_max_restarts": 10**9},
    {"node_health_deadline_s": 0}, {"node_health_slurm_prefix": "ddp:x"}, {"node_health_min_driver": "abc"},
    {"node_health_no_gpu_severity": "fatal"}, {"ddp_benchmark_variants": [{"name": "rdma_off"}, {"name": "rdma_off"}]},
    {"ddp_benchmark_variants": [{"name": "x", "bogus": 1}]}, {"ddp_benchmark_variants": [{"name": "x", "options": {"nope": 1}}]},
    {"ddp_benchmark_variants": [{"name": "x", "options": {"batch_size": 0}}]}, {"ddp_benchmark_variants": [{"name": "x", "environment": {"A B": 1}}]},
    {"ddp_benchmark_variants": [{"name": "one_node"}]}, {"ddp_benchmark_variants": [{"name": "x", "gpu_only": "maybe"}]},
    {"pytorch_env_index_url": "example.com/simple"}, {"pytorch_env_index_url": "ftp://example.com/simple"},
    {"pytorch_env_extra_index_urls": ["example.com"]}, {"ddp_nvidia_repo_url": "developer.download.nvidia.com/compute"},
    {"nvidia_repo_key_url": "www.example.com/key.pub"}, {"rdma_ofed_doca_repo_url": "mirror/doca"}, {"slurm_epel_gpg_key_url": "dl.fedoraproject.org/x"},
    {"pytorch_env_find_links": ["wheels/"]}, {"firewall_sources": ["0.0.0.0/0"]}, {"firewall_sources": ["any"]},
    {"firewall_sources": ["10.0.0.0/0"]}, {"firewall_zone": "public"}, {"firewall_zone": "internal"}, {"slurm_firewall_zone": "trusted"},
    {"firewall_zone": "dmz"}, {"firewall_zone": "bad zone"}, {"pytorch_env_extra_packages": "numpy"}, {"pytorch_env_extra_packages": 3},
    {"rdma_extra_packages": "perftest"}, {"firewall_sources": "10.0.0.0/24"}, {"ddp_benchmark_scopes": "all_nodes"},
    {"ddp_benchmark_compare_launchers": "torchrun"}, {"ddp_health_pair_sizes": "1,2"}, {"slurm_partition": ["ddp"]},
    {"ddp_benchmark_compare_to": ["x"]}, {"rdma_nccl_ib_hca": ["mlx5_0"]}, {"slurm_munge_key": "x" * 31},
    {"slurm_uid": 950}, {"slurm_munge_gid": "x"}, {"slurm_extra_config": {"NodeName": "x"}}, {"slurm_controller": "nope"},
    {"rdma_mode": "ofed", "rdma_ofed_tarball": "a.tgz", "rdma_ofed_url": "https://x/y.tgz"}, {"rdma_mode": "ofed", "rdma_ofed_kind": "doca"},
    {"rdma_qos_pfc": "1,1"}, {"rdma_mtu": 100}, {"rdma_nccl_ib_gid_index": "-1"}, {"ddp_scheduler": True},
    {"ddp_benchmark_compile": True}, {"ddp_health_pairwise": True}, {"ddp_benchmark_launcher": "horovod", "ddp_benchmark_compare_launchers": ["horovod"]},
    {"ssh_trust_from_extra": ["*"]}, {"ssh_trust_from_extra": "10.0.0.0/24"}, {"pytorch_env_probe_user": "root"},
    {"pytorch_env_wheelhouse_port": 70000}, {"pytorch_env_wheelhouse_bind": "0.0.0.0 1"}, {"nccl_tests_source": "github.com/NVIDIA/x.tar.gz"},
    {"ddp_health_history_file": 5}, {"slurm_health_check_program": "/tmp/hc"}, {"slurm_health_check_program": "hc"},
    {"slurm_health_check_interval": "5m"}, {"ddp_cluster_uid": 0}, {"ddp_benchmark_image_size": 0}, {"ddp_benchmark_seed": -1},
    {"rdma_ofed_checksum": "sha256:xyz"}, {"ddp_benchmark_environment": "NCCL_DEBUG=INFO"}, {"ddp_benchmark_environment": {"X": {"a": 1}}},
]


@pytest.mark.parametrize("values", PLAUSIBLE, ids=lambda x: repr(x)[:60])
def test_plausible_input_passes(values):
    assert run(values) == []


@pytest.mark.parametrize("values", BAD_INPUTS, ids=lambda x: repr(x)[:60])
def test_bad_input_is_refused(values):
    problems = run(values)
    assert problems, values
    assert all(p["message"] and p["fix"] for p in problems)
