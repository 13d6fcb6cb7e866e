"""Every value the project documents passes the validate stage (issue 40, item 3).

Sources: each role's ``meta/argument_specs.yml`` defaults and ``defaults/main.yml`` (untemplated values), the example
and local inventories' group_vars, every ``-e '{...}'`` / ``-e name=value`` of README.md and docs/*.md, and the examples
written in descriptions and comments (EXAMPLES below: each names the file and the words it is quoted from, so the
table cannot drift from the documentation). The rules are plugins/module_utils/cluster/validate.py's, as the validate stage
applies them; tests/integration/test_validate_classes.py passes the same examples through site.yml itself.
"""
from __future__ import annotations

import base64
import glob
import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import validate as v

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path):
    with open(os.path.join(ROOT, path)) as handle:
        return yaml.safe_load(handle) or {}


SPECS = dict((p.split(os.sep)[-3], _load(p)["argument_specs"])
             for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))


def problems(values, extra_hosts=()):
    hosts = ["gpu01", "gpu02"] + [h for h in extra_hosts if h not in ("gpu01", "gpu02")]
    return v.validate({"nodes": dict((h, dict(values)) for h in hosts), "head_hosts": ["gpu01"],
                       "role_specs": SPECS})


def _templated(value):
    return "{{" in json.dumps(value)


def _role_defaults():
    out = []
    for role, entries in sorted(SPECS.items()):
        if role == "local_cluster":
            continue  # the controller's own podman cluster: not an input of site.yml
        for spec in entries.values():
            for name, option in (spec.get("options") or {}).items():
                if "default" in option and not _templated(option["default"]) and option["default"] is not None:
                    out.append(("roles/%s/meta/argument_specs.yml" % role, name, option["default"]))
        for name, value in _load("roles/%s/defaults/main.yml" % role).items():
            if not _templated(value) and value is not None:
                out.append(("roles/%s/defaults/main.yml" % role, name, value))
    # The cluster-wide defaults (roles/ddp: no argument spec, only defaults)
    for name, value in _load("roles/ddp/defaults/main.yml").items():
        if not _templated(value):
            out.append(("roles/ddp/defaults/main.yml", name, value))
    return out


@pytest.mark.parametrize("source, name, value", _role_defaults(), ids=lambda x: str(x)[:60])
def test_every_role_default_passes(source, name, value):
    assert problems({name: value}) == [], source


@pytest.mark.parametrize("path", ["inventory/example/group_vars/ddp_nodes.yml", "inventory/local/group_vars/ddp_nodes.yml",
                                  "molecule/local/inventory/nodes/group_vars/ddp_nodes.yml"])
def test_example_inventories_pass(path):
    values = dict((k, val) for k, val in _load(path).items() if not _templated(val))
    assert problems(values) == []


def _extra_vars_in_docs():
    """(file, {variable: value}) of every -e of README.md and docs/*.md (JSON, or name=value as ansible reads it)."""
    out = []
    for path in ["README.md"] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        path = os.path.relpath(os.path.join(ROOT, path), ROOT)
        with open(os.path.join(ROOT, path)) as handle:
            text = handle.read()
        for blob in re.findall(r"-e '(\{.*?\})'(?=\s|`|$)", text, re.S):
            # a shell splice ('"$(command)"') stands for a path the command prints
            blob = re.sub(r"'\"\$\([^)]*\)\"'", "/srv/wheelhouse", blob)
            values = json.loads(re.sub(r"\s+", " ", blob))
            out.append((path, dict((k, val) for k, val in values.items() if "<" not in str(val))))
        for name, value in re.findall(r"-e ([a-z][a-z0-9_]*)=([^\s`'\"]+)", text):
            if "<" not in value and not name.startswith(("ddp_awx_", "local_cluster_")):
                out.append((path, {name: value}))
    return out


@pytest.mark.parametrize("path, values", _extra_vars_in_docs(), ids=lambda x: str(x)[:60])
def test_extra_vars_of_the_docs_pass(path, values):
    # ddp_shrink_nodes (README, Day 2) names hosts of the reader's inventory: they are its nodes here, beside the head
    shrink = values.get("ddp_shrink_nodes")
    assert problems(values, shrink if isinstance(shrink, list) else ()) == [], path


def openssl_munge_key():
    """The key as `openssl rand -base64 96` prints it (roles/slurm's documented way): 128 characters on two lines."""
    try:
        return subprocess.run(["openssl", "rand", "-base64", "96"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        text = base64.b64encode(os.urandom(96)).decode()
        return text[:64] + "\n" + text[64:] + "\n"


# (file, the words the example is quoted from there, {variable: value} as a user would write it)
EXAMPLES = [
    ("roles/firewall/defaults/main.yml", 'e.g. ["29500/tcp"]', {"firewall_extra_ports": ["29500/tcp"]}),
    ("roles/firewall/meta/argument_specs.yml", "C(port/proto)", {"firewall_extra_ports": ["60000-61000/udp"]}),
    ("roles/firewall/defaults/main.yml", "(CIDRs accepted)", {"firewall_sources": ["10.0.0.0/24", "10.0.1.5"]}),
    ("roles/slurm/meta/argument_specs.yml", "C(openssl rand -base64 96)", {"slurm_munge_key": openssl_munge_key()}),
    ("roles/slurm/defaults/main.yml", 'slurm_srun_port_range: "62000-63999"', {"slurm_srun_port_range": "62000-63999"}),
    ("roles/slurm/defaults/main.yml", "e.g. a100", {"slurm_gres_type": "a100"}),
    ("roles/slurm/defaults/main.yml", "KEY: value", {"slurm_extra_config": {"SchedulerParameters": "bf_continue,bf_interval=60"}}),
    ("roles/slurm/meta/argument_specs.yml", "DeepOps and stackhpc use 300", {"slurm_health_check_interval": 300}),
    ("roles/slurm/meta/argument_specs.yml", "C(IDLE) only idle ones", {"slurm_health_check_node_state": "IDLE"}),
    ("roles/slurm/meta/argument_specs.yml", "C(94E279EB8D8F25B21810ADF121EA45AB2F86D6A1) (EPEL 8)",
     {"slurm_epel_gpg_key_fingerprint": "94E279EB8D8F25B21810ADF121EA45AB2F86D6A1",
      "slurm_epel_gpg_key_url": "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-8"}),
    ("roles/rdma/meta/argument_specs.yml", "C(106) is DSCP 26", {"rdma_cma_roce_tos": "106", "rdma_nccl_ib_tc": "106"}),
    ("roles/rdma/meta/argument_specs.yml", "C(0,0,0,1,0,0,0,0)", {"rdma_qos_pfc": "0,0,0,1,0,0,0,0", "rdma_qos_trust": "dscp"}),
    ("roles/rdma/meta/argument_specs.yml", "e.g. C(mlx5_0:1)", {"rdma_nccl_ib_hca": "mlx5_0:1"}),
    ("roles/rdma/meta/argument_specs.yml", "C(WARN), C(INFO)", {"rdma_nccl_debug": "INFO"}),
    ("roles/rdma/meta/argument_specs.yml", "3 on one host, 7 on", {"rdma_nccl_ib_gid_index": "3"}),
    ("roles/rdma/meta/argument_specs.yml", "C(24.10-2.1.8.0)",
     {"rdma_mode": "ofed", "rdma_ofed_version": "24.10-2.1.8.0",
      "rdma_ofed_url": "https://mirror.example.com/MLNX_OFED_LINUX-24.10-2.1.8.0-rhel8.10-x86_64.tgz",
      "rdma_ofed_checksum": "sha256:" + "0" * 64}),
    ("roles/rdma/meta/argument_specs.yml", "C(ASYNC_ERROR_HANDLING), C(BLOCKING_WAIT)",
     {"rdma_torch_nccl_env": {"ASYNC_ERROR_HANDLING": 1, "BLOCKING_WAIT": 0}}),
    ("roles/rdma/defaults/main.yml", "rdma_mtu: 9000", {"rdma_mtu": 9000}),
    ("roles/ddp_benchmark/defaults/main.yml", "e.g. NCCL_DEBUG: INFO", {"ddp_benchmark_environment": {"NCCL_DEBUG": "INFO"}}),
    ("roles/ddp_benchmark/meta/argument_specs.yml", "O(ddp_benchmark_launcher=horovod) with C([torchrun])",
     {"ddp_benchmark_launcher": "horovod", "ddp_benchmark_compare_launchers": ["torchrun"]}),
    ("roles/ddp_benchmark/meta/argument_specs.yml", "C(precision), C(data), C(batch_size)",
     {"ddp_benchmark_variants": [{"name": "bf16_loader", "scope": "one_node",
                                  "options": {"precision": "bf16", "data": "loader", "batch_size": 32}}]}),
    ("roles/node_health/meta/argument_specs.yml", "e.g. C(535.104.05)", {"node_health_min_driver": "535.104.05"}),
    ("roles/node_health/meta/argument_specs.yml", "C(-1h)", {"node_health_xid_since": "-1h"}),
    ("roles/node_health/meta/argument_specs.yml", "(1-55;", {"node_health_deadline_s": 55}),
    ("inventory/example/group_vars/ddp_nodes.yml", 'ddp_cuda_version: "12.1"',
     {"ddp_torch_version": "2.1.0", "ddp_torchvision_version": "0.16.0", "ddp_cuda_version": "12.1"}),
    ("roles/pytorch_env/meta/argument_specs.yml", "Miniforge3-<version>-Linux-x86_64.sh",
     {"pytorch_env_kind": "conda",
      "pytorch_env_miniforge_installer":
          "https://github.com/conda-forge/miniforge/releases/download/24.11.3-0/Miniforge3-24.11.3-0-Linux-x86_64.sh",
      "pytorch_env_miniforge_sha256": "a" * 64}),
    ("README.md", "https://download.pytorch.org/whl/cpu",
     {"pytorch_env_extra_index_urls": ["https://download.pytorch.org/whl/cpu"]}),
    ("roles/pytorch_env/meta/argument_specs.yml", "pytorch_env_wheelhouse_transport", {
        "pytorch_env_wheelhouse": "/srv/wheelhouse", "pytorch_env_wheelhouse_transport": "copy",
        "pytorch_env_wheelhouse_port": 8765, "pytorch_env_require_hashes": True}),
    ("roles/ssh_trust/defaults/main.yml", 'e.g. ["10.0.0.0/24"]', {"ssh_trust_from_extra": ["10.0.0.0/24"]}),
    ("roles/firewall/meta/argument_specs.yml", "firewall_site_managed", {"firewall_site_managed": True}),
    ("inventory/example/group_vars/ddp_nodes.yml", "ddp_nvidia_repo_url: https://mirror.example.com/nvidia/cuda/repos",
     {"ddp_nvidia_repo_url": "https://mirror.example.com/nvidia/cuda/repos"}),
    ("roles/nccl/meta/argument_specs.yml", "C(/usr/lib64/openmpi) on EL",
     {"nccl_tests_mpi_home": "/usr/lib64/openmpi"}),
    ("docs/offline.md", '"ddp_env_path": "/opt/ddp/venv-ref"', {"ddp_env_path": "/opt/ddp/venv-ref"}),
]


@pytest.mark.parametrize("path, words, values", EXAMPLES, ids=[e[1][:40] for e in EXAMPLES])
def test_documented_example_passes(path, words, values):
    with open(os.path.join(ROOT, path)) as handle:
        assert words in handle.read(), "the example is no longer documented in %s" % path
    assert problems(values) == []


def all_examples():
    """Every example of EXAMPLES in one mapping (a later value of a variable wins; they do not contradict)."""
    merged = {}
    for _path, _words, values in EXAMPLES:
        merged.update(values)
    return merged


def test_all_examples_together_pass():
    assert problems(all_examples()) == []
