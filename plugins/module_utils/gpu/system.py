# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for the system side of GPU health: kernel-log Xid lines, ``lsmod``, ``dkms status``. No I/O.

``lspci`` (ACS control, kernel driver in use, PCIe links) is read in the PCI module (fabric/pci.py), driver versions
compared with versions.py.
"""
from __future__ import annotations

import re

# Well-known Xid codes: meaning from NVIDIA's "Xid Errors" document
# (https://docs.nvidia.com/deploy/xid-errors/, and its Xid catalog for Ampere and later) and the
# "Dynamic Page Retirement" document for 48/63/64. Severity here is ours, from what the public
# health checks do with each code:
#   error   = Azure azurehpc-health-checks check_gpu_xid fails on it (48 56 57 58 62 64 65 69 73 74
#             79 80 81 119 120), plus 95 and 140 (uncontained / unrecovered ECC: AWS suite RESET);
#   warning = facebookresearch/gcm's non-critical set (13 31 43 45 63 68 92 109), plus 61 and 94
#             (contained ECC error, the application is killed and the GPU recovers).
# Codes not listed are warnings: seen, worth a look, not proof of a bad GPU.
XID_TABLE = {
    13: ("Graphics Engine Exception (usually the application)", "warning"),
    31: ("GPU memory page fault (usually the application)", "warning"),
    43: ("GPU stopped processing (usually the application)", "warning"),
    45: ("Preemptive cleanup, due to previous errors", "warning"),
    48: ("Double Bit ECC Error (uncorrectable memory error)", "error"),
    56: ("Display Engine error", "error"),
    57: ("Error programming video memory interface", "error"),
    58: ("Unstable video memory interface detected", "error"),
    61: ("Internal micro-controller breakpoint/warning", "warning"),
    62: ("Internal micro-controller halt", "error"),
    63: ("ECC page retirement or row remapping recording event (reset the GPU to activate)", "warning"),
    64: ("ECC page retirement or row remapper recording failure", "error"),
    65: ("Video processor exception", "error"),
    68: ("NVDEC0 Exception (video decoder)", "warning"),
    69: ("Graphics Engine class error", "error"),
    73: ("NVENC2 Error", "error"),
    74: ("NVLink Error", "error"),
    79: ("GPU has fallen off the bus", "error"),
    80: ("Corrupted data sent to GPU", "error"),
    81: ("VGA Subsystem Error", "error"),
    92: ("High single-bit ECC error rate", "warning"),
    94: ("Contained ECC error", "warning"),
    95: ("Uncontained ECC error", "error"),
    109: ("Context Switch Timeout Error", "warning"),
    119: ("GSP RPC Timeout", "error"),
    120: ("GSP Error", "error"),
    140: ("Unrecovered ECC Error", "error"),
}

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\):\s*(\d+),\s*(.*)$")
_PID = re.compile(r"^pid=([^,]*),\s*")


def xid_info(code):
    """``(meaning, severity)`` for an Xid code; unknown codes are ``('unlisted Xid', 'warning')``."""
    return XID_TABLE.get(code, ("Xid not in this collection's table: look it up in NVIDIA's Xid catalog",
                                "warning"))


def parse_xid_lines(text):
    """Kernel-log text (``dmesg``, ``journalctl -k``, syslog) -> list of Xid events.

    ``NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: ...`` ->
    ``{pci: '0000:10:1c', xid: 63, pid: '1896', message: 'Row Remapper: ...', line: <the line>}``.
    The PCI address in Xid lines has no function number.
    """
    events = []
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if not match:
            continue
        message = match.group(3).strip()
        pid = None
        pid_match = _PID.match(message)
        if pid_match:
            pid = pid_match.group(1).strip("'\"")
            message = message[pid_match.end():]
        events.append({"pci": match.group(1).lower(), "xid": int(match.group(2)), "pid": pid,
                       "message": message, "line": line.strip()})
    return events


def probe_not_called(text):
    """Number of devices in ``NVRM: The NVIDIA probe routine was not called for N device(s)``, or 0.

    The NVIDIA module printed this because another driver (nouveau, vfio) already owns the GPUs.
    """
    match = re.search(r"NVRM: The NVIDIA probe routine was not called for (\d+) device", text or "")
    return int(match.group(1)) if match else 0


# ---------------------------------------------------------------- modules and DKMS

def parse_lsmod(text):
    """``lsmod`` -> ``{module: {size, used_by_count}}``; the header line is skipped."""
    out = {}
    for line in (text or "").splitlines():
        cells = line.split()
        if len(cells) < 3 or cells[0] == "Module" or not cells[1].isdigit():
            continue
        out[cells[0]] = {"size": int(cells[1]), "used_by_count": int(cells[2]) if cells[2].isdigit() else None}
    return out


def parse_dkms_status(text):
    """``dkms status`` -> list of ``{module, version, kernel, arch, status}``.

    Reads the current form ``nvidia/535.104.05, 4.18.0-477.el8.x86_64, x86_64: installed`` and the
    older ``nvidia, 535.104.05, 4.18.0-477.el8.x86_64, x86_64: installed``. Lines for a module that is
    only added (no kernel) get kernel None.
    """
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or ":" not in line:
            continue
        head, _sep, status = line.rpartition(":")
        cells = [c.strip() for c in head.split(",")]
        if "/" in cells[0]:
            module, version = cells[0].split("/", 1)
            rest = cells[1:]
        else:
            module = cells[0]
            version = cells[1] if len(cells) > 1 else None
            rest = cells[2:]
        kernel = rest[0] if rest else None
        arch = rest[1] if len(rest) > 1 else None
        out.append({"module": module, "version": version, "kernel": kernel, "arch": arch,
                    "status": status.strip()})
    return out
