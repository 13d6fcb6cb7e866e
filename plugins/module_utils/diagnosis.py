"""The one result shape shared by the health modules (gpu_health, roce_health, nccl_health).

Every module returns::

    healthy: bool                      # no problem at or above the 'error' severity
    problems: [ {code, severity, subject, message, fix} ]
    <facts>: ...                       # module specific (gpus, ports/gids, busbw, ...)

``code`` is a stable identifier documented in docs/troubleshooting.md; ``severity`` is one of
:data:`SEVERITIES`; ``subject`` names the thing (``"GPU 2 (0000:41:00.0)"``, ``"mlx5_0 port 1"``,
``"node ddp-node2"``); ``message`` says what is wrong; ``fix`` says what to do, in the field's words.
``fail_on`` (a module option) chooses the lowest severity that fails the task: ``error`` (default),
``warning`` (fail on warnings too), or ``never`` (always report). Pure: no I/O.
"""
from __future__ import annotations

SEVERITIES = ("info", "warning", "error")
FAIL_ON_CHOICES = ("error", "warning", "never")
_RANK = {"info": 0, "warning": 1, "error": 2}


def problem(code, severity, subject, message, fix):
    """Build one problem dict; raises ValueError on an unknown severity or an empty code."""
    if severity not in _RANK:
        raise ValueError("severity must be one of %s, got %r" % (", ".join(SEVERITIES), severity))
    if not code:
        raise ValueError("a problem needs a code")
    return {"code": code, "severity": severity, "subject": subject, "message": message, "fix": fix}


def is_healthy(problems):
    """True when no problem has severity 'error'."""
    return not any(p["severity"] == "error" for p in problems)


def should_fail(problems, fail_on="error"):
    """True when a problem reaches the ``fail_on`` severity ('error', 'warning' or 'never')."""
    if fail_on not in FAIL_ON_CHOICES:
        raise ValueError("fail_on must be one of %s, got %r" % (", ".join(FAIL_ON_CHOICES), fail_on))
    if fail_on == "never":
        return False
    floor = _RANK[fail_on]
    return any(_RANK[p["severity"]] >= floor for p in problems)


def result(problems, **facts):
    """The module result: ``healthy``, ``problems`` (errors first) and the facts given."""
    ordered = sorted(problems, key=lambda p: -_RANK[p["severity"]])
    out = {"healthy": is_healthy(ordered), "problems": ordered}
    out.update(facts)
    return out


def summary(problems):
    """One line per problem, for a module's failure message."""
    return "; ".join("[%s] %s: %s" % (p["code"], p["subject"], p["message"]) for p in problems)


def fraction(value, name="min_ratio"):
    """``value`` as a float in (0, 1] (a threshold given as a share of a reference figure).

    :raises ValueError: not a number, or outside (0, 1]; the message names ``name``.
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number in (0, 1], got %r" % (name, value))
    if not 0 < number <= 1:
        raise ValueError("%s must be a number in (0, 1], got %r" % (name, value))
    return number
