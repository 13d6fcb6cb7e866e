"""Pure classification of TCP connect failures between cluster nodes.

No I/O here: the module that connects passes the ``errno`` (or ``None`` for a timeout) and
this turns it into a stable verdict. Why it matters (docs/cases.md, C03): firewalld's
default ``reject`` answers with ICMP admin-prohibited, which Linux reports as ``EHOSTUNREACH``
("No route to host"). That reads like a host that is down, but it is a firewall; a RST
(``ECONNREFUSED``) means the host is up and nothing listens; silence until the timeout means a
DROP rule or a dead path. Source for the errno mapping: ip-icmp(7) / icmp(7) in the Linux
man-pages ("ICMP_PKT_FILTERED ... EHOSTUNREACH") and firewalld's default zone target REJECT
(firewalld.zone(5)).
"""
from __future__ import annotations

import errno as _errno

VERDICTS = ("open", "refused", "firewall_reject", "timeout", "unreachable", "unresolved", "error")


def classify_connect(err_no, timed_out=False, resolve_failed=False):
    """Classify one TCP connect attempt.

    :param err_no: the ``errno`` of the failed ``connect()``, or ``None`` when it succeeded
        or timed out.
    :param timed_out: True when no answer came within the probe's timeout (seconds).
    :param resolve_failed: True when the name did not resolve.
    :returns: dict ``{verdict, message}``; ``verdict`` is one of :data:`VERDICTS`.
    """
    if resolve_failed:
        return {"verdict": "unresolved", "message": "the name does not resolve on this node"}
    if timed_out:
        return {"verdict": "timeout",
                "message": "no answer before the timeout: a firewall DROP rule or no route"}
    if err_no is None:
        return {"verdict": "open", "message": "connected"}
    if err_no == _errno.ECONNREFUSED:
        return {"verdict": "refused",
                "message": "connection refused: the host is up but nothing listens on the port"}
    if err_no in (_errno.EHOSTUNREACH, _errno.EACCES, _errno.EPERM):
        return {"verdict": "firewall_reject",
                "message": "rejected (\"No route to host\" is how a firewalld reject reads): "
                           "a firewall blocks the port"}
    if err_no in (_errno.ENETUNREACH, _errno.EHOSTDOWN):
        return {"verdict": "unreachable", "message": "network unreachable: no route to the host"}
    if err_no == _errno.ETIMEDOUT:
        return {"verdict": "timeout",
                "message": "no answer before the timeout: a firewall DROP rule or no route"}
    return {"verdict": "error", "message": "connect failed: %s" % _errno.errorcode.get(err_no, err_no)}


#: ``ssh`` (OpenSSH client) stderr -> verdict, first match wins. The texts are OpenSSH's own
#: (ssh.c, sshconnect.c, sshconnect2.c, OpenSSH 8-9); verdict ``dropped`` is sshd closing a new
#: connection before the key exchange, which is what ``MaxStartups`` does under load
#: (sshd_config(5)), and is worth another attempt.
SSH_PATTERNS = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host_key_changed",
     "the peer's host key differs from known_hosts (reinstalled node, or another machine on its address)"),
    ("Host key verification failed", "host_key_unknown",
     "the peer's host key is not in known_hosts, and BatchMode cannot ask"),
    ("Permission denied", "auth_denied", "the peer refused the key (authorized_keys, its modes, or the account)"),
    ("Could not resolve hostname", "unresolved", "the peer's name does not resolve on this node"),
    ("Connection refused", "refused", "nothing listens on the SSH port (sshd not running)"),
    ("No route to host", "firewall_reject", "rejected (\"No route to host\" is how a firewalld reject reads)"),
    ("Network is unreachable", "unreachable", "network unreachable: no route to the host"),
    ("timed out", "timeout", "no answer before the timeout: a firewall DROP rule or no route"),
    ("kex_exchange_identification", "dropped", "sshd closed the connection before the key exchange (MaxStartups)"),
    ("Connection closed by", "dropped", "sshd closed the connection before the key exchange (MaxStartups)"),
    ("Connection reset by", "dropped", "sshd closed the connection before the key exchange (MaxStartups)"),
)


def classify_ssh(rc, stderr):
    """Classify one ``ssh -o BatchMode=yes <peer> true``.

    :param rc: ssh's exit status (0 ok; 255 is ssh's own error; anything else is the remote
        command's status, which still proves the login).
    :param stderr: ssh's standard error (str).
    :returns: dict ``{verdict, message}``: ``ok``, one of the verdicts of :data:`SSH_PATTERNS`, or
        ``error`` with the last stderr line.
    """
    if rc != 255:
        return {"verdict": "ok", "message": "logged in"}
    for needle, verdict, message in SSH_PATTERNS:
        if needle in (stderr or ""):
            return {"verdict": verdict, "message": message}
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    return {"verdict": "error", "message": "ssh failed: %s" % (lines[-1] if lines else "exit 255, no message")}
