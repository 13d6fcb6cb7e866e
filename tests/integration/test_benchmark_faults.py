"""A node lost in the middle of a benchmark run, on the running Molecule nodes (ddp-mol1, ddp-mol2).

``podman stop ddp-mol2`` shortly after torchrun started on it: the play must fail within the
run's timeout, name ddp-mol2, and leave no torchrun or ddp_bench process on ddp-mol1. The node
is started again afterwards; the test waits for its systemd and re-applies the access stage
(firewall sources, known_hosts) since the restarted node may have a new address, so later tests work.
Skipped, saying why, when the Molecule nodes are not running.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from checkout_env import checkout_env
from podman_nodes import running, system_state, systemd_up, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(ROOT, "molecule", "local", "inventory", "nodes")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = ("ddp-mol1", "ddp-mol2")
RUN_TIMEOUT = 120
JOIN_TIMEOUT = 30
# After the run's timeout: the benchmark role's poll interval (3 s) and the play's failure report, with room for a
# loaded machine.
POLL_AND_REPORT = 30


pytestmark = pytest.mark.skipif(
    not all(running(n) for n in NODES),
    reason="the Molecule nodes ddp-mol1/ddp-mol2 are not running (make test starts them with molecule)",
)


def bench_processes(node):
    out = subprocess.run(["podman", "exec", node, "ps", "-eo", "args"], capture_output=True, text=True,
                         check=False).stdout
    return [line for line in out.splitlines() if "ddp_bench" in line or "torchrun" in line]


@pytest.fixture
def restart_mol2():
    yield
    if not running("ddp-mol2"):
        subprocess.run(["podman", "start", "ddp-mol2"], capture_output=True, text=True, check=False)
    assert wait_until(lambda: running("ddp-mol2"), 120, 2) and systemd_up("ddp-mol2"), \
        "ddp-mol2 did not come back: %r" % system_state("ddp-mol2")
    # A restarted container may get a new address on the podman network (as a host may from DHCP):
    # re-apply the access stage so the firewall's cluster sources and known_hosts hold it again.
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    proc = subprocess.run([PLAYBOOK_BIN, "-i", INVENTORY, "playbooks/access.yml"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # slurmctld resolved ddp-mol2's old address once: tell it to read the configuration (and the names)
    # again, as an admin does after re-addressing a node; then ddp-mol2 answers again (idle, not idle*).
    if subprocess.run(["podman", "exec", "ddp-mol1", "sinfo", "-h"], capture_output=True, check=False).returncode == 0:
        subprocess.run(["podman", "exec", "ddp-mol1", "scontrol", "reconfigure"], capture_output=True, check=True)

        def mol2_idle():
            out = subprocess.run(["podman", "exec", "ddp-mol1", "sinfo", "-h", "-N", "-o", "%N %T", "-n", "ddp-mol2"],
                                 capture_output=True, text=True, check=False).stdout.split()
            return out[-1:] == ["idle"]
        assert wait_until(mol2_idle, 180, 3), "ddp-mol2 did not come back to idle in Slurm"


def test_node_lost_mid_run_is_named_and_nothing_is_left(restart_mol2):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    # torchrun launched by Ansible (test_slurm_faults.py covers the Slurm launcher).
    cmd = [PLAYBOOK_BIN, "-i", INVENTORY, "playbooks/benchmark.yml", "-e", "ddp_benchmark_launcher=torchrun",
           "-e", '{"ddp_benchmark_scopes": ["all_nodes"], "ddp_benchmark_variants": []}',
           "-e", "ddp_benchmark_steps=100000", "-e", "ddp_benchmark_timeout=%d" % RUN_TIMEOUT,
           "-e", "ddp_benchmark_join_timeout=%d" % JOIN_TIMEOUT]
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        started = wait_until(lambda: any("ddp_bench.py" in p for p in bench_processes("ddp-mol2")), 180, 0.5)
        assert started, "ddp_bench.py never started on ddp-mol2"
        time.sleep(3)
        stopped_at = time.time()
        subprocess.run(["podman", "stop", "-t", "2", "ddp-mol2"], capture_output=True, text=True, check=True)
        out, _err = proc.communicate(timeout=RUN_TIMEOUT + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
    failed_after = time.time() - stopped_at
    assert proc.returncode != 0, out[-3000:]
    assert "The DDP benchmark" in out and "failed" in out, out[-3000:]
    assert re.search(r"- ddp-mol2: (node lost during the run|torchrun exited|still running)", out), out[-3000:]
    # Two ways the survivor's torchrun ends. Usually ddp-mol2's ranks exit on podman's SIGTERM and close their
    # sockets, and Gloo on ddp-mol1 fails at once (about 20 s in all). When they do not exit within podman's 2 s
    # (a loaded machine), podman kills them with their network namespace: no FIN reaches ddp-mol1, as when a
    # host loses power, and its torchrun runs until the async limit, RUN_TIMEOUT after its launch (a few seconds
    # before the stop). The play then needs one more poll (3 s) and its report: seen at 120.04 s after the stop.
    assert failed_after < RUN_TIMEOUT + POLL_AND_REPORT, \
        "the play took %.0f s after the stop (run timeout %d s)" % (failed_after, RUN_TIMEOUT)
    assert time.time() - start < RUN_TIMEOUT + 180
    assert bench_processes("ddp-mol1") == [], "left behind on ddp-mol1"
