# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure diagnosis for the nccl_health module, and the command line of the all-reduce script it runs.

The script is a real file, ``roles/pytorch_env/files/ddp_nccl_allreduce.py``: the pytorch_env role
installs it as ``<env>/share/ddp-cluster/ddp_nccl_allreduce.py`` (:func:`default_script`), and the
module runs it on every node, under torchrun (:func:`torchrun_argv`) or, with one process per node and the
node's rank known, as that one process (:func:`direct_argv`, :func:`direct_env`): rank 0 then hosts the c10d
TCPStore itself, and no torchrun agent (a second torch import per node) runs.

No I/O here: the module runs the commands and hands their exit status, output and result file to
these functions, which return problems in the shared shape (module_utils/diagnosis.py) and facts.
Codes (documented in docs/troubleshooting.md):

====================================  ========  ===============================================
code                                  severity  when
====================================  ========  ===============================================
NCCL_RUN_FAILED                       error     the test could not run (no torchrun, no binary,
                                                the script refused, nccl-tests exited non-zero)
NCCL_RENDEZVOUS_FAILED                error     torchrun (or a rank started without it) failed or
                                                timed out: a node did not join, or ranks could
                                                not connect (C03)
NCCL_TRANSPORT_ERROR                  error     nccl-tests failed on a transfer between nodes (an IB
                                                completion error, a failed verbs call): the text
                                                NCCL printed is kept, with the WARN lines
NCCL_PEER_EXITED                      error     nccl-tests failed because a peer rank exited or closed
                                                its connection first (the cause is on that rank)
NCCL_CUDA_ERROR                       error     nccl-tests failed on a CUDA call (GPU, driver, memory)
NCCL_SETUP_ERROR                      error     nccl-tests failed to set NCCL up on a node (memlock,
                                                interface or HCA selection, the RDMA stack)
TORCH_NCCL_WATCHDOG_TIMEOUT and the   error     the torch run broke inside a collective, not at the
other runtime_failures codes                    rendezvous: runtime_failures.py names it
NCCL_RESULTS_WRONG                    error     wrong elements (``#wrong``), or nccl-tests
                                                ``Out of bounds values`` FAILED
NCCL_BUSBW_LOW                        error     busbw at the largest size < ``min_busbw_gbps``
NCCL_TRANSPORT_UNEXPECTED             error     NCCL used another network than expected (C05/C07)
                                      warning   the transport could not be read from the log
NCCL_SOCKET_FALLBACK                  warning   NET/Socket used while this node has RDMA devices
NCCL_WARN                             warning   an ``NCCL WARN`` line (one problem per distinct text)
NCCL_VERSION_MISMATCH                 error     nodes load different NCCL versions
NCCL_ENV_UNKNOWN_VAR                  warning   a variable nothing reads (NCCL_TIMEOUT) or a name the
                                                installed torch does not read (C09)
NCCL_ENV_IFNAME                       error     NCCL/GLOO_SOCKET_IFNAME matches no interface, or
                                                uses NCCL list syntax for Gloo (C04)
                                      warning   an exclude list that lets NCCL pick ``lo`` (C04)
NO_GPU                                info      no CUDA device: Gloo over TCP was measured, not NCCL
====================================  ========  ===============================================
"""
from __future__ import annotations

import errno as _errno
import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.versions import major_minor
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.netprobe import classify_connect
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.runtime_failures import (
    RUNTIME_CODES,
    classify_nccl_error,
    parse_runtime_log,
    runtime_problems,
    warn_problems,
)
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.roce_health import parse_nccl_ifname
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import (
    busbw_from_algbw,
    normalize_nccl_version,
    parse_nccl_debug,
    parse_nccl_tests,
    parse_pytorch_nccl_error,
)

PROBLEM_CODES = (
    "NCCL_RUN_FAILED",
    "NCCL_TRANSPORT_ERROR",
    "NCCL_PEER_EXITED",
    "NCCL_CUDA_ERROR",
    "NCCL_SETUP_ERROR",
    "NCCL_RENDEZVOUS_FAILED",
    "NCCL_RESULTS_WRONG",
    "NCCL_BUSBW_LOW",
    "NCCL_TRANSPORT_UNEXPECTED",
    "NCCL_SOCKET_FALLBACK",
    "NCCL_WARN",
    "NCCL_VERSION_MISMATCH",
    "NCCL_ENV_UNKNOWN_VAR",
    "NCCL_ENV_IFNAME",
    "NO_GPU",
)

MIB = 1024 * 1024
# Small enough for Gloo on two CPU cores in seconds; on GPUs pass sizes of 1 GiB and more to
# compare with the thresholds in docs/troubleshooting.md.
DEFAULT_SIZES = (1 * MIB, 4 * MIB, 16 * MIB)
# Where the pytorch_env role installs roles/pytorch_env/files/ddp_nccl_allreduce.py, under the environment.
SCRIPT_NAME = "ddp_nccl_allreduce.py"
SCRIPT_DIR = ("share", "ddp-cluster")
SCRIPT_PROG = SCRIPT_NAME

# torch >= 2.2 reads these under the TORCH_NCCL_ name (the old name still works, with a
# deprecation warning). Source: torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp, where each
# variable is a list {"TORCH_NCCL_X", "NCCL_X"}; pytorch/pytorch PR 114077 (torch 2.2).
TORCH_RENAMED = {
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG",
    "NCCL_ENABLE_TIMING": "TORCH_NCCL_ENABLE_TIMING",
}
TORCH_RENAME_VERSION = (2, 2)
# Names people set that neither NCCL (docs/userguide env.rst) nor PyTorch reads.
NOT_READ = {
    "NCCL_TIMEOUT": ("NCCL has no timeout variable and PyTorch does not read this one",
                     "pass timeout=datetime.timedelta(seconds=...) to torch.distributed.init_process_group "
                     "(ddp_benchmark's --init-timeout-s), and remove NCCL_TIMEOUT"),
}


def default_script(python_env):
    """Where the pytorch_env role installs the all-reduce script in the environment ``python_env``."""
    return "/".join([python_env.rstrip("/")] + list(SCRIPT_DIR) + [SCRIPT_NAME])


def torchrun_argv(torchrun, nnodes, nproc_per_node, rdzv_endpoint, rdzv_id, join_timeout, script, script_args):
    """The torchrun command line (argv list). ``torchrun`` is a list: ``[.../torchrun]`` or
    ``[.../python, -m, torch.distributed.run]``."""
    return list(torchrun) + [
        "--nnodes", str(nnodes),
        "--nproc-per-node", str(nproc_per_node),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", rdzv_endpoint,
        "--rdzv-id", rdzv_id,
        "--rdzv-conf", "join_timeout=%d" % int(join_timeout),
        "--max-restarts", "0",
        script,
    ] + list(script_args)


LAUNCHERS = ("auto", "torchrun", "direct")


def choose_launcher(launcher, nproc_per_node, node_rank):
    """``torchrun`` or ``direct``: ``auto`` is ``direct`` with one process per node and the node's rank given, since
    then torchrun's agent only adds its own torch import and rendezvous; else ``torchrun``."""
    if launcher == "auto":
        return "direct" if nproc_per_node == 1 and node_rank is not None else "torchrun"
    return launcher


def split_endpoint(endpoint):
    """``(host, port)`` of ``HOST:PORT`` (``[v6]:PORT`` without the brackets); port as int."""
    host, _sep, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


def direct_argv(python, script, script_args, join_timeout):
    """The command line of one rank started without torchrun (the script's ``--join-timeout`` mode)."""
    return [python, script] + list(script_args) + ["--join-timeout", str(int(join_timeout))]


def direct_env(node_rank, nnodes, endpoint):
    """The variables torchrun would give the one rank of node ``node_rank``: rank 0 hosts the store at ``endpoint``."""
    host, port = split_endpoint(endpoint)
    return {"RANK": str(node_rank), "WORLD_SIZE": str(nnodes), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "GROUP_RANK": str(node_rank), "MASTER_ADDR": host, "MASTER_PORT": str(port)}


def script_argv(sizes, iterations, warmup, backend, timeout, output):
    """Arguments for the all-reduce script (``ddp_nccl_allreduce.py``)."""
    return ["--sizes", ",".join(str(int(s)) for s in sizes), "--iters", str(iterations),
            "--warmup", str(warmup), "--backend", backend, "--timeout", str(int(timeout)), "--output", output]


# ------------------------------------------------------------------------------------------
# Pure checks
# ------------------------------------------------------------------------------------------

def busbw_rows(results, op="all_reduce", nranks=None):
    """Result rows -> ``[{bytes, algbw_gbps, busbw_gbps, time_us}]``.

    Accepts the script's rows (flat) or :func:`parse_nccl_tests` rows (``out_of_place`` is used, as
    the health checks of the anchors do). When ``nranks`` is given and a row has no busbw, it is
    computed with :func:`busbw_from_algbw`.
    """
    rows = []
    for r in results:
        half = r.get("out_of_place") or r
        busbw = half.get("busbw_gbps")
        if busbw is None and nranks and half.get("algbw_gbps") is not None:
            busbw = busbw_from_algbw(half["algbw_gbps"], nranks, op)
        rows.append({"bytes": r["bytes"], "algbw_gbps": half.get("algbw_gbps"), "busbw_gbps": busbw,
                     "time_us": half.get("time_us")})
    return rows


def check_busbw(rows, min_busbw_gbps, subject):
    """NCCL_BUSBW_LOW when the busbw of the largest size is below ``min_busbw_gbps`` (GB/s).

    The largest size is compared, not the average: nccl-tests' "Avg bus bandwidth" is the mean
    over the whole sweep and sits far below the plateau for wide sweeps (81 vs 235 GB/s in the
    8xA100 fixture). None disables the check.
    """
    if min_busbw_gbps is None or not rows:
        return []
    largest = max(rows, key=lambda r: r["bytes"])
    busbw = largest["busbw_gbps"]
    if busbw is None or busbw >= min_busbw_gbps:
        return []
    return [problem(
        "NCCL_BUSBW_LOW", "error", subject,
        "all-reduce busbw %.2f GB/s at %d bytes is below the floor of %.2f GB/s"
        % (busbw, largest["bytes"], min_busbw_gbps),
        "check the transport (NET/Socket instead of NET/IB means RDMA is not used), every rail's link "
        "(roce_health), PFC/ECN on RoCE, and GPUDirect RDMA; measure with sizes of 1 GiB and more")]


def check_transport(transport, expected, subject, rdma_devices=None, backend="nccl"):
    """NCCL_TRANSPORT_UNEXPECTED / NCCL_SOCKET_FALLBACK from the transport read off the NCCL log.

    :param transport: ``IB``, ``Socket``, another NET plugin name, or None (unknown / no network).
    :param expected: ``IB``, ``Socket`` or None (no expectation).
    :param rdma_devices: RDMA device names present on this node (``/sys/class/infiniband``).
    :param backend: only ``nccl`` is checked; Gloo has no NCCL transport.
    """
    if backend != "nccl":
        return []
    problems = []
    if expected:
        if transport is None:
            problems.append(problem(
                "NCCL_TRANSPORT_UNEXPECTED", "warning", subject,
                "expected NET/%s but the NCCL log shows no network transport (single node, or "
                "NCCL_DEBUG output was not captured)" % expected,
                "run across nodes, and make sure NCCL_DEBUG=INFO is not overridden (NCCL_DEBUG_FILE)"))
        elif transport.lower() != expected.lower():
            problems.append(problem(
                "NCCL_TRANSPORT_UNEXPECTED", "error", subject,
                "NCCL used NET/%s, expected NET/%s" % (transport, expected),
                "for NET/IB on RoCE: load mlx5_ib/rdma-core so /sys/class/infiniband lists the NIC, unset "
                "NCCL_IB_DISABLE and NCCL_NET=Socket, and check NCCL_IB_HCA (roce_health)"
                if expected.upper() == "IB" else
                "set NCCL_IB_DISABLE=1 or NCCL_NET=Socket if sockets are wanted"))
    elif transport and transport.lower() == "socket" and rdma_devices:
        problems.append(problem(
            "NCCL_SOCKET_FALLBACK", "warning", subject,
            "NCCL used NET/Socket although RDMA device(s) %s exist on this node" % ", ".join(rdma_devices),
            "unset NCCL_IB_DISABLE / NCCL_NET=Socket, check NCCL_IB_HCA and that the ports are ACTIVE "
            "(roce_health); set expected_transport: IB to make this an error"))
    return problems


def compare_nccl_versions(versions, subject="cluster"):
    """NCCL_VERSION_MISMATCH when nodes report different NCCL versions.

    :param versions: dict host -> version (``2.18.3``, ``2.18.3+cuda12.2``, ``(2, 18, 3)`` or None);
        None values (CPU nodes, unknown) are ignored.
    :returns: list with zero or one problem.
    """
    normal = {h: normalize_nccl_version(v) for h, v in versions.items()}
    normal = {h: v for h, v in normal.items() if v}
    distinct = sorted(set(normal.values()))
    if len(distinct) < 2:
        return []
    by_version = ["%s on %s" % (v, ", ".join(sorted(h for h, hv in normal.items() if hv == v))) for v in distinct]
    return [problem(
        "NCCL_VERSION_MISMATCH", "error", subject,
        "nodes load different NCCL versions: %s" % "; ".join(by_version),
        "install the same torch build (which bundles NCCL) on every node from the compatibility matrix "
        "(pytorch_env role); check LD_LIBRARY_PATH / LD_PRELOAD for a system libnccl")]


def check_nccl_env(env, torch_version=None, subject="environment"):
    """NCCL_ENV_UNKNOWN_VAR for variables that have no effect (shared/cases C09).

    * ``NCCL_TIMEOUT``: not an NCCL variable and not read by PyTorch.
    * ``NCCL_ASYNC_ERROR_HANDLING`` and the other names in :data:`TORCH_RENAMED`: read as
      ``TORCH_NCCL_*`` by torch >= 2.2 (old names deprecated); with torch < 2.2 the new names
      are not read at all. An unknown torch version is reported as such.

    :param env: dict of the variables the ranks get.
    :param torch_version: ``2.3.1`` (local suffixes allowed) or None.
    """
    problems = []
    tv = major_minor(torch_version)
    for name in sorted(env):
        if name in NOT_READ:
            why, fix = NOT_READ[name]
            problems.append(problem("NCCL_ENV_UNKNOWN_VAR", "warning", "%s %s" % (subject, name),
                                    "%s=%s has no effect: %s" % (name, env[name], why), fix))
        elif name in TORCH_RENAMED:
            new = TORCH_RENAMED[name]
            if tv is not None and tv < TORCH_RENAME_VERSION:
                continue
            when = ("torch %s reads %s" % (torch_version, new)) if tv else \
                "torch >= 2.2 reads %s (torch version unknown)" % new
            problems.append(problem(
                "NCCL_ENV_UNKNOWN_VAR", "warning", "%s %s" % (subject, name),
                "%s is the pre-2.2 name: %s; the old name is deprecated" % (name, when),
                "set %s=%s instead of %s" % (new, env[name], name)))
        elif name in TORCH_RENAMED.values() and tv is not None and tv < TORCH_RENAME_VERSION:
            old = [k for k, v in TORCH_RENAMED.items() if v == name][0]
            problems.append(problem(
                "NCCL_ENV_UNKNOWN_VAR", "warning", "%s %s" % (subject, name),
                "torch %s does not read %s (added in torch 2.2)" % (torch_version, name),
                "set %s=%s for this torch, or upgrade torch" % (old, env[name])))
    return problems


def _ifname_spec(value):
    """NCCL's NCCL_SOCKET_IFNAME syntax: ``[^][=]name[,name...]`` -> (exclude, exact, names).

    The syntax is parsed once, by roce_health.parse_nccl_ifname; empty items are dropped here.
    """
    exclude, exact, names = parse_nccl_ifname(value)
    return exclude, exact, [n for n in names if n]


def select_interfaces(value, interfaces):
    """Interfaces NCCL may pick for an NCCL_SOCKET_IFNAME value (prefix match unless ``=``)."""
    exclude, exact, names = _ifname_spec(value)

    def hit(ifname):
        return any(ifname == n if exact else ifname.startswith(n) for n in names)

    return [i for i in interfaces if (not hit(i)) == exclude]


def check_socket_ifname(env, interfaces, subject="environment"):
    """NCCL_ENV_IFNAME for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME values (shared/cases C04).

    :param env: dict of variables.
    :param interfaces: interface names present on this node (``/sys/class/net``).
    """
    problems = []
    value = env.get("NCCL_SOCKET_IFNAME")
    if value:
        exclude, _exact, _names = _ifname_spec(value)
        picked = select_interfaces(value, interfaces)
        if not picked:
            problems.append(problem(
                "NCCL_ENV_IFNAME", "error", "%s NCCL_SOCKET_IFNAME" % subject,
                "NCCL_SOCKET_IFNAME=%s matches no interface on this node (%s)" % (value, ", ".join(interfaces)),
                "use an interface that exists on every node (the fabric interface), or an exclude list "
                "such as ^docker,lo"))
        elif exclude and "lo" in picked:
            problems.append(problem(
                "NCCL_ENV_IFNAME", "warning", "%s NCCL_SOCKET_IFNAME" % subject,
                "NCCL_SOCKET_IFNAME=%s does not exclude lo; setting it replaces NCCL's default ^docker,lo, so "
                "NCCL may bind to loopback" % value,
                "add lo to the list: %s,lo" % value))
    value = env.get("GLOO_SOCKET_IFNAME")
    if value:
        names = [n.strip() for n in value.split(",") if n.strip()]
        if value.strip().startswith(("^", "=")):
            problems.append(problem(
                "NCCL_ENV_IFNAME", "error", "%s GLOO_SOCKET_IFNAME" % subject,
                "GLOO_SOCKET_IFNAME=%s uses NCCL's list syntax; Gloo takes concrete interface names" % value,
                "name the fabric interface, e.g. GLOO_SOCKET_IFNAME=eth0"))
        else:
            missing = [n for n in names if n not in interfaces]
            if missing:
                problems.append(problem(
                    "NCCL_ENV_IFNAME", "error", "%s GLOO_SOCKET_IFNAME" % subject,
                    "GLOO_SOCKET_IFNAME names %s, not present on this node (%s)"
                    % (", ".join(missing), ", ".join(interfaces)),
                    "name an interface that exists on every node"))
    return problems


_CONNECT_PATTERNS = (
    (r"No route to host|errno: 113|EHOSTUNREACH", {"err_no": _errno.EHOSTUNREACH}),
    (r"Connection refused|errno: 111|ECONNREFUSED", {"err_no": _errno.ECONNREFUSED}),
    (r"Network is unreachable|errno: 101|ENETUNREACH", {"err_no": _errno.ENETUNREACH}),
    (r"Name or service not known|Temporary failure in name resolution|nodename nor servname|"
     r"failed to resolve|getaddrinfo", {"resolve_failed": True}),
    (r"RendezvousTimeoutError|[Tt]imed out|[Tt]imeout|DistStoreError", {"timed_out": True}),
)


def runtime_breakage(text, subject="run"):
    """The runtime failures that say the run broke after its ranks had connected: an NCCL watchdog timeout (a hung
    collective), a Gloo timeout, an NCCL error during the run that is not a refused or unreachable connection at
    start-up. [] when the text shows none (then a failure is a rendezvous/connect one)."""
    found = [p for p in runtime_problems(text or "", subject) if p["code"] in RUNTIME_CODES]
    connect = _connect_verdict(text)["verdict"] in ("firewall_reject", "refused", "unreachable", "unresolved")
    return [p for p in found if p["code"] in ("TORCH_NCCL_WATCHDOG_TIMEOUT", "GLOO_TIMEOUT")
            or (p["code"] == "TORCH_NCCL_ASYNC_ERROR" and not connect)]


def classify_failure(text, timed_out=False):
    """Classify torchrun / NCCL failure text like a TCP probe (module_utils/fabric/netprobe.py).

    :returns: ``{verdict, message}``; verdict ``collective_hang`` when the run hung inside a collective (an NCCL
        watchdog or Gloo timeout: the ranks had connected, so not a firewall), ``nccl_error`` for an NCCL error
        during the run, else ``firewall_reject`` for "No route to host" (how a firewalld reject reads, C03),
        ``refused``, ``unreachable``, ``unresolved``, ``timeout``, or ``error`` when nothing network-like is in the
        text.
    """
    broke = runtime_breakage(text)
    if broke:
        verdict = "nccl_error" if broke[0]["code"] == "TORCH_NCCL_ASYNC_ERROR" else "collective_hang"
        return {"verdict": verdict, "message": broke[0]["message"]}
    return _connect_verdict(text, timed_out)


def _connect_verdict(text, timed_out=False):
    for pattern, kwargs in _CONNECT_PATTERNS:
        if re.search(pattern, text or ""):
            return classify_connect(kwargs.get("err_no"), timed_out=kwargs.get("timed_out", False),
                                    resolve_failed=kwargs.get("resolve_failed", False))
    if timed_out:
        return classify_connect(None, timed_out=True)
    return {"verdict": "error", "message": "the run failed; see the last lines"}


def _useful_lines(text):
    """Lines of output without Python warnings (the warning line and its indented source line)."""
    lines, after_warning = [], False
    for line in (text or "").splitlines():
        if re.search(r"Warning:", line):
            after_warning = True
            continue
        if after_warning and line.startswith((" ", "\t")):
            continue
        after_warning = False
        if line.strip():
            lines.append(line.strip())
    return lines


def last_error_lines(text, limit=8):
    """The last lines that look like errors (NCCL WARN, Error, refused ...), newest last."""
    lines = _useful_lines(text)
    keep = [line for line in lines
            if re.search(r"Error|error|WARN|refused|No route|[Tt]imeout|[Tt]imed out|failed|Failed", line)
            and not re.search(r"^File \"|^raise ", line)]
    return (keep or lines)[-limit:]


_FIXES = {
    "firewall_reject": "open the cluster interface between the nodes in the firewall (all TCP ports from the other "
                       "nodes, not only the rendezvous port: NCCL and Gloo use ephemeral ports), then rerun",
    "refused": "start the module on every node at once (the head node hosts the c10d store), check rdzv_endpoint "
               "and that no leftover torchrun holds the port",
    "unreachable": "fix routing to the rendezvous host / peers (the fabric addresses)",
    "unresolved": "make the rendezvous host name resolve on every node, or use its address",
    "timeout": "make sure every node runs the module in the same play (nnodes = number of nodes), the firewall "
               "does not drop the ports, and raise join_timeout/timeout for slow starts",
    "error": "read the last lines; rerun with -vvv to see the full torchrun output",
}


# torch.distributed.TCPStore's own errors (torch/csrc/distributed/c10d/TCPStore.cpp, socket.cpp), as a rank started
# without torchrun prints them: rank 0 waiting for the others, another rank failing to reach rank 0's store.
_STORE_WAIT = re.compile(r"Timed out after (\d+) seconds waiting for clients\. (\d+)/(\d+) clients joined")
_STORE_CONNECT = re.compile(r"client socket has timed out after (\d+)ms while trying to connect to \(([^,]+), (\d+)\)")


def _store_cause(output):
    """The cause a TCPStore error of a direct launch gives, or None."""
    wait = _STORE_WAIT.search(output or "")
    if wait:
        return {"verdict": "timeout",
                "message": "not every rank connected to rank 0's store within join_timeout (%s of %s joined after %s s)"
                           % (wait.group(2), wait.group(3), wait.group(1))}
    connect = _STORE_CONNECT.search(output or "")
    if connect:
        return {"verdict": "timeout",
                "message": "this rank could not connect to rank 0's store at %s:%s within join_timeout (%d s): rank 0 "
                           "did not start there, or the port is dropped on the way"
                           % (connect.group(2), connect.group(3), int(connect.group(1)) // 1000)}
    return None


def rendezvous_problem(rc, output, subject, endpoint, timed_out=False, launcher="torchrun"):
    """The problem of a failed or timed-out torchrun, with the cause classified.

    A run that broke after the ranks connected (:func:`runtime_breakage`: a hung collective, an NCCL error during
    the run) is reported with the runtime reader's code (``TORCH_NCCL_WATCHDOG_TIMEOUT``, ``GLOO_TIMEOUT``,
    ``TORCH_NCCL_ASYNC_ERROR``), not as a rendezvous failure; anything else is ``NCCL_RENDEZVOUS_FAILED``.
    """
    broke = runtime_breakage(output, subject)
    if broke:
        return broke[0], classify_failure(output, timed_out=timed_out)
    return _rendezvous_failed(rc, output, subject, endpoint, timed_out, launcher)


def _rendezvous_failed(rc, output, subject, endpoint, timed_out=False, launcher="torchrun"):
    """NCCL_RENDEZVOUS_FAILED for a failed or timed-out run (torchrun's, or a rank started directly), with the cause
    classified."""
    cause = _connect_verdict(output, timed_out=timed_out)
    if timed_out and cause["verdict"] in ("timeout", "error"):
        cause = {"verdict": "timeout",
                 "message": "the run did not finish within the timeout: a node did not join, or the ranks could "
                            "not reach each other (a firewall DROP rule) or a collective hung"}
    elif "RendezvousTimeoutError" in (output or "") and cause["verdict"] in ("timeout", "error"):
        cause = {"verdict": "timeout",
                 "message": "not every node joined the rendezvous within join_timeout (RendezvousTimeoutError)"}
    elif cause["verdict"] in ("timeout", "error") and _store_cause(output):
        cause = _store_cause(output)
    how = "timed out" if timed_out else "exited with %s" % rc
    lines = last_error_lines(output)
    who = ("torchrun (rendezvous %s)" if launcher == "torchrun" else "the all-reduce rank (rank 0's store %s)") % endpoint
    message = "%s %s: %s. Last lines: %s" % (
        who, how, cause["message"], " | ".join(lines) if lines else "(no error output)")
    return problem("NCCL_RENDEZVOUS_FAILED", "error", subject, message, _FIXES[cause["verdict"]]), cause


def script_error(output):
    """The one-line error our script prints (``ddp_nccl_allreduce.py: error: ...``), or None."""
    match = re.search(r"%s: error: (.*)" % re.escape(SCRIPT_PROG), output or "")
    return match.group(1).strip() if match else None


def _empty_facts(backend=None):
    return {"busbw": [], "avg_busbw_gbps": None, "transport": None, "nccl_version": None, "world_size": None,
            "backend": backend}


def diagnose_torch_run(rc, output, data, subject, endpoint, min_busbw_gbps=None, expected_transport=None,
                       rdma_devices=None, env=None, interfaces=None, timed_out=False, torch_version=None,
                       launcher="torchrun"):
    """Diagnose one torch-mode run.

    :param rc: torchrun's exit status, or the rank's with ``launcher="direct"`` (None when killed on timeout).
    :param output: its stdout + stderr (NCCL_DEBUG=INFO lines included).
    :param data: the parsed JSON the script wrote, or None.
    :returns: (problems, facts); facts are ``busbw``, ``avg_busbw_gbps``, ``transport``,
        ``nccl_version``, ``world_size``, ``backend``, ``nccl_versions``, ``gdr``, ``hosts``.
    """
    problems = []
    env = env or {}
    log = parse_nccl_debug(output or "")
    facts = _empty_facts()
    facts.update(nccl_versions={}, gdr=log["gdr"], hosts={})
    if interfaces is not None:
        problems += check_socket_ifname(env, interfaces, subject=subject)
    if timed_out or rc != 0 or data is None:
        refused = script_error(output)
        if refused and not timed_out:
            problems.append(problem("NCCL_RUN_FAILED", "error", subject, "the all-reduce script refused: %s" % refused,
                                    "fix the cause named (e.g. backend nccl on a node without CUDA)"))
        else:
            # A run that broke after the ranks connected (a collective that hung, an NCCL error mid-run, a worker that
            # died) is named by what broke; only the rest is a rendezvous failure.
            broke = runtime_breakage(output, subject)
            if broke:
                runtime = [p for p in runtime_problems(output, subject) if p["code"] in RUNTIME_CODES]
                problems += runtime
                problems += warn_problems(log["warnings"], subject)
                problems += check_nccl_env(env, torch_version, subject=subject)
                facts["nccl_version"] = log["nccl_version"]
                facts["transport"] = log["transport"]
                return problems, facts
            prob, _cause = rendezvous_problem(rc, output, subject, endpoint, timed_out=timed_out, launcher=launcher)
            torch_err = parse_pytorch_nccl_error(output or "")
            if torch_err["found"]:
                prob["message"] += " (NCCL: %s%s)" % (
                    torch_err["nccl_result"] or torch_err["error"],
                    ", NCCL %s" % torch_err["nccl_version"] if torch_err["nccl_version"] else "")
            problems.append(prob)
        problems += warn_problems(log["warnings"], subject)
        problems += check_nccl_env(env, torch_version, subject=subject)
        facts["nccl_version"] = log["nccl_version"]
        facts["transport"] = log["transport"]
        return problems, facts

    backend = data.get("backend")
    torch_version = data.get("torch_version") or torch_version
    rows = busbw_rows(data.get("results", []))
    versions = data.get("nccl_versions") or {}
    own = [v for v in versions.values() if v]
    facts.update(
        busbw=rows, avg_busbw_gbps=data.get("avg_busbw_gbps"), world_size=data.get("world_size"), backend=backend,
        nccl_versions=versions, hosts=data.get("hosts") or {},
        nccl_version=log["nccl_version"] or (normalize_nccl_version(own[0]) if own else None),
        transport=log["transport"] if backend == "nccl" else "gloo",
    )
    if backend != "nccl":
        problems.append(problem(
            "NO_GPU", "info", subject,
            "no CUDA device (or backend gloo): measured Gloo all-reduce over TCP, not NCCL",
            "nothing to do on CPU nodes; on GPU nodes check gpu_health and the torch CUDA build"))
    wrong = sum(r.get("wrong") or 0 for r in data.get("results", []))
    if wrong:
        problems.append(problem(
            "NCCL_RESULTS_WRONG", "error", subject, "%d wrong element(s) after all-reduce" % wrong,
            "a GPU, NVLink or NIC corrupts data: run gpu_health (ECC, Xid) and roce_health counters"))
    problems += check_busbw(rows, min_busbw_gbps, subject)
    problems += check_transport(facts["transport"], expected_transport, subject, rdma_devices, backend=backend)
    problems += warn_problems(log["warnings"], subject)
    problems += compare_nccl_versions(versions, subject="cluster")
    problems += check_nccl_env(env, torch_version, subject=subject)
    return problems, facts


_CLASS_WORDS = {"transport": "a transport failure (a transfer between nodes failed)",
                "process": "a peer failure (another rank exited or closed its connection first)",
                "cuda": "a CUDA failure (a GPU, the driver or GPU memory)",
                "system": "a set-up failure of NCCL on a node"}
_FAILURE_CODES = {"transport": "NCCL_TRANSPORT_ERROR", "process": "NCCL_PEER_EXITED", "cuda": "NCCL_CUDA_ERROR",
                  "system": "NCCL_SETUP_ERROR"}


def nccl_tests_failure(output):
    """What a failed nccl-tests run says, kept and classified.

    The text NCCL returned (``Test NCCL failure common.cu:961 'internal error - please report this issue to the NCCL
    developers / '``: the part between the quotes, ``ncclGetErrorString`` and NCCL's last error) is kept, not the
    source-file line; the WARN lines around it decide the class (:func:`runtime_failures.classify_nccl_error`):
    transport (NCCL_TRANSPORT_ERROR), a peer that exited first (NCCL_PEER_EXITED), CUDA (NCCL_CUDA_ERROR), set-up
    (NCCL_SETUP_ERROR); anything else is NCCL_RUN_FAILED.

    :returns: ``{"code", "class", "nccl_error": str or None, "evidence": [lines], "message", "fix"}``.
    """
    parsed = parse_runtime_log(output)
    texts = ["%s: %s" % (f["kind"], f["text"]) if f["kind"] == "CUDA" else f["text"]
             for f in parsed["nccl_tests_failures"] if f["text"]]
    nccl_error = texts[0] if texts else None
    cls = classify_nccl_error(output)
    code = _FAILURE_CODES.get(cls["class"], "NCCL_RUN_FAILED")
    if nccl_error is None and parsed["async_errors"]:
        nccl_error = parsed["async_errors"][0]["error"]
    parts = []
    if nccl_error:
        parts.append("NCCL: %s" % nccl_error)
    if cls["class"] != "unknown":
        parts.append(_CLASS_WORDS.get(cls["class"], "a %s failure" % cls["class"]))
    if cls["evidence"]:
        parts.append("evidence: %s" % " | ".join(cls["evidence"][:3]))
    if not parts:
        parts.append(" | ".join(last_error_lines(output, 4)) or "no result table")
    fix = cls["fix"] if cls["class"] != "unknown" else \
        "read the failure line; with mpirun check the host list and that the binary exists on every node"
    return {"code": code, "class": cls["class"], "nccl_error": nccl_error, "evidence": cls["evidence"],
            "message": "; ".join(parts), "fix": fix}


def diagnose_nccl_tests(rc, output, subject, min_busbw_gbps=None, expected_transport=None, rdma_devices=None,
                        env=None, interfaces=None, torch_version=None):
    """Diagnose one nccl-tests run (``all_reduce_perf`` output, NCCL_DEBUG lines mixed in).

    :returns: (problems, facts) as :func:`diagnose_torch_run`, plus ``nccl_tests`` (parsed header).
    """
    problems = []
    env = env or {}
    parsed = parse_nccl_tests(output or "")
    log = parse_nccl_debug(output or "")
    rows = busbw_rows(parsed["results"], op=parsed["test"] or "all_reduce", nranks=parsed["nranks"])
    facts = _empty_facts("nccl")
    facts.update(
        busbw=rows, avg_busbw_gbps=parsed["avg_busbw_gbps"], world_size=parsed["nranks"],
        nccl_version=parsed["nccl_version"] or log["nccl_version"], transport=log["transport"], gdr=log["gdr"],
        nccl_tests={"version": parsed["nccl_tests_version"], "test": parsed["test"], "params": parsed["params"],
                    "hosts": parsed["hosts"], "columns": parsed["columns"]},
    )
    if interfaces is not None:
        problems += check_socket_ifname(env, interfaces, subject=subject)
    if rc != 0 or parsed["failures"] or not parsed["results"]:
        failure = nccl_tests_failure(output)
        facts["failure"] = failure
        problems.append(problem(
            failure["code"], "error", subject, "nccl-tests exited with %s: %s" % (rc, failure["message"]),
            failure["fix"]))
    if parsed["out_of_bounds_ok"] is False or parsed["wrong_total"]:
        problems.append(problem(
            "NCCL_RESULTS_WRONG", "error", subject,
            "nccl-tests found wrong results (out of bounds values: %s, #wrong total: %s)"
            % (parsed["out_of_bounds"], parsed["wrong_total"]),
            "a GPU, NVLink or NIC corrupts data: run gpu_health (ECC, Xid) and roce_health counters"))
    problems += check_busbw(rows, min_busbw_gbps, subject)
    problems += check_transport(log["transport"], expected_transport, subject, rdma_devices, backend="nccl")
    problems += warn_problems(log["warnings"], subject)
    problems += check_nccl_env(env, torch_version, subject=subject)
    return problems, facts
