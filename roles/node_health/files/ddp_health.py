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
    ddp-health --slurm           # also drain this node in Slurm on FAIL, resume it once it passes again

The burn-in tier (minutes of GPU stress, torch) is not run here: it belongs to ``health.yml -e ddp_health_level=burnin``
or a maintenance reservation, not to a 60-second health check.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

from ansible_collections.ddp.cluster.plugins.module_utils import health_io, node_check
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import SlurmParseError

PROG = "ddp-health"
DEFAULT_CONFIG = "/etc/ddp/health.json"
SLURM_RESERVE_S = 5.0
# Searched after PATH: slurmd starts its HealthCheckProgram with an almost empty environment.
EXTRA_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class CommandRunner(object):
    """A runner for programs outside Ansible: ``shutil.which`` and ``subprocess`` with one overall deadline.

    :param deadline_s: seconds from now after which no command runs any more; a command still running then is killed
        (SIGKILL to its process group) and ``health_io.DeadlineExceeded`` is raised. None for no deadline.
    :param clock: a monotonic clock in seconds (tests pass their own).
    """

    def __init__(self, deadline_s=None, clock=time.monotonic):
        self._clock = clock
        self._deadline = None if deadline_s is None else clock() + float(deadline_s)

    def remaining(self):
        """Seconds left before the deadline (None without one; 0 or less once it has passed)."""
        return None if self._deadline is None else self._deadline - self._clock()

    def get_bin_path(self, name, required=False, opt_dirs=None):
        """The path of ``name`` on PATH, else in the usual bin and sbin directories (as AnsibleModule.get_bin_path)."""
        dirs = (os.environ.get("PATH") or os.defpath).split(os.pathsep) + list(opt_dirs or []) + list(EXTRA_DIRS)
        return shutil.which(name, path=os.pathsep.join(d for d in dirs if d))

    def run_command(self, args, environ_update=None, **_kwargs):
        """Run ``args`` (a list, no shell) and return ``(rc, stdout, stderr)`` as text (undecodable bytes replaced).

        :raises health_io.DeadlineExceeded: the deadline had passed, or passed while the command ran.
        """
        left = self.remaining()
        if left is not None and left <= 0:
            raise health_io.DeadlineExceeded("no time left to run %s" % args[0])
        env = dict(os.environ)
        env.update(environ_update or {})
        try:
            proc = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=True)
        except OSError as exc:
            return 127, "", "%s: %s" % (args[0], exc)
        try:
            out, err = proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.communicate(timeout=2)  # a process in uninterruptible sleep (D state) may never go
            except subprocess.TimeoutExpired:
                pass
            raise health_io.DeadlineExceeded("%s did not finish before the deadline (killed)" % " ".join(args))
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true",
                        help="the quick tier (the default and only tier of this command)")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="settings file (JSON; default %(default)s)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds for all checks (default: deadline_s of the settings, 50)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--slurm", action="store_true",
                        help="drain this node on FAIL (reason <prefix><CODES>), resume it when it passes and the "
                             "drain was ddp-health's own")
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
    return dict(plan, done=rc == 0, why=plan["why"] if rc == 0 else
                "%s; scontrol failed (rc %d): %s" % (plan["why"], rc, (err or out).strip()))


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
    return "\n".join(lines)


def _crash_report(node, started, clock, exc):
    return {"verdict": "UNKNOWN", "errors": ["HEALTH_CHECK_CRASHED"], "warnings": [], "node": node, "checks": {},
            "problems": [{"code": "HEALTH_CHECK_CRASHED", "severity": "error", "subject": PROG,
                          "message": "%s: %s (the traceback is on stderr)" % (type(exc).__name__, exc),
                          "fix": "report it with this output; reinstall with the ddp.cluster.node_health role"}],
            "elapsed_s": clock() - started}


def main(argv=None, runner_factory=CommandRunner, clock=time.monotonic, environ=None):
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
