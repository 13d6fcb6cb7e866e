"""Pure classification of PCI and RDMA inventory read from sysfs.

No I/O here: callers pass what they read from ``/sys/bus/pci/devices/*/{vendor,device,class}``
and ``/sys/class/infiniband``. PCI vendor IDs come from the PCI-SIG registry as listed in the
pci.ids database (https://pci-ids.ucw.cz/): 0x10de NVIDIA, 0x15b3 Mellanox (NVIDIA networking).
Class codes (24-bit, ``0xCCSSPP``): 0x03xxxx display controller (GPUs show as 0x0300 VGA or
0x0302 3D controller), 0x02xxxx network controller, 0x0207xx InfiniBand controller.
"""
from __future__ import annotations

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
