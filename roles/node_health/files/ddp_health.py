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
    ddp-health --diagnose FILE   # read a command's or a log's text instead (kind detected, or --kind): scontrol
                                 # show node, sinfo (-R, -N -l), slurmctld/slurmd logs, a training log, nccl-tests,
                                 # NCCL INFO lines, ibstat/ibstatus/ibv_devinfo/rdma link, lspci -vv, dmesg,
                                 # ldconfig -p / LD_LIBRARY_PATH / a load error; - reads stdin; the same verdict
    ddp-health --record FAIL --errors BURNIN_SLOW --tier burnin   # the health stage's verdict, as metrics only

Each run also writes its verdict as metrics for Prometheus (module_utils/report/metrics.py) into node exporter's textfile
folder (``metrics.textfile_dir`` of the settings; none when empty): ``ddp_health_healthy``, ``ddp_health_verdict``,
``ddp_health_problem`` per code, ``ddp_health_last_run_timestamp_seconds`` and, where Slurm runs,
``ddp_health_slurm_drained`` (drained by ddp.cluster, with the reason).

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
import tempfile
import time
import traceback

from ansible_collections.ddp.cluster.plugins.module_utils.cluster import health_io
from ansible_collections.ddp.cluster.plugins.module_utils.report import metrics
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import node_check
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import text_diagnosis
from ansible_collections.ddp.cluster.plugins.module_utils.slurm.nodes import SlurmParseError, parse_job_ids, parse_sinfo_nodes

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
                        help="drain this node on FAIL (reason <prefix><CODES>) and requeue the jobs running on it, "
                             "resume it when it passes and the drain was ddp-health's own")
    parser.add_argument("--diagnose", action="append", default=[], metavar="FILE",
                        help="diagnose this file's text instead of checking the node (repeatable; - for stdin): "
                             "what it is is detected, or given with --kind")
    parser.add_argument("--kind", default="auto", choices=("auto",) + text_diagnosis.KINDS,
                        help="what the --diagnose texts are (default: detect each)")
    parser.add_argument("--context", default=None, metavar="JSON",
                        help="what the text alone cannot say, as a JSON object (e.g. {\"rc\": 1, \"world_size\": 16, "
                             "\"min_busbw_gbps\": 40, \"line_rates\": {\"*\": 200}, \"nccl_ib_hca\": \"mlx5_0\"})")
    parser.add_argument("--record", choices=metrics.VERDICTS, default=None,
                        help="run no check: write the health stage's verdict for this node as metrics "
                             "(with --errors, --warnings, --tier), and whether ddp.cluster has it drained")
    parser.add_argument("--errors", default="", help="with --record: the error codes, comma-separated")
    parser.add_argument("--warnings", default="", help="with --record: the warning codes, comma-separated")
    parser.add_argument("--tier", choices=("quick", "burnin"), default="quick", help="with --record: the tier")
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


def read_sinfo(runner, node):
    """(sinfo's ``%N|%T|%E`` line of ``node``, None) or (None, why it could not be read)."""
    sinfo = runner.get_bin_path("sinfo")
    if not sinfo:
        return None, "sinfo/scontrol not installed"
    rc, out, err = runner.run_command([sinfo, "-h", "-N", "-n", node, "-o", "%N|%T|%E"])
    if rc != 0:
        return None, "sinfo failed (rc %d): %s" % (rc, (err or out).strip())
    return out, None


def drained_reason(sinfo_text, node):
    """The drain reason of ``node`` when ddp.cluster drained it (ddp: or ddp-health:), "" if not, None if unknown."""
    try:
        state = parse_sinfo_nodes(sinfo_text or "").get(node)
    except SlurmParseError:
        return None
    return None if state is None else metrics.drained_by_us(state["state"], state["reason"])


def act_in_slurm(runner, node, verdict, prefix):
    """Drain or resume ``node`` as node_check.slurm_plan says; returns what was done, for the report.

    ``drained``: the node's drain reason when ddp.cluster has it drained after this run ("" when not, None when
    Slurm could not be read), for the metrics.
    """
    out, why = read_sinfo(runner, node)
    scontrol = runner.get_bin_path("scontrol")
    if out is None or not scontrol:
        return {"action": "none", "why": why or "sinfo/scontrol not installed", "done": False, "drained": None}
    try:
        plan = node_check.slurm_plan(out, node, verdict, prefix)
    except SlurmParseError as exc:
        return {"action": "none", "why": str(exc), "done": False, "drained": None}
    drained = drained_reason(out, node)
    if plan["action"] == "none":
        return dict(plan, done=False, drained=drained)
    argv = [scontrol, "update", "NodeName=" + node]
    argv += ["State=DRAIN", "Reason=" + plan["reason"]] if plan["action"] == "drain" else ["State=RESUME"]
    rc, out, err = runner.run_command(argv)
    if rc == 0:
        drained = plan["reason"] if plan["action"] == "drain" else ""
    done = dict(plan, done=rc == 0, drained=drained, why=plan["why"] if rc == 0 else
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


def write_textfile(directory, name, text):
    """Write ``text`` as ``<directory>/<name>`` for node exporter's textfile collector.

    The file is made beside its final name with mkstemp (O_EXCL: a link planted there is never followed) and renamed
    over it, so the collector never reads half a file. Returns None, or why nothing was written (a missing folder:
    node exporter is not set up here).
    """
    if not os.path.isdir(directory) or os.path.islink(directory):
        return "%s is not a folder (node exporter's textfile collector is not set up here)" % directory
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % name, suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(directory, name))
    except OSError:
        os.unlink(tmp)
        raise
    return None


def write_metrics(directory, files):
    """Write ``{name: text}`` into ``directory``; returns the reasons of what could not be written."""
    notes = []
    for name, text in files:
        try:
            why = write_textfile(directory, name, text)
        except OSError as exc:
            why = "cannot write %s: %s" % (os.path.join(directory, name), exc)
        if why:
            notes.append(why)
            if "not a folder" in why:
                break
    return notes


def metrics_files(report, source, finished_at, drained, tier=None):
    """[(file name, text)] of one verdict: the verdict's file, and the drain file when Slurm was read."""
    name = metrics.HEALTH_FILE if source == "ddp-health" else metrics.STAGE_FILE
    problems = report.get("problems") or [{"code": c, "severity": "error"} for c in report.get("errors", [])] \
        + [{"code": c, "severity": "warning"} for c in report.get("warnings", [])]
    files = [(name, metrics.render(metrics.health_samples(
        report["verdict"], problems, source, finished_at, None if tier else report.get("elapsed_s"), tier=tier)))]
    if drained is not None:
        files.append((metrics.DRAIN_FILE, metrics.render(metrics.drain_samples(drained))))
    return files


def recorded(args, node, config, runner_factory, started, clock):
    """The report of ``--record``: the health stage's verdict as given (no check runs here), and the drain state."""
    errors = [c for c in (args.errors or "").split(",") if c]
    warnings = [c for c in (args.warnings or "").split(",") if c]
    report = {"verdict": args.record, "errors": errors, "warnings": warnings, "node": node, "checks": {},
              "problems": [], "recorded": True}
    out, _why = read_sinfo(runner_factory(config["deadline_s"]), node)
    report["_drained"] = drained_reason(out, node) if out is not None else None
    report["_metrics_dir"] = config["metrics"]["textfile_dir"]
    report["elapsed_s"] = clock() - started
    return report


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


def main(argv=None, runner_factory=CommandRunner, clock=time.monotonic, environ=None, wall_clock=time.time):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    started = clock()
    node = args.node or environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    try:
        report = run(args, node, started, runner_factory, clock)
    except Exception as exc:  # pylint: disable=broad-except
        traceback.print_exc()
        report = _crash_report(node, started, clock, exc)
    # --record only writes what the health stage found: it exits 0 unless it could not (2).
    report["exit_code"] = node_check.exit_code(report["verdict"]) if not (args.record and report.get("recorded")) \
        else 0
    report.pop("recorded", None)
    metrics_dir = report.pop("_metrics_dir", "")
    drained = report.pop("_drained", (report.get("slurm") or {}).get("drained"))
    if metrics_dir:
        files = metrics_files(report, "health-stage" if args.record else "ddp-health", wall_clock(), drained,
                              tier=args.tier if args.record else None)
        for why in write_metrics(metrics_dir, files):
            sys.stderr.write("%s: metrics not written: %s\n" % (PROG, why))
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else render(report))
    if args.slurm and report.get("slurm", {}).get("action") == "none" and report["verdict"] == "FAIL":
        # slurmd logs what its HealthCheckProgram prints, and acts on nothing else: say why nothing was drained.
        sys.stderr.write("%s: %s FAILS but was not drained: %s\n" % (PROG, node, report["slurm"]["why"]))
    return report["exit_code"]


def diagnose_files(args, node, started, clock, stdin=None):
    """The report for ``--diagnose`` texts: every file read with ``text_diagnosis.diagnose_text``, one verdict."""
    try:
        context = json.loads(args.context) if args.context else {}
        if not isinstance(context, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return {"verdict": "UNKNOWN", "errors": ["HEALTH_CONFIG"], "warnings": [], "node": node, "checks": {},
                "problems": [{"code": "HEALTH_CONFIG", "severity": "error", "subject": "--context",
                              "message": "--context must be a JSON object: %s" % exc, "fix": "quote it for the shell"}],
                "elapsed_s": clock() - started}
    report = {"verdict": "PASS", "errors": [], "warnings": [], "problems": [], "node": node, "checks": {},
              "inputs": []}
    unknown = 0
    for path in args.diagnose:
        if path == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(path, errors="replace") as handle:
                text = handle.read()
        found = text_diagnosis.diagnose_text(text, args.kind, dict(context, subject=context.get("subject") or path))
        report["inputs"].append({"file": path, "kind": found["kind"], "verdict": found["verdict"]})
        report["checks"][path] = found["kind"] is not None
        unknown += found["kind"] is None
        node_check.merge_problems(report, found["problems"])
    if unknown == len(args.diagnose) and report["verdict"] == "PASS":
        report["verdict"] = "UNKNOWN"
    report["elapsed_s"] = clock() - started
    return report


def run(args, node, started, runner_factory, clock):
    """The report of one run (everything but the exit code)."""
    if args.diagnose:
        return diagnose_files(args, node, started, clock)
    try:
        config = read_config(args.config, args.deadline)
    except node_check.ConfigError as exc:
        return {"verdict": "UNKNOWN", "errors": ["HEALTH_CONFIG"], "warnings": [], "node": node,
                "problems": [{"code": "HEALTH_CONFIG", "severity": "error", "subject": args.config,
                              "message": str(exc), "fix": "correct the settings (the node_health role writes them "
                                                          "from its node_health_* variables) and run again"}],
                "checks": {}, "elapsed_s": clock() - started}
    if args.record:
        return recorded(args, node, config, runner_factory, started, clock)
    # With --slurm, the last seconds are kept for sinfo and scontrol: a node that fails late is still drained.
    reserve = min(SLURM_RESERVE_S, config["deadline_s"] / 2.0) if args.slurm else 0.0
    runner = runner_factory(config["deadline_s"] - reserve)
    report = node_check.quick_check(runner, config, on_crash=lambda exc: traceback.print_exc())
    report["node"] = node
    slurm_runner = runner_factory(max(config["deadline_s"] - (clock() - started), 1.0))
    if args.slurm:
        try:
            report["slurm"] = act_in_slurm(slurm_runner, node, report, config["slurm"]["prefix"])
        except health_io.DeadlineExceeded as exc:
            report["slurm"] = {"action": "none", "why": str(exc), "done": False, "drained": None}
        # What Slurm's own state says (drained by Slurm for low memory, fewer GPUs than Gres, not responding ...).
        node_check.merge_problems(report, report["slurm"].pop("problems", []))
    elif config["metrics"]["textfile_dir"]:
        # Without --slurm nothing is drained or resumed; the metrics still say whether the node is drained by us.
        try:
            out, _why = read_sinfo(slurm_runner, node)
        except health_io.DeadlineExceeded:
            out = None
        report["_drained"] = drained_reason(out, node) if out is not None else None
    report["_metrics_dir"] = config["metrics"]["textfile_dir"]
    report["elapsed_s"] = clock() - started
    return report


if __name__ == "__main__":
    sys.exit(main())
