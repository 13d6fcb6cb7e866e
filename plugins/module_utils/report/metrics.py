# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's health verdicts and the benchmark's last figures as Prometheus metrics (pure: text in, text out).

Written as files for node exporter's textfile collector (``--collector.textfile.directory``; Debian's default
``/var/lib/prometheus/node-exporter``), in Prometheus's text exposition format
(https://prometheus.io/docs/instrumenting/exposition_formats/: ``# HELP``, ``# TYPE``, ``name{label="value"} number``;
label values escape backslash, double quote and line feed). Node exporter serves every ``*.prom`` file of the folder
with its own metrics, so Prometheus gets them with the node's ``instance`` label.

Who writes what:

- ``ddp-health`` (roles/node_health/files/ddp_health.py; each run, also as Slurm's HealthCheckProgram):
  ``ddp_health.prom`` with ``source="ddp-health"``;
- the health stage (playbooks/health.yml), per node, through ``ddp-health --record``: ``ddp_health_stage.prom``
  with ``source="health-stage"`` and its tier (quick or burnin);
- both, after reading Slurm: ``ddp_slurm_drain.prom`` (whether ddp.cluster has the node drained, and why);
- the benchmark (roles/ddp_benchmark), on the head: ``ddp_benchmark.prom``.

Both health writers use the same names and help texts (node exporter refuses a name whose help differs between
files), told apart by ``source``.
"""
from __future__ import annotations

import math

VERDICTS = ("PASS", "WARN", "FAIL", "UNKNOWN")
# A verdict that keeps the node in service (module_utils/cluster/verdict.py: exit 0 keep, 1 remove).
HEALTHY_VERDICTS = ("PASS", "WARN")

HEALTH_FILE = "ddp_health.prom"
STAGE_FILE = "ddp_health_stage.prom"
DRAIN_FILE = "ddp_slurm_drain.prom"

HELP = {
    "ddp_health_healthy": ("gauge", "1 when the node's last health verdict keeps it in service (PASS or WARN), "
                                    "0 when it removes it (FAIL or UNKNOWN)."),
    "ddp_health_verdict": ("gauge", "The node's last health verdict: 1 on the verdict it had, 0 on the others."),
    "ddp_health_problem": ("gauge", "One series per problem code of the last health run (docs/troubleshooting.md), "
                                    "labelled with its severity."),
    "ddp_health_last_run_timestamp_seconds": ("gauge", "When the health check last finished (Unix time)."),
    "ddp_health_duration_seconds": ("gauge", "How long the last health check took."),
    "ddp_health_slurm_drained": ("gauge", "1 when Slurm has the node drained with a reason of ddp.cluster's "
                                          "(ddp: of the health stage, ddp-health: of the HealthCheckProgram), "
                                          "labelled with the reason; 0 otherwise."),
    "ddp_benchmark_images_per_second": ("gauge", "Global images/s of the benchmark's last run, per run of its "
                                                 "matrix."),
    "ddp_benchmark_scaling_efficiency": ("gauge", "Scaling efficiency of the benchmark's last run (throughput "
                                                  "over processes x the 1-process throughput; 1 is linear)."),
    "ddp_benchmark_last_run_timestamp_seconds": ("gauge", "When the benchmark's last run finished (Unix time)."),
}


def escape(value):
    """A label value as the exposition format writes it (backslash, double quote and line feed escaped)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels):
    return "{" + ",".join('%s="%s"' % (key, escape(val)) for key, val in labels) + "}" if labels else ""


def _number(value):
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value) if not value.is_integer() else str(int(value))


def render(samples):
    """``[(name, [(label, value), ...], number), ...]`` -> exposition text, each name's HELP and TYPE once, first."""
    order, by_name = [], {}
    for name, labels, value in samples:
        if name not in HELP:
            raise ValueError("unknown metric %r (module_utils/report/metrics.py HELP)" % name)
        if name not in by_name:
            order.append(name)
            by_name[name] = []
        by_name[name].append("%s%s %s" % (name, _labels(labels), _number(value)))
    lines = []
    for name in order:
        kind, text = HELP[name]
        lines += ["# HELP %s %s" % (name, text), "# TYPE %s %s" % (name, kind)] + by_name[name]
    return "\n".join(lines) + "\n" if lines else ""


def health_samples(verdict, problems, source, finished_at, duration_s=None, tier=None):
    """The samples of one health verdict.

    :param verdict: PASS, WARN, FAIL or UNKNOWN; :param problems: ``[{code, severity}]`` (the result shape of
        module_utils/diagnosis.py), one series each (a code seen twice counts once, at its highest severity);
    :param source: ``ddp-health`` or ``health-stage``; :param finished_at: Unix time; :param duration_s: seconds or
        None; :param tier: quick or burnin (a label) or None.
    :raises ValueError: on a verdict that is not one of :data:`VERDICTS`.
    """
    if verdict not in VERDICTS:
        raise ValueError("verdict must be one of %s, got %r" % (", ".join(VERDICTS), verdict))
    base = [("source", source)] + ([("tier", tier)] if tier else [])
    out = [("ddp_health_healthy", base, 1 if verdict in HEALTHY_VERDICTS else 0)]
    out += [("ddp_health_verdict", base + [("verdict", v)], 1 if v == verdict else 0) for v in VERDICTS]
    rank = {"info": 0, "warning": 1, "error": 2}
    worst = {}
    for item in problems or []:
        code, severity = item.get("code"), item.get("severity", "error")
        if code and rank.get(severity, 2) >= rank.get(worst.get(code), -1):
            worst[code] = severity
    out += [("ddp_health_problem", base + [("code", code), ("severity", worst[code])], 1) for code in sorted(worst)]
    out.append(("ddp_health_last_run_timestamp_seconds", base, round(float(finished_at), 3)))
    if duration_s is not None:
        out.append(("ddp_health_duration_seconds", base, round(float(duration_s), 3)))
    return out


def drain_samples(reason):
    """The drain series: ``reason`` "" when ddp.cluster has not drained the node, else the drain's reason.

    Written to its own file (:data:`DRAIN_FILE`) by whoever read Slurm last (ddp-health each run, the health stage
    after its drains and resumes), so the series follows a resume at once whichever of them made it.
    """
    return [("ddp_health_slurm_drained", [("reason", reason or "")], 1 if reason else 0)]


def drained_by_us(state, reason, prefixes=("ddp:", "ddp-health:")):
    """The drain reason when Slurm's node ``state`` (sinfo %T) is a drain with one of our ``prefixes``, else ""."""
    if str(state or "").lower().startswith("drain") and str(reason or "").startswith(tuple(prefixes)):
        return str(reason)
    return ""


def benchmark_samples(rows, finished_at):
    """The samples of a benchmark report's rows (module_utils/report/benchmark.py matrix_rows).

    One images/s series per row (labels run, nodes, processes, launcher, variant), efficiency where the row has one,
    and the time of the run. Rows without throughput are left out.
    """
    out = []
    for row in rows or []:
        if row.get("global_images_per_s") is None:
            continue
        labels = [("run", row.get("run", "")), ("nodes", row.get("nodes", "")), ("processes", row.get("processes", "")),
                  ("launcher", row.get("launcher", "")), ("variant", row.get("variant", ""))]
        out.append(("ddp_benchmark_images_per_second", labels, row["global_images_per_s"]))
        if row.get("efficiency") is not None:
            out.append(("ddp_benchmark_scaling_efficiency", labels, row["efficiency"]))
    if out:
        out.append(("ddp_benchmark_last_run_timestamp_seconds", [], round(float(finished_at), 3)))
    return out
