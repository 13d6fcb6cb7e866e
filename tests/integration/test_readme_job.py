"""The README's own-job commands, taken from README.md as written, on running nodes with Slurm.

The section "Your own training jobs (Slurm)" holds train.py, the commands run from the clone (copy train.py to every
node with the ansible command; then log in to the head node) and the commands run on the head node (ddp-submit,
squeue; sinfo). This test writes train.py into the clone, runs the clone's commands there with the nodes' inventory,
runs the head's commands as root in a login shell on the head node, then follows the job the way the section says
(scontrol show job: state, BatchHost, StdOut) and reads its output on its first node: rank 0's line from train.py
with the world size of every node. The login line itself (ssh -F ... to the demo's head) is the only line not run:
the test reaches the head node with podman exec.

Nodes and inventory come from the environment, the Molecule ones by default (make test leaves them running):
DDP_IT_NODES=<head>,<node>... (head first, container names = inventory names), DDP_IT_INVENTORY=<inventory folder>.
Skipped when the nodes are not running or have no Slurm (fails instead under DDP_FAIL_ON_SKIP=1, as in make test).
It removes what it wrote: train.py in the clone, and train.py and the job's output file on the nodes.
"""
from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from checkout_env import checkout_env
from podman_nodes import running
from readme_blocks import own_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = tuple(n for n in os.environ.get("DDP_IT_NODES", "ddp-mol1,ddp-mol2").split(",") if n)
INVENTORY = os.environ.get("DDP_IT_INVENTORY", os.path.join(ROOT, "molecule", "local", "inventory", "nodes"))
HEAD = NODES[0]
# The job takes about a minute on 2 idle cores (torch is imported on every node); the limit leaves room for a
# loaded machine.
JOB_TIMEOUT = 300
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL")


def _slurm_on_nodes():
    proc = subprocess.run(["podman", "exec", HEAD, "sinfo", "-h"], capture_output=True, text=True, check=False)
    return proc.returncode == 0


pytestmark = [
    pytest.mark.skipif(not all(running(n) for n in NODES),
                       reason="the nodes %s are not running (make test starts the Molecule ones)" % ", ".join(NODES)),
    pytest.mark.skipif(not all(running(n) for n in NODES) or not _slurm_on_nodes(),
                       reason="Slurm is not set up on %s (ddp_scheduler: slurm, scheduler stage)" % HEAD),
]


def podman_exec(node, *argv, stdin=None, check=False):
    return subprocess.run(["podman", "exec", "-i", node] + list(argv), input=stdin, capture_output=True, text=True,
                          check=check, timeout=300)


def scontrol_job(job):
    """``{field: value}`` of ``scontrol show job <job>`` on the head ({} once Slurm has forgotten it)."""
    out = podman_exec(HEAD, "scontrol", "show", "job", job).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


@pytest.fixture
def readme():
    """The README's blocks, train.py written into the clone as the section says (removed afterwards)."""
    blocks = own_job()
    script = os.path.join(ROOT, "train.py")
    if os.path.exists(script):
        pytest.fail("%s exists already: the test writes the README's train.py there; move yours away" % script)
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(blocks["script"])
    written = []
    try:
        yield blocks, written
    finally:
        os.remove(script)
        podman_exec(HEAD, "scancel", "--user=ddp", "--name=ddp-torchrun")  # a job a failed assertion left
        for node in NODES:
            podman_exec(node, "rm", "-f", *written)


def test_readme_own_job_runs_as_written(readme):
    blocks, written = readme
    start = time.time()
    # From the clone: every command but the login line, with this cluster's inventory in place of the default.
    clone = [c for c in blocks["controller"] if not c.startswith("ssh ")]
    assert len(clone) == len(blocks["controller"]) - 1 and any("train.py" in c for c in clone), blocks["controller"]
    env = checkout_env(ANSIBLE_INVENTORY=INVENTORY, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
                       MOLECULE_PROJECT_DIRECTORY=ROOT)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(clone)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    dest = re.search(r"dest=(\S+)", " ".join(clone)).group(1)
    written.append(dest)
    for node in NODES:
        owner = podman_exec(node, "stat", "-c", "%U", dest).stdout.strip()
        assert owner == "ddp", (node, dest, owner)

    # On the head node, as root in a login shell, as after the README's ssh line.
    head = podman_exec(HEAD, "bash", "-l", "-euo", "pipefail", "-s", stdin="\n".join(blocks["head"]) + "\n")
    assert head.returncode == 0, head.stdout + head.stderr
    job = re.search(r"^ddp-submit: job (\d+) as ddp: %d node\(s\)" % len(NODES), head.stdout, re.M)
    assert job, head.stdout + head.stderr
    job = job.group(1)
    assert re.search(r"^ddp-submit: output: /home/ddp/slurm-%s\.out, " % job, head.stdout, re.M), head.stdout
    assert re.search(r"^ddp-submit: follow: squeue -j %s; scontrol show job %s; tail -f " % (job, job),
                     head.stdout, re.M), head.stdout
    assert "JOBID" in head.stdout and "PARTITION" in head.stdout  # squeue's and sinfo's headers

    # Follow it as the section says: scontrol show job (state, BatchHost, StdOut), then its output on that node.
    deadline = time.time() + JOB_TIMEOUT
    info = scontrol_job(job)
    while info.get("JobState") not in ENDED and time.time() < deadline:
        time.sleep(2)
        info = scontrol_job(job)
    stuck = ""
    if info.get("JobState") not in ENDED:
        # what each node was doing when the bound ran out (the processes, the qdiscs a fault test may have left)
        for node in NODES:
            stuck += "--- %s\n%s%s\n" % (node, podman_exec(node, "ps", "-eo", "pid,stat,etime,args").stdout,
                                         podman_exec(node, "tc", "qdisc", "show").stdout)
        podman_exec(HEAD, "scancel", job)
    written.append(info.get("StdOut", "/home/ddp/slurm-%s.out" % job))
    output = podman_exec(info.get("BatchHost", HEAD), "cat", info.get("StdOut", "")).stdout
    assert info.get("JobState") == "COMPLETED" and info.get("ExitCode") == "0:0", \
        "%s\n--- the job's output\n%s\n%s" % (info, output, stuck)
    assert info["UserId"].startswith("ddp(") and info["NumNodes"] == str(len(NODES)), info
    assert info["BatchHost"] == HEAD, info  # the first node of a job that has every node
    # ddp-torchrun.sbatch's say(): "ddp-torchrun: HH:MM:SS job N on NODES: ...".
    assert re.search(r"^ddp-torchrun: \d\d:\d\d:\d\d job %s on " % job, output, re.M), output
    assert re.search(r"^train\.py: 20 steps on %d processes, last loss \d+\.\d{4}$" % len(NODES), output, re.M), output
    assert time.time() - start < JOB_TIMEOUT + 120
