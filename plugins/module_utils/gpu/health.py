# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health: facts from raw command output, then a diagnosis. Pure: no I/O.

``build_facts(raw)`` turns what the module's I/O edge collected (sysfs PCI listing, nvidia-smi
output and exit code, kernel log, lsmod, lspci) into facts; ``diagnose(facts, params)`` turns facts
into problems (``diagnosis.problem`` dicts). Codes and thresholds are documented in
docs/troubleshooting.md. Thresholds are parameters; :data:`DEFAULTS` holds their defaults.
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.versions import version_lt
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.parsers import (
    classify_smi,
    parse_nvlink_status,
    parse_query_gpu,
    parse_smi_q_text,
    parse_smi_xml,
    parse_topo_matrix,
)
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.system import (
    parse_dkms_status,
    parse_lsmod,
    parse_xid_lines,
    probe_not_called,
    xid_info,
)
from ansible_collections.ddp.cluster.plugins.module_utils.fabric.pci import (
    classify_pci,
    parse_lspci_acs,
    parse_lspci_k,
    PcieFormatError,
    kernel_problems,
    link_problems,
    parse_kernel_pcie,
    parse_lspci_links,
)

DEFAULTS = {
    "expected_gpus": None,
    "min_driver": None,
    "no_gpu_severity": "warning",
    # 85 C: the "GPU Max Operating Temp" nvidia-smi reports for A100-SXM4-80GB (driver 535,
    # telegraf fixture: gpu_temp_max_gpu_threshold 85 C; slowdown at 89 C, shutdown at 92 C).
    "max_temperature_c": 85,
    "check_xid": True,
    "pcie_check": True,
    "persistence_required": True,
}

# Remapped rows that could not be corrected: more than this and the GPU is to be replaced
# (Azure check_gpu_ecc and OCI check_gpu_setup.py both use 512).
MAX_UNCORRECTABLE_REMAPPED_ROWS = 512
# Retired pages (pre-Ampere): SBE + DBE at this count with a retirement pending = table full
# (Azure check_gpu_ecc on V100, NHC2018).
RETIRED_PAGES_TABLE_FULL = 62
# Clock event reasons that mean the hardware or the thermal limit slowed the GPU down (NVML names).
# Idle, application clocks, SW power cap, sync boost and display clock are normal and are ignored,
# as in Azure's check_gpu_clock_throttling (which warns only).
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
# CUDA minor-version compatibility floors (NVIDIA "CUDA Compatibility", Linux): the oldest driver a
# CUDA <major>.x program can start on, without the features of newer drivers (e.g. PTX JIT).
MINOR_VERSION_FLOORS = (("11", "450.80.02"), ("12", "525.60.13"))


def _param(params, name):
    value = (params or {}).get(name)
    return DEFAULTS[name] if value is None and name in DEFAULTS else value


def build_facts(raw):
    """Facts from the raw outputs the I/O edge collected. Every key of ``raw`` is optional.

    ``raw`` keys: ``smi_format`` (``xml`` for ``-q -x``, the default; ``text`` for ``-q``; ``csv`` for
    ``--query-gpu`` with a header), ``pci_devices`` (sysfs dicts for ``classify_pci``, None if /sys was unreadable),
    ``pci_ancestors`` ({address: [bridges above it]}), ``smi_found``, ``smi_rc``, ``smi_out``
    (``-q -x`` XML), ``smi_err``, ``nvlink`` (``nvlink --status``), ``topo`` (``topo -m``),
    ``kernel_log`` and ``kernel_log_source``, ``lsmod``, ``lspci_k``, ``lspci_vvv`` (``lspci_missing``: True
    when the PCIe check wanted it and lspci is not installed),
    ``kernel_release``, ``modinfo_rc`` (``modinfo -k <release> nvidia``), ``dkms``, ``nic_rates`` ({NIC PCI
    address: Gb/s of its fastest active port}, from sysfs: what its PCIe link must carry).
    """
    facts = {
        "pci_gpus": None, "pci_nics": [], "smi": {"found": bool(raw.get("smi_found")), "rc": raw.get("smi_rc"),
                                                  "failure": None},
        "driver_version": None, "cuda_version": None, "gpus": [], "xids": [],
        "kernel_log_source": raw.get("kernel_log_source"), "nouveau": None, "acs": None,
        "kernel_release": raw.get("kernel_release"), "module_for_kernel": None, "dkms": [],
        "topology": None, "kernel_log_unreadable": "kernel_log" in raw and raw["kernel_log"] is None,
        "pci_ancestors": raw.get("pci_ancestors") or {}, "pcie_links": None, "pcie_links_error": None,
        "pcie_kernel": None, "nic_rates": dict(raw.get("nic_rates") or {}),
    }
    if raw.get("pci_devices") is not None:
        pci = classify_pci(raw["pci_devices"])
        facts["pci_gpus"] = [d["address"] for d in pci["nvidia_gpus"]]
        facts["pci_nics"] = [d["address"] for d in pci["mellanox_nics"]]

    if raw.get("smi_found"):
        output = "\n".join(t for t in (raw.get("smi_out"), raw.get("smi_err")) if t)
        rc = raw.get("smi_rc")
        failure = classify_smi(rc, output if rc else (raw.get("smi_err") or ""))
        if failure is None:
            parser = {"xml": parse_smi_xml, "text": parse_smi_q_text, "csv": parse_query_gpu}[raw.get("smi_format", "xml")]
            try:
                parsed = parser(raw.get("smi_out") or "")
            except ValueError as exc:
                failure = {"kind": "other", "rc": rc, "message": str(exc)}
            else:
                facts["driver_version"] = parsed["driver_version"]
                facts["cuda_version"] = parsed.get("cuda_version")
                facts["gpus"] = parsed["gpus"]
        facts["smi"]["failure"] = failure
    elif raw.get("smi_found") is not None or raw.get("pci_devices") is not None:
        facts["smi"]["failure"] = classify_smi(None, "", found=False)

    if raw.get("nvlink"):
        attach_nvlinks(facts["gpus"], parse_nvlink_status(raw["nvlink"]))
    if raw.get("topo"):
        facts["topology"] = parse_topo_matrix(raw["topo"])
    if raw.get("kernel_log") is not None:
        facts["xids"] = parse_xid_lines(raw["kernel_log"])
        facts["pcie_kernel"] = parse_kernel_pcie(raw["kernel_log"])
    if raw.get("lsmod") is not None or raw.get("lspci_k") is not None:
        facts["nouveau"] = nouveau_state(raw.get("lsmod"), raw.get("lspci_k"), raw.get("kernel_log"))
    if raw.get("lspci_vvv") is not None:
        facts["acs"] = acs_redirects(raw["lspci_vvv"], raw.get("pci_ancestors"))
        try:
            facts["pcie_links"] = parse_lspci_links(raw["lspci_vvv"])
        except PcieFormatError as exc:
            facts["pcie_links_error"] = str(exc)
    elif raw.get("lspci_missing"):
        facts["pcie_links_error"] = "lspci is not installed (pciutils)"
    if raw.get("modinfo_rc") is not None:
        facts["module_for_kernel"] = raw["modinfo_rc"] == 0
    if raw.get("dkms"):
        facts["dkms"] = parse_dkms_status(raw["dkms"])
    return facts


def attach_nvlinks(gpus, nvlink):
    """Put each GPU's NVLink links (from ``parse_nvlink_status``) under ``gpus[i]['nvlinks']``."""
    by_index = dict((g["index"], g) for g in nvlink if g["index"] is not None)
    for gpu in gpus:
        entry = by_index.get(gpu["index"])
        if entry is not None:
            gpu["nvlinks"] = {"links": entry["links"], "all_inactive": entry["all_inactive"]}
    return gpus


def nouveau_state(lsmod_text, lspci_k_text, kernel_log=None):
    """``{loaded, bound, probe_not_called}``: nouveau in lsmod, NVIDIA devices it drives, NVRM's count."""
    modules = parse_lsmod(lsmod_text or "")
    bound = [d["address"] for d in parse_lspci_k(lspci_k_text or "")
             if d["driver"] == "nouveau"]
    return {"loaded": "nouveau" in modules, "bound": bound, "probe_not_called": probe_not_called(kernel_log)}


def acs_redirects(lspci_vvv, ancestors=None):
    """ACS entries with ReqRedir+/CmpltRedir+ on a bridge above a GPU or NIC (``ancestors``:
    {device address: [bridge addresses]}); with no ancestor map, every redirecting entry counts."""
    entries = [e for e in parse_lspci_acs(lspci_vvv) if e["redirect"]]
    if ancestors is None:
        return entries
    below = {}
    for device, bridges in ancestors.items():
        for bridge in bridges:
            below.setdefault(bridge, []).append(device)
    out = []
    for entry in entries:
        if entry["address"] in below:
            entry = dict(entry, devices_below=sorted(below[entry["address"]]))
            out.append(entry)
    return out


def _subject(gpu):
    if gpu.get("index") is None and not gpu.get("bus_id"):
        return "GPU"
    if gpu.get("bus_id"):
        return "GPU %s (%s)" % ("?" if gpu.get("index") is None else gpu["index"], gpu["bus_id"])
    return "GPU %s" % gpu["index"]


# Product names as nvidia-smi prints them ("Product Name" / <product_name> / --query-gpu name), e.g.
# "NVIDIA A100-SXM4-80GB" (telegraf and ml-engineering fixtures), "NVIDIA H100 80GB HBM3" (the SXM5 H100:
# nvidia_gpu_exporter's capture shows its 18 NVLinks), "NVIDIA A100 80GB PCIe" (ml-engineering fixture); older boards print "A100-PCIE-40GB".
# SXM/HGX modules (and Grace-Hopper/Blackwell superchips) have NVLink by design; "PCIe" boards are PCIe cards
# whose NVLink, if any, needs a bridge. "NVL" boards (H100 NVL, H200 NVL) are PCIe cards sold with NVLink bridges:
# not known either way from the name (a missing bridge is a warning).
_SXM_NAME = re.compile(r"SXM|HGX|\bH100 80GB HBM3\b|\bH100 SXM|\bH200\b(?! NVL)|\bGH200\b|\bB[23]00\b|\bGB[23]00\b")
_PCIE_NAME = re.compile(r"PCI[eE]")


def form_factor(name):
    """``'sxm'``, ``'pcie'`` or None (not known) from an nvidia-smi product name."""
    if not name:
        return None
    if _PCIE_NAME.search(name):
        return "pcie"
    if _SXM_NAME.search(name):
        return "sxm"
    return None


def _idle(gpu):
    reasons = gpu.get("clock_event_reasons")
    if reasons is not None and "gpu_idle" in reasons:
        return True
    util = gpu.get("utilization_gpu")
    if util is not None:
        return util == 0
    return reasons is None  # nothing known: treat as idle, so gen is not judged


def _smi_problems(facts, params, problems):
    failure = facts["smi"]["failure"]
    if failure is None:
        return
    kind = failure["kind"]
    detail = "nvidia-smi: %s (exit code %s)" % (failure["message"], failure["rc"])
    nouveau = facts.get("nouveau") or {}
    if kind == "not_installed":
        problems.append(problem(
            "GPU_DRIVER_NOT_INSTALLED", "error", "node",
            "NVIDIA GPUs are on the PCI bus but nvidia-smi is not installed",
            "Install the NVIDIA driver (role ddp.cluster.nvidia_driver), then reboot if nouveau was loaded."))
    elif kind == "nvml_missing":
        problems.append(problem(
            "GPU_DRIVER_NOT_INSTALLED", "error", "node",
            "%s: the NVML library (libnvidia-ml.so) is missing, the driver's user-space part is incomplete" % detail,
            "Reinstall the NVIDIA driver packages (role ddp.cluster.nvidia_driver)."))
    elif kind == "library_mismatch":
        problems.append(problem(
            "GPU_DRIVER_LIBRARY_MISMATCH", "error", "node",
            "%s: the loaded kernel module and the user-space driver libraries are different versions" % detail,
            "Reboot (the driver was upgraded while the old module stayed loaded), or unload the nvidia "
            "modules and load them again when no process uses the GPUs."))
    elif kind in ("driver_not_loaded", "no_devices"):
        if nouveau.get("bound") or nouveau.get("loaded") and kind == "driver_not_loaded":
            return  # GPU_NOUVEAU_BOUND says why
        if kind == "driver_not_loaded" and facts.get("module_for_kernel") is False:
            built = sorted(set(d["kernel"] for d in facts.get("dkms") or []
                               if d["module"].startswith("nvidia") and d["kernel"]))
            problems.append(problem(
                "GPU_NO_MODULE_FOR_KERNEL", "error", "node",
                "%s: no nvidia kernel module is built for the running kernel %s%s" % (
                    detail, facts.get("kernel_release") or "?",
                    " (DKMS has it for %s)" % ", ".join(built) if built else ""),
                "Install kernel-devel/kernel-headers for %s and rebuild with `dkms autoinstall -k %s` (or "
                "reinstall the driver), then `modprobe nvidia`; or boot the kernel the module was built for."
                % (facts.get("kernel_release") or "$(uname -r)", facts.get("kernel_release") or "$(uname -r)")))
            return
        problems.append(problem(
            "GPU_DRIVER_NOT_LOADED", "error", "node",
            detail + (": the driver is loaded but owns no GPU (wrong kernel-module flavour, open vs "
                      "proprietary, or GPUs hidden from this session)" if kind == "no_devices" else
                      ": the nvidia kernel module is not loaded"),
            "Run `modprobe nvidia` and read `dmesg | grep NVRM` for the reason it does not load (missing "
            "module for this kernel, Secure Boot signature, nouveau)."))
    else:
        problems.append(problem(
            "GPU_NVIDIA_SMI_FAILED", "error", "node", detail,
            {"fallen_off_bus": "The GPU fell off the bus: power-cycle the node; if it repeats, reseat or replace the GPU.",
             "inforom_corrupted": "The infoROM is corrupted: the GPU needs an RMA.",
             "hung": "nvidia-smi hung: a GPU or the driver is stuck; drain the node and reboot it.",
             "permission": "Run the check as root (become: true)."}.get(
                kind, "Read `dmesg | grep NVRM` and run `nvidia-smi` by hand on the node.")))


def _driver_problems(facts, params, problems):
    min_driver = _param(params, "min_driver")
    found = facts.get("driver_version")
    if not min_driver or not found:
        return
    if not version_lt(found, min_driver):
        return
    message = "driver %s is older than %s, the minimum for this stack's CUDA runtime" % (found, min_driver)
    floor = None
    for major, floor_version in MINOR_VERSION_FLOORS:
        if not version_lt(min_driver, floor_version):
            floor = (major, floor_version)
    if floor and not version_lt(found, floor[1]):
        message += ("; it is at or above the CUDA %s.x minor-version compatibility floor (%s), so CUDA %s.x "
                    "programs may start, but without what newer drivers add (PTX JIT fails)" % (
                        floor[0], floor[1], floor[0]))
    problems.append(problem(
        "GPU_DRIVER_TOO_OLD", "error", "node", message,
        "Upgrade the driver to %s or later (role ddp.cluster.nvidia_driver reads the minimum from the "
        "compatibility matrix), or pick a torch/CUDA build this driver supports." % min_driver))


def _gpu_problems(gpu, params, problems, gpu_count=1):
    subject = _subject(gpu)
    if _param(params, "persistence_required") and gpu.get("persistence_mode") is False:
        problems.append(problem(
            "GPU_PERSISTENCE_OFF", "warning", subject,
            "persistence mode is off: the driver tears down and re-initialises the GPU for each job",
            "Enable the nvidia-persistenced service (or `nvidia-smi -pm 1`)."))
    _memory_problems(gpu, subject, problems)
    _pcie_problems(gpu, params, subject, problems)
    _thermal_problems(gpu, params, subject, problems)
    _nvlink_problems(gpu, subject, problems, gpu_count)


def _memory_problems(gpu, subject, problems):
    """Add the GPU's memory faults (uncorrectable ECC errors, row remapping, retired pages) to ``problems``; returns None."""
    ecc = gpu.get("ecc") or {}
    vol, agg = ecc.get("volatile_uncorrectable"), ecc.get("aggregate_uncorrectable")
    if vol:
        problems.append(problem(
            "GPU_ECC_UNCORRECTABLE", "error", subject,
            "%d uncorrectable ECC error(s) since the last driver load (aggregate %s)" % (vol, agg),
            "Drain the node; reset the GPU or reboot, then run `dcgmi diag -r 2`; replace the GPU if errors return."))
    elif agg:
        problems.append(problem(
            "GPU_ECC_UNCORRECTABLE", "warning", subject,
            "%d uncorrectable ECC error(s) in the GPU's lifetime, none since the last driver load" % agg,
            "Watch it: if the row-remap or retired-page counts grow, or volatile errors appear, replace the GPU."))
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure") or (rows.get("uncorrectable") or 0) > MAX_UNCORRECTABLE_REMAPPED_ROWS:
        problems.append(problem(
            "GPU_ROW_REMAP_FAILED", "error", subject,
            "row remapping failed" if rows.get("failure") else
            "%d rows remapped for uncorrectable errors (> %d)" % (rows["uncorrectable"], MAX_UNCORRECTABLE_REMAPPED_ROWS),
            "The GPU has run out of spare memory rows: replace it (RMA)."))
    if rows.get("pending"):
        problems.append(problem(
            "GPU_ROW_REMAP_PENDING", "error", subject,
            "a memory row is marked for remapping; the remap only takes effect after a GPU reset",
            "Drain the node and reset the GPU (`nvidia-smi -r -i <index>`) or reboot."))
    pages = gpu.get("retired_pages") or {}
    if pages.get("pending"):
        count = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
        full = count >= RETIRED_PAGES_TABLE_FULL
        problems.append(problem(
            "GPU_RETIRED_PAGES_PENDING", "error" if full else "warning", subject,
            "%d retired page(s) and a retirement pending%s" % (
                count, " (retirement table full)" if full else ""),
            "Replace the GPU (RMA)." if full else "Reboot (or reload the driver) so the page is retired."))


def _pcie_problems(gpu, params, subject, problems):
    """Add a degraded PCIe link (narrower, or a lower generation while busy) to ``problems`` when checked; returns None."""
    if _param(params, "pcie_check"):
        pcie = gpu.get("pcie") or {}
        if pcie.get("width_current") is not None and pcie.get("width_max") is not None \
                and pcie["width_current"] < pcie["width_max"]:
            problems.append(problem(
                "GPU_PCIE_DEGRADED", "error", subject,
                "PCIe link width x%d, the link can do x%d" % (pcie["width_current"], pcie["width_max"]),
                "Reseat the GPU or riser, check the slot and cables; `lspci -vv` LnkSta shows the trained link."))
        elif pcie.get("gen_current") is not None and pcie.get("gen_max") is not None \
                and pcie["gen_current"] < pcie["gen_max"] and not _idle(gpu):
            # At full width but a lower generation while busy the link carries half (or less) of its bandwidth, as a
            # narrow link does: the same severity. An idle GPU slows its link down on purpose and is not judged.
            problems.append(problem(
                "GPU_PCIE_DEGRADED", "error", subject,
                "PCIe Gen%d while busy, the link can do Gen%d at the same width: the GPU gets %.0f%% of its host "
                "bandwidth" % (pcie["gen_current"], pcie["gen_max"],
                               100.0 * 2 ** (pcie["gen_current"] - pcie["gen_max"])),
                "Check BIOS PCIe speed settings and the riser/retimer, reseat the GPU; compare with another node under "
                "the same load (`nvidia-smi -q -d PCIE`)."))


def _thermal_problems(gpu, params, subject, problems):
    """Add throttled clocks and a high temperature to ``problems``; returns None."""
    reasons = [r for r in (gpu.get("clock_event_reasons") or []) if r in THROTTLE_REASONS]
    if reasons:
        problems.append(problem(
            "GPU_THROTTLED", "warning", subject,
            "clocks held down by: %s" % ", ".join(reasons),
            "Check cooling (fans, inlet air, blocked airflow) and power delivery (PSUs, power brake "
            "signal); `nvidia-smi -q -d PERFORMANCE` shows the reasons and their counters."))
    temp, tlimit = gpu.get("temperature_c"), gpu.get("temperature_tlimit_c")
    max_temp = _param(params, "max_temperature_c")
    if (temp is not None and temp >= max_temp) or (tlimit is not None and tlimit <= 0):
        problems.append(problem(
            "GPU_TEMPERATURE_HIGH", "warning", subject,
            "GPU at %s C%s" % (temp, "" if tlimit is None else " (%s C below its slowdown limit)" % tlimit),
            "Check cooling and airflow; the GPU will slow itself down at its slowdown temperature."))


def _nvlink_problems(gpu, subject, problems, gpu_count):
    """Add inactive NVLink links to ``problems`` (none for a PCIe card without a bridge); returns None."""
    nvlinks = gpu.get("nvlinks")
    if nvlinks:
        links = nvlinks["links"]
        down = [link["link"] for link in links if not link["active"]]
        if nvlinks["all_inactive"] or (links and len(down) == len(links)):
            form = form_factor(gpu.get("name"))
            if form == "pcie":
                return  # a PCIe card without an NVLink bridge: nothing is missing
            # An SXM GPU alone on its node (a 1-GPU cloud VM or NVSwitch partition) has no peer to link to.
            expected = form == "sxm" and gpu_count >= 2
            problems.append(problem(
                "GPU_NVLINK_INACTIVE", "error" if expected else "warning", subject,
                "all NVLink links are inactive on an SXM/HGX GPU (%s) of a %d-GPU node: GPU-to-GPU traffic falls "
                "back to PCIe" % (gpu.get("name"), gpu_count) if expected else
                "all NVLink links are inactive (%s; %s)" % (
                    gpu.get("name") or "unnamed GPU",
                    "the only GPU of the node" if form == "sxm" else
                    "form factor not known from the name; normal for a PCIe card without an NVLink bridge"),
                "On SXM/HGX boards: start nvidia-fabricmanager (NVSwitch systems), then reset the GPUs or reboot; "
                "on NVL boards check the NVLink bridges."))
        elif down:
            problems.append(problem(
                "GPU_NVLINK_INACTIVE", "error", subject,
                "NVLink link(s) %s inactive, %d of %d active" % (
                    ", ".join(str(d) for d in down), len(links) - len(down), len(links)),
                "Reset the GPU or reboot; if links stay down, the baseboard or GPU needs service."))


def _xid_problems(facts, gpus, problems):
    by_pci = {}
    for gpu in gpus:
        if gpu.get("bus_id"):
            by_pci[gpu["bus_id"].rsplit(".", 1)[0]] = gpu
    seen = {}
    for event in facts.get("xids") or []:
        key = (event["pci"], event["xid"])
        if key in seen:
            seen[key]["count"] += 1
        else:
            seen[key] = {"event": event, "count": 1}
    for (pci, code), item in sorted(seen.items()):
        meaning, severity = xid_info(code)
        gpu = by_pci.get(pci.split(".")[0])
        subject = _subject(gpu) if gpu else "PCI %s" % pci
        problems.append(problem(
            "GPU_XID", severity, subject,
            "Xid %d (%s) logged %d time(s); last: %s" % (code, meaning, item["count"], item["event"]["message"]),
            "Look up Xid %d in NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/) for the action; "
            "an application Xid (13, 31, 43) needs the job fixed, a hardware Xid needs a reset or service." % code))


def diagnose(facts, params=None):
    """Problems for one node. ``params`` holds the module options (missing ones take :data:`DEFAULTS`)."""
    problems = []
    expected = _param(params, "expected_gpus")
    pci_gpus = facts.get("pci_gpus")
    gpus = facts.get("gpus") or []
    smi = facts.get("smi") or {}
    smi_works = smi.get("found") and smi.get("failure") is None
    if not gpus and not pci_gpus and (pci_gpus is not None or not smi_works):
        problems.append(problem(
            "NO_GPU", _param(params, "no_gpu_severity"), "node",
            "no NVIDIA GPU on the PCI bus (no /sys/bus/pci/devices/*/vendor is 0x10de)",
            "Nothing to do on a CPU-only node. On a GPU node: check that the GPUs are seated and powered "
            "and that the VM has them passed through (`lspci -d 10de:`)."))
        if expected:
            problems.append(problem(
                "GPU_COUNT_MISMATCH", "error", "node", "0 GPUs found, %d expected" % expected,
                "Check the inventory's expected GPU count, then the hardware (`lspci -d 10de:`)."))
        if _param(params, "pcie_check") and facts.get("pci_nics"):
            _pcie_path_problems(facts, [], problems)  # a CPU node's NICs: their links matter as much
        return problems

    nouveau = facts.get("nouveau") or {}
    if nouveau.get("bound") or (nouveau.get("loaded") and nouveau.get("probe_not_called")):
        problems.append(problem(
            "GPU_NOUVEAU_BOUND", "error", "node",
            "nouveau owns the GPU(s)%s%s" % (
                " " + ", ".join(nouveau["bound"]) if nouveau.get("bound") else "",
                "; NVRM: the NVIDIA probe routine was not called for %d device(s)" % nouveau["probe_not_called"]
                if nouveau.get("probe_not_called") else ""),
            "Blacklist nouveau (`blacklist nouveau` and `options nouveau modeset=0` in /etc/modprobe.d), "
            "rebuild the initramfs (dracut -f / update-initramfs -u), reboot."))

    _smi_problems(facts, params, problems)

    if expected is not None:
        count = len(gpus) if smi_works else len(pci_gpus or [])
        if count != expected:
            problems.append(problem(
                "GPU_COUNT_MISMATCH", "error", "node",
                "%d GPU(s) found%s, %d expected" % (count, "" if smi_works else " on the PCI bus", expected),
                "Check `nvidia-smi -L` and `lspci -d 10de:`; a GPU missing from nvidia-smi but on the bus "
                "fell off the bus or failed to initialise (see Xid 79 / `dmesg | grep NVRM`)."))
    if smi_works and pci_gpus and len(gpus) < len(pci_gpus) and not any(g.get("mig_mode") for g in gpus):
        seen = set(g.get("bus_id") for g in gpus)
        missing = [a for a in pci_gpus if a not in seen]
        problems.append(problem(
            "GPU_COUNT_MISMATCH", "error", "node",
            "%d GPU(s) on the PCI bus, nvidia-smi sees %d (missing: %s)" % (
                len(pci_gpus), len(gpus), ", ".join(missing) or "?"),
            "Read `dmesg | grep NVRM` for the missing GPU (Xid 79: fallen off the bus); reboot, then reseat."))

    _driver_problems(facts, params, problems)
    for gpu in gpus:
        _gpu_problems(gpu, params, problems, len(gpus))

    if _param(params, "check_xid"):
        if facts.get("kernel_log_unreadable"):
            problems.append(problem(
                "GPU_XID_LOG_UNREADABLE", "info", "node",
                "neither `journalctl -k` nor `dmesg` could be read, so Xid errors were not checked",
                "Run the check as root, or allow reading the kernel log (kernel.dmesg_restrict=0)."))
        _xid_problems(facts, gpus, problems)

    if _param(params, "pcie_check"):
        problems.extend(acs_problems(facts.get("acs")))
        _pcie_path_problems(facts, gpus, problems)
    return problems


def acs_problems(entries):
    """``GPU_ACS_REDIRECT`` for each :func:`acs_redirects` entry (a bridge that redirects peer-to-peer traffic)."""
    problems = []
    for entry in entries or []:
        below = entry.get("devices_below")
        problems.append(problem(
            "GPU_ACS_REDIRECT", "error", "PCI bridge %s" % (entry["address"] or "?"),
            "ACS redirects peer-to-peer traffic to the root complex (%s)%s" % (
                " ".join("%s%s" % (k, "+" if v else "-") for k, v in entry["acsctl"].items()
                         if k in ("ReqRedir", "CmpltRedir")),
                "; above %s" % ", ".join(below) if below else ""),
            "Disable ACS on the PCIe switches (BIOS option, or `setpci -s <bridge> ECAP_ACS+0x6.w=0000` at "
            "boot) so GPU peer-to-peer and GPUDirect RDMA go through the switch; keep it in a VM/IOMMU setup "
            "that needs isolation."))
    return problems


def _pcie_path_problems(facts, gpus, problems):
    targets = dict((a, "GPU") for a in facts.get("pci_gpus") or [])
    targets.update((a, "HCA") for a in facts.get("pci_nics") or [])
    if not targets:
        return
    ancestors = facts.get("pci_ancestors") or {}
    if facts.get("pcie_links_error"):
        problems.append(problem(
            "PCIE_LINKS_UNREADABLE", "info", "node",
            "the PCIe links above the GPUs and HCAs were not checked: %s" % facts["pcie_links_error"],
            "Run the check as root on a node with pciutils (`lspci -vvv -D`)."))
    elif facts.get("pcie_links") is not None:
        if not any(a in facts["pcie_links"] for a in targets):
            problems.append(problem(
                "PCIE_LINKS_UNREADABLE", "info", "node",
                "the PCIe links above the GPUs and HCAs were not checked: `lspci -vvv` shows no link capability "
                "for them (run as a user who cannot read the PCI configuration space: `Capabilities: <access denied>`)",
                "Run the check as root (become: true)."))
        busy = [g["bus_id"] for g in gpus if g.get("bus_id") and not _idle(g)]
        problems.extend(link_problems(targets, ancestors, facts["pcie_links"], busy, facts.get("nic_rates")))
    if facts.get("pcie_kernel") is not None:
        problems.extend(kernel_problems(targets, ancestors, facts["pcie_kernel"], facts.get("pcie_links"),
                                        facts.get("nic_rates")))
