# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of the ``rdma`` role: OFED install, MTU persistence, /etc/nccl.conf, torch names.

No I/O here: the role gathers ``ofed_info -s``, the tarball's ``.supported_kernels``, ``nmcli`` /
``networkctl`` answers and ``roce_health``'s facts, and the filters in ``plugins/filter/rdma.py`` hand them to these functions.

Sources:

* OFED: ``ofed_info -s`` prints ``MLNX_OFED_LINUX-23.10-1.1.9.0:`` (MLNX_OFED) or
  ``OFED-internal-24.10-1.1.4:`` (DOCA-OFED). A MLNX_OFED tarball lists the kernels its binary
  packages were built for in ``.supported_kernels`` (one per line; ``mlnx_add_kernel_support.sh``
  appends the rebuilt kernel there). A running kernel that is not listed needs
  ``mlnxofedinstall --add-kernel-support`` (omnia #1903; stackhpc's ofed role passes
  ``--add-kernel-support --skip-repo``).
* NCCL variables: the NCCL user guide, "Environment Variables" (``env.rst``) of NCCL 2.18-2.23;
  ``/etc/nccl.conf`` holds ``NAME=value`` lines that NCCL reads at init like the environment.
* Torch names: ``torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp`` reads ``TORCH_NCCL_*`` first
  since torch 2.2 (pytorch/pytorch PR 114077); see ``nccl_health.TORCH_RENAMED`` (case C09).
* MTU: NetworkManager ``802-3-ethernet.mtu`` (nm-settings-nmcli(5)); systemd.link(5) /
  systemd.network(5) ``MTUBytes=``; netplan ``ethernets.<id>.mtu``.
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.versions import major_minor
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.health import (
    NOT_READ, TORCH_RENAME_VERSION, TORCH_RENAMED)

HEADER = "# Managed by ddp.cluster.rdma: derived from this node's RDMA facts (roce_health) plus rdma_nccl_overrides."

# The keys roce_health derives, in the order they are written.
DERIVED_KEYS = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME")

# Variables the NCCL user guide documents (env.rst, NCCL 2.18 to 2.23). A newer NCCL may document more:
# the role's rdma_nccl_allow_vars adds names to this list.
DOCUMENTED_NCCL_VARS = frozenset("""
NCCL_SOCKET_IFNAME NCCL_SOCKET_FAMILY NCCL_SOCKET_RETRY_CNT NCCL_SOCKET_RETRY_SLEEP_MSEC
NCCL_SOCKET_NTHREADS NCCL_NSOCKS_PERTHREAD NCCL_CROSS_NIC NCCL_IB_HCA NCCL_IB_TIMEOUT NCCL_IB_RETRY_CNT
NCCL_IB_GID_INDEX NCCL_IB_ADDR_FAMILY NCCL_IB_ADDR_RANGE NCCL_IB_ROCE_VERSION_NUM NCCL_IB_SL NCCL_IB_TC
NCCL_IB_FIFO_TC NCCL_IB_RETURN_ASYNC_EVENTS NCCL_IB_PKEY NCCL_IB_USE_INLINE NCCL_IB_ECE_ENABLE
NCCL_IB_MERGE_NICS NCCL_IB_MERGE_VFS NCCL_IB_DISABLE NCCL_IB_AR_THRESHOLD NCCL_IB_QPS_PER_CONNECTION
NCCL_IB_SPLIT_DATA_ON_QPS NCCL_IB_CUDA_SUPPORT NCCL_IB_PCI_RELAXED_ORDERING NCCL_IB_ADAPTIVE_ROUTING
NCCL_OOB_NET_ENABLE NCCL_OOB_NET_IFNAME NCCL_UID_STAGGER_THRESHOLD NCCL_UID_STAGGER_RATE
NCCL_NET NCCL_NET_PLUGIN NCCL_TUNER_PLUGIN NCCL_PROFILER_PLUGIN NCCL_IGNORE_CPU_AFFINITY NCCL_CONF_FILE
NCCL_DEBUG NCCL_DEBUG_FILE NCCL_DEBUG_SUBSYS NCCL_DEBUG_TIMESTAMP_FORMAT NCCL_DEBUG_TIMESTAMP_LEVELS
NCCL_COLLNET_ENABLE NCCL_COLLNET_NODE_THRESHOLD NCCL_TOPO_FILE NCCL_TOPO_DUMP_FILE NCCL_SET_THREAD_NAME
NCCL_HOSTID NCCL_P2P_DISABLE NCCL_P2P_LEVEL NCCL_P2P_DIRECT_DISABLE NCCL_SHM_DISABLE NCCL_BUFFSIZE
NCCL_NTHREADS NCCL_MAX_NCHANNELS NCCL_MIN_NCHANNELS NCCL_CHECKS_DISABLE NCCL_CHECK_POINTERS
NCCL_LAUNCH_MODE NCCL_MEM_SYNC_DOMAIN NCCL_NET_GDR_LEVEL NCCL_NET_GDR_READ NCCL_NET_GDR_C2C
NCCL_NET_SHARED_BUFFERS NCCL_NET_SHARED_COMMS NCCL_NET_DISABLE_INTRA NCCL_NET_FORCE_FLUSH
NCCL_SINGLE_RING_THRESHOLD NCCL_LL_THRESHOLD NCCL_TREE_THRESHOLD NCCL_ALGO NCCL_PROTO NCCL_NVB_DISABLE
NCCL_PXN_DISABLE NCCL_P2P_PXN_LEVEL NCCL_RUNTIME_CONNECT NCCL_GRAPH_REGISTER NCCL_LOCAL_REGISTER
NCCL_LEGACY_CUDA_REGISTER NCCL_SET_STACK_SIZE NCCL_GRAPH_MIXING_SUPPORT NCCL_DMABUF_ENABLE
NCCL_P2P_NET_CHUNKSIZE NCCL_P2P_NVL_CHUNKSIZE NCCL_P2P_LL_THRESHOLD NCCL_ALLOC_P2P_NET_LL_BUFFERS
NCCL_COMM_BLOCKING NCCL_CGA_CLUSTER_SIZE NCCL_MAX_CTAS NCCL_MIN_CTAS NCCL_NVLS_ENABLE NCCL_NVLS_CHUNKSIZE
NCCL_CUMEM_ENABLE NCCL_CUMEM_HOST_ENABLE NCCL_WORK_FIFO_DEPTH NCCL_WORK_FIFO_BYTES
NCCL_NCHANNELS_PER_NET_PEER NCCL_MNNVL_ENABLE NCCL_RAS_ENABLE NCCL_RAS_ADDR NCCL_RAS_TIMEOUT_FACTOR
NCCL_SHM_USE_CUDA_MEMCPY NCCL_SHM_MEMCPY_MODE NCCL_SHM_LOCALITY NCCL_GDRCOPY_ENABLE
""".split())

_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_OFED_INFO = re.compile(r"^(?:MLNX_OFED_LINUX|OFED-internal|OFED|DOCA-OFED|rdma-core)-([0-9][0-9A-Za-z.\-]*?):?\s*$")
_OFED_NAME = re.compile(r"MLNX_OFED_LINUX-([0-9]+\.[0-9]+-[0-9][0-9.]*[0-9])-")


# ---------------------------------------------------------------------------------------------
# /etc/nccl.conf
# ---------------------------------------------------------------------------------------------

def _bad_value(value):
    text = "" if value is None else str(value)
    return "\n" in text or "\r" in text or "\0" in text


def nccl_override_problems(overrides, allow=()):
    """Problems with ``rdma_nccl_overrides`` (checked before any change).

    :param overrides: ``{NAME: value}``; a value of None (YAML ``null``) removes a derived key.
    :param allow: more names to accept (documented by a newer NCCL than :data:`DOCUMENTED_NCCL_VARS`).
    :returns: ``RDMA_NCCL_VAR_TORCH`` for a PyTorch-side name (it belongs in ``rdma_torch_nccl_env``),
        ``RDMA_NCCL_VAR_UNDOCUMENTED`` for a name NCCL does not document (``NCCL_TIMEOUT``: pass
        ``timeout=`` to ``init_process_group``), ``RDMA_NCCL_VALUE_INVALID`` for a value that cannot
        be one line of nccl.conf.
    """
    known = DOCUMENTED_NCCL_VARS | frozenset(str(a).strip() for a in allow or ())
    out = []
    for name in sorted(overrides or {}, key=str):
        value = overrides[name]
        key = str(name).strip()
        if key in TORCH_RENAMED or key.startswith("TORCH_NCCL_") or key in TORCH_RENAMED.values():
            out.append(problem(
                "RDMA_NCCL_VAR_TORCH", "error", "rdma_nccl_overrides.%s" % key,
                "%s is read by PyTorch's ProcessGroupNCCL, not by NCCL; /etc/nccl.conf is read by NCCL only, so "
                "it would have no effect there" % key,
                "move it to rdma_torch_nccl_env (the role writes the name the installed torch reads: "
                "TORCH_NCCL_* for torch >= 2.2)"))
            continue
        if key in NOT_READ:
            why, fix = NOT_READ[key]
            out.append(problem("RDMA_NCCL_VAR_UNDOCUMENTED", "error", "rdma_nccl_overrides.%s" % key,
                               "%s is not an NCCL variable: %s" % (key, why), fix))
            continue
        if not _NAME.match(key) or key not in known:
            out.append(problem(
                "RDMA_NCCL_VAR_UNDOCUMENTED", "error", "rdma_nccl_overrides.%s" % key,
                "%s is not a variable the NCCL user guide documents (Environment Variables); NCCL would "
                "ignore it, or it is an internal knob that may change meaning between releases" % key,
                "check the spelling against https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; "
                "if your NCCL documents it, add it to rdma_nccl_allow_vars"))
            continue
        if _bad_value(value) or (isinstance(value, (dict, list))):
            out.append(problem(
                "RDMA_NCCL_VALUE_INVALID", "error", "rdma_nccl_overrides.%s" % key,
                "%s=%r cannot be written as one NAME=value line of /etc/nccl.conf" % (key, value),
                "give a scalar value without line breaks, or null to drop a derived key"))
    return out


def _text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value).strip()


def nccl_conf_values(derived, overrides=None):
    """The ``[(NAME, value)]`` to write: derived keys (roce_health ``nccl_conf``) in a fixed order,
    replaced or removed (value None or '') by ``overrides``, then the other overrides sorted."""
    derived = dict(derived or {})
    overrides = dict(overrides or {})
    merged = {}
    for key, value in derived.items():
        merged[str(key)] = value
    for key, value in overrides.items():
        merged[str(key).strip()] = value
    keys = [k for k in DERIVED_KEYS if k in merged] + sorted(k for k in merged if k not in DERIVED_KEYS)
    return [(k, _text(merged[k])) for k in keys if merged[k] is not None and _text(merged[k]) != ""]


def render_nccl_conf(derived, overrides=None, sources=None):
    """The text of /etc/nccl.conf: a header, then ``NAME=value`` lines; each line says where it came from.

    :param sources: optional ``{NAME: 'derived' | 'override'}``; computed when None.
    """
    overrides = dict(overrides or {})
    lines = [HEADER]
    for key, value in nccl_conf_values(derived, overrides):
        origin = (sources or {}).get(key) or ("rdma_nccl_overrides" if key in overrides else "derived")
        lines.append("# %s" % origin)
        lines.append("%s=%s" % (key, value))
    return "\n".join(lines) + "\n"


def node_fabric_facts(roce, mtu=None):
    """The per-node facts ``ddp.cluster.cluster_problems`` compares: ``{mtu, gid_index}``.

    :param roce: a registered ``roce_health`` result.
    :param mtu: the MTU this node's fabric interface will have (the role's ``rdma_mtu``); None or 0 =
        the MTU it has now (the fabric port's netdev MTU).
    """
    roce = roce or {}
    fabric = roce.get("fabric_interface")
    now = None
    gid = None
    for device in roce.get("devices") or []:
        for port in device.get("ports") or []:
            if fabric and port.get("netdev") == fabric:
                now = now if now is not None else port.get("netdev_mtu")
                if port.get("recommended_gid_index") is not None and gid is None:
                    gid = port.get("recommended_gid_index")
    if gid is None and (roce.get("nccl_conf") or {}).get("NCCL_IB_GID_INDEX") not in (None, ""):
        gid = int(roce["nccl_conf"]["NCCL_IB_GID_INDEX"])
    planned = int(mtu) if mtu not in (None, "", 0, "0") else now
    return {"mtu": planned, "gid_index": gid}


# ---------------------------------------------------------------------------------------------
# torch-side names (case C09)
# ---------------------------------------------------------------------------------------------

def torch_nccl_env(torch_version, settings):
    """The ``{NAME: value}`` the installed torch reads, and problems.

    :param torch_version: ``2.3.1`` (local tags allowed), or None/'' when unknown (the new names).
    :param settings: ``{ASYNC_ERROR_HANDLING: 1}``; keys may also be written ``NCCL_X`` or ``TORCH_NCCL_X``.
    :returns: ``(env, problems)``: ``TORCH_NCCL_X`` for torch >= 2.2 (or unknown); for older torch the
        pre-2.2 ``NCCL_X`` name of the variables that were renamed. ``RDMA_TORCH_VAR_INVALID`` for
        ``NCCL_TIMEOUT``/``TIMEOUT`` (no such variable: pass ``timeout=`` to ``init_process_group``) and
        for names or values that cannot be exported.
    """
    tv = major_minor(torch_version)
    env = {}
    out = []
    for raw in sorted(settings or {}, key=str):
        value = settings[raw]
        key = str(raw).strip()
        suffix = key[len("TORCH_NCCL_"):] if key.startswith("TORCH_NCCL_") else \
            key[len("NCCL_"):] if key.startswith("NCCL_") else key
        old = "NCCL_" + suffix
        if old in NOT_READ or suffix == "TIMEOUT":
            why, fix = NOT_READ.get(old, NOT_READ["NCCL_TIMEOUT"])
            out.append(problem("RDMA_TORCH_VAR_INVALID", "error", "rdma_torch_nccl_env.%s" % key,
                               "%s is not read by NCCL or PyTorch: %s" % (key, why), fix))
            continue
        if not _NAME.match(suffix) or value is None or _bad_value(value) or isinstance(value, (dict, list)):
            out.append(problem("RDMA_TORCH_VAR_INVALID", "error", "rdma_torch_nccl_env.%s" % key,
                               "%s=%r cannot be exported as an environment variable" % (key, value),
                               "use a name of capitals, digits and _ and a scalar value"))
            continue
        if tv is not None and tv < TORCH_RENAME_VERSION and old in TORCH_RENAMED:
            env[old] = _text(value)
        else:
            env["TORCH_NCCL_" + suffix] = _text(value)
    return env, out


def _shell_quote(text):
    if re.match(r"^[A-Za-z0-9_.,:/=+@%-]+$", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def render_torch_profile(env, torch_version=None):
    """/etc/profile.d/ddp-torch-nccl.sh: ``export NAME=value`` lines for login shells."""
    tv = major_minor(torch_version)
    lines = ["# Managed by ddp.cluster.rdma: the names torch %s reads (TORCH_NCCL_* since torch 2.2)."
             % ("%d.%d" % tv if tv else "(version unknown)")]
    lines += ["export %s=%s" % (k, _shell_quote(env[k])) for k in sorted(env)]
    return "\n".join(lines) + "\n"


def render_env_file(env):
    """An EnvironmentFile (systemd) / ``--env-file`` style ``NAME=value`` file for launchers."""
    lines = ["# Managed by ddp.cluster.rdma"] + ["%s=%s" % (k, env[k]) for k in sorted(env)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# OFED
# ---------------------------------------------------------------------------------------------

def parse_ofed_info(text):
    """The version ``ofed_info -s`` prints (first matching line), or None when OFED is not installed."""
    for line in str(text or "").splitlines():
        match = _OFED_INFO.match(line.strip())
        if match:
            return match.group(1)
    return None


def ofed_version_from_name(name):
    """``MLNX_OFED_LINUX-24.10-2.1.8.0-rhel9.4-x86_64.tgz`` -> ``24.10-2.1.8.0``; None when not that form."""
    match = _OFED_NAME.search(str(name or "").rsplit("/", 1)[-1])
    return match.group(1) if match else None


def parse_supported_kernels(text):
    """The kernel releases listed in a MLNX_OFED tree's ``.supported_kernels`` (blank lines and # dropped)."""
    return [line.strip() for line in str(text or "").splitlines() if line.strip() and not line.strip().startswith("#")]


def ofed_plan(installed_text, wanted_version, running_kernel, supported_kernels_text=None, extra_args=None,
              force=False):
    """Decide the MLNX_OFED install.

    :param installed_text: output of ``ofed_info -s`` ('' or None when the command is missing).
    :param wanted_version: the version to have (``24.10-2.1.8.0``).
    :param running_kernel: ``uname -r``.
    :param supported_kernels_text: the tarball's ``.supported_kernels``; None when not read yet or absent.
    :param extra_args: more installer arguments (list of str).
    :param force: install even when the same version is installed.
    :returns: ``{install, installed, wanted, add_kernel_support, kernel_known, reason, argv}``; ``argv`` is
        the ``mlnxofedinstall`` argument list to run inside the unpacked tree.
    """
    installed = parse_ofed_info(installed_text)
    wanted = str(wanted_version or "").strip() or None
    plan = {"installed": installed, "wanted": wanted, "install": False, "add_kernel_support": False,
            "kernel_known": None, "reason": "", "argv": []}
    if wanted is None:
        plan["reason"] = "no OFED version given (rdma_ofed_version, or a MLNX_OFED_LINUX-<version>-... file name)"
        return plan
    if installed == wanted and not force:
        plan["reason"] = "MLNX_OFED/DOCA-OFED %s is already installed (ofed_info -s): nothing to do" % installed
        return plan
    plan["install"] = True
    kernels = parse_supported_kernels(supported_kernels_text) if supported_kernels_text is not None else []
    if kernels:
        plan["kernel_known"] = running_kernel in kernels
        plan["add_kernel_support"] = not plan["kernel_known"]
    argv = ["./mlnxofedinstall", "--force", "--without-fw-update"]
    if plan["add_kernel_support"]:
        argv += ["--add-kernel-support", "--skip-repo"]
    plan["argv"] = argv + [str(a) for a in (extra_args or [])]
    plan["reason"] = "%s -> %s%s" % (
        installed or "no OFED", wanted,
        "; kernel %s is not in the tarball's supported list: rebuilding with --add-kernel-support" % running_kernel
        if plan["add_kernel_support"] else
        "" if plan["kernel_known"] else "; the tarball's kernel list is unknown: the installer checks the kernel")
    return plan


# ---------------------------------------------------------------------------------------------
# MTU persistence
# ---------------------------------------------------------------------------------------------

MTU_BACKENDS = ("auto", "networkmanager", "networkd", "netplan", "link", "none")


def networkctl_network_file(text):
    """The ``Network File:`` line of ``networkctl status <if>``, or None (unmanaged / n/a)."""
    for line in str(text or "").splitlines():
        key, _sep, value = line.strip().partition(":")
        if key.strip() == "Network File" and value.strip().startswith("/"):
            return value.strip()
    return None


def nmcli_connection(text):
    """``nmcli -g GENERAL.CONNECTION device show <if>`` -> the connection name, or None when there is none."""
    name = str(text or "").strip().splitlines()[0].strip() if str(text or "").strip() else ""
    return name or None


def _link_file(interface, mtu, mac):
    return ("# Managed by ddp.cluster.rdma: MTU of the RoCE fabric interface %s, applied by udev when the\n"
            "# device appears. The policies repeat systemd's 99-default.link, which this file replaces for it.\n"
            "[Match]\nMACAddress=%s\n\n[Link]\nNamePolicy=keep kernel database onboard slot path\n"
            "AlternativeNamesPolicy=database onboard slot path\nMACAddressPolicy=persistent\nName=%s\n"
            "MTUBytes=%d\n" % (interface, mac, interface, mtu))


def mtu_plan(os_family, interface, mtu, backend="auto", nm_connection=None, network_file=None,
             netplan=False, mac=None):
    """How to persist ``mtu`` on ``interface``.

    :param os_family: ``RedHat`` or ``Debian`` (ansible_facts os_family).
    :param backend: one of :data:`MTU_BACKENDS`; ``auto``: EL -> NetworkManager when a connection is
        active on the interface; Debian/Ubuntu -> netplan when /etc/netplan has files, else the
        systemd-networkd ``.network`` drop-in when networkd manages the interface; anything else -> a
        systemd ``.link`` file matched by MAC (udev applies it at boot, with or without a network manager).
    :returns: ``{backend, files: [{path, content, mode}], nmcli: [argv] or None, check: argv or None,
        error}``; ``nmcli`` is the persisting command (``check`` reads the current value; run ``nmcli``
        only when it differs).
    """
    mtu = int(mtu)
    plan = {"backend": None, "files": [], "nmcli": None, "nmcli_value": None, "check": None, "error": None}
    if backend not in MTU_BACKENDS:
        plan["error"] = "rdma_mtu_backend must be one of %s" % ", ".join(MTU_BACKENDS)
        return plan
    chosen = backend
    if backend == "auto":
        if os_family == "RedHat":
            chosen = "networkmanager" if nm_connection else "link"
        elif netplan:
            chosen = "netplan"
        elif network_file:
            chosen = "networkd"
        else:
            chosen = "link"
    plan["backend"] = chosen
    if chosen == "none":
        return plan
    if chosen == "networkmanager":
        if not nm_connection:
            plan["error"] = "NetworkManager has no connection on %s (nmcli device show): set rdma_mtu_backend: link" % interface
            return plan
        plan["check"] = ["nmcli", "-g", "802-3-ethernet.mtu", "connection", "show", nm_connection]
        plan["nmcli"] = ["nmcli", "connection", "modify", nm_connection, "802-3-ethernet.mtu", str(mtu)]
        plan["nmcli_value"] = str(mtu)
    elif chosen == "networkd":
        if not network_file:
            plan["error"] = "systemd-networkd does not manage %s (networkctl status): set rdma_mtu_backend: link" % interface
            return plan
        plan["files"].append({"path": "%s.d/60-ddp-rdma-mtu.conf" % network_file, "mode": "0644",
                              "content": "# Managed by ddp.cluster.rdma\n[Link]\nMTUBytes=%d\n" % mtu})
    elif chosen == "netplan":
        plan["files"].append({"path": "/etc/netplan/60-ddp-rdma-%s.yaml" % interface, "mode": "0600",
                              "content": "# Managed by ddp.cluster.rdma: merged with the other netplan files by id\n"
                                         "network:\n  version: 2\n  ethernets:\n    %s:\n      mtu: %d\n"
                                         % (interface, mtu)})
    elif chosen == "link":
        if not mac:
            plan["error"] = "no MAC address for %s: cannot write a .link file" % interface
            return plan
        plan["files"].append({"path": "/etc/systemd/network/10-ddp-rdma-%s.link" % interface, "mode": "0644",
                              "content": _link_file(interface, mtu, mac)})
    return plan
