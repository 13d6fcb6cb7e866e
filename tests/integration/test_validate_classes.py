"""Issue 40's classes of bad input are refused by the validate stage, on the controller, before any node is contacted.

The real ``ansible-playbook`` runs ``site.yml`` and the stage playbook that uses each variable against nodes that do
not exist (tests/integration/inventory, as test_validate_refusals.py). The stage reports every problem at once, so one
run carries many bad inputs: one run of site.yml with all of them, one run per stage playbook with that stage's. Each
must be named with its code and variable, and nothing may have been attempted on a node. The values the project
documents (tests/unit/test_documented_values.py) go through site.yml together and are not refused.
"""
from __future__ import annotations

import importlib.util
import math
import os

import pytest

from test_validate_refusals import ROOT, assert_refused_before_contact, run

# (class of issue 40, the stage playbook that uses the variables, extra vars, [(code, variable)])
CLASSES = [
    ("user", "benchmark", {"ddp_benchmark_user": "root"}, [("VALIDATE_ROOT_USER", "ddp_benchmark_user")]),
    ("user", "scheduler", {"slurm_check_user": "daemon"}, [("VALIDATE_SYSTEM_USER", "slurm_check_user")]),
    ("user", "pytorch_env", {"pytorch_env_probe_user": "nobody"}, [("VALIDATE_SYSTEM_USER", "pytorch_env_probe_user")]),
    ("port", "scheduler", {"ddp_scheduler": "slurm", "slurm_ctld_port": 6818},
     [("VALIDATE_PORT_CONFLICT", "slurm_d_port")]),
    ("port", "scheduler", {"slurm_srun_port_range": 62000}, [("VALIDATE_PORT_FORM", "slurm_srun_port_range")]),
    ("port", "access", {"firewall_extra_ports": ["29500", "70000/tcp"]},
     [("VALIDATE_PORT_FORM", "firewall_extra_ports"), ("VALIDATE_RANGE", "firewall_extra_ports")]),
    ("port", "health", {"ddp_health_probe_port": 70000}, [("VALIDATE_RANGE", "ddp_health_probe_port")]),
    ("token", "scheduler", {"slurm_partition": "gpu nodes"}, [("VALIDATE_CONFIG_TOKEN", "slurm_partition")]),
    ("token", "network", {"rdma_nccl_socket_ifname": "eth0 eth1"},
     [("VALIDATE_CONFIG_TOKEN", "rdma_nccl_socket_ifname")]),
    ("token", "benchmark", {"ddp_benchmark_environment": {"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"}},
     [("VALIDATE_CONFIG_TOKEN", "ddp_benchmark_environment.NCCL_DEBUG")]),
    ("path", "benchmark", {"ddp_benchmark_output_dir": "/var/tmp/ddp-bench"},
     [("VALIDATE_PATH", "ddp_benchmark_output_dir")]),
    ("path", "scheduler", {"node_health_config_file": "/etc/passwd", "node_health_python": "/home/ddp/venv/bin/python"},
     [("VALIDATE_PATH", "node_health_config_file"), ("VALIDATE_PATH", "node_health_python")]),
    ("path", "network", {"rdma_nccl_conf_path": "etc/nccl.conf"}, [("VALIDATE_PATH", "rdma_nccl_conf_path")]),
    ("path", "pytorch_env", {"pytorch_env_node_wheelhouse": "/opt/ddp/../../etc"},
     [("VALIDATE_PATH", "pytorch_env_node_wheelhouse")]),
    ("number", "health", {"ddp_health_min_busbw_gbps": "inf"}, [("VALIDATE_NOT_FINITE", "ddp_health_min_busbw_gbps")]),
    ("number", "benchmark", {"ddp_benchmark_base_lr": "nan", "ddp_benchmark_image_size": 1000000000},
     [("VALIDATE_NOT_FINITE", "ddp_benchmark_base_lr"), ("VALIDATE_RANGE", "ddp_benchmark_image_size")]),
    ("number", "scheduler", {"slurm_mem_reserve_mb": -1}, [("VALIDATE_RANGE", "slurm_mem_reserve_mb")]),
    ("node-side string", "scheduler", {"node_health_slurm_prefix": "ddp:"},
     [("VALIDATE_HEALTH_CONFIG", "node_health_slurm_prefix")]),
    ("node-side string", "benchmark",
     {"ddp_benchmark_variants": [{"name": "two words"}, {"name": "x", "options": {"precision": "fp64"}}]},
     [("VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_variants"),
      ("VALIDATE_CHOICE", "ddp_benchmark_variants[1].options.precision")]),
    ("url", "pytorch_env", {"pytorch_env_index_url": "pypi.example.com/simple"},
     [("VALIDATE_URL", "pytorch_env_index_url")]),
    ("url", "gpu_stack", {"nccl_tests_source": "mirror.example.com/nccl-tests.tar.gz"},
     [("VALIDATE_URL", "nccl_tests_source")]),
    ("firewall", "access", {"firewall_sources": ["0.0.0.0/0"], "firewall_zone": "public"},
     [("VALIDATE_FIREWALL_SOURCE", "firewall_sources[0]"), ("VALIDATE_FIREWALL_ZONE", "firewall_zone")]),
    ("firewall", "access", {"ssh_trust_from_extra": ["::/0"]}, [("VALIDATE_FIREWALL_SOURCE", "ssh_trust_from_extra[0]")]),
    ("jinja", "network", {"rdma_fabric_interface": "{{ eth | no_such_filter }}"},
     [("VALIDATE_TEMPLATE", "rdma_fabric_interface")]),
    ("jinja", "benchmark", {"ddp_benchmark_dir": "{{ ddp_no_such_variable }}/bench"},
     [("VALIDATE_TEMPLATE", "ddp_benchmark_dir")]),
    ("type", "pytorch_env", {"pytorch_env_extra_packages": 5}, [("VALIDATE_TYPE", "pytorch_env_extra_packages")]),
    ("type", "scheduler", {"slurm_gres_type": ["a100"]}, [("VALIDATE_TYPE", "slurm_gres_type")]),
    ("slurm", "scheduler", {"slurm_munge_uid": 64030, "slurm_extra_config": {"DisableRootJobs": "NO"}},
     [("VALIDATE_SLURM", "slurm_munge_uid"), ("VALIDATE_SLURM", "slurm_extra_config.DisableRootJobs")]),
    ("rdma", "network", {"rdma_mode": "ofed", "rdma_torch_nccl_env": {"TIMEOUT": 5}},
     [("VALIDATE_OFED_SOURCE", "rdma_ofed_tarball"), ("RDMA_TORCH_VAR_INVALID", "rdma_torch_nccl_env.TIMEOUT")]),
    ("no_log", "scheduler", {"slurm_munge_key": "s3cr3t-but-too-short"}, [("VALIDATE_MUNGE_KEY", "slurm_munge_key")]),
]
SECRET = "s3cr3t-but-too-short"
STAGES = sorted(set(c[1] for c in CLASSES))


def merged(rows):
    out = {}
    for row in rows:
        assert not set(out) & set(row[2]), "two rows set one variable: they would hide each other"
        out.update(row[2])
    return out


def assert_all_named(out, rows):
    missing = ["[%s] %s:" % (code, variable) for row in rows for code, variable in row[3]
               if "[%s] %s:" % (code, variable) not in out]
    assert missing == [], out[-4000:]
    assert SECRET not in out, "a no_log value is printed"


@pytest.fixture(scope="module")
def site():
    proc, out = run("site.yml", merged(CLASSES))
    return proc, out


@pytest.mark.parametrize("kind", sorted(set(c[0] for c in CLASSES)))
def test_site_refuses_each_class_before_contact(site, kind):
    proc, out = site
    rows = [c for c in CLASSES if c[0] == kind]
    code, variable = rows[0][3][0]
    assert_refused_before_contact(proc, out, code, variable)
    assert_all_named(out, rows)


@pytest.mark.parametrize("stage", STAGES)
def test_stage_playbook_refuses_its_variables_before_contact(stage):
    rows = [c for c in CLASSES if c[1] == stage]
    proc, out = run("playbooks/%s.yml" % stage, merged(rows))
    code, variable = rows[0][3][0]
    assert_refused_before_contact(proc, out, code, variable)
    assert_all_named(out, rows)


def _documented_examples():
    path = os.path.join(ROOT, "tests", "unit", "test_documented_values.py")
    spec = importlib.util.spec_from_file_location("ddp_documented_values", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.all_examples()


def test_documented_values_pass_through_site():
    values = _documented_examples()
    assert all(not (isinstance(x, float) and math.isnan(x)) for x in values.values())
    proc, out = run("site.yml", values)
    assert "Refused before any change" not in out, out[-4000:]
    assert "Look for a Python" in out, out[-3000:]  # past the validate stage, on to the (absent) nodes
