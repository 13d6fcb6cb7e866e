"""Pure parsers for RDMA tool outputs beyond the port inventory: QoS, counters, logs, perftest.

No I/O here. Formats (real outputs in tests/unit/fixtures/rdma/ unless noted):

* ``mst status -v`` (NVIDIA MFT): the PCI devices table (DEVICE_TYPE MST PCI RDMA NET NUMA).
* ``mlnx_qos -i <if>`` (MLNX_OFED / mlnx-tools): ``Priority trust state|mode: pcp|dscp`` and the
  ``PFC configuration:`` block (``priority 0 1 .. 7`` / ``enabled 0 0 0 1 0 0 0 0``), as shown in
  NVIDIA's mlnx_qos community page (DOC-2792, MLNX_OFED 4.2); also the one-line form
  ``PFC enabled on priorities 0..7: 0 0 0 0 0 0 0 0`` used by case C07. No host capture is in
  the shared fixtures (a known gap), so this parser is tested on inline rows.
* syslog / journal link flaps: ``<if>: lost carrier`` (systemd-networkd; Azure NHC counts these)
  and mlx5_core ``<if>: Link down`` (OCI's check).
* ``rdma stat show link`` hw counters, including lines wrapped by a mail client.
* ``ib_write_bw`` (perftest) client output: preamble, result rows, the MTU downgrade warning,
  and completion errors.
"""
from __future__ import annotations

import re


def _int(text):
    try:
        return int(str(text).strip(), 0)
    except (TypeError, ValueError):
        return None


def parse_mst_status(text):
    """Parse ``mst status -v``: rows ``DEVICE_TYPE MST PCI RDMA NET NUMA``.

    :returns: list of ``{device_type, mst, pci, rdma, net, numa}``; NET's ``net-`` prefix is
        removed (``net-net1`` -> ``net1``); an empty NET column is None; ``NA`` stays as printed
        for the type and MST columns.
    """
    rows = []
    in_table = False
    for line in str(text or "").splitlines():
        fields = line.split()
        if fields[:3] == ["DEVICE_TYPE", "MST", "PCI"]:
            in_table = True
            continue
        if not in_table or len(fields) < 4:
            continue
        if not re.match(r"^[0-9a-fA-F]{2,4}:[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})?\.[0-7]$", fields[2]) and \
                not re.match(r"^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", fields[2]):
            continue
        net = None
        numa = None
        if len(fields) >= 6:
            net, numa = fields[4], fields[5]
        elif len(fields) == 5:
            if fields[4].lstrip("-").isdigit():
                numa = fields[4]
            else:
                net = fields[4]
        if net and net.startswith("net-"):
            net = net[len("net-"):]
        rows.append({"device_type": fields[0], "mst": fields[1], "pci": fields[2],
                     "rdma": fields[3] if fields[3] != "NA" else None, "net": net,
                     "numa": _int(numa) if numa is not None else None})
    return rows


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


_FLAP = re.compile(r"(?:^|\s)([A-Za-z0-9_.:@-]+?):?\s+(?:lost carrier|Link down)\b", re.IGNORECASE)


def count_link_flaps(text):
    """Count link-loss lines per interface in a syslog / journal excerpt.

    Counts ``<if>: lost carrier`` (systemd-networkd) and ``<if>: Link down`` (mlx5_core) lines.
    Azure NHC's ``check_ib_link_flapping`` fails at >= 5 in its window (default 24 h); the caller
    chooses the window by what it passes in.

    :returns: dict ``ifname -> count``.
    """
    counts = {}
    for line in str(text or "").splitlines():
        match = _FLAP.search(line)
        if not match:
            continue
        name = match.group(1).rstrip(":")
        counts[name] = counts.get(name, 0) + 1
    return counts


def parse_rdma_stat_link(text):
    """Parse ``rdma stat show link [dev/port]``: ``link <dev>/<port> <counter> <value> ...``.

    Lines wrapped anywhere are joined first.

    :returns: dict ``'<dev>/<port>' -> {counter: int}``.
    """
    tokens = []
    for line in str(text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("$", "#")):
            continue
        tokens.extend(stripped.split())
    result = {}
    current = None
    pos = 0
    while pos < len(tokens):
        token = tokens[pos]
        if token == "link" and pos + 1 < len(tokens) and "/" in tokens[pos + 1]:
            current = result.setdefault(tokens[pos + 1], {})
            pos += 2
            continue
        if current is not None and pos + 1 < len(tokens) and _int(tokens[pos + 1]) is not None:
            current[token] = _int(tokens[pos + 1])
            pos += 2
            continue
        pos += 1
    return result


_BW_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def parse_ib_write_bw(text):
    """Parse perftest ``ib_write_bw`` client output.

    :returns: dict with ``device``, ``link_type``, ``gid_index`` (int), ``mtu`` (bytes, as used),
        ``qps``, ``rows`` (``{bytes, iterations, bw_peak, bw_average, msg_rate}``; Gb/s with
        ``--report_gbits``), ``bw_average`` (of the largest message size), ``bw_average_max``,
        ``mtu_downgraded`` ("Requested mtu is higher than active mtu"), ``completion_error``,
        ``failed_status`` (the ``Failed status N`` code, or None) and ``ok`` (rows and no error).
    """
    raw = str(text or "")
    out = {"device": None, "link_type": None, "gid_index": None, "mtu": None, "qps": None,
           "rows": [], "bw_average": None, "bw_average_max": None,
           "mtu_downgraded": "Requested mtu is higher than active mtu" in raw,
           "completion_error": "Completion with error" in raw, "failed_status": None, "ok": False}
    patterns = {
        "device": r"Device\s*:\s*(\S+)",
        "link_type": r"Link type\s*:\s*(\S+)",
        "gid_index": r"GID index\s*:\s*(\d+)",
        "mtu": r"Mtu\s*:\s*(\d+)\s*\[B\]",
        "qps": r"Number of qps\s*:\s*(\d+)",
    }
    for key, pattern in patterns.items():
        match = re.search(pattern, raw)
        if match:
            out[key] = _int(match.group(1)) if key in ("gid_index", "mtu", "qps") else match.group(1)
    status = re.search(r"Failed status (\d+)", raw)
    if status:
        out["failed_status"] = int(status.group(1))
    for line in raw.splitlines():
        match = _BW_ROW.match(line)
        if match:
            out["rows"].append({"bytes": int(match.group(1)), "iterations": int(match.group(2)),
                                "bw_peak": float(match.group(3)), "bw_average": float(match.group(4)),
                                "msg_rate": float(match.group(5))})
    if out["rows"]:
        out["bw_average"] = out["rows"][-1]["bw_average"]
        out["bw_average_max"] = max(row["bw_average"] for row in out["rows"])
    out["ok"] = bool(out["rows"]) and not out["completion_error"] and out["failed_status"] is None \
        and "Failed to complete" not in raw
    return out
