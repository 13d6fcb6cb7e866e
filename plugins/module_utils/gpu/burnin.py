# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in tier's verdicts: every device's matmul stress compared with its peers (pure, no I/O).

Every node runs ``ddp_burnin.py`` (roles/pytorch_env/files) at once: a fixed pair of seeded matrices multiplied on
each GPU (or the CPU) for a set time, giving the achieved TFLOPS and the SHA-256 of one product. This module
compares those figures across the devices of one model, within a node and across nodes:

* ``BURNIN_SLOW`` (error): a device below ``min_ratio`` (default 0.90) of the median TFLOPS of the devices of its
  model. Peers, not a datasheet figure, are the reference, as in Imbue's fleet checks and gcm: a throttled, badly
  cooled or degraded GPU shows up as the slow one among identical ones. The 0.90 default is ours (a healthy
  fleet of one SKU stays within a few per cent under sustained GEMM); it can be set per run.
* ``BURNIN_MISMATCH`` (error): a device whose product differs, bit for bit, from the one most devices of its model
  computed from the same inputs (devices of one model, with the same torch and library versions, compute
  identical GEMMs; Imbue's H100 burn-in compares results bit-exactly across GPUs). Without a majority every
  device of the group is named.
* ``BURNIN_NOT_RUN`` (error): the program did not run or did not finish on a node, or failed on one device.

Devices are grouped by (device type, model name, dtype, matrix side, torch version); a group of one device is not
compared. TFLOPS: 2 n^3 x products / seconds / 1e12 (the FLOP count of a dense n x n x n GEMM).
"""
from __future__ import annotations

import json

from ansible_collections.ddp.cluster.plugins.module_utils.gpu import dcgm
from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import fraction, problem
from ansible_collections.ddp.cluster.plugins.module_utils.gpu.system import xid_info

DEFAULT_MIN_RATIO = 0.90


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def _add(nodes, node, code):
    codes = nodes.setdefault(node, [])
    if code not in codes:
        codes.append(code)


def node_result(registered):
    """One node's burn-in result from what the play registered for it (the async_status of the program).

    :returns: the JSON ``ddp_burnin.py`` printed (a dict with ``devices``) when it exited 0, else
        ``{"error": "rc <status>: <last stderr line, or Ansible's message>"}``. A dict that is already a
        result (has ``devices``) is returned as it is.
    """
    if isinstance(registered, dict) and isinstance(registered.get("devices"), list):
        return registered
    if not isinstance(registered, dict) or not registered:
        return {"error": "no result (the node stopped answering Ansible)"}
    rc = registered.get("rc")
    stdout = (registered.get("stdout") or "").strip()
    if rc == 0 and stdout.startswith("{"):
        try:
            return json.loads(stdout)
        except ValueError as exc:
            return {"error": "its output is not JSON: %s" % exc}
    lines = registered.get("stderr_lines") or []
    why = lines[-1] if lines else registered.get("msg") or "no result"
    return {"error": "rc %s: %s" % ("?" if rc is None else rc, why)}


def _burnin_rows(per_node, problems, nodes):
    """Read every node's result; a node or device that did not run is added to ``problems`` and ``nodes``.

    :returns: ``(groups, rows)``: ``{group key: [rows]}`` and the rows of the devices with a figure, in node order.
    """
    groups, rows = {}, []
    for node in sorted(per_node):
        result = per_node[node]
        if not isinstance(result, dict):
            raise ValueError("the burn-in result of %s must be a dict, got %s" % (node, type(result).__name__))
        if "error" not in result:
            result = node_result(result)
        if not isinstance(result.get("devices"), list):
            why = result.get("error") or "no result"
            problems.append(problem("BURNIN_NOT_RUN", "error", node, "the burn-in did not run on this node: %s" % why,
                                    "run the environment's Python on ddp_burnin.py by hand on the node "
                                    "(<env>/share/ddp-cluster/ddp_burnin.py --seconds 10) and fix what it says"))
            _add(nodes, node, "BURNIN_NOT_RUN")
            continue
        key_base = (result.get("device_type"), result.get("dtype"), result.get("size"), result.get("torch"))
        for device in result["devices"]:
            subject = "%s %s %s" % (node, "GPU" if result.get("device_type") == "cuda" else "CPU", device.get("index"))
            if device.get("error") or not device.get("tflops"):
                problems.append(problem("BURNIN_NOT_RUN", "error", subject,
                                        "the stress failed on %s: %s" % (device.get("name"),
                                                                         device.get("error") or "no figure"),
                                        "check the device with gpu_health (Xid, ECC) and nvidia-smi; "
                                        "reset or replace it"))
                _add(nodes, node, "BURNIN_NOT_RUN")
                continue
            row = {"node": node, "index": device.get("index"), "name": device.get("name"),
                   "tflops": float(device["tflops"]), "digest": device.get("digest"), "subject": subject,
                   "ratio": None, "digest_ok": None}
            rows.append(row)
            groups.setdefault(key_base + (device.get("name"),), []).append(row)
    return groups, rows


def _slow_devices(members, min_ratio, problems, nodes):
    """Set every member's ``ratio`` to its group's median and add a ``BURNIN_SLOW`` for each one under ``min_ratio``.

    :returns: None (``members``, ``problems`` and ``nodes`` are updated in place).
    """
    median = _median([row["tflops"] for row in members])
    for row in members:
        row["ratio"] = round(row["tflops"] / median, 4) if median > 0 else None
        if row["ratio"] is not None and row["ratio"] < min_ratio:
            problems.append(problem(
                "BURNIN_SLOW", "error", row["subject"],
                "%s reached %.4g TFLOPS, %.0f%% of the median of the %d %s devices (%.4g TFLOPS); the floor is %.0f%%"
                % (row["name"], row["tflops"], 100.0 * row["ratio"], len(members), row["name"], median,
                   100.0 * min_ratio),
                "look for throttling on that device (nvidia-smi -q -d PERFORMANCE: clock event reasons; cooling, "
                "power cap) and for another job on it; drain the node until it keeps up with its peers"))
            _add(nodes, row["node"], "BURNIN_SLOW")


def _mismatched_devices(members, problems, nodes):
    """Set every member's ``digest_ok`` and add a ``BURNIN_MISMATCH`` for each one off the group's majority product.

    :returns: None (``members``, ``problems`` and ``nodes`` are updated in place).
    """
    by_digest = {}
    for row in members:
        by_digest.setdefault(row["digest"], []).append(row)
    if len(by_digest) <= 1:
        for row in members:
            row["digest_ok"] = True
        return
    ranked = sorted(by_digest.items(), key=lambda item: (-len(item[1]), str(item[0])))
    majority = ranked[0][0] if len(ranked[0][1]) > len(ranked[1][1]) else None
    for digest, holders in ranked:
        ok = digest == majority
        for row in holders:
            row["digest_ok"] = ok
            if ok:
                continue
            message = ("the product of the burn-in's fixed inputs on %s differs from the one %d of the %d %s "
                       "devices computed" % (row["name"], len(ranked[0][1]), len(members), row["name"])
                       if majority is not None else
                       "the %d %s devices computed %d different products from the same inputs, none held by most "
                       "of them" % (len(members), row["name"], len(by_digest)))
            problems.append(problem(
                "BURNIN_MISMATCH", "error", row["subject"], message,
                "a device that computes wrong results silently corrupts training: drain the node, run "
                "dcgmi diag -r 3 on it and check gpu_health (ECC, row remapping); replace the GPU if it repeats"))
            _add(nodes, row["node"], "BURNIN_MISMATCH")


def burnin_findings(per_node, min_ratio=DEFAULT_MIN_RATIO):
    """Compare every node's burn-in result with the others.

    :param per_node: ``{node: result}``; a result is the JSON ``ddp_burnin.py`` printed (a dict with
        ``devices``), ``{"error": message}`` for a node where it did not run or finish, or what the play
        registered for the node (read with :func:`node_result`).
    :param min_ratio: a device below this fraction of its group's median TFLOPS is ``BURNIN_SLOW``; in (0, 1].
    :returns: ``{"problems": [...], "nodes": {node: [codes]}, "devices": [{node, index, name, tflops,
        ratio, digest_ok}]}``; ``ratio`` = TFLOPS / the group's median (None alone in its group),
        ``digest_ok`` None when not compared.
    :raises ValueError: ``min_ratio`` out of range, or a result that is neither shape.
    """
    min_ratio = fraction(min_ratio)
    problems, nodes = [], {}
    groups, rows = _burnin_rows(per_node, problems, nodes)
    for key in sorted(groups, key=str):
        members = groups[key]
        if len(members) < 2:
            continue
        _slow_devices(members, min_ratio, problems, nodes)
        _mismatched_devices(members, problems, nodes)
    devices = [{k: row[k] for k in ("node", "index", "name", "tflops", "ratio", "digest_ok")} for row in rows]
    return {"problems": problems, "nodes": nodes, "devices": devices}


# ------------------------------------------------------------------ error counters before and after the stress

def _gpu_key(gpu):
    return gpu.get("bus_id") or gpu.get("uuid") or "index %s" % gpu.get("index")


def _grew(before, after):
    return before is not None and after is not None and after > before


def _counter_growth(old, new):
    """What grew on one GPU between two ``gpu_health`` readings: list of ``(severity, text)``."""
    found = []
    ecc_old, ecc_new = old.get("ecc") or {}, new.get("ecc") or {}
    for key, label in (("volatile_uncorrectable", "uncorrectable ECC errors (volatile)"),
                       ("aggregate_uncorrectable", "uncorrectable ECC errors (aggregate)")):
        if _grew(ecc_old.get(key), ecc_new.get(key)):
            found.append(("error", "%s %s -> %s" % (label, ecc_old[key], ecc_new[key])))
    if _grew(ecc_old.get("volatile_correctable"), ecc_new.get("volatile_correctable")):
        found.append(("warning", "correctable ECC errors (volatile) %s -> %s" % (
            ecc_old["volatile_correctable"], ecc_new["volatile_correctable"])))
    rows_old, rows_new = old.get("remapped_rows") or {}, new.get("remapped_rows") or {}
    if _grew(rows_old.get("uncorrectable"), rows_new.get("uncorrectable")):
        found.append(("error", "rows remapped for uncorrectable errors %s -> %s" % (
            rows_old["uncorrectable"], rows_new["uncorrectable"])))
    if rows_new.get("pending") and not rows_old.get("pending"):
        found.append(("error", "a row remap became pending"))
    if rows_new.get("failure") and not rows_old.get("failure"):
        found.append(("error", "row remapping failed"))
    pages_old, pages_new = old.get("retired_pages") or {}, new.get("retired_pages") or {}
    for key in ("single_bit", "double_bit"):
        if _grew(pages_old.get(key), pages_new.get(key)):
            found.append(("error", "retired pages (%s) %s -> %s" % (key.replace("_", "-"), pages_old[key],
                                                                    pages_new[key])))
    if pages_new.get("pending") and not pages_old.get("pending"):
        found.append(("error", "a page retirement became pending"))
    return found


def counter_findings(before, after):
    """GPU error counters and Xids that appeared while the burn-in ran.

    :param before: ``{node: gpu_health result}`` read just before the stress (``gpus``: the module's per-GPU
        facts with ``ecc``, ``remapped_rows``, ``retired_pages``; ``xids``: Xid events in the kernel log).
    :param after: the same, read just after it.
    :returns: ``{"problems": [...], "nodes": {node: [codes]}}``. ``BURNIN_GPU_ERRORS``: an uncorrectable ECC count,
        uncorrectable remapped rows or retired pages grew, a remap or retirement became pending, a row remap failed
        (errors), a new Xid was logged (with the severity the Xid table gives it, ``gpu_system.xid_info``: an
        application's Xid 13 or 31 is a warning, a memory or bus Xid an error), or a GPU read before the stress was
        gone after it (error); the volatile
        correctable ECC count grew (warning: memory that corrects more errors under load than at rest is wearing;
        NVIDIA's dcgmi diag and gcm watch the same counters). Nodes without GPUs (no ``gpus`` on either side)
        give nothing; a node missing from ``after`` is the burn-in's own ``BURNIN_NOT_RUN``.
    """
    problems, nodes = [], {}
    for node in sorted(before or {}):
        old_result, new_result = before.get(node) or {}, (after or {}).get(node)
        if not isinstance(new_result, dict) or not isinstance(old_result, dict):
            continue
        old_gpus = dict((_gpu_key(g), g) for g in old_result.get("gpus") or [])
        new_gpus = dict((_gpu_key(g), g) for g in new_result.get("gpus") or [])
        for key in sorted(old_gpus):
            gpu = old_gpus[key]
            subject = "%s GPU %s (%s)" % (node, gpu.get("index"), key)
            if key not in new_gpus:
                if new_result.get("gpus") is None:
                    continue  # the second reading did not run
                problems.append(problem(
                    "BURNIN_GPU_ERRORS", "error", subject, "the GPU was read before the stress and is gone after it",
                    "read `dmesg | grep NVRM` for Xid 79 (fallen off the bus); drain the node, power-cycle it, reseat "
                    "the GPU"))
                _add(nodes, node, "BURNIN_GPU_ERRORS")
                continue
            growth = _counter_growth(gpu, new_gpus[key])
            if not growth:
                continue
            severity = "error" if any(s == "error" for s, _text in growth) else "warning"
            problems.append(problem(
                "BURNIN_GPU_ERRORS", severity, subject,
                "during the burn-in: %s" % "; ".join(text for _s, text in growth),
                "drain the node; `nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i <index>`; reset the GPU (or "
                "reboot) for a pending remap; run dcgmi diag -r 3; replace the GPU if the counts keep growing"))
            if severity == "error":
                _add(nodes, node, "BURNIN_GPU_ERRORS")
        seen = {}
        for event in old_result.get("xids") or []:
            key = (event.get("pci"), event.get("xid"))
            seen[key] = seen.get(key, 0) + 1
        new_events = {}
        for event in new_result.get("xids") or []:
            key = (event.get("pci"), event.get("xid"))
            if seen.get(key):
                seen[key] -= 1
                continue
            new_events[key] = new_events.get(key, 0) + 1
        for (pci, xid), count in sorted(new_events.items(), key=str):
            meaning, severity = xid_info(xid)
            problems.append(problem(
                "BURNIN_GPU_ERRORS", severity, "%s GPU %s" % (node, pci),
                "%d new Xid %s event(s) in the kernel log during the burn-in (%s)" % (count, xid, meaning),
                "look the Xid up in NVIDIA's Xid catalog (docs/troubleshooting.md, GPU_XID); drain the node, reset "
                "the GPU or reboot, and run the burn-in again; replace the GPU if it repeats"))
            if severity == "error":
                _add(nodes, node, "BURNIN_GPU_ERRORS")
    return {"problems": problems, "nodes": nodes}


def tier_findings(per_node, min_ratio=DEFAULT_MIN_RATIO, before=None, after=None, dcgm_runs=None, dcgm_level=None):
    """The burn-in tier's one verdict: :func:`burnin_findings`, plus :func:`counter_findings` when both GPU readings
    are given, plus ``dcgm.diag_findings`` when ``dcgmi diag`` ran.

    :returns: ``{"problems", "nodes", "devices", "dcgm_ran"}``: ``nodes`` maps a node to the codes that remove it
        (errors only; warnings are in ``problems``).
    """
    result = burnin_findings(per_node, min_ratio)
    result["dcgm_ran"] = []
    parts = []
    if before is not None and after is not None:
        parts.append(counter_findings(before, after))
    if dcgm_runs:
        found = dcgm.diag_findings(dcgm_runs, dcgm_level)
        result["dcgm_ran"] = found["ran"]
        parts.append({"problems": found["problems"], "nodes": dict(
            (node, [c for c in codes if c == "DCGM_DIAG_FAIL"]) for node, codes in found["nodes"].items()
            if "DCGM_DIAG_FAIL" in codes)})
    for part in parts:
        result["problems"].extend(part["problems"])
        for node, codes in part["nodes"].items():
            for code in codes:
                _add(result["nodes"], node, code)
    return result
