"""The collection as users get it: `ansible-galaxy collection build`, install into a clean path, use by FQCN.

Everything runs from a folder outside the repository, so the repository's ansible.cfg (and its
collections/ symlink) is not used: ddp.cluster can only come from the installed tarball. Its
dependencies (ansible.posix, community.general, containers.podman) come from the `ansible` package.
"""
from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import validate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def run(argv, cwd, env, timeout=300):
    proc = subprocess.run([os.path.join(BIN, argv[0])] + argv[1:], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, "%s\n%s\n%s" % (" ".join(argv), proc.stdout[-4000:], proc.stderr[-4000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(environment, work dir, tarball) with ddp.cluster installed from its tarball into a clean path."""
    base = tmp_path_factory.mktemp("tarball")
    dist, path, work, home = (base / n for n in ("dist", "collections", "work", "home"))
    for folder in (dist, path, work, home):
        folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    env.update(HOME=str(home), ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(path),
               ANSIBLE_LOCAL_TEMP=str(base / "tmp"), PATH=BIN + os.pathsep + env.get("PATH", ""))

    run(["ansible-galaxy", "collection", "build", ROOT, "--output-path", str(dist)], str(work), env)
    tarballs = glob.glob(str(dist / "ddp-cluster-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    run(["ansible-galaxy", "collection", "install", "--offline", "--no-deps", "-p", str(path), tarballs[0]],
        str(work), env)
    return env, str(work), tarballs[0]


def local_playbook(work, filename, name, gather_facts, body):
    """Write a one-play playbook for localhost (local connection) into ``work``; returns its path."""
    path = os.path.join(work, filename)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("---\n- name: %s\n  hosts: localhost\n  connection: local\n  gather_facts: %s\n%s"
                     % (name, gather_facts, body))
    return path


def test_tarball_holds_the_collection_and_not_the_clone(installed):
    _env, _work, tarball = installed
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        galaxy = yaml.safe_load(handle)
    assert manifest["collection_info"]["version"] == galaxy["version"]
    for needed in ("meta/runtime.yml", "data/compat_matrix.yml", "roles/ddp_benchmark/files/ddp_bench.py",
                   "roles/pytorch_env/files/ddp_nccl_allreduce.py", "roles/pytorch_env/files/ddp_stack_probe.py",
                   "roles/pytorch_env/files/ddp_dist.py",
                   "roles/pytorch_env/files/ddp_wheelhouse_index.py", "plugins/modules/node_stack.py",
                   "plugins/modules/hardware_facts.py", "plugins/filter/compat.py", "playbooks/site.yml"):
        assert needed in names, needed
    for unwanted in ("collections", ".venv", ".cache", "artifacts", ".git"):
        assert not [n for n in names if n == unwanted or n.startswith(unwanted + "/")], unwanted


def test_module_by_fqcn_from_the_installed_tarball(installed):
    env, work, _tarball = installed
    proc = run(["ansible", "localhost", "-i", "localhost,", "-c", "local", "-m", "ddp.cluster.hardware_facts",
                "-e", "ansible_python_interpreter=" + sys.executable], work, env)
    assert "SUCCESS" in proc.stdout and "ddp_hardware" in proc.stdout, proc.stdout
    # The module came from the install, not from the clone.
    doc = run(["ansible-doc", "-t", "module", "--json", "ddp.cluster.hardware_facts"], work, env)
    filename = json.loads(doc.stdout)["ddp.cluster.hardware_facts"]["doc"]["filename"]
    assert filename.startswith(env["ANSIBLE_COLLECTIONS_PATH"]), filename


def test_role_and_filter_by_fqcn_from_the_installed_tarball(installed):
    env, work, _tarball = installed
    playbook = local_playbook(
        work, "gpu.yml", "Run a role of the installed collection where it has nothing to do", "true",
        "  roles:\n"
        "    - role: ddp.cluster.nvidia_driver\n"
        "  tasks:\n"
        "    - name: Read the compatibility matrix through the installed filter\n"
        "      ansible.builtin.debug:\n"
        "        msg: \"default torch {{ (None | ddp.cluster.compat_matrix).default_torch }}\"\n")
    proc = run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                playbook], work, env)
    out = proc.stdout
    assert "ddp.cluster.nvidia_driver" in out, out
    assert "failed=0" in out, out
    with open(os.path.join(ROOT, "data", "compat_matrix.yml"), encoding="utf-8") as handle:
        default_torch = yaml.safe_load(handle)["default_torch"]
    assert "default torch %s" % default_torch in out, out


@pytest.fixture
def root_only_dir():
    """A folder for what root installs, outside the folders other users can write (the roles refuse paths there:
    VALIDATE_PATH): the checkout's .cache, or /var/lib/ddp-cluster-tests where the checkout itself lies in one
    (a clone in /tmp)."""
    for parent in (os.path.join(ROOT, ".cache"), "/var/lib/ddp-cluster-tests"):
        if not validate.path_problems("node_health_lib_dir", os.path.join(parent, "test-node-health.x")):
            break
    os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix="test-node-health.", dir=parent)
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


def test_node_health_role_from_the_installed_tarball(installed, root_only_dir):
    """node_health copies the collection's module_utils from the install (role_path/../../plugins): the command it
    leaves runs on its own, without Ansible and without the clone, and judges this machine (no GPU: exit 0)."""
    env, work, _tarball = installed
    playbook = local_playbook(work, "node_health.yml", "Install ddp-health from the installed collection", "false",
                              "  roles:\n    - role: ddp.cluster.node_health\n")
    prefix = root_only_dir / "opt"
    proc = run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                "-e", "node_health_bin_dir=%s/bin node_health_lib_dir=%s/lib" % (prefix, prefix),
                "-e", "node_health_config_file=%s/health.json" % prefix, playbook], work, env)
    assert "failed=0" in proc.stdout and "ddp-health on localhost: WARN" in proc.stdout, proc.stdout
    clean = dict((k, v) for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANSIBLE_COLLECTIONS_PATH"))
    ran = subprocess.run([str(prefix / "bin" / "ddp-health"), "--json"], cwd="/", env=clean, capture_output=True,
                         text=True, check=False, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    assert report["verdict"] == "WARN" and report["warnings"] == ["NO_GPU", "NO_RDMA"]
    assert os.path.isfile(prefix / "lib" / "ansible_collections" / "ddp" / "cluster" / "plugins" / "module_utils" /
                          "cluster" / "health_io.py")
