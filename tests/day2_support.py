"""What the day-2 cluster tests share (tests/integration/test_day2_*.py): which nodes, the inventory they write,
playbook runs, Slurm jobs and the tasks a run changed on each node.

The nodes come from the environment, with the Molecule nodes as defaults, so that CI runs the tests on ddp-mol1/2
and a developer on a local cluster of their own:

- ``DDP_IT_NODES``: the converged nodes, head first (default ``ddp-mol1,ddp-mol2``);
- ``DDP_IT_GROUP_VARS``: the group_vars file they were converged with (default the Molecule scenario's);
- ``DDP_IT_EXTRA``: the name of the node the tests add, replace and remove (default ``ddp-mol3``);
- ``DDP_IT_LABEL``: the podman label value the extra node carries so that the scenario's destroy removes it after an
  interrupted run (default ``molecule``).

The tests reach every node with the podman connection (an inventory written per run, as test_pairwise_faults.py
does); SSH between the nodes is the collection's own, with host keys checked.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

from checkout_env import checkout_env
from podman_nodes import running

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = tuple(n for n in os.environ.get("DDP_IT_NODES", "ddp-mol1,ddp-mol2").split(",") if n)
HEAD = NODES[0]
GROUP_VARS = os.environ.get("DDP_IT_GROUP_VARS",
                            os.path.join(ROOT, "molecule", "local", "inventory", "nodes", "group_vars", "ddp_nodes.yml"))
EXTRA = os.environ.get("DDP_IT_EXTRA", "ddp-mol3")
LABEL = os.environ.get("DDP_IT_LABEL", "molecule")
JOB_SCRIPT = os.path.join(ROOT, "tests", "integration", "files", "day2_job.py")
USER = "ddp"


def nodes_running():
    return all(running(n) for n in NODES)


def podman(*argv, check=True, **kwargs):
    return subprocess.run(["podman"] + list(argv), capture_output=True, text=True, check=check, **kwargs)


def on(node, *argv, check=True, user=None):
    """Run argv on a node (as root, or as ``user``)."""
    return podman("exec", *(["--user", user] if user else []), node, *argv, check=check)


def slurm_on_nodes():
    return nodes_running() and on(HEAD, "sinfo", "-h", check=False).returncode == 0


def write_inventory(folder, nodes):
    """A directory inventory: every node over the podman connection, the head first, the group_vars the nodes were
    converged with. Returns its path."""
    folder = str(folder)
    os.makedirs(os.path.join(folder, "group_vars"), exist_ok=True)
    shutil.copyfile(GROUP_VARS, os.path.join(folder, "group_vars", "ddp_nodes.yml"))
    hosts = "".join("        %s: {}\n" % n for n in nodes)
    with open(os.path.join(folder, "hosts.yml"), "w") as handle:
        handle.write("all:\n  vars:\n    ansible_connection: containers.podman.podman\n"
                     "    ansible_python_interpreter: /usr/bin/python3\n"
                     "  children:\n    ddp_nodes:\n      hosts:\n%s    ddp_head:\n      hosts:\n        %s: {}\n"
                     % (hosts, nodes[0]))
    return folder


def playbook(name, inventory, *args, timeout=1500):
    """Run ``ansible-playbook`` from the checkout; returns (returncode, output, seconds)."""
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    start = time.time()
    proc = subprocess.run([PLAYBOOK_BIN, "-i", inventory] + list(args) + [name], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout + proc.stderr, time.time() - start


def recap(out):
    """{host: {ok, changed, failed, ...}} from the PLAY RECAP."""
    hosts = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M):
        hosts[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return hosts


def changed_tasks(out, node):
    """The names of the tasks that changed something on ``node``: run on it, or delegated to it from another."""
    names, task = [], None
    for line in out.splitlines():
        header = re.match(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \**$", line)
        if header:
            task = header.group(1)
            continue
        hit = re.match(r"^changed: \[(\S+?)(?: -> (\S+?))?\]", line)
        if hit and task and (hit.group(2) or hit.group(1)).split("(")[0] == node and task not in names:
            names.append(task)
    return names


def wait_until(predicate, timeout, step=2.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def srun_everywhere(nodes, bound=None):
    """(exit status, sorted short host names) of a one-task srun on each of ``nodes``, as the cluster user; srun is
    stopped after ``bound`` seconds when given."""
    proc = on(HEAD, *(["timeout", str(bound)] if bound else []), "srun", "-N", str(len(nodes)),
              "--ntasks-per-node=1", "--time=2", "hostname", "-s", user=USER, check=False)
    return proc.returncode, sorted(proc.stdout.split())


def settled(nodes, bound=120):
    """Until a one-task srun on every node of ``nodes`` answers within 10 s, at most ``bound`` s; True once it does.

    After a node container is removed (and after daemons restart) a step launch can stall for a while (podman's
    DNS, through which the nodes find each other by name, answers late and the resolver falls back on timeouts):
    the tests that follow start on a cluster that runs a job at once."""
    return wait_until(lambda: srun_everywhere(nodes, 10) == (0, sorted(nodes)), bound)


def node_states():
    """{node: (state, reason)} from sinfo on the head."""
    out = on(HEAD, "sinfo", "-h", "-N", "-o", "%N|%T|%E").stdout
    return {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.splitlines() if line.strip())}


def put_job_script(nodes):
    """The training job, owned by the cluster user, in its home on every node (no shared storage here)."""
    for node in nodes:
        podman("cp", JOB_SCRIPT, "%s:/home/%s/day2_job.py" % (node, USER))
        on(node, "chown", "%s:%s" % (USER, USER), "/home/%s/day2_job.py" % USER)


def sbatch(*args):
    """Submit as the cluster user on the head; returns the job id."""
    out = on(HEAD, "sbatch", "--parsable", "--chdir=/home/%s" % USER, *args, user=USER).stdout.strip()
    return out.split(";")[0]


STOP_FILE = "/home/%s/day2-stop" % USER


def train_job(nodes, seconds, *extra):
    """A torchrun job (ddp-torchrun.sbatch) of day2_job.py on ``nodes`` nodes, for at most ``seconds`` or until
    :func:`stop_jobs`; its output is in the user's home on its batch host."""
    return sbatch("-N", str(nodes), "--output=/home/%s/day2-%%j.out" % USER, *extra,
                  "/opt/ddp/bin/ddp-torchrun.sbatch", "/home/%s/day2_job.py" % USER, "--seconds", str(seconds),
                  "--stop-file", STOP_FILE)


def stop_jobs(nodes):
    """Ask the running training jobs to finish (rank 0 sees the file on its node; all ranks stop at one step)."""
    for node in nodes:
        on(node, "touch", STOP_FILE, user=USER)


def allow_jobs(nodes):
    for node in nodes:
        on(node, "rm", "-f", STOP_FILE)


def job(jobid):
    """{JobState, ExitCode, NodeList, BatchHost, Reason, ...} of ``scontrol show job -o``; once slurmctld has let the
    job go (MinJobAge, 300 s after it ended), {JobState, ExitCode, NodeList, BatchHost} from the job's record in
    slurmdbd (``sacct``: the allocation's line, and its batch step's node as BatchHost)."""
    out = on(HEAD, "scontrol", "show", "job", "-o", jobid, check=False).stdout
    found = dict(re.findall(r"(\w+)=(\S*)", out))
    if found.get("JobState"):
        return found
    out = on(HEAD, "sacct", "-n", "-P", "-j", jobid, "-o", "JobID,State,ExitCode,NodeList", check=False).stdout
    for line in out.splitlines():
        fields = line.split("|")
        if len(fields) != 4:
            continue
        if fields[0] == jobid:
            # "CANCELLED by 1000": the state is the first word
            found.update(JobState=fields[1].split()[0] if fields[1] else "", ExitCode=fields[2], NodeList=fields[3])
        elif fields[0] == jobid + ".batch":
            found["BatchHost"] = fields[3]
    return found


ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def job_done(jobid, timeout):
    wait_until(lambda: job(jobid).get("JobState") in ENDED, timeout, 3)
    return job(jobid)


def job_output(jobid, host):
    return on(host, "cat", "/home/%s/day2-%s.out" % (USER, jobid), check=False).stdout
