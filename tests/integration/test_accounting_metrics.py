"""Job history in slurmdbd/MariaDB and cluster health in Prometheus, on the running nodes, end to end.

- ``sacct`` on the head lists the benchmark's Slurm jobs (the converge ran it) COMPLETED with their node lists, and a
  user's job submitted with the shipped job script (``ddp-torchrun.sbatch``) with its state; both are still there after
  a re-run of the stages that own them (scheduler.yml and metrics.yml, as site.yml runs them; with MariaDB stopped
  before it: the run names ``ACCOUNTING_DB_STOPPED``, starts it and changes nothing else) and after a restart of
  slurmdbd and MariaDB;
- the database password is in no output of that run (``-v``: every task's result unless no_log), in no file under
  ``artifacts/`` (reports, the health history) and in no converge log kept in ``.cache/*.log``; it is kept
  0600 on the controller and in slurmdbd.conf (owner slurm, 0600) on the accounting host;
- a wrong database password and a slurmdbd that cannot reach MariaDB are named from the node's real state and log
  (``ACCOUNTING_DB_AUTH``, ``ACCOUNTING_DB_UNREACHABLE``) by the same judgement the role uses;
- Prometheus's HTTP API (queried on the head): every node's exporter up and its ddp-health verdict healthy, no alert;
  then the burn-in tier (``ddp_health_level=burnin``) with the second node's CPU capped (``podman update --cpus``):
  BURNIN_SLOW names that node and no other, the all-reduce runs without it, Slurm drains it ``ddp:BURNIN_SLOW``, its
  health metric turns unhealthy within one scrape interval of the health stage's end and DdpNodeUnhealthy and
  DdpNodeDrainedByUs fire; uncapped, a burn-in run passes (every node's product identical, nothing claims DCGM ran on
  nodes without it), resumes the node and clears both alerts. (One burn-in fault serves the Slurm drain and the
  metrics: it is the slowest health run of the suite.)

Nodes and inventory come from the environment, with the Molecule values as defaults (``make test``):
``DDP_IT_NODES=ddp-mx1,ddp-mx2,ddp-mx3`` (head first), ``DDP_IT_INVENTORY=.cache/inv-ddp-mx``,
``DDP_IT_BURNIN_CPUS`` (the throttled node's CPU quota, 0.2). Without running nodes,
or without accounting on them, the tests are skipped, saying why (``DDP_FAIL_ON_SKIP=1`` turns a skip into a failure).
Each test restores what it changed.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import quote

import pytest

from ansible_collections.ddp.cluster.plugins.module_utils.slurm import accounting as slurm_accounting
from checkout_env import checkout_env
from podman_nodes import running, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = tuple(os.environ.get("DDP_IT_NODES", "ddp-mol1,ddp-mol2").split(","))
HEAD, SECOND = NODES[0], NODES[1]
INVENTORY = os.environ.get("DDP_IT_INVENTORY", os.path.join(ROOT, "molecule", "local", "inventory", "nodes"))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PROMETHEUS = "http://127.0.0.1:9090"
SCRAPE_S = 15          # metrics_scrape_interval_s's default
# The second node's CPU quota for the burn-in fault (podman update --cpus; 0.2 made it the slow node here); on a
# machine whose load already keeps every node below that share, a lower one (e.g. 0.05) makes it the slow one.
BURNIN_CPUS = os.environ.get("DDP_IT_BURNIN_CPUS", "0.2")
CLUSTER = "ddp"        # slurm_cluster_name's default
PASSWORD_FILE = os.path.expanduser("~/.ansible/ddp.cluster/%s-%s-slurmdbd.password" % (CLUSTER, HEAD))
# The role's one read of the accounting host (roles/slurm/tasks/accounting_read.yml), run here as it runs there.
READ = ("systemctl show --property=Id,ActiveState,UnitFileState mariadb.service slurmdbd.service; "
        "echo '--- sacctmgr'; timeout 10 sacctmgr -n -P show cluster format=cluster 2>&1; echo \"rc=$?\"; "
        "echo '--- log'; tail -n 40 /var/log/slurm/slurmdbd.log 2>/dev/null; exit 0")


def podman_exec(node, *argv, check=True, stdin=None):
    return subprocess.run(["podman", "exec", "-i", node] + list(argv), capture_output=True, text=True, check=check,
                          input=stdin)


def _accounting_on():
    return podman_exec(HEAD, "sacctmgr", "-n", "-P", "show", "cluster", "format=cluster", check=False).stdout.strip() \
        == CLUSTER


pytestmark = [
    pytest.mark.skipif(not all(running(n) for n in NODES),
                       reason="the nodes %s are not running (make test starts ddp-mol1/ddp-mol2)" % ", ".join(NODES)),
    pytest.mark.skipif(not all(running(n) for n in NODES) or not _accounting_on(),
                       reason="no Slurm accounting on %s (ddp_scheduler: slurm, slurm_accounting: true)" % HEAD),
]


def run_playbook(*args, timeout=1500):
    """ansible-playbook -i INVENTORY <args> (options, then one or more playbooks) in the checkout."""
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    return subprocess.run([PLAYBOOK_BIN, "-i", INVENTORY] + list(args), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def sacct(*jobs):
    """{job id: record} of sacct on the head (module_utils/slurm/accounting.parse_sacct), every user's jobs."""
    argv = ["sacct", "-a", "-X", "-n", "-P", "-S", "now-7days", "-o", ",".join(slurm_accounting.SACCT_FIELDS)]
    if jobs:
        argv.append("--jobs=" + ",".join(jobs))
    return slurm_accounting.parse_sacct(podman_exec(HEAD, *argv).stdout)


def hostnames(nodelist):
    return podman_exec(HEAD, "scontrol", "show", "hostnames", nodelist).stdout.split()


def prom(path):
    """GET <Prometheus>/<path> on the head (it listens there only) -> the JSON answer's data."""
    out = podman_exec(HEAD, "python3", "-c", "import sys, urllib.request; "
                      "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                      PROMETHEUS + path).stdout
    answer = json.loads(out)
    assert answer["status"] == "success", answer
    return answer["data"]


def query(expr):
    """{instance: value} of an instant query, for the nodes under test (Debian's first configuration, replaced by the
    role's, scraped localhost:9100 for a moment: that series fades out within Prometheus's 5-minute look-back)."""
    result = prom("/api/v1/query?query=" + quote(expr))["result"]
    return {r["metric"].get("instance"): float(r["value"][1]) for r in result if r["metric"].get("instance") in NODES}


def firing(name):
    return sorted(a["labels"].get("instance") for a in prom("/api/v1/alerts")["alerts"]
                  if a["labels"]["alertname"] == name and a["state"] == "firing")


def node_state(node):
    out = podman_exec(HEAD, "sinfo", "-h", "-N", "-n", node, "-o", "%T|%E").stdout.strip()
    return tuple(out.split("|", 1)) if out else ("", "")


HELLO = """import os, socket
import torch.distributed as dist
dist.init_process_group("gloo")
print("HELLO rank=%d world_size=%d host=%s" % (dist.get_rank(), dist.get_world_size(), socket.gethostname()), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def test_jobs_are_in_sacct_and_survive_a_rerun_and_restarts(tmp_path):
    # The converge's benchmark ran its matrix as Slurm jobs (ddp_benchmark_launcher: slurm with ddp_scheduler: slurm).
    # The jobs of the last matrix (job names ddp-bench-<matrix id>-<run>), whose report the converge wrote.
    matrices = sorted(set(m.group(1) for m in (re.match(r"^ddp-bench-(\d{8}T\d{6}Z)-", r["job_name"])
                                               for r in sacct().values()) if m))
    assert matrices, "no benchmark job in sacct: %r" % sacct()
    bench = {j: r for j, r in sacct().items() if r["job_name"].startswith("ddp-bench-%s-" % matrices[-1])}
    assert all(r["state"] == "COMPLETED" and r["nodes"] and r["elapsed_s"] is not None for r in bench.values()), bench
    assert any(sorted(hostnames(r["nodes"])) == sorted(NODES) for r in bench.values()), bench
    # A user's job with the shipped job script, on every node.
    for node in NODES:  # torchrun starts it on every node of the job: the same path everywhere
        podman_exec(node, "sh", "-c", "cat > /home/ddp/hello_acct.py && chown ddp: /home/ddp/hello_acct.py", stdin=HELLO)
    proc = podman_exec(HEAD, "su", "-", "ddp", "-c",
                       "cd /home/ddp && sbatch --wait --parsable --job-name=user-hello -N%d --ntasks-per-node=1 "
                       "--time=5 /opt/ddp/bin/ddp-torchrun.sbatch hello_acct.py" % len(NODES), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    user_job = proc.stdout.strip().split(";")[0]
    assert wait_until(lambda: user_job in sacct(user_job), 30), sacct(user_job)
    record = sacct(user_job)[user_job]
    assert record["state"] == "COMPLETED" and record["job_name"] == "user-hello", record
    assert sorted(hostnames(record["nodes"])) == sorted(NODES), record
    before = sacct(*(list(bench) + [user_job]))

    # A re-run of the stages, with MariaDB stopped before it: named with its code, started again, nothing lost.
    podman_exec(HEAD, "systemctl", "stop", "mariadb")
    rerun = run_playbook("-v", "playbooks/scheduler.yml", "playbooks/metrics.yml")
    out = rerun.stdout + rerun.stderr
    (tmp_path / "rerun.log").write_text(out)
    assert rerun.returncode == 0, out[-4000:]
    assert "[ACCOUNTING_DB_STOPPED] MariaDB on %s" % HEAD in out, out[-4000:]
    # Only MariaDB's start on the head is a change (a recap after each playbook, counting from the start of the run:
    # the last one per host is the run's).
    changed = dict((host, int(c)) for host, c in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", out, re.M))
    assert changed.get(HEAD) == 1 and all(changed[n] == 0 for n in NODES[1:]), changed
    assert podman_exec(HEAD, "systemctl", "is-active", "mariadb", "slurmdbd").stdout.split() == ["active", "active"]
    assert sacct(*before) == before

    # A restart of both daemons: the history is in the database, not in a daemon.
    podman_exec(HEAD, "systemctl", "restart", "mariadb", "slurmdbd")
    assert wait_until(_accounting_on, 60, 2)
    assert sacct(*before) == before

    # The password: in no output of the re-run (-v shows every task's result unless no_log), no file under artifacts/.
    with open(PASSWORD_FILE) as handle:
        password = handle.read().strip()
    assert len(password) >= 32
    assert password not in out
    # artifacts/ (reports, health history) and the logs of converges kept in .cache/ (make test's, your own)
    kept = [os.path.join(ROOT, "artifacts")] + glob.glob(os.path.join(ROOT, ".cache", "*.log"))
    leaks = subprocess.run(["grep", "-rlF", "--", password] + [p for p in kept if os.path.exists(p)],
                           capture_output=True, text=True, check=False).stdout
    assert leaks == "", leaks
    assert os.stat(PASSWORD_FILE).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(PASSWORD_FILE)).st_mode & 0o777 == 0o700
    assert podman_exec(HEAD, "stat", "-c", "%U %a", "/etc/slurm/slurmdbd.conf").stdout.split() == ["slurm", "600"]


def _judged():
    return [p["code"] for p in slurm_accounting.problems(podman_exec(HEAD, "sh", "-c", READ).stdout, HEAD)]


def test_wrong_password_and_unreachable_database_are_named():
    """The faults as the node shows them (units, sacctmgr, slurmdbd's log), judged as the role judges them."""
    assert _judged() == []
    with open(PASSWORD_FILE) as handle:
        password = handle.read().strip()
    conf = podman_exec(HEAD, "cat", "/etc/slurm/slurmdbd.conf").stdout
    try:
        # MariaDB's user gets another password than slurmdbd.conf's (through stdin: never on a command line).
        podman_exec(HEAD, "mariadb", stdin="ALTER USER 'slurm'@'localhost' IDENTIFIED BY 'not-the-password';\n")
        podman_exec(HEAD, "systemctl", "restart", "slurmdbd")
        assert wait_until(lambda: _judged() == ["ACCOUNTING_DB_AUTH"], 60, 2), _judged()
        podman_exec(HEAD, "mariadb", stdin="ALTER USER 'slurm'@'localhost' IDENTIFIED BY '%s';\n" % password)
        # slurmdbd pointed at a MariaDB that is not there (TCP to a closed port).
        podman_exec(HEAD, "sh", "-c", "sed -i 's/^StorageHost=.*/StorageHost=127.0.0.1\\nStoragePort=3399/' "
                    "/etc/slurm/slurmdbd.conf")
        podman_exec(HEAD, "systemctl", "restart", "slurmdbd")
        assert wait_until(lambda: _judged() == ["ACCOUNTING_DB_UNREACHABLE"], 60, 2), _judged()
    finally:
        podman_exec(HEAD, "mariadb", stdin="ALTER USER 'slurm'@'localhost' IDENTIFIED BY '%s';\n" % password)
        podman_exec(HEAD, "sh", "-c", "cat > /etc/slurm/slurmdbd.conf", stdin=conf)
        podman_exec(HEAD, "systemctl", "restart", "slurmdbd")
    assert wait_until(lambda: _judged() == [], 60, 2), _judged()


def test_prometheus_sees_every_node_healthy_and_a_throttled_node_unhealthy_until_resumed():
    assert wait_until(lambda: query('up{job="node"}') == {n: 1.0 for n in NODES}, 3 * SCRAPE_S), \
        query('up{job="node"}')
    assert query('ddp_health_healthy{source="ddp-health"}') == {n: 1.0 for n in NODES}
    for alert in ("DdpNodeUnhealthy", "DdpNodeDrainedByUs", "DdpHealthCheckStale", "DdpNodeExporterDown"):
        assert firing(alert) == [], (alert, prom("/api/v1/alerts"))
    # The burn-in tier: the capped node's matmul TFLOPS fall far below the median of the nodes' CPUs (at 0.1 core
    # everything else on the node, Ansible's modules and the stack probe's torch import, became slow enough for the
    # probe to time out once). The floor is 0.5 here: nodes sharing this machine's 2 cores vary by tens of per cent.
    burnin = ("-e", "ddp_health_level=burnin", "-e", "ddp_health_burnin_seconds=4", "-e", "ddp_health_burnin_size=256",
              "-e", "ddp_health_burnin_min_ratio=0.5")
    unhealthy = 'ddp_health_healthy{source="health-stage",instance="%s"}' % SECOND
    assert wait_until(lambda: node_state(SECOND)[0] == "idle", 180, 3), node_state(SECOND)
    subprocess.run(["podman", "update", "--cpus", BURNIN_CPUS, SECOND], capture_output=True, check=True)
    try:
        proc = run_playbook(*burnin, "playbooks/health.yml")
        out = proc.stdout + proc.stderr
        found = re.findall(r"\[BURNIN_SLOW\][^\n]*", out)
        assert proc.returncode != 0 and "Health errors on %s: BURNIN_SLOW" % SECOND in out, (found, out[-2000:])
        ended = time.time()
        assert re.search(r"\[BURNIN_SLOW\] \(error\) %s CPU 0: .* TFLOPS, \d+%% of the median of the %d"
                         % (re.escape(SECOND), len(NODES)), out), (found, out[-3000:])
        assert [n for n in NODES if "[BURNIN_SLOW] (error) %s " % n in out] == [SECOND], found
        assert re.search(r"all-reduce across %d ranks" % (len(NODES) - 1), out), out[-3000:]
        assert node_state(SECOND) == ("drained", "ddp:BURNIN_SLOW"), node_state(SECOND)
    finally:
        subprocess.run(["podman", "update", "--cpus", str(os.cpu_count()), SECOND], capture_output=True, check=True)
    try:
        assert wait_until(lambda: query(unhealthy) == {SECOND: 0.0}, SCRAPE_S + 2, 0.5), query(unhealthy)
        took = time.time() - ended
        print("unhealthy in Prometheus %.1f s after the health stage ended (scrape interval %d s)" % (took, SCRAPE_S))
        assert query('ddp_health_problem{code="BURNIN_SLOW",instance="%s"}' % SECOND) == {SECOND: 1.0}
        assert wait_until(lambda: firing("DdpNodeUnhealthy") == [SECOND], 2 * SCRAPE_S + 5), prom("/api/v1/alerts")
        assert wait_until(lambda: firing("DdpNodeDrainedByUs") == [SECOND], 2 * SCRAPE_S + 5), prom("/api/v1/alerts")
        healthy = run_playbook(*burnin, "playbooks/health.yml")
        out = healthy.stdout + healthy.stderr
        assert healthy.returncode == 0, out[-3000:]
        passed = re.findall(r"(%s) [^\\\n]*? #0: [0-9.]+ TFLOPS \(\d+%% of the median\), product identical"
                            % "|".join(map(re.escape, NODES)), out)
        assert sorted(passed) == sorted(NODES), out[-3000:]
        # the GPU counters were read before and after (no GPU here: nothing to compare), and DCGM is not installed on
        # these nodes: neither says anything, and nothing claims DCGM ran
        assert "BURNIN_GPU_ERRORS" not in out and "DCGM_DIAG" not in out and "dcgmi diag -r 2 ran on" not in out
        assert "Read the GPU error counters and Xids before the stress" in out
        assert node_state(SECOND)[0].rstrip("*") == "idle" and node_state(SECOND)[1] in ("", "none"), \
            node_state(SECOND)
        assert wait_until(lambda: query(unhealthy) == {SECOND: 1.0}, SCRAPE_S + 2, 0.5), query(unhealthy)
        assert wait_until(lambda: firing("DdpNodeUnhealthy") == [] and firing("DdpNodeDrainedByUs") == [],
                          2 * SCRAPE_S + 5), prom("/api/v1/alerts")
    finally:
        podman_exec(HEAD, "scontrol", "update", "NodeName=%s" % SECOND, "State=RESUME", check=False)
