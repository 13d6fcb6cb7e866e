"""Pure RoCE / RDMA diagnosis for one node, and the NCCL settings derived from it.

No I/O here: ``plugins/modules/roce_health.py`` reads sysfs and runs the tools, the parsers in
``rdma_parsers.py`` / ``rdma_tools.py`` turn that into data, and this file decides.

Facts in (:func:`diagnose`)::

    ports:             [port]   # rdma_parsers shape; may be []
    mellanox_nics:     [{address, device_id, class}]   # pci.classify_pci
    interfaces:        {ifname: {ipv4: [..], mtu, ...}}  # rdma_parsers.parse_ip_json
    fabric_interface:  "ens1f0" or None
    fabric_ipv4:       "192.0.2.10" or None
    qos:               {netdev: mlnx_qos dict}   # only where mlnx_qos ran

Sources for the rules (see docs/troubleshooting.md):

* GID choice: NCCL ``src/transport/net_ib`` selects a RoCE v2 GID of family AF_INET by default
  (``NCCL_IB_ROCE_VERSION_NUM=2``, ``NCCL_IB_ADDR_FAMILY=AF_INET``) and skips link-local GIDs;
  perftest's ``get_best_gid_index`` prefers IPv4-mapped, then v2. The index differs per host
  (case C06: 3 on one, 7 on another), so it is looked up, never assumed.
* Port health: ``state`` ``4: ACTIVE`` and ``phys_state`` ``5: LinkUp`` (LBNL NHC ``check_hw_ib``,
  NVSentinel link-state design).
* MTU: RoCE's active MTU is the largest IB MTU that fits the netdev MTU less 96 bytes of headers
  (Linux ``include/rdma/ib_addr.h`` ``iboe_get_mtu``): netdev 9000 -> 4096, 1500 -> 1024. The
  4096 default is the RoCE expectation in the anchors (OCI/NVIDIA RoCE setups run netdev MTU
  9000 and active_mtu 4096).
* Interface selection: NCCL ``findInterfaces`` (``^`` excludes, ``=`` exact, else prefix, comma
  list, ``name:port`` items) and PyTorch's distributed docs for ``GLOO_SOCKET_IFNAME``
  (concrete names, comma separated, same count on every process).
"""
from __future__ import annotations

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import gid_entry, parse_gid_line

DEFAULT_MIN_MTU = 4096
NO_RDMA_SEVERITIES = ("error", "warning", "info")
VIRTUAL_PREFIXES = ("docker", "virbr", "veth", "podman", "cni", "flannel", "cali", "br-")


def _gid_rows(gid_table):
    """Accept gid_entry dicts or ``'GID[3]: ::ffff:a.b.c.d, RoCE v2'`` strings."""
    rows = []
    for item in gid_table or []:
        if isinstance(item, dict):
            if "version" in item and "link_local" in item:
                rows.append(item)
            else:
                entry = gid_entry(item.get("index"), item.get("gid"), item.get("type"), item.get("ndev"))
                if entry:
                    rows.append(entry)
        else:
            entry = parse_gid_line(item)
            if entry:
                rows.append(entry)
    return sorted(rows, key=lambda e: e["index"])


def recommend_gid_index(gid_table, ipv4=None):
    """The index of the RoCE v2 GID that is the IPv4-mapped address ``::ffff:<ipv4>``.

    :param gid_table: GID entries (dicts from the parsers, or ``GID[i]: ..., RoCE v2`` lines).
    :param ipv4: the fabric interface's IPv4 address. When None, the first RoCE v2 IPv4-mapped,
        non-link-local entry (perftest's choice without an address).
    :returns: int index, or None when the table has no such entry.
    """
    for entry in _gid_rows(gid_table):
        if entry["version"] != 2 or entry["link_local"] or not entry["ipv4"]:
            continue
        if ipv4 is None or entry["ipv4"] == str(ipv4).strip():
            return entry["index"]
    return None


def check_gid_index(configured, gid_table, ipv4, subject="NCCL_IB_GID_INDEX"):
    """Problems with a configured ``NCCL_IB_GID_INDEX`` against this port's GID table.

    ``None``/``''``/``-1`` (NCCL >= 2.21 chooses itself) are not checked.
    """
    if configured is None or str(configured).strip() in ("", "-1"):
        return []
    try:
        index = int(str(configured).strip())
    except ValueError:
        return [problem("ROCE_GID_INDEX_MISMATCH", "error", subject,
                        "NCCL_IB_GID_INDEX=%r is not an integer" % (configured,),
                        "set NCCL_IB_GID_INDEX to the index this module recommends, or leave it unset "
                        "(NCCL >= 2.21 picks the RoCE v2 IPv4 GID itself)")]
    rows = dict((e["index"], e) for e in _gid_rows(gid_table))
    best = recommend_gid_index(gid_table, ipv4)
    fix = ("set NCCL_IB_GID_INDEX=%d (the RoCE v2 GID of %s) in /etc/nccl.conf, or leave it unset with "
           "NCCL >= 2.21" % (best, ipv4)) if best is not None else \
        "give the fabric interface an IPv4 address so a RoCE v2 GID appears, then use its index"
    entry = rows.get(index)
    if entry is None:
        return [problem("ROCE_GID_INDEX_MISMATCH", "error", subject,
                        "NCCL_IB_GID_INDEX=%d points at an empty GID slot" % index, fix)]
    if entry["link_local"]:
        return [problem("ROCE_GID_LINK_LOCAL", "error", subject,
                        "NCCL_IB_GID_INDEX=%d is the link-local GID %s (%s): it is not routed, queue pairs "
                        "to other nodes time out" % (index, entry["gid"], entry["type"]), fix)]
    if entry["version"] != 2:
        return [problem("ROCE_GID_V1", "error", subject,
                        "NCCL_IB_GID_INDEX=%d is a %s GID (%s); NCCL expects RoCE v2 (routable, UDP)"
                        % (index, entry["type"] or "non-RoCE-v2", entry["gid"]), fix)]
    if best is not None and index != best:
        return [problem("ROCE_GID_INDEX_MISMATCH", "error", subject,
                        "NCCL_IB_GID_INDEX=%d (%s) is not the RoCE v2 GID of the fabric address %s, which is "
                        "index %d" % (index, entry["gid"], ipv4, best), fix)]
    return []


# ---------------------------------------------------------------------------------------------
# NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME
# ---------------------------------------------------------------------------------------------

def parse_nccl_ifname(value):
    """NCCL's syntax: optional ``^`` (exclude), then optional ``=`` (exact), then a comma list of
    ``name[:port]``. Returns ``(exclude, exact, names)``."""
    text = str(value or "").strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    names = [item.split(":", 1)[0].strip() for item in text.split(",")]
    return exclude, exact, names


def nccl_selected(value, interfaces):
    """The interfaces NCCL would consider for ``NCCL_SOCKET_IFNAME=value``, in the given order."""
    exclude, exact, names = parse_nccl_ifname(value)
    names = [n for n in names if n]
    chosen = []
    for ifname in interfaces:
        hit = any((ifname == n) if exact else ifname.startswith(n) for n in names)
        if hit != exclude:
            chosen.append(ifname)
    return chosen


def _is_loopback(name):
    return name == "lo" or name.startswith("lo:")


def _is_virtual(name):
    return name.startswith(VIRTUAL_PREFIXES)


def interface_selection_problems(value, interfaces, var):
    """Problems with an ``NCCL_SOCKET_IFNAME`` or ``GLOO_SOCKET_IFNAME`` value on this node (case C04).

    :param value: the value as it would be exported; None or '' is not checked.
    :param interfaces: this node's interface names (order as the kernel lists them).
    :param var: ``'NCCL_SOCKET_IFNAME'`` or ``'GLOO_SOCKET_IFNAME'`` (any case).
    """
    if value is None or str(value).strip() == "":
        return []
    var = str(var).upper()
    value = str(value).strip()
    names_here = list(interfaces or [])
    out = []
    if var.startswith("GLOO"):
        items = [item.strip() for item in value.split(",")]
        if value.startswith(("^", "=")) or any(not item for item in items) or any(":" in item for item in items):
            return [problem("IFNAME_GLOO_SYNTAX", "error", var,
                            "GLOO_SOCKET_IFNAME=%s uses NCCL's list syntax; Gloo takes concrete interface "
                            "names only (no ^ exclusion, no = or prefixes, no ports)" % value,
                            "set GLOO_SOCKET_IFNAME to the fabric interface name, e.g. %s"
                            % (names_here[0] if names_here else "ens1f0"))]
        missing = [item for item in items if item not in names_here]
        if missing:
            out.append(problem("IFNAME_NOT_FOUND", "error", var,
                               "GLOO_SOCKET_IFNAME names %s, which this node does not have (it has: %s)"
                               % (", ".join(missing), ", ".join(names_here) or "none"),
                               "use an interface name that exists on every node (rename interfaces "
                               "consistently, or set the variable per node)"))
        selected = [item for item in items if item in names_here]
    else:
        exclude, exact, names = parse_nccl_ifname(value)
        if not any(names) or any(not n for n in names):
            return [problem("IFNAME_SYNTAX", "error", var,
                            "NCCL_SOCKET_IFNAME=%s has an empty item" % value,
                            "write a comma list of interface prefixes, ^ to exclude, = for exact names")]
        selected = nccl_selected(value, names_here)
        if not selected:
            return [problem("IFNAME_NOT_FOUND", "error", var,
                            "NCCL_SOCKET_IFNAME=%s matches no interface on this node (it has: %s)"
                            % (value, ", ".join(names_here) or "none"),
                            "use a prefix or name that exists on every node")]
        if not exclude:
            unused = [n for n in names if not any(
                (i == n) if exact else i.startswith(n) for i in names_here)]
            if unused:
                out.append(problem("IFNAME_NOT_FOUND", "warning", var,
                                   "NCCL_SOCKET_IFNAME item(s) %s match no interface on this node"
                                   % ", ".join(unused), "drop the item or fix its name"))
    loop = [n for n in selected if _is_loopback(n)]
    if loop:
        out.append(problem("IFNAME_LOOPBACK", "error", var,
                           "%s=%s selects the loopback interface %s: a process may advertise 127.0.0.1 and "
                           "ranks on other nodes cannot reach it" % (var, value, loop[0]),
                           "exclude it (e.g. ^docker,lo) or name the fabric interface"))
    virtual = [n for n in selected if _is_virtual(n)]
    if virtual:
        out.append(problem("IFNAME_VIRTUAL", "warning", var,
                           "%s=%s selects container/bridge interface(s) %s, which other nodes usually "
                           "cannot reach" % (var, value, ", ".join(virtual)),
                           "exclude them (^docker,lo) or name the fabric interface"))
    return out


# ---------------------------------------------------------------------------------------------
# the node diagnosis
# ---------------------------------------------------------------------------------------------

def _subject(port):
    return "%s port %s%s" % (port.get("device"), port.get("port"),
                             " (%s)" % port["netdev"] if port.get("netdev") else "")


def _port_ipv4(port, interfaces):
    info = (interfaces or {}).get(port.get("netdev") or "", {})
    if info.get("ipv4"):
        return info["ipv4"][0]
    for gid in port.get("gids") or []:
        if gid.get("version") == 2 and gid.get("ipv4") and not gid.get("link_local") and \
                (gid.get("ndev") in (None, port.get("netdev"))):
            return gid["ipv4"]
    return None


def _port_up(port):
    # ibv_devinfo without -v prints no phys_state: ACTIVE alone then says the link is up.
    return port.get("state") == "ACTIVE" and port.get("phys_state") in ("LinkUp", None)


def choose_fabric_interface(ports, interfaces, default_route_if=None):
    """Default fabric interface: the netdev of the first RoCE port that has an IPv4 address, else
    the first RDMA port's netdev, else the default-route interface."""
    with_netdev = [p for p in ports or [] if p.get("netdev")]
    for port in with_netdev:
        if port.get("link_layer") == "Ethernet" and _port_ipv4(port, interfaces):
            return port["netdev"]
    if with_netdev:
        return with_netdev[0]["netdev"]
    return default_route_if


def _exact_if_ambiguous(names, universe):
    """NCCL matches prefixes: ``mlx5_1`` also selects ``mlx5_10``. Prefix ``=`` when that would bite."""
    for name in names:
        if any(other != name and other.startswith(name) and other not in names for other in universe):
            return True
    return False


def nccl_settings(facts):
    """Derived NCCL settings for /etc/nccl.conf (only the keys that could be worked out).

    :returns: dict with ``NCCL_IB_HCA`` (``mlx5_0:1,mlx5_1:1``; ``=`` first when a name is a prefix
        of another device here), ``NCCL_IB_GID_INDEX`` (string; only when every RoCE port in the
        HCA list agrees) and ``NCCL_SOCKET_IFNAME`` (the fabric interface; ``=`` first when it is a
        prefix of another interface).
    """
    ports = facts.get("ports") or []
    interfaces = facts.get("interfaces") or {}
    conf = {}
    usable = []
    indices = set()
    for port in ports:
        if not _port_up(port):
            continue
        if port.get("link_layer") == "Ethernet":
            index = recommend_gid_index(port.get("gids"), _port_ipv4(port, interfaces))
            if index is None:
                continue
            indices.add(index)
        usable.append(port)
    if usable:
        devices = sorted(set(p["device"] for p in ports))
        names = sorted(set(p["device"] for p in usable))
        items = ",".join("%s:%s" % (p["device"], p["port"]) for p in usable)
        conf["NCCL_IB_HCA"] = ("=" if _exact_if_ambiguous(names, devices) else "") + items
    if len(indices) == 1:
        conf["NCCL_IB_GID_INDEX"] = str(indices.pop())
    fabric = facts.get("fabric_interface")
    if fabric:
        conf["NCCL_SOCKET_IFNAME"] = ("=" if _exact_if_ambiguous([fabric], list(interfaces)) else "") + fabric
    return conf


def hca_selected(device, port, hca_list):
    """True when NCCL_IB_HCA (``[^][=]mlx5_0[:1],mlx5_1``; prefix match unless ``=``) selects this device/port;
    None when no list is given."""
    if not hca_list or not str(hca_list).strip():
        return None
    text = str(hca_list).strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    hit = False
    for item in text.split(","):
        name, _sep, num = item.strip().partition(":")
        if not name:
            continue
        match = device == name if exact else str(device).startswith(name)
        if match and (not num or str(num) == str(port)):
            hit = True
    return hit != exclude


def fabric_reasons(port, ports, is_fabric_port=False, ipv4=None, hca_list=None):
    """Why a port counts as part of the fabric (so that it being down is an error), as phrases; [] when nothing
    says so.

    A port is part of the fabric when it is the fabric interface's, has an IPv4 address, is selected by
    ``NCCL_IB_HCA``, has a trained link (``LinkUp``: a cable and a peer are there), or, for InfiniBand, when the same
    port number of the node's other InfiniBand HCAs is ACTIVE and it is not administratively ``Disabled`` (compute
    HCAs come in sets, one per rail: NVSentinel's "card homogeneity"; an IB port needs no IP address to carry NCCL
    traffic).
    """
    why = []
    if is_fabric_port:
        why.append("it carries the fabric interface")
    if ipv4:
        why.append("it has the IPv4 address %s" % ipv4)
    if hca_selected(port.get("device"), port.get("port"), hca_list):
        why.append("NCCL_IB_HCA=%s selects it" % hca_list)
    if port.get("phys_state") == "LinkUp":
        why.append("its link is trained (LinkUp)")
    if port.get("link_layer") == "InfiniBand" and port.get("phys_state") != "Disabled":
        # The same port number on the node's other HCAs (the rails: mlx5_0/1 ... mlx5_7/1); the unused second port
        # of dual-port cards does not make the other second ports part of the fabric.
        peers = ["%s/%s" % (p.get("device"), p.get("port")) for p in ports
                 if p.get("device") != port.get("device") and p.get("port") == port.get("port")
                 and p.get("link_layer") == "InfiniBand" and _port_up(p)]
        if peers:
            why.append("port %s of the node's other InfiniBand HCAs (%s) is ACTIVE"
                       % (port.get("port"), ", ".join(peers[:4])))
    return why


def _no_rdma(facts, params, nics):
    out = []
    if nics:
        out.append(problem(
            "ROCE_NIC_WITHOUT_RDMA_DEVICE", "error", "node",
            "%d Mellanox NIC(s) on the PCI bus (%s) but no RDMA device in /sys/class/infiniband: NCCL finds "
            "no IB device and silently falls back to TCP sockets"
            % (len(nics), ", ".join(n.get("address", "?") for n in nics)),
            "install rdma-core (or MLNX_OFED/DOCA-OFED) and load mlx5_ib (modprobe mlx5_ib; check dmesg for "
            "mlx5_core errors); the ddp.cluster.rdma role does both"))
    else:
        severity = params.get("no_rdma_severity") or "warning"
        out.append(problem(
            "NO_RDMA", severity, "node",
            "no RDMA device and no Mellanox NIC: NCCL will use TCP sockets between nodes",
            "expected on CPU-only or test nodes; for RoCE, check the NIC is seated and visible in lspci"))
    return out


def diagnose(facts, params=None):
    """All problems for one node.

    :param facts: see the module docstring.
    :param params: ``{nccl_ib_gid_index, nccl_socket_ifname, gloo_socket_ifname, nccl_net, nccl_ib_hca, min_mtu,
        no_rdma_severity}``; missing keys take their defaults. A port that is down is an error when it is part of
        the fabric (:func:`fabric_reasons`), else a warning; an InfiniBand port with a link but no subnet manager
        (state INIT/ARMED on LinkUp, or SM lid 0) is ``IB_PORT_NO_SM``, an ACTIVE one without a LID
        ``IB_PORT_NO_LID``.
    :returns: list of problem dicts (diagnosis.problem shape).
    """
    params = params or {}
    ports = facts.get("ports") or []
    nics = facts.get("mellanox_nics") or []
    interfaces = facts.get("interfaces") or {}
    min_mtu = params.get("min_mtu") or DEFAULT_MIN_MTU
    problems = []

    nccl_net = str(params.get("nccl_net") or "").strip()
    if nccl_net.lower() == "socket" and (nics or ports):
        problems.append(problem(
            "ROCE_NCCL_NET_SOCKET", "warning", "NCCL_NET",
            "NCCL_NET=Socket forces TCP sockets although this node has %s"
            % ("RDMA ports" if ports else "a Mellanox NIC"),
            "unset NCCL_NET (or set NCCL_NET=IB) once the RDMA device is up; keep Socket only for a "
            "deliberate RDMA-off benchmark run"))

    for var in ("nccl_socket_ifname", "gloo_socket_ifname"):
        problems.extend(interface_selection_problems(params.get(var), list(interfaces), var.upper()))

    if not ports:
        return _no_rdma(facts, params, nics) + problems

    fabric = facts.get("fabric_interface")
    fabric_port = None
    for port in ports:
        if fabric and port.get("netdev") == fabric:
            fabric_port = port
            break

    hca_list = params.get("nccl_ib_hca")
    for port in ports:
        problems.extend(_port_problems(port, ports, fabric_port, facts, interfaces, hca_list, min_mtu))

    problems.extend(_gid_index_problems(params, ports, fabric_port, interfaces))
    return problems


def _port_problems(port, ports, fabric_port, facts, interfaces, hca_list, min_mtu):
    """The problems of one RDMA port: down, no subnet manager or LID (InfiniBand), GID, MTU and PFC (RoCE).

    :returns: list of problem dicts.
    """
    subject = _subject(port)
    ipv4 = _port_ipv4(port, interfaces)
    why = fabric_reasons(port, ports, port is fabric_port, ipv4, hca_list)
    addressed = port is fabric_port or bool(ipv4)  # what the RoCE checks (GID, MTU) need to judge a port
    infiniband = port.get("link_layer") == "InfiniBand"
    if not _port_up(port):
        return [_port_down_problem(port, subject, infiniband, why)]
    problems = []
    if infiniband:
        problems.extend(_ib_port_problems(port, subject))
    if port.get("link_layer") != "Ethernet":
        return problems
    problems.extend(_roce_port_problems(port, subject, facts, interfaces, ipv4, addressed, min_mtu))
    return problems


def _port_down_problem(port, subject, infiniband, why):
    """The problem of a port that is not ACTIVE: ``IB_PORT_NO_SM`` for an InfiniBand link no subnet manager
    configured, else ``ROCE_PORT_DOWN`` (an error when ``why`` says it is part of the fabric).

    :returns: one problem dict.
    """
    in_use = bool(why)
    if infiniband and port.get("phys_state") == "LinkUp" and port.get("state") in ("INIT", "ARMED"):
        return problem(
            "IB_PORT_NO_SM", "error", subject,
            "the link is up (LinkUp) but the port stays %s%s: no subnet manager configures it"
            % (port.get("state"), " (SM lid 0)" if port.get("sm_lid") == 0 else ""),
            "run a subnet manager on the fabric (the switch's, UFM, or `systemctl enable --now opensm` on one "
            "node); `sminfo` and `ibstat` (SM lid) show whether one answers")
    return problem(
        "ROCE_PORT_DOWN", "error" if in_use else "warning", subject,
        "%sport state %s, physical state %s (want ACTIVE / LinkUp)%s"
        % ("InfiniBand " if infiniband else "", port.get("state"), port.get("phys_state"),
           "; it is part of the fabric: %s" % "; ".join(why) if in_use else
           "; nothing marks it as part of the fabric (no IPv4 address, not in NCCL_IB_HCA, no link, no "
           "other port of its kind up), so it may be unused"),
        "check the cable, the switch port and `ip link set %s up`; Polling means no link partner (cable, "
        "transceiver or switch port), Disabled means administratively down; name only cabled ports in "
        "NCCL_IB_HCA" % (port.get("netdev") or "<netdev>"))


def _ib_port_problems(port, subject):
    """The problems of an ACTIVE InfiniBand port: no LID, or no subnet manager (SM lid 0).

    :returns: list of problem dicts (at most one).
    """
    problems = []
    if port.get("lid") in (0, 0xFFFF):
        problems.append(problem(
            "IB_PORT_NO_LID", "error", subject,
            "the InfiniBand port is ACTIVE but has no LID (%s)%s: the subnet manager did not assign one, "
            "so no peer can address it" % ("0x%x" % port["lid"],
                                           "; SM lid 0" if port.get("sm_lid") == 0 else ""),
            "check the subnet manager (`sminfo`, the switch/UFM or opensm log) and re-sweep; `ibstat` shows "
            "Base lid once it is assigned"))
    elif port.get("sm_lid") == 0 and port.get("lid") is not None:
        problems.append(problem(
            "IB_PORT_NO_SM", "error", subject,
            "the InfiniBand port has no subnet manager (SM lid 0)",
            "run a subnet manager on the fabric (switch, UFM or opensm) and check `sminfo`"))
    return problems


def _roce_port_problems(port, subject, facts, interfaces, ipv4, addressed, min_mtu):
    """The problems of an ACTIVE RoCE (Ethernet) port: no RoCE v2 GID, a low MTU, PFC off.

    :returns: list of problem dicts.
    """
    problems = []
    if addressed and recommend_gid_index(port.get("gids"), ipv4) is None:
        problems.append(problem(
            "ROCE_NO_V2_GID", "error", subject,
            "no RoCE v2 GID for %s in the GID table%s" % (
                ipv4 or "an IPv4 address",
                "" if port.get("gids") else " (the table is empty)"),
            "give %s an IPv4 address (the kernel then adds the ::ffff:a.b.c.d GIDs); check "
            "/sys/class/infiniband/%s/ports/%s/gid_attrs/types/* shows 'RoCE v2' (cma_roce_mode)"
            % (port.get("netdev") or "the netdev", port.get("device"), port.get("port"))))
    mtu = port.get("active_mtu")
    if addressed and mtu is not None and mtu < min_mtu:
        netdev_mtu = port.get("netdev_mtu") or (interfaces.get(port.get("netdev") or "", {}) or {}).get("mtu")
        problems.append(problem(
            "ROCE_MTU_LOW", "warning", subject,
            "RoCE active_mtu %d is below %d%s" % (
                mtu, min_mtu, " (netdev MTU %s)" % netdev_mtu if netdev_mtu else ""),
            "set the netdev MTU to 9000 (the switch ports too); RoCE then runs at active_mtu 4096"))
    qos = (facts.get("qos") or {}).get(port.get("netdev") or "")
    if qos and qos.get("pfc") is not None and not qos.get("pfc_enabled"):
        problems.append(problem(
            "ROCE_PFC_DISABLED", "warning", subject,
            "PFC is disabled on every priority (trust %s): without flow control (or ECN-only congestion "
            "control agreed with the switch) RoCE drops packets under load and all-reduce bandwidth "
            "collapses" % (qos.get("trust") or "unknown"),
            "enable PFC on the RoCE priority, matching the switch (commonly: mlnx_qos -i %s --trust dscp "
            "--pfc 0,0,0,1,0,0,0,0); ask the network team which priority the fabric uses"
            % (port.get("netdev") or "<if>")))
    return problems


def _gid_index_problems(params, ports, fabric_port, interfaces):
    """Check NCCL_IB_GID_INDEX against the fabric port (or the first RoCE port), and whether one index fits every
    RoCE port.

    :returns: list of problem dicts.
    """
    problems = []
    if fabric_port is not None and fabric_port.get("link_layer") == "Ethernet":
        problems.extend(check_gid_index(params.get("nccl_ib_gid_index"), fabric_port.get("gids"),
                                        _port_ipv4(fabric_port, interfaces)))
    elif params.get("nccl_ib_gid_index") not in (None, ""):
        roce = [p for p in ports if p.get("link_layer") == "Ethernet"]
        if roce:
            problems.extend(check_gid_index(params.get("nccl_ib_gid_index"), roce[0].get("gids"),
                                            _port_ipv4(roce[0], interfaces)))

    roce_indices = set()
    for port in ports:
        if port.get("link_layer") == "Ethernet" and _port_up(port):
            index = recommend_gid_index(port.get("gids"), _port_ipv4(port, interfaces))
            if index is not None:
                roce_indices.add(index)
    if len(roce_indices) > 1:
        problems.append(problem(
            "ROCE_GID_INDEX_VARIES", "info", "node",
            "the RoCE v2 IPv4 GID sits at different indexes on this node's ports (%s): one "
            "NCCL_IB_GID_INDEX cannot fit all" % ", ".join(str(i) for i in sorted(roce_indices)),
            "leave NCCL_IB_GID_INDEX unset (NCCL >= 2.21 picks per device); nccl_conf omits it"))
    return problems
