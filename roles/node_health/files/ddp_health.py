# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ddp-health: this node's quick health checks without Ansible; exit 0 keep, 1 remove, 2 could not run.

Installed by the ddp.cluster.node_health role as ``<lib>/ddp_health.py`` beside the collection's module_utils it
imports (``<lib>/ansible_collections/ddp/cluster/plugins/module_utils``), and started by ``/opt/ddp/bin/ddp-health``
(and ``ddp-health-slurm``, Slurm's HealthCheckProgram) with the Python Ansible uses on the node.

It runs the checks of the health stage's ``gpu_health`` and ``roce_health`` modules (nvidia-smi, the kernel log's
Xids, PCIe, RDMA ports, GIDs, MTU, the NCCL/Gloo interface names), with the thresholds of the settings file the role
writes (``/etc/ddp/health.json``), within a deadline (50 s by default; Slurm kills a HealthCheckProgram after 60 s).
A check that hangs past it is a fault of the node (FAIL); a bug of this program exits 2, never 1.

    ddp-health                   # one line: verdict, node, time, the codes; exit 0 / 1 / 2
    ddp-health --json            # the verdict, every problem with its fix, as JSON
    ddp-health --slurm           # also drain this node in Slurm on FAIL (and requeue the jobs running on it),
                                 # resume it once it passes again

The burn-in tier (minutes of GPU stress, torch) is not run here: it belongs to ``health.yml -e ddp_health_level=burnin``
or a maintenance reservation, not to a 60-second health check.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import traceback

from ansible_collections.ddp.cluster.plugins.module_utils import health_io, node_check
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import SlurmParseError, parse_job_ids

PROG = "ddp-health"
DEFAULT_CONFIG = "/etc/ddp/health.json"
SLURM_RESERVE_S = 5.0


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true",
                        help="the quick tier (the default and only tier of this command)")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="settings file (JSON; default %(default)s)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds for all checks (default: deadline_s of the settings, 50)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--slurm", action="store_true",
                        help="drain this node on FAIL (reason <prefix><CODES>) and requeue the jobs running on it, "
                             "resume it when it passes and the drain was ddp-health's own")
    parser.add_argument("--node", default=None,
                        help="the Slurm node name (default: $SLURMD_NODENAME, which slurmd sets for its "
                             "HealthCheckProgram, else the short host name)")
    return parser.parse_args(argv)


def read_config(path, deadline):
    """The settings (node_check.load_config) from ``path``; a missing file means every default."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) != 2:
            raise node_check.ConfigError(["cannot read %s: %s" % (path, exc)])
        data = {}  # no settings file: the modules' defaults
    except ValueError as exc:
        raise node_check.ConfigError(["%s is not JSON: %s" % (path, exc)])
    if deadline is not None and isinstance(data, dict):
        data = dict(data, deadline_s=deadline)
    return node_check.load_config(data)


def act_in_slurm(runner, node, verdict, prefix):
    """Drain or resume ``node`` as node_check.slurm_plan says; returns what was done, for the report."""
    sinfo, scontrol = runner.get_bin_path("sinfo"), runner.get_bin_path("scontrol")
    if not sinfo or not scontrol:
        return {"action": "none", "why": "sinfo/scontrol not installed", "done": False}
    rc, out, err = runner.run_command([sinfo, "-h", "-N", "-n", node, "-o", "%N|%T|%E"])
    if rc != 0:
        return {"action": "none", "why": "sinfo failed (rc %d): %s" % (rc, (err or out).strip()), "done": False}
    try:
        plan = node_check.slurm_plan(out, node, verdict, prefix)
    except SlurmParseError as exc:
        return {"action": "none", "why": str(exc), "done": False}
    if plan["action"] == "none":
        return dict(plan, done=False)
    argv = [scontrol, "update", "NodeName=" + node]
    argv += ["State=DRAIN", "Reason=" + plan["reason"]] if plan["action"] == "drain" else ["State=RESUME"]
    rc, out, err = runner.run_command(argv)
    done = dict(plan, done=rc == 0, why=plan["why"] if rc == 0 else
                "%s; scontrol failed (rc %d): %s" % (plan["why"], rc, (err or out).strip()))
    if plan["action"] == "drain" and rc == 0:
        done["requeued"], done["not_requeued"] = requeue_jobs_on(runner, node, scontrol)
    return done


def requeue_jobs_on(runner, node, scontrol):
    """Requeue the jobs running on ``node`` (just drained): ``([job ids requeued], [what failed])``.

    A drain leaves running jobs where they are; a requeued job starts again on healthy nodes (from its checkpoint,
    with ddp-torchrun.sbatch and ddp_train.py). A job submitted with --no-requeue is refused by Slurm and named.
    """
    squeue = runner.get_bin_path("squeue")
    if not squeue:
        return [], ["squeue not installed"]
    rc, out, err = runner.run_command([squeue, "-h", "-t", "RUNNING", "-w", node, "-o", "%A"])
    if rc != 0:
        return [], ["squeue failed (rc %d): %s" % (rc, (err or out).strip())]
    try:
        jobs = parse_job_ids(out)
    except SlurmParseError as exc:
        return [], [str(exc)]
    requeued, failed = [], []
    for job in jobs:
        rc, out, err = runner.run_command([scontrol, "requeue", str(job)])
        if rc == 0:
            requeued.append(job)
        else:
            failed.append("job %d: %s" % (job, (err or out).strip() or "scontrol requeue rc %d" % rc))
    return requeued, failed


def render(report):
    """The one-line report (with one line per problem below it)."""
    codes = report["errors"] + report["warnings"]
    lines = ["%s: %s on %s in %.2f s%s" % (
        PROG, report["verdict"], report["node"], report["elapsed_s"], (": " + ", ".join(codes)) if codes else "")]
    for item in report["problems"]:
        lines.append("  [%s] %s %s: %s Fix: %s" % (
            item["code"], item["severity"], item["subject"], item["message"], item["fix"]))
    if report.get("slurm"):
        slurm = report["slurm"]
        lines.append("  slurm: %s%s (%s)" % (slurm["action"], "" if slurm.get("done") or slurm["action"] == "none"
                                             else " not done", slurm["why"]))
        if slurm.get("requeued") or slurm.get("not_requeued"):
            lines.append("  slurm: requeued the jobs running here: %s%s" % (
                ", ".join(str(j) for j in slurm.get("requeued", [])) or "none",
                "; not requeued: " + "; ".join(slurm["not_requeued"]) if slurm.get("not_requeued") else ""))
    return "\n".join(lines)


def _crash_report(node, started, clock, exc):
    return {"verdict": "UNKNOWN", "errors": ["HEALTH_CHECK_CRASHED"], "warnings": [], "node": node, "checks": {},
            "problems": [{"code": "HEALTH_CHECK_CRASHED", "severity": "error", "subject": PROG,
                          "message": "%s: %s (the traceback is on stderr)" % (type(exc).__name__, exc),
                          "fix": "report it with this output; reinstall with the ddp.cluster.node_health role"}],
            "elapsed_s": clock() - started}


def main(argv=None, runner_factory=health_io.CommandRunner, clock=time.monotonic, environ=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    started = clock()
    node = args.node or environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    try:
        report = run(args, node, started, runner_factory, clock)
    except Exception as exc:  # pylint: disable=broad-except
        traceback.print_exc()
        report = _crash_report(node, started, clock, exc)
    report["exit_code"] = node_check.exit_code(report["verdict"])
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else render(report))
    if args.slurm and report.get("slurm", {}).get("action") == "none" and report["verdict"] == "FAIL":
        # slurmd logs what its HealthCheckProgram prints, and acts on nothing else: say why nothing was drained.
        sys.stderr.write("%s: %s FAILS but was not drained: %s\n" % (PROG, node, report["slurm"]["why"]))
    return report["exit_code"]


def run(args, node, started, runner_factory, clock):
    """The report of one run (everything but the exit code)."""
    try:
        config = read_config(args.config, args.deadline)
    except node_check.ConfigError as exc:
        return {"verdict": "UNKNOWN", "errors": ["HEALTH_CONFIG"], "warnings": [], "node": node,
                "problems": [{"code": "HEALTH_CONFIG", "severity": "error", "subject": args.config,
                              "message": str(exc), "fix": "correct the settings (the node_health role writes them "
                                                          "from its node_health_* variables) and run again"}],
                "checks": {}, "elapsed_s": clock() - started}
    # With --slurm, the last seconds are kept for sinfo and scontrol: a node that fails late is still drained.
    reserve = min(SLURM_RESERVE_S, config["deadline_s"] / 2.0) if args.slurm else 0.0
    runner = runner_factory(config["deadline_s"] - reserve)
    report = node_check.quick_check(runner, config, on_crash=lambda exc: traceback.print_exc())
    report["node"] = node
    if args.slurm:
        slurm_runner = runner_factory(max(config["deadline_s"] - (clock() - started), 1.0))
        try:
            report["slurm"] = act_in_slurm(slurm_runner, node, report, config["slurm"]["prefix"])
        except health_io.DeadlineExceeded as exc:
            report["slurm"] = {"action": "none", "why": str(exc), "done": False}
    report["elapsed_s"] = clock() - started
    return report


if __name__ == "__main__":
    sys.exit(main())
