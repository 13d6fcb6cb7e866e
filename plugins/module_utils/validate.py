# -*- coding: utf-8 -*-
# Copyright: (c) 2024, ddp.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure rules of the ``validate`` stage: every input, on the controller, before any node is contacted.

No I/O here. The ``ddp.cluster.validate_problems`` filter collects what the inventory and the extra
vars set (for every node) and the roles' ``meta/argument_specs.yml``, and calls :func:`validate`.

Every problem is ``{code, variable, message, fix}`` (the shape of module_utils/preflight.py), rendered
by the playbooks as ``[CODE] variable: message. Fix: fix``.

Rules: the type, choices and elements of every option of every role's argument spec and of the
cluster-level ``ddp_*`` variables (:data:`CLUSTER_OPTIONS`); ranges by name (``*_port``, ``*_ports``,
``*_timeout``, ``rdma_mtu``); variables carrying one of our prefixes that nothing reads (with the
closest known name); versions given as YAML numbers; addresses; host names; duplicate
``ansible_host``; the cluster user; conda without a verified installer; pip's --require-hashes without
a wheelhouse; NCCL settings NCCL does not document (module_utils/rdma_config.py's rule); the launcher
against the scheduler; and the inventory shape of module_utils/preflight.py.
"""
from __future__ import annotations

import difflib
import re

from ansible_collections.ddp.cluster.plugins.module_utils.openpgp import fingerprint_format_problem
from ansible_collections.ddp.cluster.plugins.module_utils.preflight import inventory_problems
from ansible_collections.ddp.cluster.plugins.module_utils.rdma_config import nccl_override_problems

__all__ = [
    "CLUSTER_OPTIONS",
    "PREFIXES",
    "PROBLEM_CODES",
    "known_options",
    "option_problems",
    "validate",
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
    "VALIDATE_REQUIRE_HASHES",
)

# Variables with one of these prefixes are ours: a name that no role and no playbook reads is refused.
PREFIXES = (
    "ddp_", "preflight_", "nvidia_repo_", "nvidia_driver_", "cuda_toolkit_", "cudnn_", "nccl_", "rdma_",
    "net_tuning_", "ssh_trust_", "firewall_", "slurm_", "pytorch_env_", "ddp_benchmark_", "node_health_",
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
    "ddp_health_pair_sizes": {"type": "list", "elements": "int"},
    "ddp_health_history_file": {"type": "path"},
    "ddp_health_repeat_window_days": {"type": "float", "min": 0.001, "max": 3650},
    "ddp_health_repeat_threshold": {"type": "int", "min": 2, "max": 1000},
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
    ("rdma_cma_roce_tos", r"^(|[0-9]{1,3})$", "empty or a ToS byte 0-255 (106 is DSCP 26)"),
    ("rdma_qos_pfc", r"^(|[01](,[01]){7})$", "empty or eight 0/1 values, e.g. \"0,0,0,1,0,0,0,0\""),
)

_BOOL_STRINGS = frozenset(("yes", "no", "true", "false", "on", "off", "1", "0", "y", "n", "t", "f"))
_USER = re.compile(r"^[a-z_][a-z0-9_-]*$")
# Inventory names end up in known_hosts, slurm.conf NodeName and /etc/hosts: a DNS-like name.
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_SHA256 = re.compile(r"^(sha256:)?[0-9a-fA-F]{64}$")
# A download's checksum as get_url takes it: <algorithm>:<hex> (sha256, sha384 or sha512).
_CHECKSUM = re.compile(r"^(sha256:[0-9a-fA-F]{64}|sha384:[0-9a-fA-F]{96}|sha512:[0-9a-fA-F]{128})$")
_URL = re.compile(r"^(https?|ftp)://")


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


def _scalar_problem(name, value, typ, version=False):
    """Type problem for one scalar value of argument-spec type ``typ``, or None."""
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
        if isinstance(value, str) and any(c in value for c in "\n\r\0"):
            return _problem("VALIDATE_TYPE", name, "%s contains a line break or NUL byte" % name,
                            "give %s as one line." % name)
        return None
    if typ == "int":
        if _as_int(value) is None:
            return _type_problem(name, value, "an integer", "%s: 10" % name)
        return None
    if typ == "float":
        if _as_float(value) is None:
            return _type_problem(name, value, "a number", "%s: 1.5" % name)
        return None
    if typ == "bool":
        if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _BOOL_STRINGS) \
                or (_is_int(value) and value in (0, 1)):
            return None
        return _type_problem(name, value, "a boolean", "%s: true" % name)
    if typ == "list":
        if not isinstance(value, (list, tuple)):
            return _type_problem(name, value, "a list", "%s: [first, second]" % name)
        return None
    if typ == "dict":
        if not isinstance(value, dict):
            return _type_problem(name, value, "a mapping", "%s: {KEY: value}" % name)
        return None
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
}


def _ranges(name, value, spec):
    """Range problems by the option's name and spec (ports, timeouts, MTU, explicit min/max)."""
    out = []
    if spec.get("preflight"):
        return out  # module_utils/preflight.py checks it (PREFLIGHT_BAD_PORT)
    if name.endswith("_port") and spec.get("type") in ("int", "raw"):
        port = _as_int(value)
        low = 0 if name in PORT_ZERO_MEANS_ANY else 1
        if port is None or not low <= port <= 65535:
            out.append(_range_problem(name, value, low, 65535, "a TCP port is an integer from %d to 65535%s" % (
                low, " (0: any free port)" if low == 0 else "")))
        return out
    if name.endswith("_ports") and isinstance(value, (list, tuple)):
        for item in value:
            text = str(item)
            parts = text.split("-", 1) if isinstance(item, str) else [item]
            numbers = [_as_int(p) for p in parts]
            if any(n is None or not 1 <= n <= 65535 for n in numbers) or \
                    (len(numbers) == 2 and numbers[0] > numbers[1]):
                out.append(_range_problem(name, item, 1, 65535,
                                          "every entry must be a port or a range low-high from 1 to 65535"))
        return out
    number = _as_float(value) if spec.get("type") in ("int", "float") else None
    if number is None:
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
    return out


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
    if choices:
        values = value if typ == "list" else [value]
        for item in values:
            if str(item) not in [str(c) for c in choices]:
                guess = _closest(item, [str(c) for c in choices])
                out.append(_problem(
                    "VALIDATE_CHOICE", name,
                    "%s is %r, not one of %s" % (name, item, ", ".join(repr(str(c)) for c in choices)),
                    ("did you mean %r? Set %s to it." % (guess, name)) if guess
                    else "set %s to one of those." % name))
    if typ == "list" and spec.get("elements") and isinstance(value, (list, tuple)) and not choices:
        for index, item in enumerate(value):
            found = _scalar_problem("%s[%d]" % (name, index), item, spec["elements"])
            if found:
                out.append(found)
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


def _require_hashes_problems(values):
    hashes = values.get("pytorch_env_require_hashes")
    if hashes is not True and str(hashes).lower() not in ("yes", "on", "1", "true"):
        return []
    wheelhouse = values.get("pytorch_env_wheelhouse")
    if isinstance(wheelhouse, str) and wheelhouse.strip():
        return []
    return [_problem(
        "VALIDATE_REQUIRE_HASHES", "pytorch_env_require_hashes",
        "pytorch_env_require_hashes is true but pytorch_env_wheelhouse is empty: the lock file of hashes is "
        "written from the controller's wheelhouse",
        "set pytorch_env_wheelhouse to a folder on the controller, or pytorch_env_require_hashes: false.")]


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


def _nccl_problems(values):
    overrides = values.get("rdma_nccl_overrides")
    if not isinstance(overrides, dict):
        return []
    allow = values.get("rdma_nccl_allow_vars")
    out = []
    for p in nccl_override_problems(overrides, allow if isinstance(allow, (list, tuple)) else ()):
        out.append(_problem(p["code"], p["subject"], p["message"], p["fix"]))
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


def _node_problems(values, known):
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
    for name in ("ddp_cluster_user", "ssh_trust_user"):
        out.extend(_user_problems(name, values.get(name)))
    out.extend(_conda_problems(values))
    out.extend(_download_problems(values))
    out.extend(_require_hashes_problems(values))
    out.extend(_repo_key_problems(values))
    out.extend(_nccl_problems(values))
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


def validate(cfg):
    """All problems of one run, before any node is contacted.

    cfg keys:
        nodes        {inventory hostname: {variable: value}}: what the inventory and the extra vars set
                     for each node (only our prefixed variables and ansible_host are needed)
        nodes_group  the nodes group's name; head_hosts, head_group: as module_utils/preflight.py
        role_specs   {role: {entry point: {options: {...}}}} from the roles' meta/argument_specs.yml

    Returns problems without repeats, in a stable order.
    """
    cfg = cfg or {}
    nodes = cfg.get("nodes") or {}
    known = known_options(cfg.get("role_specs"))
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
        out.extend(_node_problems(values, known))
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

    # The inventory shape of module_utils/preflight.py (the head, the rendezvous), once for the cluster.
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

    unique = []
    for p in out:
        if p not in unique:
            unique.append(p)
    return unique
