"""Pure parsers for the RDMA / RoCE inventory: ports, states, MTUs and GID tables.

No I/O here: callers pass the text a command printed, or a sysfs tree as a dict ``path -> content``.
Every parser returns plain lists and dicts, so the same port shape comes out of every source::

    {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
     "link_layer": "Ethernet", "rate": "100 Gb/sec (4X EDR)", "rate_gbps": 100.0,
     "active_mtu": 4096, "max_mtu": 4096, "netdev": "ens1f0",
     "gids": [{"index": 3, "gid": "::ffff:192.0.2.10", "type": "RoCE v2", "version": 2,
               "ipv4": "192.0.2.10", "link_local": False, "ndev": "ens1f0"}]}

Keys a source does not print are ``None`` (``active_mtu`` is not in sysfs: it comes from
``ibv_devinfo`` or is derived from the netdev MTU with :func:`roce_active_mtu`).

Formats handled (real outputs in tests/unit/fixtures/rdma/, see SOURCES.md there): ``ibv_devinfo``
and ``ibv_devinfo -v`` (tabs or spaces; ``GID[  3]: ::ffff:a.b.c.d, RoCE v2`` lines, newer
rdma-core); ``/sys/class/infiniband/<dev>/ports/<n>/`` and the same tree under
``/sys/bus/pci/devices/<addr>/infiniband/`` (facebookresearch/gcm test-state layout);
``rdma link show`` (old ``4/1: mlx5_3/1:`` and new ``link mlx5_0/1`` forms, ``-d``) and
``rdma -j link``; ``ibstat`` (also ``ibstat | grep``); ``ibstatus``;
``ip -j link`` / ``ip -j addr`` JSON (also gcm's ``{"intf_status": [...]}`` wrapper);
``ip -j route show default``.
"""
from __future__ import annotations

import ipaddress
import json
import re

# IB port states (ib_port_state) and physical states, as sysfs prints them ("4: ACTIVE", "5: LinkUp").
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
               5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}
_PHYS_BY_KEY = dict((name.lower(), name) for name in PHYS_STATES.values())
_PHYS_BY_KEY.update({"link_up": "LinkUp", "linkup": "LinkUp", "link_error_recovery": "LinkErrorRecovery",
                     "port_configuration_training": "PortConfigurationTraining", "phy_test": "PhyTest"})
IB_MTUS = (256, 512, 1024, 2048, 4096)
# include/rdma/ib_addr.h iboe_get_mtu(): GRH 40 + UDP 8 + BTH 12 + XRC ext 4 + AtomicETH 28 + ICRC 4.
ROCE_MTU_OVERHEAD = 96


def _int(text):
    try:
        return int(str(text).strip(), 0)
    except (TypeError, ValueError):
        return None


def _numbered_state(text, table):
    """Shared first step of the state normalisers.

    :returns: ``(raw, known)``: the stripped text (None when empty) and, for a sysfs-style
        ``'N: NAME'`` value whose number is in ``table``, the table's name for it (else None).
    """
    raw = str(text).strip() if text is not None else ""
    if not raw:
        return None, None
    match = re.match(r"^(\d+)\s*:", raw)
    if match and _int(match.group(1)) in table:
        return raw, table[_int(match.group(1))]
    return raw, None


def normalize_state(text):
    """``'4: ACTIVE'``, ``'PORT_ACTIVE (4)'``, ``'Active'``, ``'ACTIVE'`` -> ``'ACTIVE'``; None if empty."""
    raw, known = _numbered_state(text, PORT_STATES)
    if raw is None or known:
        return known
    word = re.sub(r"\(\d+\)", "", raw).strip().upper()
    if word.startswith("PORT_"):
        word = word[len("PORT_"):]
    if word in ("INITIALIZING", "INITIALIZE"):
        word = "INIT"  # ibstat's word for INIT (infiniband-diags)
    return word or None


def normalize_phys_state(text):
    """``'5: LinkUp'``, ``'LINK_UP (5)'``, ``'LINK_UP'``, ``'POLLING (2)'`` -> ``'LinkUp'`` / ``'Polling'``."""
    raw, known = _numbered_state(text, PHYS_STATES)
    if raw is None or known:
        return known
    word = re.sub(r"\(\d+\)", "", raw).strip()
    return _PHYS_BY_KEY.get(word.lower(), _PHYS_BY_KEY.get(word.lower().replace(" ", ""), word))


def normalize_link_layer(text):
    """``'IB'`` / ``'InfiniBand'`` -> ``'InfiniBand'``; ``'Ethernet'`` stays; None if empty."""
    if text is None:
        return None
    raw = str(text).strip()
    if raw.lower() in ("ib", "infiniband"):
        return "InfiniBand"
    if raw.lower() == "ethernet":
        return "Ethernet"
    return raw or None


def _mtu(text):
    """``'4096 (5)'`` or ``'4096'`` -> 4096."""
    match = re.match(r"\s*(\d+)", str(text or ""))
    return int(match.group(1)) if match else None


def rate_gbps(text):
    """``'100 Gb/sec (4X EDR)'``, ``'56'`` -> 100.0, 56.0; None when absent."""
    match = re.match(r"\s*([\d.]+)", str(text or ""))
    return float(match.group(1)) if match else None


def roce_active_mtu(netdev_mtu):
    """The RoCE active MTU the kernel derives from a netdev MTU (``iboe_get_mtu``): 9000 -> 4096, 1500 -> 1024."""
    mtu = _int(netdev_mtu)
    if mtu is None:
        return None
    payload = mtu - ROCE_MTU_OVERHEAD
    best = None
    for size in IB_MTUS:
        if payload >= size:
            best = size
    return best


def gid_version(type_text):
    """``'RoCE v2'`` -> 2, ``'IB/RoCE v1'`` / ``'v1'`` -> 1, ``'IB'`` / None -> None."""
    text = str(type_text or "").lower()
    if "v2" in text:
        return 2
    if "v1" in text:
        return 1
    return None


def gid_entry(index, gid, type_text=None, ndev=None):
    """One GID table entry, or None for an unset (all-zero) or unreadable GID.

    ``ipv4`` is the IPv4 address when the GID is IPv4-mapped (``::ffff:a.b.c.d``), ``link_local``
    is True for fe80::/10 (not routed: NCCL skips these, case C06).
    """
    text = str(gid or "").strip()
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    if addr.packed == b"\x00" * 16:
        return None
    version = gid_version(type_text)
    if version == 2:
        gid_type = "RoCE v2"
    elif version == 1:
        gid_type = "RoCE v1"
    else:
        gid_type = (str(type_text).strip() or None) if type_text is not None else None
    mapped = addr.ipv4_mapped
    return {
        "index": int(index),
        "gid": text,
        "type": gid_type,
        "version": version,
        "ipv4": str(mapped) if mapped is not None else None,
        "link_local": addr.is_link_local,
        "ndev": (str(ndev).strip() or None) if ndev is not None else None,
    }


_GID_LINE = re.compile(r"GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(.+?))?\s*$")


def parse_gid_line(line):
    """``'GID[  3]:  ::ffff:192.0.2.10, RoCE v2'`` -> a :func:`gid_entry`; None when not a GID line."""
    match = _GID_LINE.search(str(line))
    if not match:
        return None
    return gid_entry(match.group(1), match.group(2), match.group(3))


def new_port(device, port):
    """An empty port record (every key present)."""
    return {"device": device, "port": port, "state": None, "phys_state": None, "link_layer": None,
            "rate": None, "rate_gbps": None, "active_mtu": None, "max_mtu": None, "netdev": None,
            "gids": [], "lid": None, "sm_lid": None}


# ---------------------------------------------------------------------------------------------
# ibv_devinfo [-v]
# ---------------------------------------------------------------------------------------------

_KV = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_ ]*?):\s*(.*?)\s*$")


def parse_ibv_devinfo(text):
    """Parse ``ibv_devinfo`` or ``ibv_devinfo -v``.

    :returns: list of devices ``{hca_id, transport, fw_ver, node_guid, vendor_id, vendor_part_id,
        board_id, phys_port_cnt, ports: [port]}``; ``[]`` for "No IB devices found" or empty text.
        A port whose ``port:`` line is elided (rdma-core's commit-message excerpt) gets ``port=None``.
    """
    devices = []
    dev = None
    port = None
    in_ports = False
    for line in str(text or "").splitlines():
        gid = parse_gid_line(line) if "GID[" in line else None
        if gid is not None:
            if dev is None:
                continue
            if port is None:
                port = new_port(dev["hca_id"], None)
                dev["ports"].append(port)
            port["gids"].append(gid)
            continue
        match = _KV.match(line)
        if not match:
            if line.strip() == "Device ports:":
                in_ports = True
            continue
        key, value = match.group(1).strip(), match.group(2)
        if key == "hca_id":
            dev = {"hca_id": value, "transport": None, "fw_ver": None, "node_guid": None,
                   "vendor_id": None, "vendor_part_id": None, "board_id": None,
                   "phys_port_cnt": None, "ports": []}
            devices.append(dev)
            port = None
            in_ports = False
            continue
        if dev is None:
            continue
        if key == "Device ports":
            in_ports = True
            continue
        if key == "port":
            port = new_port(dev["hca_id"], _int(value))
            dev["ports"].append(port)
            in_ports = True
            continue
        port_key = key in ("state", "phys_state", "link_layer", "active_mtu", "max_mtu",
                           "active_speed", "active_width", "port_lid", "sm_lid")
        if port_key and port is None:
            # an excerpt that elides the "port:" line still carries port fields
            port = new_port(dev["hca_id"], None)
            dev["ports"].append(port)
        if port is not None and (in_ports or port_key):
            if key == "state":
                port["state"] = normalize_state(value)
            elif key == "phys_state":
                port["phys_state"] = normalize_phys_state(value)
            elif key == "link_layer":
                port["link_layer"] = normalize_link_layer(value)
            elif key in ("active_mtu", "max_mtu"):
                port[key] = _mtu(value)
            elif key in ("port_lid", "sm_lid"):
                port["lid" if key == "port_lid" else "sm_lid"] = _int(value)
            continue
        if key in ("transport", "fw_ver", "node_guid", "vendor_id", "vendor_part_id", "board_id"):
            dev[key] = value
        elif key == "phys_port_cnt":
            dev[key] = _int(value)
    return devices


# ---------------------------------------------------------------------------------------------
# sysfs: /sys/class/infiniband/<dev>/ports/<n>/... as a dict path -> content
# ---------------------------------------------------------------------------------------------

_SYSFS_PORT = re.compile(r"(?:^|/)infiniband/([^/]+)/ports/(\d+)/(.+)$")
_SYSFS_DEV = re.compile(r"(?:^|/)devices/([^/]+)/infiniband/([^/]+)/")
_SYSFS_NET_PCI = re.compile(r"(?:^|/)bus/pci/devices/([^/]+)/net/([^/]+)/([^/]+)$")
_SYSFS_NET_CLASS = re.compile(r"(?:^|/)infiniband/([^/]+)/device/net/([^/]+)/([^/]+)$")


def _strip(value):
    return None if value is None else str(value).strip()


def parse_sysfs_ib(tree):
    """Ports from a sysfs tree given as ``{path: content}``.

    Understands ``.../infiniband/<dev>/ports/<n>/{state,phys_state,link_layer,rate}``,
    ``gids/<i>``, ``gid_attrs/types/<i>`` (``"IB/RoCE v1"`` / ``"RoCE v2"``),
    ``gid_attrs/ndevs/<i>``, and the netdevs of the same PCI function
    (``/sys/bus/pci/devices/<addr>/net/<if>/{mtu,operstate,dev_port}`` or
    ``/sys/class/infiniband/<dev>/device/net/<if>/...``). A value of ``None`` (unreadable file:
    the kernel answers EINVAL for the type of an unset GID) is skipped.

    :returns: list of ports sorted by (device, port), each with ``pci_address``, ``netdev``
        (from the GID ndevs, else the function's netdev whose ``dev_port`` is port-1, else its only
        netdev), ``netdev_mtu`` and ``netdev_operstate``.
    """
    ports = {}
    raw_gids = {}
    dev_parent = {}
    netdevs = {}
    for path, content in (tree or {}).items():
        match = _SYSFS_PORT.search(path)
        if match:
            dev, num, rel = match.group(1), int(match.group(2)), match.group(3)
            port = ports.setdefault((dev, num), new_port(dev, num))
            value = _strip(content)
            if rel == "state":
                port["state"] = normalize_state(value)
            elif rel == "phys_state":
                port["phys_state"] = normalize_phys_state(value)
            elif rel == "link_layer":
                port["link_layer"] = normalize_link_layer(value)
            elif rel == "rate":
                port["rate"] = value or None
                port["rate_gbps"] = rate_gbps(value)
            elif rel in ("lid", "sm_lid"):
                port[rel] = _int(value)
            else:
                gid_match = re.match(r"^(gids|gid_attrs/types|gid_attrs/ndevs)/(\d+)$", rel)
                if gid_match and value is not None:
                    slot = raw_gids.setdefault((dev, num), {}).setdefault(int(gid_match.group(2)), {})
                    slot[gid_match.group(1).split("/")[-1]] = value
            pci = _SYSFS_DEV.search(path)
            dev_parent[dev] = pci.group(1) if pci else dev_parent.get(dev, dev)
            continue
        match = _SYSFS_NET_PCI.search(path)
        if match:
            netdevs.setdefault(match.group(1), {}).setdefault(match.group(2), {})[match.group(3)] = _strip(content)
            continue
        match = _SYSFS_NET_CLASS.search(path)
        if match:
            netdevs.setdefault(match.group(1), {}).setdefault(match.group(2), {})[match.group(3)] = _strip(content)
    result = []
    for key in sorted(ports):
        dev, num = key
        port = ports[key]
        parent = dev_parent.get(dev, dev)
        port["pci_address"] = parent if parent != dev else None
        for index in sorted(raw_gids.get(key, {})):
            slot = raw_gids[key][index]
            entry = gid_entry(index, slot.get("gids"), slot.get("types"), slot.get("ndevs"))
            if entry is None:
                continue
            if port["link_layer"] == "InfiniBand" and entry["version"] == 1:
                entry["type"], entry["version"] = "IB", None
            port["gids"].append(entry)
        candidates = netdevs.get(parent, {}) or netdevs.get(dev, {})
        ndevs = [g["ndev"] for g in port["gids"] if g["ndev"]]
        name = ndevs[0] if ndevs else None
        if name is None and candidates:
            by_port = [n for n in sorted(candidates) if _int(candidates[n].get("dev_port")) == num - 1]
            if by_port:
                name = by_port[0]
            elif len(candidates) == 1:
                name = list(candidates)[0]
        port["netdev"] = name
        attrs = candidates.get(name, {}) if name else {}
        port["netdev_mtu"] = _int(attrs.get("mtu"))
        port["netdev_operstate"] = attrs.get("operstate")
        result.append(port)
    return result


# ---------------------------------------------------------------------------------------------
# rdma link show [-d] / rdma -j link
# ---------------------------------------------------------------------------------------------

_RDMA_LINK = re.compile(r"^\s*(?:\d+/\d+:\s+|link\s+)([^\s/]+)/(\d+):?\s*(.*)$")


def parse_rdma_link(text):
    """Parse ``rdma link show`` (plain or ``-d``), old (``4/1: mlx5_3/1: state ...``) or new
    (``link mlx5_0/1 state ...``) form, or ``rdma -j [-p] link`` JSON (a leading prompt line is ignored).

    :returns: list of ``{device, port, state, phys_state, netdev, caps}``; ``netdev`` is None when
        not printed (the netdev lives in another network namespace).
    """
    raw = str(text or "")
    start = raw.find("[")
    if start != -1 and raw[start:].lstrip("[").lstrip().startswith("{"):
        try:
            return _rdma_link_json(json.loads(raw[start:]))
        except ValueError:
            pass
    links = []
    for line in raw.splitlines():
        match = _RDMA_LINK.match(line)
        if match:
            tokens = match.group(3).split()
            fields = dict(zip(tokens[0::2], tokens[1::2]))
            links.append({
                "device": match.group(1),
                "port": int(match.group(2)),
                "state": normalize_state(fields.get("state")),
                "phys_state": normalize_phys_state(fields.get("physical_state")),
                "netdev": fields.get("netdev"),
                "caps": [],
                "lid": _int(fields["lid"]) if "lid" in fields else None,
                "sm_lid": _int(fields["sm_lid"]) if "sm_lid" in fields else None,
            })
            continue
        caps = re.match(r"^\s*caps:\s*<(.*)>\s*$", line)
        if caps and links:
            links[-1]["caps"] = [c.strip() for c in caps.group(1).split(",") if c.strip()]
    return links


def _rdma_link_json(data):
    links = []
    for item in data if isinstance(data, list) else []:
        name = str(item.get("ifname", ""))
        dev, _sep, port = name.partition("/")
        links.append({
            "device": dev or None,
            "port": _int(item.get("port")) if item.get("port") is not None else _int(port),
            "state": normalize_state(item.get("state")),
            "phys_state": normalize_phys_state(item.get("physical_state")),
            "netdev": item.get("netdev"),
            "caps": list(item.get("caps") or []),
        })
    return links


# ---------------------------------------------------------------------------------------------
# ibstat / ibstatus
# ---------------------------------------------------------------------------------------------

def parse_ibstat(text):
    """Parse ``ibstat`` (or ``ibstat | grep mlx5``, which leaves only the ``CA '<name>'`` lines).

    :returns: list of ``{ca, ca_type, fw_ver, ports: [port]}``.
    """
    cas = []
    ca = None
    port = None
    for line in str(text or "").splitlines():
        head = re.match(r"^\s*CA\s+'([^']+)'", line)
        if head:
            ca = {"ca": head.group(1), "ca_type": None, "fw_ver": None, "ports": []}
            cas.append(ca)
            port = None
            continue
        if ca is None:
            continue
        port_head = re.match(r"^\s*Port\s+(\d+):\s*$", line)
        if port_head:
            port = new_port(ca["ca"], int(port_head.group(1)))
            ca["ports"].append(port)
            continue
        match = _KV.match(line)
        if not match:
            continue
        key, value = match.group(1).strip(), match.group(2)
        if port is None:
            if key == "CA type":
                ca["ca_type"] = value
            elif key == "Firmware version":
                ca["fw_ver"] = value
            continue
        if key == "State":
            port["state"] = normalize_state(value)
        elif key == "Physical state":
            port["phys_state"] = normalize_phys_state(value)
        elif key == "Rate":
            port["rate"] = value
            port["rate_gbps"] = rate_gbps(value)
        elif key == "Link layer":
            port["link_layer"] = normalize_link_layer(value)
        elif key in ("Base lid", "SM lid"):
            port["lid" if key == "Base lid" else "sm_lid"] = _int(value)
    return cas


def parse_ibstatus(text):
    """Parse ``ibstatus``: ``Infiniband device 'mlx4_0' port 1 status:`` blocks.

    :returns: list of ports, each with ``default_gid`` added.
    """
    ports = []
    port = None
    for line in str(text or "").splitlines():
        head = re.match(r"^\s*Infiniband device '([^']+)' port (\d+) status:", line)
        if head:
            port = new_port(head.group(1), int(head.group(2)))
            port["default_gid"] = None
            ports.append(port)
            continue
        match = _KV.match(line)
        if port is None or not match:
            continue
        key, value = match.group(1).strip(), match.group(2)
        if key == "state":
            port["state"] = normalize_state(value)
        elif key == "phys state":
            port["phys_state"] = normalize_phys_state(value)
        elif key == "rate":
            port["rate"] = value
            port["rate_gbps"] = rate_gbps(value)
        elif key == "link_layer":
            port["link_layer"] = normalize_link_layer(value)
        elif key == "default gid":
            port["default_gid"] = value
        elif key in ("base lid", "sm lid"):
            port["lid" if key == "base lid" else "sm_lid"] = _int(value)
    return ports


# ---------------------------------------------------------------------------------------------
# ip -j link / ip -j addr / ip -j route
# ---------------------------------------------------------------------------------------------

def _load_json(data):
    if isinstance(data, (list, dict)):
        return data
    text = str(data or "").strip()
    if not text:
        return []
    return json.loads(text)


def parse_ip_json(data):
    """Interfaces from ``ip -j link`` / ``ip -j addr`` output (text or already-loaded JSON), or
    gcm's learned-state wrapper ``{"intf_status": [...]}``.

    :returns: dict ``ifname -> {mtu, operstate, flags, master, link_type, ipv4: [addr], up}``;
        ``ipv4`` keeps only addresses that parse (redacted placeholders are dropped).
    """
    loaded = _load_json(data)
    if isinstance(loaded, dict):
        loaded = loaded.get("intf_status", [])
    interfaces = {}
    for item in loaded or []:
        name = item.get("ifname")
        if not name:
            continue
        ipv4 = []
        for addr in item.get("addr_info") or []:
            if addr.get("family") != "inet":
                continue
            try:
                ipv4.append(str(ipaddress.IPv4Address(str(addr.get("local", "")))))
            except ValueError:
                continue
        flags = list(item.get("flags") or [])
        interfaces[name] = {
            "mtu": _int(item.get("mtu")),
            "operstate": item.get("operstate"),
            "flags": flags,
            "master": item.get("master") or item.get("main"),
            "link_type": item.get("link_type"),
            "ipv4": ipv4,
            "up": "UP" in flags,
        }
    return interfaces


def default_route_interface(data):
    """The ``dev`` of the first default route in ``ip -j route show default`` (text or JSON); None if none."""
    try:
        loaded = _load_json(data)
    except ValueError:
        return None
    for route in loaded if isinstance(loaded, list) else []:
        if route.get("dst", "default") == "default" and route.get("dev"):
            return route["dev"]
    return None
