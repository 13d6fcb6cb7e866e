"""site.yml run as AWX runs it: `ansible-runner run` on a private data directory laid out as AWX lays it.

    <private data dir>/
      project/            a copy of the repository's git-visible tree (what AWX clones)
      inventory/hosts     an executable script printing the inventory as JSON, as AWX writes it
      env/extravars       AWX's meta variables and the survey answers
      env/envvars         HOME is an empty folder (no ~/.ssh or ~/.ansible of the controller user),
                          plus the ENV lines of execution-environment.yml with /runner mapped here
      artifacts/<ident>/  what runner leaves: status, rc, job_events (the stats event holds set_stats)

It runs against the Molecule nodes ddp-mol1/ddp-mol2 that `molecule test -s local` leaves running
(`make test` runs tests/integration in between); without them it is skipped, saying why. On converged
nodes it is mostly no-change plus the health checks and the benchmark's all-node row (2-3 minutes).
"""
from __future__ import annotations

import base64
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import yaml
from podman_nodes import running

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
RUNNER_BIN = os.path.join(BIN, "ansible-runner")
NODES = ("ddp-mol1", "ddp-mol2")
MOLECULE_VARS = os.path.join(ROOT, "molecule", "local", "inventory", "nodes", "group_vars", "ddp_nodes.yml")
MOLECULE_DIR_LOOKUP = re.compile(r"\{\{\s*lookup\('ansible\.builtin\.env',\s*'MOLECULE_PROJECT_DIRECTORY'\)\s*\}\}")
IDENT = "1"  # AWX uses the job id as runner's ident


pytestmark = [
    pytest.mark.skipif(shutil.which("podman") is None or not all(running(n) for n in NODES),
                       reason="the Molecule nodes ddp-mol1/ddp-mol2 are not running (make test starts them with molecule)"),
    pytest.mark.skipif(not os.path.exists(RUNNER_BIN),
                       reason="ansible-runner is not installed next to this Python (pip install ansible-runner)"),
]


def copy_project(dest):
    """The git-visible tree (tracked and untracked-but-not-ignored files), symlinks kept as links."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for rel in sorted(set(filter(None, out.split("\0")))):
        src = os.path.join(ROOT, rel)
        if not os.path.lexists(src):
            continue  # deleted in the working tree
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)


def ee_environment(private_data_dir):
    """The ENV lines of execution-environment.yml, with the EE's /runner mapped to this folder."""
    with open(os.path.join(ROOT, "execution-environment.yml"), encoding="utf-8") as handle:
        definition = yaml.safe_load(handle)
    env = {}
    for step in (definition.get("additional_build_steps") or {}).get("append_final") or []:
        match = re.match(r"^ENV\s+(\w+)=(.*)$", step.strip())
        if match:
            env[match.group(1)] = match.group(2).replace("/runner", private_data_dir)
    return env


def awx_inventory_script(group_vars):
    """inventory/hosts as AWX writes it: a Python script that prints the inventory's JSON."""
    data = {
        "all": {"children": ["ddp_nodes", "ddp_head", "ungrouped"]},
        "ddp_nodes": {"hosts": list(NODES), "vars": group_vars},
        "ddp_head": {"hosts": [NODES[0]]},
        "_meta": {"hostvars": {n: {} for n in NODES}},
    }
    return "#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(data)


def make_private_data_dir(base):
    pdd = str(base / "awx_job")
    for sub in ("project", "inventory", "env", "home"):
        os.makedirs(os.path.join(pdd, sub))
    copy_project(os.path.join(pdd, "project"))

    with open(MOLECULE_VARS, encoding="utf-8") as handle:
        group_vars = yaml.safe_load(MOLECULE_DIR_LOOKUP.sub(ROOT, handle.read()))
    # The wheelhouse stays the repository's (.cache is not in git); results go to this job's folder.
    group_vars["ddp_benchmark_results_dir"] = os.path.join(pdd, "benchmark")
    hosts = os.path.join(pdd, "inventory", "hosts")
    with open(hosts, "w", encoding="utf-8") as handle:
        handle.write(awx_inventory_script(group_vars))
    os.chmod(hosts, 0o700)

    extravars = {
        # AWX's meta variables
        "awx_job_id": int(IDENT), "tower_job_id": int(IDENT), "awx_job_launch_type": "manual",
        "awx_job_template_name": "ddp.cluster | site", "awx_project_revision": "test",
        # survey answers: the small preset the Molecule scenario uses, and a multiple-choice answer (a list) that
        # narrows the matrix to the all-node row (the full matrix runs in the Molecule side effect)
        "ddp_nproc_per_node": "1", "ddp_benchmark_batch_size": 8, "ddp_benchmark_steps": 5,
        "ddp_benchmark_warmup_steps": 2, "ddp_benchmark_scopes": ["all_nodes"], "ddp_benchmark_variants": [],
    }
    # ssh's ControlPath is a Unix socket (at most 108 bytes): inside the EE the private data dir is /runner, so
    # ~/.ansible/cp is short there; pytest's tmp_path is not, so the job's control sockets go to a short folder.
    control_dir = tempfile.mkdtemp(prefix="awx-cp-", dir="/tmp")
    envvars = dict(ee_environment(pdd), HOME=os.path.join(pdd, "home"), ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="False",
                   ANSIBLE_SSH_CONTROL_PATH_DIR=control_dir)
    for name, content in (("extravars", extravars), ("envvars", envvars)):
        with open(os.path.join(pdd, "env", name), "w", encoding="utf-8") as handle:
            yaml.safe_dump(content, handle)
    return pdd


def node_file(node, path):
    """The bytes of a file on a node, read out of band (podman exec), or None when it does not exist."""
    proc = subprocess.run(["podman", "exec", node, "cat", path], capture_output=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def secrets():
    """(label, needle) pairs for every secret the converge handles: the private key of each account that
    ssh_trust gave a key (the cluster user's, and root's where ssh_trust_root made one), the munge key, and
    the controller's own key for these nodes (roles/local_cluster). Needles are the forms a leak would take:
    the file's base64 (what slurp returns) and each base64 line of a PEM/OpenSSH body."""
    found = []
    for node in NODES:
        home = subprocess.run(["podman", "exec", node, "getent", "passwd", "ddp"], capture_output=True,
                              text=True, check=True).stdout.split(":")[5]
        for account, path in (("ddp", home + "/.ssh/id_ed25519"), ("root", "/root/.ssh/id_ed25519"),
                              ("munge", "/etc/munge/munge.key")):
            data = node_file(node, path)
            if data:
                found.append(("%s:%s" % (node, path), data))
    controller_key = os.path.join(ROOT, ".cache", "local_cluster", "ssh", "ddp-mol", "id_ed25519")
    with open(controller_key, "rb") as handle:
        found.append(("controller:" + controller_key, handle.read()))
    needles = []
    for label, data in found:
        needles.append((label + " (base64)", base64.b64encode(data)))
        for line in data.splitlines():
            if len(line) >= 40 and not line.startswith(b"-----"):
                needles.append((label + " (key body line)", line.strip()))
        if not data.startswith(b"-----"):
            needles.append((label + " (raw)", data))
    return needles


def leaks(needles, roots, extra_text=""):
    """(needle label, file) for every needle found in a file under roots, or in extra_text."""
    hits = []
    paths = [os.path.join(d, f) for root in roots for d, _dirs, files in os.walk(root) for f in files]
    for path in paths + ["<runner output>"]:
        if path == "<runner output>":
            content = extra_text.encode("utf-8", "replace")
        else:
            with open(path, "rb") as handle:
                content = handle.read()
        hits.extend((label, path) for label, needle in needles if needle in content)
    return hits


def stats_event(pdd):
    events = []
    for path in glob.glob(os.path.join(pdd, "artifacts", IDENT, "job_events", "*.json")):
        with open(path, encoding="utf-8") as handle:
            event = json.load(handle)
        if event.get("event") == "playbook_on_stats":
            events.append(event)
    assert events, "no playbook_on_stats event in artifacts/%s/job_events" % IDENT
    return sorted(events, key=lambda e: e.get("counter", 0))[-1]


def test_site_yml_through_ansible_runner_keeps_the_benchmark_summary(tmp_path):
    pdd = make_private_data_dir(tmp_path)
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_ROLES_PATH", "ANSIBLE_INVENTORY",
                 "MOLECULE_PROJECT_DIRECTORY"):
        env.pop(name, None)
    start = time.time()
    proc = subprocess.run([RUNNER_BIN, "run", pdd, "-p", "site.yml", "--ident", IDENT],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=1200, check=False)
    elapsed = time.time() - start
    out = proc.stdout + proc.stderr

    artifacts = os.path.join(pdd, "artifacts", IDENT)
    with open(os.path.join(artifacts, "status"), encoding="utf-8") as handle:
        status = handle.read().strip()
    assert proc.returncode == 0 and status == "successful", "%s after %.0f s\n%s" % (status, elapsed, out[-5000:])

    stats = stats_event(pdd)["event_data"]
    assert not stats.get("failures") and not stats.get("dark"), stats
    summary = (stats.get("artifact_data") or {}).get("ddp_benchmark")
    assert summary, "set_stats did not reach the job's artifacts: %s" % sorted(stats.get("artifact_data") or {})
    assert summary["nodes"] == 2
    assert summary["processes"] == 2
    assert summary["samples_per_s"] > 0
    assert summary["backend"] == "gloo"
    assert os.path.isfile(summary["results"]) and summary["results"].startswith(pdd)
    # One health verdict per node reached the job's artifacts too (no GPU, no RDMA device here: warnings only).
    verdicts = (stats.get("artifact_data") or {}).get("ddp_health_verdicts") or {}
    assert sorted(verdicts) == ["ddp-mol1", "ddp-mol2"], verdicts
    assert all(v["verdict"] == "WARN" and {"NO_GPU", "NO_RDMA"} <= set(v["warnings"]) for v in verdicts.values()), verdicts

    # Nothing was written to, or read from, the (empty) home of the controller user.
    assert not os.path.exists(os.path.join(pdd, "home", ".ssh"))
    # The job ran the project's copy of the collection, not the clone.
    assert os.path.realpath(os.path.join(pdd, "project", "collections", "ansible_collections", "ddp", "cluster")) \
        == os.path.realpath(os.path.join(pdd, "project"))

    # No private key material in anything the job left: runner's stdout and job events (set_stats included),
    # the benchmark results, nor in what the Molecule side effect's benchmark wrote.
    needles = secrets()
    assert any("/.ssh/" in label for label, _n in needles), [label for label, _n in needles]
    planted = tmp_path / "planted"  # the search finds a key that is there
    planted.mkdir()
    (planted / "event.json").write_bytes(b'{"content": "' + needles[0][1] + b'"}')
    assert leaks(needles[:1], [str(planted)]) == [(needles[0][0], str(planted / "event.json"))]
    found = leaks(needles, [artifacts, os.path.join(pdd, "benchmark"), os.path.join(ROOT, "artifacts", "molecule")],
                  out)
    assert not found, "private key material in: %s" % sorted(set(found))
