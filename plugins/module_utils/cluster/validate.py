# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure rules of the ``validate`` stage: every input, on the controller, before any node is contacted.

No I/O here. The ``ddp.cluster.validate_problems`` filter collects what the inventory and the extra
vars set (for every node) and the roles' ``meta/argument_specs.yml``, and calls :func:`validate`.

Every problem is ``{code, variable, message, fix}`` (the shape of module_utils/cluster/preflight.py), rendered
by the playbooks as ``[CODE] variable: message. Fix: fix``.

Rules: the type, choices and elements of every option of every role's argument spec and of the
cluster-level ``ddp_*`` variables (:data:`CLUSTER_OPTIONS`), by ansible-core's own ``ArgumentSpecValidator``
(:func:`core_errors`) with our stricter rules on top where core would convert a value silently (YAML's
booleans and numbers where a string is wanted, a comma string where a list is: :func:`_strict_problem`);
ranges by name (``*_port``, ``*_ports``, ``*_timeout``, ``rdma_mtu``) and bounds of counts and sizes (:data:`CAPS`); variables carrying one of our
prefixes that nothing reads (with the closest known name); versions given as YAML numbers; addresses;
host names; duplicate ``ansible_host``; every ``*_user`` (not root, not a system account); ports used
twice and port forms; tokens of slurm.conf, gres.conf, nccl.conf and the environment; paths on the nodes
(absolute, no ``..``, outside world-writable folders, not a system file); URLs; firewall sources and
zones; values whose Jinja cannot be rendered on the controller; conda without a verified installer;
NCCL settings NCCL does not document (module_utils/fabric/rdma_config.py's rule); the rules the roles ran on
the nodes (slurm's ids, controller and munge key, rdma's OFED source, the benchmark matrix of
module_utils/report/benchmark.py, ddp-health's settings of module_utils/cluster/node_check.py); the launcher
against the scheduler; the variables a role reads once for the whole run, one value across the nodes
(:data:`CLUSTER_WIDE`); and the inventory shape of module_utils/cluster/preflight.py. Values of ``no_log``
options are masked (``********``) in every message.
"""
from __future__ import annotations

import difflib
import ipaddress
import math
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import ArgumentTypeError, ArgumentValueError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import variant_problems
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.node_check import ConfigError as HealthConfigError
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.node_check import load_config as load_health_config
from ansible_collections.ddp.cluster.plugins.module_utils.system.openpgp import fingerprint_format_problem
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.preflight import inventory_problems
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_config import (
    nccl_override_problems, ofed_version_from_name, torch_nccl_env)

__all__ = [
    "CLUSTER_OPTIONS",
    "PREFIXES",
    "PROBLEM_CODES",
    "known_options",
    "core_errors",
    "option_problems",
    "path_problems",
    "port_entry_problem",
    "template_problem",
    "validate",
    "values_problems",
]

PROBLEM_CODES = (
    "VALIDATE_UNKNOWN_VAR",
    "VALIDATE_TYPE",
    "VALIDATE_CHOICE",
    "VALIDATE_RANGE",
    "VALIDATE_VERSION_NUMBER",
    "VALIDATE_BAD_ADDRESS",
    "VALIDATE_DUPLICATE_HOST",
    "VALIDATE_BAD_HOSTNAME",
    "VALIDATE_BAD_USER",
    "VALIDATE_ROOT_USER",
    "VALIDATE_CONDA_NO_INSTALLER",
    "VALIDATE_CONDA_NO_CHECKSUM",
    "VALIDATE_LAUNCHER_NEEDS_SLURM",
    "VALIDATE_ENV_PATH",
    "VALIDATE_DOWNLOAD_NO_CHECKSUM",
    "VALIDATE_REPO_KEY",
    "VALIDATE_SHRINK",
    "VALIDATE_SYSTEM_USER",
    "VALIDATE_PORT_CONFLICT",
    "VALIDATE_PORT_FORM",
    "VALIDATE_CONFIG_TOKEN",
    "VALIDATE_PATH",
    "VALIDATE_NOT_FINITE",
    "VALIDATE_URL",
    "VALIDATE_FIREWALL_SOURCE",
    "VALIDATE_FIREWALL_ZONE",
    "VALIDATE_TEMPLATE",
    "VALIDATE_FACT_VARIABLE",
    "VALIDATE_SLURM",
    "VALIDATE_MUNGE_KEY",
    "VALIDATE_OFED_SOURCE",
    "VALIDATE_BENCHMARK_MATRIX",
    "VALIDATE_HEALTH_CONFIG",
    "VALIDATE_SHARED_DIR",
    "VALIDATE_ELASTIC_NODES",
    "VALIDATE_NOT_CLUSTER_WIDE",
)

# Variables with one of these prefixes are ours: a name that no role and no playbook reads is refused.
PREFIXES = (
    "ddp_", "preflight_", "nvidia_repo_", "nvidia_driver_", "cuda_toolkit_", "cudnn_", "nccl_", "rdma_",
    "net_tuning_", "ssh_trust_", "firewall_", "slurm_", "pytorch_env_", "ddp_benchmark_", "node_health_",
    "metrics_",
)

# playbooks/awx_setup.yml reads its own ddp_awx_* variables on the controller: not checked here.
OWN_NAMESPACES = ("ddp_awx_",)

_FAIL_ON = ["error", "warning", "never"]
_SEVERITY = ["error", "warning", "info"]

# The cluster-level variables the playbooks and the roles' defaults read (role options are in the
# roles' meta/argument_specs.yml). type as in argument specs; version: a version string;
# address: a host name or an IP address.
CLUSTER_OPTIONS = {
    "ddp_nodes_group": {"type": "str"},
    "ddp_head_group": {"type": "str"},
    "ddp_rdzv_addr": {"type": "str", "address": True},
    "ddp_rdzv_port": {"type": "raw", "preflight": True},
    "ddp_nproc_per_node": {"type": "raw"},
    "ddp_torch_version": {"type": "str", "version": True},
    "ddp_torchvision_version": {"type": "str", "version": True},
    "ddp_cuda_version": {"type": "str", "version": True},
    "ddp_nvidia_driver_version": {"type": "str", "version": True},
    "ddp_nvidia_repo_url": {"type": "str"},
    "ddp_nvidia_repo_key_url": {"type": "str"},
    "ddp_scheduler": {"type": "str", "choices": ["slurm", "none"]},
    "ddp_cluster_user": {"type": "str"},
    "ddp_cluster_uid": {"type": "int", "min": 1, "max": 2147483646},
    "ddp_become": {"type": "bool"},
    "ddp_env_path": {"type": "path"},
    "ddp_fabric_address": {"type": "str", "address": True},
    "ddp_nccl_socket_ifname": {"type": "str"},
    "ddp_gloo_socket_ifname": {"type": "str"},
    "ddp_nccl_ib_gid_index": {"type": "raw"},
    "ddp_health_expected_gpus": {"type": "int", "min": 0},
    "ddp_health_no_gpu_severity": {"type": "str", "choices": _SEVERITY},
    "ddp_health_no_rdma_severity": {"type": "str", "choices": _SEVERITY},
    "ddp_health_fail_on": {"type": "str", "choices": _FAIL_ON},
    "ddp_health_probe_port": {"type": "int"},
    "ddp_health_nccl_port": {"type": "int"},
    "ddp_health_nccl_nproc": {"type": "int", "min": 1},
    "ddp_health_min_busbw_gbps": {"type": "float", "min": 0},
    "ddp_health_floor_rdma_fraction": {"type": "float", "min": 0.01, "max": 1},
    "ddp_health_floor_tcp_fraction": {"type": "float", "min": 0.001, "max": 1},
    "ddp_health_join_timeout": {"type": "int"},
    "ddp_health_nccl_timeout": {"type": "int"},
    "ddp_health_probe_window": {"type": "int", "min": 1, "max": 3600},
    "ddp_health_level": {"type": "str", "choices": ["quick", "burnin"]},
    "ddp_health_burnin_seconds": {"type": "int", "min": 1, "max": 86400},
    "ddp_health_burnin_size": {"type": "int", "min": 0, "max": 65536},
    "ddp_health_burnin_min_ratio": {"type": "float", "min": 0.01, "max": 1},
    "ddp_health_dcgm_level": {"type": "int", "min": 0, "max": 4},
    "ddp_health_dcgm_timeout": {"type": "int", "min": 10, "max": 86400},
    "ddp_health_tcp_measure_mib": {"type": "int", "min": 0, "max": 4096},
    "ddp_health_pairwise": {"type": "str", "choices": ["auto", "always", "never"]},
    "ddp_health_pair_min_ratio": {"type": "float", "min": 0.01, "max": 1},
    "ddp_health_pair_join_timeout": {"type": "int", "min": 1, "max": 3600},
    "ddp_health_pair_timeout": {"type": "int", "min": 1, "max": 86400},
    # message sizes of the pair all-reduces, bytes (nccl_health's sizes): at least one element
    "ddp_health_pair_sizes": {"type": "list", "elements": "int", "elements_min": 1},
    "ddp_health_history_file": {"type": "path"},
    "ddp_health_repeat_window_days": {"type": "float", "min": 0.001, "max": 3650},
    "ddp_health_repeat_threshold": {"type": "int", "min": 2, "max": 1000},
    "ddp_metrics_textfile_dir": {"type": "path"},
    "ddp_shared_dir": {"type": "path"},
    "ddp_hang_timeout": {"type": "int", "min": 10, "max": 86400},
    # Day 2 (playbooks/shrink.yml, playbooks/rolling.yml)
    "ddp_shrink_nodes": {"type": "list", "elements": "str"},
    "ddp_drain_timeout": {"type": "int", "min": 1, "max": 604800},
    "ddp_rolling_batch": {"type": "int", "min": 1},
}

# Names the collection itself registers or sets (results, facts): never an input, never refused.
RESERVED = frozenset(("ddp_health_gpu", "ddp_health_roce", "ddp_health_nccl", "ddp_benchmark_results",
                      "pytorch_env_stack_probe"))

# The training environment: one cluster-level variable; the roles' own names default to it.
DEFAULT_ENV_PATH = "/opt/ddp/venv"
ENV_PATH_ALIASES = ("pytorch_env_path", "ddp_benchmark_env_path", "rdma_torch_venv")

# Free-form values written into a script root runs at boot (roles/rdma/templates/ddp-rdma-roce.sh.j2):
# only what the setting can hold.
SHELL_VALUE_RULES = (
    ("rdma_cma_roce_tos", r"^(|[0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$",
     "empty or a ToS byte 0-255 (106 is DSCP 26)"),
    ("rdma_qos_pfc", r"^(|[01](,[01]){7})$", "empty or eight 0/1 values, e.g. \"0,0,0,1,0,0,0,0\""),
)

_PATH_RULES = tuple(
    (name, r"^/[^\s\"]*$" if required else r"^(|/[^\s\"]*)$",
     "an absolute path without spaces" if required else "empty (no metrics) or an absolute path without spaces")
    for name, required in (("ddp_metrics_textfile_dir", True), ("metrics_textfile_dir", True),
                           ("node_health_metrics_dir", False), ("ddp_benchmark_metrics_dir", False)))
_DURATION_RULES = tuple(
    (name, r"^[0-9]+(ms|s|m|h|d|w|y)$", "a Prometheus duration such as %s" % example)
    for name, example in (("metrics_retention", "15d"), ("metrics_exporter_down_for", "1m")))
# Values written into a daemon's configuration file (slurmdbd.conf, sacctmgr, SQL names): what the setting can hold.
# slurmdbd.conf(5) reads '#' as the start of a comment and cuts a value at white space.
CONFIG_VALUE_RULES = (
    ("slurm_accounting_db_name", r"^[A-Za-z0-9_]{1,64}$", "a MariaDB database name: letters, digits and _"),
    ("slurm_accounting_db_user", r"^[A-Za-z0-9_]{1,32}$", "a MariaDB user name: letters, digits and _"),
    ("slurm_accounting_account", r"^[a-z0-9_][a-z0-9_.-]{0,63}$",
     "a Slurm account name: lower-case letters, digits, _, . and -"),
    ("metrics_prometheus_listen_address", r"^([A-Za-z0-9.-]*|\[[0-9a-fA-F:]+\]):[0-9]{1,5}$",
     "host:port, e.g. 127.0.0.1:9090 (the head only) or :9090 (every address)"),
    ("metrics_dcgm_exporter_version", r"^(|[0-9][A-Za-z0-9.:~+-]*)$",
     "empty (the newest) or a package version such as 4.8.2-1"),
) + _PATH_RULES + _DURATION_RULES
# Secrets: checked without ever printing them (slurm_munge_key: _slurm_problems; option_problems masks no_log values).
SECRET_VALUE_RULES = (
    ("slurm_accounting_db_password", r'^(|[!"$-~]{12,128})$',
     "empty (generated on the controller) or 12-128 printable ASCII characters without spaces and without '#' "
     "(slurmdbd.conf reads '#' as a comment)"),
)

_USER = re.compile(r"^[a-z_][a-z0-9_-]*$")
# Inventory names end up in known_hosts, slurm.conf NodeName and /etc/hosts: a DNS-like name.
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_SHA256 = re.compile(r"^(sha256:)?[0-9a-fA-F]{64}$")
# A download's checksum as get_url takes it: <algorithm>:<hex> (sha256, sha384 or sha512).
_CHECKSUM = re.compile(r"^(sha256:[0-9a-fA-F]{64}|sha384:[0-9a-fA-F]{96}|sha512:[0-9a-fA-F]{128})$")
_URL = re.compile(r"^(https?|ftp)://")
# Option names whose value is text that a number cannot be (a path, a URL, an account, a zone, a port range...).
_NOT_A_NUMBER = re.compile(r"(_url|_urls|_dir|_path|_file|_program|_user|_zone|_range|_installer|_wheelhouse"
                           r"|_tarball|_source|_prefix|_controller|_group|_python)$")
# str options whose value may hold line breaks: the munge key as `openssl rand -base64 96` prints it (wrapped
# at 64 characters) is written to the key file as it is.
MULTILINE_OK = frozenset(["slurm_munge_key"])


def _problem(code, variable, message, fix):
    return {"code": code, "variable": variable, "message": message, "fix": fix}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value):
    """value as an int when Ansible's int conversion would accept it (int or digit string), else None."""
    if _is_int(value):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?[0-9]+\s*$", value):
        return int(value)
    return None


def _as_float(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _kind(value):
    if isinstance(value, bool):
        return "a boolean"
    if _is_int(value):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "null"
    return type(value).__name__


def _closest(name, candidates):
    found = difflib.get_close_matches(str(name), sorted(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _type_problem(name, value, wanted, example):
    return _problem(
        "VALIDATE_TYPE", name, "%s is %s (%r); it must be %s" % (name, _kind(value), value, wanted),
        "set %s to %s, e.g. %s." % (name, wanted, example))


# What a value of each argument-spec type must be, said to the user, with an example (the phrasing of a type error
# that ansible-core's validator or a rule of ours found).
_WANTED = {"int": ("an integer", "%s: 10"), "float": ("a number", "%s: 1.5"), "bool": ("a boolean", "%s: true"),
           "list": ("a list", "%s: [first, second]"), "dict": ("a mapping", "%s: {KEY: value}")}


def core_errors(name, value, spec):
    """ansible-core's verdict on one value: the errors of its ``ArgumentSpecValidator`` for the argument-spec keys it
    knows (``type``, ``choices``, ``elements``), the exceptions of ``ansible.module_utils.errors``
    (``ArgumentTypeError``, ``ArgumentValueError`` for a choice, ``ElementError``); an empty list when it takes the
    value. Core converts where it can (``"10"`` to an int, ``"a,b"`` to a list, anything to a string): the rules of
    :func:`_strict_problem` sit on top of it for what YAML users get wrong that way."""
    core = dict((key, spec[key]) for key in ("type", "choices", "elements") if spec.get(key) is not None)
    if core.get("type", "str") != "list":
        core.pop("elements", None)
    return list(ArgumentSpecValidator({name: core}).validate({name: value}).errors)


def _strict_problem(name, value, typ, version):
    """Our rules on top of ansible-core's type check, for values core would convert silently: booleans and numbers
    where a string is wanted (YAML's ``on`` and ``2.10``), line breaks, a boolean or a fraction where an integer is,
    a comma string where a list is. A problem, or None."""
    if typ in ("str", "path") and isinstance(value, bool):
        return _problem(
            "VALIDATE_TYPE", name,
            "%s is the boolean %r; it must be a string (YAML reads yes, no, on and off unquoted as booleans)"
            % (name, value),
            "quote it: %s: \"%s\"." % (name, "on" if value else "off"))
    if typ in ("str", "path") and _is_int(value) and _NOT_A_NUMBER.search(name):
        return _type_problem(name, value, "a string (%s)" % _NOT_A_NUMBER.search(name).group(1).strip("_"),
                             '"text"')
    if typ in ("str", "path"):
        if version and isinstance(value, (int, float)) and not isinstance(value, bool):
            return _problem(
                "VALIDATE_VERSION_NUMBER", name,
                "%s is the YAML number %r, not a version string: YAML reads 2.10 as 2.1 and 12.10 as 12.1"
                % (name, value),
                "quote it: %s: \"%s\" (with the exact digits you meant)." % (name, value))
        if isinstance(value, float):
            return _problem(
                "VALIDATE_VERSION_NUMBER", name,
                "%s is the YAML number %r; a string was expected, and YAML drops trailing zeros" % (name, value),
                "quote it: %s: \"%s\" (with the exact digits you meant)." % (name, value))
        if isinstance(value, (dict, list, tuple)) or value is None and typ == "path":
            return _type_problem(name, value, "a string", '"text"')
        if isinstance(value, str) and ("\0" in value or name not in MULTILINE_OK and any(c in value for c in "\n\r")):
            return _problem("VALIDATE_TYPE", name, "%s contains a line break or NUL byte" % name,
                            "give %s as one line." % name)
        return None
    strict = {
        # core takes True and 5.0 as integers and Python's "1_000"; Jinja's int filter and our rules read digits
        "int": isinstance(value, (bool, float)) or isinstance(value, str) and _as_int(value) is None,
        "float": isinstance(value, bool),  # core takes a boolean as a number
        "bool": isinstance(value, float),  # core takes 1.0 and 0.0 as booleans
        "list": not isinstance(value, (list, tuple)),  # core splits a string at commas
        "dict": not isinstance(value, dict),  # core parses "k=v" strings
    }
    if strict.get(typ):
        return _type_problem(name, value, _WANTED[typ][0], _WANTED[typ][1] % name)
    return None


def _scalar_problem(name, value, typ, version=False):
    """Type problem for one value of argument-spec type ``typ``: our rules on top (:func:`_strict_problem`), then
    ansible-core's type check (:func:`core_errors`), phrased by type; then a float that is not finite. Or None."""
    found = _strict_problem(name, value, typ, version)
    if found:
        return found
    if any(isinstance(e, ArgumentTypeError) for e in core_errors(name, value, {"type": typ})):
        wanted, example = _WANTED.get(typ, ("a value of type %s" % typ, "%s: ..."))
        return _type_problem(name, value, wanted, example % name)
    if typ == "float" and not math.isfinite(_as_float(value)):
        return _problem("VALIDATE_NOT_FINITE", name, "%s is %r, not a finite number" % (name, value),
                        "set %s to a finite number (YAML reads .nan and .inf as NaN and infinity)." % name)
    return None


# Listening ports where 0 asks the kernel for a free one (the controller's wheelhouse index).
PORT_ZERO_MEANS_ANY = frozenset(["pytorch_env_wheelhouse_port"])


def _range_problem(name, value, low, high, why):
    return _problem(
        "VALIDATE_RANGE", name, "%s is %r; %s" % (name, value, why),
        "set %s to a value from %s to %s." % (name, low, high) if high is not None
        else "set %s to a value of at least %s." % (name, low))


# Role options whose argument spec cannot say it all (no min/max; a templated default needs type raw there):
# checked here, before any node is contacted.
ROLE_RANGES = {
    # Slurm kills a HealthCheckProgram after 60 s (slurm.conf(5)); the command needs a few seconds to report and drain.
    "node_health_deadline_s": {"min": 1, "max": 55},
    "node_health_expected_gpus": {"type": "int", "min": 0},
    "slurm_health_check_interval": {"min": 0},
    # uid/gid 0 is root's; Slurm's and munge's accounts are system accounts with ids of their own.
    "slurm_uid": {"min": 1, "max": 2147483646}, "slurm_gid": {"min": 1, "max": 2147483646},
    "slurm_munge_uid": {"min": 1, "max": 2147483646}, "slurm_munge_gid": {"min": 1, "max": 2147483646},
    "slurm_return_to_service": {"min": 0, "max": 2},
    # ddp_bench.py's own bounds (roles/ddp_benchmark/files/ddp_bench.py: positive counts and sizes).
    "ddp_benchmark_batch_size": {"min": 1}, "ddp_benchmark_image_size": {"min": 1},
    "ddp_benchmark_steps": {"min": 1}, "ddp_benchmark_cpu_threads": {"min": 1},
    "ddp_benchmark_base_lr": {"min": 0.0000001},
    # module_utils/report/benchmark.py compare_rows: a fraction in [0, 1).
    "ddp_benchmark_regression_threshold": {"min": 0, "max": 0.999999},
    "node_health_max_temperature_c": {"min": 1},
    # raw in the spec (a templated default); an id when given
    "ssh_trust_user_uid": {"type": "int", "min": 1, "max": 2147483646},
    "metrics_scrape_interval_s": {"min": 1, "max": 3600},
    "slurm_accounting_db_buffer_pool_mb": {"min": 16},
    "metrics_health_stale_s": {"min": 1},
    "slurm_job_hang_timeout": {"type": "int", "min": 10, "max": 86400},
    "slurm_job_max_requeue": {"type": "int", "min": 0, "max": 100},
    "slurm_job_max_restarts": {"type": "int", "min": 0, "max": 100},
    "slurm_cred_expire": {"type": "int", "min": 10, "max": 86400},
}

# Storage every node sees (checkpoints): an absolute path, and never a folder every user can write, which the
# roles (as root) would create folders under.
SHARED_DIR_OPTIONS = ("ddp_shared_dir", "slurm_shared_dir")
# torchrun's --nnodes for elastic jobs: MIN:MAX node counts (empty: a fixed node count, requeue on a node loss).
ELASTIC_OPTIONS = ("slurm_job_elastic",)
_ELASTIC = re.compile(r"^\s*([0-9]+)\s*:\s*([0-9]+)\s*$")


def _ranges(name, value, spec):
    """Range problems by the option's name and spec (ports, timeouts, MTU, explicit min/max)."""
    out = []
    if spec.get("preflight"):
        return out  # module_utils/cluster/preflight.py checks it (PREFLIGHT_BAD_PORT)
    if name.endswith("_port") and spec.get("type") in ("int", "raw"):
        port = _as_int(value)
        low = 0 if name in PORT_ZERO_MEANS_ANY else 1
        if port is None or not low <= port <= 65535:
            out.append(_range_problem(name, value, low, 65535, "a TCP port is an integer from %d to 65535%s" % (
                low, " (0: any free port)" if low == 0 else "")))
        return out
    if name.endswith("_ports") and isinstance(value, (list, tuple)):
        for item in value:
            found = port_entry_problem(name, item)
            if found:
                out.append(found)
        return out
    number = _as_float(value) if spec.get("type") in ("int", "float") else None
    if number is None or not math.isfinite(number):
        return out
    if name.endswith("_timeout") and number <= 0:
        out.append(_range_problem(name, value, 1, None, "a timeout must be greater than 0 seconds"))
    elif name == "rdma_mtu" and number != 0 and not 1280 <= number <= 9216:
        out.append(_range_problem(name, value, 1280, 9216,
                                  "the fabric MTU is 0 (leave it alone) or 1280-9216 (9000 for RoCE jumbo frames)"))
    elif "min" in spec and number < spec["min"]:
        out.append(_range_problem(name, value, spec["min"], spec.get("max"), "it is below the minimum"))
    elif "max" in spec and number > spec["max"]:
        out.append(_range_problem(name, value, spec.get("min", 0), spec["max"], "it is above the maximum"))
    elif "min" not in spec and number < 0:
        out.append(_range_problem(name, value, 0, None, "no count, size, time or threshold here is negative"))
    elif "max" not in spec and number > _cap(name):
        out.append(_range_problem(name, value, spec.get("min", 0), _cap(name),
                                  "no machine holds that much (the largest sensible value is %s)" % _cap(name)))
    return out


# Upper bounds of counts and sizes no machine can hold, by the option's name (the first match wins); anything
# else is capped at 2^31-1, the largest value the C programs and Slurm that read these settings take.
CAPS = (
    ("_timeout", 7 * 86400), ("_seconds", 7 * 86400), ("_interval", 7 * 86400), ("_idle_exit", 7 * 86400),
    ("_max_life", 7 * 86400), ("_time", 7 * 86400), ("_poll", 86400),
    ("_mb", 64 * 1024 * 1024),  # 64 TiB of memory in MiB
    ("_mib", 1024 * 1024),  # 1 TiB in MiB
    ("_image_size", 16384), ("_batch_size", 1048576), ("_steps", 10 ** 7), ("_workers", 1024),
    ("_cpu_threads", 4096), ("_gpus", 1024), ("_nproc", 1024), ("_max_restarts", 1000), ("_seed", 2 ** 32 - 1),
    ("_temperature_c", 150), ("_sizes", 2 ** 34), ("_return_to_service", 2), ("_lr", 1000.0), ("_gbps", 100000.0),
)


def _cap(name):
    for suffix, cap in CAPS:
        if name.endswith(suffix):
            return cap
    return 2 ** 31 - 1


_PORT_ENTRY = re.compile(r"^([0-9]+)(?:-([0-9]+))?(?:/(tcp|udp|sctp|dccp))?$")


def port_entry_problem(name, item):
    """One firewall port entry as firewalld takes it (``29500/tcp``, ``60000-61000/tcp``), or a problem."""
    match = _PORT_ENTRY.match(str(item).strip()) if _is_int(item) or isinstance(item, str) else None
    if not match:
        return _problem(
            "VALIDATE_PORT_FORM", name, "%s has the entry %r; an entry is PORT/PROTOCOL or LOW-HIGH/PROTOCOL"
            % (name, item), "write entries such as \"29500/tcp\" or \"60000-61000/tcp\".")
    low, high = int(match.group(1)), int(match.group(2) or match.group(1))
    if not 1 <= low <= high <= 65535:
        return _range_problem(name, item, 1, 65535, "every entry must be a port or a range low-high from 1 to 65535")
    if not match.group(3):
        return _problem(
            "VALIDATE_PORT_FORM", name,
            "%s has the entry %r without a protocol; firewalld takes PORT/PROTOCOL or LOW-HIGH/PROTOCOL" % (name, item),
            "write it as \"%s/tcp\" (or /udp)." % item)
    return None


def option_problems(name, value, spec):
    """Problems with one provided value against its spec (argument-spec keys, plus version/address/min/max)."""
    spec = dict(spec, **ROLE_RANGES.get(name, {}))
    typ = spec.get("type", "str")
    if spec.get("address"):
        found = _address_problems(name, value)
        if found:
            return found
    version = bool(spec.get("version")) or name.endswith("_version")
    found = _scalar_problem(name, value, typ, version=version)
    if found:
        return [found]
    out = []
    choices = spec.get("choices")
    refused = [e for e in core_errors(name, value, spec) if isinstance(e, ArgumentValueError)] if choices else []
    if refused:
        # core's verdict; the message names each value that is not a choice, and the closest choice
        values = value if typ == "list" and isinstance(value, (list, tuple)) else [value]
        for item in values:
            if str(item) not in [str(c) for c in choices]:
                guess = _closest(item, [str(c) for c in choices])
                out.append(_problem(
                    "VALIDATE_CHOICE", name,
                    "%s is %r, not one of %s" % (name, item, ", ".join(repr(str(c)) for c in choices)),
                    ("did you mean %r? Set %s to it." % (guess, name)) if guess
                    else "set %s to one of those." % name))
        if not out:
            out.append(_problem("VALIDATE_CHOICE", name, str(refused[0]).rstrip("."),
                                "set %s to one of %s." % (name, ", ".join(repr(str(c)) for c in choices))))
    if typ == "list" and spec.get("elements") and isinstance(value, (list, tuple)) and not choices:
        for index, item in enumerate(value):
            found = _scalar_problem("%s[%d]" % (name, index), item, spec["elements"])
            if found:
                out.append(found)
            elif spec["elements"] in ("int", "float"):
                number = _as_float(item)
                low = spec.get("elements_min", 0)
                if number < low or number > _cap(name):
                    out.append(_range_problem(name, item, low, _cap(name), "each entry must lie in that range"))
    out.extend(_ranges(name, value, spec))
    return out


def _address_problems(name, value):
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    if not isinstance(value, str):
        return [_problem(
            "VALIDATE_BAD_ADDRESS", name, "%s is %s (%r); an address is one host name or IP address"
            % (name, _kind(value), value),
            "set %s to one quoted host name or IP address, e.g. %s: \"10.0.0.11\"." % (name, name))]
    if any(c.isspace() for c in value) or "," in value:
        return [_problem(
            "VALIDATE_BAD_ADDRESS", name, "%s is %r; an address has no spaces or commas" % (name, value),
            "set %s to one host name or IP address, without spaces." % name)]
    return []


def known_options(role_specs):
    """{option name: spec} over the cluster options and every entry point of every role spec."""
    known = dict(CLUSTER_OPTIONS)
    for _role, entries in sorted((role_specs or {}).items()):
        for _entry, spec in sorted((entries or {}).items()):
            for name, option in ((spec or {}).get("options") or {}).items():
                known.setdefault(name, option or {})
    return known


def _ours(name):
    return name.startswith(PREFIXES) and not name.startswith(OWN_NAMESPACES)


def _user_problems(name, user):
    if not isinstance(user, str):
        return []
    if user == "root":
        return [_problem(
            "VALIDATE_ROOT_USER", name,
            "%s is root: the collection would give root's account the cluster's SSH key and run jobs as root"
            % name,
            "set %s to an unprivileged account name (the default is ddp)." % name)]
    if not _USER.match(user) or len(user) > 32:
        return [_problem(
            "VALIDATE_BAD_USER", name,
            "%s is %r; a portable user name matches ^[a-z_][a-z0-9_-]*$ and has at most 32 characters"
            % (name, user),
            "set %s to a lower-case name such as ddp." % name)]
    return []


def _conda_problems(values):
    if values.get("pytorch_env_kind") != "conda":
        return []
    installer = values.get("pytorch_env_miniforge_installer")
    if not installer or not str(installer).strip():
        return [_problem(
            "VALIDATE_CONDA_NO_INSTALLER", "pytorch_env_miniforge_installer",
            "pytorch_env_kind is conda but pytorch_env_miniforge_installer is empty: there is no installer to run",
            "set pytorch_env_miniforge_installer to a pinned Miniforge release URL or a file on the controller, "
            "and pytorch_env_miniforge_sha256 to its sha256 (or use pytorch_env_kind: venv).")]
    checksum = values.get("pytorch_env_miniforge_sha256")
    if not checksum or not _SHA256.match(str(checksum).strip()):
        return [_problem(
            "VALIDATE_CONDA_NO_CHECKSUM", "pytorch_env_miniforge_sha256",
            "pytorch_env_kind is conda but pytorch_env_miniforge_sha256 is %r, not a sha256: the installer runs "
            "as root and must be verified first" % (checksum,),
            "set pytorch_env_miniforge_sha256 to the installer's sha256 (the .sha256 file published beside the "
            "Miniforge release).")]
    return []


def _download_problems(values):
    """Tarballs downloaded by URL need a checksum; a given checksum must be <algorithm>:<hex>."""
    out = []
    rules = (
        ("rdma_ofed_url", "rdma_ofed_checksum",
         values.get("rdma_mode", "inbox") == "ofed" and values.get("rdma_ofed_kind", "mlnx_ofed") == "mlnx_ofed"),
        ("nccl_tests_source", "nccl_tests_checksum", bool(values.get("nccl_tests_enabled", False))),
    )
    for source_name, checksum_name, used in rules:
        source, checksum = values.get(source_name), values.get(checksum_name)
        checksum = str(checksum).strip() if checksum is not None else ""
        if checksum and not _CHECKSUM.match(checksum):
            out.append(_problem(
                "VALIDATE_DOWNLOAD_NO_CHECKSUM", checksum_name,
                "%s is %r, not <algorithm>:<hex> (sha256, sha384 or sha512)" % (checksum_name, checksum),
                "set %s to sha256:<64 hex digits> of the file." % checksum_name))
        elif used and isinstance(source, str) and _URL.match(source.strip()) and not checksum:
            out.append(_problem(
                "VALIDATE_DOWNLOAD_NO_CHECKSUM", checksum_name,
                "%s is a URL (%s) but %s is empty: the download would be built or run as root unverified"
                % (source_name, source.strip(), checksum_name),
                "set %s to sha256:<hex> of the tarball (from its publisher, not from the mirror that serves it)."
                % checksum_name))
    return out


def _repo_key_problems(values):
    """Repository keys: DOCA needs its key and fingerprint; a given fingerprint must be a full one."""
    out = []
    doca = values.get("rdma_mode", "inbox") == "ofed" and values.get("rdma_ofed_kind", "mlnx_ofed") == "doca"
    for name in ("rdma_ofed_doca_key_url", "rdma_ofed_doca_key_fingerprint"):
        value = values.get(name)
        if doca and (not isinstance(value, str) or not value.strip()):
            out.append(_problem(
                "VALIDATE_REPO_KEY", name,
                "rdma_ofed_kind is doca but %s is empty: the DOCA repository is added with gpgcheck on and "
                "its key is trusted only once its fingerprint matches" % name,
                "set rdma_ofed_doca_key_url to the repository's public key (e.g. GPG-KEY-Mellanox.pub on your "
                "mirror) and rdma_ofed_doca_key_fingerprint to its full fingerprint."))
    for name in ("nvidia_repo_key_fingerprint", "rdma_ofed_doca_key_fingerprint",
                 "nvidia_repo_epel_gpg_key_fingerprint", "slurm_epel_gpg_key_fingerprint"):
        value = values.get(name)
        if isinstance(value, str) and value.strip():
            wrong = fingerprint_format_problem(value)
            if wrong:
                out.append(_problem("VALIDATE_REPO_KEY", name, "%s %s" % (name, wrong),
                                    "set %s to the key's full fingerprint (40 hex digits)." % name))
    return out


# The rdma role's named NCCL options: each becomes one NAME=value line of /etc/nccl.conf beside the overrides.
NCCL_NAMED = (("rdma_nccl_ib_hca", "NCCL_IB_HCA"), ("rdma_nccl_ib_gid_index", "NCCL_IB_GID_INDEX"),
              ("rdma_nccl_ib_sl", "NCCL_IB_SL"), ("rdma_nccl_ib_tc", "NCCL_IB_TC"),
              ("rdma_nccl_socket_ifname", "NCCL_SOCKET_IFNAME"), ("rdma_nccl_debug", "NCCL_DEBUG"))


def _shared_dir_problems(values):
    out = []
    for name in SHARED_DIR_OPTIONS:
        value = values.get(name)
        if not isinstance(value, str) or not value.strip():
            continue
        path = value.strip()
        parts = path.split("/")
        if not path.startswith("/") or ".." in parts:
            out.append(_problem(
                "VALIDATE_SHARED_DIR", name, "%s is %r; it must be an absolute path without '..'" % (name, value),
                "set %s to the folder where every node mounts the shared storage, e.g. /shared/ddp (NFS, Lustre, "
                "GPFS)." % name))
        elif any(path.rstrip("/") == d or path.startswith(d + "/") for d in WORLD_WRITABLE):
            out.append(_problem(
                "VALIDATE_SHARED_DIR", name,
                "%s is %r, under a folder every user can write (%s): it is node-local, and root would create the "
                "checkpoint folder where another user can put a link" % (name, value, path.split("/")[1]),
                "set %s to a folder on shared storage that only root can write at its top, e.g. /shared/ddp." % name))
    return out


def elastic_problem(name, value):
    """The problem with an elastic node range ``MIN:MAX`` (torchrun's --nnodes), or None; empty means off."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    match = _ELASTIC.match(value) if isinstance(value, str) else None
    if not match:
        return _problem(
            "VALIDATE_ELASTIC_NODES", name, "%s is %r; it must be MIN:MAX node counts (torchrun --nnodes) or empty"
            % (name, value),
            "set %s to e.g. \"2:4\" (a job goes on with 2 to 4 nodes), or \"\" for a fixed node count." % name)
    low, high = int(match.group(1)), int(match.group(2))
    if low < 1 or low > high:
        return _problem(
            "VALIDATE_ELASTIC_NODES", name,
            "%s is %r: MIN must be at least 1 and at most MAX (torchrun refuses --nnodes=%d:%d)" % (name, value, low, high),
            "set %s to MIN:MAX with 1 <= MIN <= MAX, e.g. \"%d:%d\"." % (name, min(low, high) or 1, max(low, high)))
    return None


def _nccl_problems(values):
    """roles/rdma/tasks/validate.yml's rules (module_utils/fabric/rdma_config.py): the overrides merged with the named
    options as the role merges them, and the PyTorch-side settings."""
    overrides = values.get("rdma_nccl_overrides")
    overrides = dict(overrides) if isinstance(overrides, dict) else {}
    for name, key in NCCL_NAMED:
        if isinstance(values.get(name), (str, int)) and str(values[name]) != "":
            overrides[key] = values[name]
    allow = values.get("rdma_nccl_allow_vars")
    out = []
    for p in nccl_override_problems(overrides, allow if isinstance(allow, (list, tuple)) else ()):
        out.append(_problem(p["code"], p["subject"], p["message"], p["fix"]))
    torch = values.get("rdma_torch_nccl_env")
    if isinstance(torch, dict):
        for p in torch_nccl_env(None, torch)[1]:
            out.append(_problem(p["code"], p["subject"], p["message"], p["fix"]))
    return out


# --- issue 40: the rules that ran on the nodes, and the classes of bad input -------------------------------

# Accounts that exist on a stock Debian/Ubuntu or EL system (base-passwd, setup, the daemons this collection
# installs): never the login user that runs jobs, holds the cluster key or submits to Slurm.
SYSTEM_ACCOUNTS = frozenset("""
adm apache avahi backup bin chrony colord daemon dbus dnsmasq ftp games gdm gnats halt irc landscape lightdm list
lp mail man messagebus munge mysql news nfsnobody nginx nobody operator polkitd postgres proxy pulse rpc rpcuser
rtkit shutdown slurm sshd sssd sync sys syslog tcpdump tss unbound uucp uuidd www-data
""".split())

# Tokens of slurm.conf, gres.conf, nccl.conf, firewalld and the NCCL/Gloo environment: one word each.
TOKEN_OPTIONS = (
    "slurm_cluster_name", "slurm_partition", "slurm_gres_type", "slurm_node_addr", "slurm_controller",
    "pytorch_env_wheelhouse_bind",
)
# Values of NCCL_* / GLOO_* settings (a line NAME=value of nccl.conf, an environment variable): one word, where a
# leading '=' (exact match) or '^' (exclude) is NCCL's own syntax (NCCL reads the value after the first '=').
NCCL_TOKEN_OPTIONS = (
    "rdma_nccl_ib_hca", "rdma_nccl_ib_gid_index", "rdma_nccl_ib_sl", "rdma_nccl_ib_tc", "rdma_nccl_socket_ifname",
    "rdma_nccl_debug", "rdma_fabric_interface", "ddp_nccl_socket_ifname", "ddp_gloo_socket_ifname",
    "node_health_nccl_socket_ifname", "node_health_gloo_socket_ifname",
)
# A name Slurm reads as a key (slurm.conf(5)): letters and digits.
_SLURM_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SYSCTL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
# Dict options and what their keys must look like (their values become lines of a file or the environment).
DICT_KEYS = {
    "slurm_extra_config": (_SLURM_KEY, "a slurm.conf key (letters and digits, e.g. SchedulerParameters)"),
    "ddp_benchmark_environment": (_ENV_NAME, "an environment variable name (e.g. NCCL_DEBUG)"),
    "rdma_arp_sysctls": (_SYSCTL_NAME, "a sysctl name (e.g. net.ipv4.conf.all.arp_ignore)"),
    "net_tuning_sysctls": (_SYSCTL_NAME, "a sysctl name (e.g. net.core.rmem_max)"),
}
# The keys the slurm role writes itself (roles/slurm/templates/slurm.conf.j2): refused in slurm_extra_config.
SLURM_MANAGED_KEYS = (
    "clustername", "slurmctldhost", "slurmuser", "authtype", "credtype", "proctracktype", "taskplugin", "nodename",
    "partitionname", "grestypes", "srunportrange", "slurmctldport", "slurmdport", "statesavelocation",
    "slurmdspooldir", "propagateresourcelimitsexcept", "returntoservice", "slurmdtimeout", "healthcheckprogram",
    "healthcheckinterval", "healthchecknodestate", "disablerootjobs", "accountingstoragetype",
    "accountingstoragehost", "accountingstorageport", "jobacctgathertype", "jobrequeue", "authinfo",
)

# Paths on the controller (any path the controller's user may use); every other path option is on the nodes,
# where root writes it.
CONTROLLER_PATHS = frozenset((
    "ddp_benchmark_results_dir", "ddp_benchmark_compare_to", "ddp_health_history_file", "pytorch_env_wheelhouse",
    "rdma_ofed_tarball", "pytorch_env_miniforge_installer", "nccl_tests_source",
))
# str options that are absolute paths on the nodes (path options are found by their type).
NODE_PATH_STRINGS = ("slurm_health_check_program",)
# Paths that are read or run, never written: the overwrite rule does not apply.
REFERENCE_PATHS = frozenset(("ssh_trust_user_shell", "node_health_python", "slurm_health_check_program"))
# Directories any user may write (sticky or not) and users' homes: root never creates or follows a path there.
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/run/lock", "/var/lock", "/dev/mqueue", "/home",
                  "/var/crash", "/var/mail", "/var/spool/mail")
# What a path option must never name: system files, and the system's top folders (a venv or a folder of ours
# created there would overwrite what the system keeps in them).
SYSTEM_FILES = frozenset((
    "/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers", "/etc/hosts", "/etc/fstab",
    "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/crontab", "/etc/profile", "/etc/bashrc", "/etc/bash.bashrc",
    "/etc/environment", "/etc/ssh/sshd_config", "/etc/ld.so.conf", "/etc/ld.so.preload", "/etc/sysctl.conf",
    "/etc/hostname", "/etc/machine-id", "/etc/os-release", "/etc/login.defs", "/etc/securetty",
    "/root/.bashrc", "/root/.profile", "/root/.bash_profile",
))
# Path options where empty means "none" (every other path option needs a path).
EMPTY_PATH_OK = frozenset(("slurm_health_check_program", "ddp_health_history_file", "ddp_shared_dir", "slurm_shared_dir",
                           "local_cluster_shared_dir"))
SYSTEM_DIRS = frozenset(("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
                         "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/usr/bin", "/usr/lib", "/usr/lib64",
                         "/usr/local", "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log", "/etc/ssh",
                         "/etc/pam.d", "/etc/sudoers.d", "/etc/systemd", "/etc/profile.d", "/etc/sysctl.d"))
SYSTEM_TREES = ("/proc", "/sys", "/dev", "/boot", "/etc/pam.d", "/etc/sudoers.d", "/etc/ssh", "/etc/cron.d",
                "/etc/systemd/system", "/usr/lib/systemd", "/lib/systemd", "/bin", "/sbin", "/usr/bin", "/usr/sbin",
                "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/root/.ssh", "/etc/security", "/etc/ld.so.conf.d")

# firewalld's own zones (firewalld.zones(5), /usr/lib/firewalld/zones) and those of the packages that add one:
# taking one over for the cluster would change what it allows for every interface in it.
FIREWALLD_ZONES = frozenset(("block", "dmz", "drop", "external", "home", "internal", "nm-shared", "public", "trusted",
                             "work", "libvirt", "libvirt-routed", "docker", "fedoraserver", "fedoraworkstation"))
# firewalld zone names: letters, digits, '_' and '-', at most 17 characters (firewalld's io/zone.py).
_ZONE = re.compile(r"^[A-Za-z0-9_-]{1,17}$")
# A URL written without its scheme: a host name with a dot, then a path.
_HOST_PATH = re.compile(r"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:[0-9]+)?/")
_ANY_URL = re.compile(r"^(https?|ftp|file)://[^\s/]*[^\s]*$")
_HTTP_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def _user_class_problems(values):
    """Every ``*_user`` option and ddp_cluster_user: not root, a portable name, not a system account."""
    out = []
    for name in sorted(values):
        if not (name.endswith("_user") and _ours(name)) or name in RESERVED:
            continue
        user = values[name]
        if name.endswith("_db_user"):
            # A database account (MariaDB for slurmdbd), not a login: slurmdbd's own `slurm` is what Slurm's
            # accounting guide uses; only the database's root is refused.
            if user == "root":
                out.append(_problem(
                    "VALIDATE_ROOT_USER", name,
                    "%s is root: slurmdbd would hold the database server's administrator password" % name,
                    "set %s to an account of its own, e.g. slurm (the role creates it with rights on its database "
                    "only)." % name))
            continue
        found = _user_problems(name, user)
        if found:
            out.extend(found)
        elif isinstance(user, str) and (user in SYSTEM_ACCOUNTS or user.startswith(("systemd-", "_"))):
            out.append(_problem(
                "VALIDATE_SYSTEM_USER", name,
                "%s is %r, a system account: the login user that runs jobs (and holds the cluster's SSH key) must "
                "be an ordinary account of its own" % (name, user),
                "set %s to a login account such as ddp (the access stage creates it with ddp_cluster_uid)." % name))
    return out


def _port_of(value):
    return _as_int(value) if not isinstance(value, bool) else None


def _srun_range(value):
    match = re.match(r"^\s*([0-9]+)-([0-9]+)\s*$", value) if isinstance(value, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _port_problems(values):
    """slurm_srun_port_range's form, and two services on one port (with their defaults for what is not set)."""
    out = []
    srun = values.get("slurm_srun_port_range", "62000-63999")
    if "slurm_srun_port_range" in values and not isinstance(srun, bool):
        bounds = _srun_range(srun)
        if bounds is None:
            out.append(_problem(
                "VALIDATE_PORT_FORM", "slurm_srun_port_range",
                "slurm_srun_port_range is %r; slurm.conf SrunPortRange is a range LOW-HIGH (a string)" % (srun,),
                "write it as a quoted range such as slurm_srun_port_range: \"62000-63999\"."))
        elif not 1024 <= bounds[0] <= bounds[1] <= 65535:
            out.append(_range_problem("slurm_srun_port_range", srun, 1024, 65535,
                                      "both ends must lie in 1024-65535, the low end first"))
    bounds = _srun_range(srun)
    slurm = values.get("ddp_scheduler") == "slurm" or any(n in values for n in (
        "slurm_ctld_port", "slurm_d_port", "slurm_srun_port_range"))
    rdzv = values.get("ddp_rdzv_port", 29400)
    ports = [("ddp_rdzv_port", rdzv), ("ddp_health_probe_port", values.get("ddp_health_probe_port", 40000))]
    for alias in ("firewall_rdzv_port", "ddp_benchmark_rdzv_port", "slurm_rdzv_port", "preflight_rdzv_port"):
        if alias in values:
            ports.append((alias, values[alias]))
    if slurm:
        ports += [("slurm_ctld_port", values.get("slurm_ctld_port", 6817)),
                  ("slurm_d_port", values.get("slurm_d_port", 6818))]
    if "ddp_health_nccl_port" in values and _port_of(values["ddp_health_nccl_port"]) != _port_of(rdzv):
        ports.append(("ddp_health_nccl_port", values["ddp_health_nccl_port"]))
    rdzv_names = ("ddp_rdzv_port", "firewall_rdzv_port", "ddp_benchmark_rdzv_port", "slurm_rdzv_port",
                  "preflight_rdzv_port")
    seen = {}
    for name, value in ports:
        port = _port_of(value)
        if port is None:
            continue
        other = seen.get(port)
        if other and not (other in rdzv_names and name in rdzv_names) and (other in values or name in values):
            out.append(_problem(
                "VALIDATE_PORT_CONFLICT", name,
                "%s and %s are both port %d: two services cannot listen on one port" % (other, name, port),
                "give %s a port of its own." % (name if name in values else other)))
        seen.setdefault(port, name)
        if slurm and bounds and bounds[0] <= port <= bounds[1] and (name in values or "slurm_srun_port_range" in values):
            out.append(_problem(
                "VALIDATE_PORT_CONFLICT", name,
                "%s is %d, inside slurm_srun_port_range %s where srun listens" % (name, port, srun),
                "move %s or slurm_srun_port_range so that they do not overlap." % name))
    return out


# Settings that are small numbers on the nodes but free text (or raw) in the specs: NCCL_IB_GID_INDEX (a GID table
# index), NCCL_IB_SL (an InfiniBand service level, 0-15), NCCL_IB_TC (a traffic class byte), processes per node.
NUMBER_TEXT = (
    ("rdma_nccl_ib_gid_index", 0, 255, "a GID table index 0-255 (3 is common for RoCE v2 over IPv4)"),
    ("ddp_nccl_ib_gid_index", 0, 255, "a GID table index 0-255 (3 is common for RoCE v2 over IPv4)"),
    ("node_health_nccl_ib_gid_index", 0, 255, "a GID table index 0-255"),
    ("rdma_nccl_ib_sl", 0, 15, "an InfiniBand service level 0-15"),
    ("rdma_nccl_ib_tc", 0, 255, "a traffic class byte 0-255 (106 is DSCP 26)"),
    ("ddp_benchmark_nproc_per_node", 1, 1024, "auto or a count of processes per node (1-1024)"),
    ("slurm_nproc_per_node", 1, 1024, "auto or a count of processes per node (1-1024)"),
    ("preflight_nproc_per_node", 1, 1024, "auto or a count of processes per node (1-1024)"),
    ("ddp_nproc_per_node", 1, 1024, "auto or a count of processes per node (1-1024)"),
)


def _number_text_problems(values):
    out = []
    for name, low, high, wanted in NUMBER_TEXT:
        value = values.get(name)
        if value is None or value == "" or (name.endswith("_nproc_per_node") and str(value).strip() == "auto"):
            continue
        number = _as_int(value) if not isinstance(value, bool) else None
        if number is None or not low <= number <= high:
            if name == "ddp_nproc_per_node" and (number is None or number < 1):
                continue  # module_utils/cluster/preflight.py says it (PREFLIGHT_BAD_NPROC)
            out.append(_problem("VALIDATE_RANGE", name, "%s is %r; it must be %s" % (name, value, wanted),
                                "set %s to %s." % (name, wanted)))
    return out


def _token_problem(name, value, what):
    return _problem(
        "VALIDATE_CONFIG_TOKEN", name,
        "%s is %r; it is written as %s, which ends at a space, '=', '#' or a line break" % (name, value, what),
        "give %s as one word (letters, digits and . _ - : , / only)." % name)


def _config_token_problems(values):
    """Names that become one token of slurm.conf, gres.conf, nccl.conf or the environment; dict keys and values."""
    out = []
    for name in TOKEN_OPTIONS:
        value = values.get(name)
        if isinstance(value, str) and re.search(r"[\s=#\"']", value):
            out.append(_token_problem(name, value, "one token of slurm.conf or gres.conf"))
    for name in NCCL_TOKEN_OPTIONS:
        value = values.get(name)
        if isinstance(value, str) and re.search(r"[\s#\"']", value):
            out.append(_token_problem(name, value, "one value of nccl.conf or the environment"))
    for name in sorted(values):
        value = values[name]
        if not _ours(name) or not isinstance(value, dict):
            continue
        rule = DICT_KEYS.get(name)
        for key in sorted(value, key=str):
            item = value[key]
            if rule and not rule[0].match(str(key)):
                out.append(_problem(
                    "VALIDATE_CONFIG_TOKEN", "%s.%s" % (name, key),
                    "%s has the key %r; each key must be %s" % (name, key, rule[1]),
                    "rename the key (no spaces, '=' or line breaks)."))
            elif not rule and re.search(r"[\s=]", str(key)):
                out.append(_token_problem("%s.%s" % (name, key), key, "a key of a configuration file"))
            if isinstance(item, str) and re.search(r"[\r\n\0]", item):
                out.append(_problem(
                    "VALIDATE_CONFIG_TOKEN", "%s.%s" % (name, key),
                    "%s.%s holds a line break; it is written as one line KEY=value of a file" % (name, key),
                    "give the value on one line."))
            elif isinstance(item, (dict, list)) and name in DICT_KEYS:
                out.append(_type_problem("%s.%s" % (name, key), item, "a single value", "\"value\""))
    extra = values.get("slurm_extra_config")
    if isinstance(extra, dict):
        for key in sorted(extra, key=str):
            if str(key).lower() in SLURM_MANAGED_KEYS:
                out.append(_problem(
                    "VALIDATE_SLURM", "slurm_extra_config.%s" % key,
                    "slurm_extra_config sets %s, which the slurm role writes itself" % key,
                    "use the role's own variable for it (see roles/slurm/README.md), and remove it from "
                    "slurm_extra_config."))
    return out


def path_problems(name, value):
    """One path on the nodes: absolute, without '..', outside world-writable folders, not a system file."""
    if not isinstance(value, str):
        return []
    if not value.strip():
        if name in EMPTY_PATH_OK:
            return []
        return [_problem("VALIDATE_PATH", name, "%s is empty; it must be an absolute path" % name,
                         "give %s an absolute path (see the role's README for its default), or remove it." % name)]
    text = value.strip()
    if not text.startswith("/"):
        return [_problem("VALIDATE_PATH", name, "%s is %r, not an absolute path" % (name, value),
                         "give %s as an absolute path such as /opt/ddp/..." % name)]
    parts = text.split("/")
    if ".." in parts or "." in parts:
        return [_problem("VALIDATE_PATH", name, "%s is %r; it contains '..' or '.'" % (name, value),
                         "give %s as a plain absolute path, without '..'." % name)]
    norm = "/" + "/".join(p for p in parts if p)
    for folder in WORLD_WRITABLE:
        if norm == folder or norm.startswith(folder + "/"):
            return [_problem(
                "VALIDATE_PATH", name,
                "%s is %r, in %s, which other users can write: root would create or follow a path there that a "
                "user can replace with a link" % (name, value, folder),
                "choose a folder that only root can write, such as /var/lib/ddp/... or /opt/ddp/...")]
    if name in REFERENCE_PATHS:
        return []
    if norm in SYSTEM_FILES or norm in SYSTEM_DIRS or any(norm.startswith(t + "/") for t in SYSTEM_TREES):
        return [_problem(
            "VALIDATE_PATH", name,
            "%s is %r: writing there would overwrite or fill a file or folder the system owns" % (name, value),
            "give %s a path of its own, such as /opt/ddp/... or /etc/ddp/..." % name)]
    return []


def _path_class_problems(values, known):
    out = []
    for name in sorted(values):
        if not _ours(name) or name in CONTROLLER_PATHS:
            continue
        if (known.get(name) or {}).get("type") == "path" or name in NODE_PATH_STRINGS:
            if isinstance(values[name], str):
                out.extend(path_problems(name, values[name]))
    return out


def _url_problem(name, value, wanted):
    return _problem("VALIDATE_URL", name, "%s is %r, not %s" % (name, value, wanted),
                    "give the whole URL with its scheme, e.g. https://%s" % str(value).lstrip("/"))


def _url_class_problems(values):
    """URLs with their scheme; where a URL or a controller file is taken, a URL written without its scheme."""
    out = []
    for name in sorted(values):
        value = values[name]
        if not _ours(name):
            continue
        if name.endswith("_url") and isinstance(value, str) and value.strip():
            pattern = _HTTP_URL if name == "pytorch_env_index_url" else _ANY_URL
            if not pattern.match(value.strip()):
                out.append(_url_problem(name, value, "a URL with its scheme (https://...)"))
        elif name.endswith("_urls") and isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                if not isinstance(item, str) or not _HTTP_URL.match(item.strip()):
                    out.append(_url_problem("%s[%d]" % (name, index), item, "an http(s):// URL"))
        elif name == "pytorch_env_find_links" and isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                text = str(item).strip()
                if not (_ANY_URL.match(text) or text.startswith("/")):
                    out.append(_url_problem("%s[%d]" % (name, index), item,
                                            "a URL with its scheme or an absolute path on the nodes"))
        elif name in ("rdma_ofed_tarball", "pytorch_env_miniforge_installer", "nccl_tests_source", "rdma_ofed_url") \
                and isinstance(value, str) and _HOST_PATH.match(value.strip()):
            out.append(_url_problem(name, value, "a file on the controller or a URL with its scheme"))
    packages = values.get("pytorch_env_extra_packages")
    if isinstance(packages, (list, tuple)):
        for index, item in enumerate(packages):
            if isinstance(item, str) and (item.strip().startswith("-") or re.search(r"\s--?[a-z]", item)):
                out.append(_problem(
                    "VALIDATE_TYPE", "pytorch_env_extra_packages[%d]" % index,
                    "pytorch_env_extra_packages has %r, a pip option, not a requirement: the index and its options "
                    "are pytorch_env_index_url's" % item,
                    "list requirements only (name, name==version); set the index with pytorch_env_index_url."))
    return out


def _firewall_problems(values):
    out = []
    for list_name in ("firewall_sources", "ssh_trust_from_extra"):
        out.extend(_source_problems(list_name, values.get(list_name)))
    return out + _zone_problems(values)


def _source_problems(list_name, sources):
    """Addresses or CIDRs of the cluster (firewalld's zone sources, authorized_keys from=): never everyone."""
    out = []
    if isinstance(sources, (list, tuple)):
        for index, item in enumerate(sources):
            name = "%s[%d]" % (list_name, index)
            try:
                network = ipaddress.ip_network(str(item).strip(), strict=False)
            except ValueError:
                out.append(_problem("VALIDATE_FIREWALL_SOURCE", name,
                                    "%r is not an IP address or CIDR" % (item,),
                                    "give the cluster's addresses or networks, e.g. 10.0.0.0/24."))
                continue
            if network.prefixlen == 0 or network.network_address.is_unspecified:
                out.append(_problem(
                    "VALIDATE_FIREWALL_SOURCE", name,
                    "%r opens the cluster's ports (the rendezvous, rank-to-rank ports, SSH, Slurm) to every address"
                    % (item,),
                    "give the cluster's own addresses or its network, e.g. 10.0.0.0/24 (empty: each node's "
                    "default IPv4 address)."))
    return out


def _zone_problems(values):
    out = []
    zones = {}
    for name in ("firewall_zone", "slurm_firewall_zone"):
        # slurm_firewall_zone defaults to firewall_zone (roles/slurm/defaults/main.yml)
        zone = values.get(name, zones.get("firewall_zone", "ddp-cluster"))
        zones[name] = zone
        if name not in values or not isinstance(zone, str):
            continue
        if zone.strip().lower() in FIREWALLD_ZONES:
            out.append(_problem(
                "VALIDATE_FIREWALL_ZONE", name,
                "%s is %r, one of firewalld's own zones: adding the cluster's sources and ports to it would change "
                "what it allows for everything else in it" % (name, zone),
                "keep a zone of the cluster's own, such as ddp-cluster."))
        elif not _ZONE.match(zone):
            out.append(_problem(
                "VALIDATE_FIREWALL_ZONE", name,
                "%s is %r; a firewalld zone name has 1-17 letters, digits, '_' or '-'" % (name, zone),
                "set %s to a short name such as ddp-cluster." % name))
    if ("firewall_zone" in values or "slurm_firewall_zone" in values) \
            and zones["firewall_zone"] != zones["slurm_firewall_zone"] and not out:
        out.append(_problem(
            "VALIDATE_FIREWALL_ZONE", "slurm_firewall_zone",
            "slurm_firewall_zone is %r but firewall_zone is %r: Slurm's ports would go to a zone without the "
            "cluster's sources" % (zones["slurm_firewall_zone"], zones["firewall_zone"]),
            "set both to the same zone."))
    return out


def _slurm_problems(values, hosts):
    """roles/slurm/tasks/validate.yml's rules that need no node: the controller, the ids, the munge key."""
    out = []
    controller = values.get("slurm_controller")
    if isinstance(controller, str) and controller.strip() and hosts and controller not in hosts:
        out.append(_problem(
            "VALIDATE_SLURM", "slurm_controller",
            "slurm_controller is %r, not a node of the inventory's nodes group (%s)" % (controller, ", ".join(hosts[:5])),
            "set slurm_controller to one of the nodes (default: the head), or leave it unset."))
    db_host = values.get("slurm_accounting_host")
    if values.get("slurm_accounting") is not False and isinstance(db_host, str) and db_host.strip() \
            and "{{" not in db_host and hosts and db_host not in hosts:
        out.append(_problem(
            "VALIDATE_SLURM", "slurm_accounting_host",
            "slurm_accounting_host is %r, not a node of the inventory's nodes group (%s): slurmdbd and MariaDB run on "
            "a Slurm node" % (db_host, ", ".join(hosts[:5])),
            "set slurm_accounting_host to one of the nodes (default: the first host of the group ddp_db, else the "
            "Slurm controller), or leave it unset."))
    ids = {}
    for name, default in (("slurm_uid", 64030), ("slurm_munge_uid", 950),
                          ("ddp_cluster_uid", 2000), ("ssh_trust_user_uid", None)):
        number = _as_int(values.get(name, default)) if values.get(name, default) is not None else None
        if number is None or isinstance(values.get(name), bool):
            continue
        if number in ids and (name in values or ids[number] in values):
            out.append(_problem(
                "VALIDATE_SLURM", name,
                "%s and %s are both %d: Slurm, munge and the cluster user need accounts with ids of their own"
                % (ids[number], name, number),
                "give %s an id of its own." % name))
        ids.setdefault(number, name)
    key = values.get("slurm_munge_key")
    if isinstance(key, str) and key and len("".join(key.split())) < 32:
        out.append(_problem(
            "VALIDATE_MUNGE_KEY", "slurm_munge_key",
            "slurm_munge_key has %d characters; munge wants a key of at least 32 bytes (mungekey(8))"
            % len("".join(key.split())),
            "make one with `openssl rand -base64 96` (kept in Ansible Vault), or leave slurm_munge_key empty to use "
            "the controller's key."))
    return out


def _ofed_problems(values):
    """roles/rdma/tasks/validate.yml's source rules: the install needs exactly one source you provide."""
    if values.get("rdma_mode", "inbox") != "ofed":
        return []
    kind = values.get("rdma_ofed_kind", "mlnx_ofed")
    tarball = str(values.get("rdma_ofed_tarball") or "").strip()
    url = str(values.get("rdma_ofed_url") or "").strip()
    out = []
    if kind == "mlnx_ofed" and bool(tarball) == bool(url):
        out.append(_problem(
            "VALIDATE_OFED_SOURCE", "rdma_ofed_tarball",
            "rdma_mode is ofed with MLNX_OFED, and %s" % (
                "both rdma_ofed_tarball and rdma_ofed_url are set" if tarball else
                "neither rdma_ofed_tarball nor rdma_ofed_url is set (NVIDIA's download is EULA-gated; the role never "
                "fetches it)"),
            "set exactly one: rdma_ofed_tarball (a file on the controller) or rdma_ofed_url (your mirror, with "
            "rdma_ofed_checksum)."))
    elif kind == "mlnx_ofed" and not str(values.get("rdma_ofed_version") or "").strip() \
            and not ofed_version_from_name(tarball or url):
        out.append(_problem(
            "VALIDATE_OFED_SOURCE", "rdma_ofed_version",
            "rdma_ofed_version is empty and the tarball's name (%s) is not MLNX_OFED_LINUX-<version>-...: the version "
            "to have cannot be known" % (tarball or url),
            "set rdma_ofed_version as ofed_info -s prints it (24.10-2.1.8.0)."))
    if kind == "doca" and not str(values.get("rdma_ofed_doca_repo_url") or "").strip():
        out.append(_problem(
            "VALIDATE_OFED_SOURCE", "rdma_ofed_doca_repo_url",
            "rdma_ofed_kind is doca but rdma_ofed_doca_repo_url is empty",
            "set rdma_ofed_doca_repo_url to your mirror of the DOCA host repository."))
    return out


def _benchmark_problems(values, known):
    """The matrix builder's rules (module_utils/report/benchmark.py), and each variant's option values against
    the role's own option of that name."""
    out = []
    variants = values.get("ddp_benchmark_variants")
    if isinstance(variants, (list, tuple)):
        for text in variant_problems(list(variants)):
            out.append(_problem("VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_variants", text,
                                "each variant is {name, environment, options, scope, gpu_only}; see "
                                "roles/ddp_benchmark/README.md."))
        for index, variant in enumerate(variants):
            if not isinstance(variant, dict):
                continue
            options = variant.get("options")
            for key in sorted(options if isinstance(options, dict) else {}):
                spec = known.get("ddp_benchmark_" + str(key))
                if spec:
                    for p in option_problems("ddp_benchmark_" + str(key), options[key], spec):
                        where = "ddp_benchmark_variants[%d].options.%s" % (index, key)
                        out.append(_problem(p["code"], where, p["message"].replace("ddp_benchmark_" + str(key), where),
                                            p["fix"].replace("ddp_benchmark_" + str(key), where)))
            env = variant.get("environment")
            for key in sorted(env if isinstance(env, dict) else {}, key=str):
                if isinstance(env[key], (dict, list)) or re.search(r"[\r\n\0]", str(env[key])):
                    out.append(_problem(
                        "VALIDATE_CONFIG_TOKEN", "ddp_benchmark_variants[%d].environment.%s" % (index, key),
                        "the value of %s is not one line of text" % key, "give a single value on one line."))
            if "gpu_only" in variant:
                found = _scalar_problem("ddp_benchmark_variants[%d].gpu_only" % index, variant["gpu_only"], "bool")
                if found:
                    out.append(found)
    scopes = values.get("ddp_benchmark_scopes")
    if isinstance(scopes, (list, tuple)) and not scopes:
        out.append(_problem("VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_scopes",
                            "ddp_benchmark_scopes is empty: the matrix would have no base run to compare against",
                            "list at least one of one_process, one_node, all_nodes."))
    compared = values.get("ddp_benchmark_compare_launchers")
    launcher = values.get("ddp_benchmark_launcher",
                          "slurm" if values.get("ddp_scheduler") == "slurm" else "torchrun")
    if isinstance(compared, (list, tuple)):
        if launcher in compared or len(set(map(str, compared))) != len(compared):
            out.append(_problem(
                "VALIDATE_BENCHMARK_MATRIX", "ddp_benchmark_compare_launchers",
                "ddp_benchmark_compare_launchers %r names %s twice (the matrix's launcher is %s)"
                % (list(compared), launcher if launcher in compared else "a launcher", launcher),
                "list only other launchers than ddp_benchmark_launcher, each once."))
    return out


# node_health option -> the setting of ddp-health's configuration file it becomes (roles/node_health/vars/main.yml).
HEALTH_CONFIG = (
    ("node_health_deadline_s", ("deadline_s",), "ddp_health_deadline_s"),
    ("node_health_expected_gpus", ("gpu", "expected_gpus"), "ddp_health_expected_gpus"),
    ("node_health_min_driver", ("gpu", "min_driver"), None),
    ("node_health_no_gpu_severity", ("gpu", "no_gpu_severity"), "ddp_health_no_gpu_severity"),
    ("node_health_max_temperature_c", ("gpu", "max_temperature_c"), None),
    ("node_health_xid_since", ("gpu", "xid_since"), None),
    ("node_health_no_rdma_severity", ("roce", "no_rdma_severity"), "ddp_health_no_rdma_severity"),
    ("node_health_nccl_socket_ifname", ("roce", "nccl_socket_ifname"), "ddp_nccl_socket_ifname"),
    ("node_health_gloo_socket_ifname", ("roce", "gloo_socket_ifname"), "ddp_gloo_socket_ifname"),
    ("node_health_nccl_ib_gid_index", ("roce", "nccl_ib_gid_index"), "ddp_nccl_ib_gid_index"),
    ("node_health_slurm_prefix", ("slurm", "prefix"), None),
)


def _health_config_problems(values):
    """ddp-health's own check of its settings (module_utils/cluster/node_check.py load_config), on the file the
    node_health role would write from what is set."""
    config = {}
    names = {}
    for name, where, cluster in HEALTH_CONFIG:
        source = name if name in values else cluster if cluster and cluster in values else None
        if source is None:
            continue
        value = values[source]
        if value is None or (value == "" and where[-1] not in ("prefix", "xid_since", "no_gpu_severity",
                                                               "no_rdma_severity")):
            continue  # the role writes null for an empty value of these (roles/node_health/vars/main.yml)
        if where[-1] in ("deadline_s", "expected_gpus", "max_temperature_c"):
            value = _as_int(value)
            if value is None:
                continue  # a type problem, reported by the option's own rule
        section = config.setdefault(where[0], {}) if len(where) == 2 else config
        section[where[-1]] = value
        names[".".join(where)] = source
    try:
        load_health_config(config)
    except HealthConfigError as exc:
        out = []
        for text in exc.errors:
            setting = text.split(" ", 1)[0]
            name = names.get(setting, "node_health_" + setting.split(".")[-1])
            if any(p["variable"] == name for p in out):
                continue
            out.append(_problem("VALIDATE_HEALTH_CONFIG", name, "ddp-health would refuse its settings: %s" % text,
                                "correct %s (roles/node_health/README.md)." % name))
        return out
    return []


# Names a value may use that exist only on the node or in a play (facts, magic variables): a value that needs
# them is rendered there, not refused here.
_RUNTIME_NAMES = frozenset(("hostvars", "groups", "group_names", "inventory_hostname", "inventory_hostname_short",
                            "playbook_dir", "role_path", "play_hosts", "omit", "item", "inventory_dir",
                            "inventory_file", "environment", "lookup", "query", "q", "now"))
_UNDEFINED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")


def template_problem(name, error, known=(), fact_variables=()):
    """A value whose Jinja cannot be rendered on the controller, or None when it needs what only the node or
    the play has (a fact, a magic variable, a role default of ours).

    :param error: the text of the error (ansible-core < 2.19 raises) or the undefined marker's message.
    :param fact_variables: the top-level fact variables (``ansible_<fact>``) that the run does not define
        because ansible-core injects no facts as variables (``inject_facts_as_vars = False``); empty where it does.
        A value that reads one of them is refused (VALIDATE_FACT_VARIABLE): on the node it would be undefined.
    """
    text = re.sub(r"^\w*(Undefined|Marker): (A captured exception marker was tripped: )?", "", str(error or ""))
    missing = _UNDEFINED.search(text)
    if missing:
        word = missing.group(1)
        if word in fact_variables:
            return _problem(
                "VALIDATE_FACT_VARIABLE", name,
                "%s reads the fact variable %s (in its value or in a variable it uses), which this run does not "
                "define: inject_facts_as_vars is False (the checkout's ansible.cfg, or ANSIBLE_INJECT_FACT_VARS; "
                "ansible-core 2.20 deprecates those variables, 2.24 removes them)" % (name, word),
                "write ansible_facts['%s'] where %s is written (it is the same fact), or run with "
                "ANSIBLE_INJECT_FACT_VARS=True." % (word[len("ansible_"):], word))
        if word.startswith(("ansible_", "__")) or word in _RUNTIME_NAMES or word in known:
            return None
    elif "has no attribute" in text or "is undefined" in text:
        return None  # an attribute of a fact (ansible_facts.python) or of a value only the node has
    return _problem(
        "VALIDATE_TEMPLATE", name,
        "%s cannot be rendered on the controller: %s" % (name, text.splitlines()[0][:300] if text else "?"),
        "correct the expression (a typo in a variable or filter name, an unclosed {{ or a missing quote), or give "
        "the value itself.")


def _mask(problems, secrets):
    """Replace every no_log value (and its repr) in the problems' texts with ********."""
    texts = set()
    for value in secrets:
        if isinstance(value, str) and value.strip():
            texts.update((repr(value), value))
            texts.update(line for line in value.splitlines() if len(line.strip()) >= 4)
        elif value not in (None, "") and not isinstance(value, bool):
            texts.add(repr(value))
    if not texts:
        return problems
    out = []
    for p in problems:
        p = dict(p)
        for key in ("message", "fix"):
            for text in sorted(texts, key=len, reverse=True):
                p[key] = str(p[key]).replace(text, "'********'" if text.startswith(("'", '"')) else "********")
        out.append(p)
    return out


# A misspelt variable is named back only when the spelling is that close (one or two letters); an unknown name
# about NCCL is sent where the argument specs document NCCL settings, not to the nearest spelling (ddp_nccl_env
# is closest to ddp_nccl_socket_ifname, one interface name, not a place for NCCL variables).
_TYPO_RATIO = 0.9
NCCL_SETTINGS_FIX = ("NCCL settings go in rdma_nccl_overrides (NAME: value, every variable the NCCL user guide "
                     "documents, written to /etc/nccl.conf) or the rdma role's rdma_nccl_* variables; PyTorch's "
                     "ProcessGroupNCCL settings in rdma_torch_nccl_env")


def _unknown_fix(name, guess):
    """The fix of VALIDATE_UNKNOWN_VAR: the close spelling, or for an NCCL name the documented place."""
    typo = guess is not None and difflib.SequenceMatcher(None, name, guess).ratio() >= _TYPO_RATIO
    if "nccl" in name.lower() and not typo:
        return NCCL_SETTINGS_FIX + (" (the closest name is %s)." % guess if guess else ".")
    if guess:
        return "did you mean %s? Rename it." % guess
    return "remove it, or check its spelling in the roles' READMEs."


def _node_problems(values, known, hosts=()):
    out = []
    for name in sorted(values):
        if not _ours(name) or name in RESERVED:
            continue
        value = values[name]
        if name not in known:
            guess = _closest(name, [k for k in known if _ours(k)])
            out.append(_problem(
                "VALIDATE_UNKNOWN_VAR", name,
                "no role or playbook of ddp.cluster reads %s; it would be silently ignored" % name,
                _unknown_fix(name, guess)))
            continue
        out.extend(option_problems(name, value, known[name] or {}))
    out.extend(_user_class_problems(values))
    out.extend(_port_problems(values))
    out.extend(_number_text_problems(values))
    out.extend(_config_token_problems(values))
    out.extend(_path_class_problems(values, known))
    out.extend(_url_class_problems(values))
    out.extend(_firewall_problems(values))
    out.extend(_slurm_problems(values, hosts))
    out.extend(_ofed_problems(values))
    out.extend(_benchmark_problems(values, known))
    out.extend(_health_config_problems(values))
    out.extend(_conda_problems(values))
    out.extend(_download_problems(values))
    out.extend(_repo_key_problems(values))
    out.extend(_nccl_problems(values))
    for name, pattern, wanted in CONFIG_VALUE_RULES:
        value = values.get(name)
        if name in values and not (isinstance(value, str) and re.match(pattern, value)):
            out.append(_problem(
                "VALIDATE_CHOICE", name, "%s is %r; it must be %s" % (name, value, wanted),
                "set %s to %s." % (name, wanted)))
    for name, pattern, wanted in SECRET_VALUE_RULES:
        value = values.get(name)
        if name in values and not (isinstance(value, str) and re.match(pattern, value)):
            out.append(_problem(
                "VALIDATE_CHOICE", name, "%s (not shown) is not %s" % (name, wanted),
                "set %s to %s, e.g. from `openssl rand -hex 24` kept in Ansible Vault." % (name, wanted)))
    out.extend(_shared_dir_problems(values))
    for name in ELASTIC_OPTIONS:
        found = elastic_problem(name, values.get(name))
        if found:
            out.append(found)
    for name, pattern, wanted in SHELL_VALUE_RULES:
        value = values.get(name)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and not re.match(pattern, str(value)):
            out.append(_problem(
                "VALIDATE_CHOICE", name, "%s is %r; it must be %s" % (name, value, wanted),
                "set %s to %s." % (name, wanted)))
    env_path = values.get("ddp_env_path", DEFAULT_ENV_PATH)
    for name in ENV_PATH_ALIASES:
        if name in values and values[name] != env_path:
            out.append(_problem(
                "VALIDATE_ENV_PATH", name,
                "%s is %r but ddp_env_path is %r: the environment pytorch_env builds, the one health and the "
                "benchmark run and the one rdma reads torch from must be the same" % (name, values[name], env_path),
                "set ddp_env_path: %s and remove %s." % (values[name], name)))
    compared = values.get("ddp_benchmark_compare_launchers")
    for name, launchers in (("ddp_benchmark_launcher", [values.get("ddp_benchmark_launcher")]),
                            ("ddp_benchmark_compare_launchers", compared if isinstance(compared, list) else [])):
        if "slurm" in launchers and values.get("ddp_scheduler", "none") != "slurm":
            out.append(_problem(
                "VALIDATE_LAUNCHER_NEEDS_SLURM", name,
                "%s names slurm but ddp_scheduler is %r: no Slurm is set up to launch it"
                % (name, values.get("ddp_scheduler", "none")),
                "set ddp_scheduler: slurm, or take slurm out of %s (torchrun)." % name))
    return out


def _shrink_problems(values, nodes, head_hosts):
    """ddp_shrink_nodes (playbooks/shrink.yml): only nodes of the inventory, never the head, never every node."""
    leaving = values.get("ddp_shrink_nodes")
    if not isinstance(leaving, (list, tuple)) or not all(isinstance(n, str) for n in leaving):
        return []  # the type rule names it
    out = []
    unknown = sorted(set(leaving) - set(nodes))
    if unknown:
        out.append(_problem(
            "VALIDATE_SHRINK", "ddp_shrink_nodes",
            "%s: not a node of this inventory's nodes group (%s), so there is nothing to take out"
            % (", ".join(unknown), ", ".join(sorted(nodes)) or "empty"),
            "name inventory hosts of the nodes group (check the spelling, and the inventory given with -i)."))
    heads = sorted(set(leaving) & set(head_hosts))
    if heads:
        out.append(_problem(
            "VALIDATE_SHRINK", "ddp_shrink_nodes",
            "%s is the head node (Slurm's controller, the rendezvous host and the key source): removing it would take "
            "the cluster down" % ", ".join(heads),
            "move the head first (put another node in the head group and run site.yml), then remove this one."))
    if nodes and not set(nodes) - set(leaving):
        out.append(_problem(
            "VALIDATE_SHRINK", "ddp_shrink_nodes",
            "every node of the cluster is named (%s): the last node cannot be removed" % ", ".join(sorted(nodes)),
            "keep at least one node; to take the whole cluster down, stop using it (playbooks/local_cluster.yml "
            "-e local_cluster_state=absent for the local one)."))
    return out


# Variables a role reads once for the whole play (a run_once task, which runs with the first host's variables), so a
# value set for some nodes only would be obeyed or ignored by the order of the inventory: whether ssh_trust checks
# SSH at all (its run_once summaries and stop are conditioned on it) and whether root's account gets the trust (the
# key source's run_once read of the key pairs, one pair per account of the first host). Each has a plain default in
# its argument spec. (ssh_trust_verify_every_pair is read by each node for its own logins, and may differ.)
CLUSTER_WIDE = ("ssh_trust_verify", "ssh_trust_root")


def _comparable(value, spec):
    """A value as the role reads it, for comparing nodes; None where the type rule refuses it (named there)."""
    if (spec or {}).get("type") == "bool":
        try:
            return boolean(value, strict=True)  # ansible-core's reading: yes/on/true/1 and no/off/false/0
        except TypeError:
            return None
    if not isinstance(value, (str, int, float)) or value not in ((spec or {}).get("choices") or [value]):
        return None
    return value


def _cluster_wide_problems(nodes, known, unrendered=None):
    """VALIDATE_NOT_CLUSTER_WIDE: a :data:`CLUSTER_WIDE` variable with two values across the nodes.

    nodes: {inventory hostname: {variable: value}} as :func:`validate` takes it; a node that does not set the
    variable has the argument spec's default (where the spec gives none, the nodes that set it are compared).
    unrendered: {inventory hostname: {variable: error}}; a variable whose value cannot be rendered on the controller
    for some node (it reads a node fact or a role default) is left to the node, not compared."""
    out = []
    for name in CLUSTER_WIDE:
        spec = known.get(name) or {}
        if not any(name in (values or {}) for values in nodes.values()):
            continue
        if any(name in (errors or {}) for errors in (unrendered or {}).values()):
            continue
        by_value = {}
        for host in sorted(nodes):
            values = nodes[host] or {}
            if name in values:
                value, shown = _comparable(values[name], spec), repr(values[name])
            elif "default" in spec:
                value, shown = _comparable(spec["default"], spec), "%r (the default)" % (spec["default"],)
            else:
                continue
            by_value.setdefault((type(value).__name__, value), (shown, []))[1].append(str(host))
        # a value of the wrong type (None here) is VALIDATE_TYPE's or VALIDATE_CHOICE's to name
        if len(by_value) > 1 and all(value is not None for _kind, value in by_value):
            listed = "; ".join("%s on %s" % (shown, ", ".join(hosts)) for shown, hosts in
                               sorted(by_value.values(), key=lambda item: item[1]))
            out.append(_problem(
                "VALIDATE_NOT_CLUSTER_WIDE", name,
                "%s differs between the nodes (%s): the role reads it once for the whole run, from whichever node "
                "comes first, so some nodes would not get the value set for them" % (name, listed),
                "set %s once for every node (group_vars of the nodes group, or -e), not per host." % name))
    return out


def values_problems(values, role_specs, hosts=()):
    """The rules of one node's values (the ones :func:`validate` applies to each node), for a role that checks the
    variables it resolved when it runs without the validate stage."""
    known = known_options(role_specs)
    secret_names = [name for name, spec in known.items() if (spec or {}).get("no_log")]
    return _mask(_node_problems(values or {}, known, list(hosts)), [(values or {}).get(n) for n in secret_names])


def validate(cfg):
    """All problems of one run, before any node is contacted.

    cfg keys:
        nodes        {inventory hostname: {variable: value}}: what the inventory and the extra vars set
                     for each node (only our prefixed variables and ansible_host are needed)
        nodes_group  the nodes group's name; head_hosts, head_group: as module_utils/cluster/preflight.py
        role_specs   {role: {entry point: {options: {...}}}} from the roles' meta/argument_specs.yml
        unrendered   {inventory hostname: {variable: error}}: values whose Jinja could not be rendered on the
                     controller though they need no node facts (VALIDATE_TEMPLATE)
        fact_variables  the top-level fact variables (``ansible_<fact>``) the run does not define (ansible.cfg's
                     inject_facts_as_vars = False); empty or left out where ansible-core injects them
                     (VALIDATE_FACT_VARIABLE, see template_problem)

    Returns problems without repeats, in a stable order.
    """
    cfg = cfg or {}
    nodes = cfg.get("nodes") or {}
    known = known_options(cfg.get("role_specs"))
    unrendered = cfg.get("unrendered") or {}
    fact_variables = frozenset(cfg.get("fact_variables") or ())
    out = []

    for host in sorted(nodes):
        if not _HOSTNAME.match(str(host)) or len(str(host)) > 253:
            out.append(_problem(
                "VALIDATE_BAD_HOSTNAME", "inventory_hostname",
                "inventory host %r is not a valid host name: it is written to known_hosts, /etc/hosts and "
                "slurm.conf (letters, digits, '.', '-', '_'; no spaces)" % (str(host),),
                "rename the host in the inventory and put its address in ansible_host."))

    seen = {}
    for host in sorted(nodes):
        values = nodes[host] or {}
        for name, error in sorted((unrendered.get(host) or {}).items()):
            found = template_problem(name, error, known, fact_variables)
            if found:
                out.append(found)
        out.extend(_node_problems(values, known, sorted(str(h) for h in nodes)))
        address = values.get("ansible_host")
        out.extend(_address_problems("ansible_host", address))
        if isinstance(address, str) and address.strip():
            seen.setdefault(address.strip().lower(), []).append(str(host))
    for address, hosts in sorted(seen.items()):
        if len(hosts) > 1:
            out.append(_problem(
                "VALIDATE_DUPLICATE_HOST", "ansible_host",
                "hosts %s all have ansible_host %s: one machine would be configured and counted as %d nodes"
                % (", ".join(hosts), address, len(hosts)),
                "give each node its own ansible_host (or remove the duplicate host)."))

    # The inventory shape of module_utils/cluster/preflight.py (the head, the rendezvous), once for the cluster.
    first = nodes[sorted(nodes)[0]] if nodes else {}
    shape = {"nodes": sorted(nodes), "nodes_group": cfg.get("nodes_group"),
             "head_hosts": list(cfg.get("head_hosts") or []), "head_group": cfg.get("head_group")}
    if "ddp_nproc_per_node" in first:
        shape["nproc_per_node"] = first["ddp_nproc_per_node"]
    if "ddp_rdzv_port" in first:
        shape["rdzv_port"] = first["ddp_rdzv_port"]
    addr = first.get("ddp_rdzv_addr")
    if isinstance(addr, str) and addr.strip():
        shape["rdzv_addr"] = addr
    out.extend(inventory_problems(shape))
    out.extend(_shrink_problems(first, sorted(nodes), list(cfg.get("head_hosts") or [])))
    out.extend(_cluster_wide_problems(nodes, known, unrendered))

    secret_names = [name for name, spec in known.items() if (spec or {}).get("no_log")]
    out = _mask(out, [(nodes[h] or {}).get(n) for h in nodes for n in secret_names])
    unique = []
    for p in out:
        if p not in unique:
            unique.append(p)
    return unique
