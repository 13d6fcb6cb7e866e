"""The built tarball installs into an empty collections path with its declared dependencies only, and works.

The dependencies are the artifacts tests/collection/deps.py packs from the `ansible` package (Galaxy is not
reachable here). Ansible is told to look nowhere else: ANSIBLE_COLLECTIONS_PATH is the empty path the
install fills and ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false hides the `ansible` package's own copies, so a
role, module or playbook that needs an undeclared collection fails here. Runs outside the clone, so
its ansible.cfg and collections/ symlink play no part. No containers.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.dirname(sys.executable)
sys.path.insert(0, HERE)
import deps  # noqa: E402  pylint: disable=wrong-import-position


def run(argv, cwd, env, ok=True, timeout=300):
    proc = subprocess.run([os.path.join(BIN, argv[0])] + argv[1:], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if ok:
        assert proc.returncode == 0, "%s\n%s\n%s" % (" ".join(argv), proc.stdout[-4000:], proc.stderr[-4000:])
    return proc


def clean_env(base, path):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_")))
    env.update(HOME=str(base / "home"), ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(path),
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_LOCAL_TEMP=str(base / "tmp"),
               PATH=BIN + os.pathsep + env.get("PATH", ""))
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(base dir, ddp.cluster tarball, {dependency: (version, tarball)})."""
    base = tmp_path_factory.mktemp("install")
    for name in ("dist", "deps", "work", "home"):
        (base / name).mkdir()
    env = clean_env(base, base / "unused")
    run(["ansible-galaxy", "collection", "build", ROOT, "--output-path", str(base / "dist")], str(base / "work"), env)
    tarballs = glob.glob(str(base / "dist" / "ddp-cluster-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    return base, tarballs[0], deps.dependency_artifacts(str(base / "deps"))


@pytest.fixture(scope="module")
def installed(built):
    """(environment, work dir): ddp.cluster and its declared dependencies installed into an empty path."""
    base, tarball, made = built
    path = base / "collections"
    path.mkdir()
    env = clean_env(base, path)
    run(["ansible-galaxy", "collection", "install", "--offline", "-p", str(path), tarball]
        + [t for _v, t in made.values()], str(base / "work"), env)
    return env, str(base / "work")


def test_without_a_declared_dependency_the_install_is_refused(built):
    base, tarball, made = built
    path = base / "without_crypto"
    path.mkdir()
    others = [t for name, (_v, t) in made.items() if name != "community.crypto"]
    proc = run(["ansible-galaxy", "collection", "install", "--offline", "-p", str(path), tarball] + others,
               str(base / "work"), clean_env(base, path), ok=False)
    assert proc.returncode != 0
    assert "community.crypto" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_path_holds_ddp_cluster_and_exactly_the_declared_dependencies(installed):
    env, work = installed
    listing = json.loads(run(["ansible-galaxy", "collection", "list", "--format", "json"], work, env).stdout)
    found = set()
    for collections in listing.values():
        found.update(c for c in collections if not c.startswith("ansible._"))  # ansible-core's internal ones
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        galaxy = yaml.safe_load(handle)
    assert found == {"ddp.cluster"} | set(galaxy["dependencies"])


def test_every_module_runs_by_fqcn(installed):
    """Each module on this machine (no GPU, no RDMA: the health modules say so and stay healthy)."""
    env, work = installed
    modules = sorted(os.path.splitext(os.path.basename(p))[0]
                     for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
    assert modules == ["diagnose_output", "gpu_health", "hardware_facts", "installed_files", "nccl_health", "node_stack",
                       "roce_health", "ssh_check", "tcp_probe"]
    playbook = os.path.join(work, "modules.yml")
    with open(playbook, "w", encoding="utf-8") as handle:
        handle.write("""---
- name: Run every module of the installed collection
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Find the hardware
      ddp.cluster.hardware_facts:
    - name: Connect to a port nothing listens on
      ddp.cluster.tcp_probe:
        host: 127.0.0.1
        port: 9
        timeout: 2
      register: probe
      failed_when: probe.verdict != 'refused'
    - name: Look a peer up in an empty known_hosts
      ddp.cluster.ssh_check:
        mode: known_hosts
        name: localhost
        peers: [{name: peer, host: 192.0.2.1}]
        known_hosts: /dev/null
      register: known
      failed_when: known.failed_peers != ['peer']
    - name: Read an installed file and a folder that is not there (its action plugin runs find)
      ddp.cluster.installed_files:
        paths: [/etc, /nonexistent/ddp]
        patterns: [hostname, ddp]
        get_checksum: true
      register: installed
      failed_when: installed.not_directories != ['/nonexistent/ddp'] or installed.files | length != 1
    - name: Check the GPUs
      ddp.cluster.gpu_health:
        check_xid: false
        pcie_check: false
      register: gpu
    - name: Check RDMA
      ddp.cluster.roce_health:
      register: roce
    - name: Plan the all-reduce (check mode runs nothing)
      ddp.cluster.nccl_health:
        rdzv_endpoint: 127.0.0.1:29599
        python_env: /nonexistent
        fail_on: never
      check_mode: true
      register: nccl
    - name: Inventory the stack without a training environment
      ddp.cluster.node_stack:
        python_env: /nonexistent
        fail_on: never
      register: stack
    - name: Read a line of Slurm's node list
      ddp.cluster.diagnose_output:
        text: "n1|down*|Not responding"
        fail_on: never
      register: text
      failed_when: text.errors != ['SLURM_NODE_NOT_RESPONDING']
    - name: Show the verdicts
      ansible.builtin.debug:
        msg: "verdicts gpu={{ gpu.problems | map(attribute='code') | join(',') }}
          roce={{ roce.problems | map(attribute='code') | join(',') }} nccl={{ nccl.healthy }}
          stack={{ stack.problems | map(attribute='code') | join(',') }} kernel={{ stack.stack.kernel }}"
""")
    proc = run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                playbook], work, env)
    out = proc.stdout
    assert "failed=0" in out, out
    assert "[WARNING]: Skipped" not in out, out
    assert "verdicts gpu=" in out and "NO_GPU" in out and "NO_RDMA" in out, out
    assert "stack=STACK_PROBE_FAILED kernel=%s" % os.uname().release in out, out


def test_a_role_and_the_site_playbook_load_from_the_install(installed):
    env, work = installed
    playbook = os.path.join(work, "role.yml")
    with open(playbook, "w", encoding="utf-8") as handle:
        handle.write("""---
- name: Run a role of the installed collection where it has nothing to do
  hosts: localhost
  connection: local
  gather_facts: true
  roles:
    - role: ddp.cluster.nvidia_driver
""")
    proc = run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                playbook], work, env)
    assert "ddp.cluster.nvidia_driver" in proc.stdout and "failed=0" in proc.stdout, proc.stdout
    # Every role and statically imported task of site.yml (ssh_trust's community.crypto module among them)
    # and the AWX playbook (awx.awx) resolve against the installed dependencies.
    for name in ("ddp.cluster.site", "ddp.cluster.awx_setup"):
        run(["ansible-playbook", "-i", "localhost,", "--syntax-check", name], work, env)
