# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One verdict per node from the health stage, and the history that flags a node failing again (pure, no I/O).

A scheduler acts on one word per node, not on a list of codes. The words follow NVIDIA's health validation verdicts
(PASS / INFO / WARNING / CRITICAL / UNKNOWN, with exit 0 keep, 1 remove, 2 could not run), folded to four:

* ``PASS``: every check ran on the node and found nothing above ``info``.
* ``WARN``: warnings only (on the local cluster ``NO_GPU`` and ``NO_RDMA``): keep the node, read the codes.
* ``FAIL``: an error on the node itself, or a cross-node check named it (another stack, a burn-in finding, every
  pair of it slow or failed): the health stage leaves it out and, with Slurm, drains it.
* ``UNKNOWN``: its checks did not run (unreachable, or the stage stopped before they reported).

Every run appends one record per node (``{"time", "node", "verdict", "errors", "warnings"}``, time in seconds since
the epoch, UTC) to a history on the controller. ``HEALTH_REPEAT_FAIL`` (warning) flags a node that fails in this run
and failed at least ``threshold - 1`` more times within ``window_s`` before: a node that keeps failing is a
hardware case (an RMA, a reseat), not one more re-run. Window and threshold (7 days, 2 failures) are ours.
"""
from __future__ import annotations

import json

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

VERDICTS = ("PASS", "WARN", "FAIL", "UNKNOWN")
DEFAULT_WINDOW_S = 7 * 24 * 3600
DEFAULT_THRESHOLD = 2


def node_verdict(problems, errors=(), ran=True):
    """The verdict of one node.

    :param problems: the problems the node's own checks returned (dicts with ``code`` and ``severity``).
    :param errors: further error codes cross-node checks named for this node.
    :param ran: False when the node's checks did not run (its verdict is then ``UNKNOWN``).
    :returns: ``{"verdict": one of VERDICTS, "errors": [codes], "warnings": [codes]}``, codes sorted and unique.
    :raises ValueError: a problem without ``code`` or ``severity``.
    """
    found_errors, warnings = set(errors or ()), set()
    for item in problems or []:
        if not isinstance(item, dict) or "code" not in item or "severity" not in item:
            raise ValueError("a problem must be a dict with code and severity, got %r" % (item,))
        if item["severity"] == "error":
            found_errors.add(item["code"])
        elif item["severity"] == "warning":
            warnings.add(item["code"])
    if not ran:
        verdict = "UNKNOWN"
    elif found_errors:
        verdict = "FAIL"
    elif warnings:
        verdict = "WARN"
    else:
        verdict = "PASS"
    return {"verdict": verdict, "errors": sorted(found_errors), "warnings": sorted(warnings)}


def parse_history(text):
    """Records from the history file's text (JSON Lines); lines that are not a record are skipped.

    :returns: ``(records, skipped)``: the records in file order and the number of lines skipped.
    """
    records, skipped = [], 0
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("node"), str) and record.get("verdict") in VERDICTS \
                and isinstance(record.get("time"), (int, float)):
            records.append(record)
        else:
            skipped += 1
    return records, skipped


def health_verdicts(per_node, history_text="", now=0.0, window_s=DEFAULT_WINDOW_S, threshold=DEFAULT_THRESHOLD):
    """Verdicts of every node, the records to append, and the nodes that fail again.

    :param per_node: ``{node: {"problems": [...], "errors": [codes], "ran": bool}}``.
    :param history_text: the history file as it is (JSON Lines), empty for none.
    :param now: this run's time, seconds since the epoch.
    :param window_s: how far back earlier failures count, seconds (> 0).
    :param threshold: failures within the window (this one included) that flag a node (>= 2).
    :returns: ``{"nodes": {node: {"verdict", "errors", "warnings", "failures_in_window"}}, "problems": [...],
        "records": [record], "lines": "the records as JSON Lines", "skipped_lines": int}``.
    :raises ValueError: a bad window or threshold, or a malformed node entry.
    """
    window_s, threshold, now = float(window_s), int(threshold), float(now)
    if window_s <= 0:
        raise ValueError("window_s must be > 0, got %r" % window_s)
    if threshold < 2:
        raise ValueError("threshold must be >= 2, got %r" % threshold)
    history, skipped = parse_history(history_text)
    nodes, problems, records = {}, [], []
    for node in sorted(per_node):
        entry = per_node[node]
        if not isinstance(entry, dict):
            raise ValueError("the health of %s must be a dict, got %s" % (node, type(entry).__name__))
        verdict = node_verdict(entry.get("problems"), entry.get("errors"), bool(entry.get("ran", True)))
        earlier = [r for r in history if r["node"] == node and r["verdict"] == "FAIL" and now - window_s <= r["time"] < now]
        failures = len(earlier) + (1 if verdict["verdict"] == "FAIL" else 0)
        verdict["failures_in_window"] = failures
        nodes[node] = verdict
        records.append({"time": round(now, 3), "node": node, "verdict": verdict["verdict"],
                        "errors": verdict["errors"], "warnings": verdict["warnings"]})
        if verdict["verdict"] == "FAIL" and failures >= threshold:
            codes = sorted(set(c for r in earlier for c in r.get("errors") or []) | set(verdict["errors"]))
            problems.append(problem(
                "HEALTH_REPEAT_FAIL", "warning", node,
                "failed %d times within %.4g days (this run included; codes %s)"
                % (failures, window_s / 86400.0, ", ".join(codes)),
                "a node that keeps failing is a hardware case: keep it drained, run the vendor's diagnostics "
                "(dcgmi diag -r 3 on GPUs), reseat or replace the part its codes name"))
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    return {"nodes": nodes, "problems": problems, "records": records, "lines": lines, "skipped_lines": skipped}
