# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node command's checks (``ddp-health``): its settings, the quick tier, one verdict, the exit code, Slurm.

``ddp-health`` runs the node-local checks of the health stage (``gpu_health``, ``roce_health``) without Ansible, for
Slurm's HealthCheckProgram, a prolog or cron. Its contract follows NVIDIA's health validation (exit 0 keep, 1 remove,
2 could not run) and ``verdict.node_verdict``:

* ``PASS`` and ``WARN`` exit 0, ``FAIL`` (an error, or a check that hung past the deadline) exits 1, ``UNKNOWN``
  (bad settings, a check that crashed) exits 2.
* The settings file (JSON, written by the ``node_health`` role from the same variables the health stage passes to the
  modules) has ``deadline_s`` (seconds, default 50: Slurm kills a HealthCheckProgram after 60 s, slurm.conf(5)),
  ``gpu`` (:data:`GPU_OPTIONS`), ``roce`` (:data:`ROCE_OPTIONS`) and ``slurm`` (``prefix`` of the drain reason,
  default ``ddp-health:``). Options missing take the modules' defaults.
* With Slurm, a ``FAIL`` drains the node with ``<prefix><CODE>[,<CODE>...]``; a node drained with that prefix is
  resumed once it passes; any other drain (an operator's, or the health stage's ``ddp:``, which may come from
  cross-node checks this command cannot see) is left alone (``slurm.drain_plan``).
"""
from __future__ import annotations

import os

from ansible_collections.ddp.cluster.plugins.module_utils.gpu import health as gpu_health
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import health_io
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import roce_health
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import SEVERITIES, problem
from ansible_collections.ddp.cluster.plugins.module_utils.versions import version_tuple_or_none
from ansible_collections.ddp.cluster.plugins.module_utils.slurm.nodes import drain_plan, parse_sinfo_nodes
from ansible_collections.ddp.cluster.plugins.module_utils.slurm.diag import node_problems
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.verdict import node_verdict

EXIT_CODES = {"PASS": 0, "WARN": 0, "FAIL": 1, "UNKNOWN": 2}
DEFAULT_DEADLINE_S = 50
MAX_DEADLINE_S = 55  # below Slurm's 60 s kill, with time to print and act
SLURM_PREFIX = "ddp-health:"

# name: (accepted types, default); the defaults are the gpu_health / roce_health modules' own.
GPU_OPTIONS = {
    "expected_gpus": ((int,), gpu_health.DEFAULTS["expected_gpus"]),
    "min_driver": ((str,), gpu_health.DEFAULTS["min_driver"]),
    "no_gpu_severity": ((str,), gpu_health.DEFAULTS["no_gpu_severity"]),
    "max_temperature_c": ((int,), gpu_health.DEFAULTS["max_temperature_c"]),
    "check_xid": ((bool,), gpu_health.DEFAULTS["check_xid"]),
    "xid_since": ((str,), "boot"),
    "pcie_check": ((bool,), gpu_health.DEFAULTS["pcie_check"]),
    "persistence_required": ((bool,), gpu_health.DEFAULTS["persistence_required"]),
}
ROCE_OPTIONS = {
    "fabric_interface": ((str,), None),
    "nccl_ib_gid_index": ((int, str), None),
    "nccl_socket_ifname": ((str,), None),
    "gloo_socket_ifname": ((str,), None),
    "nccl_net": ((str,), None),
    "nccl_ib_hca": ((str,), None),
    "min_mtu": ((int,), roce_health.DEFAULT_MIN_MTU),
    "no_rdma_severity": ((str,), "warning"),
    "sysfs_root": ((str,), "/sys"),
}


class ConfigError(ValueError):
    """The settings are not usable; ``errors`` lists every reason, one line each."""

    def __init__(self, errors):
        ValueError.__init__(self, "; ".join(errors))
        self.errors = list(errors)


def _section(data, name, options, errors):
    given = data.get(name)
    given = {} if given is None else given
    if not isinstance(given, dict):
        errors.append("%s must be a mapping, got %s" % (name, type(given).__name__))
        return dict((k, v[1]) for k, v in options.items())
    out = {}
    for key in sorted(set(given) - set(options)):
        errors.append("%s.%s is not an option (known: %s)" % (name, key, ", ".join(sorted(options))))
    for key, (types, default) in options.items():
        value = given.get(key)
        if value is None:
            out[key] = default
        elif isinstance(value, bool) and bool not in types or not isinstance(value, types):
            errors.append("%s.%s must be %s, got %r" % (name, key, " or ".join(t.__name__ for t in types), value))
            out[key] = default
        else:
            out[key] = value
    return out


def load_config(data):
    """The settings with every default filled in.

    :param data: the parsed settings file (a dict).
    :returns: ``{"deadline_s": float, "gpu": {...}, "roce": {...}, "slurm": {"prefix": str},
        "metrics": {"textfile_dir": str}}`` (textfile_dir "" when no metrics are written).
    :raises ConfigError: with every problem found (unknown keys, wrong types, out-of-range values).
    """
    if not isinstance(data, dict):
        raise ConfigError(["the settings must be a JSON object, got %s" % type(data).__name__])
    errors = []
    for key in sorted(set(data) - {"deadline_s", "gpu", "roce", "slurm", "metrics"}):
        errors.append("%s is not a setting (known: deadline_s, gpu, roce, slurm, metrics)" % key)
    deadline = data.get("deadline_s", DEFAULT_DEADLINE_S)
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not 1 <= deadline <= MAX_DEADLINE_S:
        errors.append("deadline_s must be a number of seconds in [1, %d], got %r" % (MAX_DEADLINE_S, deadline))
        deadline = DEFAULT_DEADLINE_S
    gpu = _section(data, "gpu", GPU_OPTIONS, errors)
    roce = _section(data, "roce", ROCE_OPTIONS, errors)
    slurm = data.get("slurm")
    slurm = {} if slurm is None else slurm
    prefix = slurm.get("prefix", SLURM_PREFIX) if isinstance(slurm, dict) else None
    if not isinstance(slurm, dict) or set(slurm) - {"prefix"}:
        errors.append("slurm must be a mapping with prefix only, got %r" % (slurm,))
    elif not isinstance(prefix, str) or not prefix.strip() or prefix.startswith("ddp:") or "ddp:".startswith(prefix):
        errors.append("slurm.prefix must be a non-empty text other than the health stage's ddp:, got %r" % (prefix,))
    for key in ("no_gpu_severity",):
        if gpu[key] not in SEVERITIES:
            errors.append("gpu.%s must be one of %s, got %r" % (key, ", ".join(SEVERITIES), gpu[key]))
    if roce["no_rdma_severity"] not in roce_health.NO_RDMA_SEVERITIES:
        errors.append("roce.no_rdma_severity must be one of %s, got %r"
                      % (", ".join(roce_health.NO_RDMA_SEVERITIES), roce["no_rdma_severity"]))
    if gpu["min_driver"] is not None and version_tuple_or_none(gpu["min_driver"]) is None:
        errors.append("gpu.min_driver must be a dotted version such as 530.30.02, got %r" % gpu["min_driver"])
    if gpu["expected_gpus"] is not None and gpu["expected_gpus"] < 0:
        errors.append("gpu.expected_gpus must be 0 or more, got %d" % gpu["expected_gpus"])
    if roce["min_mtu"] <= 0:
        errors.append("roce.min_mtu must be a positive number of bytes, got %d" % roce["min_mtu"])
    metrics = data.get("metrics")
    metrics = {} if metrics is None else metrics
    textfile_dir = metrics.get("textfile_dir", "") if isinstance(metrics, dict) else None
    if not isinstance(metrics, dict) or set(metrics) - {"textfile_dir"}:
        errors.append("metrics must be a mapping with textfile_dir only, got %r" % (metrics,))
    elif not isinstance(textfile_dir, str) or (textfile_dir and not textfile_dir.startswith("/")):
        errors.append("metrics.textfile_dir must be empty (no metrics) or an absolute path, got %r" % (textfile_dir,))
    if errors:
        raise ConfigError(errors)
    return {"deadline_s": float(deadline), "gpu": gpu, "roce": roce,
            "slurm": {"prefix": prefix if isinstance(prefix, str) else SLURM_PREFIX},
            "metrics": {"textfile_dir": textfile_dir or ""}}


def _crashed(check, exc):
    return problem("HEALTH_CHECK_CRASHED", "error", check,
                   "the %s check raised %s: %s (the traceback is on stderr)" % (check, type(exc).__name__, exc),
                   "report it with ddp-health's stderr and the output of the command it names; the verdict is "
                   "UNKNOWN unless the other check found an error")


def quick_check(runner, config, on_crash=None):
    """Run the quick tier (the GPU check, then the RDMA/RoCE check) on this node.

    :param runner: see ``health_io`` (``CommandRunner`` with the deadline, or an AnsibleModule).
    :param config: :func:`load_config` output; ``roce.sysfs_root`` (``/sys``) is where both checks read sysfs.
    :param on_crash: called with the exception when a check raises one (the program prints its traceback).
    :returns: ``{"verdict", "errors", "warnings", "problems", "checks": {"gpu": bool finished, "roce": ...}}``.
        A check that did not finish within the deadline is a fault of the node (``HEALTH_DEADLINE``, FAIL: what
        hangs here is nvidia-smi on a failing GPU, or the kernel log of a failing system), and the checks after it do
        not run. A check that crashed (``HEALTH_CHECK_CRASHED``) makes the verdict UNKNOWN, unless a check that
        finished found an error: then it is FAIL.
    """
    problems, ran = [], {}
    pci_root = os.path.join(config["roce"]["sysfs_root"], "bus", "pci", "devices")

    def gpu():
        raw = health_io.collect_gpu(runner, config["gpu"], pci_root=pci_root, timeout_s=config["deadline_s"])
        return gpu_health.diagnose(gpu_health.build_facts(raw), config["gpu"])

    def roce():
        return roce_health.diagnose(health_io.gather_roce(runner, config["roce"]), config["roce"])

    steps = (("gpu", gpu), ("roce", roce))
    crashed = False
    for name, step in steps:
        try:
            problems.extend(step())
            ran[name] = True
        except health_io.DeadlineExceeded as exc:
            problems.append(problem("HEALTH_DEADLINE", "error", name,
                                    "the %s check did not finish within %g s: %s" % (name, config["deadline_s"], exc),
                                    "run ddp-health --json by hand to see which command hangs: a hung nvidia-smi is "
                                    "a GPU or driver fault (look for Xid 79 in the kernel log; reset the GPU or "
                                    "reboot), a hung journalctl a system one"))
            ran[name] = False
            break
        except Exception as exc:  # pylint: disable=broad-except
            if on_crash is not None:
                on_crash(exc)
            problems.append(_crashed(name, exc))
            ran[name] = False
            crashed = True
    found = [p for p in problems if p["code"] != "HEALTH_CHECK_CRASHED" and p["severity"] == "error"]
    out = node_verdict(problems, ran=not crashed or bool(found))
    out["problems"] = sorted(problems, key=lambda p: -SEVERITIES.index(p["severity"]))  # errors first
    out["checks"] = dict((n, ran.get(n, False)) for n, _step in steps)
    return out


def merge_problems(report, problems):
    """Add ``problems`` found outside the quick tier (Slurm's view of the node, a text read with --diagnose) to a
    :func:`quick_check` report: errors make PASS/WARN a FAIL, warnings make PASS a WARN; UNKNOWN stays UNKNOWN unless
    an error is added. Returns the report (changed in place)."""
    if not problems:
        return report
    report["problems"] = sorted(list(report.get("problems") or []) + list(problems),
                                key=lambda p: -SEVERITIES.index(p["severity"]))
    errors = set(report.get("errors") or []) | set(p["code"] for p in problems if p["severity"] == "error")
    warnings = set(report.get("warnings") or []) | set(p["code"] for p in problems if p["severity"] == "warning")
    report["errors"], report["warnings"] = sorted(errors), sorted(warnings)
    if errors:
        report["verdict"] = "FAIL"
    elif warnings and report.get("verdict") == "PASS":
        report["verdict"] = "WARN"
    return report


def exit_code(verdict):
    """0 keep (PASS, WARN), 1 remove (FAIL), 2 could not run (UNKNOWN)."""
    return EXIT_CODES[verdict]


def slurm_plan(sinfo_text, node, verdict, prefix=SLURM_PREFIX):
    """What to do to this node in Slurm after a run.

    :param sinfo_text: ``sinfo -h -N -n <node> -o '%N|%T|%E'`` output.
    :param node: the Slurm node name.
    :param verdict: :func:`quick_check` output; nothing is done for ``UNKNOWN``.
    :returns: ``{"action": "drain"|"resume"|"none", "reason": str or None, "why": str, "problems": [...]}``;
        ``problems`` are what Slurm's own state of the node says (``slurm_diag.node_problems``: a drain or DOWN that
        Slurm set, not responding, an operator's drain), to be added to the node's verdict.
    :raises slurm.SlurmParseError: on sinfo output of another format.
    """
    states = parse_sinfo_nodes(sinfo_text)
    if node not in states:
        return {"action": "none", "reason": None, "why": "%s is not a node sinfo lists" % node, "problems": []}
    found = node_problems(states, [node])
    if verdict["verdict"] == "UNKNOWN":
        return {"action": "none", "reason": None, "why": "the checks did not run: nothing to act on",
                "problems": found}
    plan = drain_plan(states, {node: verdict["errors"]}, prefix=prefix)
    if node in plan["drain"]:
        return {"action": "drain", "reason": plan["drain"][node], "why": "the node fails its checks",
                "problems": found}
    if node in plan["resume"]:
        return {"action": "resume", "reason": None, "why": "drained by ddp-health earlier and healthy now",
                "problems": found}
    if node in plan["slurm"]:
        return {"action": "none", "reason": None, "problems": found,
                "why": "Slurm itself took it out of service (%s): left as it is, see the SLURM_* finding"
                       % states[node]["reason"]}
    if node in plan["operator"]:
        return {"action": "none", "reason": None, "problems": found,
                "why": "drained by someone else (%s): left as it is" % states[node]["reason"]}
    return {"action": "none", "reason": None, "why": "nothing to change", "problems": found}
