"""Day 2 on a running cluster, one history under running jobs: a refused shrink, grow, replace, a returning node that
fails its health check, shrink (README "Day 2").

The converged nodes (``DDP_IT_NODES``, the Molecule nodes by default; see tests/day2_support.py) and a node the test
adds (``DDP_IT_EXTRA``, ddp-mol3 by default): a copy of the last node made a machine of its own without any cluster
state (new host keys, no munge key, Slurm configuration, cluster user keys, /opt/ddp or /etc/ddp:
files/day2_blank_node.sh), as a node reinstalled from the site's OS image.

1. ``shrink.yml`` naming the head is refused by the validate stage and changes nothing on the nodes.
2. Grow: with a job running on every node and a second one pending behind it, the extra node is added to the
   inventory and ``site.yml --limit <extra>`` runs with a changed Slurm setting (``MaxJobCount``, which needs a
   restart): slurmctld is restarted with slurmd stopped around it, both jobs complete (exit 0), the new node joins
   drained until its health check passes, and a job on every node, the new one included, runs. The old nodes'
   changed tasks are only the cluster's files and the daemons that read them (printed).
3. Replace: the extra node is destroyed and created again under its name (a new host key) while a job runs; a run
   limited to it installs the munge key and slurm.conf, every old node's known_hosts holds the new key and not the
   old one, SSH with host keys checked works both ways, the job completes, a job on every node runs.
4. A returning node (slurmd starting again, as after a reboot) that fails its health check (a Gloo interface it
   lacks) is drained with its code (``ddp-health:IFNAME_NOT_FOUND``) before slurmd registers, and resumed by the same
   check once healthy.
5. Shrink: the extra node, running a job, is drained, its job waited for, and removed: gone from sinfo and from every
   slurm.conf (the head's is the one from before the test), its old cluster key refused by every other node, its
   address gone from their firewall zones and known_hosts, and a job on the remaining nodes runs.

Timings of each operation are printed (run with -s). Skipped, saying why, when the nodes are not running.
"""
from __future__ import annotations

import json
import os
import re
import time

import pytest

from day2_support import (EXTRA, HEAD, LABEL, NODES, USER, allow_jobs, changed_tasks, job, job_done, job_output,
                          node_states, on, playbook, podman, put_job_script, sbatch, settled, slurm_on_nodes,
                          srun_everywhere, stop_jobs, train_job, wait_until,
                          write_inventory)
from podman_nodes import system_state, systemd_up

IMAGE = "localhost/ddp-day2-node:test"
BLANK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files", "day2_blank_node.sh")
# A setting whose change needs a restart of slurmctld (slurm.conf(5)): given to the grow and replace runs, not to
# shrink, so that the cluster ends with the slurm.conf it started with.
CHANGED = json.dumps({"slurm_extra_config": {"MaxJobCount": "20000"}})
LIMITED = ["--skip-tags", "health,benchmark"]
# DDP_IT_BLANK_KEEPS_ENV=1: the blank node keeps the environment's stack folders (no torch install: make test sets
# it, for time; make day2-tests does not)
KEEP_ENV = os.environ.get("DDP_IT_BLANK_KEEPS_ENV") == "1"
TIMES = {}

# make test runs these after the other cluster tests (tests/conftest.py), make day2-tests alone on fresh nodes.
pytestmark = [pytest.mark.day2,
              pytest.mark.skipif(not slurm_on_nodes(),
                                 reason="the nodes %s are not running with Slurm (make test and make day2-tests "
                                        "start the Molecule nodes)" % ", ".join(NODES))]


def sha(node, path):
    return on(node, "sha256sum", path, check=False).stdout.split(" ")[0]


def host_key(node):
    return " ".join(on(node, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[:2])


def known_hosts(node):
    return on(node, "cat", "/home/%s/.ssh/known_hosts" % USER, check=False).stdout


def address(node):
    return on(node, "hostname", "-I").stdout.split()[0]


def make_extra(network):
    """The extra node, created from the image and made a blank machine; returns its host key."""
    podman("rm", "-f", "-t", "0", EXTRA, check=False)
    podman("run", "-d", "--name", EXTRA, "--hostname", EXTRA, "--network", network, "--runtime", "runc",
           "--systemd=always", "--shm-size", "1g", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
           "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW", "--cap-add", "SYS_PTRACE",
           "--label", "ddp.cluster=%s" % LABEL,
           "--label", "ddp.cluster.service=day2-test", "--label", "ddp.cluster.head=false", IMAGE, "/sbin/init")
    # until systemd has booted, or the blank script's systemctl calls fail (podman_nodes.systemd_up says why)
    assert systemd_up(EXTRA), "%s: systemd did not boot: %r" % (EXTRA, system_state(EXTRA))
    podman("cp", BLANK, "%s:/root/day2_blank_node.sh" % EXTRA)
    blank = on(EXTRA, "bash", "-x", "/root/day2_blank_node.sh", *(["keep-env"] if KEEP_ENV else []), check=False)
    assert blank.returncode == 0, (blank.returncode, blank.stdout[-2000:], blank.stderr[-4000:])
    return host_key(EXTRA)


def assert_extra_in_service():
    """The extra node idle in Slurm, and a job step on every node, the extra one included."""
    assert wait_until(lambda: node_states().get(EXTRA, ("",))[0] == "idle", 60), node_states()
    rc, names = srun_everywhere(list(NODES) + [EXTRA])
    assert rc == 0 and names == sorted(list(NODES) + [EXTRA]), names


@pytest.fixture(scope="module")
def day2(tmp_path_factory):
    network = podman("container", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}",
                     NODES[-1]).stdout.strip()
    podman("rm", "-f", "-t", "0", EXTRA, check=False)
    podman("commit", "-q", NODES[-1], IMAGE)
    base = write_inventory(tmp_path_factory.mktemp("base"), list(NODES))
    grown = write_inventory(tmp_path_factory.mktemp("grown"), list(NODES) + [EXTRA])
    put_job_script(NODES)
    state = {"network": network, "base": base, "grown": grown, "conf_sha": sha(HEAD, "/etc/slurm/slurm.conf")}
    try:
        yield state
    finally:
        print("\nday 2 timings (s): %s" % json.dumps({k: round(v) for k, v in TIMES.items()}))
        gone = EXTRA not in node_states()
        podman("rm", "-f", "-t", "0", EXTRA, check=False)
        podman("rmi", "-f", IMAGE, check=False)
        if not gone or sha(HEAD, "/etc/slurm/slurm.conf") != state["conf_sha"]:
            # a failed step left the extra node in the cluster: the base nodes' configuration back
            playbook("playbooks/access.yml", base)
            playbook("playbooks/scheduler.yml", base)
        assert settled(NODES), "a job step on %s did not start within 10 s for 120 s after the test" % ", ".join(NODES)


def test_a_refused_shrink_changes_nothing(day2):
    before = {n: (sha(n, "/etc/slurm/slurm.conf"), sha(n, "/home/%s/.ssh/authorized_keys" % USER)) for n in NODES}
    states = node_states()
    rc, out, took = playbook("playbooks/shrink.yml", day2["base"], "-e", json.dumps({"ddp_shrink_nodes": [HEAD]}))
    TIMES["refused shrink"] = took
    assert rc != 0 and "[VALIDATE_SHRINK] ddp_shrink_nodes:" in out and "is the head node" in out, out[-3000:]
    assert {n: (sha(n, "/etc/slurm/slurm.conf"), sha(n, "/home/%s/.ssh/authorized_keys" % USER)) for n in NODES} == before
    assert node_states() == states


def test_grow_by_a_run_limited_to_the_new_node_keeps_the_running_and_pending_jobs(day2):
    allow_jobs(NODES)
    running = train_job(len(NODES), 3600)
    assert wait_until(lambda: job(running).get("JobState") == "RUNNING", 120), job(running)
    pending = sbatch("-N", str(len(NODES)), "--dependency=afterok:%s" % running, "--wrap", "srun hostname")
    assert job(pending).get("JobState") == "PENDING", job(pending)
    start = time.time()
    make_extra(day2["network"])
    rc, out, took = playbook("site.yml", day2["grown"], "--limit", EXTRA, *LIMITED, "-e", CHANGED)
    TIMES["grow: new node ready"] = time.time() - start
    TIMES["grow: site.yml --limit"] = took
    assert rc == 0, out[-6000:]
    assert re.search(r"slurm: restart \(nodes added: %s" % EXTRA, out), out[-6000:]
    assert "joining, drained until their health check passes: %s" % EXTRA in out, out[-6000:]
    for node in NODES:
        changed = changed_tasks(out, node)
        print("grow: %d task(s) changed on %s: %s" % (len(changed), node, "; ".join(changed)))
        # only the cluster's files (known_hosts, authorized_keys' from= list of addresses, the firewall zone's
        # sources, the Slurm files), the daemons that read them, and on the head the drains around the restart and
        # the new node's join
        assert all(re.search(r"known_hosts|Authorize the key from the cluster's addresses on the nodes outside|"
                             r"missing sources|slurm\.conf|slurmd|slurmctld|Drain the nodes new|"
                             r"Hold the nodes|Resume the nodes held|Resume the joining nodes", t)
                   for t in changed), changed
    assert job(running).get("JobState") == "RUNNING", job(running)
    stop_jobs(NODES)
    done = job_done(running, 300)
    assert done["JobState"] == "COMPLETED" and done["ExitCode"] == "0:0", done
    ranks = [json.loads(line) for line in job_output(running, done["BatchHost"]).splitlines() if line.startswith("{")]
    assert len(ranks) == len(NODES) and all(r["ok"] and r["steps"] > 0 for r in ranks), ranks
    after = job_done(pending, 120)
    assert after["JobState"] == "COMPLETED" and after["ExitCode"] == "0:0", after
    assert_extra_in_service()


def test_replace_under_the_same_name_renews_the_host_key_everywhere(day2):
    old_key = host_key(EXTRA)
    allow_jobs(NODES)
    busy = train_job(len(NODES), 3600, "-w", ",".join(NODES))
    assert wait_until(lambda: job(busy).get("JobState") == "RUNNING", 120), job(busy)
    start = time.time()
    podman("rm", "-f", "-t", "0", EXTRA)
    new_key = make_extra(day2["network"])
    assert new_key != old_key
    rc, out, took = playbook("site.yml", day2["grown"], "--limit", EXTRA, *LIMITED, "-e", CHANGED)
    TIMES["replace: back in service"] = time.time() - start
    TIMES["replace: site.yml --limit"] = took
    assert rc == 0, out[-6000:]
    assert "joining, drained until their health check passes: %s" % EXTRA in out, out[-6000:]
    for node in NODES:
        hosts = known_hosts(node)
        assert new_key in hosts and old_key not in hosts, (node, hosts)
        # host keys checked both ways, as the cluster user
        for src, dst in ((node, EXTRA), (EXTRA, node)):
            proc = on(src, "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", dst, "hostname", "-s",
                      user=USER, check=False)
            assert proc.returncode == 0 and proc.stdout.strip() == dst, (src, dst, proc.stderr)
    assert sha(EXTRA, "/etc/munge/munge.key") == sha(HEAD, "/etc/munge/munge.key")
    assert sha(EXTRA, "/etc/slurm/slurm.conf") == sha(HEAD, "/etc/slurm/slurm.conf")
    assert job(busy).get("JobState") == "RUNNING", job(busy)
    stop_jobs(NODES)
    done = job_done(busy, 300)
    assert done["JobState"] == "COMPLETED" and done["ExitCode"] == "0:0", done
    assert_extra_in_service()


def test_a_returning_node_that_fails_its_health_check_stays_out_with_its_code(day2):
    """slurmd starting again (a reboot, a node back after a loss) runs the health check before it registers (the
    role's ExecStartPre drop-in): a failing node is drained with its code by the time slurmd has started."""
    settings = on(EXTRA, "cat", "/etc/ddp/health.json").stdout
    bad = json.loads(settings)
    bad["roce"]["gloo_socket_ifname"] = "nosuch0"
    on(EXTRA, "systemctl", "stop", "slurmd")
    podman("exec", "-i", EXTRA, "sh", "-c", "cat > /etc/ddp/health.json", input=json.dumps(bad))
    try:
        on(EXTRA, "systemctl", "start", "slurmd")
        state, reason = node_states()[EXTRA]
        assert state.startswith("drain") and reason == "ddp-health:IFNAME_NOT_FOUND", (state, reason)
        assert on(HEAD, "srun", "-N1", "-w", EXTRA, "--immediate=5", "true", user=USER, check=False).returncode != 0
    finally:
        podman("exec", "-i", EXTRA, "sh", "-c", "cat > /etc/ddp/health.json", input=settings)
    on(EXTRA, "systemctl", "restart", "slurmd")  # healthy again: the check resumes its own drain
    assert wait_until(lambda: node_states().get(EXTRA, ("",))[0] == "idle", 60), node_states()


def test_shrink_waits_for_the_job_and_revokes_the_node_everywhere(day2):
    addr = address(EXTRA)
    last = sbatch("-N", "1", "-w", EXTRA, "--wrap", "sleep 20")
    assert wait_until(lambda: job(last).get("JobState") == "RUNNING", 60), job(last)
    rc, out, took = playbook("playbooks/shrink.yml", day2["grown"], "-e",
                             json.dumps({"ddp_shrink_nodes": [EXTRA], "ddp_drain_timeout": 300}))
    TIMES["shrink"] = took
    assert rc == 0, out[-6000:]
    assert job(last).get("JobState") == "COMPLETED", job(last)
    assert re.search(r"slurm: restart \(nodes removed: %s" % EXTRA, out), out[-6000:]
    assert EXTRA not in node_states()
    assert sha(HEAD, "/etc/slurm/slurm.conf") == day2["conf_sha"]
    for node in NODES:
        assert sha(node, "/etc/slurm/slurm.conf") == day2["conf_sha"], node
        assert EXTRA not in known_hosts(node) and addr not in known_hosts(node), node
        sources = on(node, "firewall-cmd", "--permanent", "--zone=ddp-cluster", "--list-sources", check=False).stdout
        assert addr not in sources.split(), (node, sources)
        # the cluster key the removed node still holds opens no account on the others
        proc = on(EXTRA, "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", node, "true", user=USER,
                  check=False)
        assert proc.returncode == 255 and "Permission denied" in proc.stderr, (node, proc.stderr)
    rc, names = srun_everywhere(list(NODES))
    assert rc == 0 and names == sorted(NODES), names
