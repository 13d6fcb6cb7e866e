"""Slurm on the running Molecule nodes (ddp-mol1 = controller, ddp-mol2): faults and node states, end to end.

- slurmd stopped on ddp-mol2: the benchmark launched through Slurm fails within its timeout, names
  ddp-mol2 from Slurm's state, and leaves no job and no process behind;
- a health error injected on ddp-mol2 only (an NCCL_SOCKET_IFNAME that names no interface of that
  node, through a host_vars file): the health stage drains ddp-mol2 with reason ``ddp:IFNAME_NOT_FOUND``,
  and a healthy run afterwards resumes it; the verdicts (FAIL, flagged HEALTH_REPEAT_FAIL the second time) and
  their history;
- an operator's drain is left alone by a healthy health run;
- Slurm's HealthCheckProgram (ddp-health-slurm) drains ddp-mol2 when its own checks fail and resumes it once fixed;
- ddp-mol2's stack drifted from the pytorch_env manifest: named (STACK_DRIFT) before the all-reduce, which runs on
  ddp-mol1 alone, drained ``ddp:STACK_DRIFT``, resumed once the manifest is back.

The burn-in tier with ddp-mol2's CPU capped (BURNIN_SLOW, drained ``ddp:BURNIN_SLOW``, resumed by a passing burn-in
once uncapped) is tested in test_accounting_metrics.py, where the same run also turns the node's metric unhealthy.

They need the nodes `molecule test -s local` leaves running (``make test``); without them they are
skipped, saying why. Each test restores what it changed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from checkout_env import checkout_env
from podman_nodes import running, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(ROOT, "molecule", "local", "inventory", "nodes")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = ("ddp-mol1", "ddp-mol2")
RUN_TIMEOUT = 120


def _slurm_on_nodes():
    proc = subprocess.run(["podman", "exec", "ddp-mol1", "sinfo", "-h"], capture_output=True, text=True, check=False)
    return proc.returncode == 0


pytestmark = [
    pytest.mark.skipif(not all(running(n) for n in NODES),
                       reason="the Molecule nodes ddp-mol1/ddp-mol2 are not running (make test starts them)"),
    pytest.mark.skipif(not all(running(n) for n in NODES) or not _slurm_on_nodes(),
                       reason="Slurm is not set up on the Molecule nodes (ddp_scheduler: slurm, scheduler stage)"),
]


def podman_exec(node, *argv, check=True):
    return subprocess.run(["podman", "exec", node] + list(argv), capture_output=True, text=True, check=check)


def run_playbook(playbook, *extra, inventory=INVENTORY, timeout=900):
    env = checkout_env(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", MOLECULE_PROJECT_DIRECTORY=ROOT)
    cmd = [PLAYBOOK_BIN, "-i", inventory] + list(extra) + [playbook]
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return proc, time.time() - start


def node_states():
    """{node: (state, reason)} from sinfo on the controller."""
    out = podman_exec("ddp-mol1", "sinfo", "-h", "-N", "-o", "%N|%T|%E").stdout
    states = {}
    for line in out.splitlines():
        name, state, reason = line.split("|", 2)
        states[name] = (state, reason)
    return states


def bench_processes(node):
    out = podman_exec(node, "ps", "-eo", "args", check=False).stdout
    return [line for line in out.splitlines() if "ddp_bench" in line or "torchrun" in line]


def our_jobs():
    return podman_exec("ddp-mol1", "squeue", "-h", "-o", "%i %j", check=False).stdout.split("\n")


def test_slurmd_stopped_on_one_node_fails_the_slurm_run_naming_it():
    assert wait_until(lambda: node_states().get("ddp-mol2", ("",))[0] == "idle", 180, 3), node_states()
    podman_exec("ddp-mol2", "systemctl", "stop", "slurmd")
    try:
        proc, elapsed = run_playbook(
            "playbooks/benchmark.yml", "-e", "ddp_benchmark_launcher=slurm",
            "-e", '{"ddp_benchmark_scopes": ["all_nodes"], "ddp_benchmark_variants": []}',
            "-e", "ddp_benchmark_timeout=%d" % RUN_TIMEOUT, "-e", "ddp_benchmark_join_timeout=30")
    finally:
        podman_exec("ddp-mol2", "systemctl", "start", "slurmd")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "[SLURM_JOB_FAILED]" in out, out[-4000:]
    assert re.search(r"- ddp-mol2: .*(srun|Slurm state)", out), out[-4000:]
    assert "- ddp-mol1:" not in out, out[-4000:]
    assert elapsed < RUN_TIMEOUT + 240, "took %.0f s" % elapsed
    assert bench_processes("ddp-mol1") == [] and bench_processes("ddp-mol2") == []
    # The cancelled job stays COMPLETING until ddp-mol2's slurmd (started again above) confirms its end.
    assert wait_until(lambda: not [j for j in our_jobs() if "ddp-bench" in j], 120, 3), our_jobs()
    # slurmd is back: the node registers again (ReturnToService=2) and answers slurmctld's pings (no "*").
    assert wait_until(lambda: node_states().get("ddp-mol2", ("",))[0] == "idle", 240, 3), node_states()


@pytest.fixture
def bad_ifname_inventory(tmp_path):
    """The Molecule inventory plus host_vars/ddp-mol2.yml naming an interface ddp-mol2 does not have."""
    inv = tmp_path / "inventory"
    shutil.copytree(INVENTORY, inv, symlinks=False)
    (inv / "host_vars").mkdir()
    (inv / "host_vars" / "ddp-mol2.yml").write_text("---\nddp_nccl_socket_ifname: nosuch0\n")
    return str(inv)


def test_health_error_drains_the_node_then_a_healthy_run_resumes_it(bad_ifname_inventory, tmp_path):
    """Also the verdicts and their history: FAIL for ddp-mol2 (WARN for ddp-mol1: no GPU, no RDMA), flagged
    HEALTH_REPEAT_FAIL when it fails again, WARN once fixed; one record per node and run in the history file."""
    history = tmp_path / "history.jsonl"
    keep = ("-e", "ddp_health_history_file=%s" % history)
    # A job of an earlier test may still be completing on ddp-mol2.
    assert wait_until(lambda: node_states().get("ddp-mol2", ("",))[0] == "idle", 180, 3), node_states()
    proc, _elapsed = run_playbook("playbooks/health.yml", *keep, inventory=bad_ifname_inventory)
    out = proc.stdout + proc.stderr
    try:
        assert proc.returncode != 0, out[-3000:]
        assert "Health errors on ddp-mol2: IFNAME_NOT_FOUND" in out, out[-3000:]
        assert re.search(r"ddp-mol2: FAIL \(IFNAME_NOT_FOUND, NO_GPU, NO_RDMA\)", out), out[-3000:]
        assert re.search(r"ddp-mol1: WARN \(NO_GPU, NO_RDMA\)", out), out[-3000:]
        assert "HEALTH_REPEAT_FAIL" not in out
        state, reason = node_states()["ddp-mol2"]
        assert state.startswith("drain") and reason == "ddp:IFNAME_NOT_FOUND", (state, reason)
        assert node_states()["ddp-mol1"][0] == "idle", node_states()
        # Re-running with the problem still there keeps it drained (and changes nothing); a second failure is flagged.
        again = run_playbook("playbooks/health.yml", *keep, inventory=bad_ifname_inventory)[0]
        assert again.returncode != 0
        assert node_states()["ddp-mol2"][1] == "ddp:IFNAME_NOT_FOUND"
        assert re.search(r"\[HEALTH_REPEAT_FAIL\] \(warning\) ddp-mol2: failed 2 times within 7 days",
                         again.stdout), again.stdout[-3000:]
        # Fixed (the normal inventory): healthy again, so the drain this collection set is lifted.
        healthy = run_playbook("playbooks/health.yml", *keep)[0]
        assert healthy.returncode == 0, (healthy.stdout + healthy.stderr)[-3000:]
        state, reason = node_states()["ddp-mol2"]
        assert (state.rstrip("*"), reason) == ("idle", "none"), node_states()
        records = [json.loads(line) for line in history.read_text().splitlines()]
        assert [(r["node"], r["verdict"]) for r in records] == [
            ("ddp-mol1", "WARN"), ("ddp-mol2", "FAIL"), ("ddp-mol1", "WARN"), ("ddp-mol2", "FAIL"),
            ("ddp-mol1", "WARN"), ("ddp-mol2", "WARN")]
        assert records[1]["errors"] == ["IFNAME_NOT_FOUND"] and records[1]["warnings"] == ["NO_GPU", "NO_RDMA"]
    finally:
        podman_exec("ddp-mol1", "scontrol", "update", "NodeName=ddp-mol2", "State=RESUME", check=False)


def test_health_check_program_drains_the_failing_node_and_resumes_it_once_fixed():
    """slurm.conf's HealthCheckProgram (ddp-health-slurm, ddp.cluster.node_health) runs when slurmd starts: with
    ddp-mol2's settings naming a Gloo interface it lacks, the node drains itself (reason ddp-health:IFNAME_NOT_FOUND);
    once the settings are fixed, the next run resumes it. ddp-mol1 is not touched."""
    assert wait_until(lambda: node_states().get("ddp-mol2", ("",))[0] == "idle", 180, 3), node_states()
    settings = "/etc/ddp/health.json"
    original = podman_exec("ddp-mol2", "cat", settings).stdout
    bad = json.loads(original)
    bad["roce"]["gloo_socket_ifname"] = "nosuch0"

    def write(text):
        subprocess.run(["podman", "exec", "-i", "ddp-mol2", "sh", "-c", "cat > " + settings], input=text,
                       text=True, check=True)
    write(json.dumps(bad))
    try:
        podman_exec("ddp-mol2", "systemctl", "restart", "slurmd")
        assert wait_until(lambda: node_states()["ddp-mol2"][1] == "ddp-health:IFNAME_NOT_FOUND", 60), node_states()
        assert node_states()["ddp-mol2"][0].startswith("drain") and node_states()["ddp-mol1"][1] == "none"
        by_hand = podman_exec("ddp-mol2", "/opt/ddp/bin/ddp-health", check=False)
        assert by_hand.returncode == 1 and by_hand.stdout.startswith("ddp-health: FAIL on ddp-mol2 in "), by_hand.stdout
        assert "[IFNAME_NOT_FOUND] error GLOO_SOCKET_IFNAME" in by_hand.stdout
    finally:
        write(original)
    podman_exec("ddp-mol2", "systemctl", "restart", "slurmd")
    assert wait_until(lambda: node_states()["ddp-mol2"] == ("idle", "none"), 60), node_states()


def test_operator_drain_is_left_alone_by_a_healthy_run():
    assert wait_until(lambda: node_states().get("ddp-mol2", ("",))[0] == "idle", 180, 3), node_states()
    podman_exec("ddp-mol1", "scontrol", "update", "NodeName=ddp-mol2", "State=DRAIN", "Reason=swap disk")
    try:
        proc, _elapsed = run_playbook("playbooks/health.yml")
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        assert "Drained by someone else, left as it is: ddp-mol2" in out, out[-3000:]
        state, reason = node_states()["ddp-mol2"]
        assert state.startswith("drain") and reason == "swap disk", (state, reason)
    finally:
        podman_exec("ddp-mol1", "scontrol", "update", "NodeName=ddp-mol2", "State=RESUME", check=False)


def test_stack_drift_on_one_node_is_named_before_the_collective_and_drained():
    """ddp-mol2's training env no longer matches what pytorch_env installed (its manifest says another torch):
    node_stack names ddp-mol2 (STACK_DRIFT) before any collective, the all-reduce runs on ddp-mol1 alone, Slurm
    drains ddp-mol2 with ddp:STACK_DRIFT; with the manifest put back a healthy run resumes it."""
    manifest = "/etc/ddp/expected/pytorch_env.json"
    saved = podman_exec("ddp-mol2", "cat", manifest).stdout
    assert '"torch"' in saved, saved
    assert wait_until(lambda: node_states().get("ddp-mol2", ("",))[0] == "idle", 180, 3), node_states()
    podman_exec("ddp-mol2", "sh", "-c", "sed -i 's/\"torch\": \"[^\"]*\"/\"torch\": \"2.1.0\"/' %s" % manifest)
    try:
        proc, _elapsed = run_playbook("playbooks/health.yml")
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, out[-3000:]
        assert "Health errors on ddp-mol2: STACK_DRIFT" in out, out[-3000:]
        assert "the pytorch_env role installed torch 2.1.0" in out, out[-3000:]
        assert "Every node has the same stack" in out
        # The all-reduce ran without ddp-mol2: one rank.
        assert re.search(r"all-reduce across 1 ranks", out), out[-3000:]
        state, reason = node_states()["ddp-mol2"]
        assert state.startswith("drain") and reason == "ddp:STACK_DRIFT", (state, reason)
    finally:
        subprocess.run(["podman", "exec", "-i", "ddp-mol2", "sh", "-c", "cat > %s" % manifest], input=saved,
                       text=True, check=True)
    healthy = run_playbook("playbooks/health.yml")[0]
    try:
        assert healthy.returncode == 0, (healthy.stdout + healthy.stderr)[-3000:]
        assert (node_states()["ddp-mol2"][0].rstrip("*"), node_states()["ddp-mol2"][1]) == ("idle", "none")
    finally:
        podman_exec("ddp-mol1", "scontrol", "update", "NodeName=ddp-mol2", "State=RESUME", check=False)
