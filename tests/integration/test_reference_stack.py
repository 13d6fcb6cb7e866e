"""The reference recipe's stack, for real, on the Molecule nodes (ddp-mol1, ddp-mol2).

torch 2.1.0 + torchvision 0.16.0 (PyPI's Linux wheels: CUDA 12.1 builds that run on CPU) and a Horovod 0.28.1
wheel built once against that torch (tools/reference_wheelhouse.sh, cached outside the checkout) go in as a second
environment (/opt/ddp/venv-ref, pytorch_env_primary false) through the controller's wheelhouse index; the second
run changes nothing. Then the benchmark runs on it across both nodes: torchvision's ResNet-50 under Horovod launched
by ``horovodrun --gloo`` with torchrun's rows beside it in one report, and Horovod launched by ``mpirun`` (OpenMPI
from Debian, over the cluster user's SSH trust). Last, a node that does not start under either launcher (its
environment gone, the cluster user's SSH key refused) is named within the run's timeout and nothing is left running.
The module removes the second environment from the nodes when it ends.
``make test`` leaves out the tests marked ``reference_full`` (the mpirun run, the node that cannot start under
mpirun or without its environment) for time; ``make reference-tests`` runs them all.
Skipped, saying why, when the Molecule nodes are not running.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

from checkout_env import checkout_env
from podman_nodes import running

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(ROOT, "molecule", "local", "inventory", "nodes")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = ("ddp-mol1", "ddp-mol2")
ENV_PATH = "/opt/ddp/venv-ref"
# Small enough for two shared cores: ResNet-50 at 32x32, batch 4, 1 + 3 steps.
BENCH = {"ddp_env_path": ENV_PATH, "ddp_benchmark_model": "resnet50", "ddp_benchmark_image_size": 32,
         "ddp_benchmark_batch_size": 4, "ddp_benchmark_warmup_steps": 1, "ddp_benchmark_steps": 3,
         "ddp_benchmark_variants": [], "ddp_benchmark_launcher": "horovod", "ddp_benchmark_timeout": 600}

pytestmark = pytest.mark.skipif(
    not all(running(n) for n in NODES),
    reason="the Molecule nodes ddp-mol1/ddp-mol2 are not running (make test starts them with molecule)",
)


def playbook(name, extra, timeout=1800):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    start = time.time()
    proc = subprocess.run([PLAYBOOK_BIN, "-i", INVENTORY, name, "-e", json.dumps(extra)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    return proc, time.time() - start


def failure(proc, tail=3000):
    """What a failed playbook said: the start of each failed task's result (its msg, rc and stderr come first in
    Ansible's output, before pip's long stdout), then the end of the output."""
    fatal = [line[:1500] for line in proc.stdout.splitlines() if re.match(r"^(fatal|failed): \[", line)]
    return "\n".join(fatal) + "\n...\n" + proc.stdout[-tail:] + proc.stderr[-2000:]


def recap(out):
    """{host: {ok, changed, failed, ...}} from a PLAY RECAP."""
    hosts = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M):
        hosts[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return hosts


@pytest.fixture(scope="module")
def wheelhouse():
    proc = subprocess.run([os.path.join(ROOT, "tools", "reference_wheelhouse.sh")], cwd=ROOT,
                          env=dict(os.environ, PYTHON=sys.executable), capture_output=True, text=True, timeout=3600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    path = proc.stdout.strip().splitlines()[-1]
    assert glob.glob(os.path.join(path, "horovod-0.28.1-*.whl")), os.listdir(path)
    return path


@pytest.fixture(scope="module")
def reference_env(wheelhouse):
    extra = {"ddp_env_path": ENV_PATH, "pytorch_env_primary": False, "ddp_torch_version": "2.1.0",
             "ddp_torchvision_version": "0.16.0", "ddp_cuda_version": "12.1", "pytorch_env_install_torchvision": True,
             "pytorch_env_wheelhouse": wheelhouse, "pytorch_env_extra_packages": ["numpy", "horovod==0.28.1"]}
    first, took = playbook("playbooks/pytorch_env.yml", extra)
    assert first.returncode == 0, failure(first)
    print("reference stack installed on %d nodes in %.0f s (playbook)" % (len(NODES), took))
    second, _took = playbook("playbooks/pytorch_env.yml", extra)
    assert second.returncode == 0, failure(second)
    counts = recap(second.stdout)
    assert set(NODES) <= set(counts) and all(counts[n]["changed"] == 0 for n in NODES), second.stdout[-3000:]
    yield extra
    # Nothing else uses the second environment (a non-primary one leaves /etc/ddp alone), and its CUDA builds are
    # several GB in the nodes' container layers: every later copy of a node (the day-2 tests commit one) would carry
    # them.
    for node in NODES:
        subprocess.run(["podman", "exec", node, "rm", "-rf", ENV_PATH, ENV_PATH + ".d"], capture_output=True,
                       text=True, check=True)


def node_python(node, code):
    proc = subprocess.run(["podman", "exec", node, ENV_PATH + "/bin/python", "-c", code], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_reference_stack_is_a_second_environment(reference_env):
    for node in NODES:
        # horovod.torch loads libmpi, which the benchmark role installs (OpenMPI): its build (Gloo and MPI
        # controllers) is checked by horovodrun --check-build in the next test's report.
        got = json.loads(node_python(node, "import json, importlib.metadata as m, numpy, torch, torchvision; "
                                           "print(json.dumps([torch.__version__, torch.version.cuda, "
                                           "torchvision.__version__, m.version('horovod'), numpy.__version__]))"))
        assert got[:4] == ["2.1.0+cu121", "12.1", "0.16.0+cu121", "0.28.1"], got
        assert got[4].startswith("1."), "torch 2.1 needs NumPy 1.x, got %s" % got[4]
        # the primary environment stays what ddp-env runs and what node_stack expects
        conf = subprocess.run(["podman", "exec", node, "cat", "/etc/ddp/env.conf", "/etc/ddp/expected/pytorch_env.json"],
                              capture_output=True, text=True, check=True).stdout
        assert "DDP_ENV_PATH=/opt/ddp/venv\n" in conf and '"torch": "2.13.0"' in conf, conf


def results(out):
    """The run directory's results.json and report.md the play wrote (the report task names the folder)."""
    found = re.findall(r"report: (/\S+/\d{8}T\d{6}Z)/report\.md", out)
    assert found, out[-3000:]
    with open(os.path.join(found[-1], "results.json")) as fh, open(os.path.join(found[-1], "report.md")) as md:
        return json.load(fh), md.read()


def test_horovodrun_gloo_resnet50_beside_torchrun(reference_env, tmp_path):
    extra = dict(BENCH, ddp_benchmark_horovod_controller="gloo", ddp_benchmark_compare_launchers=["torchrun"],
                 ddp_benchmark_results_dir=str(tmp_path))
    # horovodrun's services listen on random ports in 1024-65535: the access stage opens them (firewall_horovodrun)
    access, _took = playbook("playbooks/access.yml", {"ddp_benchmark_launcher": "horovod"})
    assert access.returncode == 0, access.stdout[-3000:]
    proc, took = playbook("playbooks/benchmark.yml", extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    report, markdown = results(proc.stdout)
    rows = {row["run"]: row for row in report["rows"]}
    assert set(rows) == {"1 process (horovod)", "1 node (horovod)", "all nodes (horovod)",
                         "1 process (torchrun)", "1 node (torchrun)", "all nodes (torchrun)"}, sorted(rows)
    for row in rows.values():
        assert row["model"].startswith("resnet50"), row["model"]
        assert row["torch"].startswith("2.1.0") and row["batch_size_per_process"] == 4
        assert row["global_images_per_s"] > 0
    assert rows["all nodes (horovod)"]["backend"] == "horovod+gloo" and rows["all nodes (horovod)"]["nodes"] == 2
    assert rows["all nodes (torchrun)"]["backend"] == "gloo" and rows["all nodes (torchrun)"]["processes"] == 2
    assert rows["all nodes (horovod)"]["speedup"] is not None and rows["all nodes (torchrun)"]["speedup"] is not None
    assert "all nodes (horovod)" in markdown and "all nodes (torchrun)" in markdown
    assert re.search(r"Horovod build \(`horovodrun --check-build` on the head\): v0\.28\.1; frameworks PyTorch; "
                     r"controllers Gloo, MPI", markdown), markdown
    print("horovodrun --gloo + torchrun, ResNet-50, 2 nodes: %.0f s; %s" % (took, "; ".join(
        "%s %.1f images/s" % (n, r["global_images_per_s"]) for n, r in sorted(rows.items()))))


@pytest.mark.reference_full
def test_mpirun_across_both_nodes(reference_env, tmp_path):
    extra = dict(BENCH, ddp_benchmark_horovod_controller="mpi", ddp_benchmark_scopes=["all_nodes"],
                 ddp_benchmark_results_dir=str(tmp_path))
    proc, took = playbook("playbooks/benchmark.yml", extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    report, _markdown = results(proc.stdout)
    (row,) = report["rows"]
    assert row["backend"] == "horovod+mpi", row
    assert row["nodes"] == 2 and row["processes"] == 2, row
    assert sorted(row["hosts"]) == sorted(NODES), row["hosts"]
    for node in NODES:
        left = subprocess.run(["podman", "exec", node, "pgrep", "-f", "ddp_bench.py|orted|mpirun"],
                              capture_output=True, text=True, check=False).stdout
        assert left.strip() == "", "left running on %s: %s" % (node, left)
    print("mpirun, ResNet-50, 2 nodes: %.0f s, %.1f images/s" % (took, row["global_images_per_s"]))


LEFT = "ddp_bench.py|orted|mpirun|horovodrun|horovod.runner"


def left_running(node):
    return subprocess.run(["podman", "exec", node, "pgrep", "-af", LEFT], capture_output=True, text=True,
                          check=False).stdout.strip()


SSH_OFF = "mv ~ddp/.ssh/authorized_keys ~ddp/.ssh/authorized_keys.off"
SSH_ON = "mv ~ddp/.ssh/authorized_keys.off ~ddp/.ssh/authorized_keys"
SSH_NAMED = r"- ddp-mol2: %s cannot start its ranks there: SSH from ddp-mol1 as\s+ddp fails \(auth_denied"
# (launcher, fault on ddp-mol2, its undo, what the failure must say about ddp-mol2)
FAULTS = {
    # the cluster user's key is no longer authorized on ddp-mol2: the launcher's SSH to it is refused
    "gloo-ssh": ("gloo", SSH_OFF, SSH_ON, SSH_NAMED % "horovodrun"),
    "mpi-ssh": ("mpi", SSH_OFF, SSH_ON, SSH_NAMED % "mpirun"),
    # no environment on ddp-mol2: refused before anything is launched (horovodrun --check-build on every node)
    "gloo-env": ("gloo", "mv %s %s.off" % (ENV_PATH, ENV_PATH), "mv %s.off %s" % (ENV_PATH, ENV_PATH),
                 r"- ddp-mol2: %s/bin/horovodrun --check-build failed" % ENV_PATH),
}


# make test keeps gloo-ssh (horovodrun names the node it cannot reach); mpi-ssh and gloo-env run in make
# reference-tests, with mpirun's own run above.
@pytest.mark.parametrize("fault", [pytest.param(f, marks=[pytest.mark.reference_full] if f != "gloo-ssh" else [])
                                   for f in sorted(FAULTS)])
def test_node_that_does_not_start_is_named_and_nothing_is_left(reference_env, tmp_path, fault):
    controller, inject, undo, named = FAULTS[fault]
    timeout = 120
    extra = dict(BENCH, ddp_benchmark_horovod_controller=controller, ddp_benchmark_scopes=["all_nodes"],
                 ddp_benchmark_results_dir=str(tmp_path), ddp_benchmark_timeout=timeout)
    subprocess.run(["podman", "exec", "ddp-mol2", "bash", "-c", inject], check=True)
    try:
        proc, took = playbook("playbooks/benchmark.yml", extra, timeout=timeout + 600)
    finally:
        subprocess.run(["podman", "exec", "ddp-mol2", "bash", "-c", undo], check=True)
    out = proc.stdout
    assert proc.returncode != 0, out[-4000:]
    assert re.search(named, out), out[-4000:]
    if fault.endswith("-ssh"):
        tool = "horovodrun" if controller == "gloo" else "mpirun"
        assert re.search(r"The DDP benchmark \S+ \(all nodes\) failed", out), out[-4000:]
        assert re.search(r"- ddp-mol1: %s exited \d+:\s+\w" % tool, out), out[-4000:]
        # what the launcher itself printed about ddp-mol2 (its SSH check, or ssh's own message under mpirun)
        assert re.search(r"- ddp-mol2: named by %s: .*Permission denied" % tool, out), out[-4000:]
    else:
        assert "Nothing was launched" in out, out[-4000:]
    assert took < timeout, "the play took %.0f s (run timeout %d s)" % (took, timeout)
    for node in NODES:
        assert left_running(node) == "", "left running on %s: %s" % (node, left_running(node))
    print("%s: failed in %.0f s (whole play), naming ddp-mol2" % (fault, took))
