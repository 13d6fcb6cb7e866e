# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dcgmi diag -r <level>``: the result table, parsed, and one verdict per node. Pure: no I/O.

NVIDIA DCGM's diagnostic prints a two-column table (test, result). A result is ``Pass``, ``Fail``,
``Warn``, ``Skip`` or ``Not Run`` (DCGM's ``DcgmiResult`` strings), optionally followed by the GPUs it
applies to (``Pass - All``, ``Fail - GPU: 0``, ``Pass - GPUs: 1, 2, 3``); a test with mixed results
takes several rows, the later ones with an empty name. ``Warning``, ``Error`` and ``Info`` rows carry
the reason, wrapped over as many rows as it needs at a fixed column. Levels (DCGM documentation):
1 quick (seconds), 2 medium (about 2 minutes), 3 long (about 30 minutes), 4 extended (an hour or more).
"""
from __future__ import annotations

import re

from ansible_collections.ddp.cluster.plugins.module_utils.diagnosis import problem

_STATUS = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)\b\s*(?:-\s*(.*))?$", re.IGNORECASE)
_GPU_LIST = re.compile(r"GPUs?:?\s*([0-9][0-9,\s]*)")
MESSAGE_ROWS = ("Warning", "Error", "Info")


class DcgmFormatError(ValueError):
    """The text is not ``dcgmi diag`` table output (raised, never turned into rows)."""


def _cells(line):
    """``'| GPU Memory   | Pass - All   |'`` -> ``['GPU Memory', 'Pass - All']``; the second cell keeps one leading
    space of its own beyond the separator's, so wrapped text joins as it was cut."""
    body = line.strip()
    if not body.startswith("|") or body.startswith("|-") or body.startswith("|="):
        return None
    parts = body[1:].split("|")
    if len(parts) < 2:
        return None
    name = parts[0].strip().lstrip("-").strip()
    value = parts[1][1:] if parts[1].startswith(" ") else parts[1]
    return [name, value.rstrip()]


def _gpus(detail):
    if not detail:
        return None
    if detail.strip().lower() == "all":
        return "all"
    match = _GPU_LIST.search(detail)
    if not match:
        return None
    return [int(x) for x in re.findall(r"\d+", match.group(1))]


def parse_dcgmi_diag(text):
    """``dcgmi diag -r N`` output -> ``{"tests": [{name, results: [{status, gpus}]}], "messages": [{kind, test, text}]}``.

    ``status`` is lower case (``pass``, ``fail``, ``warn``, ``skip``, ``not run``); ``gpus`` is ``'all'``, a list of
    GPU indices, or None when the row names none. A message belongs to the test above it (None in the Deployment
    section's ``Error`` rows, which stand alone).

    :raises DcgmFormatError: non-empty text with no table row (``| name | result |``), such as an error message of
        dcgmi itself (e.g. no nv-hostengine to talk to) or JSON from ``-j``.
    """
    tests, messages = [], []
    rows = 0
    current_test, current_message = None, None
    for line in (text or "").splitlines():
        cells = _cells(line)
        if cells is None:
            continue
        name, value = cells
        rows += 1
        stripped = value.strip()
        if name in ("Diagnostic", "") and stripped == "Result":
            continue
        status = _STATUS.match(stripped)
        if name in MESSAGE_ROWS and not status:
            current_message = {"kind": name.lower(), "test": current_test["name"] if current_test else None,
                               "text": stripped}
            messages.append(current_message)
            continue
        if not name and not status:
            if current_message is not None:
                current_message["text"] = (current_message["text"] + value).strip()
            continue
        if status:
            entry = {"status": status.group(1).lower(), "gpus": _gpus(status.group(2))}
            if name:
                current_test = {"name": name, "results": [entry]}
                tests.append(current_test)
            elif current_test is not None:
                current_test["results"].append(entry)
            current_message = None
            continue
        # a section title in a name cell with an empty result ("| Deployment |   |")
        current_message = None
    if (text or "").strip() and not rows:
        first = text.strip().splitlines()[0]
        raise DcgmFormatError("not `dcgmi diag` table output: no '| test | result |' row (first line: %r)" % first[:80])
    return {"tests": tests, "messages": messages}


def _gpu_words(gpus):
    if gpus == "all":
        return "all GPUs"
    if not gpus:
        return "GPU ?"
    return "GPU%s %s" % ("s" if len(gpus) > 1 else "", ", ".join(str(g) for g in gpus))


def diag_findings(per_node, level):
    """One verdict per node from what ``dcgmi diag -r <level>`` printed there.

    :param per_node: ``{node: registered}``, what the play registered for the command (``rc``, ``stdout``,
        ``msg``); a node where ``dcgmi`` is not installed gives nothing (no output, and exit status 127 from
        coreutils ``timeout``, or the command module could not start it: ``msg`` "[Errno 2] No such file or
        directory: ..." before ansible-core 2.19, "Error executing command." since). Exit status 124 (``timeout``
        killed it) or a job that did not finish is ``DCGM_DIAG_NOT_RUN``.
    :param level: the ``-r`` level that ran, for the messages.
    :returns: ``{"problems": [...], "nodes": {node: [codes]}, "ran": [nodes]}``. ``DCGM_DIAG_FAIL`` (error): a test
        failed on some GPU, or the Deployment section reports an ``Error``. ``DCGM_DIAG_WARN`` (warning): a test
        warned. ``DCGM_DIAG_NOT_RUN`` (warning): dcgmi is installed but printed no result table (its host engine
        is not running, or the GPUs are in use).
    """
    problems, nodes, ran = [], {}, []
    for node in sorted(per_node or {}):
        registered = per_node[node]
        if not isinstance(registered, dict) or registered.get("skipped"):
            continue
        stdout = registered.get("stdout") or ""
        stderr = registered.get("stderr") or ""
        why = (registered.get("msg") or "") + stderr
        if not stdout.strip() and (registered.get("rc") == 127 or "No such file or directory" in why
                                   or why.startswith("Error executing command")):
            continue  # dcgmi is not installed: `timeout` (rc 127) or the command module could not start it
        try:
            parsed = parse_dcgmi_diag(stdout)
        except DcgmFormatError as exc:
            parsed, error = None, str(exc)
        else:
            error = None if parsed["tests"] or parsed["messages"] else "no test result in its output"
        if registered.get("rc") == 124 or (registered.get("finished") == 0 and not stdout.strip()):
            error = "it did not finish within its time limit (ddp_health_dcgm_timeout)"
        if error:
            detail = (stdout.strip().splitlines() or [why.strip() or "rc %s" % registered.get("rc")])[0]
            problems.append(problem(
                "DCGM_DIAG_NOT_RUN", "warning", node, "dcgmi diag -r %s gave no result: %s (%s)" % (level, error, detail),
                "start the DCGM host engine (systemctl start nvidia-dcgm, or nv-hostengine) and make sure no job "
                "holds the GPUs, then run `dcgmi diag -r %s` by hand" % level))
            nodes.setdefault(node, []).append("DCGM_DIAG_NOT_RUN")
            continue
        ran.append(node)
        codes = []
        for test in parsed["tests"]:
            for kind, code, severity in (("fail", "DCGM_DIAG_FAIL", "error"), ("warn", "DCGM_DIAG_WARN", "warning")):
                hit = [r for r in test["results"] if r["status"] == kind]
                if not hit:
                    continue
                gpus = []
                for result in hit:
                    gpus = "all" if result["gpus"] == "all" or gpus == "all" else gpus + (result["gpus"] or [])
                reasons = [m["text"] for m in parsed["messages"] if m["test"] == test["name"] and m["kind"] != "info"]
                problems.append(problem(
                    code, severity, "%s %s" % (node, _gpu_words(gpus)),
                    "dcgmi diag -r %s: %s %s%s" % (level, test["name"], "failed" if kind == "fail" else "warned",
                                                   ": " + " / ".join(reasons) if reasons else ""),
                    "drain the node; act on the reason (cooling for thermal violations, a GPU reset for pending row "
                    "remaps); run `dcgmi diag -r 3` again, and replace the GPU if it fails again"))
                codes.append(code)
        for message in parsed["messages"]:
            if message["kind"] == "error" and message["test"] is None:
                problems.append(problem(
                    "DCGM_DIAG_FAIL", "error", node, "dcgmi diag -r %s: %s" % (level, message["text"]),
                    "fix what it names before the tests can run (a GPU reset or reboot for pending row remaps; "
                    "replace a GPU whose remapping failed)"))
                codes.append("DCGM_DIAG_FAIL")
        if codes:
            nodes[node] = sorted(set(codes))
    return {"problems": problems, "nodes": nodes, "ran": ran}
