# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's own view of its nodes, read from its commands and logs, and what it means (pure, no I/O).

Readers (text in, dicts out):

* :func:`parse_scontrol_nodes`: ``scontrol show node [-o]`` (blocks of ``Key=Value``; ``OS=`` and ``Reason=`` run to
  the end of their line; ``Reason=Low RealMemory [slurm@2024-12-19T11:03:34]`` names who set it and when);
* :func:`parse_sinfo_table`: any ``sinfo`` table with a header line: the default (``PARTITION AVAIL TIMELIMIT NODES
  STATE NODELIST``), ``-N``, ``-l``/``-lN`` (a date line first, ``REASON`` last), ``-R``/``--list-reasons``
  (``REASON USER TIMESTAMP NODELIST``, the reason first and with spaces) and ``--Format=reason:40,nodelist``;
  node lists are expanded (``c[001-003,007]``);
* :func:`parse_slurm_log`: slurmctld/slurmd log lines (``[2020-08-13T10:20:03.698] error: Node n1 has low
  real_memory size (63622 < 64000)``, syslog/journal prefixes too).

:func:`node_problems` turns node states into problems. A drain or DOWN/INVAL that Slurm set itself is named by its
cause, at ``error`` (the node is out of service for a fault): resources below the node's configuration
(``SLURM_NODE_LOW_RESOURCES``), fewer GPUs than its ``Gres`` (``SLURM_GRES_MISMATCH``), not responding
(``SLURM_NODE_NOT_RESPONDING``), a failed registration or INVAL state (``SLURM_NODE_INVALID``), an unexpected
reboot (``SLURM_NODE_REBOOTED``), processes that would not die (``SLURM_KILL_TASK_FAILED``), a prolog/epilog
failure (``SLURM_PROLOG_FAILED``), a health program's drain (``SLURM_HEALTH_CHECK_FAILED``), DOWN for another
reason (``SLURM_NODE_DOWN``). A drain with a reason nobody's tool wrote (an operator's) is ``SLURM_NODE_DRAINED``
at ``warning``: out of service on purpose. This collection's own drains (reason ``ddp:`` / ``ddp-health:``) are
``info`` (their codes are the finding). :func:`log_problems` adds what only the logs say: munge key mismatch
(``Invalid credential``) told apart from clock skew (``Expired``/``Rewound credential``, with the offset the
ENCODED/DECODED lines give), munged not running, a slurm.conf that differs.

Sources: slurm.conf(5), sinfo(1), scontrol(1) of Slurm 22.05-24.05 (state names and suffixes); slurmctld's messages
(``node_mgr.c`` ``validate_node_specs``: "Node %s has low real_memory size", "gres/gpu count reported lower than
configured"), munge(7) and munged's decode errors; real outputs in tests/unit/fixtures/slurm (SOURCES.md there).
"""
from __future__ import annotations

import re
from datetime import datetime

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem


class SlurmTextError(ValueError):
    """The text is not the output the reader parses."""


# sinfo's compact states (sinfo(1) "NODE STATE CODES") -> the long name.
_SHORT_STATES = {
    "alloc": "allocated", "comp": "completing", "drain": "drained", "drng": "draining", "fail": "fail",
    "failg": "failing", "futr": "future", "idle": "idle", "inval": "inval", "maint": "maint", "mix": "mixed",
    "npc": "perfctrs", "plnd": "planned", "pow_dn": "power_down", "pow_up": "power_up", "resv": "reserved",
    "unk": "unknown", "boot": "rebooting", "down": "down", "blocked": "blocked",
}
# Suffixes of a sinfo state (sinfo(1)): what each says about the node.
_SUFFIXES = {
    "*": "not responding", "~": "powered off", "#": "powering up", "!": "pending power down",
    "%": "powering down", "$": "maintenance reservation", "@": "pending reboot", "^": "rebooting",
    "-": "planned by the backfill scheduler",
}
OWN_PREFIXES = ("ddp:", "ddp-health:")

# Reason texts Slurm (or a program it runs) writes, in order: (regex, code, cause, fix).
_REASONS = (
    (r"^Low RealMemory|low real_memory",
     "SLURM_NODE_LOW_RESOURCES", "the node has less memory than its NodeName line's RealMemory",
     "set RealMemory below what `slurmd -C` prints on the node (the slurm role writes slurmd -C's value less "
     "slurm_mem_reserve_mb), `scontrol reconfigure`, then `scontrol update NodeName={node} State=RESUME`"),
    (r"^Low CPUs|low cpu count|^Low socket\*core\*thread|low socket\*core\*thread|^Low TmpDisk|low tmp_disk|"
     r"configuration differs from hardware",
     "SLURM_NODE_LOW_RESOURCES", "the node has fewer CPUs/sockets/cores/threads (or less TmpDisk) than its "
     "NodeName line",
     "write the NodeName line from `slurmd -C` on the node (CPUs, Boards, SocketsPerBoard, CoresPerSocket, "
     "ThreadsPerCore; the slurm role does), `scontrol reconfigure`, then resume the node"),
    (r"gres/\S+ count (?:reported lower than configured|too low)|gres/gpu.*(?:lower|count changed)|"
     r"Count changed on node|can't stat gres\.conf file",
     "SLURM_GRES_MISMATCH", "slurmd found fewer GPUs (gres) than the node's Gres= in slurm.conf",
     "check `nvidia-smi -L` on the node (a GPU fell off the bus: Xid 79; or the driver is not loaded); fix "
     "gres.conf File= lines / Gres= count to the GPUs present, restart slurmd, then resume the node"),
    (r"^Not responding|not responding",
     "SLURM_NODE_NOT_RESPONDING", "slurmctld has not heard from slurmd within SlurmdTimeout",
     "on the node: `systemctl status slurmd munge`, the firewall (6817/6818 between controller and node), the "
     "clock, and slurmd.log; it returns by itself once slurmd registers again (ReturnToService), else resume it; "
     "one set DOWN while munge was stopped registers only when slurmd restarts (`systemctl restart slurmd`)"),
    (r"unexpectedly rebooted",
     "SLURM_NODE_REBOOTED", "the node rebooted without Slurm asking for it (ReturnToService=1 keeps it DOWN)",
     "find why it rebooted (`journalctl --list-boots`, kernel panic, BMC/IPMI SEL, power), run the health check, "
     "then `scontrol update NodeName={node} State=RESUME`"),
    (r"^Kill task failed|Kill task failed|not ending with signals",
     "SLURM_KILL_TASK_FAILED", "a job's processes did not die within UnkillableStepTimeout (stuck in I/O or a hung "
     "GPU/driver call)",
     "find the process in D state (`ps -eo stat,pid,cmd | grep ^D`), a hung NFS mount or a GPU in Xid; reboot the "
     "node if it cannot be freed, then resume it"),
    (r"[Pp]rolog (?:error|failed|failure)|[Ee]pilog (?:error|failed|failure)|batch job complete failure",
     "SLURM_PROLOG_FAILED", "the job prolog or epilog failed on the node (Slurm drains a node whose prolog or "
     "epilog exits non-zero)",
     "read slurmd.log on the node for the script's output (`grep -i -A3 prolog /var/log/slurm/slurmd.log`), fix "
     "the script or what it checks, then resume the node"),
    (r"^NHC[: ]|health[ _]?check|HealthCheck",
     "SLURM_HEALTH_CHECK_FAILED", "the node health program (HealthCheckProgram, e.g. NHC) drained the node",
     "run the health program by hand on the node to see the failing check, fix it; NHC resumes the nodes it "
     "drained once the check passes"),
    (r"INVALID_REG|[Ii]nvalid argument|node registration|different slurm\.conf|[Ii]nvalid (?:node|config)",
     "SLURM_NODE_INVALID", "the node's registration was refused (its hardware, GRES or slurm.conf do not match "
     "the controller's)",
     "compare the node's `slurmd -C` and gres with its NodeName line, use one slurm.conf everywhere, restart "
     "slurmd, then resume the node"),
)


def _state_name(token):
    word = token.strip().lower()
    return _SHORT_STATES.get(word, word)


def split_state(raw):
    """``drng@`` -> ``("draining", ["pending reboot"])``; ``IDLE+DRAIN`` -> ``("idle", ["drain"])``."""
    text = str(raw or "").strip()
    suffixes = []
    while text and text[-1] in _SUFFIXES:
        suffixes.insert(0, _SUFFIXES[text[-1]])
        text = text[:-1]
    parts = [p for p in text.split("+") if p]
    if not parts:
        return "", suffixes
    return _state_name(parts[0]), [p.lower() for p in parts[1:]] + suffixes


# ---------------------------------------------------------------------------------------------------- hostlists

def expand_hostlist(expr):
    """Slurm host list -> names: ``c[001-003,007]`` -> c001 c002 c003 c007; ``a[1-2],b1`` -> a1 a2 b1.

    Zero padding is kept as written. A list that is not a host list is returned as one name.
    :raises SlurmTextError: a range whose end is below its start.
    """
    out = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", str(expr or "").strip()):
        out.extend(_expand_one(item.strip()))
    return [n for n in out if n]


def _expand_one(item):
    match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", item)
    if not match:
        return [item]
    head, body, tail = match.groups()
    names = []
    for part in body.split(","):
        bounds = part.split("-", 1)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            low, high = int(bounds[0]), int(bounds[1])
            if high < low:
                raise SlurmTextError("host list range %s ends below its start" % part)
            width = len(bounds[0])
            names.extend("%s%0*d" % (head, width, n) for n in range(low, high + 1))
        else:
            names.append(head + part)
    return [n + rest for n in names for rest in _expand_one(tail)] if "[" in tail else [n + tail for n in names]


# ---------------------------------------------------------------------------------------------------- readers

_REASON_TAIL = re.compile(r"^(?P<text>.*?)\s*\[(?P<user>[^@\]\s]+)@(?P<time>[^\]]+)\]\s*$")
_KEY_SPLIT = re.compile(r"\s+(?=[A-Z][A-Za-z0-9_]*=)")
_TO_EOL = ("OS", "Reason", "Comment", "Extra")


def split_reason(text):
    """``Low RealMemory [slurm@2024-12-19T11:03:34]`` -> ``("Low RealMemory", "slurm", "2024-12-19T11:03:34")``."""
    text = (text or "").strip()
    match = _REASON_TAIL.match(text)
    if match:
        return match.group("text").strip(), match.group("user"), match.group("time").strip()
    return text, None, None


def _pairs(line):
    """``Key=Value`` pairs of one line; OS=/Reason=/Comment= take the rest of the line."""
    pairs = {}
    rest = line.strip()
    for key in _TO_EOL:
        match = re.search(r"(?:^|\s)%s=(.*)$" % key, rest)
        if match:
            tail = match.group(1)
            # In the one-line form (-o) other keys follow OS=; a Reason runs to the end in every form.
            if key != "Reason":
                more = _KEY_SPLIT.split(tail, maxsplit=1)
                tail, after = more[0], (more[1] if len(more) > 1 else "")
            else:
                after = ""
            pairs[key] = tail.strip()
            rest = (rest[:match.start()] + " " + after).strip()
    for item in _KEY_SPLIT.split(rest):
        if "=" in item:
            key, value = item.split("=", 1)
            pairs[key.strip()] = value.strip()
    return pairs


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def tres_gpus(tres):
    """GPUs in a TRES or Gres string: ``cpu=8,mem=1M,gres/gpu=4`` -> 4; ``gpu:a100:8(S:0-1)`` -> 8; none -> 0."""
    text = str(tres or "")
    total = 0
    found = False
    for match in re.finditer(r"gres/gpu(?::[^=,]+)?=(\d+)", text):
        if ":" not in match.group(0).split("=")[0].replace("gres/gpu", ""):
            total += int(match.group(1))
            found = True
    if found:
        return total
    for item in re.split(r",(?![^(]*\))", text):
        match = re.match(r"^gpu(?::[^:(]+)?:(\d+)", item.strip())
        if match:
            total += int(match.group(1))
    return total


def parse_scontrol_nodes(text):
    """``scontrol show node`` (or ``-o``) -> ``{node: facts}``.

    facts: ``state`` (base state, lower case), ``flags`` (``drain``, ``not_responding``, ``invalid_reg`` ...),
    ``raw`` (the State value), ``drain`` (bool), ``responding``, ``reason``/``reason_user``/``reason_time``,
    ``gres``, ``cfg_tres``, ``alloc_tres``, ``gres_gpus`` (GPUs the node is configured with), ``real_memory`` and
    ``free_mem`` (MiB), ``cpus`` (CPUTot), ``sockets``, ``cores_per_socket``, ``threads_per_core``, ``version``,
    ``boot_time``, ``slurmd_start``, ``partitions`` (list), ``addr``.

    :raises SlurmTextError: text without any ``NodeName=`` (e.g. ``Node n9 not found``).
    """
    nodes = {}
    current = None
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        pairs = _pairs(line)
        if "NodeName" in pairs:
            current = {}
            nodes[pairs["NodeName"]] = current
        if current is None:
            continue
        current.update(pairs)
    if not nodes:
        raise SlurmTextError("not `scontrol show node` output: no NodeName= (first line: %r)"
                             % ((text or "").strip().splitlines() or [""])[0][:100])
    return dict((name, _node_facts(name, raw)) for name, raw in nodes.items())


def _node_facts(name, raw):
    state_raw = raw.get("State", "")
    base, flags = split_state(state_raw)
    flags = [f.replace(" ", "_") for f in flags]
    reason, user, when = split_reason(raw.get("Reason"))
    facts = {
        "name": name, "raw": state_raw, "state": base, "flags": flags,
        "drain": "drain" in flags or base in ("drained", "draining"),
        "responding": "not_responding" not in flags and not state_raw.endswith("*"),
        "reason": reason, "reason_user": user, "reason_time": when,
        "gres": raw.get("Gres"), "cfg_tres": raw.get("CfgTRES"), "alloc_tres": raw.get("AllocTRES"),
        "gres_gpus": tres_gpus(raw.get("Gres")) or tres_gpus(raw.get("CfgTRES")),
        "real_memory": _int(raw.get("RealMemory")), "free_mem": _int(raw.get("FreeMem")),
        "cpus": _int(raw.get("CPUTot")), "sockets": _int(raw.get("Sockets")),
        "cores_per_socket": _int(raw.get("CoresPerSocket")), "threads_per_core": _int(raw.get("ThreadsPerCore")),
        "version": raw.get("Version"), "boot_time": raw.get("BootTime"), "slurmd_start": raw.get("SlurmdStartTime"),
        "partitions": [p for p in (raw.get("Partitions") or "").split(",") if p],
        "addr": raw.get("NodeAddr"), "source": "scontrol",
    }
    return facts


_HEADER_WORDS = ("NODELIST", "HOSTNAMES", "NODE_LIST")


def parse_sinfo_table(text):
    """Any sinfo table with a header line -> ``{node: facts}`` (one entry per node, partitions merged).

    facts: ``state`` (long name without suffix, e.g. ``drained``), ``raw``, ``flags`` (what the suffixes say:
    ``not responding`` ...), ``responding``, ``drain``, ``reason``, ``reason_user``, ``reason_time`` (``-R``),
    ``partitions``, ``source`` (``sinfo``). Rows of ``-R`` carry no state; their nodes get ``state`` None.
    A ``-R`` listing without a header (``Kill task failed root 2024-01-25T15:12:23 ip-10-0-1-23``) is read too.

    :raises SlurmTextError: no header line naming NODELIST/HOSTNAMES, and no header-less ``-R`` row.
    """
    lines = [line.rstrip() for line in (text or "").splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines)
                      if any(w in line.split() for w in _HEADER_WORDS)), None)
    if header_at is None:
        rows = [headerless_reason_row(line) for line in lines]
        if rows and all(rows):
            header, body = ["REASON", "USER", "TIMESTAMP", "NODELIST"], lines
        else:
            raise SlurmTextError("not a sinfo table: no header line with NODELIST or HOSTNAMES (first line: %r)"
                                 % (lines[0][:100] if lines else ""))
    else:
        header, body = lines[header_at].split(), lines[header_at + 1:]
    nodes = {}
    for line in body:
        row = _row(header, line.split())
        if row is None:
            continue
        names = expand_hostlist(row.get("NODELIST") or row.get("HOSTNAMES") or row.get("NODE_LIST") or "")
        raw_state = row.get("STATE")
        base, flags = split_state(raw_state) if raw_state else (None, [])
        reason, user, when = split_reason(row.get("REASON"))
        if reason in ("(null)", "none", "None"):
            reason = ""
        for name in names:
            entry = nodes.setdefault(name, {
                "name": name, "state": base, "raw": raw_state, "flags": flags, "responding": "not responding"
                not in flags, "drain": (base or "").startswith("drain"), "reason": reason, "reason_user":
                user or row.get("USER"), "reason_time": when or row.get("TIMESTAMP"), "partitions": [],
                "source": "sinfo"})
            if base and not entry["state"]:
                entry.update(state=base, raw=raw_state, flags=flags, responding="not responding" not in flags,
                             drain=base.startswith("drain"))
            if reason and not entry["reason"]:
                entry["reason"] = reason
            partition = row.get("PARTITION")
            if partition and partition.rstrip("*") not in entry["partitions"]:
                entry["partitions"].append(partition.rstrip("*"))
    return nodes


def headerless_reason_row(line):
    """The match of a ``sinfo -R`` row without its header (``Kill task failed root 2024-01-25T15:12:23 n1``), or None."""
    match = re.match(r"^(?P<reason>.+?)\s+(?P<user>[a-z_][\w.-]*)\s+(?P<time>\d{4}-\d\d-\d\dT[\d:]+)\s+(?P<nodes>\S+)$",
                     line.strip())
    return match


def _row(header, tokens):
    """Map a row's tokens onto the header; a REASON column takes the extra tokens (it may hold spaces)."""
    if not tokens:
        return None
    n = len(header)
    if len(tokens) == n:
        return dict(zip(header, tokens))
    if "REASON" in header and len(tokens) > n:
        at = header.index("REASON")
        after = n - at - 1
        right = tokens[len(tokens) - after:] if after else []
        row = dict(zip(header[:at], tokens[:at]))
        row["REASON"] = " ".join(tokens[at:len(tokens) - after])
        row.update(zip(header[at + 1:], right))
        return row
    if len(tokens) < n and header[-1] == "REASON":
        return dict(zip(header, tokens))
    return None


def parse_node_states(text):
    """Node states from any of: ``scontrol show node``, a sinfo table (default, ``-N``, ``-l``, ``-R``), or
    ``sinfo -h -N -o '%N|%T|%E'`` (what the playbooks run). Returns ``{node: facts}`` as the readers do; the
    ``|`` form gives ``state``, ``raw``, ``responding``, ``drain``, ``reason``.

    :raises SlurmTextError: none of these formats.
    """
    body = (text or "").strip()
    if re.search(r"(?:^|\s)NodeName=\S", body) and re.search(r"(?:^|\s)State=\S", body):
        return parse_scontrol_nodes(body)
    lines = [line for line in body.splitlines() if line.strip()]
    if lines and all(line.count("|") >= 2 for line in lines):
        out = {}
        for line in lines:
            name, raw, reason = (f.strip() for f in line.split("|", 2))
            base, flags = split_state(raw)
            reason = "" if reason == "none" else reason
            text_, user, when = split_reason(reason)
            out[name] = {"name": name, "state": base, "raw": raw, "flags": flags,
                         "responding": "not responding" not in flags, "drain": base.startswith("drain")
                         or "drain" in flags, "reason": text_, "reason_user": user, "reason_time": when,
                         "partitions": [], "source": "sinfo"}
        return out
    return parse_sinfo_table(body)


# ---------------------------------------------------------------------------------------------------- logs

_LOG_PREFIX = re.compile(
    r"^(?:\[(?P<ts>[^\]]+)\]\s*|(?P<syslog>\w{3}\s+\d+\s+[\d:]+)\s+\S+\s+(?P<daemon>slurm\w*|munged?)"
    r"(?:\[\d+\])?:\s*)?(?:(?P<daemon2>slurmctld|slurmd|slurmstepd):\s*)?(?P<msg>.*)$")
_LOG_RULES = (
    ("low_memory", r"Node (?P<node>\S+) has low real_memory size \((?P<have>\d+) < (?P<want>\d+)\)"),
    ("low_cpus", r"Node (?P<node>\S+) has low (?P<what>socket\*core\*thread|cpu) count \((?P<have>\d+) < (?P<want>\d+)\)"),
    ("low_tmp", r"Node (?P<node>\S+) has low tmp_disk size \((?P<have>\d+) < (?P<want>\d+)\)"),
    ("gres_low", r"(?:node (?P<node0>\S+) state to \w+ with reason:\s*)?gres/(?P<gres>\w+) count reported lower than "
                 r"configured \((?P<have>\d+) < (?P<want>\d+)\)"),
    ("gres_changed", r"gres/(?P<gres>\w+): Count changed on node (?P<node>\S+) \((?P<want>\d+) != (?P<have>\d+)\)"),
    ("gres_file", r"can't stat gres\.conf file (?P<file>\S+)"),
    ("set_state", r"Setting node (?P<node>\S+) state to (?P<state>[A-Z]+)(?: with reason:\s*(?P<reason>.*))?"),
    ("drain", r"drain_nodes: node (?P<node>\S+) state set to (?P<state>[A-Z]+)"),
    ("registration", r"_slurm_rpc_node_registration node=(?P<node>[^:\s]+): (?P<error>.+)"),
    ("not_responding", r"Nodes? (?P<node>\S+) not responding"),
    ("responding", r"Node (?P<node>\S+) now responding"),
    ("rebooted", r"Node (?P<node>\S+) (?:unexpectedly rebooted|rebooted unexpectedly)"),
    ("munge_invalid", r"Munge decode failed: (?P<what>Invalid credential|Unauthorized credential.*)"),
    ("munge_clock", r"Munge decode failed: (?P<what>Expired credential|Rewound credential)"),
    ("munge_encoded", r"(?:_print_cred: )?ENCODED: (?P<when>.+?)\s*$"),
    ("munge_decoded", r"(?:_print_cred: )?DECODED: (?P<when>.+?)\s*$"),
    ("munge_down", r"Munge (?:encode|decode) failed: (?P<what>Failed to (?:access|connect to) \S+.*?)"
                   r"(?: \(retrying.*)?$"),
    ("auth_error", r"(?P<rpc>[A-Z_]+) has authentication error: (?P<what>.+)"),
    ("conf_differs", r"Node (?P<node>\S+) appears to have a different slurm\.conf"),
    ("config_differs", r"Node configuration differs from hardware: (?P<detail>.+)"),
    ("health_check", r"health_check failed: rc:(?P<rc>\d+) output:(?P<output>.*)"),
    ("prolog", r"(?P<which>[Pp]rolog|[Ee]pilog) (?:launch )?(?:failed|failure|error)(?P<detail>.*)"),
    ("unable_to_register", r"Unable to register: (?P<what>.+)"),
    ("kill_failed", r"(?:Kill task failed|STEPD TERMINATED ON (?P<node>\S+) .*NOT ENDING WITH SIGNALS)"),
)
_LOG_RES = tuple((name, re.compile(rx)) for name, rx in _LOG_RULES)


def parse_slurm_log(text):
    """slurmctld / slurmd log lines -> events ``[{kind, node, line, ...named groups}]`` in file order.

    Lines are recognised with or without the ``[timestamp]`` prefix, in syslog/journal form (``May 24 07:06:45 host
    slurmctld[15918]: error: ...``) and with the ``slurmctld: `` prefix of a foreground daemon. Lines no rule knows
    are skipped. Each event has ``kind`` (see :data:`_LOG_RULES`), ``node`` (None when the line names none),
    ``time`` (the line's timestamp text, or None) and ``line``.
    """
    events = []
    for raw in (text or "").splitlines():
        match = _LOG_PREFIX.match(raw.strip())
        msg = match.group("msg") if match else raw.strip()
        stamp = (match.group("ts") or match.group("syslog")) if match else None
        for kind, rx in _LOG_RES:
            found = rx.search(msg)
            if not found:
                continue
            event = dict((k, v) for k, v in found.groupdict().items() if v is not None)
            node = event.pop("node", None) or event.pop("node0", None)
            event.update(kind=kind, node=node, time=stamp, line=raw.strip())
            events.append(event)
            break
    return events


_CTIME_FORMATS = ("%a %b %d %H:%M:%S %Y", "%Y-%m-%dT%H:%M:%S")


def _ctime(text):
    value = re.sub(r"\s+", " ", str(text or "").strip())
    value = re.sub(r"\s*\(\d+\)$", "", value)
    for fmt in _CTIME_FORMATS:
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None


# ---------------------------------------------------------------------------------------------------- diagnosis

def classify_reason(reason):
    """``(code, cause, fix)`` for a reason Slurm or a program it runs writes, or None (an operator's text)."""
    for pattern, code, cause, fix in _REASONS:
        if re.search(pattern, reason or ""):
            return code, cause, fix
    return None


def _who(facts):
    if facts.get("reason_user"):
        return " (set by %s%s)" % (facts["reason_user"], " at %s" % facts["reason_time"]
                                   if facts.get("reason_time") else "")
    return ""


def node_problems(states, nodes=None, gpus=None):
    """Problems from Slurm's node states (any reader's output of this file).

    :param states: ``{node: facts}``.
    :param nodes: the nodes to judge (default: all in ``states``); one missing from ``states`` is not judged.
    :param gpus: ``{node: GPUs the node has}`` (nvidia-smi count) where known: a node whose configured ``Gres``
        GPUs differ from it is ``SLURM_GRES_MISMATCH`` even before slurmd reports it.
    :returns: problems (diagnosis.problem shape), subject ``slurm node <name>``.
    """
    out = []
    for name in sorted(nodes if nodes is not None else states):
        facts = states.get(name)
        if facts is None:
            continue
        out.extend(_one_node(name, facts, (gpus or {}).get(name)))
    return out


def _one_node(name, facts, have_gpus):
    subject = "slurm node %s" % name
    state = facts.get("state") or ""
    flags = facts.get("flags") or []
    reason = facts.get("reason") or ""
    raw = facts.get("raw") or state or "listed with a reason"
    out = []
    if reason.startswith(OWN_PREFIXES):
        out.append(problem("SLURM_NODE_DRAINED", "info", subject,
                           "%s, drained by this collection: %s%s" % (raw, reason, _who(facts)),
                           "fix the codes named (docs/troubleshooting.md); the next health run resumes it"))
        return out
    known = classify_reason(reason)
    bad_state = state in ("down", "fail", "failing", "inval", "unknown") or "invalid_reg" in flags \
        or "invalid" in flags or not facts.get("responding", True)
    if known:
        code, cause, fix = known
        if code == "SLURM_NODE_NOT_RESPONDING" and facts.get("responding", True) and not state.startswith("down"):
            code = None  # an old reason on a node that answers again
        if code:
            out.append(problem(code, "error", subject, "%s: %s; Slurm's reason: %r%s" % (
                raw, cause, reason, _who(facts)), fix.replace("{node}", name)))
            return out
    if not facts.get("responding", True) or "not_responding" in flags:
        out.append(problem(
            "SLURM_NODE_NOT_RESPONDING", "error", subject,
            "%s: slurmd does not answer slurmctld%s" % (raw, "; reason %r" % reason if reason else ""),
            "on the node: `systemctl status slurmd munge`, the firewall (6817/6818), the clock and slurmd.log"))
    elif state == "inval" or "invalid_reg" in flags or "invalid" in flags:
        out.append(problem("SLURM_NODE_INVALID", "error", subject,
                           "%s: the node's registration was refused%s" % (raw, "; reason %r" % reason if reason else ""),
                           "compare `slurmd -C` and gres with the NodeName line, restart slurmd, resume the node"))
    elif bad_state:
        out.append(problem("SLURM_NODE_DOWN", "error", subject,
                           "%s%s%s" % (raw, "; reason %r" % reason if reason else " without a reason", _who(facts)),
                           "read slurmctld.log for the node; fix what it names, then `scontrol update NodeName=%s "
                           "State=RESUME`" % name))
    elif facts.get("drain") and not reason:
        out.append(problem("SLURM_NODE_DRAINED", "error", subject,
                           "%s: out of service; this output does not show why (Slurm sets a reason on every drain)" % raw,
                           "`sinfo -R -n %s` or `scontrol show node %s` shows the reason and who set it; "
                           "`ddp-health --diagnose` reads either" % (name, name)))
    elif facts.get("drain"):
        out.append(problem("SLURM_NODE_DRAINED", "warning", subject,
                           "%s by an operator%s: %r" % (raw, _who(facts), reason or "(no reason)"),
                           "out of service on purpose: ask whoever drained it; `scontrol update NodeName=%s "
                           "State=RESUME` when the work is done" % name))
    gres_count, tres_count = tres_gpus(facts.get("gres")), tres_gpus(facts.get("cfg_tres"))
    # CfgTRES lists gres/gpu only where AccountingStorageTRES tracks it: without it there is nothing to compare.
    if facts.get("gres") and "gres/gpu" in (facts.get("cfg_tres") or "") and gres_count != tres_count:
        out.append(problem(
            "SLURM_GRES_MISMATCH", "warning", subject,
            "the node's Gres (%s: %d GPU(s)) and its CfgTRES (%s: %d) disagree" % (
                facts.get("gres"), gres_count, facts.get("cfg_tres") or "none", tres_count),
            "keep Gres= in slurm.conf, gres.conf and the GPUs present in step (the slurm role writes them from "
            "nvidia-smi), then `scontrol reconfigure` and restart slurmd on the node"))
    configured = facts.get("gres_gpus")
    if have_gpus is not None and configured is not None and facts.get("gres") is not None \
            and int(have_gpus) < configured:
        out.append(problem(
            "SLURM_GRES_MISMATCH", "error", subject,
            "slurm.conf gives the node %d GPU(s) (Gres=%s) but it has %d" % (configured, facts.get("gres"), have_gpus),
            "check `nvidia-smi -L` (a GPU that fell off the bus: Xid 79), then make Gres= and gres.conf match the "
            "GPUs present (the slurm role writes them from nvidia-smi) and restart slurmd"))
    return out


def log_problems(events, clock_offsets=None, max_offset_s=None):
    """Problems from :func:`parse_slurm_log` events (one per kind and node), and from clock offsets.

    Munge: ``Invalid credential`` means the two munged hold different keys (or one was not restarted after the key
    changed): ``SLURM_MUNGE_KEY_MISMATCH``. ``Expired``/``Rewound credential`` mean the clocks disagree (a
    credential is valid for its TTL, 300 s by default; munged refuses one from the future as rewound):
    ``SLURM_MUNGE_CLOCK_SKEW``, with the offset of the ENCODED/DECODED lines that follow when the log has them.
    ``Failed to access .../munge.socket.2``: munged is not running (``SLURM_MUNGE_DOWN``).

    :param clock_offsets: ``{node: seconds the node's clock is ahead of the controller's}`` where read.
    :param max_offset_s: offset above which a node is ``SLURM_MUNGE_CLOCK_SKEW`` (default :data:`MAX_CLOCK_OFFSET_S`).
    """
    out = []
    seen = set()

    def add(key, *args):
        if key not in seen:
            seen.add(key)
            out.append(problem(*args))

    for index, ev in enumerate(events or []):
        node = ev.get("node")
        subject = "slurm node %s" % node if node else "slurm"
        found = _node_event_problem(ev, index, events, subject) or _munge_event_problem(ev, index, events, subject) \
            or _service_event_problem(ev, subject)
        if found:
            add(*found)
    limit = MAX_CLOCK_OFFSET_S if max_offset_s is None else float(max_offset_s)
    for node in sorted(clock_offsets or {}):
        offset = clock_offsets[node]
        if offset is not None and abs(float(offset)) > limit:
            add(("clock", node), "SLURM_MUNGE_CLOCK_SKEW", "error", "slurm node %s" % node,
                "the node's clock is %+.1f s off (its offset to NTP time, or to the controller's clock; more than %g "
                "s): munge credentials between it and the others read as expired or rewound" % (float(offset), limit),
                "synchronise the clocks (chrony/ntpd on every node, `chronyc tracking`)")
    return out


def _node_event_problem(ev, index, events, subject):
    """The problem of a slurmctld/slurmd event about a node: resources, GRES, state, registration, reboot.

    :returns: ``(key, code, severity, subject, message, fix)`` for :func:`log_problems`, or None when the event is
        not one of these kinds (or not a finding).
    """
    kind, node = ev["kind"], ev.get("node")
    if kind == "low_memory":
        return ((kind, node), "SLURM_NODE_LOW_RESOURCES", "error", subject,
                "slurmctld: the node has %s MiB of memory, its NodeName line says RealMemory=%s: Slurm drains it"
                % (ev["have"], ev["want"]),
                "set RealMemory at or below %s (from `slurmd -C`, less a reserve), `scontrol reconfigure`, then "
                "`scontrol update NodeName=%s State=RESUME`" % (ev["have"], node))
    if kind in ("low_cpus", "low_tmp"):
        return ((kind, node), "SLURM_NODE_LOW_RESOURCES", "error", subject,
                "slurmctld: the node has a %s of %s, configured %s: Slurm drains it"
                % ("%s count" % ev.get("what", "cpu") if kind == "low_cpus" else "TmpDisk", ev["have"], ev["want"]),
                "write the NodeName line from `slurmd -C` on the node, `scontrol reconfigure`, resume the node")
    if kind in ("gres_low", "gres_changed", "gres_file"):
        what = ("%s %s, configured %s" % (ev.get("gres"), ev.get("have"), ev.get("want"))
                if kind != "gres_file" else "gres.conf names %s, which does not exist" % ev.get("file"))
        return (("gres", node), "SLURM_GRES_MISMATCH", "error", subject,
                "Slurm counts fewer GPUs than configured (%s): the node is drained/INVAL" % what,
                "check `nvidia-smi -L` and /dev/nvidia*; make gres.conf File= lines and Gres= match the GPUs "
                "present, restart slurmd, then resume the node")
    if kind == "set_state" and ev.get("reason"):
        known = classify_reason(ev["reason"])
        if known:
            return ((known[0], node), known[0], "error", subject,
                    "slurmctld set the node %s: %s (%r)" % (ev["state"], known[1], ev["reason"]),
                    known[2].replace("{node}", node or "<node>"))
    if kind == "registration":
        return (("registration", node), "SLURM_NODE_INVALID", "error", subject,
                "slurmctld refused the node's registration: %s" % ev["error"],
                "the lines before it in slurmctld.log say why (low memory/CPUs, GRES); fix the NodeName line or "
                "the node, restart slurmd")
    if kind == "not_responding" and not any(
            e["kind"] == "responding" and e.get("node") == node for e in events[index + 1:]):
        return ((kind, node), "SLURM_NODE_NOT_RESPONDING", "error", subject,
                "slurmctld: %s not responding" % node,
                "on the node: `systemctl status slurmd munge`, the firewall (6817/6818), the clock, slurmd.log")
    if kind == "unable_to_register":
        return ((kind, node), "SLURM_NODE_NOT_RESPONDING", "error", subject,
                "slurmd could not register with slurmctld: %s" % ev["what"],
                "from the node: slurmctld's address and port 6817 reachable (firewall), the same munge key and a clock "
                "in sync (`munge -n | ssh <controller> unmunge`), the same slurm.conf")
    if kind == "rebooted":
        return ((kind, node), "SLURM_NODE_REBOOTED", "error", subject, "slurmctld: the node rebooted unexpectedly",
                "find why (`journalctl --list-boots`, kernel panic, power), check its health, resume it")
    return None


def _munge_event_problem(ev, index, events, subject):
    """The problem of a munge or authentication event: key mismatch, clock skew, munged down.

    :returns: ``(key, code, severity, subject, message, fix)`` for :func:`log_problems`, or None when the event is
        not one of these kinds (or not a finding).
    """
    kind, node = ev["kind"], ev.get("node")
    if kind == "munge_invalid":
        return ((kind, node), "SLURM_MUNGE_KEY_MISMATCH", "error", subject,
                "munge: %s: the sender's munged uses another key than this one (or was not restarted after the "
                "key changed); not a clock problem" % ev["what"],
                "copy the controller's /etc/munge/munge.key to every node (owner munge, mode 0400), restart munge "
                "everywhere (munged reads the key only at start), check `munge -n | ssh <node> unmunge`")
    if kind == "munge_clock":
        offset = _munge_offset(events, index)
        return ((kind, node), "SLURM_MUNGE_CLOCK_SKEW", "error", subject,
                "munge: %s: the clocks of the two hosts disagree%s (the key is fine)" % (
                    ev["what"], "; the sending host's clock is %+.0f s off this host's (ENCODED vs DECODED)" % offset
                    if offset is not None else ""),
                "synchronise the clocks (chrony/ntpd on every node, `chronyc tracking`), then restart slurmd; "
                "compare `date +%s` on the nodes")
    if kind == "munge_down":
        return ((kind, node), "SLURM_MUNGE_DOWN", "error", subject,
                "munge: %s: munged is not running on this host" % ev["what"],
                "`systemctl enable --now munge`; if it does not start, `journalctl -u munge` (key owner munge, "
                "mode 0400, /etc/munge mode 0700)")
    if kind == "auth_error" and not any(e["kind"].startswith("munge") for e in events):
        return ((kind, node), "SLURM_MUNGE_KEY_MISMATCH", "error", subject,
                "slurm: %s has authentication error: %s" % (ev["rpc"], ev["what"]),
                "check `munge -n | ssh <node> unmunge` both ways: invalid credential = key, expired/rewound = clock")
    return None


def _service_event_problem(ev, subject):
    """The problem of a configuration, health check, prolog or kill event.

    :returns: ``(key, code, severity, subject, message, fix)`` for :func:`log_problems`, or None when the event is
        not one of these kinds (or not a finding).
    """
    kind, node = ev["kind"], ev.get("node")
    if kind == "conf_differs":
        return ((kind, node), "SLURM_CONF_MISMATCH", "error", subject,
                "slurmctld: the node runs with a different slurm.conf",
                "install one slurm.conf on every node (re-run the scheduler stage), then `scontrol reconfigure`")
    if kind == "config_differs":
        return ((kind, node), "SLURM_NODE_LOW_RESOURCES", "warning", subject,
                "slurmd: node configuration differs from hardware: %s" % ev["detail"],
                "write the NodeName line from `slurmd -C` (the slurm role does), `scontrol reconfigure`")
    if kind == "health_check":
        return ((kind, node), "SLURM_HEALTH_CHECK_FAILED", "error", subject,
                "slurmd: HealthCheckProgram exited %s: %s" % (ev["rc"], ev["output"].strip() or "(no output)"),
                "run the program by hand on the node; fix the check it names (ddp-health --json prints every fix)")
    if kind == "prolog":
        return ((kind, node), "SLURM_PROLOG_FAILED", "error", subject,
                "slurm: %s failed%s" % (ev["which"], ev.get("detail", "").rstrip()),
                "read the script's output in slurmd.log on the node, fix it, resume the node")
    if kind == "kill_failed":
        return ((kind, node), "SLURM_KILL_TASK_FAILED", "error", subject,
                "slurm: a job step did not end with signals (Kill task failed)",
                "find the process in D state on the node, the hung mount or GPU; reboot if needed, resume the node")
    return None


_CHRONY_SYSTEM = re.compile(r"^System time\s*:\s*(?P<value>[0-9.]+) seconds (?P<dir>fast|slow) of NTP time", re.M)
_CHRONY_LEAP = re.compile(r"^Leap status\s*:\s*(?P<value>.+?)\s*$", re.M)


def parse_chronyc_tracking(text):
    """``chronyc tracking`` -> ``{"offset_s": seconds the clock is ahead of NTP time (negative: behind) or None,
    "synchronised": bool or None}`` (chronyc(1): "System time: 0.000012 seconds slow of NTP time";
    "Leap status: Not synchronised")."""
    out = {"offset_s": None, "synchronised": None}
    match = _CHRONY_SYSTEM.search(text or "")
    if match:
        value = float(match.group("value"))
        out["offset_s"] = value if match.group("dir") == "fast" else -value
    match = _CHRONY_LEAP.search(text or "")
    if match:
        out["synchronised"] = match.group("value").lower() != "not synchronised"
    return out


def clock_problems(tracking, max_offset_s=None):
    """``SLURM_MUNGE_CLOCK_SKEW`` for nodes whose clock is off (each node's own offset to NTP time, from
    :func:`parse_chronyc_tracking`; two nodes within the limit of true time are within twice of each other) and
    ``SLURM_CLOCK_UNSYNCED`` (warning) for a node whose NTP client is not synchronised.

    :param tracking: ``{node: parse_chronyc_tracking(...)}`` (nodes without chrony left out).
    """
    offsets = dict((n, t.get("offset_s")) for n, t in (tracking or {}).items() if t.get("synchronised") is not False)
    out = log_problems([], offsets, max_offset_s)
    for node in sorted(tracking or {}):
        if (tracking[node] or {}).get("synchronised") is False:
            out.append(problem(
                "SLURM_CLOCK_UNSYNCED", "warning", "slurm node %s" % node,
                "the node's clock is not synchronised (chronyc tracking: Leap status Not synchronised): it drifts, and "
                "munge refuses credentials once it is minutes off",
                "check `chronyc sources` (a reachable NTP server, UDP 123 open), `systemctl enable --now chronyd`"))
    return out


# Our threshold: NTP keeps nodes within milliseconds; munge's own decode allows only a small skew for a credential
# made "in the future" (rewound), and its TTL is 300 s for the past (expired). 10 s is far from both noise and TTL.
MAX_CLOCK_OFFSET_S = 10.0


def _munge_offset(events, index):
    """Seconds between the ENCODED and DECODED lines that follow a clock error (decoded - encoded), or None."""
    enc = dec = None
    for ev in (events or [])[index + 1:index + 4]:
        if ev["kind"] == "munge_encoded":
            enc = _ctime(ev["when"])
        elif ev["kind"] == "munge_decoded":
            dec = _ctime(ev["when"])
    if enc and dec:
        return (enc - dec).total_seconds()
    return None
