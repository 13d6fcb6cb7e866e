# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of the slurm role: node definitions, accounts, node states, drains.

No I/O here: the role runs Slurm's own commands (``slurmd -C``, ``sinfo``, ``scontrol``, ``getent``)
and hands their text to these functions (through the filters in ``plugins/filter/slurm.py``).
Sources for the formats: slurm.conf(5), gres.conf(5), sinfo(1) and scontrol(1) of Slurm 22.05.8
(Debian 12); the fixtures in ``tests/unit/fixtures/slurm/`` are outputs captured on real nodes.
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.system.accounts import parse_group, parse_listing, parse_passwd
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.slurm.diag import SlurmTextError, classify_reason, parse_node_states

# The reason prefix of drains this collection sets; only those are ever resumed by it.
DRAIN_PREFIX = "ddp:"

# Hardware keys of `slurmd -C` that go into a NodeName line (slurm.conf(5), "NODE CONFIGURATION").
_HARDWARE_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")

# Words of an NVIDIA product name that say nothing about the GPU model.
_GPU_NAME_NOISE = {"nvidia", "tesla", "geforce", "quadro", "rtx"}

# Long sinfo states (%T) of nodes that cannot take jobs, besides drains and "*" (not responding).
_UNAVAILABLE_STATES = ("down", "fail", "unk", "inval", "future", "maint")

# Container kinds that cannot delegate cgroups to slurmd (ansible_facts virtualization_type).
CONTAINER_TYPES = ("podman", "docker", "container", "containerd", "lxc", "openvz", "systemd-nspawn", "wsl")


class SlurmParseError(ValueError):
    """Raised when a command's output is not in the format the parser reads."""


def parse_slurmd_c(text):
    """Parse ``slurmd -C`` (slurmd(8): print the node's hardware as a slurm.conf line).

    :param text: the command's stdout, e.g. ``NodeName=n1 CPUs=2 Boards=1 SocketsPerBoard=1
        CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105`` and an ``UpTime=`` line.
    :returns: dict with ``NodeName`` (str) and the hardware keys as ints (RealMemory in MiB).
    :raises SlurmParseError: when the NodeName line or a hardware key is missing.
    """
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("NodeName="):
            continue
        pairs = dict(item.split("=", 1) for item in line.split() if "=" in item)
        missing = [k for k in _HARDWARE_KEYS if k not in pairs]
        if missing:
            raise SlurmParseError("slurmd -C: the NodeName line lacks %s: %r" % (", ".join(missing), line))
        try:
            out = {k: int(pairs[k]) for k in _HARDWARE_KEYS}
        except ValueError:
            raise SlurmParseError("slurmd -C: a hardware value is not a number: %r" % line)
        out["NodeName"] = pairs["NodeName"]
        return out
    raise SlurmParseError("slurmd -C printed no NodeName= line (is this slurmd's output?): %r" % (text or "")[:200])


def gres_type(gpu_name):
    """The gres Type of a GPU from its product name, lower case (``a100``, ``h100``, ``v100``).

    ``NVIDIA A100-SXM4-80GB`` -> ``a100``; ``NVIDIA H100 80GB HBM3`` -> ``h100``;
    ``Tesla V100-SXM2-32GB`` -> ``v100``; ``NVIDIA GeForce RTX 4090`` -> ``4090``. Empty or unknown
    names give ``gpu``. Slurm only needs the same string in slurm.conf ``Gres=`` and gres.conf ``Type=``.
    """
    words = [w for w in re.split(r"[\s]+", str(gpu_name or "").strip()) if w]
    words = [w for w in words if w.lower() not in _GPU_NAME_NOISE]
    if not words:
        return "gpu"
    token = re.split(r"[-_]", words[0])[0].lower()
    token = re.sub(r"[^a-z0-9.]", "", token)
    return token or "gpu"


def node_entry(slurmd_c, gpus=None, mem_reserve_mb=1024, gpu_type=None, addr=None):
    """One node of slurm.conf and gres.conf from its ``slurmd -C`` and its GPUs.

    :param slurmd_c: the dict of :func:`parse_slurmd_c`.
    :param gpus: list of ``{"index": int, "name": str}`` (``nvidia-smi --query-gpu=index,name``); [] or None: no GPU.
    :param mem_reserve_mb: MiB kept back from RealMemory for the OS and the daemons (>= 0).
    :param gpu_type: the gres Type to use instead of the one derived from the names.
    :param addr: NodeAddr (an address the controller reaches it on); None or '' leaves it out.
    :returns: dict with ``name``, ``line`` (the slurm.conf NodeName line), ``gres`` (gres.conf lines),
        ``gpus`` (count), ``gres_type`` and ``mem_per_cpu`` (MiB, for DefMemPerCPU).
    """
    gpus = sorted(gpus or [], key=lambda g: int(g["index"]))
    memory = max(1, int(slurmd_c["RealMemory"]) - max(0, int(mem_reserve_mb)))
    kind = gpu_type or (gres_type(gpus[0].get("name")) if gpus else None)
    names = {gres_type(g.get("name")) for g in gpus}
    if gpus and not gpu_type and len(names) > 1:
        raise SlurmParseError("node %s has GPUs of several models (%s): set slurm_gres_type for it"
                              % (slurmd_c["NodeName"], ", ".join(sorted(names))))
    parts = ["NodeName=%s" % slurmd_c["NodeName"]]
    if addr:
        parts.append("NodeAddr=%s" % addr)
    parts += ["%s=%d" % (k, slurmd_c[k]) for k in _HARDWARE_KEYS if k != "RealMemory"]
    parts.append("RealMemory=%d" % memory)
    if gpus:
        parts.append("Gres=gpu:%s:%d" % (kind, len(gpus)))
    gres = ["NodeName=%s Name=gpu Type=%s File=/dev/nvidia%d" % (slurmd_c["NodeName"], kind, int(g["index"]))
            for g in gpus]
    return {"name": slurmd_c["NodeName"], "line": " ".join(parts), "gres": gres, "gpus": len(gpus),
            "gres_type": kind, "mem_per_cpu": max(1, memory // max(1, int(slurmd_c["CPUs"])))}


def process_tracking(virtualization_type, virtualization_role, cgroup_fs_writable, choice="auto"):
    """ProctrackType / TaskPlugin / JobAcctGatherType for a node.

    cgroups on hosts (``proctrack/cgroup``, ``task/cgroup,task/affinity``: what DeepOps, stackhpc and
    Azure use); in a container, where cgroups cannot be delegated to slurmd, ``proctrack/linuxproc`` with
    ``task/none`` (``task/affinity`` fails with EPERM for non-root job steps in podman containers; tested
    on this project's local nodes) and ``jobacct_gather/linux``.

    :param choice: ``auto``, ``cgroup`` or ``linuxproc`` (the role's slurm_process_tracking).
    :returns: dict ``mode`` (cgroup|linuxproc), ``proctrack``, ``task``, ``jobacct``, ``reason``.
    """
    in_container = virtualization_role == "guest" and str(virtualization_type) in CONTAINER_TYPES
    if choice == "auto":
        if in_container or not cgroup_fs_writable:
            mode = "linuxproc"
            reason = ("a %s container" % virtualization_type) if in_container else "/sys/fs/cgroup is not writable"
        else:
            mode, reason = "cgroup", "cgroups can be delegated"
    elif choice in ("cgroup", "linuxproc"):
        mode, reason = choice, "set by slurm_process_tracking"
    else:
        raise SlurmParseError("slurm_process_tracking must be auto, cgroup or linuxproc, not %r" % choice)
    if mode == "cgroup":
        return {"mode": mode, "proctrack": "proctrack/cgroup", "task": "task/cgroup,task/affinity",
                "jobacct": "jobacct_gather/cgroup", "reason": reason}
    return {"mode": mode, "proctrack": "proctrack/linuxproc", "task": "task/none",
            "jobacct": "jobacct_gather/linux", "reason": reason}


def parse_sinfo_nodes(text):
    """Parse ``sinfo -h -N -o '%N|%T|%E'`` into {node: state dict}.

    A node listed in several partitions appears once. Each state dict has ``state`` (the long state
    without flags, e.g. ``idle``, ``drained``, ``down``), ``raw``, ``responding`` (False when sinfo
    marks it with ``*``), ``drain`` (drained or draining), ``reason`` ('' for ``none``) and ``ours``
    (a drain whose reason starts with ``ddp:``).

    Text in another of Slurm's formats (``scontrol show node``, the default ``sinfo`` table, ``sinfo -N -l``,
    ``sinfo -R``) is read with ``slurm_diag.parse_node_states`` into the same keys (plus ``flags``,
    ``reason_user``, ``reason_time``; a ``-R`` row has ``state`` '' and no state of its own).

    :raises SlurmParseError: on text that is none of these formats.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if lines and not all("|" in line for line in lines):
        try:
            states = parse_node_states(text)
        except SlurmTextError as exc:
            raise SlurmParseError("sinfo -N -o '%%N|%%T|%%E': unexpected line %r (%s)" % (lines[0], exc))
        out = {}
        for name, st in states.items():
            state, reason = st.get("state") or "", st.get("reason") or ""
            out[name] = {"state": state, "raw": st.get("raw") or state, "responding": st.get("responding", True),
                         "drain": bool(st.get("drain")), "reason": reason,
                         "ours": bool(st.get("drain")) and reason.startswith(DRAIN_PREFIX),
                         "flags": st.get("flags") or [], "reason_user": st.get("reason_user"),
                         "reason_time": st.get("reason_time")}
        return out
    out = {}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 2)
        if len(fields) != 3 or not fields[0].strip() or not fields[1].strip():
            raise SlurmParseError("sinfo -N -o '%%N|%%T|%%E': unexpected line %r" % line)
        name, raw, reason = (f.strip() for f in fields)
        state = raw.rstrip("*~#!%$@^-").lower()
        reason = "" if reason == "none" else reason
        drain = state.startswith("drain") or "drain" in state
        out[name] = {"state": state, "raw": raw, "responding": not raw.endswith("*"), "drain": drain,
                     "reason": reason, "ours": drain and reason.startswith(DRAIN_PREFIX)}
    return out


def parse_job_ids(text):
    """Job ids from ``squeue -h -o %A`` (one per line; e.g. the jobs running on a node just drained), sorted.

    A drain stops new jobs from landing on a node but leaves the running ones there: the health stage and
    ``ddp-health --slurm`` requeue the jobs on a node they drain (``scontrol requeue``), so they start again on
    healthy nodes, from their checkpoint, instead of running on (or hanging on) a bad one until their time limit.

    :raises SlurmParseError: on a line that is not a job id.
    """
    out = set()
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        if not re.match(r"^[0-9]+$", line):
            raise SlurmParseError("squeue -h -o %%A: unexpected line %r" % line)
        out.add(int(line))
    return sorted(out)


def unavailable_nodes(states, nodes=None):
    """Nodes (of ``nodes``, or all) that cannot run jobs: not responding, down, drained, failing, unknown.

    :returns: list of {"node", "state", "reason"} sorted by node; a node missing from sinfo is listed
        with state ``missing``.
    """
    out = []
    for node in sorted(nodes if nodes is not None else states):
        st = states.get(node)
        if st is None:
            out.append({"node": node, "state": "missing", "reason": "not in sinfo (not in slurm.conf?)"})
        elif not st["responding"] or st["drain"] or st["state"].startswith(_UNAVAILABLE_STATES):
            out.append({"node": node, "state": st["raw"], "reason": st["reason"]})
    return out


def drain_plan(states, errors, prefix=DRAIN_PREFIX):
    """What the health stage does to Slurm's node states.

    :param states: :func:`parse_sinfo_nodes` output.
    :param errors: {slurm node name: [problem codes at error severity]} for every node checked ([] = healthy).
    :returns: dict ``drain`` ({node: reason}), ``resume`` ([node]), ``operator`` ([node]: drained by
        someone else, left alone), ``slurm`` ({node: Slurm's reason}: drained or DOWN by Slurm itself or a program
        it runs, for a cause ``slurm_diag.classify_reason`` knows (Low RealMemory, gres count, not responding,
        Kill task failed, prolog, health program); left alone too, and reported as a finding, see
        ``slurm_diag.node_problems``), ``unchanged`` ([node]).
        A node with errors is drained with ``<prefix><CODE>[,<CODE>...]`` (``ddp:`` for the health stage,
        ``ddp-health:`` for the node command) unless another drain is already on it; a healthy node
        drained with this prefix is resumed; a node DOWN with another reason than Slurm's "Not responding" is left
        as it is (``operator``) like another drain; nothing else is touched
        (DeepOps PR #804: a re-run must not undo drains it did not set).
    """
    plan = {"drain": {}, "resume": [], "operator": [], "slurm": {}, "unchanged": []}
    for node in sorted(errors):
        codes = sorted(set(errors[node] or []))
        st = states.get(node)
        if st is None:
            continue
        ours = st["drain"] and st["reason"].startswith(prefix)
        # DOWN with someone's reason (an operator's "RMA ticket 42"; not Slurm's own "Not responding"): a drain
        # would replace that reason and a later resume would put the node back in service.
        set_down = st["state"].startswith("down") and st["reason"] and not st["reason"].startswith(prefix) \
            and st["reason"] != "Not responding"
        if ((st["drain"] and not ours) or set_down) and classify_reason(st["reason"]):
            plan["slurm"][node] = st["reason"]
        elif (st["drain"] and not ours) or set_down:
            plan["operator"].append(node)
        elif codes:
            reason = prefix + ",".join(codes)
            if st["drain"] and st["reason"] == reason:
                plan["unchanged"].append(node)
            else:
                plan["drain"][node] = reason
        elif ours:
            plan["resume"].append(node)
        else:
            plan["unchanged"].append(node)
    return plan


def account_problems(node, passwd_text, group_text, wanted):
    """Accounts on one node whose ids differ from the ones the cluster needs.

    :param node: the node's name (for the subject).
    :param passwd_text: ``getent passwd`` output of the node; ``group_text`` likewise for groups. With
        ``group_text`` None, ``passwd_text`` is the combined listing of one command (``getent passwd``, a line
        ``--- group``, ``getent group``: :func:`accounts.parse_listing`).
    :param wanted: list of {"name", "uid", "gid", "variable"}: an account that must have these ids
        everywhere (Slurm and munge compare uids across nodes: munge.7, slurm.conf(5) SlurmUser).
    :returns: problems with code ``ACCOUNT_ID_MISMATCH``: the name exists with another id, or the id is
        taken by another name. An account that does not exist yet is fine (it will be created).
    """
    if group_text is None:
        user_table, groups = parse_listing(passwd_text or "")
    else:
        user_table, groups = parse_passwd(passwd_text or ""), parse_group(group_text)
    users = {name: user["uid"] for name, user in user_table.items()}
    by_uid = {v: k for k, v in users.items()}
    by_gid = {v: k for k, v in groups.items()}
    out = []
    for acc in wanted:
        name, uid, gid, var = acc["name"], int(acc["uid"]), int(acc["gid"]), acc.get("variable", "")
        for kind, table, reverse, want in (("user", users, by_uid, uid), ("group", groups, by_gid, gid)):
            have = table.get(name)
            holder = reverse.get(want)
            if have is not None and have != want:
                out.append(problem(
                    "ACCOUNT_ID_MISMATCH", "error", "%s: %s %s" % (node, kind, name),
                    "%s %s has id %d on %s, the cluster needs %d on every node" % (kind, name, have, node, want),
                    "set %s to %d everywhere (if that id is free on every node), or renumber the %s on %s "
                    "(usermod -u / groupmod -g, then chown its files) before running the scheduler stage"
                    % (var, have, kind, node)))
            elif have is None and holder is not None and holder != name:
                out.append(problem(
                    "ACCOUNT_ID_MISMATCH", "error", "%s: %s %s" % (node, kind, name),
                    "id %d for %s %s is already taken on %s by %s" % (want, kind, name, node, holder),
                    "choose another %s that is free on every node" % var))
    return out


def job_failure_nodes(job_nodes, states, job_output=""):
    """The nodes a failed Slurm job points at, from Slurm's own state and srun's messages.

    :param job_nodes: the job's nodes (``scontrol show hostnames <NodeList>``).
    :param states: :func:`parse_sinfo_nodes` output read after the job ended.
    :param job_output: the batch script's output; srun names a node in lines like
        ``srun: error: Task launch for StepId=5.0 failed on node n3: Communication connection failure``.
    :returns: list of {"node", "why"} in job order (empty when nothing names a node).
    """
    named = {}
    for match in re.finditer(r"(?:failed on node|on host|node) (\S+?):\s*(.+)", job_output or ""):
        node = match.group(1)
        if node in job_nodes and node not in named:
            named[node] = "srun: " + match.group(2).strip()
    for bad in unavailable_nodes(states, job_nodes):
        why = "Slurm state %s%s" % (bad["state"], (" (%s)" % bad["reason"]) if bad["reason"] else "")
        named[bad["node"]] = (named[bad["node"]] + "; " + why) if bad["node"] in named else why
    return [{"node": n, "why": named[n]} for n in job_nodes if n in named]


# slurm.conf keys whose new value ``scontrol reconfigure`` applies to the running daemons (Slurm 22.05: scontrol(1),
# "reconfigure": most parameters are re-read, those that need a daemon restart are noted in slurm.conf(5); slurmctld
# and every slurmd must be restarted when nodes are added or removed). Only the keys this collection writes and
# knows to be re-read are listed: a change to any other key, to a NodeName line, or to gres.conf/cgroup.conf takes
# the restart path (the safe side: jobs are kept either way, a restart only costs a few seconds of scheduling).
# So do the keys of job accounting and requeue: AccountingStorageType/Host/Port, JobAcctGatherType and AuthInfo
# (slurm.conf(5): a change needs the daemons restarted), DisableRootJobs and JobRequeue (not known to be re-read).
RECONFIGURE_KEYS = frozenset((
    "DefMemPerCPU", "HealthCheckInterval", "HealthCheckNodeState", "HealthCheckProgram", "ReturnToService",
    "SlurmdTimeout", "SrunPortRange",
))


def parse_conf(text):
    """Parse a slurm.conf as this collection writes it (``KEY=value`` lines, NodeName and PartitionName lines).

    :param text: the file's content ('' or None: no file).
    :returns: dict ``keys`` ({key: value} of the single-value lines, comments dropped), ``nodes``
        ({NodeName: the line without ``State=...``}), ``partitions`` ({PartitionName: line}).
    :raises SlurmParseError: on a line that is neither a comment nor ``KEY=value``.
    """
    out = {"keys": {}, "nodes": {}, "partitions": {}}
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise SlurmParseError("slurm.conf: not a KEY=value line: %r" % raw)
        key, value = line.split("=", 1)
        if key == "NodeName":
            words = [w for w in line.split() if not w.startswith("State=")]
            out["nodes"][value.split()[0]] = " ".join(words)
        elif key == "PartitionName":
            out["partitions"][value.split()[0]] = line
        else:
            out["keys"][key] = value.strip()
    return out


def conf_nodes(slurm_text, gres_text=""):
    """The nodes a running cluster's slurm.conf and gres.conf define, as :func:`node_entry` returns them.

    A run limited to some nodes (``--limit``) takes the lines of the nodes it does not touch from here: the
    controller's files are the cluster's record of them.

    :returns: {NodeName: {"name", "line", "gres", "gpus", "mem_per_cpu"}} (mem_per_cpu: RealMemory // CPUs, MiB).
    """
    conf = parse_conf(slurm_text)
    gres = {}
    for raw in (gres_text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("NodeName="):
            gres.setdefault(line.split()[0].split("=", 1)[1], []).append(line)
    out = {}
    for name, line in conf["nodes"].items():
        pairs = dict(w.split("=", 1) for w in line.split() if "=" in w)
        try:
            per_cpu = max(1, int(pairs["RealMemory"]) // max(1, int(pairs["CPUs"])))
        except (KeyError, ValueError):
            raise SlurmParseError("slurm.conf: the NodeName line of %s lacks a numeric CPUs or RealMemory: %r"
                                  % (name, line))
        out[name] = {"name": name, "line": line, "gres": gres.get(name, []), "gpus": len(gres.get(name, [])),
                     "mem_per_cpu": per_cpu}
    return out


def conf_tracking(slurm_text):
    """The process tracking a running cluster's slurm.conf uses, in :func:`process_tracking`'s shape (None if unset)."""
    keys = parse_conf(slurm_text)["keys"]
    if "ProctrackType" not in keys:
        return None
    mode = "cgroup" if keys["ProctrackType"] == "proctrack/cgroup" else "linuxproc"
    return {"mode": mode, "proctrack": keys["ProctrackType"], "task": keys.get("TaskPlugin", "task/none"),
            "jobacct": keys.get("JobAcctGatherType", "jobacct_gather/linux"),
            "reason": "as the cluster's slurm.conf has it"}


def apply_plan(old_text, new_text, other_files_changed=False, running_nodes=None):
    """How to make the running daemons use a new slurm.conf without losing running or pending jobs.

    :param old_text: the controller's slurm.conf before this run ('' or None: none yet).
    :param new_text: the slurm.conf this run writes.
    :param other_files_changed: gres.conf or cgroup.conf changed on some node (read at daemon start).
    :param running_nodes: the nodes the running slurmctld knows (``sinfo -h -N -o %N``), or None. A slurm.conf
        written by an earlier run that stopped before the daemons took it looks unchanged on disk; the running node
        set still shows the nodes to add or remove.
    :returns: dict ``action`` (``none``, ``reconfigure`` or ``restart``), ``added``/``removed`` (NodeNames),
        ``changed`` (keys whose value changed, sorted) and ``why`` (one sentence).
        ``restart`` means: stop slurmd on every node, restart slurmctld (its StateSaveLocation keeps the queue),
        start slurmd again (stackhpc/ansible-role-openhpc PR #200: slurmd running while slurmctld restarts with
        a changed configuration can leave nodes INVAL; job steps run on under slurmstepd meanwhile).
    """
    if not (old_text or "").strip():
        return {"action": "restart", "added": [], "removed": [], "changed": [],
                "why": "no slurm.conf on the controller before this run"}
    old, new = parse_conf(old_text), parse_conf(new_text)
    known = set(old["nodes"]) if running_nodes is None else set(running_nodes)
    added = sorted(set(new["nodes"]) - known)
    removed = sorted(known - set(new["nodes"]))
    changed = sorted(k for k in set(old["keys"]) | set(new["keys"]) if old["keys"].get(k) != new["keys"].get(k))
    node_lines = sorted(n for n in set(old["nodes"]) & set(new["nodes"]) if old["nodes"][n] != new["nodes"][n])
    plan = {"added": added, "removed": removed, "changed": changed}
    if added or removed:
        why = "nodes %s" % "; ".join(
            p for p in ("added: " + ", ".join(added) if added else "", "removed: " + ", ".join(removed) if removed
                        else "") if p)
        return dict(plan, action="restart", why=why + " (Slurm 22.05 restarts slurmctld and every slurmd for that)")
    if node_lines:
        return dict(plan, action="restart", why="the NodeName line of %s changed" % ", ".join(node_lines))
    if other_files_changed:
        return dict(plan, action="restart", why="gres.conf or cgroup.conf changed (read when the daemons start)")
    need_restart = [k for k in changed if k not in RECONFIGURE_KEYS]
    if need_restart:
        return dict(plan, action="restart", why="%s changed (not applied by scontrol reconfigure)"
                    % ", ".join(need_restart))
    if changed or old["partitions"] != new["partitions"]:
        return dict(plan, action="reconfigure",
                    why="%s changed (scontrol reconfigure applies it)" % (", ".join(changed) or "a partition"))
    return dict(plan, action="none", why="slurm.conf is unchanged")


def join_outcome(rc, stdout, prefix=DRAIN_PREFIX):
    """What to do with a joining node after its health command ran (ddp-health: exit 0 keep, 1 remove, 2 could not run).

    :param rc: the command's exit status.
    :param stdout: its output. ddp-health lists each problem on a line ``  [CODE] error <subject>: ...``; the codes
        of the ``error`` lines are the reason (as the health stage drains), else those ending its first line
        (``ddp-health: FAIL on n3 in 0.02 s: CODE, CODE``).
    :returns: ``{"action": "resume", "reason": None}`` or ``{"action": "drain", "reason": "<prefix><CODES>"}``; without
        codes the reason is ``JOIN_HEALTH_FAILED`` for exit 1 and ``JOIN_HEALTH_UNKNOWN`` for any other status.
    """
    if rc == 0:
        return {"action": "resume", "reason": None}
    text = stdout or ""
    codes = []
    if rc == 1:
        codes = re.findall(r"(?m)^\s*\[([A-Z][A-Z0-9_]*)\] error\b", text)
        first = text.strip().splitlines()[:1]
        match = re.search(r":\s*([A-Z][A-Z0-9_]*(?:,\s*[A-Z][A-Z0-9_]*)*)\s*$", first[0]) if first else None
        if not codes and match:
            codes = [c.strip() for c in match.group(1).split(",")]
    if not codes:
        codes = ["JOIN_HEALTH_FAILED" if rc == 1 else "JOIN_HEALTH_UNKNOWN"]
    return {"action": "drain", "reason": prefix + ",".join(sorted(set(codes)))}
