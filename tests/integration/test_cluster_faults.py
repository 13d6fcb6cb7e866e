"""Faults injected on the running Molecule nodes (ddp-mol1, ddp-mol2), checked end to end.

These need the nodes that `molecule test -s local` leaves running (``make test`` runs them in
between and destroys the nodes afterwards). Without those nodes they are skipped, saying why.
Each test restores what it broke.
"""
from __future__ import annotations

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


pytestmark = pytest.mark.skipif(
    not all(running(n) for n in NODES),
    reason="the Molecule nodes ddp-mol1/ddp-mol2 are not running (make test starts them with molecule)",
)


def podman_exec(node, *argv, check=True):
    return subprocess.run(["podman", "exec", node] + list(argv), capture_output=True, text=True, check=check)


def run_playbook(playbook, *extra, timeout=600):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    cmd = [PLAYBOOK_BIN, "-i", INVENTORY] + list(extra) + [playbook]
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return proc, time.time() - start


def bench_processes(node):
    out = podman_exec(node, "ps", "-eo", "args", check=False).stdout
    return [line for line in out.splitlines() if "ddp_bench" in line or "torchrun" in line]


def test_rendezvous_port_blocked_on_one_node_is_named_by_the_launch_preflight():
    """C03: the head's firewall rejects one node; the check names that node and port within 30 s."""
    addr = podman_exec("ddp-mol2", "hostname", "-I").stdout.split()[0]
    podman_exec("ddp-mol1", "firewall-cmd", "--zone=ddp-cluster", "--remove-source=%s" % addr)
    try:
        proc, elapsed = run_playbook("playbooks/benchmark.yml", "-e", "preflight_listen_timeout=15",
                                     "-e", "ddp_benchmark_launcher=torchrun")
    finally:
        podman_exec("ddp-mol1", "firewall-cmd", "--reload")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"ddp-mol2 -> ddp-mol1:29400:\s+\[firewall_reject\]", out), out[-3000:]
    assert "ddp-mol1 -> " not in out.split("not reachable from every node")[-1].split("Fix:")[0]
    assert "Launch torchrun" not in out
    assert elapsed < 60


def test_node_that_does_not_join_is_named_and_nothing_is_left(tmp_path):
    """A node whose torchrun cannot start: the run fails within the join timeout, names it, leaves no process."""
    broken = tmp_path / "broken.ini"
    broken.write_text("[ddp_nodes]\nddp-mol2 ddp_env_path=/nonexistent-venv\n")
    proc, elapsed = run_playbook("playbooks/benchmark.yml", "-i", str(broken), "-e", "ddp_benchmark_launcher=torchrun",
                                 "-e", "ddp_benchmark_join_timeout=20", "-e", "ddp_benchmark_timeout=120")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "The DDP benchmark" in out and "failed" in out, out[-3000:]
    assert re.search(r"- ddp-mol2: (torchrun exited|still running)", out), out[-3000:]
    assert elapsed < 120 + 60
    for node in NODES:
        assert bench_processes(node) == [], "left behind on %s" % node


def test_hostname_on_loopback_is_refused_by_preflight():
    """C01: a node whose hostname resolves to 127.0.1.1 is refused with the loopback code."""
    original = podman_exec("ddp-mol2", "cat", "/etc/hosts").stdout
    podman_exec("ddp-mol2", "sh", "-c", "printf '127.0.1.1 ddp-mol2\\n%s' \"$(cat /etc/hosts)\" > /etc/hosts.new"
                                        " && cat /etc/hosts.new > /etc/hosts && rm /etc/hosts.new")
    try:
        proc, _elapsed = run_playbook("playbooks/preflight.yml")
    finally:
        podman_exec("ddp-mol2", "sh", "-c", "cat > /etc/hosts <<'EOF'\n%sEOF" % original)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"- ddp-mol2: \[PREFLIGHT_HOST_LOOPBACK\]", out), out[-3000:]
    assert "- ddp-mol1: [PREFLIGHT_HOST_LOOPBACK]" not in out


def test_an_account_id_taken_on_one_node_is_refused_by_preflight():
    """ACCOUNT_ID_MISMATCH: the cluster user's uid/gid is held by another account on ddp-mol2 only.

    The cluster user is renamed for this run (-e ddp_cluster_user, an account that does not exist yet, which is
    fine) and given the ids of a throwaway user and group made on ddp-mol2: preflight reads both nodes' users and
    groups in one command each and refuses ddp-mol2 for the user and the group, not ddp-mol1.
    """
    podman_exec("ddp-mol2", "sh", "-c", "groupadd -g 4242 ddp-idtest && useradd -u 4242 -g 4242 -M -N"
                                        " -s /usr/sbin/nologin ddp-idtest")
    try:
        proc, _elapsed = run_playbook("playbooks/preflight.yml", "-e", "ddp_cluster_user=ddp-idnew",
                                      "-e", "ddp_cluster_uid=4242")
    finally:
        podman_exec("ddp-mol2", "sh", "-c", "userdel ddp-idtest; groupdel ddp-idtest 2>/dev/null; true")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for kind in ("user", "group"):
        assert ("[ACCOUNT_ID_MISMATCH] ddp-mol2: %s ddp-idnew: id 4242 for %s ddp-idnew is already taken on ddp-mol2"
                " by ddp-idtest" % (kind, kind)) in out, out[-3000:]
    assert "ddp-mol1: user ddp-idnew" not in out and "ddp-mol1: group ddp-idnew" not in out
    assert podman_exec("ddp-mol2", "getent", "passwd", "ddp-idtest", check=False).returncode == 2


def test_health_names_the_blocked_pair_within_its_window():
    """C03 in the health stage: ddp-mol1's firewall rejects ddp-mol2; the mesh probe names that pair only."""
    addr = podman_exec("ddp-mol2", "hostname", "-I").stdout.split()[0]
    podman_exec("ddp-mol1", "firewall-cmd", "--zone=ddp-cluster", "--remove-source=%s" % addr)
    try:
        proc, elapsed = run_playbook("playbooks/health.yml", "-e", "ddp_health_probe_window=8",
                                     "-e", "ddp_health_join_timeout=20")
    finally:
        podman_exec("ddp-mol1", "firewall-cmd", "--reload")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"\[CLUSTER_PORT_BLOCKED\] \(error\) ddp-mol2 -> ddp-mol1:40000: .*\[firewall_reject\]", out), out[-3000:]
    assert "ddp-mol1 -> ddp-mol2:40000" not in out
    # The failed all-reduce does not start pairs: two nodes make one pair, the all-node run itself.
    assert "Pairs not run: the 2 healthy nodes make one pair" in out, out[-3000:]
    assert "pair ddp-mol1-ddp-mol2:" not in out
    assert elapsed < 240


def test_health_names_the_node_whose_probe_cannot_run():
    """Something else holds the probe port on ddp-mol2: that node is named, no pair is blamed, the play ends."""
    podman_exec("ddp-mol2", "sh", "-c", "nohup python3 -m http.server 40000 >/dev/null 2>&1 &")
    try:
        deadline = time.time() + 20
        while "40000" not in podman_exec("ddp-mol2", "ss", "-ltn", check=False).stdout and time.time() < deadline:
            time.sleep(0.5)
        proc, _elapsed = run_playbook("playbooks/health.yml", "-e", "ddp_health_probe_window=8")
    finally:
        podman_exec("ddp-mol2", "pkill", "-f", "http.server 40000", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"\[CLUSTER_PROBE_NOT_RUN\] \(error\) ddp-mol2: .*cannot listen on 0.0.0.0:40000", out), out[-3000:]
    assert "CLUSTER_PORT_BLOCKED" not in out


def test_health_names_an_ssh_folder_sshd_would_refuse():
    """C18: the cluster user's ~/.ssh on ddp-mol2 becomes group-writable; health names that path on that node only
    (the modes come from the known_hosts check's one call per node)."""
    home = podman_exec("ddp-mol2", "getent", "passwd", "ddp").stdout.split(":")[5]
    podman_exec("ddp-mol2", "chmod", "0775", home + "/.ssh")
    try:
        proc, _elapsed = run_playbook("playbooks/health.yml", "-e", "ddp_health_probe_window=8")
    finally:
        podman_exec("ddp-mol2", "chmod", "0700", home + "/.ssh")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"\[SSH_MODE_TOO_OPEN\] \(error\) ddp-mol2:%s/\.ssh: .* has mode 0775" % re.escape(home), out), \
        out[-3000:]
    assert "ddp-mol1:%s" % home not in out


def test_ssh_trust_names_the_pair_without_a_host_key():
    """ddp-mol1's cluster user loses its known_hosts: the ssh_trust check names ddp-mol1 -> ddp-mol2 and why."""
    home = podman_exec("ddp-mol1", "getent", "passwd", "ddp").stdout.split(":")[5]
    path = home + "/.ssh/known_hosts"
    podman_exec("ddp-mol1", "cp", "-p", path, path + ".saved")
    podman_exec("ddp-mol1", "sh", "-c", ": > %s" % path)
    try:
        proc, _elapsed = run_playbook("playbooks/access.yml", "--check")
    finally:
        podman_exec("ddp-mol1", "mv", path + ".saved", path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"\[SSH_PAIR_FAILED\] ddp-mol1 -> ddp-mol2: .*\[host_key_unknown\]", out), out[-3000:]
    assert "ddp-mol2 -> ddp-mol1" not in out


def test_ssh_trust_ring_failure_checks_every_pair_and_is_remembered():
    """A run with nothing to change checks SSH around a ring; ddp-mol2's sshd refuses the cluster user from
    ddp-mol1's address (DenyUsers, which the role does not manage), so the ring's failed login makes every node log in
    to every other, the problem names ddp-mol1 -> ddp-mol2 alone, and every node keeps the failure (the local fact
    ddp_ssh_trust) until the run after the fix has checked every pair and removed it."""
    addr = podman_exec("ddp-mol1", "hostname", "-I").stdout.split()[0]
    drop_in = "/etc/ssh/sshd_config.d/zz-ddp-test-deny.conf"
    fact = "/etc/ansible/facts.d/ddp_ssh_trust.fact"
    # a run with nothing left to change in the trust first, so that the run below checks the ring
    proc, _elapsed = run_playbook("playbooks/access.yml")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    podman_exec("ddp-mol2", "sh", "-c", "printf 'DenyUsers ddp@%s\\n' > %s && systemctl reload ssh" % (addr, drop_in))
    try:
        proc, _elapsed = run_playbook("playbooks/access.yml")
    finally:
        podman_exec("ddp-mol2", "sh", "-c", "rm -f %s && systemctl reload ssh" % drop_in)
    try:
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0
        every_pair = [block for block in out.split("TASK [")
                      if block.startswith("ddp.cluster.ssh_trust : Check SSH from this node to every other node, "
                                          "where a login of the ring failed]")]
        assert every_pair and "ok: [ddp-mol2]" in every_pair[0], out[-3000:]
        assert re.search(r"\[SSH_PAIR_FAILED\] ddp-mol1 -> ddp-mol2: .*\[auth_denied\]", out), out[-3000:]
        assert "ddp-mol2 -> ddp-mol1" not in out
        for node in NODES:
            kept = podman_exec(node, "cat", fact, check=False)
            assert kept.returncode == 0 and "SSH_PAIR_FAILED ddp-mol1 -> ddp-mol2" in kept.stdout, (node, kept)
        proc, _elapsed = run_playbook("playbooks/access.yml")
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        for node in NODES:
            assert podman_exec(node, "test", "-e", fact, check=False).returncode == 1, node
    finally:
        for node in NODES:
            podman_exec(node, "rm", "-f", fact)
