"""Table-driven tests for plugins/module_utils/cluster/validate.py (the validate stage's pure rules)."""
from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import validate as v

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
    ({"ddp_benchmark_launcher": "slurm"}, "VALIDATE_LAUNCHER_NEEDS_SLURM", "ddp_benchmark_launcher", "ddp_scheduler"),
    ({"ddp_benchmark_compare_launchers": ["torchrun", "slurm"]}, "VALIDATE_LAUNCHER_NEEDS_SLURM", "ddp_benchmark_compare_launchers",
     "ddp_scheduler"),
    ({"ddp_shared_dir": "shared/ddp"}, "VALIDATE_SHARED_DIR", "ddp_shared_dir", "absolute"),
    ({"ddp_shared_dir": "/shared/../etc"}, "VALIDATE_SHARED_DIR", "ddp_shared_dir", ".."),
    ({"ddp_shared_dir": "/tmp/ckpt"}, "VALIDATE_SHARED_DIR", "ddp_shared_dir", "node-local"),
    ({"slurm_shared_dir": "/dev/shm"}, "VALIDATE_SHARED_DIR", "slurm_shared_dir", "every user can write"),
    ({"ddp_shared_dir": ["/shared"]}, "VALIDATE_TYPE", "ddp_shared_dir", "string"),
    ({"slurm_job_elastic": "3:2"}, "VALIDATE_ELASTIC_NODES", "slurm_job_elastic", "at most MAX"),
    ({"slurm_job_elastic": "0:2"}, "VALIDATE_ELASTIC_NODES", "slurm_job_elastic", "at least 1"),
    ({"slurm_job_elastic": "2-4"}, "VALIDATE_ELASTIC_NODES", "slurm_job_elastic", "MIN:MAX"),
    ({"ddp_hang_timeout": 0}, "VALIDATE_RANGE", "ddp_hang_timeout", "greater than 0"),
    ({"ddp_hang_timeout": "ten"}, "VALIDATE_TYPE", "ddp_hang_timeout", "integer"),
    ({"slurm_job_hang_timeout": 5}, "VALIDATE_RANGE", "slurm_job_hang_timeout", "10 to 86400"),
    ({"slurm_job_max_requeue": -1}, "VALIDATE_RANGE", "slurm_job_max_requeue", "0 to 100"),
    ({"slurm_cred_expire": 5}, "VALIDATE_RANGE", "slurm_cred_expire", "10 to 86400"),
    ({"slurm_job_max_restarts": "many"}, "VALIDATE_TYPE", "slurm_job_max_restarts", "integer"),
    ({"pytorch_env_path": "/opt/other"}, "VALIDATE_ENV_PATH", "pytorch_env_path", "ddp_env_path"),
    ({"ddp_env_path": "/srv/env", "ddp_benchmark_env_path": "/opt/ddp/venv"}, "VALIDATE_ENV_PATH",
     "ddp_benchmark_env_path", "ddp_env_path"),
    # day 2: shrink.yml's refusals (the head, the last node, a node not in the inventory), the drain bound, the batch
    ({"ddp_shrink_nodes": ["node0"]}, "VALIDATE_SHRINK", "ddp_shrink_nodes", "head"),
    ({"ddp_shrink_nodes": ["node9"]}, "VALIDATE_SHRINK", "ddp_shrink_nodes", "node9: not a node"),
    ({"ddp_shrink_nodes": "node1"}, "VALIDATE_TYPE", "ddp_shrink_nodes", "list"),
    ({"ddp_drain_timeout": 0}, "VALIDATE_RANGE", "ddp_drain_timeout", "at least 1"),
    ({"ddp_rolling_batch": 0}, "VALIDATE_RANGE", "ddp_rolling_batch", "at least 1"),
    ({"ddp_rolling_batch": "25%"}, "VALIDATE_TYPE", "ddp_rolling_batch", "integer"),
    # issue 40's classes: every *_user option
    ({"ddp_benchmark_user": "root"}, "VALIDATE_ROOT_USER", "ddp_benchmark_user", "unprivileged"),
    ({"slurm_check_user": "root"}, "VALIDATE_ROOT_USER", "slurm_check_user", "unprivileged"),
    ({"ddp_cluster_user": "daemon"}, "VALIDATE_SYSTEM_USER", "ddp_cluster_user", "system account"),
    ({"ssh_trust_user": "nobody"}, "VALIDATE_SYSTEM_USER", "ssh_trust_user", "login"),
    ({"slurm_check_user": "slurm"}, "VALIDATE_SYSTEM_USER", "slurm_check_user", "login"),
    ({"ddp_benchmark_user": "systemd-network"}, "VALIDATE_SYSTEM_USER", "ddp_benchmark_user", "login"),
    # ports
    ({"slurm_ctld_port": 6818, "ddp_scheduler": "slurm"}, "VALIDATE_PORT_CONFLICT", "slurm_d_port", "6818"),
    ({"ddp_rdzv_port": 6817, "ddp_scheduler": "slurm"}, "VALIDATE_PORT_CONFLICT", "slurm_ctld_port", "6817"),
    ({"ddp_health_probe_port": 29400}, "VALIDATE_PORT_CONFLICT", "ddp_health_probe_port", "29400"),
    ({"ddp_rdzv_port": 62500, "ddp_scheduler": "slurm"}, "VALIDATE_PORT_CONFLICT", "ddp_rdzv_port", "srun"),
    ({"slurm_srun_port_range": "62000-70000"}, "VALIDATE_RANGE", "slurm_srun_port_range", "65535"),
    ({"slurm_srun_port_range": 62000}, "VALIDATE_PORT_FORM", "slurm_srun_port_range", "LOW-HIGH"),
    ({"slurm_srun_port_range": "63999-62000"}, "VALIDATE_RANGE", "slurm_srun_port_range", "low end"),
    ({"firewall_extra_ports": ["29500"]}, "VALIDATE_PORT_FORM", "firewall_extra_ports", "29500/tcp"),
    ({"firewall_extra_ports": ["http"]}, "VALIDATE_PORT_FORM", "firewall_extra_ports", "PORT/PROTOCOL"),
    # config tokens
    ({"slurm_partition": "ddp gpu"}, "VALIDATE_CONFIG_TOKEN", "slurm_partition", "one word"),
    ({"slurm_cluster_name": "ddp\nSlurmUser=root"}, "VALIDATE_TYPE", "slurm_cluster_name", "line break"),
    ({"slurm_gres_type": "a100=x"}, "VALIDATE_CONFIG_TOKEN", "slurm_gres_type", "one word"),
    ({"rdma_nccl_socket_ifname": "eth0 eth1"}, "VALIDATE_CONFIG_TOKEN", "rdma_nccl_socket_ifname", "one word"),
    ({"slurm_extra_config": {"Sched Params": "x"}}, "VALIDATE_CONFIG_TOKEN", "slurm_extra_config.Sched Params", "key"),
    ({"slurm_extra_config": {"SchedulerParameters": "a\nSlurmUser=root"}}, "VALIDATE_CONFIG_TOKEN",
     "slurm_extra_config.SchedulerParameters", "line break"),
    ({"ddp_benchmark_environment": {"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"}}, "VALIDATE_CONFIG_TOKEN",
     "ddp_benchmark_environment.NCCL_DEBUG", "line break"),
    ({"ddp_benchmark_environment": {"NCCL DEBUG": "INFO"}}, "VALIDATE_CONFIG_TOKEN",
     "ddp_benchmark_environment.NCCL DEBUG", "environment variable"),
    ({"rdma_torch_nccl_env": {"BLOCKING_WAIT": "1\n"}}, "RDMA_TORCH_VAR_INVALID", "rdma_torch_nccl_env.BLOCKING_WAIT",
     "exported"),
    ({"rdma_nccl_debug": "INFO\nNCCL_X=1"}, "VALIDATE_TYPE", "rdma_nccl_debug", "line break"),
    ({"slurm_extra_config": {"SlurmctldPort": 1}}, "VALIDATE_SLURM", "slurm_extra_config.SlurmctldPort", "writes"),
    ({"slurm_extra_config": {"DisableRootJobs": "NO"}}, "VALIDATE_SLURM", "slurm_extra_config.DisableRootJobs",
     "writes"),
    # paths
    ({"ddp_benchmark_output_dir": "var/lib/ddp"}, "VALIDATE_PATH", "ddp_benchmark_output_dir", "absolute"),
    ({"ddp_benchmark_output_dir": "/var/tmp/ddp-bench"}, "VALIDATE_PATH", "ddp_benchmark_output_dir", "/var/tmp"),
    ({"node_health_lib_dir": "/opt/ddp/../../etc"}, "VALIDATE_PATH", "node_health_lib_dir", ".."),
    ({"pytorch_env_path": "/tmp/venv", "ddp_env_path": "/tmp/venv"}, "VALIDATE_PATH", "ddp_env_path", "/tmp"),
    ({"node_health_config_file": "/etc/passwd"}, "VALIDATE_PATH", "node_health_config_file", "overwrite"),
    ({"rdma_nccl_conf_path": "/etc/shadow"}, "VALIDATE_PATH", "rdma_nccl_conf_path", "overwrite"),
    ({"ddp_env_path": "/usr"}, "VALIDATE_PATH", "ddp_env_path", "overwrite"),
    ({"node_health_python": "/home/ddp/venv/bin/python"}, "VALIDATE_PATH", "node_health_python", "/home"),
    ({"slurm_health_check_program": "ddp-health-slurm"}, "VALIDATE_PATH", "slurm_health_check_program", "absolute"),
    ({"slurm_bin_dir": "/dev/shm/bin"}, "VALIDATE_PATH", "slurm_bin_dir", "/dev/shm"),
    # numbers
    ({"ddp_benchmark_base_lr": float("nan")}, "VALIDATE_NOT_FINITE", "ddp_benchmark_base_lr", "finite"),
    ({"ddp_health_min_busbw_gbps": "inf"}, "VALIDATE_NOT_FINITE", "ddp_health_min_busbw_gbps", "finite"),
    ({"ddp_benchmark_regression_threshold": float("-inf")}, "VALIDATE_NOT_FINITE",
     "ddp_benchmark_regression_threshold", "finite"),
    ({"ddp_benchmark_warmup_steps": -1}, "VALIDATE_RANGE", "ddp_benchmark_warmup_steps", "at least 0"),
    ({"slurm_mem_reserve_mb": -1024}, "VALIDATE_RANGE", "slurm_mem_reserve_mb", "at least 0"),
    ({"ddp_benchmark_batch_size": 0}, "VALIDATE_RANGE", "ddp_benchmark_batch_size", "at least 1"),
    ({"slurm_mem_reserve_mb": 10 ** 12}, "VALIDATE_RANGE", "slurm_mem_reserve_mb", "no machine"),
    ({"ddp_benchmark_image_size": 10 ** 9}, "VALIDATE_RANGE", "ddp_benchmark_image_size", "no machine"),
    ({"ddp_benchmark_workers": 100000}, "VALIDATE_RANGE", "ddp_benchmark_workers", "no machine"),
    ({"ddp_benchmark_regression_threshold": 1.5}, "VALIDATE_RANGE", "ddp_benchmark_regression_threshold", "maximum"),
    ({"slurm_uid": 0}, "VALIDATE_RANGE", "slurm_uid", "from 1"),
    # strings the node-side code rejects
    ({"node_health_slurm_prefix": "ddp:"}, "VALIDATE_HEALTH_CONFIG", "node_health_slurm_prefix", "ddp:"),
    ({"node_health_slurm_prefix": " "}, "VALIDATE_HEALTH_CONFIG", "node_health_slurm_prefix", "non-empty"),
    ({"node_health_min_driver": "latest"}, "VALIDATE_HEALTH_CONFIG", "node_health_min_driver", "dotted"),
    ({"ddp_benchmark_variants": [{"name": "bad name"}]}, "VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_variants",
     "1-40"),
    ({"ddp_benchmark_variants": [{"name": "x", "options": {"precision": "fp64"}}]}, "VALIDATE_CHOICE",
     "ddp_benchmark_variants[0].options.precision", "fp32"),
    ({"ddp_benchmark_variants": [{"name": "x", "options": {"batch_size": -8}}]}, "VALIDATE_RANGE",
     "ddp_benchmark_variants[0].options.batch_size", "at least 1"),
    ({"ddp_benchmark_variants": [{"name": "x", "options": {"steps": 5}, "scope": "two_nodes"}]},
     "VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_variants", "scope"),
    ({"ddp_benchmark_scopes": []}, "VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_scopes", "at least one"),
    ({"ddp_benchmark_launcher": "horovod", "ddp_benchmark_compare_launchers": ["horovod"]},
     "VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_compare_launchers", "twice"),
    ({"slurm_controller": "node9"}, "VALIDATE_SLURM", "slurm_controller", "node0"),
    ({"slurm_munge_uid": 64030}, "VALIDATE_SLURM", "slurm_munge_uid", "ids of their own"),
    ({"slurm_munge_key": "short-secret-key"}, "VALIDATE_MUNGE_KEY", "slurm_munge_key", "openssl rand"),
    ({"rdma_mode": "ofed"}, "VALIDATE_OFED_SOURCE", "rdma_ofed_tarball", "exactly one"),
    ({"rdma_mode": "ofed", "rdma_ofed_tarball": "files/ofed.tgz"}, "VALIDATE_OFED_SOURCE", "rdma_ofed_version",
     "ofed_info"),
    ({"rdma_nccl_ib_gid_index": "3", "rdma_nccl_overrides": {"NCCL_IB_GID_IDX": 3}}, "RDMA_NCCL_VAR_UNDOCUMENTED",
     "rdma_nccl_overrides.NCCL_IB_GID_IDX", "NCCL"),
    ({"node_health_slurm_prefix": ""}, "VALIDATE_HEALTH_CONFIG", "node_health_slurm_prefix", "non-empty"),
    ({"ddp_benchmark_output_dir": ""}, "VALIDATE_PATH", "ddp_benchmark_output_dir", "empty"),
    ({"rdma_torch_profile_path": "/usr/bin/ddp-x"}, "VALIDATE_PATH", "rdma_torch_profile_path", "overwrite"),
    ({"ssh_trust_user_uid": 0}, "VALIDATE_RANGE", "ssh_trust_user_uid", "from 1"),
    ({"ssh_trust_user_uid": 2 ** 40}, "VALIDATE_RANGE", "ssh_trust_user_uid", "2147483646"),
    ({"rdma_nccl_ib_gid_index": "three"}, "VALIDATE_RANGE", "rdma_nccl_ib_gid_index", "0-255"),
    ({"rdma_nccl_ib_sl": "16"}, "VALIDATE_RANGE", "rdma_nccl_ib_sl", "0-15"),
    ({"rdma_cma_roce_tos": "300"}, "VALIDATE_CHOICE", "rdma_cma_roce_tos", "0-255"),
    ({"ddp_benchmark_nproc_per_node": 0}, "VALIDATE_RANGE", "ddp_benchmark_nproc_per_node", "auto"),
    ({"slurm_nproc_per_node": "many"}, "VALIDATE_RANGE", "slurm_nproc_per_node", "auto"),
    ({"firewall_zone": "FedoraServer"}, "VALIDATE_FIREWALL_ZONE", "firewall_zone", "firewalld's own"),
    # URLs
    ({"pytorch_env_index_url": "pypi.example.com/simple"}, "VALIDATE_URL", "pytorch_env_index_url", "https://"),
    ({"pytorch_env_extra_index_urls": ["download.pytorch.org/whl/cu121"]}, "VALIDATE_URL",
     "pytorch_env_extra_index_urls[0]", "http"),
    ({"pytorch_env_find_links": ["wheels"]}, "VALIDATE_URL", "pytorch_env_find_links[0]", "absolute"),
    ({"rdma_ofed_url": "mirror.example.com/MLNX_OFED.tgz"}, "VALIDATE_URL", "rdma_ofed_url", "scheme"),
    ({"pytorch_env_miniforge_installer": "github.com/conda-forge/miniforge/releases/download/x/M.sh"},
     "VALIDATE_URL", "pytorch_env_miniforge_installer", "scheme"),
    ({"pytorch_env_extra_packages": ["--index-url=http://evil.invalid/simple"]}, "VALIDATE_TYPE",
     "pytorch_env_extra_packages[0]", "pip option"),
    # firewall
    ({"firewall_sources": ["0.0.0.0/0"]}, "VALIDATE_FIREWALL_SOURCE", "firewall_sources[0]", "every address"),
    ({"firewall_sources": ["::/0"]}, "VALIDATE_FIREWALL_SOURCE", "firewall_sources[0]", "every address"),
    ({"firewall_sources": ["10.0.0.0/33"]}, "VALIDATE_FIREWALL_SOURCE", "firewall_sources[0]", "CIDR"),
    ({"ssh_trust_from_extra": ["0.0.0.0/0"]}, "VALIDATE_FIREWALL_SOURCE", "ssh_trust_from_extra[0]", "every address"),
    ({"ssh_trust_from_extra": ["*"]}, "VALIDATE_FIREWALL_SOURCE", "ssh_trust_from_extra[0]", "CIDR"),
    ({"firewall_zone": "public", "slurm_firewall_zone": "public"}, "VALIDATE_FIREWALL_ZONE", "firewall_zone",
     "firewalld's own"),
    ({"firewall_zone": "trusted"}, "VALIDATE_FIREWALL_ZONE", "firewall_zone", "firewalld's own"),
    ({"firewall_zone": "ddp-cluster-with-a-long-name"}, "VALIDATE_FIREWALL_ZONE", "firewall_zone", "17"),
    ({"slurm_firewall_zone": "ddp-slurm"}, "VALIDATE_FIREWALL_ZONE", "slurm_firewall_zone", "same zone"),
    # types
    ({"firewall_extra_ports": "29500/tcp"}, "VALIDATE_TYPE", "firewall_extra_ports", "list"),
    ({"pytorch_env_extra_packages": 5}, "VALIDATE_TYPE", "pytorch_env_extra_packages", "list"),
    ({"ddp_benchmark_compile": True}, "VALIDATE_TYPE", "ddp_benchmark_compile", "quote"),
    ({"ddp_benchmark_output_dir": 5}, "VALIDATE_TYPE", "ddp_benchmark_output_dir", "string"),
    ({"pytorch_env_index_url": 8080}, "VALIDATE_TYPE", "pytorch_env_index_url", "string"),
    ({"ddp_benchmark_batch_size": 1.5}, "VALIDATE_TYPE", "ddp_benchmark_batch_size", "integer"),
    # Accounting and metrics: values that go into slurmdbd.conf, SQL names, sacctmgr and Prometheus's configuration.
    ({"slurm_accounting_db_name": "acct-db"}, "VALIDATE_CHOICE", "slurm_accounting_db_name", "letters, digits and _"),
    ({"slurm_accounting_db_user": "slurm'@'%"}, "VALIDATE_CHOICE", "slurm_accounting_db_user", "MariaDB user"),
    ({"slurm_accounting_account": "Research Group"}, "VALIDATE_CHOICE", "slurm_accounting_account", "Slurm account"),
    ({"slurm_accounting_db_password": "short"}, "VALIDATE_CHOICE", "slurm_accounting_db_password", "12-128"),
    ({"slurm_accounting_db_password": "a-long-pass#word-here"}, "VALIDATE_CHOICE", "slurm_accounting_db_password",
     "'#'"),
    ({"slurm_accounting_db_password": 123456789012345}, "VALIDATE_CHOICE", "slurm_accounting_db_password", "printable"),
    ({"slurm_accounting_port": 70000}, "VALIDATE_RANGE", "slurm_accounting_port", "65535"),
    ({"slurm_accounting": "maybe"}, "VALIDATE_TYPE", "slurm_accounting", "boolean"),
    ({"slurm_accounting_timeout": 0}, "VALIDATE_RANGE", "slurm_accounting_timeout", "greater than 0"),
    ({"metrics_enabled": "perhaps"}, "VALIDATE_TYPE", "metrics_enabled", "boolean"),
    ({"metrics_prometheus_listen_address": "0.0.0.0"}, "VALIDATE_CHOICE", "metrics_prometheus_listen_address",
     "host:port"),
    ({"metrics_retention": "15 days"}, "VALIDATE_CHOICE", "metrics_retention", "Prometheus duration"),
    ({"metrics_exporter_down_for": 60}, "VALIDATE_CHOICE", "metrics_exporter_down_for", "Prometheus duration"),
    ({"metrics_scrape_interval_s": 0}, "VALIDATE_RANGE", "metrics_scrape_interval_s", "minimum"),
    ({"metrics_node_exporter_port": 0}, "VALIDATE_RANGE", "metrics_node_exporter_port", "65535"),
    ({"metrics_textfile_dir": "var/lib/node-exporter"}, "VALIDATE_CHOICE", "metrics_textfile_dir", "absolute"),
    ({"ddp_metrics_textfile_dir": "/var/lib/my dir"}, "VALIDATE_CHOICE", "ddp_metrics_textfile_dir", "absolute"),
    ({"node_health_metrics_dir": "relative"}, "VALIDATE_CHOICE", "node_health_metrics_dir", "absolute"),
    ({"metrics_dcgm_exporter_version": "latest"}, "VALIDATE_CHOICE", "metrics_dcgm_exporter_version", "4.8.2-1"),
    ({"metrics_dcgm_exportr": True}, "VALIDATE_UNKNOWN_VAR", "metrics_dcgm_exportr", "metrics_dcgm_exporter"),
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
    {"rdma_mtu": 0}, {"rdma_mtu": 9000}, {"rdma_enabled": "yes"},
    {"rdma_mode": "ofed", "rdma_ofed_tarball": "files/MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz"},
    {"firewall_extra_ports": ["8080/tcp", "9000-9100/udp"]}, {"ddp_benchmark_steps": "10"},
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
     "rdma_ofed_doca_repo_url": "https://mirror.invalid/doca/",
     "rdma_ofed_doca_key_fingerprint": "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC"},
    {"nvidia_repo_key_fingerprint": "610C7B14E068A878070DA4E99CD0A493D42D0685"},
    {"pytorch_env_require_hashes": True, "pytorch_env_wheelhouse": "/srv/wheelhouse"},
    {"pytorch_env_require_hashes": False}, {"pytorch_env_require_hashes": True},
    {"pytorch_env_require_hashes": False},
    # The documented examples of the training settings (README, roles/slurm/defaults/main.yml, inventories).
    {"ddp_shared_dir": "/srv/ddp-shared"}, {"ddp_shared_dir": "/shared/ddp"}, {"ddp_shared_dir": ""},
    {"slurm_shared_dir": "/lustre/ddp"}, {"ddp_hang_timeout": 600}, {"ddp_hang_timeout": "60"},
    {"slurm_job_elastic": ""}, {"slurm_job_elastic": "2:4"}, {"slurm_job_elastic": "3:3"},
    {"slurm_job_hang_timeout": 120, "slurm_job_max_requeue": 0, "slurm_job_max_restarts": 3},
    {"slurm_cred_expire": 120}, {"slurm_cred_expire": 30},
    {"pytorch_env_wheelhouse_port": 0}, {"pytorch_env_wheelhouse_port": 8765, "pytorch_env_wheelhouse_transport": "copy"},
    # the README's Day 2 examples
    {"ddp_shrink_nodes": ["node1"], "ddp_drain_timeout": 600}, {"ddp_rolling_batch": 1, "ddp_torch_version": "2.13.0"},
    {"ddp_rolling_batch": "2", "ddp_drain_timeout": "3600"},
    # The documented examples of the accounting and metrics variables (roles' argument specs, README).
    {"slurm_accounting": False}, {"slurm_accounting_db_password": "0f3c9a" * 8, "slurm_accounting_port": 6819},
    {"slurm_accounting_db_name": "slurm_acct_db", "slurm_accounting_db_user": "slurm", "slurm_accounting_account": "ddp",
     "slurm_accounting_timeout": 60, "slurm_accounting_db_password_file": "/root/.ansible/ddp.cluster/ddp-h-slurmdbd.password"},
    {"metrics_enabled": False}, {"metrics_prometheus_listen_address": "127.0.0.1:9090"},
    {"metrics_prometheus_listen_address": ":9090"}, {"metrics_retention": "15d", "metrics_exporter_down_for": "1m"},
    {"metrics_dcgm_exporter_version": "4.8.2-1", "metrics_dcgm_exporter_port": 9400, "metrics_node_exporter_port": 9100},
    {"ddp_metrics_textfile_dir": "/var/lib/prometheus/node-exporter", "node_health_metrics_dir": "",
     "ddp_benchmark_metrics_dir": "", "metrics_scrape_interval_s": 15, "metrics_health_stale_s": 900},
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


def test_the_last_node_cannot_be_removed():
    problems = run({"ddp_shrink_nodes": ["node1"]}, nodes={"node0": {}, "node1": {}}, heads=("node9",))
    assert [p["message"] for p in problems if p["code"] == "VALIDATE_SHRINK"] == []
    problems = run({"ddp_shrink_nodes": ["node1", "node2"]}, nodes={"node1": {}, "node2": {}}, heads=())
    assert any("the last node cannot be removed" in p["message"] for p in problems), problems


def test_a_secret_is_never_printed():
    """A no_log option (the munge key, the database password) is refused without its value in the message."""
    for values in ({"slurm_accounting_db_password": "sec ret value with spaces"}, {"slurm_munge_key": "tooShortKey1"},
                   {"slurm_munge_key": ["tooShortKey1"]}):
        problems = run(values)
        secret = str(list(values.values())[0][0] if isinstance(list(values.values())[0], list) else list(values.values())[0])
        assert problems and all(secret not in p["message"] + p["fix"] for p in problems), problems


def test_every_code_is_listed():
    codes = set(p["code"] for row in BAD for p in run(row[0]) if p["code"].startswith("VALIDATE_"))
    codes.add("VALIDATE_DUPLICATE_HOST")
    codes.add("VALIDATE_BAD_HOSTNAME")
    codes.add("VALIDATE_TEMPLATE")
    codes.add("VALIDATE_FACT_VARIABLE")
    codes.add("VALIDATE_NOT_CLUSTER_WIDE")
    assert codes == set(v.PROBLEM_CODES)


@pytest.mark.parametrize("nodes, shown", [
    # set on one node, the others on the argument spec's default
    ({"node0": {"ssh_trust_verify": False}, "node1": {}, "node2": {}},
     "False on node0; True (the default) on node1, node2"),
    ({"node0": {}, "node1": {"ssh_trust_root": "yes"}}, "False (the default) on node0; 'yes' on node1"),
    ({"node0": {"ssh_trust_root": True}, "node1": {"ssh_trust_root": False}}, "True on node0; False on node1"),
])
def test_a_play_wide_variable_set_per_node_is_refused(nodes, shown):
    problems = [p for p in run(nodes=nodes) if p["code"] == "VALIDATE_NOT_CLUSTER_WIDE"]
    assert len(problems) == 1, problems
    assert shown in problems[0]["message"] and "once for every node" in problems[0]["fix"], problems


@pytest.mark.parametrize("nodes", [
    {"node0": {"ssh_trust_verify": False}, "node1": {"ssh_trust_verify": "no"}},  # the same boolean, two spellings
    {"node0": {"ssh_trust_root": False}, "node1": {}},  # the default, set on one node
    {"node0": {"ssh_trust_root": True}, "node1": {"ssh_trust_root": True}},
    # read by each node for its own logins: one node may check every pair while the others check the ring
    {"node0": {"ssh_trust_verify_every_pair": "always"}, "node1": {}},
])
def test_a_play_wide_variable_with_one_value_passes(nodes):
    assert [p for p in run(nodes=nodes) if p["code"] == "VALIDATE_NOT_CLUSTER_WIDE"] == []


def test_a_play_wide_variable_of_the_wrong_type_is_named_by_its_own_rule():
    problems = run(nodes={"node0": {"ssh_trust_verify": "sometimes"}, "node1": {}})
    assert found(problems) == [("VALIDATE_TYPE", "ssh_trust_verify")], problems


def test_a_play_wide_value_left_to_the_node_is_not_compared():
    # node1's value reads a node fact or a role default: the controller cannot tell it, so it is not "the default"
    problems = v.validate({"nodes": {"node0": {"ssh_trust_verify": False}, "node1": {}}, "head_hosts": ["node0"],
                           "role_specs": SPECS, "unrendered": {"node1": {"ssh_trust_verify": "'slurm_verify' is undefined"}}})
    assert [p for p in problems if p["code"] == "VALIDATE_NOT_CLUSTER_WIDE"] == [], problems


def test_known_options_cover_every_role():
    known = v.known_options(SPECS)
    for name in ("rdma_mode", "pytorch_env_kind", "ddp_benchmark_launcher", "slurm_ctld_port", "ddp_rdzv_addr"):
        assert name in known


@pytest.mark.parametrize("error", [
    "CapturedExceptionMarker: A captured exception marker was tripped: Syntax error in template: No filter named 'x'.",
    "template error while templating string: unexpected end of template",  # ansible-core < 2.19 raises
    "UndefinedMarker: 'foo' is undefined",
    "AnsibleUndefinedVariable: 'slurm_whatever' is undefined",
])
def test_unrenderable_jinja_is_refused(error):
    problems = v.validate({"nodes": {"node0": {}}, "head_hosts": ["node0"], "role_specs": SPECS,
                           "unrendered": {"node0": {"slurm_partition": error}}})
    assert ("VALIDATE_TEMPLATE", "slurm_partition") in found(problems)
    assert "Marker" not in [p for p in problems if p["code"] == "VALIDATE_TEMPLATE"][0]["message"]


@pytest.mark.parametrize("error", [
    "UndefinedMarker: 'ansible_default_ipv4' is undefined",
    "UndefinedMarker: 'hostvars' is undefined",
    "UndefinedMarker: object of type 'dict' has no attribute 'python'",
    "'slurm_bin_dir' is undefined",  # a role default: rendered on the node
])
def test_values_that_need_the_node_are_left_to_it(error):
    problems = v.validate({"nodes": {"node0": {}}, "head_hosts": ["node0"], "role_specs": SPECS,
                           "unrendered": {"node0": {"slurm_health_check_program": error}}})
    assert problems == []


@pytest.mark.parametrize("error", [
    "UndefinedMarker: 'ansible_default_ipv4' is undefined",               # ansible-core >= 2.19
    "AnsibleUndefinedVariable: 'ansible_default_ipv4' is undefined. 'ansible_default_ipv4' is undefined",  # < 2.19
])
def test_a_fact_variable_the_run_does_not_define_is_refused(error):
    # inject_facts_as_vars = False: on the node ansible_default_ipv4 would be undefined as well
    problems = v.validate({"nodes": {"node0": {}}, "head_hosts": ["node0"], "role_specs": SPECS,
                           "unrendered": {"node0": {"ddp_rdzv_addr": error}},
                           "fact_variables": ["ansible_default_ipv4", "ansible_hostname"]})
    assert found(problems) == [("VALIDATE_FACT_VARIABLE", "ddp_rdzv_addr")]
    assert "ansible_facts['default_ipv4']" in problems[0]["fix"]
    # where facts are injected (fact_variables empty), or the name is not a fact's, the value is left to the node
    for fact_variables in ([], ["ansible_hostname"]):
        assert v.validate({"nodes": {"node0": {}}, "head_hosts": ["node0"], "role_specs": SPECS,
                           "unrendered": {"node0": {"ddp_rdzv_addr": error}},
                           "fact_variables": fact_variables}) == []


def test_no_log_values_are_masked():
    key = "s3cr3t-munge-key"
    problems = run({"slurm_munge_key": key})
    assert ("VALIDATE_MUNGE_KEY", "slurm_munge_key") in found(problems)
    problems = run({"slurm_munge_key": ["s3cr3t-in-a-list"]}) + run({"slurm_munge_key": "short\nsecret-line-2"})
    text = repr(problems)
    assert key not in text and "s3cr3t-in-a-list" not in text and "secret-line-2" not in text
    assert "********" in text


def test_munge_key_as_openssl_prints_it_passes():
    # `openssl rand -base64 96` prints 128 base64 characters wrapped at 64 (two lines): the documented way.
    import base64
    text = base64.b64encode(os.urandom(96)).decode()
    key = text[:64] + "\n" + text[64:] + "\n"
    assert run({"slurm_munge_key": key}) == []


@pytest.mark.parametrize("value, spec, kind", [
    ("ten", {"type": "int"}, "ArgumentTypeError"),
    (["a"], {"type": "float"}, "ArgumentTypeError"),
    ("maybe", {"type": "bool"}, "ArgumentTypeError"),
    ("ib", {"type": "str", "choices": ["roce", "tcp"]}, "ArgumentValueError"),
    (["roce", "ib"], {"type": "list", "elements": "str", "choices": ["roce", "tcp"]}, "ArgumentValueError"),
])
def test_core_errors_are_ansible_cores_verdict(value, spec, kind):
    errors = v.core_errors("x", value, spec)
    assert [type(e).__name__ for e in errors] == [kind], errors


@pytest.mark.parametrize("value, spec", [
    ("10", {"type": "int"}), (3, {"type": "float"}), ("yes", {"type": "bool"}), ("tcp", {"type": "str", "choices": ["roce", "tcp"]}),
    ([1, "2"], {"type": "list", "elements": "int"}), (None, {"type": "str"}),
])
def test_core_errors_take_what_core_takes(value, spec):
    assert v.core_errors("x", value, spec) == []


@pytest.mark.parametrize("name, value, typ", [
    ("ddp_benchmark_steps", True, "int"),  # core: True is an int
    ("ddp_benchmark_steps", 5.0, "int"),  # core 2.17 and later: 5.0 is an int (2.16 refuses it itself)
    ("ddp_benchmark_base_lr", False, "float"),  # core: a boolean is a number
    ("ddp_benchmark_compare_launchers", "torchrun,slurm", "list"),  # core splits it at the comma
    ("slurm_extra_config", "MaxJobCount=20000", "dict"),  # core parses k=v
    ("ddp_torch_version", 2.1, "str"),  # core makes it "2.1"; YAML read 2.10 that way
    ("ddp_env_path", True, "path"),
])
def test_our_rules_refuse_on_top_of_what_core_converts(name, value, typ):
    core = v.core_errors(name, value, {"type": typ})
    assert core == [] or (value == 5.0 and typ == "int"), core  # ansible-core 2.16 refuses 5.0 for an int itself
    problems = v.option_problems(name, value, {"type": typ})
    assert problems and problems[0]["code"] in ("VALIDATE_TYPE", "VALIDATE_VERSION_NUMBER"), problems
