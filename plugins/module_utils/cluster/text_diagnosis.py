# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One entry point for a command's or a log's text: which output it is, and what it says (pure, no I/O).

``ddp-health --diagnose FILE`` and the ``ddp.cluster.diagnose_output`` module hand a text to :func:`diagnose_text`,
which recognises it (:func:`detect_kind`, or the kind given) and runs the same reader and diagnosis the modules and
the health stage use on live nodes:

==================  ===========================================================  ==================================
kind                the text                                                     read by
==================  ===========================================================  ==================================
``scontrol``        ``scontrol show node [-o]``                                  ``slurm_diag.node_problems``
``sinfo``           ``sinfo`` (default, ``-N``, ``-l``, ``-R``, ``%N|%T|%E``)    ``slurm_diag.node_problems``
``slurm_log``       slurmctld / slurmd log lines (plain, syslog, journal)        ``slurm_diag.log_problems``
``training_log``    a training job's or torchrun's output                        ``runtime_failures.runtime_problems``
``nccl_tests``      ``all_reduce_perf`` and friends (table or failure)           ``nccl_health.diagnose_nccl_tests``
``nccl_debug``      ``NCCL_DEBUG=INFO`` lines                                    ``nccl_parsers.parse_nccl_debug``
``ibstat``          ``ibstat``                                                   ``roce_health.diagnose``
``ibstatus``        ``ibstatus``                                                 ``roce_health.diagnose``
``ibv_devinfo``     ``ibv_devinfo [-v]``                                         ``roce_health.diagnose``
``rdma_link``       ``rdma link [show]``                                         ``roce_health.diagnose``
``lspci``           ``lspci -vv[v]`` (links, ACS)                                ``pci.lspci_text_problems``
``kernel_log``      ``dmesg`` / ``journalctl -k`` (Xids, PCIe limited/AER)       ``gpu_system``, ``pci``
``ldconfig``        ``ldconfig -p``, ``LD_LIBRARY_PATH=...``, a load error       ``node_stack.shadowing_problems``
``nvidia_smi``      ``nvidia-smi -q [-x]`` or ``--query-gpu ... --format=csv``   ``gpu_health.diagnose``
``sysfs_ib``        JSON ``{sysfs path: content}`` of ``/sys/class/infiniband``  ``roce_health.diagnose``
==================  ===========================================================  ==================================

``context`` carries what the text alone cannot say (all optional): ``rc`` (nccl-tests' exit status; default 0 when
the table completed, else 1), ``min_busbw_gbps`` (else ``floors.nccl_tests_floor`` from the run's GPUs, and
``rdma_ports_gbps``: the active RDMA port rates of one node, for runs across nodes), ``expected_transport``, ``world_size``, ``gpus`` (``{node: GPUs it
has}``), ``nodes`` (Slurm node names to judge), ``clock_offsets`` (``{node: s}``), ``nccl_ib_hca``, ``line_rates``
(``{NIC PCI address or "*": Gb/s}``), ``busy`` (GPUs busy when lspci ran, default True), ``ld_library_path``,
``wheel_lib_dirs``, ``expected_gpus``, ``subject``.
"""
from __future__ import annotations

import json
import re

from ansible_collections.ddp.cluster.plugins.module_utils.nccl import floors
from ansible_collections.ddp.cluster.plugins.module_utils.gpu import health as gpu_health
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import health as nccl_health
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import parsers as nccl_parsers
from ansible_collections.ddp.cluster.plugins.module_utils.cluster import node_stack
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import pci
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import rdma_parsers
from ansible_collections.ddp.cluster.plugins.module_utils.fabric import roce_health
from ansible_collections.ddp.cluster.plugins.module_utils.nccl import runtime_failures
from ansible_collections.ddp.cluster.plugins.module_utils.slurm import diag as slurm_diag
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import SEVERITIES, problem
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.system import parse_xid_lines, xid_info
from ansible_collections.ddp.cluster.plugins.module_utils.cluster.verdict import node_verdict

KINDS = ("scontrol", "sinfo", "slurm_log", "training_log", "nccl_tests", "nccl_debug", "ibstat", "ibstatus",
         "ibv_devinfo", "rdma_link", "lspci", "kernel_log", "ldconfig", "nvidia_smi", "sysfs_ib")

_TRAINING = re.compile(r"Watchdog caught collective operation timeout|ChildFailedError|DistStoreError|"
                       r"DistNetworkError|client socket has timed out|gloo/transport|Rendezvous\w*Error|"
                       r"NCCL error:|NCCL error in:|ProcessGroupNCCL|failed \(exitcode: -?\d+\) local_rank")


def _sysfs_tree(text):
    """``{path: content}`` when the text is a JSON object of sysfs paths under an ``infiniband`` folder, else None."""
    if not (text or "").lstrip().startswith("{"):
        return None
    try:
        tree = json.loads(text)
    except ValueError:
        return None
    if isinstance(tree, dict) and any("/infiniband/" in str(k) for k in tree):
        return tree
    return None


def detect_kind(text):
    """The kind of output (one of :data:`KINDS`), or None when nothing fits."""
    body = text or ""
    if _sysfs_tree(body) is not None:
        return "sysfs_ib"
    if re.search(r"(?:^|\s)NodeName=\S", body) and re.search(r"(?:^|\s)State=\S", body):
        return "scontrol"
    if re.search(r"^\s*#\s*nThread\s|# Avg bus bandwidth|Test (?:NCCL|CUDA) failure", body, re.M):
        return "nccl_tests"
    if _TRAINING.search(body):
        return "training_log"
    if re.search(r"<nvidia_smi_log>|=+NVSMI LOG=+|^\s*(?:timestamp, )?(?:index|name|driver_version|pci\.bus_id)[,\s]|"
                 r"^Driver Version\s+: \d|^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$",
                 body, re.M) and not re.search(r"^\s*LnkCap:", body, re.M):
        return "nvidia_smi"
    if re.search(r"^\s*CA\s+'[^']+'", body, re.M):
        return "ibstat"
    if re.search(r"Infiniband device '[^']+' port \d+ status", body):
        return "ibstatus"
    if re.search(r"^\s*hca_id:", body, re.M):
        return "ibv_devinfo"
    if re.search(r"^\s*(?:\d+/\d+:\s+|link\s+)\S+/\d+:?\s+(?:subnet_prefix|state)\s", body, re.M):
        return "rdma_link"
    if re.search(r"^\s*LnkCap:", body, re.M):
        return "lspci"
    if re.search(r"\(libc6[^)]*\)\s*=>|LD_LIBRARY_PATH=|undefined symbol:|Could not load library|"
                 r"cannot open shared object file", body):
        return "ldconfig"
    lines = [line for line in body.splitlines() if line.strip()]
    if lines and all(slurm_diag.headerless_reason_row(line) for line in lines):
        return "sinfo"  # sinfo -R rows without their header: REASON USER TIMESTAMP NODELIST
    if slurm_diag.parse_slurm_log(body):
        return "slurm_log"
    if re.search(r"NVRM: Xid|PCIe Bus Error|available PCIe bandwidth", body):
        return "kernel_log"
    if re.search(r"NCCL (?:INFO|WARN)", body):
        return "nccl_debug"
    try:
        if slurm_diag.parse_node_states(body):
            return "sinfo"
    except slurm_diag.SlurmTextError:
        pass
    return None


def _ports_problems(ports, ctx, gids_known):
    params = {"nccl_ib_hca": ctx.get("nccl_ib_hca")}
    found = roce_health.diagnose({"ports": ports}, params)
    if not gids_known:
        # The text does not print GIDs or the netdev MTU: the RoCE GID/MTU checks need sysfs (roce_health on the node).
        found = [p for p in found if p["code"] not in ("ROCE_NO_V2_GID", "ROCE_MTU_LOW")]
    return found


def diagnose_text(text, kind="auto", context=None):
    """Read ``text`` as ``kind`` (``auto``: :func:`detect_kind`) and diagnose it.

    :returns: ``{"kind", "problems", "facts", "verdict", "errors", "warnings"}``; ``verdict`` as
        ``verdict.node_verdict`` (PASS/WARN/FAIL; UNKNOWN when the text is of no kind this reads).
    :raises ValueError: an unknown ``kind``. A text the reader of ``kind`` refuses is ``DIAGNOSE_UNKNOWN_INPUT``
        (verdict UNKNOWN).
    """
    ctx = dict(context or {})
    subject = ctx.get("subject") or "input"
    if kind in (None, "", "auto"):
        kind = detect_kind(text)
    elif kind not in KINDS:
        raise ValueError("kind must be auto or one of %s, got %r" % (", ".join(KINDS), kind))
    facts = {}
    problems = []
    if kind is None:
        problems.append(problem(
            "DIAGNOSE_UNKNOWN_INPUT", "info", subject,
            "the text is none of the outputs this reads (first line: %r)" % ((text or "").strip()[:80]),
            "give the kind (%s), or the raw output of one of those commands" % ", ".join(KINDS)))
        out = node_verdict(problems, ran=False)
        out.update(kind=None, problems=problems, facts=facts)
        return out
    reader = _READERS[kind]
    try:
        problems, facts = reader(text or "", ctx, subject)
    except ValueError as exc:  # the reader's format error (SlurmTextError, PcieFormatError ...): not that output
        problems = [problem("DIAGNOSE_UNKNOWN_INPUT", "info", subject, "the text is not %s output: %s" % (kind, exc),
                            "give the raw output of the command, or the right kind")]
        out = node_verdict(problems, ran=False)
        out.update(kind=kind, problems=problems, facts={})
        return out
    problems = sorted(problems, key=lambda p: -SEVERITIES.index(p["severity"]))
    out = node_verdict(problems)
    out.update(kind=kind, problems=problems, facts=facts)
    return out


def _slurm_states(text, ctx, _subject):
    states = slurm_diag.parse_node_states(text)
    found = slurm_diag.node_problems(states, ctx.get("nodes"), ctx.get("gpus"))
    found += slurm_diag.log_problems([], ctx.get("clock_offsets"))
    return found, {"nodes": states}


def _slurm_log(text, ctx, _subject):
    events = slurm_diag.parse_slurm_log(text)
    return slurm_diag.log_problems(events, ctx.get("clock_offsets")), {"events": events}


def _training(text, ctx, subject):
    found = runtime_failures.runtime_problems(text, subject, ctx.get("world_size"))
    parsed = runtime_failures.parse_runtime_log(text)
    log = nccl_parsers.parse_nccl_debug(text)
    return found, {"runtime": parsed, "nccl_version": log["nccl_version"], "transport": log["transport"]}


def _nccl_tests(text, ctx, subject):
    parsed = nccl_parsers.parse_nccl_tests(text)
    rc = ctx.get("rc")
    if rc is None:
        rc = 0 if parsed["complete"] and not parsed["failures"] else 1
    rates = ctx.get("rdma_ports_gbps") or []
    ports = [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": float(r)} for r in rates]
    roce = {"devices": [{"name": "port%d" % i, "ports": [p]} for i, p in enumerate(ports)]}
    floor = floors.nccl_tests_floor(parsed, roce, ctx.get("min_busbw_gbps"))
    found, facts = nccl_health.diagnose_nccl_tests(rc, text, subject, min_busbw_gbps=floor["floor_gbps"],
                                                   expected_transport=ctx.get("expected_transport"))
    facts["busbw_floor"] = floor
    return found, facts


def _nccl_debug(text, ctx, subject):
    log = nccl_parsers.parse_nccl_debug(text)
    found = nccl_health.warn_problems(log["warnings"], subject)
    found += nccl_health.check_transport(log["transport"], ctx.get("expected_transport"), subject)
    return found, {"nccl": log}


def _ibstat(text, ctx, _subject):
    ports = [p for ca in rdma_parsers.parse_ibstat(text) for p in ca["ports"]]
    return _ports_problems(ports, ctx, False), {"ports": ports}


def _ibstatus(text, ctx, _subject):
    ports = rdma_parsers.parse_ibstatus(text)
    return _ports_problems(ports, ctx, False), {"ports": ports}


def _ibv_devinfo(text, ctx, _subject):
    ports = [p for dev in rdma_parsers.parse_ibv_devinfo(text) for p in dev["ports"]]
    return _ports_problems(ports, ctx, any(p.get("gids") for p in ports)), {"ports": ports}


def _rdma_link(text, ctx, _subject):
    ports = []
    for link in rdma_parsers.parse_rdma_link(text):
        port = rdma_parsers.new_port(link["device"], link["port"])
        infiniband = link.get("lid") is not None or link.get("sm_lid") is not None
        port.update(state=link["state"], phys_state=link["phys_state"], netdev=link["netdev"],
                    lid=link.get("lid"), sm_lid=link.get("sm_lid"),
                    link_layer="InfiniBand" if infiniband else ("Ethernet" if link["netdev"] else None))
        ports.append(port)
    return _ports_problems(ports, ctx, False), {"ports": ports}


def _lspci(text, ctx, _subject):
    found = pci.lspci_text_problems(text, ctx.get("line_rates"), ctx.get("busy", True))
    found += gpu_health.acs_problems(gpu_health.acs_redirects(text))  # bridges redirecting peer-to-peer (case C08)
    return found, {"links": pci.parse_lspci_links(text)}


def _kernel_log(text, ctx, _subject):
    found = []
    messages = pci.parse_kernel_pcie(text)
    targets = {}
    for entry in messages["limited"]:
        driver = re.search(r"(\S+) %s: [0-9.]+ Gb/s available" % re.escape(entry["address"]), text, re.I)
        name = driver.group(1).lower() if driver else ""
        targets[entry["address"]] = "GPU" if name.startswith("nvidia") else (
            "HCA" if name.startswith(_NIC_DRIVERS) or entry["address"] in (ctx.get("line_rates") or {}) else "device")
    targets.update((a, "device") for a in messages["aer"] if a not in targets)
    rates = dict(ctx.get("line_rates") or {})
    if rates.get("*"):
        rates.update((a, rates["*"]) for a, kind in targets.items() if kind == "HCA" and a not in rates)
    found += pci.kernel_problems(targets, {}, messages, None, rates)
    seen = {}
    for event in parse_xid_lines(text):
        key = (event["pci"], event["xid"])
        seen[key] = seen.get(key, 0) + 1
    for (address, code), count in sorted(seen.items()):
        meaning, severity = xid_info(code)
        found.append(problem("GPU_XID", severity, "PCI %s" % address, "Xid %d (%s) logged %d time(s)" % (
            code, meaning, count), "Look up Xid %d in NVIDIA's Xid catalog for the action" % code))
    return found, {"pcie": messages}


def _nvidia_smi(text, ctx, _subject):
    first = next((line for line in text.splitlines() if line.strip()), "")
    kind = "xml" if "<nvidia_smi_log>" in text else (
        "csv" if "," in first and ":" not in first.split(",")[0] else "text")
    facts = gpu_health.build_facts({"smi_found": True, "smi_rc": 0, "smi_out": text, "smi_format": kind})
    params = {"check_xid": False, "expected_gpus": ctx.get("expected_gpus")}
    return gpu_health.diagnose(facts, params), {"gpus": facts["gpus"], "driver_version": facts["driver_version"]}


def _sysfs_ib(text, ctx, _subject):
    tree = _sysfs_tree(text)
    if tree is None:
        raise ValueError("sysfs_ib takes a JSON object of sysfs paths (/sys/class/infiniband/<dev>/ports/<n>/state ...)")
    ports = rdma_parsers.parse_sysfs_ib(tree)
    return _ports_problems(ports, ctx, any(p.get("gids") for p in ports)), {"ports": ports}


_NIC_DRIVERS = ("mlx", "bnxt", "ice", "i40e", "ixgbe", "irdma", "efa", "qed", "cxgb")


def _ldconfig(text, ctx, _subject):
    path = ctx.get("ld_library_path")
    if path is None:
        path = text
    found = node_stack.shadowing_problems(path, None, text, ctx.get("wheel_lib_dirs"), text)
    return found, {"ld_library_path": node_stack.parse_ld_library_path(path)}


_READERS = {
    "scontrol": _slurm_states, "sinfo": _slurm_states, "slurm_log": _slurm_log, "training_log": _training,
    "nccl_tests": _nccl_tests, "nccl_debug": _nccl_debug, "ibstat": _ibstat, "ibstatus": _ibstatus,
    "ibv_devinfo": _ibv_devinfo, "rdma_link": _rdma_link, "lspci": _lspci, "kernel_log": _kernel_log,
    "ldconfig": _ldconfig, "nvidia_smi": _nvidia_smi, "sysfs_ib": _sysfs_ib,
}
