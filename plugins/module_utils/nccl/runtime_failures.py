# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a distributed training run printed when it broke, named by what broke (pure, no I/O).

One reader for every log the collection looks at after a failure: a training job's output (torchrun, the job script),
the health all-reduce's torchrun output, nccl-tests' output. Each failure kind has its own code, because each has
another cause and fix; a hang inside a collective is not a firewall problem:

=============================  ======================================================================================
code                           what the log shows
=============================  ======================================================================================
``TORCH_NCCL_WATCHDOG_TIMEOUT``  ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE,
                               ... Timeout(ms)=600000) ran for 600013 milliseconds``: ranks entered a collective and
                               it never finished: a rank did not call it (crashed, hung, took another code path) or
                               the network stalled mid-transfer. The ranks that report it and the sequence numbers
                               are listed; a rank that does not report it is the first suspect.
``TORCH_NCCL_ASYNC_ERROR``     ``NCCL error: remote process exited or there was a network error, NCCL version ...
                               ncclRemoteError ... Last error: NET/IB : Got completion from peer ... with error 12``:
                               NCCL failed during a collective; classified by :func:`classify_nccl_error` as
                               transport, process, CUDA, system (set-up), internal or usage.
``TORCH_STORE_ERROR``          the c10d store (the rendezvous key-value store on the first node) failed:
                               ``DistStoreError: Timed out after 901 seconds waiting for clients. 1/3 clients
                               joined``, ``The client socket has timed out after 1800s while trying to connect to
                               (host, port)``, ``DistNetworkError``, ``Socket Timeout``. This is the rendezvous.
``TORCH_RENDEZVOUS_FAILED``    torchrun's elastic agent could not form the group: ``RendezvousTimeoutError``,
                               ``RendezvousClosedError``.
``GLOO_TIMEOUT``               Gloo gave up on a peer: ``[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting
                               1800000ms for recv operation to complete``, ``Connection closed by peer``.
``TORCHRUN_WORKER_FAILED``     torchrun's ``ChildFailedError``: which rank on which host exited with which code or
                               signal (``exitcode : -9`` is SIGKILL, the OOM killer's signal).
``NCCL_WARN``                  an ``NCCL WARN`` line (warning; one per distinct text).
=============================  ======================================================================================

Sources for the formats: PyTorch ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` (watchdog and async error
messages), ``TCPStore.cpp``/``socket.cpp`` (store errors), ``torch/distributed/elastic`` (ChildFailedError table,
rendezvous errors), Gloo ``transport/tcp`` (timeouts), NCCL's ``ncclGetErrorString`` texts and ``net_ib`` WARN lines,
nccl-tests ``common.cu``/``common.h`` (``Test NCCL failure``/``Test CUDA failure``). Real logs in
tests/unit/fixtures/runtime and nccl (SOURCES.md there).
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import parse_log_line

# "[Rank 0] Watchdog caught ..." (torch <= 2.4) and "[PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught ..." (2.5+).
_WATCHDOG = re.compile(
    r"Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\((?P<work>.*?)\) ran for "
    r"(?P<ran>\d+) milliseconds before timing out")

_WORK_FIELD = re.compile(r"(\w+)=([^,]+)")
_LAST_WORK = re.compile(r"Rank (?P<rank>\d+)\] (?:Exception \(either an error or timeout\) detected by watchdog at "
                        r"work|Timeout at NCCL work): (?P<at>\d+), last enqueued NCCL work: (?P<enq>-?\d+), last "
                        r"completed NCCL work: (?P<done>-?\d+)")
_ASYNC = re.compile(r"NCCL error:?\s*(?P<error>[^,\n]+?),\s*NCCL version (?P<version>[\w.+]+)")
_NCCL_ERROR_IN = re.compile(r"NCCL error in: (?P<where>\S+?),\s*(?P<error>[^,\n]+?)(?:,\s*NCCL version (?P<version>[\w.+]+))?\s*$",
                            re.M)
_LAST_ERROR = re.compile(r"Last error:\s*(?P<text>.+?)(?:\s{2,}|\n|Exception raised|$)")
_STORE = (
    (re.compile(r"(?:DistStoreError|RuntimeError): Timed out after (?P<s>\d+) seconds waiting for "
                r"(?P<who>clients|workers)\. (?P<joined>\d+)/(?P<total>\d+) \w+ joined"), "clients"),
    (re.compile(r"client socket has timed out after (?P<t>\d+m?s) while trying to connect to \((?P<host>[^,]+), "
                r"(?P<port>\d+)\)"), "connect"),
    (re.compile(r"(?:DistStoreError|DistNetworkError|RuntimeError): (?P<text>Socket Timeout|Connection reset by peer|"
                r"Broken pipe|Connection refused|failed to recv, got 0 bytes.*)"), "socket"),
    # NCCL's unique id travels through the store: "[1] is setting up NCCL communicator and retrieving ncclUniqueId
    # from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout"
    (re.compile(r"retrieving ncclUniqueId from \[(?P<from>\d+)\] via c10d key-value store.*got error: "
                r"(?P<text>.+?)\s*$"), "socket"),
)
_RDZV = re.compile(r"(?P<kind>RendezvousTimeoutError|RendezvousClosedError|RendezvousConnectionError|"
                   r"RendezvousStateError)(?::\s*(?P<text>.*))?")
_GLOO = re.compile(r"\[(?P<where>[^\]]*gloo[^\]]*)\]\s*(?P<text>Timed out waiting (?P<ms>\d+)ms for (?P<op>\w+) "
                   r"operation to complete|Connection closed by peer \[?(?P<peer>[^\]\s]+)\]?.*|Read error.*|"
                   r"Connect timeout.*|Socket closed.*)")
_CHILD_FAILED = re.compile(r"ChildFailedError")
_FAILURE_FIELDS = re.compile(r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*?)\s*$")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)")
_SIGNAL = re.compile(r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)")
_NT_FAILURE = re.compile(r"Test (?P<kind>NCCL|CUDA) failure (?P<loc>\S+) '(?P<text>[^']*)'")
_PREFIX = re.compile(r"^(?:\[(?:default)?\d+\]:|\[rank\d+\]:|\d+: |\[\d+,\d+\]<std(?:out|err)>:)\s*")

SIGNALS = {"-9": "SIGKILL", "-6": "SIGABRT", "-11": "SIGSEGV", "-15": "SIGTERM", "-7": "SIGBUS", "-2": "SIGINT"}


def _strip(line):
    return _PREFIX.sub("", line.rstrip())


def parse_runtime_log(text):
    """Read a training/torchrun/nccl-tests log into its failure evidence.

    :returns: dict with ``watchdog`` (``[{rank, seq, op, timeout_ms, ran_ms, numel_in, numel_out, line}]``),
        ``last_work`` (``{rank: {at, enqueued, completed}}``), ``async_errors`` (``[{error, version, last_error,
        line}]``), ``store`` (``[{kind: clients|connect|socket, ...}]``), ``rendezvous`` (``[{kind, text}]``),
        ``gloo`` (``[{text, op, timeout_ms, peer}]``), ``child_failures`` (``[{rank, host, exitcode, signal}]``),
        ``signals`` (``[{name, pid}]``), ``nccl_warnings`` (``[{host, location, text}]``), ``nccl_tests_failures``
        (``[{kind: NCCL|CUDA, location, text}]``).
    """
    out = {"watchdog": [], "last_work": {}, "async_errors": [], "store": [], "rendezvous": [], "gloo": [],
           "child_failures": [], "agent_failures": [], "signals": [], "nccl_warnings": [], "nccl_tests_failures": []}
    state = {"failure": None, "waiting_last": False}
    for raw in (text or "").splitlines():
        line = _strip(raw)
        if _torch_line(line, out) or _nccl_error_line(line, out, state) or _warn_or_tool_line(line, out):
            continue
        _child_failure_line(line, out, state)
    _finish_child_failures(out, state["failure"])
    return out


def _torch_line(line, out):
    """Record a watchdog timeout, last-work, c10d store, rendezvous or Gloo line in ``out``.

    :returns: True when nothing else is to be read from the line (a store error line may still carry more).
    """
    match = _WATCHDOG.search(line)
    if match:
        fields = dict(_WORK_FIELD.findall(match.group("work")))
        out["watchdog"].append({
            "rank": int(match.group("rank")), "seq": _int(fields.get("SeqNum")), "op": fields.get("OpType"),
            "timeout_ms": _int(fields.get("Timeout(ms)") or _timeout_field(match.group("work"))),
            "ran_ms": int(match.group("ran")), "numel_in": _int(fields.get("NumelIn")),
            "numel_out": _int(fields.get("NumelOut")), "line": line.strip()})
        return True
    match = _LAST_WORK.search(line)
    if match:
        out["last_work"][int(match.group("rank"))] = {
            "at": int(match.group("at")), "enqueued": int(match.group("enq")), "completed": int(match.group("done"))}
        return True
    for rx, kind in _STORE:
        match = rx.search(line)
        if match:
            entry = dict((k, v) for k, v in match.groupdict().items() if v is not None)
            entry.update(kind=kind, line=line.strip())
            out["store"].append(entry)
            break
    else:
        match = _RDZV.search(line)
        if match and "raise" not in line and "import" not in line:
            out["rendezvous"].append({"kind": match.group("kind"), "text": (match.group("text") or "").strip()})
            return True
    match = _GLOO.search(line)
    if match:
        out["gloo"].append({"text": match.group("text").strip(), "op": match.group("op"),
                            "timeout_ms": _int(match.group("ms")), "peer": match.group("peer"),
                            "where": match.group("where")})
        return True
    return False


def _nccl_error_line(line, out, state):
    """Record an NCCL error line, or the ``Last error:`` that follows one (``state["waiting_last"]`` spans lines).

    :returns: True when nothing else is to be read from the line.
    """
    match = _ASYNC.search(line) or _NCCL_ERROR_IN.search(line)
    if match and "NCCL error" in line:
        last = _LAST_ERROR.search(line)
        entry = {"error": match.group("error").strip(), "version": match.groupdict().get("version"),
                 "last_error": last.group("text").strip() if last else None, "line": line.strip()}
        if entry not in out["async_errors"]:
            out["async_errors"].append(entry)
        return True
    if out["async_errors"] and out["async_errors"][-1]["last_error"] is None:
        last = _LAST_ERROR.search(line)
        if last:
            out["async_errors"][-1]["last_error"] = last.group("text").strip()
        elif line.strip() == "Last error:":
            state["waiting_last"] = True
            return True
        elif state["waiting_last"] and line.strip():
            out["async_errors"][-1]["last_error"] = line.strip()
            state["waiting_last"] = False
    return False


def _warn_or_tool_line(line, out):
    """Record an NCCL WARN line, an nccl-tests failure or a torchrun agent's worker failure in ``out``.

    :returns: True when the line was one of them.
    """
    record = parse_log_line(line)
    if record is not None and record["level"] == "WARN":
        out["nccl_warnings"].append({"host": record["host"], "location": record["location"],
                                     "text": record["message"]})
        return True
    match = _NT_FAILURE.search(line)
    if match:
        out["nccl_tests_failures"].append({"kind": match.group("kind"), "location": match.group("loc"),
                                           "text": match.group("text").strip(" /")})
        return True
    match = _AGENT_FAILED.search(line)
    if match:
        out["agent_failures"].append({"exitcode": match.group("code"), "local_rank": int(match.group("local")),
                                      "pid": int(match.group("pid"))})
        return True
    return False


def _child_failure_line(line, out, state):
    """Record a signal line, and the fields of torchrun's ``ChildFailedError`` report (``state["failure"]``, the
    failure being read, spans lines).

    :returns: None (``out`` and ``state`` are updated in place).
    """
    match = _SIGNAL.search(line)
    if match:
        out["signals"].append({"name": match.group("name"), "pid": int(match.group("pid"))})
    if _CHILD_FAILED.search(line):
        state["failure"] = {}
        return
    failure = state["failure"]
    match = _FAILURE_FIELDS.match(line)
    if match and failure is not None:
        key, value = match.group("key"), match.group("value")
        if key == "time" and failure:
            out["child_failures"].append(failure)
            failure = {}
        failure[key] = value
        if key == "traceback":
            out["child_failures"].append(failure)
            failure = {}
        state["failure"] = failure


def _finish_child_failures(out, failure):
    """Close the last failure read, add each one's signal and rank, drop empty ones, fall back on the agent's failures.

    :returns: None (``out["child_failures"]`` is updated in place).
    """
    if failure:
        out["child_failures"].append(failure)
    for item in out["child_failures"]:
        code = str(item.get("exitcode", "")).split()[0] if item.get("exitcode") else ""
        item["signal"] = SIGNALS.get(code)
        item["rank"] = _int(str(item.get("rank", "")).split()[0]) if item.get("rank") else None
    out["child_failures"] = [c for c in out["child_failures"] if c.get("exitcode") or c.get("rank") is not None]
    if not out["child_failures"]:
        for agent in out["agent_failures"]:
            out["child_failures"].append({"rank": None, "local_rank": agent["local_rank"], "host": None,
                                          "exitcode": agent["exitcode"], "signal": SIGNALS.get(agent["exitcode"])})


def _timeout_field(work):
    match = re.search(r"Timeout\(ms\)=(\d+)", work or "")
    return match.group(1) if match else None


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


# NCCL's result strings (ncclGetErrorString) and the evidence lines that tell the classes apart.
_CUDA = r"Test CUDA failure|unhandled cuda error|ncclUnhandledCudaError|Cuda failure|CUDA error|cudaError\w*|" \
        r"out of memory|an illegal memory access"
_TRANSPORT = r"NET/IB\s*:\s*Got completion|completion from peer|with error \d+, opcode|vendor err|ibv_\w+ failed|" \
             r"Call to ibv_|NET/IB.*(?:error|failed)|No route to host|Network is unreachable|Connection timed out|" \
             r"NET/OFI.*(?:error|failed)|transport retry|wc_status|IBV_WC_"
_PROCESS = r"remote process exited|Connection closed by remote peer|Connection closed by localRank|" \
           r"Socket recv failed|Broken pipe|Connection reset by peer|peer.*(?:exited|closed)|ncclRemoteError|" \
           r"exited on signal \d+|mpirun noticed that process rank|process returned a non-zero exit code"
# A failed verbs call for lack of locked memory is a set-up problem of the node, not of the link.
_MEMLOCK = r"(?:ibv_create_qp|ibv_reg_mr\w*|ibv_create_cq)\w* failed.*(?:Cannot allocate memory|errno 12|ENOMEM)|memlock"
_SYSTEM = r"unhandled system error|ncclSystemError|no socket interface found|Failed to initialize any NET plugin|" \
          r"memlock|Cannot allocate memory|Bootstrap : no socket"
_USAGE = r"invalid usage|ncclInvalidUsage|invalid argument|ncclInvalidArgument"

CLASS_FIXES = {
    "transport": "a transfer between nodes failed: check every HCA port the job uses (ibstat: Active/LinkUp, "
                 "roce_health), name only cabled ports in NCCL_IB_HCA, the GID index on RoCE, PFC/ECN on the switch; "
                 "disable PCIe ACS on the switches above GPUs and HCAs (lspci -vvv ACSCtl: ReqRedir-/CmpltRedir-) and "
                 "retry with GPUDirect RDMA narrowed (NCCL_NET_GDR_LEVEL=PHB) or off (NCCL_NET_GDR_LEVEL=LOC) to "
                 "isolate it; ib_write_bw between the two hosts names the link (error 12 = transport retry count "
                 "exceeded: a link flapping or dropping packets)",
    "process": "a peer rank exited or closed its connection first; this rank's error is a consequence: find the "
               "first error in time across all ranks' logs (an exception, the OOM killer in dmesg, a segfault, an Xid) "
               "and fix that",
    "cuda": "a CUDA call failed on a GPU: `nvidia-smi`, Xid in the kernel log (gpu_health), out of memory (smaller "
            "sizes, no other process on the GPU), a GPU reset or reboot if it persists",
    "system": "NCCL could not set itself up on this node: the locked-memory limit (`ulimit -l` unlimited, LimitMEMLOCK), "
              "NCCL_SOCKET_IFNAME/NCCL_IB_HCA naming what exists, the RDMA stack (rdma-core, mlx5_ib)",
    "internal": "NCCL reported an internal error; in multi-node runs it usually follows a peer that closed its "
                "connection: read the WARN lines and the other ranks' logs first",
    "usage": "the program called NCCL wrongly (mismatched collectives, sizes or devices between ranks): "
             "TORCH_NCCL_DESYNC_DEBUG=1 / TORCH_DISTRIBUTED_DEBUG=DETAIL show which rank diverged",
    "unknown": "read the last NCCL WARN lines; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET",
}


def classify_nccl_error(text):
    """The class of an NCCL failure from its error text and the WARN lines around it.

    Evidence in order: a CUDA failure wins (the GPU, not the network); then transport evidence (an IB completion
    error, a failed verbs call, an unreachable network); then a peer that went away (remote process exited,
    connection closed by the peer: the first failure was elsewhere); then set-up (system) errors, usage errors,
    NCCL's ``internal error``.

    :returns: ``{"class": "cuda"|"transport"|"process"|"system"|"usage"|"internal"|"unknown", "evidence": [lines],
        "fix": str}``.
    """
    lines = [_strip(line).strip() for line in (text or "").splitlines()]
    for name, pattern in (("cuda", _CUDA), ("transport", _TRANSPORT), ("process", _PROCESS), ("system", _SYSTEM),
                          ("usage", _USAGE), ("internal", r"internal error|ncclInternalError")):
        hits = [line for line in lines if re.search(pattern, line)]
        if name == "transport" and hits and all(re.search(_MEMLOCK, line) for line in hits):
            name = "system"
        if hits:
            return {"class": name, "evidence": [_evidence(line) for line in _dedup(hits)[:4]], "fix": CLASS_FIXES[name]}
    return {"class": "unknown", "evidence": [], "fix": CLASS_FIXES["unknown"]}


def _evidence(line):
    """An evidence line without its pid/tid and source location (``misc/socket.cc:49``): the host and NCCL's text."""
    record = parse_log_line(line)
    if record is not None:
        return "%s%s" % ("%s: " % record["host"] if record["host"] else "", record["message"])
    return re.sub(r"\b[\w./-]+\.(?:cc|cu|cpp|c|h|hpp):\d+\s*", "", line).strip()


def _dedup(lines):
    seen, out = set(), []
    for line in lines:
        key = re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", line)
        key = re.sub(r"\d+", "#", key)
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out


def _ranks(items):
    ranks = sorted(set(i["rank"] for i in items if i.get("rank") is not None))
    if len(ranks) > 8:
        return "%s ... %s (%d ranks)" % (", ".join(str(r) for r in ranks[:4]), ranks[-1], len(ranks))
    return ", ".join(str(r) for r in ranks)


def runtime_problems(text, subject="job", world_size=None):
    """Problems for a failed run's log (see the module docstring for the codes).

    :param text: the log (stdout + stderr of torchrun or the job; nccl-tests output).
    :param subject: what to name (``job 42``, ``node n1``).
    :param world_size: number of ranks, when known: ranks that did not report a watchdog timeout are named.
    :returns: problems, the most specific first; [] when the log shows none of these failures.
    """
    parsed = parse_runtime_log(text)
    out = []
    if parsed["watchdog"]:
        out.append(_watchdog_problem(parsed["watchdog"], parsed["last_work"], subject, world_size))
    for entry in parsed["async_errors"][:1]:
        cls = classify_nccl_error("\n".join([entry["error"], entry.get("last_error") or ""] +
                                            [w["text"] for w in parsed["nccl_warnings"]]))
        out.append(problem(
            "TORCH_NCCL_ASYNC_ERROR", "error", subject,
            "NCCL failed during the run (%s failure): %s%s%s" % (
                cls["class"], entry["error"], ", NCCL %s" % entry["version"] if entry.get("version") else "",
                "; last error: %s" % entry["last_error"] if entry.get("last_error") else ""),
            cls["fix"]))
    for entry in parsed["store"][:1]:
        out.append(_store_problem(entry, subject))
    for entry in parsed["rendezvous"][:1]:
        out.append(problem(
            "TORCH_RENDEZVOUS_FAILED", "error", subject,
            "torchrun could not form the group: %s%s" % (entry["kind"], ": %s" % entry["text"] if entry["text"] else ""),
            "every node must run torchrun with the same --rdzv-endpoint/--rdzv-id and --nnodes; the endpoint must be "
            "reachable from every node (firewall, name resolution); raise join_timeout for slow starts"))
    for entry in parsed["gloo"][:1]:
        hang = entry.get("op")
        out.append(problem(
            "GLOO_TIMEOUT", "error", subject,
            "Gloo: %s%s" % (entry["text"], " (a peer never sent its part: it hung or died)" if hang else
                            " (the peer process exited or the connection broke)"),
            "look at the peer's log for its first error; GLOO_SOCKET_IFNAME must name the fabric interface on every "
            "node; Gloo is CPU-bound on small hosts: raise the timeout for large tensors"))
    for entry in parsed["child_failures"][:4]:
        out.append(_worker_failed_problem(entry, subject))
    out.extend(warn_problems(parsed["nccl_warnings"], subject))
    return out


def _watchdog_problem(items, last_work, subject, world_size):
    """The ``TORCH_NCCL_WATCHDOG_TIMEOUT`` problem for the watchdog timeouts ``items`` of a log (see
    :func:`parse_runtime_log`): the ranks and collectives, a desynchronisation, the ranks that reported none.

    :returns: one problem dict.
    """
    first = min(items, key=lambda i: (i["seq"] if i["seq"] is not None else 0))
    ops = sorted(set("%s SeqNum=%s" % (i["op"], i["seq"]) for i in items))
    quiet = ""
    if world_size:
        seen = set(i["rank"] for i in items)
        missing = [r for r in range(int(world_size)) if r not in seen]
        if missing and len(missing) < int(world_size):
            quiet = "; ranks %s reported no timeout: look at them first (crashed, hung, or in another " \
                    "collective)" % ", ".join(str(r) for r in missing[:16])
    seqs = sorted(set(i["seq"] for i in items if i["seq"] is not None))
    by_seq = {}
    for i in items:
        by_seq.setdefault(i["seq"], set()).add(i["op"])
    mixed = sorted(str(seq) for seq, kinds in by_seq.items() if len(kinds) > 1)
    desync = ""
    if mixed:
        desync = "; ranks run different collectives at the same sequence number (%s): the ranks are out of " \
                 "step (a desynchronisation in the program)" % ", ".join(mixed[:4])
    elif len(seqs) > 1:
        desync = "; ranks wait at different sequence numbers (%s): a desynchronisation" % ", ".join(
            str(s) for s in seqs[:6])
    lag = ""
    if last_work:
        rank, work = sorted(last_work.items())[0]
        lag = "; rank %d: last completed NCCL work %d, last enqueued %d" % (rank, work["completed"], work["enqueued"])
    return problem(
        "TORCH_NCCL_WATCHDOG_TIMEOUT", "error", subject,
        "a collective hung: NCCL watchdog timeout on rank(s) %s in %s after %s ms (timeout %s ms)%s%s%s. Not a "
        "rendezvous or firewall problem: the ranks had connected and were inside the collective"
        % (_ranks(items), ", ".join(ops[:4]), first["ran_ms"], first["timeout_ms"], desync, quiet, lag),
        "find the rank that did not enter or finish the collective: its own log (an exception, OOM, an Xid), a "
        "data-dependent branch, a straggler stuck in I/O; rerun with TORCH_NCCL_DESYNC_DEBUG=1 (and "
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 for the flight recorder) and NCCL_DEBUG=INFO; `py-spy dump` the hung "
        "ranks; if every rank is inside the collective, check the fabric (roce_health counters, ib_write_bw). "
        "Raise the timeout only for collectives that are slow by design")


def _store_problem(entry, subject):
    """The ``TORCH_STORE_ERROR`` problem for a c10d store error of the log (clients missing, no connection, a socket).

    :returns: one problem dict.
    """
    if entry["kind"] == "clients":
        message = "the c10d store on the first node waited %s s for its %s: %s/%s joined; the other nodes " \
                  "never reached it" % (entry["s"], entry["who"], entry["joined"], entry["total"])
        fix = "start every node's process (nnodes = the nodes that really start), make MASTER_ADDR/" \
              "rdzv_endpoint an address the other nodes reach (not loopback), open its port in the firewall"
    elif entry["kind"] == "connect":
        message = "could not connect to the c10d store at %s:%s within %s" % (entry["host"], entry["port"],
                                                                              entry["t"])
        fix = "check that %s resolves to the first node's fabric address on every node (not 127.0.x.x), that " \
              "the process there started, and that port %s is open between the nodes. If the process there " \
              "starts later than this one (busy CPUs, a slow import of torch), give the store longer: torchrun's " \
              "--rdzv-conf read_timeout=S (ddp-torchrun.sbatch: DDP_HANG_TIMEOUT)" % (entry["host"], entry["port"])
    else:
        message = "the c10d store connection failed: %s" % entry["text"]
        fix = "the store lives in rank 0's process on the first node: if that process died, its own log has the " \
              "first error; otherwise check the network between the nodes"
    return problem("TORCH_STORE_ERROR", "error", subject, message, fix)


def _worker_failed_problem(entry, subject):
    """The ``TORCHRUN_WORKER_FAILED`` problem for one failed worker torchrun reported.

    :returns: one problem dict.
    """
    signal = entry.get("signal")
    return problem(
        "TORCHRUN_WORKER_FAILED", "error", subject,
        "torchrun: rank %s on %s exited with %s%s" % (
            entry.get("rank") if entry.get("rank") is not None else "(local rank %s)" % entry.get("local_rank"),
            entry.get("host") or "?", entry.get("exitcode"),
            " (%s%s)" % (signal, ": killed, often by the OOM killer" if signal == "SIGKILL" else "")
            if signal else ""),
        "read that rank's own traceback (above in the log, or error_file); for SIGKILL check `dmesg | grep -i "
        "oom` on %s; for SIGABRT after an NCCL error the NCCL finding is the cause" % (entry.get("host") or "the host"))


# Known NCCL WARN texts -> what to do. Sources: NCCL user guide troubleshooting
# (networking_troubleshooting.rst), NCCL src/bootstrap.cc, shared/cases C03/C04/C06.
WARN_HINTS = (
    (r"ibv_create_qp failed|ibv_reg_mr failed",
     "the locked-memory limit is too low for RDMA: set 'memlock unlimited' (limits.conf / systemd "
     "LimitMEMLOCK / container --ulimit memlock=-1) and check 'ulimit -l' in the job"),
    (r"ibv_modify_qp failed",
     "the RoCE GID index is wrong (link-local or RoCE v1 entry): unset NCCL_IB_GID_INDEX with NCCL >= 2.21, "
     "else set the index of the RoCE v2 entry with the node's IPv4 address (roce_health reports it)"),
    (r"No route to host",
     "a firewall rejects rank-to-rank connections on ephemeral ports (firewalld answers 'No route to host'): "
     "open the fabric interface between the nodes (firewall role), not only the rendezvous port"),
    (r"Connection refused",
     "a peer was not listening: a rank died earlier, or the address is wrong (check NCCL_SOCKET_IFNAME and "
     "that the hostname does not resolve to loopback)"),
    (r"Connection timed out|timed out",
     "packets are dropped on the way (a DROP firewall rule, a wrong route or a wrong interface)"),
    (r"no socket interface found|No socket interface found",
     "NCCL_SOCKET_IFNAME matches no interface on this node: fix the name or list"),
    (r"Failed to initialize any NET plugin",
     "no network plugin started: check the RDMA stack (rdma-core, mlx5_ib) and NCCL_NET / NCCL_IB_DISABLE"),
    (r"NET/IB.*(?:error|Error)|completion error|wc_status|vendor err",
     "an RDMA transfer failed: check the RoCE port (roce_health), PFC/ECN on the switch and the GID index"),
)


def warn_hint(text):
    """The fix for a known NCCL WARN text, or a generic one."""
    for pattern, fix in WARN_HINTS:
        if re.search(pattern, text):
            return fix
    return "see the NCCL troubleshooting guide for this message; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL"


def warn_problems(warnings, subject):
    """One NCCL_WARN warning per distinct WARN text (hosts and locations merged)."""
    seen = {}
    for w in warnings:
        key = re.sub(r"<\d+>", "<port>", w["text"])
        entry = seen.setdefault(key, {"text": w["text"], "count": 0, "where": []})
        entry["count"] += 1
        where = w.get("location") or ""
        if w.get("host"):
            where = "%s %s" % (w["host"], where)
        if where.strip() and where.strip() not in entry["where"]:
            entry["where"].append(where.strip())
    problems = []
    for entry in seen.values():
        message = "NCCL WARN %s" % entry["text"]
        if entry["count"] > 1:
            message += " (%d times)" % entry["count"]
        if entry["where"]:
            message += " [%s]" % ", ".join(entry["where"][:3])
        problems.append(problem("NCCL_WARN", "warning", subject, message, warn_hint(entry["text"])))
    return problems


# Codes that say the run broke at run time (not at start-up): a caller can tell them from rendezvous failures.
RUNTIME_CODES = ("TORCH_NCCL_WATCHDOG_TIMEOUT", "TORCH_NCCL_ASYNC_ERROR", "GLOO_TIMEOUT", "TORCHRUN_WORKER_FAILED")
