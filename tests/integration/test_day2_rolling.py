"""Rolling maintenance and a re-run under running jobs (README "Day 2"), on the converged nodes (``DDP_IT_NODES``,
the Molecule nodes by default; tests/day2_support.py).

1. ``rolling.yml`` (one node per batch, every stage: no ``--tags``) moves the training environment to another stack
   (``DDP_IT_ROLL_TO``: extra vars as JSON; by default the same torch with one more package, ``six``: the local
   wheelhouse holds one CPU torch build) while a torchrun job runs on every node: each batch is drained
   (``ddp:maintenance``), its jobs waited for, every role of site.yml run on it (the batch is a run limited to its
   node: the SSH check, the firewall zones and slurm.conf also reach the nodes outside it), the stack built in a
   folder of its own and switched to, ddp-health run, the node resumed. The long job completes
   with exit 0, a job queued during the rollout runs, every node ends on the new stack, the summary says so.
2. A node of the first batch that fails its health check (its Gloo interface names none it has) stays drained with
   its code (``ddp:IFNAME_NOT_FOUND``), the rollout stops there (``DAY2_ROLLOUT_STOPPED``) and the later batches are
   not touched.
3. ``pytorch_env.yml`` back to the first stack while a job runs on the second: the job keeps the folder it started
   from and completes (exit 0); the folder stays while the job uses it, and the next run, once it has ended,
   removes it. The nodes end on the stack they started with.

Skipped, saying why, when the nodes are not running.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from day2_support import (HEAD, NODES, PLAYBOOK_BIN, ROOT, allow_jobs, checkout_env, job, job_done, job_output,
                          node_states, on, playbook, podman, put_job_script, sbatch, settled, slurm_on_nodes,
                          stop_jobs, train_job, wait_until,
                          write_inventory)

NEW_STACK = json.loads(os.environ.get("DDP_IT_ROLL_TO", '{"pytorch_env_extra_packages": ["numpy", "six"]}'))
ROLL = ["-e", "ddp_rolling_batch=1", "-e", "ddp_drain_timeout=600"]
# The rollout that stops after its first batch: the training environment's stage alone.
ROLL_ENV = ["--tags", "pytorch_env", *ROLL]
TIMES = {}

# make test runs these after the other cluster tests (tests/conftest.py), make day2-tests alone on fresh nodes.
pytestmark = [pytest.mark.day2,
              pytest.mark.skipif(not slurm_on_nodes(),
                                 reason="the nodes %s are not running with Slurm (make test and make day2-tests "
                                        "start the Molecule nodes)" % ", ".join(NODES))]


def folder(node):
    return on(node, "readlink", "-f", "/opt/ddp/venv").stdout.strip()


@pytest.fixture(scope="module")
def roll(tmp_path_factory):
    assert settled(NODES), "a job step on %s did not start within 10 s for 120 s" % ", ".join(NODES)
    inventory = write_inventory(tmp_path_factory.mktemp("rolling"), list(NODES))
    put_job_script(NODES)
    before = {n: folder(n) for n in NODES}
    assert all(f.startswith("/opt/ddp/venv.d/") for f in before.values()), before
    try:
        yield {"inventory": inventory, "before": before}
    finally:
        print("\nrolling timings (s): %s" % json.dumps({k: round(v) for k, v in TIMES.items()}))


def test_rolling_update_keeps_the_long_job_and_runs_the_queued_one(roll):
    allow_jobs(NODES)
    long_job = train_job(len(NODES), 60)
    assert wait_until(lambda: job(long_job).get("JobState") == "RUNNING", 120), job(long_job)
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    start = time.time()
    rollout = subprocess.Popen([PLAYBOOK_BIN, "-i", roll["inventory"], *ROLL, "-e", json.dumps(NEW_STACK),
                                "playbooks/rolling.yml"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        # queued while the first batch is drained for maintenance
        assert wait_until(lambda: node_states()[NODES[0]][1] == "ddp:maintenance", 300), node_states()
        queued = sbatch("-N", "1", "--wrap", "srun hostname")
        out = rollout.communicate(timeout=1800)[0]
    finally:
        if rollout.poll() is None:
            rollout.kill()
    TIMES["rolling update, %d nodes one by one" % len(NODES)] = time.time() - start
    assert rollout.returncode == 0, out[-6000:]
    done = job_done(long_job, 60)
    assert done["JobState"] == "COMPLETED" and done["ExitCode"] == "0:0", done
    ranks = [json.loads(line) for line in job_output(long_job, done["BatchHost"]).splitlines() if line.startswith("{")]
    assert len(ranks) == len(NODES) and all(r["ok"] for r in ranks), ranks
    assert job_done(queued, 120)["JobState"] == "COMPLETED", job(queued)
    after = {n: folder(n) for n in NODES}
    assert len(set(after.values())) == 1 and set(after.values()).isdisjoint(roll["before"].values()), after
    assert "rolling: every batch done" in out, out[-3000:]
    # every stage ran on every batch, the SSH check of each batch from the nodes outside it too
    checked = re.findall(r"^TASK \[ddp\.cluster\.ssh_trust : Check SSH from the nodes outside this run.*\n+"
                         r"(?:\[WARNING\].*\n+)*ok: ", out, re.M)
    assert len(checked) == len(NODES), out[-6000:]
    for node in NODES:
        assert re.search(r"%s: torch \S+ in %s," % (node, os.path.basename(after[node])), out), out[-3000:]
        assert node_states()[node] == ("idle", "none"), node_states()
    roll["new"] = after


def test_a_node_that_fails_its_health_check_stops_the_rollout(roll):
    first, later = NODES[0], NODES[1:]
    settings = on(first, "cat", "/etc/ddp/health.json").stdout
    bad = json.loads(settings)
    bad["roce"]["gloo_socket_ifname"] = "nosuch0"
    podman("exec", "-i", first, "sh", "-c", "cat > /etc/ddp/health.json", input=json.dumps(bad))
    try:
        # the stack the nodes are on (the new one once the first test ran): nothing to install, the batches only
        stack = ["-e", json.dumps(NEW_STACK)] if "new" in roll else []
        rc, out, took = playbook("playbooks/rolling.yml", roll["inventory"], *ROLL_ENV, *stack)
        TIMES["rolling update stopped after its first batch"] = took
        assert rc != 0 and "[DAY2_ROLLOUT_STOPPED] %s failed the quick health tier" % first in out, out[-4000:]
        state, reason = node_states()[first]
        assert state.startswith("drain") and reason == "ddp:IFNAME_NOT_FOUND", (state, reason)
        batches = out.split("PLAY [Rolling | which node")[0]
        for node in later:
            # never drained, no task of the batch play ran for it
            assert node_states()[node] == ("idle", "none"), node_states()
            assert not re.search(r"^(ok|changed|skipping): \[%s[\] ]" % re.escape(node), batches, re.M), batches[-3000:]
    finally:
        podman("exec", "-i", first, "sh", "-c", "cat > /etc/ddp/health.json", input=settings)
        on(HEAD, "scontrol", "update", "NodeName=%s" % first, "State=RESUME", check=False)
    assert wait_until(lambda: node_states()[first][0] == "idle", 60), node_states()


def test_a_rerun_switches_the_environment_under_a_running_job(roll):
    assert "new" in roll, "the rolling update did not run"
    allow_jobs(NODES)
    running = train_job(len(NODES), 3600)
    assert wait_until(lambda: job(running).get("JobState") == "RUNNING", 120), job(running)
    time.sleep(5)  # torch imported on every rank
    rc, out, took = playbook("playbooks/pytorch_env.yml", roll["inventory"])
    TIMES["pytorch_env.yml back to the first stack under a job"] = took
    assert rc == 0, out[-6000:]
    for node in NODES:
        assert folder(node) == roll["before"][node], node
    assert "stays while processes" in out, out[-4000:]
    assert job(running).get("JobState") == "RUNNING", job(running)
    stop_jobs(NODES)
    done = job_done(running, 300)
    assert done["JobState"] == "COMPLETED" and done["ExitCode"] == "0:0", done
    ranks = [json.loads(line) for line in job_output(running, done["BatchHost"]).splitlines() if line.startswith("{")]
    assert ranks and all(r["ok"] and r["folder"] == roll["new"][NODES[0]] for r in ranks), ranks
    rc, out, took = playbook("playbooks/pytorch_env.yml", roll["inventory"])
    TIMES["pytorch_env.yml removing the unused stack"] = took
    assert rc == 0, out[-6000:]
    for node in NODES:
        assert on(node, "test", "-e", roll["new"][node], check=False).returncode == 1, node
        assert on(node, "ls", "/opt/ddp/venv.d").stdout.split() == [os.path.basename(roll["before"][node])]
