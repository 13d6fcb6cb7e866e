# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of Slurm's job accounting (slurmdbd on MariaDB): what sacctmgr must add, what sacct says about jobs,
and why slurmdbd does not answer.

No I/O here: the slurm role and the benchmark run ``sacctmgr``, ``sacct``, ``systemctl show`` and read slurmdbd's log,
and hand the text to these functions (through ``plugins/filter/slurm_accounting.py``). Formats: sacctmgr(1) and
sacct(1) of Slurm 22.05.8 with ``-n -P`` (no header, ``|``-separated); slurmdbd's log lines are those of its MySQL
plugin (``mysql_real_connect failed: <errno> <message>``, MariaDB's client error numbers: 1045 access denied,
1044/1049 no such database or no right on it, 2002 no local socket, 2003/2005 no server at that host, 2006/2013
connection lost). The fixtures in ``tests/unit/fixtures/slurm_accounting/`` are outputs captured on real nodes.
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.system.systemd_units import parse_show

PROBLEM_CODES = (
    "ACCOUNTING_DB_STOPPED",
    "ACCOUNTING_DB_AUTH",
    "ACCOUNTING_DB_UNREACHABLE",
    "ACCOUNTING_SLURMDBD_DOWN",
    "ACCOUNTING_NOT_REGISTERED",
)


_CONNECT_FAILED = re.compile(r"mysql_real_connect failed: (\d+)\s*(.*)$")
_QUERY_FAILED = re.compile(r"mysql_query failed: (\d+)\s*(.*)$")
_STARTED = re.compile(r"slurmdbd version \S+ started")
_AUTH_ERRNOS = ("1044", "1045", "1049", "1698")
_DOWN_ERRNOS = ("2002", "2003", "2005", "2006", "2013")


class AccountingParseError(ValueError):
    """Raised when a command's output is not in the format the parser reads."""


def _sections(text):
    """The role's read split at lines ``--- <name>`` -> {'' (before the first), name: text}."""
    out, name, lines = {}, "", []
    for line in str(text or "").replace("\r\n", "\n").split("\n"):
        if line.startswith("--- "):
            out[name] = "\n".join(lines)
            name, lines = line[4:].strip(), []
        else:
            lines.append(line)
    out[name] = "\n".join(lines)
    return out


def sacctmgr_todo(listing, cluster, account, users):
    """The ``sacctmgr -i add ...`` commands that register what is missing, in order (cluster, account, users).

    :param listing: stdout of ``sacctmgr -n -P show cluster format=cluster``, a line ``--- accounts``,
        ``sacctmgr -n -P show account format=account``, a line ``--- users``, ``sacctmgr -n -P show user
        format=user,defaultaccount``.
    :param cluster: slurm.conf ClusterName; :param account: the account the users get; :param users: user names.
    :returns: a list of argv lists; empty when everything is registered. A user whose default account is another
        one is left alone (an administrator gave it).
    :raises AccountingParseError: when a section is missing (the read did not come from that command line).
    """
    parts = _sections(listing)
    if "accounts" not in parts or "users" not in parts:
        raise AccountingParseError("sacctmgr listing lacks its '--- accounts' or '--- users' line: %r"
                                   % str(listing)[:200])
    clusters = set(line.strip().lower() for line in parts[""].splitlines() if line.strip())
    accounts = set(line.strip().lower() for line in parts["accounts"].splitlines() if line.strip())
    known_users = set(line.split("|", 1)[0].strip() for line in parts["users"].splitlines() if line.strip())
    out = []
    if cluster.lower() not in clusters:
        out.append(["sacctmgr", "-i", "add", "cluster", cluster])
    if account.lower() not in accounts:
        out.append(["sacctmgr", "-i", "add", "account", account, "Cluster=" + cluster,
                    "Description=ddp.cluster users", "Organization=ddp"])
    for user in users:
        if user not in known_users:
            out.append(["sacctmgr", "-i", "add", "user", user, "Account=" + account, "DefaultAccount=" + account,
                        "Cluster=" + cluster])
    return out


def parse_cluster_registration(text, cluster):
    """``sacctmgr -n -P show cluster format=cluster,controlhost,controlport`` -> {host, port} of ``cluster``.

    :returns: ``{"registered": bool, "control_host": str, "control_port": str}``; registered is True once slurmctld
        has registered with slurmdbd (ControlHost is set), False when the cluster is missing or has no ControlHost.
    """
    for line in str(text or "").splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) >= 3 and fields[0].lower() == cluster.lower():
            return {"registered": bool(fields[1]), "control_host": fields[1], "control_port": fields[2]}
    return {"registered": False, "control_host": "", "control_port": ""}


SACCT_FIELDS = ("JobID", "JobName", "State", "Elapsed", "NodeList", "ExitCode")


def parse_sacct(text):
    """``sacct -X -n -P -o JobID,JobName,State,Elapsed,NodeList,ExitCode`` -> {job id: {...}}.

    :returns: per job id (str): ``job_name``, ``state`` (the first word: ``CANCELLED by 2000`` reads CANCELLED),
        ``elapsed`` (as sacct prints it, ``[D-]HH:MM:SS``), ``elapsed_s`` (int seconds), ``nodes`` (the node list
        as Slurm writes it, ``ddp-mol[1-2]``), ``exit_code`` (``0:0``).
    :raises AccountingParseError: on a line that does not have the six fields.
    """
    jobs = {}
    for line in str(text or "").splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != len(SACCT_FIELDS):
            raise AccountingParseError("sacct: expected %d |-separated fields (%s), got %r"
                                       % (len(SACCT_FIELDS), ",".join(SACCT_FIELDS), line))
        job_id, name, state, elapsed, nodes, exit_code = (f.strip() for f in fields)
        jobs[job_id] = {"job_name": name, "state": state.split()[0] if state else "", "elapsed": elapsed,
                        "elapsed_s": elapsed_seconds(elapsed), "nodes": nodes, "exit_code": exit_code}
    return jobs


def elapsed_seconds(text):
    """sacct's Elapsed (``[D-]HH:MM:SS``, or ``MM:SS``) in seconds; None when it is not in that form."""
    match = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$", str(text or "").strip())
    if not match:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _last_event(log_text):
    """The last of slurmdbd's start line and its database errors in the log: ('started'|errno, line) or None."""
    last = None
    for line in str(log_text or "").splitlines():
        if _STARTED.search(line):
            last = ("started", line.strip())
            continue
        match = _CONNECT_FAILED.search(line) or _QUERY_FAILED.search(line)
        if match:
            last = (match.group(1), line.strip())
    return last


def problems(read, host, log_path="/var/log/slurm/slurmdbd.log", db_name="slurm_acct_db", db_user="slurm"):
    """Why accounting does not work on the accounting host ``host``, from the role's one read.

    :param read: ``systemctl show --property=Id,ActiveState,UnitFileState mariadb.service slurmdbd.service``,
        a line ``--- sacctmgr``, the output of ``sacctmgr -n -P show cluster format=cluster`` (stdout and stderr)
        and a line ``rc=<exit status>``, a line ``--- log``, the last lines of slurmdbd's log.
        Without the sacctmgr section (slurmdbd never set up on this host) nothing is judged.
    :returns: a list of problems (module_utils/diagnosis.py shape), empty when sacctmgr got an answer.
        In this order: ACCOUNTING_DB_STOPPED - MariaDB is not active; ACCOUNTING_SLURMDBD_DOWN - slurmdbd is not
        running; ACCOUNTING_DB_AUTH - slurmdbd runs but MariaDB refuses its user or password (1044/1045/1049/1698:
        slurmdbd then retries every 5 s without answering); ACCOUNTING_DB_UNREACHABLE - slurmdbd runs but cannot
        connect to MariaDB although it runs (2002/2003/2005/2006/2013); else ACCOUNTING_SLURMDBD_DOWN (running, not
        answering).
    """
    parts = _sections(read)
    if "sacctmgr" not in parts:
        return []
    answer = parts["sacctmgr"]
    rc = re.search(r"^rc=(\d+)\s*$", answer, re.M)
    if rc and rc.group(1) == "0":
        return []
    units = parse_show(parts[""])
    mariadb = units.get("mariadb.service", {}).get("ActiveState", "unknown")
    slurmdbd = units.get("slurmdbd.service", {}).get("ActiveState", "unknown")
    said = " ".join(line.strip() for line in answer.splitlines() if line.strip() and not line.startswith("rc="))
    event = _last_event(parts.get("log", ""))
    subject = "slurmdbd on %s" % host
    out = []
    if mariadb != "active":
        out.append(problem(
            "ACCOUNTING_DB_STOPPED", "error", "MariaDB on %s" % host,
            "MariaDB is %s, so slurmdbd has no database to keep the job history in%s." % (
                mariadb, (" (slurmdbd's log: %s)" % event[1][-200:]) if event and event[0] != "started" else ""),
            "systemctl start mariadb on %s (journalctl -u mariadb says why it stopped), then systemctl restart "
            "slurmdbd; or re-run playbooks/scheduler.yml, which starts both." % host))
        return out
    if slurmdbd != "active":
        out.append(problem(
            "ACCOUNTING_SLURMDBD_DOWN", "error", subject,
            "slurmdbd is %s%s." % (slurmdbd, (": its last database error was %s" % event[1][-300:])
                                   if event and event[0] != "started" else ""),
            "journalctl -u slurmdbd and %s say why; systemctl start slurmdbd (or re-run playbooks/scheduler.yml)."
            % log_path))
        return out
    db_errors = (
        (_AUTH_ERRNOS, "ACCOUNTING_DB_AUTH", "MariaDB refuses slurmdbd's database user",
         "the password in slurmdbd.conf (StoragePass) and the one of MariaDB's user %s@localhost differ, or the "
         "user has no rights on %s: re-run playbooks/scheduler.yml, which sets the user's password and rights "
         "from slurm_accounting_db_password (or the generated one on the controller) and writes slurmdbd.conf "
         "to match, then restarts slurmdbd." % (db_user, db_name)),
        (_DOWN_ERRNOS, "ACCOUNTING_DB_UNREACHABLE", "slurmdbd cannot connect to MariaDB although MariaDB runs",
         "slurmdbd.conf must name StorageHost=localhost and MariaDB must listen on its local socket (%s); check "
         "`mariadb -e status` as root, fix the socket or StorageHost (re-run playbooks/scheduler.yml writes "
         "slurmdbd.conf), then systemctl restart slurmdbd." % log_path),
    )
    for errnos, code, what, fix in db_errors:
        if event and event[0] in errnos:
            out.append(problem(code, "error", subject, "%s: %s" % (what, event[1][-300:]), fix))
            return out
    out.append(problem(
        "ACCOUNTING_SLURMDBD_DOWN", "error", subject,
        "slurmdbd runs but does not answer sacctmgr: %s" % (said[-300:] or "no output"),
        "read %s; check that munge runs on every node with the same key and that port DbdPort of slurmdbd.conf "
        "(slurm_accounting_port) is open to the cluster, then systemctl restart slurmdbd." % log_path))
    return out


def not_registered(cluster, ctld_host, registration, ctld_log=""):
    """ACCOUNTING_NOT_REGISTERED when slurmctld has not registered ``cluster`` with slurmdbd (else None)."""
    if registration.get("registered"):
        return None
    lines = [line.strip() for line in str(ctld_log or "").splitlines()
             if "slurmdbd" in line.lower() or "accounting_storage" in line.lower()]
    return problem(
        "ACCOUNTING_NOT_REGISTERED", "error", "slurmctld on %s" % ctld_host,
        "slurmctld has not registered the cluster %s with slurmdbd (sacctmgr show cluster has no ControlHost)%s; "
        "jobs run but are queued in slurmctld, not in the job history" % (
            cluster, (": slurmctld.log says %s" % lines[-1][-300:]) if lines else ""),
        "check that slurmctld reaches slurmdbd (AccountingStorageHost and AccountingStoragePort of slurm.conf, the "
        "firewall, munge), then systemctl restart slurmctld.")
