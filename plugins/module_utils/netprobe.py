"""Pure classification of TCP connect failures between cluster nodes.

No I/O here: the module that connects passes the ``errno`` (or ``None`` for a timeout) and
this turns it into a stable verdict. Why it matters (shared/cases/cases.yml C03): firewalld's
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
