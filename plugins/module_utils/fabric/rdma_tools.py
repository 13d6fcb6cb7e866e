"""Pure parser for ``mlnx_qos``: the RoCE QoS settings (trust mode, PFC) beside the port inventory.

No I/O here. Format: ``mlnx_qos -i <if>`` (MLNX_OFED / mlnx-tools): ``Priority trust state|mode: pcp|dscp`` and the
``PFC configuration:`` block (``priority 0 1 .. 7`` / ``enabled 0 0 0 1 0 0 0 0``), as shown in NVIDIA's mlnx_qos
community page (DOC-2792, MLNX_OFED 4.2); also the one-line form ``PFC enabled on priorities 0..7: 0 0 0 0 0 0 0 0``
of case C07 (docs/cases.md). No capture from a host is at hand, so this parser is tested on inline rows.
"""
from __future__ import annotations

import re


def parse_mlnx_qos(text):
    """Parse ``mlnx_qos -i <if>``.

    :returns: ``{trust, pfc, pfc_enabled}``: ``trust`` is ``'pcp'``/``'dscp'`` or None, ``pfc`` the
        eight 0/1 flags by priority (None when no PFC line was found), ``pfc_enabled`` the
        priorities with PFC on.
    """
    raw = str(text or "")
    trust = None
    match = re.search(r"Priority trust (?:state|mode)\s*:\s*(\w+)", raw, re.IGNORECASE)
    if match:
        trust = match.group(1).lower()
    pfc = None
    for line in raw.splitlines() + [raw]:
        found = re.search(r"enabled\b[^\n0-9]*?(?:\d\s*\.\.\s*\d\s*:)?\s*((?:[01][\s,]+){7}[01])\b", line)
        if found:
            pfc = [int(flag) for flag in re.findall(r"[01]", found.group(1))]
            break
    return {"trust": trust, "pfc": pfc,
            "pfc_enabled": [prio for prio, flag in enumerate(pfc or []) if flag]}
