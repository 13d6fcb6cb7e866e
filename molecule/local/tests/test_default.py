"""End state of the Molecule `local` scenario, checked on every node."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re

from nodes import TESTINFRA_HOSTS

testinfra_hosts = TESTINFRA_HOSTS  # nodes.py: both nodes over SSH

SYSCTL_FILE = "/etc/sysctl.d/90-ddp-net-tuning.conf"
EXPECTED = {
    "net.core.rmem_max": "134217728",
    "net.core.wmem_max": "134217728",
    "net.ipv4.tcp_rmem": "4096 87380 134217728",
    "net.ipv4.tcp_wmem": "4096 65536 134217728",
    "net.core.default_qdisc": "fq",
    "net.ipv4.tcp_congestion_control": "bbr",
}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ALLREDUCE = os.path.join(ROOT, "roles", "pytorch_env", "files", "ddp_nccl_allreduce.py")
WHEELHOUSE = os.path.join(ROOT, ".cache", "wheelhouse")


def test_sysctl_file_holds_every_key(host):
    conf = host.file(SYSCTL_FILE)
    assert conf.exists and conf.mode == 0o644
    lines = {line.split("=", 1)[0].strip(): line.split("=", 1)[1].strip()
             for line in conf.content_string.splitlines() if "=" in line and not line.startswith("#")}
    assert lines == EXPECTED


def test_sysctl_values_where_the_namespace_allows(host):
    # A key is applied now where its /proc/sys file is writable in this namespace (unprivileged
    # containers mount /proc/sys read-only): those must hold the value.
    for key, value in EXPECTED.items():
        path = "/proc/sys/" + key.replace(".", "/")
        writable = host.run("test -w %s && grep -qw rw <(findmnt -no OPTIONS -T %s)", path, path)
        if host.run("bash -c 'touch %s' 2>/dev/null", path).rc == 0 and writable.rc == 0:
            assert " ".join(host.file(path).content_string.split()) == value


def test_bbr_persisted_in_modules_load(host):
    assert host.file("/etc/modules-load.d/tcp_bbr.conf").content_string.split()[-1] == "tcp_bbr"


def test_ssh_dir_modes(host):
    assert host.file("/home/ddp/.ssh").mode == 0o700
    for name in ("id_ed25519", "authorized_keys", "known_hosts"):
        assert host.file("/home/ddp/.ssh/" + name).mode == 0o600


def test_ssh_to_the_other_node_as_the_cluster_user(host):
    me = host.check_output("hostname")
    other = "ddp-mol2" if me == "ddp-mol1" else "ddp-mol1"
    cmd = host.run("sudo -u ddp ssh -o BatchMode=yes -o StrictHostKeyChecking=yes %s hostname", other)
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.strip() == other


def test_torch_imports_in_the_env(host):
    out = host.check_output("/opt/ddp/venv/bin/python -c 'import torch; print(torch.__version__)'")
    assert out.startswith("2.13.0")


def test_env_installed_from_the_lock_file_with_the_controllers_hashes(host):
    """pytorch_env_require_hashes through the wheelhouse index: the node got the lock file alone (no wheel copied),
    every installed pin has the locked version, and the locked torch sha256 is that of the controller's wheel."""
    listing = host.run("ls -A /opt/ddp/wheelhouse").stdout.split()
    assert len(listing) == 1 and re.match(r"^\.ddp-[0-9a-f]{12}\.lock$", listing[0]), listing
    pins = {}
    for line in host.file("/opt/ddp/wheelhouse/" + listing[0]).content_string.splitlines():
        found = re.match(r"^([A-Za-z0-9._-]+)==(\S+) --hash=sha256:([0-9a-f]{64})$", line)
        if found:
            pins[found.group(1)] = (found.group(2), found.group(3))
    assert "torch" in pins and "numpy" in pins, pins
    version, digest = pins["torch"]
    wheels = glob.glob(os.path.join(WHEELHOUSE, "torch-%s-*.whl" % version))
    assert len(wheels) == 1, wheels
    with open(wheels[0], "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == digest
    installed = {item["name"].lower().replace("_", "-"): item["version"] for item in json.loads(host.check_output(
        "/opt/ddp/venv/bin/python -m pip list --format json --disable-pip-version-check"))}
    assert {name: installed.get(name) for name in pins} == {name: pin[0] for name, pin in pins.items()}


def test_shipped_scripts_installed_in_the_env(host):
    """nccl_health's all-reduce script and node_stack's probe: the shipped files, root's, mode 0644."""
    for name in ("ddp_nccl_allreduce.py", "ddp_stack_probe.py"):
        script = host.file("/opt/ddp/venv/share/ddp-cluster/" + name)
        assert script.exists and script.user == "root" and script.group == "root" and script.mode == 0o644
        with open(os.path.join(os.path.dirname(ALLREDUCE), name), "rb") as handle:
            assert script.sha256sum == hashlib.sha256(handle.read()).hexdigest()


def test_expected_versions_manifest_matches_the_env(host):
    """pytorch_env's manifest (node_stack compares the node with it): the torch the env really has."""
    manifest = json.loads(host.file("/etc/ddp/expected/pytorch_env.json").content_string)
    torch = host.check_output("/opt/ddp/venv/bin/python -c 'import torch; print(torch.__version__.split(\"+\")[0])'")
    assert manifest == {"torch": torch, "torch_cuda": None}


def test_firewall_allows_the_cluster_only(host):
    zone = host.check_output("firewall-cmd --info-zone=ddp-cluster")
    assert "29400/tcp" in zone
    assert "32768-60999/tcp" in zone
    assert "sources: 10." in zone or "sources: " in zone


def test_benchmark_json_present(host):
    files = [f for f in host.check_output("ls -1 /var/lib/ddp/bench/").split() if f.endswith(".json")]
    assert files, "no benchmark result on this node"
    result = json.loads(host.file("/var/lib/ddp/bench/" + sorted(files)[-1]).content_string)
    assert result["world_size"] == 2
    assert result["nnodes"] == 2
    assert result["samples_per_s"] > 0
    assert result["backend"] == "gloo"


def test_reference_baseline_ran_the_dataloader_across_nodes(host):
    """The default variant reference_baseline (issue 15): DataLoader workers on both nodes, its loader timed alone."""
    files = sorted(f for f in host.check_output("ls -1 /var/lib/ddp/bench/").split()
                   if f.endswith("-reference_baseline.json"))
    assert files, "no reference_baseline result on this node"
    result = json.loads(host.file("/var/lib/ddp/bench/" + files[-1]).content_string)
    assert (result["nnodes"], result["data"], result["workers"]) == (2, "loader", 8)
    assert (result["precision"], result["lr"], result["lr_scaling"]) == ("fp32", 0.1, "none")
    assert result["loader"]["samples_per_s_per_process"] > 0
    assert set(result["loader"]["per_host"]) == set(result["hosts"])
    assert isinstance(result["loader"]["input_bound"], bool)
    assert all(rank["loader_samples_per_s"] > 0 for rank in result["per_rank"])


def test_node_health_command_keeps_the_node_within_slurms_limit(host):
    """ddp-health (ddp.cluster.node_health): WARN (no GPU, no RDMA here), exit 0, well under Slurm's 60 s."""
    cmd = host.run("/opt/ddp/bin/ddp-health --json")
    assert cmd.rc == 0, cmd.stdout + cmd.stderr
    report = json.loads(cmd.stdout)
    assert (report["verdict"], report["errors"], report["warnings"]) == ("WARN", [], ["NO_GPU", "NO_RDMA"])
    assert report["node"] == host.check_output("hostname -s") and report["elapsed_s"] < 50
    settings = json.loads(host.file("/etc/ddp/health.json").content_string)
    assert settings["deadline_s"] == 50 and settings["slurm"] == {"prefix": "ddp-health:"}


def test_slurm_runs_it_as_health_check_program(host):
    config = host.check_output("scontrol show config")
    assert re.search(r"^HealthCheckProgram\s*=\s*/opt/ddp/bin/ddp-health-slurm$", config, re.M), config
    assert re.search(r"^HealthCheckInterval\s*=\s*300 sec$", config, re.M)
    assert re.search(r"^HealthCheckNodeState\s*=\s*ANY$", config, re.M)
