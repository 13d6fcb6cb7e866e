# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for ``nvidia-smi`` output. No I/O: text in, data out.

Every per-GPU parser (``-q -x`` XML, ``-q`` text, ``--query-gpu`` CSV) returns GPUs in one
normalised shape (see :func:`empty_gpu`), so the diagnosis in ``gpu_health`` does not care which
output it was given. A value nvidia-smi cannot give (``N/A``, ``[N/A]``, ``[Not Supported]``,
``Requested functionality has been deprecated``, an element that is absent) becomes ``None``, and
the diagnosis skips a check whose inputs are ``None``.

Field names follow the drivers seen in the fixtures (510, 535, 550, 590): ``clocks_throttle_reasons``
was renamed ``clocks_event_reasons`` in 535.54.03, and "SRAM Uncorrectable" became "SRAM Uncorrectable
Parity" + "SRAM Uncorrectable SEC-DED" in recent drivers; both spellings are read.
"""
from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET

_NA = ("n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "unknown error", "",
       "requested functionality has been deprecated", "[requested functionality has been deprecated]",
       "[insufficient permissions]", "insufficient permissions", "[gpu is lost]", "none")
_NA_STRICT = tuple(v for v in _NA if v != "none")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?$")
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")

# NVML clock event (throttle) reason bits (nvml.h nvmlClocksEventReason*), for the hex
# ``clocks_event_reasons.active`` CSV field.
REASON_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def strip_ansi(text):
    """Remove terminal escape sequences (``ESC[4m`` ... ``ESC[0m``) from text."""
    return _ANSI.sub("", text or "")


def clean(value, none_is_na=False):
    """Return the stripped string, or None when nvidia-smi says the value is not available."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() in (_NA if none_is_na else _NA_STRICT):
        return None
    return text


def to_int(value):
    """Leading integer of ``'16x'``, ``'41 C'``, ``'0 %'``; None when not available."""
    text = clean(value)
    if text is None:
        return None
    match = _NUMBER.match(text)
    if not match:
        return None
    return int(float(match.group(1)))


def to_float(value):
    """Leading number of ``'26.562 GB/s'``; None when not available."""
    text = clean(value)
    if text is None:
        return None
    match = _NUMBER.match(text)
    return float(match.group(1)) if match else None


def yes_no(value):
    """``Yes``/``Enabled``/``Active`` -> True, ``No``/``Disabled``/``Not Active`` -> False, else None."""
    text = clean(value)
    if text is None:
        return None
    low = text.lower()
    if low in ("yes", "enabled", "active", "true", "1"):
        return True
    if low in ("no", "disabled", "not active", "false", "0"):
        return False
    return None


def normalize_bus_id(value):
    """``'00000000:10:1C.0'`` -> ``'0000:10:1c.0'`` (sysfs form); ``'0000:10:1c'`` stays without function."""
    text = clean(value)
    if text is None:
        return None
    match = _BUS_ID.match(text.strip())
    if not match:
        return text.lower()
    domain, bus, dev, func = match.groups()
    domain = (domain or "0").lower()[-4:].rjust(4, "0")
    out = "%s:%s:%s" % (domain, bus.lower(), dev.lower())
    if func is not None:
        out += "." + func
    return out


def empty_gpu(index=None):
    """The normalised per-GPU dict every parser fills (None = unknown)."""
    return {
        "index": index,
        "name": None,
        "bus_id": None,
        "uuid": None,
        "persistence_mode": None,
        "mig_mode": None,
        "ecc": {"volatile_uncorrectable": None, "aggregate_uncorrectable": None,
                "volatile_correctable": None, "aggregate_correctable": None},
        "retired_pages": {"single_bit": None, "double_bit": None, "pending": None},
        "remapped_rows": {"correctable": None, "uncorrectable": None, "pending": None, "failure": None},
        "pcie": {"gen_current": None, "gen_max": None, "width_current": None, "width_max": None},
        "clock_event_reasons": None,
        "utilization_gpu": None,
        "temperature_c": None,
        "temperature_tlimit_c": None,
        "nvlinks": None,
    }


def _reason_name(raw):
    name = raw.strip().lower().replace(" ", "_").replace(".", "")
    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_", "clocks_event_reasons",
                   "clocks_throttle_reasons"):
        if name.startswith(prefix):
            name = name[len(prefix):].lstrip("_")
    if name in ("idle", "gpu_idle"):
        return "gpu_idle"
    if name in ("display_clocks_setting", "display_clock_setting"):
        return "display_clock_setting"
    return name


def reasons_from_mask(mask):
    """Names of the active reasons in a hex mask such as ``'0x0000000000000001'``; None if unknown."""
    text = clean(mask)
    if text is None:
        return None
    try:
        value = int(text, 16)
    except ValueError:
        return None
    return [name for bit, name in REASON_BITS if value & bit]


def _sum_known(values):
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# ---------------------------------------------------------------- --query-gpu CSV

def _split_header(field):
    """``'memory.used [MiB]'`` -> ``'memory.used'``."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", field.strip())


def parse_query_csv(text, fields=None):
    """Parse ``nvidia-smi --query-*=... --format=csv[,noheader][,nounits]``.

    :param fields: the field list that was queried, required with ``noheader``; without it the first
        data line is the header (unit suffixes such as `` [MiB]`` are dropped from the names).
    :returns: list of dicts field -> value; not-available values are None, units stay in the value
        (use :func:`to_int`). Shell prompts (``$ nvidia-smi ...``) and ``[...]`` elision lines are skipped.
    """
    lines = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("$ ") or stripped.startswith("#") or stripped == "[...]":
            continue
        lines.append(line)
    rows = list(csv.reader(lines, skipinitialspace=True))
    if not rows:
        return []
    if fields is None:
        header = [_split_header(h) for h in rows[0]]
        rows = rows[1:]
    else:
        header = [f.strip() for f in fields]
    out = []
    for row in rows:
        if len(row) != len(header):
            continue
        out.append(dict((key, clean(value)) for key, value in zip(header, row)))
    return out


def _first(row, *keys):
    for key in keys:
        if row.get(key) is not None:
            return row[key]
    return None


def gpu_from_query_row(row, position=None):
    """Normalise one ``--query-gpu`` row (any subset of the fields) to :func:`empty_gpu`'s shape."""
    gpu = empty_gpu(to_int(row.get("index")) if row.get("index") is not None else position)
    gpu["name"] = _first(row, "name", "gpu_name")
    gpu["bus_id"] = normalize_bus_id(_first(row, "pci.bus_id", "gpu_bus_id"))
    gpu["uuid"] = _first(row, "uuid", "gpu_uuid")
    gpu["persistence_mode"] = yes_no(row.get("persistence_mode"))
    gpu["mig_mode"] = yes_no(row.get("mig.mode.current"))
    ecc = gpu["ecc"]
    for kind, csv_kind in (("uncorrectable", "uncorrected"), ("correctable", "corrected")):
        for scope in ("volatile", "aggregate"):
            base = "ecc.errors.%s.%s." % (csv_kind, scope)
            total = to_int(row.get(base + "total"))
            if total is None:
                total = _sum_known([to_int(row.get(base + "sram")), to_int(row.get(base + "dram"))])
            if total is None:
                total = _sum_known([to_int(row.get(base + part)) for part in (
                    "device_memory", "register_file", "l1_cache", "l2_cache", "texture_memory", "cbu")])
            ecc["%s_%s" % (scope, kind)] = total
    gpu["retired_pages"] = {
        "single_bit": to_int(row.get("retired_pages.single_bit_ecc.count")),
        "double_bit": to_int(_first(row, "retired_pages.double_bit.count", "retired_pages.double_bit_ecc.count")),
        "pending": yes_no(row.get("retired_pages.pending")),
    }
    gpu["remapped_rows"] = {
        "correctable": to_int(row.get("remapped_rows.correctable")),
        "uncorrectable": to_int(row.get("remapped_rows.uncorrectable")),
        "pending": yes_no(row.get("remapped_rows.pending")),
        "failure": yes_no(row.get("remapped_rows.failure")),
    }
    gpu["pcie"] = {
        "gen_current": to_int(row.get("pcie.link.gen.current")),
        "gen_max": to_int(row.get("pcie.link.gen.max")),
        "width_current": to_int(row.get("pcie.link.width.current")),
        "width_max": to_int(row.get("pcie.link.width.max")),
    }
    mask = _first(row, "clocks_event_reasons.active", "clocks_throttle_reasons.active")
    reasons = reasons_from_mask(mask)
    if reasons is None:
        named = [(k, v) for k, v in row.items()
                 if (k.startswith("clocks_event_reasons.") or k.startswith("clocks_throttle_reasons."))
                 and not k.endswith((".active", ".supported")) and yes_no(v) is not None]
        if named:
            reasons = [_reason_name(k.split(".", 1)[1]) for k, v in named if yes_no(v)]
    gpu["clock_event_reasons"] = reasons
    gpu["utilization_gpu"] = to_int(row.get("utilization.gpu"))
    gpu["temperature_c"] = to_int(row.get("temperature.gpu"))
    gpu["temperature_tlimit_c"] = to_int(row.get("temperature.gpu.tlimit"))
    return gpu


def parse_query_gpu(text, fields=None):
    """``--query-gpu`` CSV -> ``{driver_version, gpus}`` (normalised GPUs, in output order)."""
    rows = parse_query_csv(text, fields)
    gpus = [gpu_from_query_row(row, position) for position, row in enumerate(rows)]
    driver = None
    for row in rows:
        driver = driver or row.get("driver_version")
    return {"driver_version": driver, "cuda_version": None, "gpus": gpus}


# ---------------------------------------------------------------- -q -x XML

def _x(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None:
        return None
    return clean(found.text)


def _xml_ecc(node):
    """Sum the uncorrectable and correctable counters of an ``ecc_errors/volatile|aggregate`` node."""
    if node is None:
        return None, None
    double_bit = node.find("double_bit")
    if double_bit is not None:  # pre-Ampere layout: single_bit/double_bit with a total
        unc = to_int(_x(double_bit, "total"))
        cor = to_int(_x(node, "single_bit/total"))
        return unc, cor
    unc = []
    cor = []
    for child in node:
        tag = child.tag.lower()
        if "uncorrectable" in tag:
            unc.append(to_int(child.text))
        elif "correctable" in tag:
            cor.append(to_int(child.text))
    return _sum_known(unc), _sum_known(cor)


def parse_smi_xml(text):
    """``nvidia-smi -q -x`` -> ``{driver_version, cuda_version, attached_gpus, gpus}``.

    GPUs keep document order, which is nvidia-smi's index order; ``index`` is that position.
    Raises ValueError when the text is not nvidia-smi XML.
    """
    try:
        root = ET.fromstring((text or "").strip())
    except ET.ParseError as exc:
        raise ValueError("not nvidia-smi XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("not nvidia-smi XML: root element is <%s>" % root.tag)
    gpus = []
    for position, node in enumerate(root.findall("gpu")):
        gpu = empty_gpu(position)
        gpu["name"] = _x(node, "product_name")
        gpu["bus_id"] = normalize_bus_id(_x(node, "pci/pci_bus_id") or node.get("id"))
        gpu["uuid"] = _x(node, "uuid")
        gpu["persistence_mode"] = yes_no(_x(node, "persistence_mode"))
        gpu["mig_mode"] = yes_no(_x(node, "mig_mode/current_mig"))
        vol_unc, vol_cor = _xml_ecc(node.find("ecc_errors/volatile"))
        agg_unc, agg_cor = _xml_ecc(node.find("ecc_errors/aggregate"))
        gpu["ecc"] = {"volatile_uncorrectable": vol_unc, "aggregate_uncorrectable": agg_unc,
                      "volatile_correctable": vol_cor, "aggregate_correctable": agg_cor}
        pending = yes_no(_x(node, "retired_pages/pending_retirement"))
        if pending is None:
            pending = yes_no(_x(node, "retired_pages/pending_blacklist"))
        gpu["retired_pages"] = {
            "single_bit": to_int(_x(node, "retired_pages/multiple_single_bit_retirement/retired_count")),
            "double_bit": to_int(_x(node, "retired_pages/double_bit_retirement/retired_count")),
            "pending": pending,
        }
        gpu["remapped_rows"] = {
            "correctable": to_int(_x(node, "remapped_rows/remapped_row_corr")),
            "uncorrectable": to_int(_x(node, "remapped_rows/remapped_row_unc")),
            "pending": yes_no(_x(node, "remapped_rows/remapped_row_pending")),
            "failure": yes_no(_x(node, "remapped_rows/remapped_row_failure")),
        }
        link = "pci/pci_gpu_link_info/"
        gpu["pcie"] = {
            "gen_current": to_int(_x(node, link + "pcie_gen/current_link_gen")),
            "gen_max": to_int(_x(node, link + "pcie_gen/max_link_gen")),
            "width_current": to_int(_x(node, link + "link_widths/current_link_width")),
            "width_max": to_int(_x(node, link + "link_widths/max_link_width")),
        }
        reasons_node = node.find("clocks_event_reasons")
        if reasons_node is None:
            reasons_node = node.find("clocks_throttle_reasons")
        if reasons_node is not None:
            states = [(_reason_name(child.tag), yes_no(child.text)) for child in reasons_node]
            states = [(name, state) for name, state in states if state is not None]
            if states:
                gpu["clock_event_reasons"] = [name for name, state in states if state]
        gpu["utilization_gpu"] = to_int(_x(node, "utilization/gpu_util"))
        gpu["temperature_c"] = to_int(_x(node, "temperature/gpu_temp"))
        gpu["temperature_tlimit_c"] = to_int(_x(node, "temperature/gpu_temp_tlimit"))
        gpus.append(gpu)
    return {
        "driver_version": _x(root, "driver_version"),
        "cuda_version": _x(root, "cuda_version"),
        "attached_gpus": to_int(_x(root, "attached_gpus")),
        "gpus": gpus,
    }


# ---------------------------------------------------------------- -q text

_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def _text_tree(lines):
    """Indented ``Key : Value`` lines -> nested ``{key: {'value': str|None, 'children': {...}}}``."""
    root = {"value": None, "children": {}}
    stack = [(-1, root)]
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        content = line.strip()
        if ":" in content:
            key, value = content.split(":", 1)
            key, value = key.strip(), value.strip()
        else:
            key, value = content, None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else root
        node = {"value": value, "children": {}}
        parent["children"].setdefault(key, node)
        stack.append((indent, parent["children"][key]))
    return root


def _t(node, *path):
    for key in path:
        if node is None:
            return None
        node = node["children"].get(key)
    return node


def _tv(node, *path):
    found = _t(node, *path)
    return None if found is None else clean(found["value"])


def _walk(node):
    for key, child in node["children"].items():
        yield key, child
        yield from _walk(child)


def _text_ecc(node):
    if node is None:
        return None, None
    double_bit = _t(node, "Double Bit")
    if double_bit is not None:
        return to_int(_tv(double_bit, "Total")), to_int(_tv(node, "Single Bit", "Total"))
    unc = []
    cor = []
    for key, child in node["children"].items():
        low = key.lower()
        if "uncorrectable" in low:
            unc.append(to_int(child["value"]))
        elif "correctable" in low:
            cor.append(to_int(child["value"]))
    return _sum_known(unc), _sum_known(cor)


def _gpu_from_text(node, position, bus_id):
    gpu = empty_gpu(position)
    gpu["name"] = _tv(node, "Product Name")
    gpu["bus_id"] = normalize_bus_id(_tv(node, "PCI", "Bus Id") or bus_id)
    gpu["uuid"] = _tv(node, "GPU UUID")
    gpu["persistence_mode"] = yes_no(_tv(node, "Persistence Mode"))
    gpu["mig_mode"] = yes_no(_tv(node, "MIG Mode", "Current"))
    vol_unc, vol_cor = _text_ecc(_t(node, "ECC Errors", "Volatile"))
    agg_unc, agg_cor = _text_ecc(_t(node, "ECC Errors", "Aggregate"))
    gpu["ecc"] = {"volatile_uncorrectable": vol_unc, "aggregate_uncorrectable": agg_unc,
                  "volatile_correctable": vol_cor, "aggregate_correctable": agg_cor}
    retired = _t(node, "Retired Pages")
    if retired is not None:
        pending = yes_no(_tv(retired, "Pending Page Blacklist"))
        if pending is None:
            pending = yes_no(_tv(retired, "Pending Page Retirement"))
        gpu["retired_pages"] = {
            "single_bit": to_int(_tv(retired, "Single Bit ECC")
                                 or _tv(retired, "Multiple Single Bit Retirement", "Retired Page Count")),
            "double_bit": to_int(_tv(retired, "Double Bit ECC")
                                 or _tv(retired, "Double Bit Retirement", "Retired Page Count")),
            "pending": pending,
        }
    remap = _t(node, "Remapped Rows")
    if remap is not None:
        gpu["remapped_rows"] = {
            "correctable": to_int(_tv(remap, "Correctable Error")),
            "uncorrectable": to_int(_tv(remap, "Uncorrectable Error")),
            "pending": yes_no(_tv(remap, "Pending")),
            "failure": yes_no(_tv(remap, "Remapping Failure Occurred")),
        }
    link = _t(node, "PCI", "GPU Link Info")
    gpu["pcie"] = {
        "gen_current": to_int(_tv(link, "PCIe Generation", "Current")),
        "gen_max": to_int(_tv(link, "PCIe Generation", "Max")),
        "width_current": to_int(_tv(link, "Link Width", "Current")),
        "width_max": to_int(_tv(link, "Link Width", "Max")),
    }
    reasons = _t(node, "Clocks Event Reasons") or _t(node, "Clocks Throttle Reasons")
    if reasons is not None:
        states = [(_reason_name(key), yes_no(child["value"])) for key, child in _walk(reasons)]
        states = [(name, state) for name, state in states if state is not None]
        if states:
            gpu["clock_event_reasons"] = [name for name, state in states if state]
    gpu["utilization_gpu"] = to_int(_tv(node, "Utilization", "GPU"))
    gpu["temperature_c"] = to_int(_tv(node, "Temperature", "GPU Current Temp"))
    gpu["temperature_tlimit_c"] = to_int(_tv(node, "Temperature", "GPU T.Limit Temp"))
    return gpu


def parse_smi_q_text(text):
    """``nvidia-smi -q`` (or an excerpt of it) -> ``{driver_version, cuda_version, attached_gpus, gpus}``.

    GPUs are the ``GPU 00000000:xx:yy.z`` sections in order. An excerpt without a GPU header (only
    an ``ECC Errors`` block, say) yields one GPU whose bus id is None. ``[...]`` elisions, code
    fences and shell prompts are ignored.
    """
    top = []
    sections = []  # (bus_id, lines)
    current = None
    for raw in (text or "").splitlines():
        line = raw.rstrip().replace("\t", "    ")
        stripped = line.strip()
        if stripped in ("[...]", "```") or stripped.startswith("$ ") or stripped.startswith("==="):
            continue
        match = _GPU_HEADER.match(stripped)
        if match and not line.startswith(" "):
            current = (match.group(1), [])
            sections.append(current)
            continue
        if current is None:
            top.append(line)
        else:
            current[1].append(line)
    top_tree = _text_tree([ln for ln in top if not ln.startswith(" ")])
    if not sections:
        nested = [ln for ln in top if ln.startswith(" ")]
        if nested:
            sections.append((None, nested))
    gpus = [_gpu_from_text(_text_tree(lines), position, bus_id)
            for position, (bus_id, lines) in enumerate(sections)]
    return {
        "driver_version": _tv(top_tree, "Driver Version"),
        "cuda_version": _tv(top_tree, "CUDA Version"),
        "attached_gpus": to_int(_tv(top_tree, "Attached GPUs")),
        "gpus": gpus,
    }


# ---------------------------------------------------------------- topo -m

_TOPO_NAME = re.compile(r"^(GPU\d+|NIC\d+|mlx\w+|CPU\d*)$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def _topo_cells(line):
    return [cell.strip() for cell in re.split(r"\t+|\s{2,}", strip_ansi(line).strip()) if cell.strip()]


def parse_topo_matrix(text):
    """``nvidia-smi topo -m`` / ``-mp`` -> ``{devices, matrix, affinity, nics}``.

    ``matrix[row][column]`` holds the link word (``X``, ``NV12``, ``PIX``, ``NODE``, ``SYS`` ...);
    ``affinity[row]`` has ``cpu``, ``numa`` and ``gpu_numa_id`` (None when blank or N/A);
    ``nics`` maps ``NIC0`` to its device (``mlx5_0``) from the "NIC Legend". ANSI escapes and
    tab or space separation are both handled.
    """
    devices = []
    affinity_cols = []
    matrix = {}
    affinity = {}
    nics = {}
    in_legend = False
    for raw in (text or "").splitlines():
        line = strip_ansi(raw)
        stripped = line.strip()
        if stripped.startswith("Legend:") or stripped.startswith("NIC Legend:"):
            in_legend = True
            continue
        if in_legend:
            match = re.match(r"^(NIC\d+):\s*(\S+)$", stripped)
            if match:
                nics[match.group(1)] = match.group(2)
            continue
        cells = _topo_cells(line)
        if not cells:
            continue
        if not devices:
            if cells[0] == "GPU0":
                devices = [c for c in cells if c not in _AFFINITY_COLUMNS]
                affinity_cols = [c for c in cells if c in _AFFINITY_COLUMNS]
            continue
        if not _TOPO_NAME.match(cells[0]):
            continue
        name, values = cells[0], cells[1:]
        matrix[name] = dict(zip(devices, values[:len(devices)]))
        extra = values[len(devices):]
        row_aff = dict(zip(affinity_cols, [clean(v) for v in extra]))
        affinity[name] = {"cpu": row_aff.get("CPU Affinity"), "numa": row_aff.get("NUMA Affinity"),
                          "gpu_numa_id": row_aff.get("GPU NUMA ID")}
    return {"devices": devices, "matrix": matrix, "affinity": affinity, "nics": nics}


# ---------------------------------------------------------------- nvlink --status

_NVLINK_GPU = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)]+)\))?\s*$")
_NVLINK_LINK = re.compile(r"^Link\s+(\d+):\s*(.+)$")


def parse_nvlink_status(text):
    """``nvidia-smi nvlink --status`` (``-s``) -> list of ``{index, name, uuid, links, all_inactive}``.

    ``links`` is a list of ``{link, active, speed_gbps}`` (``<inactive>`` -> active False).
    ``all_inactive`` is True when NVML said "all links are inactive" for that GPU (or, before any
    GPU line, for the node: then a GPU with index None carries it).
    """
    gpus = []
    current = None
    for raw in (text or "").splitlines():
        stripped = raw.strip()
        if not stripped or stripped == "[...]" or stripped.startswith("$ "):
            continue
        match = _NVLINK_GPU.match(stripped)
        if match:
            current = {"index": int(match.group(1)), "name": match.group(2) or None,
                       "uuid": match.group(3), "links": [], "all_inactive": False}
            gpus.append(current)
            continue
        if "all links are inactive" in stripped.lower():
            if current is None:
                current = {"index": None, "name": None, "uuid": None, "links": [], "all_inactive": True}
                gpus.append(current)
            current["all_inactive"] = True
            continue
        match = _NVLINK_LINK.match(stripped)
        if match and current is not None:
            state = match.group(2).strip()
            inactive = "inactive" in state.lower()
            current["links"].append({"link": int(match.group(1)), "active": not inactive,
                                     "speed_gbps": None if inactive else to_float(state)})
    return gpus


# ---------------------------------------------------------------- exit code + message

SMI_EXIT_CODES = {
    # nvidia-smi(1) "RETURN VALUE"; the Azure NHC check csc_nvidia_smi.nhc maps the same codes.
    2: "invalid argument or flag",
    3: "the requested operation is not available on the target device",
    4: "the current user does not have permission",
    6: "the query was unsuccessful",
    8: "a GPU's external power cables are not attached",
    9: "the NVIDIA driver is not loaded",
    10: "the NVIDIA kernel detected an interrupt issue with a GPU",
    12: "the NVML shared library could not be found or loaded",
    13: "the local NVML does not implement this function",
    14: "the infoROM is corrupted",
    15: "the GPU has fallen off the bus or has otherwise become inaccessible",
    255: "other error or internal driver error",
}


def classify_smi(rc, output, found=True):
    """Classify how nvidia-smi ended. Returns None when it worked, else ``{kind, rc, message}``.

    ``kind`` is one of ``not_installed``, ``driver_not_loaded``, ``library_mismatch``,
    ``no_devices``, ``nvml_missing``, ``permission``, ``inforom_corrupted``, ``fallen_off_bus``,
    ``hung`` (rc 124 from ``timeout``), ``other``. The message text wins over the code where both
    speak (the version mismatch has no code of its own).
    """
    text = (output or "").strip()
    low = text.lower()
    first = text.splitlines()[0].strip() if text else ""
    if not found or rc == 127:
        return {"kind": "not_installed", "rc": rc, "message": first or "nvidia-smi not found"}
    if "driver/library version mismatch" in low:
        kind = "library_mismatch"
    elif "couldn't communicate with the nvidia driver" in low or "could not communicate with the nvidia driver" in low \
            or rc == 9:
        kind = "driver_not_loaded"
    elif "no devices were found" in low:
        kind = "no_devices"
    elif rc == 12 or "nvml shared library" in low or "libnvidia-ml" in low:
        kind = "nvml_missing"
    elif rc == 4 or "insufficient permissions" in low:
        kind = "permission"
    elif rc == 14 or "inforom is corrupted" in low:
        kind = "inforom_corrupted"
    elif rc == 15 or "fallen off the bus" in low:
        kind = "fallen_off_bus"
    elif rc == 124:
        kind = "hung"
    elif rc == 0:
        return None
    else:
        kind = "other"
    message = first or SMI_EXIT_CODES.get(rc, "exit code %s" % rc)
    return {"kind": kind, "rc": rc, "message": message}
