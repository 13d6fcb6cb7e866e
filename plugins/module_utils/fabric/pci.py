# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI devices, their links and the bridges above them: sysfs inventory, ``lspci`` text and kernel messages, parsed
and judged. Pure: no I/O.

**Inventory.** Callers pass what they read from ``/sys/bus/pci/devices/*/{vendor,device,class}``
and ``/sys/class/infiniband``. PCI vendor IDs come from the PCI-SIG registry as listed in the
pci.ids database (https://pci-ids.ucw.cz/): 0x10de NVIDIA, 0x15b3 Mellanox (NVIDIA networking).
Class codes (24-bit, ``0xCCSSPP``): 0x03xxxx display controller (GPUs show as 0x0300 VGA or
0x0302 3D controller), 0x02xxxx network controller, 0x0207xx InfiniBand controller.

**lspci.** ``lspci -vvv -D`` blocks, one per device: ACS control (``ACSCtl``: peer-to-peer traffic redirected to the
root complex, case C08), the kernel driver in use (``lspci -k``), and the bridges above a device from the realpath of
its sysfs folder.

**Links.** Inputs are the text of ``lspci -vvv -D`` (as root: without root lspci hides the capabilities), the
kernel log (``journalctl -k`` or ``dmesg``) and the bridges above each device read from sysfs
(``pci_ancestors``).

A PCIe link joins a *downstream-facing* port (a root port, or a switch's downstream port) and the
device below it (an endpoint, or the upstream port of the next switch). Both ends report the link in
``LnkSta``; it can train no faster and no wider than the smaller of the two ``LnkCap`` values. So
the expected speed and width of each link are the minimum of its two ends' capabilities (PCI Express
Base Specification, "Link Capabilities Register"; lspci prints the register as ``LnkCap`` and the
trained state as ``LnkSta``). Links between a switch's upstream port and its own downstream ports
are internal to the switch and are not judged.

Speeds are in GT/s (2.5 Gen1, 5 Gen2, 8 Gen3, 16 Gen4, 32 Gen5, 64 Gen6), widths in lanes.

Kernel messages read (Linux ``drivers/pci/pci.c`` ``__pcie_print_link_status`` and
``drivers/pci/pcie/aer.c``)::

    pci 0000:02:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at
        0000:00:1c.4 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)
    pcieport 0000:00:1c.5: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
    pcieport 0000:00:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, ...
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

# ---------------------------------------------------------------- sysfs inventory

NVIDIA_VENDOR = "0x10de"
MELLANOX_VENDOR = "0x15b3"


def _norm_hex(value):
    """Return a lower-case ``0x``-prefixed hex string from sysfs text such as ``'0x10DE\\n'``."""
    text = (value or "").strip().lower()
    if text and not text.startswith("0x"):
        text = "0x" + text
    return text


def classify_pci(devices):
    """Split a sysfs PCI listing into NVIDIA GPUs and Mellanox NICs.

    :param devices: list of dicts ``{address, vendor, device, class}`` with the raw sysfs text
        (e.g. ``{'address': '0000:41:00.0', 'vendor': '0x10de', 'device': '0x20b2', 'class': '0x030200'}``).
    :returns: dict with ``nvidia_gpus`` and ``mellanox_nics``: lists of
        ``{address, device_id, class}`` sorted by PCI address. NVIDIA functions that are not display
        controllers (audio, NVSwitch bridges) are not GPUs and are left out.
    """
    gpus = []
    nics = []
    for dev in devices:
        vendor = _norm_hex(dev.get("vendor"))
        pci_class = _norm_hex(dev.get("class"))
        entry = {
            "address": dev.get("address", ""),
            "device_id": _norm_hex(dev.get("device")),
            "class": pci_class,
        }
        if vendor == NVIDIA_VENDOR and pci_class.startswith("0x03"):
            gpus.append(entry)
        elif vendor == MELLANOX_VENDOR and pci_class.startswith("0x02"):
            nics.append(entry)
    return {
        "nvidia_gpus": sorted(gpus, key=lambda d: d["address"]),
        "mellanox_nics": sorted(nics, key=lambda d: d["address"]),
    }


# ---------------------------------------------------------------- lspci

# Domains are 4 hex digits, or more behind an Intel VMD controller (10000:e0:1d.0).
_LSPCI_HEADER = re.compile(r"^((?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")
_ACS_FLAG = re.compile(r"([A-Za-z]+)([+-])")


def lspci_blocks(text):
    """Yield ``(address or None, description, [indented lines])`` per device."""
    address, description, lines = None, None, []
    for raw in (text or "").splitlines():
        if not raw.strip():
            continue
        match = _LSPCI_HEADER.match(raw)
        if match and not raw[0].isspace():
            if address is not None or lines:
                yield address, description, lines
            address, description, lines = match.group(1).lower(), match.group(2), []
            if len(address) == 7:
                address = "0000:" + address
        else:
            lines.append(raw.strip())
    if address is not None or lines:
        yield address, description, lines


def parse_acsctl(line):
    """``'ACSCtl: SrcValid+ TransBlk- ReqRedir+ ...'`` -> ``{'SrcValid': True, ...}``."""
    _head, _sep, flags = line.partition("ACSCtl:")
    return dict((name, sign == "+") for name, sign in _ACS_FLAG.findall(flags))


def parse_lspci_acs(text):
    """``lspci -vvv [-D]`` -> list of ``{address, description, acsctl, redirect}``, one per ``ACSCtl`` line.

    ``redirect`` is True when ``ReqRedir+`` or ``CmpltRedir+``: peer-to-peer requests/completions are
    sent up to the root complex instead of across the switch (C08). Bare ``ACSCtl:`` lines without a
    device header give entries with address None.
    """
    out = []
    for address, description, lines in lspci_blocks(text):
        for line in lines:
            if "ACSCtl:" not in line:
                continue
            flags = parse_acsctl(line)
            out.append({"address": address, "description": description, "acsctl": flags,
                        "redirect": bool(flags.get("ReqRedir") or flags.get("CmpltRedir"))})
    return out


def parse_lspci_k(text):
    """``lspci -k [-D] [-nn]`` -> list of ``{address, description, driver, modules}``."""
    out = []
    for address, description, lines in lspci_blocks(text):
        if address is None:
            continue
        entry = {"address": address, "description": description, "driver": None, "modules": []}
        for line in lines:
            if line.startswith("Kernel driver in use:"):
                entry["driver"] = line.split(":", 1)[1].strip()
            elif line.startswith("Kernel modules:"):
                entry["modules"] = [m.strip() for m in line.split(":", 1)[1].split(",") if m.strip()]
        out.append(entry)
    return out


def pci_ancestors(realpath):
    """PCI addresses above a device, from the realpath of ``/sys/bus/pci/devices/<addr>``.

    ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0`` -> ``['0000:00:01.0', '0000:01:00.0']``.
    """
    parts = [p.lower() for p in (realpath or "").split("/")
             if re.match(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$", p)]
    return parts[:-1]


# ---------------------------------------------------------------- PCIe links

_EXPRESS = re.compile(r"Express (?:\(v\d+\) )?(Root Port|Downstream Port|Upstream Port|Legacy Endpoint|"
                      r"Root Complex Integrated Endpoint|Endpoint|PCI-Express to PCI/PCI-X Bridge|"
                      r"PCI/PCI-X to PCI-Express Bridge)")
_SPEED = re.compile(r"Speed (?:([0-9.]+)GT/s|unknown)")
_WIDTH = re.compile(r"Width x(\d+)")
_ADDR = r"(?<![0-9a-fA-F:])[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_LIMITED = re.compile(
    r"(?P<address>%s): (?P<available>[0-9.]+) Gb/s available PCIe bandwidth, limited by "
    r"(?P<speed>[0-9.]+) GT/s(?: PCIe)? x(?P<width>\d+) link at (?P<at>%s) \(capable of "
    r"(?P<capable>[0-9.]+) Gb/s with (?P<cap_speed>[0-9.]+) GT/s(?: PCIe)? x(?P<cap_width>\d+) link\)" % (_ADDR, _ADDR))
# Severity words: "Corrected" / "Uncorrected (Non-Fatal)" / "Uncorrected (Fatal)" before Linux 6.x,
# "Correctable" / "Uncorrectable (Non-Fatal)" / "Uncorrectable (Fatal)" since.
_AER = re.compile(r"(?P<address>%s): (?:AER: )?PCIe Bus Error: severity=(?P<severity>Corrected|Correctable|"
                  r"Uncorrect(?:ed|able) \((?:Non-Fatal|Fatal)\))" % _ADDR)

DOWNSTREAM_PORTS = ("Root Port", "Downstream Port")

# Usable bits per transfer of each PCIe generation's line code: 8b/10b up to 5 GT/s, 128b/130b for 8-32 GT/s,
# 242/256 FLITs at 64 GT/s (PCI Express Base Specification; Linux drivers/pci/pci.h PCIE_SPEED2MBS_ENC gives the
# same figures: 8 GT/s x16 = 126.016 Gb/s, the "available PCIe bandwidth" of the kernel's "limited by" line).
_ENCODING = ((5.0, 8.0 / 10.0), (32.0, 128.0 / 130.0), (64.0, 242.0 / 256.0))

# The fastest port speed of a Mellanox/NVIDIA NIC model, in Gb/s, from the name lspci prints: used only when the
# port rate is not known (text read without sysfs). Sources: NVIDIA's ConnectX product briefs.
MODEL_RATES_GBPS = (
    (r"ConnectX-8", 800.0), (r"ConnectX-7|BlueField-3", 400.0), (r"ConnectX-6 Lx", 50.0), (r"ConnectX-6 Dx", 100.0),
    (r"ConnectX-6", 200.0), (r"ConnectX-5", 100.0), (r"ConnectX-4 Lx", 50.0), (r"ConnectX-4", 100.0),
    (r"BlueField-2", 100.0),
)


def link_gbps(speed_gts, width):
    """Usable bandwidth of a PCIe link in Gb/s (one direction): GT/s x lanes x the line code's efficiency.

    ``link_gbps(8, 8)`` = 63.0 (what the kernel prints as 63.008), ``link_gbps(16, 16)`` = 252.0. None when either is
    unknown.
    """
    if not speed_gts or not width:
        return None
    for top, efficiency in _ENCODING:
        if float(speed_gts) <= top:
            return float(speed_gts) * int(width) * efficiency
    return float(speed_gts) * int(width) * _ENCODING[-1][1]


def model_rate_gbps(description):
    """The fastest port speed of the NIC model named in an lspci description, or None."""
    for pattern, rate in MODEL_RATES_GBPS:
        if re.search(pattern, description or ""):
            return rate
    return None


def _below_line_rate(kind, subject, speed, width, rate, where):
    bandwidth = link_gbps(speed, width)
    if kind != "HCA" or not rate or bandwidth is None or bandwidth >= rate:
        return None
    return problem(
        "PCIE_LINK_BELOW_LINE_RATE", "error", subject,
        "the PCIe link (%s x%d = %.0f Gb/s) cannot carry the port's %g Gb/s line rate: the NIC is capped at %.0f%% "
        "of its network speed" % (_fmt_speed(speed), width, bandwidth, rate, 100.0 * bandwidth / rate),
        "Move the NIC to a slot that trains at full width and speed (x16 Gen4 for 200 Gb/s, Gen5 for 400 Gb/s), "
        "reseat it and its riser, check the slot's BIOS bifurcation and speed settings; `lspci -vvv -s %s` LnkSta "
        "shows the trained link." % where)


class PcieFormatError(ValueError):
    """The text given to a parser is not the output it reads (raised, never turned into rows)."""


def parse_lspci_links(text):
    """``lspci -vvv [-D]`` -> ``{address: {description, port_type, cap_speed_gts, cap_width, speed_gts, width}}``.

    Only devices with a ``LnkCap`` line (PCI Express capability readable) are returned. ``speed_gts``
    and ``width`` are the trained link (``LnkSta``); None when lspci prints ``Speed unknown`` or no
    ``LnkSta``. Addresses are full (``0000:41:00.0``) even when lspci ran without ``-D``.

    :raises PcieFormatError: non-empty text with no lspci device header (``41:00.0 3D controller: ...``),
        such as ``lspci -t`` trees, ``lspci -n`` without ``-v``, JSON, or an error message.
    """
    if not (text or "").strip():
        return {}
    links = {}
    headers = 0
    for address, description, lines in lspci_blocks(text):
        if address is None:
            continue
        headers += 1
        entry = {"description": description, "port_type": None, "cap_speed_gts": None, "cap_width": None,
                 "speed_gts": None, "width": None}
        has_cap = False
        for line in lines:
            if line.startswith("Capabilities:"):
                express = _EXPRESS.search(line)
                if express:
                    entry["port_type"] = express.group(1)
            elif line.startswith("LnkCap:"):
                has_cap = True
                entry["cap_speed_gts"], entry["cap_width"] = _speed_width(line)
            elif line.startswith("LnkSta:"):
                entry["speed_gts"], entry["width"] = _speed_width(line)
        if has_cap:
            links[address] = entry
    if not headers:
        raise PcieFormatError(
            "not `lspci -vvv` output: no device header line such as '0000:41:00.0 3D controller: ...' "
            "(first line: %r)" % text.strip().splitlines()[0][:80])
    return links


def _speed_width(line):
    speed = _SPEED.search(line)
    width = _WIDTH.search(line)
    return (float(speed.group(1)) if speed and speed.group(1) else None,
            int(width.group(1)) if width else None)


def link_chain(device, ancestors, links):
    """The judged links from the root port down to ``device``.

    :param ancestors: the bridges above ``device``, top first (``pci_ancestors``).
    :param links: :func:`parse_lspci_links` output.
    :returns: list of ``{upstream, downstream, expected_speed_gts, expected_width, speed_gts, width}``,
        top first; ``upstream`` is the root/downstream port, ``downstream`` the device below it. Links
        whose ends lspci did not describe are left out.
    """
    chain = list(ancestors or []) + [device]
    out = []
    for upper, lower in zip(chain, chain[1:]):
        up, down = links.get(upper), links.get(lower)
        if not up or not down or up.get("port_type") not in DOWNSTREAM_PORTS:
            continue
        speeds = [s for s in (up["cap_speed_gts"], down["cap_speed_gts"]) if s]
        widths = [w for w in (up["cap_width"], down["cap_width"]) if w]
        out.append({
            "upstream": upper, "downstream": lower,
            "expected_speed_gts": min(speeds) if len(speeds) == 2 else None,
            "expected_width": min(widths) if len(widths) == 2 else None,
            "speed_gts": down["speed_gts"] if down["speed_gts"] is not None else up["speed_gts"],
            "width": down["width"] if down["width"] is not None else up["width"],
        })
    return out


def _fmt_speed(gts):
    return ("%g GT/s" % gts) if gts is not None else "unknown speed"


def link_problems(targets, ancestors, links, busy_gpus=(), line_rates=None):
    """``PCIE_LINK_DEGRADED`` problems on the links above GPUs and HCAs.

    :param targets: ``{address: kind}`` with kind ``'GPU'`` or ``'HCA'``.
    :param ancestors: ``{address: [bridges above it, top first]}``.
    :param links: :func:`parse_lspci_links` output.
    :param busy_gpus: GPU addresses that are in use. An idle GPU lowers its link speed to save power,
        and the link above it follows, so on a GPU's path speed is judged only while the GPU is busy;
        width always is. A GPU's own link is judged by ``gpu_health`` from nvidia-smi
        (``GPU_PCIE_DEGRADED``) and is skipped here; an HCA's own link is judged here.
    :param line_rates: ``{HCA address: Gb/s}``, the fastest active port's rate: a link on an HCA's path whose
        bandwidth (:func:`link_gbps`) is below it is ``PCIE_LINK_BELOW_LINE_RATE`` (error), whatever the cause.
    :returns: problems, width below the expected one an ``error`` (bandwidth divided by the lost lanes); speed below
        an ``error`` on a busy GPU's path (an idle GPU's link slows down on purpose; a busy one at full width but a
        lower speed loses bandwidth as a narrow link does) and a ``warning`` on an HCA's path when the link still
        carries the line rate; one per link even when several devices sit below it.
    """
    busy = set(busy_gpus or ())
    seen = set()
    problems = []
    for device in sorted(targets):
        kind = targets[device]
        for link in link_chain(device, ancestors.get(device) or [], links):
            if kind == "GPU" and link["downstream"] == device:
                continue
            key = (link["upstream"], link["downstream"])
            if key in seen:
                continue
            subject = "PCIe link %s -> %s (above %s %s)" % (link["upstream"], link["downstream"], kind, device) \
                if link["downstream"] != device else "PCIe link %s -> %s %s" % (link["upstream"], kind, device)
            rate = (line_rates or {}).get(device)
            capped = _below_line_rate(kind, subject, link["speed_gts"], link["width"], rate, link["downstream"])
            if capped is not None:
                seen.add(key)
                problems.append(capped)
                continue
            if link["width"] is not None and link["expected_width"] and link["width"] < link["expected_width"]:
                seen.add(key)
                problems.append(problem(
                    "PCIE_LINK_DEGRADED", "error", subject,
                    "the link trained at x%d, both ends can do x%d (%s)" % (
                        link["width"], link["expected_width"], _fmt_speed(link["speed_gts"])),
                    "Reseat the card, riser or cable; check the slot's bifurcation setting in the BIOS; "
                    "`lspci -vvv -s %s` LnkSta shows the trained link." % link["downstream"]))
                continue
            if kind == "GPU" and device not in busy:
                continue
            if link["speed_gts"] is not None and link["expected_speed_gts"] \
                    and link["speed_gts"] < link["expected_speed_gts"]:
                seen.add(key)
                problems.append(problem(
                    "PCIE_LINK_DEGRADED", "error" if kind == "GPU" else "warning", subject,
                    "the link runs at %s, both ends can do %s" % (
                        _fmt_speed(link["speed_gts"]), _fmt_speed(link["expected_speed_gts"])),
                    "Check the BIOS PCIe speed setting for the slot and the riser/retimer; compare with a "
                    "node of the same model; `lspci -vvv -s %s` LnkSta." % link["downstream"]))
    return problems


def parse_kernel_pcie(text):
    """PCIe messages of the kernel log.

    :returns: ``{'limited': [{address, available_gbps, speed_gts, width, at, capable_gbps, cap_speed_gts,
        cap_width}], 'aer': {address: {'corrected': n, 'nonfatal': n, 'fatal': n}}}``; ``aer`` counts
        ``PCIe Bus Error`` reports per reporting device (the address printed before the message).
    """
    limited = []
    aer = {}
    for line in (text or "").splitlines():
        match = _LIMITED.search(line)
        if match:
            limited.append({
                "address": match.group("address").lower(), "available_gbps": float(match.group("available")),
                "speed_gts": float(match.group("speed")), "width": int(match.group("width")),
                "at": match.group("at").lower(), "capable_gbps": float(match.group("capable")),
                "cap_speed_gts": float(match.group("cap_speed")), "cap_width": int(match.group("cap_width"))})
            continue
        match = _AER.search(line)
        if match:
            severity = match.group("severity")
            kind = "corrected" if severity in ("Corrected", "Correctable") else (
                "fatal" if "(Fatal)" in severity else "nonfatal")
            counts = aer.setdefault(match.group("address").lower(), {"corrected": 0, "nonfatal": 0, "fatal": 0})
            counts[kind] += 1
    return {"limited": limited, "aer": aer}


def kernel_problems(targets, ancestors, messages, links=None, line_rates=None):
    """``PCIE_BANDWIDTH_LIMITED``, ``PCIE_LINK_BELOW_LINE_RATE`` and ``PCIE_AER_*`` problems for GPUs, HCAs and the
    bridges above them (``line_rates``: ``{HCA address: Gb/s}``; an HCA limited below it is an error).

    :param targets: ``{address: kind}`` (``'GPU'`` / ``'HCA'``).
    :param ancestors: ``{address: [bridges above it]}``.
    :param messages: :func:`parse_kernel_pcie` output.
    :param links: :func:`parse_lspci_links` output, when lspci ran: a "limited by" link that runs at what the port
        named after "link at" can do is the platform's limit (a Gen5 NIC in a Gen4 server), not a fault.

    The kernel prints "limited by" when it enumerates a device, against the device's own capability. GPUs are
    enumerated at 2.5 GT/s and raise their speed once the driver loads, so for a GPU only a width below its
    capability counts; for an HCA, speed too. AER reports from any device on a GPU's or HCA's path count: uncorrected
    (non-fatal or fatal) ones are an ``error`` (the transaction was lost; the driver may have reset
    the device), corrected ones a ``warning`` (the link layer replayed; a growing count predicts a
    failing link).
    """
    problems = []
    for entry in messages.get("limited") or []:
        kind = targets.get(entry["address"])
        if kind is None:
            continue
        rate = (line_rates or {}).get(entry["address"])
        if kind == "HCA" and rate and entry["available_gbps"] < rate:
            problems.append(problem(
                "PCIE_LINK_BELOW_LINE_RATE", "error", "%s %s" % (kind, entry["address"]),
                "the kernel found %g Gb/s of PCIe bandwidth, limited by a %g GT/s x%d link at %s, below the port's %g "
                "Gb/s line rate (the device could do %g Gb/s with %g GT/s x%d)" % (
                    entry["available_gbps"], entry["speed_gts"], entry["width"], entry["at"], rate,
                    entry["capable_gbps"], entry["cap_speed_gts"], entry["cap_width"]),
                "Move the NIC to a slot that trains at full width and speed, reseat it and its riser, check the BIOS "
                "bifurcation and speed settings of the port at %s." % entry["at"]))
            continue
        port = (links or {}).get(entry["at"]) or {}
        width_can = min(w for w in (entry["cap_width"], port.get("cap_width")) if w)
        speed_can = min(v for v in (entry["cap_speed_gts"], port.get("cap_speed_gts")) if v)
        narrower = entry["width"] < width_can
        slower = entry["speed_gts"] < speed_can
        if not narrower and not (slower and kind == "HCA"):
            continue
        problems.append(problem(
            "PCIE_BANDWIDTH_LIMITED", "warning", "%s %s" % (kind, entry["address"]),
            "the kernel found %g Gb/s of PCIe bandwidth, limited by a %g GT/s x%d link at %s (capable of "
            "%g Gb/s with %g GT/s x%d)" % (entry["available_gbps"], entry["speed_gts"], entry["width"], entry["at"],
                                           entry["capable_gbps"], entry["cap_speed_gts"], entry["cap_width"]),
            "Reseat the card or move it to a full-width slot; check the BIOS bifurcation and speed settings of "
            "the port at %s." % entry["at"]))
    on_path = {}
    for device in sorted(targets):
        for address in list(ancestors.get(device) or []) + [device]:
            on_path.setdefault(address, "%s %s" % (targets[device], device))
    for address in sorted(messages.get("aer") or {}):
        if address not in on_path:
            continue
        counts = messages["aer"][address]
        where = address if on_path[address].endswith(address) else "%s (above %s)" % (address, on_path[address])
        uncorrected = counts["nonfatal"] + counts["fatal"]
        if uncorrected:
            problems.append(problem(
                "PCIE_AER_UNCORRECTED", "error", "PCIe %s" % where,
                "%d uncorrected PCIe error report(s) (%d fatal, %d non-fatal) in the kernel log" % (
                    uncorrected, counts["fatal"], counts["nonfatal"]),
                "Drain the node; reseat the device and its riser/cable, check `journalctl -k | grep -A3 AER` for "
                "the error type; if it repeats after a reboot, replace the device or the riser."))
        elif counts["corrected"]:
            problems.append(problem(
                "PCIE_AER_CORRECTED", "warning", "PCIe %s" % where,
                "%d corrected PCIe error report(s) in the kernel log (the link replayed them)" % counts["corrected"],
                "Watch the count (`journalctl -k | grep 'PCIe Bus Error'`); if it keeps growing, reseat the "
                "device and its riser or cable and compare with `lspci -vvv` LnkSta."))
    return problems


_GPU_DESC = re.compile(r"(?:3D|VGA compatible) controller.*NVIDIA|NVIDIA.*(?:3D|VGA)", re.I)
_NIC_DESC = re.compile(r"(?:Ethernet|Infiniband|Network) controller.*(?:Mellanox|NVIDIA|Broadcom|Intel)", re.I)


def lspci_text_problems(text, line_rates=None, busy=True):
    """Problems from ``lspci -vv`` text alone (no sysfs: the ``ddp-health --diagnose`` and ``diagnose_output``
    path): each GPU's and NIC's own link, ``LnkSta`` against its own ``LnkCap``.

    :param line_rates: ``{address: Gb/s}`` of the NICs' ports, or ``{"*": Gb/s}`` for every NIC; a NIC without one
        whose link trained below its own capability takes its model's fastest port speed (:data:`MODEL_RATES_GBPS`).
    :param busy: whether the GPUs were in use when lspci ran (an idle GPU lowers its link speed on purpose).
    :returns: problems (``PCIE_LINK_DEGRADED``, ``PCIE_LINK_BELOW_LINE_RATE``).
    :raises PcieFormatError: text that is not lspci's.
    """
    links = parse_lspci_links(text)
    problems = []
    for address in sorted(links):
        entry = links[address]
        kind = "GPU" if _GPU_DESC.search(entry["description"] or "") else (
            "HCA" if _NIC_DESC.search(entry["description"] or "") else None)
        if kind is None:
            continue
        subject = "PCIe link of %s %s (%s)" % (kind, address, entry["description"])
        speed, width = entry["speed_gts"], entry["width"]
        rate = None
        if kind == "HCA":
            rate = (line_rates or {}).get(address) or (line_rates or {}).get("*")
            trained_below = (width and entry["cap_width"] and width < entry["cap_width"]) or \
                (speed and entry["cap_speed_gts"] and speed < entry["cap_speed_gts"])
            if rate is None and trained_below:
                # The model's fastest port is a guess (a 25 Gb/s ConnectX-5 exists): used only for a link that trained
                # below what the card can do, never against a card at its own full link.
                rate = model_rate_gbps(entry["description"])
        capped = _below_line_rate(kind, subject, speed, width, rate, address)
        if capped is not None:
            problems.append(capped)
            continue
        if width and entry["cap_width"] and width < entry["cap_width"]:
            problems.append(problem(
                "PCIE_LINK_DEGRADED", "error", subject,
                "the link trained at x%d, the device can do x%d (%s)" % (width, entry["cap_width"], _fmt_speed(speed)),
                "Reseat the card, riser or cable; check the slot's bifurcation setting in the BIOS."))
        elif speed and entry["cap_speed_gts"] and speed < entry["cap_speed_gts"] and (kind == "HCA" or busy):
            problems.append(problem(
                "PCIE_LINK_DEGRADED", "error" if kind == "GPU" else "warning", subject,
                "the link runs at %s x%s, the device can do %s (%s of its bandwidth)" % (
                    _fmt_speed(speed), width, _fmt_speed(entry["cap_speed_gts"]),
                    "%.0f%%" % (100.0 * link_gbps(speed, width or 1) / link_gbps(entry["cap_speed_gts"], width or 1))),
                "A GPU lowers its link speed when idle: read LnkSta while it works (`nvidia-smi dmon -s t`, or during "
                "a burn-in); if it stays low under load, check the BIOS PCIe speed setting, the riser/retimer and "
                "reseat it; the slot above may be capable of less (`lspci -vvv -s <root port>`)." if kind == "GPU"
                else "Check the BIOS PCIe speed setting of the slot and the riser; the link still carries the "
                     "port's rate."))
    return problems
