# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for NCCL outputs: nccl-tests tables, NCCL_DEBUG=INFO logs, PyTorch NCCL errors.

No I/O: text in, dicts out. Python 3.8+. Formats handled (real samples in
tests/unit/fixtures/nccl/, provenance in its SOURCES.md):

* nccl-tests (``all_reduce_perf`` and friends). Old builds print an ``error`` column (max
  relative error, ``5e-07``) and no ``root`` column; current builds print ``root`` and ``#wrong``
  (count of wrong elements). Header lines: ``# nccl-tests version 2.18.3 nccl-headers=...``,
  ``# Collective test starting: all_reduce_perf``, ``# nThread 1 nGpus 8 minBytes ...``,
  ``#  Rank  0 Group  0 Pid 944 on host device  0 [0x0f] NVIDIA A100-SXM4-40GB`` and, when NCCL
  prints it, ``NCCL version 2.27.3+cuda12.9``. Footer: ``# Out of bounds values : 0 OK``,
  ``# Avg bus bandwidth : 81.112``. Launcher prefixes (``0: `` from srun, ``[1,0]<stdout>:``
  from Open MPI) are stripped.
* NCCL_DEBUG=INFO logs: ``<host>:<pid>:<tid> [<dev>] [<file>:<line>] NCCL INFO|WARN <msg>``
  (optionally after a ``[date time]`` stamp, or bare ``NCCL INFO <msg>``).
* PyTorch errors: ``RuntimeError: NCCL error in: <file>:<line>, unhandled system error, NCCL
  version 2.7.8`` / ``ncclSystemError: ...`` and the WARN lines that give the cause.
"""
from __future__ import annotations

import re

# nccl-tests doc/PERFORMANCE.md ("Bus bandwidth" section) and the *GetBw functions in its src/.
_BUSBW_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce_scatter": lambda n: float(n - 1) / n,
    "all_gather": lambda n: float(n - 1) / n,
    "alltoall": lambda n: float(n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
_OP_ALIASES = {
    "allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather",
    "all_to_all": "alltoall", "send_recv": "sendrecv",
}

_PREFIX_RE = re.compile(r"^(?:\d+: |\[\d+,\d+\]<std(?:out|err)>:)")
_NT_VERSION_RE = re.compile(r"^#\s*nccl-tests version (\S+)(.*)$")
_NT_TEST_RE = re.compile(r"^#\s*Collective test (?:starting|concluded):\s*(\S+)")
_NT_PARAMS_RE = re.compile(r"^#\s*nThread\s")
_NT_DEVICE_RE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+(?P<group>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]+)\]\s+(?P<name>.*?)\s*$")
_NT_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_NT_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)\s*(OK|FAILED)?", re.I)
_NT_FAILURE_RE = re.compile(r"Test (?:NCCL|CUDA) failure .*|Test failure .*")
_NCCL_VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+(?:\.\d+)*))?")

_LOG_RE = re.compile(
    r"^(?:\[[^\]]*\]\s+)?(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+\[(?P<dev>\d+)\]\s+)?"
    r"(?:(?P<loc>[\w./-]+:\d+)\s+)?NCCL\s+(?P<level>INFO|WARN|TRACE|ABORT|VERSION)\s(?P<msg>.*?)\s*$")
_BOOTSTRAP_RE = re.compile(r"^Bootstrap\s*:\s*Using\s+(?P<ifname>[^:\s]+):(?P<addr>\S+?)(?:<\d+>)?$")
_NET_USING_RE = re.compile(r"^NET/(?P<plugin>[\w.-]+)\s*:\s*Using\s+(?P<rest>.*)$")
_NET_NODEV_RE = re.compile(r"^NET/(?P<plugin>[\w.-]+)\s*:\s*No device found")
_NET_DEV_RE = re.compile(r"\[(?P<index>\d+)\](?P<name>[^\s\[]+)")
_USING_NETWORK_RE = re.compile(r"^Using network (?P<net>.+?)\s*$")
# External net plugins (NCCL src/plugin/net.cc; HPC-X nccl-rdma-sharp-plugins, aws-ofi-nccl): which one loaded, which
# interface versions it lacked, where it came from, and the internal fallback.
_PLUGIN_LOADED_RE = re.compile(r"^NET/Plugin\s*:\s*Loaded (?P<what>net|collnet|coll) plugin (?P<name>.+?)"
                               r"(?:\s+\((?P<version>v\d+)\))?\s*$")
_PLUGIN_MISSING_SYMBOL_RE = re.compile(r"^NET/Plugin\s*:\s*Failed to find (?P<symbol>nccl\w*Plugin(?:_v(?P<v>\d+))?) "
                                       r"symbol")
_PLUGIN_PATH_RE = re.compile(r"^Plugin Path\s*:\s*(?P<path>\S+)")
_PLUGIN_NONE_RE = re.compile(r"^NET/Plugin\s*:\s*(?:.*No plugin found|Could not find:|Plugin load \(.*\) returned|"
                             r"dlerror=)")
_GDR_RE = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled)\b(?P<rest>.*)$")
_CHANNEL_RE = re.compile(
    r"^Channel (?P<channel>\d+)(?:/\d+)?\s*:\s*(?P<src>\d+)\[[^\]]*\]\s*->\s*(?P<dst>\d+)\[[^\]]*\]"
    r"(?:\s*\[(?P<dir>send|receive)\])?\s+via\s+(?P<via>\S+)")
_COLL_CHANNELS_RE = re.compile(r"^(?P<n>\d+) coll channels")
_INIT_RE = re.compile(r"rank (?P<rank>\d+) nranks (?P<nranks>\d+) .*Init COMPLETE")
_TORCH_ERROR_RE = re.compile(
    r"NCCL error in: (?P<location>\S+?),\s*(?P<error>[^,\n]+?)(?:,\s*NCCL version (?P<version>[\w.+]+))?\s*$",
    re.M)
_NCCL_RESULT_RE = re.compile(
    r"\b(?P<name>ncclSystemError|ncclInternalError|ncclInvalidArgument|ncclInvalidUsage|ncclRemoteError"
    r"|ncclUnhandledCudaError|ncclInProgress)\b:?\s*(?P<text>.*)$", re.M)


def busbw_from_algbw(algbw, nranks, op="all_reduce"):
    """Bus bandwidth from algorithm bandwidth, as nccl-tests computes it.

    The factors are those of nccl-tests ``doc/PERFORMANCE.md`` (section "Bus bandwidth") and the
    ``*GetBw`` functions in its ``src/``: AllReduce ``2(n-1)/n``; ReduceScatter, AllGather and
    AlltoAll ``(n-1)/n``; Broadcast, Reduce and SendRecv ``1``. busbw "should reflect the speed
    of the hardware bottleneck" and so is comparable across rank counts, where algbw is not.

    :param algbw: algorithm bandwidth (``bytes / time``), any unit; the result has the same unit.
    :param nranks: number of ranks (n >= 1).
    :param op: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``alltoall``, ``broadcast``,
        ``reduce`` or ``sendrecv``; a ``_perf`` suffix (the nccl-tests binary name) and the
        ``allreduce`` spelling are accepted.
    :raises ValueError: unknown op or nranks < 1.
    """
    key = str(op).lower()
    if key.endswith("_perf_mpi"):
        key = key[:-9]
    elif key.endswith("_perf"):
        key = key[:-5]
    key = _OP_ALIASES.get(key, key)
    if key not in _BUSBW_FACTORS:
        raise ValueError("unknown collective %r; one of %s" % (op, ", ".join(sorted(_BUSBW_FACTORS))))
    n = int(nranks)
    if n < 1:
        raise ValueError("nranks must be >= 1, got %r" % nranks)
    return float(algbw) * _BUSBW_FACTORS[key](n)


def _num(text):
    """float or int of a table cell; None for N/A and the like."""
    try:
        if re.match(r"^-?\d+$", text):
            return int(text)
        return float(text)
    except ValueError:
        return None


def _strip_prefix(line):
    return _PREFIX_RE.sub("", line, count=1)


def _parse_params(line):
    """``# nThread 1 nGpus 8 minBytes 64 ... step: 2(factor) warmup iters: 5 iters: 20 ...``."""
    params = {}
    words = []
    for token in line.lstrip("#").split():
        match = re.match(r"^(-?\d+)(?:\((\w+)\))?$", token)
        if match and words:
            name = "_".join(w.rstrip(":") for w in words)
            params[name] = int(match.group(1))
            if match.group(2):
                params[name + "_kind"] = match.group(2)
            words = []
        else:
            words.append(token)
    return params


def _half(cells, wrong_col):
    """time, algbw, busbw and the check column of one half (out-of-place or in-place)."""
    time_us, algbw, busbw, check = (_num(c) for c in cells)
    half = {"time_us": time_us, "algbw_gbps": algbw, "busbw_gbps": busbw}
    if wrong_col == "error":
        half["error"] = float(check) if check is not None else None
        half["wrong"] = None
    else:
        half["wrong"] = int(check) if isinstance(check, int) else None
        half["error"] = None
    return half


def _parse_row(tokens, wrong_col):
    if len(tokens) < 8 or not re.match(r"^\d+$", tokens[0]) or not re.match(r"^\d+$", tokens[1]):
        return None
    head = {"bytes": int(tokens[0]), "count": int(tokens[1]), "type": tokens[2], "redop": tokens[3]}
    rest = tokens[4:]
    root = None
    if len(rest) in (9, 5):
        root = _num(rest[0])
        rest = rest[1:]
    if len(rest) not in (8, 4):
        return None
    if wrong_col is None:
        wrong_col = "error" if re.search(r"[eE.]", rest[3]) else "wrong"
    head["root"] = root
    head["out_of_place"] = _half(rest[0:4], wrong_col)
    head["in_place"] = _half(rest[4:8], wrong_col) if len(rest) == 8 else None
    return head


def parse_nccl_tests(text):
    """Parse the output of an nccl-tests binary (``all_reduce_perf`` etc.).

    :returns: dict with ``nccl_tests_version`` (str or None), ``test`` (e.g. ``all_reduce_perf``
        when printed), ``params`` (the ``# nThread`` line as a dict), ``devices`` (list of
        ``{rank, group, pid, host, device, bus_id, name}``), ``hosts`` (sorted host names),
        ``nranks``, ``nccl_version`` (``2.27.3``) and ``nccl_cuda`` (``12.9``) when printed,
        ``columns`` (``wrong`` for the current format, ``error`` for the old one, None if no
        header), ``results`` (one dict per size: ``bytes``, ``count``, ``type``, ``redop``,
        ``root`` (None in the old format), ``out_of_place`` and ``in_place``, each
        ``{time_us, algbw_gbps, busbw_gbps, wrong, error}``; ``in_place`` None when not printed),
        ``avg_busbw_gbps`` and ``avg_busbw_status`` (``OK``/``FAILED``/None),
        ``out_of_bounds`` (int or None), ``out_of_bounds_ok`` (bool or None), ``wrong_total``
        (sum of ``#wrong``, None in the old format), ``failures`` (``Test NCCL failure ...``
        lines) and ``complete`` (the footer was seen).
    """
    out = {
        "nccl_tests_version": None, "test": None, "params": {}, "devices": [], "hosts": [], "nranks": None,
        "nccl_version": None, "nccl_cuda": None, "columns": None, "results": [], "avg_busbw_gbps": None,
        "avg_busbw_status": None, "out_of_bounds": None, "out_of_bounds_ok": None, "wrong_total": None,
        "failures": [], "complete": False,
    }
    for raw in text.splitlines():
        line = _strip_prefix(raw.rstrip())
        stripped = line.strip()
        if not stripped:
            continue
        match = _NT_VERSION_RE.match(stripped)
        if match:
            out["nccl_tests_version"] = match.group(1)
            continue
        match = _NT_TEST_RE.match(stripped)
        if match:
            out["test"] = out["test"] or match.group(1)
            continue
        if _NT_PARAMS_RE.match(stripped):
            out["params"] = _parse_params(stripped)
            continue
        match = _NT_DEVICE_RE.match(stripped)
        if match:
            out["devices"].append({
                "rank": int(match.group("rank")), "group": int(match.group("group")),
                "pid": int(match.group("pid")), "host": match.group("host"),
                "device": int(match.group("device")), "bus_id": match.group("bus"), "name": match.group("name"),
            })
            continue
        match = _NT_OOB_RE.match(stripped)
        if match:
            out["out_of_bounds"] = int(match.group(1))
            out["out_of_bounds_ok"] = (match.group(2) != "FAILED") if match.group(2) else out["out_of_bounds"] == 0
            continue
        match = _NT_AVG_RE.match(stripped)
        if match:
            out["avg_busbw_gbps"] = _num(match.group(1))
            out["avg_busbw_status"] = match.group(2)
            out["complete"] = True
            continue
        if stripped.startswith("#"):
            if "#wrong" in stripped:
                out["columns"] = "wrong"
            elif re.search(r"\bbusbw\s+error\b", stripped):
                out["columns"] = "error"
            continue
        match = _NCCL_VERSION_RE.search(stripped)
        if match and stripped.startswith("NCCL version"):
            out["nccl_version"], out["nccl_cuda"] = match.group(1), match.group(2)
            continue
        failure = _NT_FAILURE_RE.search(stripped)
        if failure:
            out["failures"].append(stripped)
            continue
        row = _parse_row(stripped.split(), out["columns"])
        if row is not None:
            out["results"].append(row)
    out["hosts"] = sorted({d["host"] for d in out["devices"]})
    out["nranks"] = len(out["devices"]) or None
    if out["results"] and all(r["out_of_place"]["wrong"] is not None for r in out["results"]):
        out["wrong_total"] = sum(
            (r["out_of_place"]["wrong"] or 0) + ((r["in_place"] or {}).get("wrong") or 0) for r in out["results"])
    return out


def parse_log_line(line):
    """One NCCL log line -> ``{host, pid, tid, dev, location, level, message}`` or None."""
    match = _LOG_RE.match(_strip_prefix(line.rstrip()))
    if not match:
        return None
    return {
        "host": match.group("host"),
        "pid": int(match.group("pid")) if match.group("pid") else None,
        "tid": int(match.group("tid")) if match.group("tid") else None,
        "dev": int(match.group("dev")) if match.group("dev") else None,
        "location": match.group("loc"),
        "level": match.group("level"),
        "message": match.group("msg"),
    }


def _net_devices(plugin, rest):
    devices = []
    body = rest.split(";")[0]
    for match in _NET_DEV_RE.finditer(body):
        name = match.group("name")
        dev = {"index": int(match.group("index")), "name": name, "port": None, "link_layer": None, "address": None,
               "features": []}
        # mlx5_0:1/IB, and with an external plugin's suffixes mlx5_0:1/IB/SHARP (HPC-X RDMA/SHARP plugin).
        ib = re.match(r"^([^:]+):(\d+)/(\w+)((?:/[\w.-]+)*)$", name)
        sock = re.match(r"^([^:]+):([^<]+)(?:<\d+>)?$", name)
        if ib:
            dev.update(name=ib.group(1), port=int(ib.group(2)), link_layer=ib.group(3),
                       features=[f for f in ib.group(4).split("/") if f])
        elif sock:
            dev.update(name=sock.group(1), address=sock.group(2))
        devices.append(dev)
    oob = re.search(r"OOB (\S+?)(?:<\d+>)?$", rest)
    return {"plugin": plugin, "devices": devices, "relaxed_ordering": "[RO]" in rest,
            "oob": oob.group(1) if oob else None}


def _net_kind(via):
    """``NET/IB/0/GDRDMA`` -> ``IB``; ``SHM/direct/direct`` -> ``SHM``; ``P2P/CUMEM`` -> ``P2P``."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return parts[1]
    return parts[0]


def parse_nccl_debug(text):
    """Parse NCCL_DEBUG=INFO output (any mix of NCCL log lines and other text).

    :returns: dict with ``nccl_version`` / ``nccl_cuda`` (from ``NCCL version 2.18.3+cuda12.2``),
        ``bootstrap`` (``[{interface, address}]`` from ``Bootstrap : Using eth0:10.0.0.1<0>``),
        ``net`` (one entry per ``NET/<plugin> : Using ...`` line: ``{plugin, devices: [{index,
        name, port, link_layer, address, features}], relaxed_ordering, oob}``; ``features`` are an external
        plugin's suffixes, ``mlx5_0:1/IB/SHARP`` -> ``["SHARP"]``), ``net_plugin`` (``{loaded: "NCCL RDMA Plugin
        v6", version: "v6", collnet: "SHARP (v6)", path, missing_versions: ["v8"] (interface versions NCCL asked
        for first and the plugin lacks: a version fallback, not an error), internal: True when NCCL fell back to
        its internal transports}``), ``net_plugins`` (plugins in
        those lines, in order, unique), ``no_device`` (plugins that said ``No device found``),
        ``networks`` (``Using network X`` values), ``channels`` (``{channel, src, dst, direction,
        via, kind, gdrdma}``), ``channel_transports`` (sorted kinds seen on channel lines: ``IB``,
        ``Socket``, ``P2P``, ``SHM`` ...), ``coll_channels`` (int or None), ``gdr`` (True when
        GPU Direct RDMA is enabled or a channel uses ``GDRDMA``, False when only ``Disabled`` lines
        were seen, else None), ``gdr_lines``, ``warnings`` (``[{host, location, text, line}]``),
        ``nranks`` (from ``Init COMPLETE`` lines) and ``transport`` (see :func:`net_transport`).
    """
    out = {
        "nccl_version": None, "nccl_cuda": None, "bootstrap": [], "net": [], "net_plugins": [], "no_device": [],
        "networks": [], "channels": [], "channel_transports": [], "coll_channels": None, "gdr": None,
        "gdr_lines": [], "warnings": [], "nranks": None, "transport": None,
        "net_plugin": {"loaded": None, "version": None, "collnet": None, "path": None, "missing_versions": [],
                       "internal": None},
    }
    gdr_seen = {"enabled": False, "disabled": False}
    for raw in text.splitlines():
        rec = parse_log_line(raw)
        if rec is None:
            match = _NCCL_VERSION_RE.search(raw)
            if match and out["nccl_version"] is None and "NCCL error" not in raw:
                out["nccl_version"], out["nccl_cuda"] = match.group(1), match.group(2)
            continue
        msg = rec["message"]
        if rec["level"] == "WARN":
            out["warnings"].append({"host": rec["host"], "location": rec["location"], "text": msg,
                                    "line": raw.strip()})
            continue
        if _version_or_bootstrap_line(msg, out):
            continue
        if _net_plugin_line(msg, out):
            continue
        if _network_line(msg, out):
            continue
        _transport_line(msg, out, gdr_seen)
    out["channel_transports"] = sorted({c["kind"] for c in out["channels"]})
    if gdr_seen["enabled"] or any(c["gdrdma"] for c in out["channels"]):
        out["gdr"] = True
    elif gdr_seen["disabled"]:
        out["gdr"] = False
    out["transport"] = net_transport(out)
    return out


def _version_or_bootstrap_line(msg, out):
    """Record an ``NCCL version`` or ``Bootstrap : Using`` line in ``out``; returns True when ``msg`` was one."""
    match = _NCCL_VERSION_RE.search(msg)
    if match and msg.startswith("NCCL version"):
        out["nccl_version"], out["nccl_cuda"] = match.group(1), match.group(2)
        return True
    match = _BOOTSTRAP_RE.match(msg)
    if match:
        entry = {"interface": match.group("ifname"), "address": match.group("addr")}
        if entry not in out["bootstrap"]:
            out["bootstrap"].append(entry)
        return True
    return False


def _net_plugin_line(msg, out):
    """Record a line about the network plugin in ``out["net_plugin"]``; returns True when ``msg`` was one."""
    plugin = out["net_plugin"]
    match = _PLUGIN_LOADED_RE.match(msg)
    if match:
        if match.group("what") == "net":
            plugin.update(loaded=match.group("name"), version=match.group("version"), internal=False)
        else:
            plugin["collnet"] = match.group("name")
        return True
    match = _PLUGIN_MISSING_SYMBOL_RE.match(msg)
    if match:
        if match.group("v") and "Coll" not in match.group("symbol") and \
                "v" + match.group("v") not in plugin["missing_versions"]:
            plugin["missing_versions"].append("v" + match.group("v"))
        return True
    match = _PLUGIN_PATH_RE.match(msg)
    if match:
        plugin["path"] = match.group("path")
        return True
    if _PLUGIN_NONE_RE.match(msg):
        if plugin["loaded"] is None:
            plugin["internal"] = True
        return True
    return False


def _network_line(msg, out):
    """Record a ``NET/<plugin> : Using``, ``No device found`` or ``Using network`` line; returns True when ``msg`` was one."""
    match = _NET_USING_RE.match(msg)
    if match:
        out["net"].append(_net_devices(match.group("plugin"), match.group("rest")))
        if match.group("plugin") not in out["net_plugins"]:
            out["net_plugins"].append(match.group("plugin"))
        return True
    match = _NET_NODEV_RE.match(msg)
    if match:
        if match.group("plugin") not in out["no_device"]:
            out["no_device"].append(match.group("plugin"))
        return True
    match = _USING_NETWORK_RE.match(msg)
    if match:
        out["networks"].append(match.group("net"))
        return True
    return False


def _transport_line(msg, out, gdr_seen):
    """Record a GPU Direct RDMA line (its state in ``gdr_seen``), a channel, collective-channel or ``Init COMPLETE`` line.

    :returns: None (``out`` and ``gdr_seen`` are updated in place).
    """
    match = _GDR_RE.search(msg)
    if match:
        out["gdr_lines"].append(msg)
        if match.group("state") == "Enabled":
            gdr_seen["enabled"] = True
        else:
            gdr_seen["disabled"] = True
        return
    match = _CHANNEL_RE.match(msg)
    if match:
        via = match.group("via")
        out["channels"].append({
            "channel": int(match.group("channel")), "src": int(match.group("src")), "dst": int(match.group("dst")),
            "direction": match.group("dir"), "via": via, "kind": _net_kind(via), "gdrdma": "GDRDMA" in via,
        })
        return
    match = _COLL_CHANNELS_RE.match(msg)
    if match:
        out["coll_channels"] = int(match.group("n"))
        return
    match = _INIT_RE.search(msg)
    if match:
        out["nranks"] = int(match.group("nranks"))


_LOCAL_KINDS = ("P2P", "SHM", "NVLS", "CollNet", "COLLNET")


def net_kind(name):
    """NCCL's name for a network -> the transport family: ``IB`` (the internal IB verbs transport, and the RDMA
    plugins' ``IBext``/``IBext_v8``), ``Socket``, ``OFI`` (aws-ofi-nccl: ``AWS Libfabric``, ``Libfabric``), else the
    name itself (``SHARP`` collnet, ``FastSocket`` ...)."""
    text = str(name or "").strip()
    low = text.lower()
    if low == "ib" or low.startswith("ibext"):
        return "IB"
    if low in ("socket", "socketext") or low.startswith("socket"):
        return "Socket"
    if "libfabric" in low or low.startswith("ofi") or low == "aws":
        return "OFI"
    return text or None


def net_transport(parsed):
    """The network transport a parsed log shows: ``IB``, ``Socket`` (or another plugin name), or None.

    Evidence in order of strength: the ``via NET/<x>`` channel lines (what was used), then the
    ``Using network <x>`` lines (what was chosen), then the ``NET/<x> : Using`` lines (what was
    initialised). A level that shows more than one network gives None (ambiguous); None also when
    there is no evidence (a single-node run that used only P2P/SHM has no network transport), and None for a
    communicator of one rank (``nranks 1`` on the ``Init COMPLETE`` line): NCCL still prints ``Using network
    Socket`` there (seen with NCCL 2.28.9 on one H200), but no byte crosses a network.
    """
    if parsed.get("nranks") == 1:
        return None
    used = sorted({net_kind(c["kind"]) for c in parsed.get("channels", []) if c["via"].startswith("NET/")})
    if used:
        return used[0] if len(used) == 1 else None
    chosen = sorted(set(net_kind(n) for n in parsed.get("networks", [])))
    if chosen:
        return chosen[0] if len(chosen) == 1 else None
    inited = sorted(set(net_kind(n) for n in parsed.get("net_plugins", [])))
    if len(inited) == 1:
        return inited[0]
    return None


def rdma_link_layers(parsed):
    """Link layers (``IB``, ``RoCE``) of the devices listed by ``NET/IB : Using`` lines, sorted."""
    return sorted({d["link_layer"] for n in parsed.get("net", []) for d in n["devices"] if d["link_layer"]})


def parse_pytorch_nccl_error(text):
    """Parse a PyTorch NCCL failure (traceback text plus NCCL WARN lines).

    :returns: dict with ``error`` (``unhandled system error``), ``nccl_result`` (``ncclSystemError``),
        ``nccl_result_text`` (what follows it), ``location`` (``.../ProcessGroupNCCL.cpp:825``),
        ``nccl_version`` (``2.7.8``), ``warnings`` (as in :func:`parse_nccl_debug`) and
        ``found`` (True when any NCCL error text was seen).
    """
    out = {"error": None, "nccl_result": None, "nccl_result_text": None, "location": None, "nccl_version": None,
           "warnings": parse_nccl_debug(text)["warnings"], "found": False}
    match = _TORCH_ERROR_RE.search(text)
    if match:
        out.update(error=match.group("error").strip(), location=match.group("location"),
                   nccl_version=match.group("version"), found=True)
    match = _NCCL_RESULT_RE.search(text)
    if match:
        out.update(nccl_result=match.group("name"), nccl_result_text=match.group("text").strip() or None, found=True)
    if out["error"] is None:
        for phrase in ("unhandled system error", "unhandled cuda error", "internal error", "invalid usage",
                       "remote process exited or there was a network error"):
            if phrase in text:
                out.update(error=phrase, found=True)
                break
    return out


def normalize_nccl_version(value):
    """``2.18.3+cuda12.2`` / ``(2, 18, 3)`` / ``21803`` -> ``2.18.3``; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)):
        return ".".join(str(int(v)) for v in value[:3])
    text = str(value).strip()
    if re.match(r"^\d{4,6}$", text):
        code = int(text)
        if code >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
            return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)
        return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)
    match = re.match(r"^(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else text
