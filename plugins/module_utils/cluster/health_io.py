# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The I/O edge of the node-local health checks, shared by the modules and the node command.

``gpu_health`` and ``roce_health`` (the modules) and ``ddp-health`` (the program the ``node_health`` role installs
on each node, run without Ansible by Slurm's HealthCheckProgram or a prolog) read the node the same way: sysfs,
then a few commands. Those reads live here, behind a *runner*: any object with

* ``get_bin_path(name)``: the absolute path of a command, or None when it is not installed;
* ``run_command(argv, environ_update=None)``: ``(rc, stdout, stderr)`` as text.

``AnsibleModule`` is such a runner; the node command has its own, ``CommandRunner`` in ddp_health.py (standard library
only, with a deadline: Slurm kills a HealthCheckProgram after 60 s, slurm.conf(5)), so that no module_utils starts a
process itself (ansible-test's pylint, ansible-bad-function). A runner raises :class:`DeadlineExceeded` when its time
is up. What is read goes, unchanged, to the pure parsers and diagnoses in ``gpu_health`` / ``roce_health``
(module_utils).
"""
from __future__ import annotations

import os
import platform
import re

from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import classify_pci, pci_ancestors
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_parsers import (
    default_route_interface, parse_ibv_devinfo, parse_ip_json, parse_sysfs_ib, rate_gbps, roce_active_mtu)
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.rdma_tools import parse_mlnx_qos
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.roce_health import choose_fabric_interface

PCI_ROOT = "/sys/bus/pci/devices"
COMMAND_TIMEOUT_S = 120
C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


class DeadlineExceeded(Exception):
    """The node command ran out of time before a command finished (it was killed, with its process group).

    Raised by the node command's runner (ddp_health.py ``CommandRunner``), caught by ``node_check``."""


def read_text(path):
    """The text of a file (sysfs, /proc), or None when it cannot be read or decoded."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


# ------------------------------------------------------------------ GPU (gpu_health)

def read_pci_devices(root=PCI_ROOT):
    """The sysfs PCI listing, and the bridges above each device. (None, {}) if unreadable."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return None, {}
    devices = []
    ancestors = {}
    for name in names:
        path = os.path.join(root, name)
        devices.append({"address": name, "vendor": read_text(os.path.join(path, "vendor")),
                        "device": read_text(os.path.join(path, "device")), "class": read_text(os.path.join(path, "class"))})
        ancestors[name] = pci_ancestors(os.path.realpath(path))
    return devices, ancestors


def run_timed(runner, argv, timeout_s=COMMAND_TIMEOUT_S):
    """One command in the C locale, killed after ``timeout_s`` seconds (rc 124) when coreutils ``timeout`` exists."""
    timeout = runner.get_bin_path("timeout")
    if timeout:
        argv = [timeout, "-k", "10", str(int(timeout_s))] + list(argv)
    return runner.run_command(argv, environ_update=C_LOCALE)


def read_kernel_log(runner, since, timeout_s=COMMAND_TIMEOUT_S):
    """(text, source) from journalctl -k, else dmesg; (None, None) when neither is readable."""
    journalctl = runner.get_bin_path("journalctl")
    if journalctl:
        window = ["-b"] if since == "boot" else ["--since", since]
        rc, out, _err = run_timed(runner, [journalctl, "-k", "--no-pager", "-q", "-o", "short"] + window, timeout_s)
        if rc == 0 and out.strip():
            return out, "journalctl"
    dmesg = runner.get_bin_path("dmesg")
    if dmesg:
        rc, out, _err = run_timed(runner, [dmesg], timeout_s)
        if rc == 0:
            return out, "dmesg"
    return None, None


def collect_gpu(runner, params, pci_root=PCI_ROOT, timeout_s=COMMAND_TIMEOUT_S):
    """Everything ``gpu_health.build_facts`` needs, as raw text and exit codes.

    :param params: ``check_xid`` (bool), ``xid_since`` (``boot`` or a journalctl --since time), ``pcie_check`` (bool).
    :param timeout_s: per command, seconds.
    """
    raw = {}
    raw["pci_devices"], ancestors = read_pci_devices(pci_root)
    smi = runner.get_bin_path("nvidia-smi")
    raw["smi_found"] = bool(smi)
    pci = classify_pci(raw["pci_devices"] or [])
    pci_gpus = [d["address"] for d in pci["nvidia_gpus"]]
    nic_addresses = [d["address"] for d in pci["mellanox_nics"]]
    if not smi and raw["pci_devices"] is not None and not pci_gpus and not (nic_addresses and params["pcie_check"]):
        return raw  # NO_GPU and no NIC whose link to check: nothing else to read
    if nic_addresses and params["pcie_check"]:
        raw["nic_rates"] = read_nic_rates(os.path.dirname(os.path.dirname(os.path.dirname(pci_root))))
    if smi:
        raw["smi_rc"], raw["smi_out"], raw["smi_err"] = run_timed(runner, [smi, "-q", "-x"], timeout_s)
        if raw["smi_rc"] == 0:
            rc, out, _err = run_timed(runner, [smi, "nvlink", "--status"], timeout_s)
            raw["nvlink"] = out if rc == 0 else None
            rc, out, _err = run_timed(runner, [smi, "topo", "-m"], timeout_s)
            raw["topo"] = out if rc == 0 else None
        elif raw["smi_rc"] == 9 or "communicate with the NVIDIA driver" in (raw["smi_out"] or "") + (raw["smi_err"] or ""):
            raw["kernel_release"] = platform.release()
            modinfo = runner.get_bin_path("modinfo")
            if modinfo:
                raw["modinfo_rc"] = run_timed(
                    runner, [modinfo, "-k", raw["kernel_release"], "-F", "version", "nvidia"], timeout_s)[0]
            dkms = runner.get_bin_path("dkms")
            if dkms:
                rc, out, _err = run_timed(runner, [dkms, "status"], timeout_s)
                raw["dkms"] = out if rc == 0 else None
    if params["check_xid"] or pci_gpus or raw.get("nic_rates"):
        raw["kernel_log"], raw["kernel_log_source"] = read_kernel_log(runner, params["xid_since"], timeout_s)
    lsmod = runner.get_bin_path("lsmod")
    if lsmod:
        rc, out, _err = run_timed(runner, [lsmod], timeout_s)
        raw["lsmod"] = out if rc == 0 else None
    lspci = runner.get_bin_path("lspci")
    if not lspci and params["pcie_check"]:
        raw["lspci_missing"] = True
    if lspci:
        rc, out, _err = run_timed(runner, [lspci, "-k", "-D", "-d", "10de:"], timeout_s)
        raw["lspci_k"] = out if rc == 0 else None
        if params["pcie_check"]:
            rc, out, _err = run_timed(runner, [lspci, "-vvv", "-D"], timeout_s)
            raw["lspci_vvv"] = out if rc == 0 else None
            nics = [d["address"] for d in pci["mellanox_nics"]]
            raw["pci_ancestors"] = dict((a, ancestors.get(a, [])) for a in pci_gpus + nics)
    return raw


def read_nic_rates(sysfs_root):
    """``{PCI address: Gb/s}``: the fastest ACTIVE port of each RDMA device (``/sys/class/infiniband/<dev>/ports/*/
    {state,rate}``, the device's PCI function from its ``device`` link), else the speed of a NIC netdev that is up
    (``/sys/class/net/<if>/speed`` in Mb/s). What each NIC's PCIe link has to carry."""
    rates = {}
    base = os.path.join(sysfs_root, "class", "infiniband")
    for dev in _listdir(base):
        address = os.path.basename(os.path.realpath(os.path.join(base, dev, "device")))
        for num in _listdir(os.path.join(base, dev, "ports")):
            pdir = os.path.join(base, dev, "ports", num)
            if "ACTIVE" not in (read_text(os.path.join(pdir, "state")) or ""):
                continue
            rate = rate_gbps(read_text(os.path.join(pdir, "rate")))
            if rate:
                rates[address] = max(rates.get(address, 0.0), float(rate))
    net = os.path.join(sysfs_root, "class", "net")
    for ifname in _listdir(net):
        address = os.path.basename(os.path.realpath(os.path.join(net, ifname, "device")))
        if address in rates or (read_text(os.path.join(net, ifname, "operstate")) or "").strip() != "up":
            continue
        try:
            speed = int((read_text(os.path.join(net, ifname, "speed")) or "").strip())
        except ValueError:
            continue
        if speed > 0 and re.match(r"^[0-9a-f]{4}:", address):
            rates[address] = max(rates.get(address, 0.0), speed / 1000.0)
    return rates


# ------------------------------------------------------------------ RDMA / RoCE (roce_health)

def _zero_gid(text):
    return not (text or "").replace("0", "").replace(":", "").strip()


def read_ib_tree(sysfs_root):
    """The parts of /sys/class/infiniband the diagnosis needs, as ``{path: content}``."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    tree = {}
    for dev in _listdir(base):
        ports_dir = os.path.join(base, dev, "ports")
        for num in _listdir(ports_dir):
            pdir = os.path.join(ports_dir, num)
            for name in ("state", "phys_state", "link_layer", "rate", "lid", "sm_lid"):
                tree[os.path.join(pdir, name)] = read_text(os.path.join(pdir, name))
            for index in _listdir(os.path.join(pdir, "gids")):
                if not index.isdigit():
                    continue
                gid = read_text(os.path.join(pdir, "gids", index))
                if gid is None or _zero_gid(gid):
                    continue
                tree[os.path.join(pdir, "gids", index)] = gid
                for attr in ("types", "ndevs"):
                    path = os.path.join(pdir, "gid_attrs", attr, index)
                    tree[path] = read_text(path)
        net_dir = os.path.join(base, dev, "device", "net")
        for ifname in _listdir(net_dir):
            for attr in ("mtu", "operstate", "dev_port"):
                path = os.path.join(net_dir, ifname, attr)
                tree[path] = read_text(path)
    return tree


def read_pci(sysfs_root):
    """The raw vendor/device/class text of every PCI function."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    devices = []
    for address in _listdir(base):
        devdir = os.path.join(base, address)
        devices.append({"address": address,
                        "vendor": read_text(os.path.join(devdir, "vendor")) or "",
                        "device": read_text(os.path.join(devdir, "device")) or "",
                        "class": read_text(os.path.join(devdir, "class")) or ""})
    return devices


def read_net_sysfs(sysfs_root):
    """Interfaces from /sys/class/net (names and MTU), for nodes without iproute2."""
    base = os.path.join(sysfs_root, "class", "net")
    out = {}
    for name in _listdir(base):
        mtu = read_text(os.path.join(base, name, "mtu"))
        out[name] = {"mtu": int(mtu) if mtu and mtu.strip().isdigit() else None, "ipv4": [],
                     "operstate": (read_text(os.path.join(base, name, "operstate")) or "").strip() or None}
    return out


def read_link_speed(sysfs_root, ifname):
    """The link speed of ``ifname`` in Mb/s from ``/sys/class/net/<if>/speed``; None when down, unknown (-1) or absent."""
    text = read_text(os.path.join(sysfs_root, "class", "net", ifname, "speed"))
    try:
        speed = int((text or "").strip())
    except ValueError:
        return None
    return speed if speed > 0 else None


def is_virtual_interface(sysfs_root, ifname):
    """True when ``ifname`` has no device behind it (``/sys/class/net/<if>/device`` absent: veth, bridge, bond, tun),
    so that its ``speed`` is a nominal figure, not a negotiated link; None when the interface is not in sysfs."""
    base = os.path.join(sysfs_root, "class", "net", ifname)
    if not os.path.isdir(base):
        return None
    return not os.path.exists(os.path.join(base, "device"))


def _run(runner, argv):
    """Run a command in the C locale; (rc, stdout)."""
    rc, out, _err = runner.run_command(argv, environ_update=C_LOCALE)
    return rc, out


def gather_roce(runner, params):
    """Everything read from the node, as the facts ``roce_health.diagnose`` takes.

    :param params: ``sysfs_root`` (normally ``/sys``) and ``fabric_interface`` (None to choose).
    """
    root = params["sysfs_root"]
    ports = parse_sysfs_ib(read_ib_tree(root))
    nics = classify_pci(read_pci(root))["mellanox_nics"]

    interfaces = None
    default_if = None
    ip_bin = runner.get_bin_path("ip")
    if ip_bin:
        rc, out = _run(runner, [ip_bin, "-j", "addr", "show"])
        if rc == 0:
            try:
                interfaces = parse_ip_json(out)
            except ValueError:
                interfaces = None
        rc, out = _run(runner, [ip_bin, "-j", "route", "show", "default"])
        if rc == 0:
            default_if = default_route_interface(out)
    if interfaces is None:
        interfaces = read_net_sysfs(root)
    for name, entry in interfaces.items():
        entry["speed_mbps"] = read_link_speed(root, name)

    mtu_from_verbs = {}
    if ports:
        verbs_bin = runner.get_bin_path("ibv_devinfo")
        if verbs_bin:
            rc, out = _run(runner, [verbs_bin])
            if rc == 0:
                for dev in parse_ibv_devinfo(out):
                    for vport in dev["ports"]:
                        mtu_from_verbs[(dev["hca_id"], vport["port"])] = vport["active_mtu"]
    for port in ports:
        if port.get("netdev_mtu") is None and port.get("netdev"):
            port["netdev_mtu"] = (interfaces.get(port["netdev"]) or {}).get("mtu")
        verbs_mtu = mtu_from_verbs.get((port["device"], port["port"]))
        if verbs_mtu:
            port["active_mtu"], port["active_mtu_source"] = verbs_mtu, "ibv_devinfo"
        elif port.get("link_layer") == "Ethernet" and port.get("netdev_mtu"):
            port["active_mtu"] = roce_active_mtu(port["netdev_mtu"])
            port["active_mtu_source"] = "netdev_mtu"
        else:
            port["active_mtu_source"] = None

    qos = {}
    qos_bin = runner.get_bin_path("mlnx_qos") if ports else None
    if qos_bin:
        for netdev in sorted(set(p["netdev"] for p in ports if p.get("netdev") and p.get("link_layer") == "Ethernet")):
            rc, out = _run(runner, [qos_bin, "-i", netdev])
            if rc == 0:
                qos[netdev] = parse_mlnx_qos(out)

    fabric = params.get("fabric_interface") or choose_fabric_interface(ports, interfaces, default_if)
    fabric_ipv4 = None
    if fabric and (interfaces.get(fabric) or {}).get("ipv4"):
        fabric_ipv4 = interfaces[fabric]["ipv4"][0]
    else:
        for port in ports:
            for gid in port.get("gids") or []:
                if fabric and gid.get("ndev") == fabric and gid.get("version") == 2 and gid.get("ipv4") \
                        and not gid.get("link_local"):
                    fabric_ipv4 = fabric_ipv4 or gid["ipv4"]
    return {"ports": ports, "mellanox_nics": nics, "interfaces": interfaces, "qos": qos,
            "fabric_interface": fabric, "fabric_ipv4": fabric_ipv4,
            "fabric_speed_mbps": (interfaces.get(fabric) or {}).get("speed_mbps") if fabric else None,
            "fabric_virtual": is_virtual_interface(root, fabric) if fabric else None}
