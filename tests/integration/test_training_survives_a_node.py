"""A user's training job loses a node: the shipped job script and training script, end to end under Slurm.

On the running nodes (the Molecule pair ddp-mol1/ddp-mol2 by default; ``DDP_IT_NODES=a,b,c`` head first for another
cluster, e.g. the 3 nodes of ``local_cluster_name_prefix=ddp-el``), as the cluster user, with the checkpoints on the
nodes' shared storage (``DDP_IT_SHARED_DIR``, default /srv/ddp-shared: the podman volume local_cluster mounts):

- refusals before any training: a checkpoint folder that only the first node sees, and ``DDP_ELASTIC=3:2``;
- a node container stopped (``podman stop``) in the middle of a job of ddp_train.py with a checkpoint every K steps:
  the job names the node, lets it go, requeues itself onto the nodes left, resumes from its last checkpoint and
  finishes every step, with at most K steps replayed; Slurm marks the node down with a reason;
- the same in elastic mode (``DDP_ELASTIC=<n-1>:<n>``, ``--no-kill``): torchrun goes on with the nodes left, without a
  requeue;
- a node frozen (``podman pause``): the job ends within the hang timeout and the time it takes the job script to ask
  each node (bounded), and its log names that node.

Each prints the time from the node loss to the training running again and the steps replayed (``-s`` shows them).
The last node of DDP_IT_NODES is the one lost (never the head: its loss ends the batch script, and Slurm requeues the
job itself once it declares the node down). Every node is started again and resumed in Slurm afterwards.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from podman_nodes import running, systemd_up

NODES = tuple(os.environ.get("DDP_IT_NODES", "ddp-mol1,ddp-mol2").split(","))
HEAD, LOST = NODES[0], NODES[-1]
SHARED = os.environ.get("DDP_IT_SHARED_DIR", "/srv/ddp-shared")
USER = os.environ.get("DDP_IT_USER", "ddp")
BIN = "/opt/ddp/bin"
LOGS = SHARED + "/ddp-it-training"
K = 10  # steps between checkpoints
STEPS = 60
HANG = 20  # DDP_HANG_TIMEOUT of the frozen-node test
TRAIN = ["%s/ddp_train.py" % BIN, "--steps", str(STEPS), "--checkpoint-every", str(K), "--step-delay", "0.4",
         "--batch-size", "4", "--synthetic-samples", "400", "--image-size", "8", "--workers", "0", "--log-every", "10"]


def podman(*argv, check=True, timeout=120):
    return subprocess.run(["podman"] + list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def on_head(*argv, user=None, check=True):
    return podman("exec", *(["-u", user] if user else []), HEAD, *argv, check=check)


def _slurm_ready():
    if not all(running(n) for n in NODES):
        return False
    proc = subprocess.run(["podman", "exec", HEAD, "test", "-x", BIN + "/ddp_train.py"], capture_output=True,
                          check=False)
    return proc.returncode == 0 and subprocess.run(["podman", "exec", HEAD, "sinfo", "-h"], capture_output=True,
                                                   check=False).returncode == 0


pytestmark = pytest.mark.skipif(
    not _slurm_ready(), reason="nodes %s not running with Slurm and ddp_train.py (make test converges the Molecule "
                               "nodes; DDP_IT_NODES names others)" % ",".join(NODES))


def node_state(node):
    """(state, reason) of one node in sinfo."""
    out = on_head("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E", check=False).stdout.strip().splitlines()
    return tuple(out[0].split("|", 1)) if out else ("missing", "")


def wait_until(predicate, timeout, step=1.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return None


def job_state(job):
    out = on_head("scontrol", "show", "job", "-o", job, check=False).stdout
    match = re.search(r"JobState=(\S+)", out)
    return match.group(1) if match else "GONE"


def submit(name, env, sbatch_opts, program=None):
    """Submit the job script as the cluster user; returns (job id, its log path)."""
    log = "%s/%s-%%j.out" % (LOGS, name)
    exports = ",".join(["ALL"] + ["%s=%s" % kv for kv in sorted(env.items())])
    out = on_head("sbatch", "--parsable", "--job-name", name, "--output", log, "--export", exports,
                  *sbatch_opts, BIN + "/ddp-torchrun.sbatch", *(program or TRAIN), user=USER).stdout.strip()
    job = out.split(";")[0]
    assert job.isdigit(), out
    return job, log.replace("%j", job)


def read(path):
    return on_head("cat", path, check=False).stdout


def progress(job):
    try:
        return json.loads(on_head("cat", "%s/checkpoints/%s/progress.json" % (SHARED, job), check=False).stdout)
    except ValueError:
        return None


def restore(node):
    """Start the node again (or thaw it), and wait until Slurm takes jobs on it."""
    if podman("container", "inspect", "-f", "{{.State.Status}}", node, check=False).stdout.strip() == "paused":
        podman("unpause", node, check=False)
    if not running(node):
        podman("start", node, check=False)
        systemd_up(node)  # and if it does not boot, the wait for Slurm below fails the test with the node's state

    # ReturnToService=2 returns a node that registers again; a node still down (or drained by the job's loss)
    # is resumed here so the next test has every node.
    def idle():
        state = node_state(node)[0]
        if state.startswith(("down", "drain")) and not state.endswith("*"):
            on_head("scontrol", "update", "NodeName=%s" % node, "State=RESUME", check=False)
        return node_state(node)[0] in ("idle", "mixed", "allocated")
    assert wait_until(idle, 150, 2), "%s did not come back into Slurm: %s" % (node, node_state(node))


@pytest.fixture(scope="module", autouse=True)
def logs_folder():
    on_head("install", "-d", "-o", USER, "-m", "0755", LOGS)
    yield
    for node in NODES:
        restore(node)
    jobs = on_head("squeue", "-h", "-u", USER, "-n", "ddp-it-train,ddp-it-elastic,ddp-it-frozen", "-o", "%A",
                   check=False).stdout.split()
    if jobs:
        on_head("scancel", *jobs, check=False)


def wait_for_step(job, step, timeout=480):
    """Until the job reached ``step`` (progress.json). Generous: torch's start on nodes that share 2 busy cores
    takes minutes; the bounds the tests are about are asserted apart."""
    return wait_until(lambda: (progress(job) or {}).get("step", 0) >= step, timeout, 0.5)


def lose_node_mid_run(job):
    """Stop LOST once the job is past its first checkpoint and half-way to the next; returns the time of the loss
    and the last step before it."""
    assert wait_for_step(job, K + K // 2), read_log_of(job)
    before = progress(job)["step"]
    podman("stop", LOST)
    return time.time(), before


def read_log_of(job):
    out = on_head("sh", "-c", "cat %s/*-%s.out" % (LOGS, job), check=False)
    return out.stdout[-4000:]


def running_again(job, world, since):
    """The time of the first step the job took with ``world`` processes after ``since`` (progress.json), or None."""
    data = progress(job)
    if data and data.get("world_size") == world and data["time"] > since:
        return data
    return None


def done_line(log):
    found = re.findall(r"done: (\d+) steps, world size (\d+) \(this run from step (\d+)\), (\d+) steps replayed "
                       r"since the last checkpoint \((\d+) restarts?\), ([0-9.]+) samples/s", log)
    assert found, log[-4000:]
    return [int(x) for x in found[-1][:5]]


def test_checkpoint_folder_not_shared_and_elastic_min_above_max_are_refused():
    # /var/lib/ddp-it-local exists on the head only: the other nodes do not see what the head writes there.
    on_head("install", "-d", "-o", USER, "-m", "0755", "/var/lib/ddp-it-local")
    try:
        local, local_log = submit("ddp-it-local", {"DDP_SHARED_DIR": "/var/lib/ddp-it-local"}, ["-N", str(len(NODES))])
        elastic, elastic_log = submit("ddp-it-elastic", {"DDP_ELASTIC": "3:2"}, ["-N", "2"])
        assert wait_until(lambda: job_state(local) in ("FAILED", "GONE") and job_state(elastic) in ("FAILED", "GONE"),
                          120), (job_state(local), job_state(elastic))
    finally:
        on_head("rm", "-rf", "/var/lib/ddp-it-local")
    log = read(local_log)
    others = ", ".join(sorted(NODES[1:]))
    assert "ddp-torchrun: the checkpoint folder /var/lib/ddp-it-local/checkpoints/%s is not on storage every node " \
           "shares: %s did not see the file %s wrote there" % (local, others, HEAD) in " ".join(log.split()), log
    assert "set ddp_shared_dir (DDP_SHARED_DIR) to a folder every node mounts" in " ".join(log.split()), log
    assert "ddp_train" not in log, log  # refused before torchrun started
    log = read(elastic_log)
    assert "ddp-torchrun: DDP_ELASTIC=3:2: MIN must be at least 1 and at most MAX" in log, log
    assert "ddp_train" not in log, log


def run_through_a_loss(name, env, sbatch_opts, mode, lost_node_down=False):
    """Submit, stop LOST mid-run, wait for the training to run again on the nodes left and for the job to finish
    (COMPLETED once LOST is back).

    Prints the time from the loss to the first step on the nodes left and the steps replayed; returns (job, log).
    """
    n = len(NODES)
    job, log_path = submit(name, dict(env, DDP_HANG_TIMEOUT="60"), sbatch_opts)
    try:
        assert wait_until(lambda: job_state(job) == "RUNNING", 300), job_state(job)
        lost_at, before = lose_node_mid_run(job)
        again = wait_until(lambda: running_again(job, n - 1, lost_at), 600, 0.5)
        assert again, read_log_of(job)
        # The batch script has ended once the job is COMPLETING (its exit status is known; COMPLETED below).
        assert wait_until(lambda: job_state(job) in ("COMPLETING", "COMPLETED") and "done: " in read(log_path), 420,
                          2), (job_state(job), read_log_of(job))
        log = read(log_path)
        steps, world, start, replayed, restarts = done_line(log)
        print("\n%s: node %s stopped after step %d; training running again after %.0f s at step %d on %d nodes; "
              "resumed from step %d, %d steps replayed" % (mode, LOST, before, again["time"] - lost_at, again["step"],
                                                           n - 1, start, replayed))
        assert (steps, world, restarts) == (STEPS, n - 1, 1), log[-3000:]
        # The checkpoint before the loss (podman stop lets the node run a few more steps while it shuts down).
        assert start % K == 0 and start >= before // K * K and 0 <= replayed <= K, log[-3000:]
        if lost_node_down:  # Slurm declares it down (not responding), with a reason, SlurmdTimeout after the loss
            found = wait_until(lambda: node_state(LOST) if node_state(LOST)[0].startswith("down") else None, 200)
            assert found and found[1], (node_state(LOST), log[-3000:])
            print("%s: node %s is %s (%s)" % (mode, LOST, found[0], found[1]))
        elif job_state(job) == "COMPLETING":
            # With --no-kill (elastic) the job stays COMPLETING on LOST until Slurm declares it down (SlurmdTimeout
            # after the loss) or, once it is back, resends the job's terminate (about 100 s after the job's end
            # here): marked down, as an admin does with a node that holds a job in COMPLETING, then started again
            # and resumed (restore).
            on_head("scontrol", "update", "NodeName=%s" % LOST, "State=DOWN", "Reason=ddp-it: stopped by the test")
        restore(LOST)
        assert wait_until(lambda: job_state(job) == "COMPLETED", 120, 2), (job_state(job), read_log_of(job))
        return job, log
    finally:
        restore(LOST)


def test_a_stopped_node_is_requeued_and_training_resumes():
    n = len(NODES)
    job, log = run_through_a_loss("ddp-it-train", {}, ["-N", str(n)], "requeue", lost_node_down=True)
    assert "node %s stopped answering" % LOST in log, log[-3000:]
    assert "job %s now holds the %d node(s) that answer" % (job, n - 1) in log, log[-3000:]
    assert "requeueing job %s (1 of 3)" % job in log, log[-3000:]


def test_a_stopped_node_in_elastic_mode_goes_on_with_the_nodes_left():
    n = len(NODES)
    _job, log = run_through_a_loss("ddp-it-elastic", {"DDP_ELASTIC": "%d:%d" % (n - 1, n)}, ["-N", str(n), "--no-kill"],
                                   "elastic")
    assert "requeueing" not in log, log[-3000:]


def test_a_frozen_node_ends_the_job_within_the_hang_timeout_and_is_named():
    n = len(NODES)
    job, log_path = submit("ddp-it-frozen", {"DDP_HANG_TIMEOUT": str(HANG), "DDP_MAX_REQUEUE": "0"},
                           ["-N", str(n)])
    try:
        assert wait_until(lambda: job_state(job) == "RUNNING", 300), job_state(job)
        assert wait_for_step(job, 5), read_log_of(job)
        podman("pause", LOST)
        paused_at = time.time()
        named = wait_until(lambda: "node %s stopped answering" % LOST in read(log_path), HANG + 150, 1)
        took = time.time() - paused_at
        log = read(log_path)
        assert named, log[-3000:]
        # The survivors' collectives time out after HANG s; srun then stops the step (Slurm's KillWait, 30 s) and
        # the job script gives each node 20 s to answer.
        assert took < HANG + 30 + 20 + 30, (took, log[-3000:])
        assert "not requeued: requeued 0 times already (DDP_MAX_REQUEUE=0)" in log, log[-3000:]
        print("\nfrozen: node %s paused; the job log named it after %.0f s (hang timeout %d s)" % (LOST, took, HANG))
    finally:
        restore(LOST)
        on_head("scancel", job, check=False)
