# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers that turn ddp_bench.py results into a scaling table and report.

No I/O. Input is the JSON dict that ``roles/ddp_benchmark/files/ddp_bench.py``
writes (schema_version 1); throughputs are in samples per second (images/s
for the image models), and a "process" is one DDP rank (one GPU on GPU nodes).

Besides the single-run table this module holds the benchmark matrix (which runs
to make: 1 process, 1 node, all nodes, named variants), the matrix report (rows
with speed-up and scaling efficiency, CSV, Markdown, provenance), the comparison
with a previous report, and the Horovod launcher pieces (``horovodrun
--check-build`` parsing, cases C16; the horovodrun/mpirun command builder that
forwards NCCL_*, LD_LIBRARY_PATH and PATH, case C17).
"""
from __future__ import annotations

import math
import re

from ansible_collections.ddp.cluster.plugins.module_utils.nccl.parsers import (
    parse_nccl_debug,
    rdma_link_layers,
)

SUMMARY_KEYS = ("nnodes", "world_size", "samples_per_s", "samples_per_s_per_process", "model", "backend")
ROW_KEYS = ("nodes", "processes", "samples_per_s", "samples_per_s_per_process", "model", "backend")
TABLE_HEADERS = (
    "nodes",
    "processes",
    "model",
    "backend",
    "global samples/s",
    "samples/s per process",
    "efficiency",
)
# True for right-aligned (numeric) columns.
_RIGHT = (True, True, False, False, True, True, True)


def _require(mapping, keys, what):
    """Raise KeyError naming the first key of ``keys`` missing from ``mapping``."""
    if not isinstance(mapping, dict):
        raise TypeError("%s must be a dict, got %s" % (what, type(mapping).__name__))
    for key in keys:
        if key not in mapping:
            raise KeyError("%s is missing required key %r" % (what, key))


def _positive_number(value, name):
    """Return ``value`` as a float; ValueError naming ``name`` unless finite and > 0."""
    if isinstance(value, bool):
        raise ValueError("%s must be a positive number, got %r" % (name, value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a positive number, got %r" % (name, value))
    if not math.isfinite(number) or number <= 0:
        raise ValueError("%s must be a positive number, got %r" % (name, value))
    return number


def _positive_int(value, name):
    """Return ``value`` as an int; ValueError naming ``name`` unless a whole number >= 1."""
    number = _positive_number(value, name)
    if number != int(number):
        raise ValueError("%s must be a whole number, got %r" % (name, value))
    return int(number)


def summarize(result):
    """Reduce one ddp_bench.py result dict to a table row.

    :param result: the benchmark JSON as a dict; needs ``nnodes``, ``world_size``,
        ``samples_per_s`` (global, samples/s), ``samples_per_s_per_process``
        (samples/s), ``model`` and ``backend``.
    :returns: ``{nodes, processes, samples_per_s, samples_per_s_per_process,
        model, backend}``; throughputs as floats in samples/s.
    :raises KeyError: a required key is absent (the message names it).
    :raises ValueError: a count or throughput is not a positive number.
    """
    _require(result, SUMMARY_KEYS, "benchmark result")
    return {
        "nodes": _positive_int(result["nnodes"], "nnodes"),
        "processes": _positive_int(result["world_size"], "world_size"),
        "samples_per_s": _positive_number(result["samples_per_s"], "samples_per_s"),
        "samples_per_s_per_process": _positive_number(
            result["samples_per_s_per_process"], "samples_per_s_per_process"
        ),
        "model": str(result["model"]),
        "backend": str(result["backend"]),
    }


def scaling_efficiency(throughput_n, n, throughput_1):
    """Scaling efficiency of an N-process run against a 1-process run.

    ``throughput_n / (n * throughput_1)``: 1.0 is linear scaling, below 1.0
    is loss to communication or contention.

    :param throughput_n: global throughput of the N-process run, samples/s.
    :param n: number of processes (ranks) in that run.
    :param throughput_1: throughput of the 1-process baseline, samples/s.
    :returns: efficiency as a fraction (float, not a percentage).
    :raises ValueError: any argument is not a positive number.
    """
    t_n = _positive_number(throughput_n, "throughput_n")
    count = _positive_number(n, "n")
    t_1 = _positive_number(throughput_1, "throughput_1")
    return t_n / (count * t_1)


def _baseline(rows, row):
    """The first 1-process row with the same model and backend as ``row``, or None."""
    for candidate in rows:
        if (
            candidate["processes"] == 1
            and candidate["model"] == row["model"]
            and candidate["backend"] == row["backend"]
        ):
            return candidate
    return None


def render_table(rows):
    """Render summary rows as a fixed-width Markdown pipe table.

    Columns: nodes | processes | model | backend | global samples/s |
    samples/s per process | efficiency. Throughputs are samples/s with one
    decimal; efficiency is a percentage against the first 1-process row with
    the same model and backend, blank when there is no such row. Rows keep the
    order given.

    :param rows: list of dicts as returned by :func:`summarize`.
    :returns: the table as a string ending in a newline.
    :raises KeyError: a row lacks a required key (the message names it).
    :raises ValueError: a row's count or throughput is not a positive number.
    """
    if not isinstance(rows, (list, tuple)):
        raise TypeError("rows must be a list, got %s" % type(rows).__name__)
    checked = []
    for index, row in enumerate(rows):
        _require(row, ROW_KEYS, "row %d" % index)
        checked.append(
            {
                "nodes": _positive_int(row["nodes"], "row %d nodes" % index),
                "processes": _positive_int(row["processes"], "row %d processes" % index),
                "samples_per_s": _positive_number(row["samples_per_s"], "row %d samples_per_s" % index),
                "samples_per_s_per_process": _positive_number(
                    row["samples_per_s_per_process"], "row %d samples_per_s_per_process" % index
                ),
                "model": str(row["model"]),
                "backend": str(row["backend"]),
            }
        )

    cells = []
    for row in checked:
        base = _baseline(checked, row)
        efficiency = ""
        if base is not None:
            value = scaling_efficiency(row["samples_per_s"], row["processes"], base["samples_per_s"])
            efficiency = "%.1f%%" % (100.0 * value)
        cells.append(
            (
                str(row["nodes"]),
                str(row["processes"]),
                row["model"].replace("|", "\\|"),
                row["backend"].replace("|", "\\|"),
                "%.1f" % row["samples_per_s"],
                "%.1f" % row["samples_per_s_per_process"],
                efficiency,
            )
        )

    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(TABLE_HEADERS)]

    def line(values):
        padded = [v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, _RIGHT)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if right else ("-" * (w + 2)) for w, right in zip(widths, _RIGHT)) + "|"
    return "\n".join([line(TABLE_HEADERS), rule] + [line(c) for c in cells]) + "\n"


# --- the matrix -------------------------------------------------------------

SCOPES = ("one_process", "one_node", "all_nodes")
SCOPE_LABELS = {"one_process": "1 process", "one_node": "1 node", "all_nodes": "all nodes"}
# Script options a variant may override (ddp_bench.py --<name with dashes>).
VARIANT_OPTIONS = (
    "model", "batch_size", "image_size", "warmup_steps", "steps", "precision", "memory_format", "compile",
    "compile_backend", "data", "workers", "pin_memory", "loader_probe", "lr_scaling", "base_lr",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def variant_problems(variants):
    """Problems (strings) with the variants list; [] when it is usable."""
    if not isinstance(variants, (list, tuple)):
        return ["ddp_benchmark_variants must be a list of {name, environment, options, scope}, got %s"
                % type(variants).__name__]
    problems = []
    seen = set()
    for index, variant in enumerate(variants):
        where = "ddp_benchmark_variants[%d]" % index
        if not isinstance(variant, dict):
            problems.append("%s must be a dict with a name, got %r" % (where, variant))
            continue
        unknown = sorted(set(variant) - {"name", "environment", "options", "scope", "gpu_only"})
        if unknown:
            problems.append("%s has unknown key(s) %s (known: name, environment, options, scope, gpu_only)"
                            % (where, ", ".join(unknown)))
        name = str(variant.get("name", ""))
        if not _NAME_RE.match(name):
            problems.append("%s name %r must be 1-40 characters of letters, digits, '_', '.', '-'" % (where, name))
        elif name in seen or name in SCOPES:
            problems.append("%s name %r is used twice (or is a scope name)" % (where, name))
        seen.add(name)
        env = variant.get("environment", {})
        if not isinstance(env, dict) or not all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(k)) for k in env):
            problems.append("%s environment must be a dict of variable names to values" % where)
        options = variant.get("options", {})
        if not isinstance(options, dict):
            problems.append("%s options must be a dict" % where)
        else:
            bad = sorted(set(options) - set(VARIANT_OPTIONS))
            if bad:
                problems.append("%s options %s are not script options (known: %s)"
                                % (where, ", ".join(bad), ", ".join(VARIANT_OPTIONS)))
        if variant.get("scope", "all_nodes") not in SCOPES:
            problems.append("%s scope %r must be one of %s" % (where, variant.get("scope"), ", ".join(SCOPES)))
    return problems


LAUNCHERS = ("torchrun", "horovod", "slurm")


def build_matrix(hosts, head, nproc_per_node, scopes=SCOPES, variants=(), on_gpu=False, launchers=("torchrun",)):
    """The runs of a benchmark matrix, in the order they are made.

    Scopes: ``one_process`` (1 process on the head), ``one_node`` (every local
    process on the head), ``all_nodes`` (every process on every host). A scope
    whose shape equals the previous one (``one_node`` when ``nproc_per_node``
    is 1; ``all_nodes`` with one host) is not run twice: the run lists both
    scopes. Each variant (``{name, environment, options, scope, gpu_only}``)
    adds one run at its scope (default ``all_nodes``) with its environment and
    script options on top; a ``gpu_only`` variant (an NCCL setting) is left
    out, with the reason, when ``on_gpu`` is false.

    ``launchers``: the launcher of the matrix first (variants use it), then
    any launchers to compare it with: each of those runs the same scopes again
    (same model, batch and nodes), so that Horovod and torchrun rows stand in
    one report. With more than one launcher, scope runs are named
    ``"1 process (horovod)"``.

    :param hosts: inventory names of the nodes, any order; ``head`` must be one.
    :param head: the rendezvous host; single-node runs use it.
    :param nproc_per_node: processes per node (int >= 1).
    :returns: ``{runs: [{index, name, scopes, variant, launcher, nnodes, nproc_per_node,
        world_size, hosts, environment, options}], skipped: [{name, reason}]}``.
    :raises ValueError: bad hosts, head, count, scope or variant (messages name them).
    """
    hosts = [str(h) for h in hosts]
    if not hosts:
        raise ValueError("the matrix needs at least one host")
    if head not in hosts:
        raise ValueError("the head %r is not one of the hosts %s" % (head, ", ".join(hosts)))
    nproc = _positive_int(nproc_per_node, "nproc_per_node")
    scopes = list(scopes)
    bad = [s for s in scopes if s not in SCOPES]
    if bad or not scopes:
        raise ValueError("ddp_benchmark_scopes must be a non-empty list of %s, got %r" % (", ".join(SCOPES), scopes))
    problems = variant_problems(list(variants))
    launchers = list(launchers)
    if not launchers or any(name not in LAUNCHERS for name in launchers) or len(set(launchers)) != len(launchers):
        problems.append("launchers must be distinct names of %s, got %r" % (", ".join(LAUNCHERS), launchers))
    if problems:
        raise ValueError("; ".join(problems))
    ordered = [head] + [h for h in hosts if h != head]
    shapes = {
        "one_process": ([head], 1),
        "one_node": ([head], nproc),
        "all_nodes": (ordered, nproc),
    }
    runs = []
    for launcher in launchers:
        for scope in SCOPES:
            if scope not in scopes:
                continue
            run_hosts, per_node = shapes[scope]
            same = [r for r in runs if r["variant"] is None and r["launcher"] == launcher and r["hosts"] == run_hosts
                    and r["nproc_per_node"] == per_node]
            if same:
                same[0]["scopes"].append(scope)
                continue
            runs.append(_run(len(runs), scope, None, run_hosts, per_node, {}, {}, launcher))
    skipped = []
    for variant in variants:
        if variant.get("gpu_only") and not on_gpu:
            skipped.append({"name": variant["name"], "reason": "gpu_only: the nodes have no GPU (NCCL is not used)"})
            continue
        scope = variant.get("scope", "all_nodes")
        run_hosts, per_node = shapes[scope]
        runs.append(_run(len(runs), scope, variant["name"], run_hosts, per_node,
                         {str(k): str(v) for k, v in (variant.get("environment") or {}).items()},
                         dict(variant.get("options") or {}), launchers[0]))
    for run in runs:
        run["name"] = " = ".join(SCOPE_LABELS[s] for s in run["scopes"])
        if len(launchers) > 1:
            run["name"] += " (%s)" % run["launcher"]
            run["launcher_label"] = True
        if run["variant"]:
            run["name"] += " / " + run["variant"]
    return {"runs": runs, "skipped": skipped}


def _run(index, scope, variant, hosts, per_node, environment, options, launcher="torchrun"):
    return {
        "index": index, "name": "", "scopes": [scope], "variant": variant, "launcher": launcher, "nnodes": len(hosts),
        "nproc_per_node": per_node, "world_size": len(hosts) * per_node, "hosts": list(hosts),
        "environment": environment, "options": options,
    }


def option_args(options):
    """Script options dict -> ``--name=value`` arguments, sorted by name (None values left out)."""
    return ["--%s=%s" % (k.replace("_", "-"), v) for k, v in sorted(options.items()) if v is not None]


# --- provenance --------------------------------------------------------------

def nccl_provenance(result):
    """What NCCL actually used in one run, from the NCCL_DEBUG=INFO lines the script kept.

    :param result: a ddp_bench.py result; ``nccl_debug`` is ``[{rank, host, lines}]``
        (absent or empty with Gloo, or with NCCL_DEBUG capture off).
    :returns: ``{captured, transport, gdr, nccl_version, link_layers, per_host:
        {host: {transport, gdr, net_plugins, channel_transports, interfaces}}, warnings}``.
        ``transport`` is ``IB``/``Socket``/... when every rank that shows a
        network transport agrees, ``mixed`` when they differ, None when none
        shows one (a single-node run uses P2P/SHM, no network).
    """
    logs = result.get("nccl_debug") or []
    out = {"captured": bool(logs), "transport": None, "gdr": None, "nccl_version": None, "link_layers": [],
           "per_host": {}, "warnings": []}
    transports = set()
    gdrs = set()
    layers = set()
    for entry in logs:
        parsed = parse_nccl_debug("\n".join(entry.get("lines") or []))
        host = str(entry.get("host"))
        mine = out["per_host"].setdefault(host, {"transport": None, "gdr": None, "net_plugins": [],
                                                 "channel_transports": [], "interfaces": []})
        if parsed["transport"]:
            transports.add(parsed["transport"])
            mine["transport"] = parsed["transport"] if mine["transport"] in (None, parsed["transport"]) else "mixed"
        if parsed["gdr"] is not None:
            gdrs.add(parsed["gdr"])
            mine["gdr"] = parsed["gdr"] if mine["gdr"] in (None, parsed["gdr"]) else "mixed"
        for key, values in (("net_plugins", parsed["net_plugins"]), ("channel_transports", parsed["channel_transports"]),
                            ("interfaces", [d["name"] for n in parsed["net"] for d in n["devices"]])):
            mine[key] = sorted(set(mine[key]) | set(values))
        layers.update(rdma_link_layers(parsed))
        out["nccl_version"] = out["nccl_version"] or parsed["nccl_version"]
        out["warnings"] += ["%s rank %s: %s" % (host, entry.get("rank"), w["text"]) for w in parsed["warnings"]]
    if len(transports) == 1:
        out["transport"] = transports.pop()
    elif transports:
        out["transport"] = "mixed"
    if len(gdrs) == 1:
        out["gdr"] = gdrs.pop()
    elif gdrs:
        out["gdr"] = "mixed"
    out["link_layers"] = sorted(layers)
    return out


# --- the matrix report -------------------------------------------------------

CSV_COLUMNS = (
    "run", "scopes", "variant", "launcher", "run_id", "nodes", "processes", "model", "backend", "precision", "memory_format",
    "compile", "data", "batch_size_per_process", "global_batch_size", "lr", "lr_scaling", "global_images_per_s",
    "images_per_s_per_process", "speedup", "efficiency", "loader_images_per_s_per_process", "loader_headroom",
    "input_bound", "transport", "gdr", "torch", "cuda", "cudnn", "nccl",
    "started_at", "finished_at", "slurm_job_id", "slurm_state", "slurm_elapsed", "slurm_nodes",
)


def matrix_rows(runs):
    """One row per matrix run with speed-up and scaling efficiency.

    :param runs: ``[{run: <matrix run from build_matrix>, run_id, result: <ddp_bench.py result>}]``.
    :returns: rows (dicts with the :data:`CSV_COLUMNS` keys plus ``hosts``,
        ``env``, ``nccl_provenance``, ``baseline``): one row per scope of a run
        without a variant (a run that is both "1 process" and "1 node" gives
        both rows, with the same run_id), one per variant run. The baseline is the first run whose
        scopes include ``one_process`` and has no variant, per launcher; ``speedup`` =
        throughput / baseline throughput, ``efficiency`` = throughput_N /
        (N x throughput_1) (both None without a baseline or for a baseline of
        another model, backend, precision or data).
    """
    rows = []
    for index, item in enumerate(runs):
        if not isinstance(item, dict):
            raise TypeError("runs[%d] must be a dict, got %s" % (index, type(item).__name__))
        _require(item, ("run", "result"), "runs[%d]" % index)
        run, result = item["run"], item["result"]
        base = summarize(result)
        versions = result.get("versions") or {}
        nccl = nccl_provenance(result)
        if run.get("variant"):
            names = [run.get("name") or "run %d" % index]
        else:
            names = [SCOPE_LABELS.get(scope, scope) + (" (%s)" % run.get("launcher") if run.get("launcher_label") else "")
                     for scope in run.get("scopes", [])] or ["run %d" % index]
        for name in names:
            rows.append(_matrix_row(name, item, run, result, base, versions, nccl))
    return _with_efficiency(rows)


def _matrix_row(name, item, run, result, base, versions, nccl):
    """One table row (see matrix_rows)."""
    loader = result.get("loader") or {}
    return {
        "run": name,
        "scopes": " + ".join(SCOPE_LABELS.get(s, s) for s in run.get("scopes", [])),
        "variant": run.get("variant") or "",
        "launcher": run.get("launcher") or "torchrun",
        "run_id": item.get("run_id") or "",
        "nodes": base["nodes"],
        "processes": base["processes"],
        "model": base["model"],
        "backend": base["backend"],
        "precision": result.get("precision", "fp32"),
        "memory_format": result.get("memory_format", "contiguous"),
        "compile": result.get("compile", "off"),
        "data": result.get("data", "synthetic"),
        "batch_size_per_process": result.get("batch_size_per_process"),
        "global_batch_size": result.get("global_batch_size"),
        "lr": result.get("lr"),
        "lr_scaling": result.get("lr_scaling"),
        "global_images_per_s": base["samples_per_s"],
        "images_per_s_per_process": base["samples_per_s_per_process"],
        "speedup": None,
        "efficiency": None,
        "loader_images_per_s_per_process": loader.get("samples_per_s_per_process"),
        "loader_headroom": loader.get("headroom"),
        "input_bound": loader.get("input_bound"),
        "input_bound_share": loader.get("input_bound_share"),
        "workers": result.get("workers", 0),
        "pin_memory": result.get("pin_memory", False),
        # Horovod's MPI controller runs over ob1/TCP: horovod_command excludes openib.
        "transport": nccl["transport"] or {"gloo": "gloo/tcp", "horovod+gloo": "gloo/tcp",
                                           "horovod+mpi": "mpi/tcp"}.get(base["backend"], ""),
        "gdr": nccl["gdr"],
        "torch": versions.get("torch"),
        "cuda": versions.get("cuda"),
        "cudnn": versions.get("cudnn"),
        "nccl": versions.get("nccl"),
        "started_at": result.get("started_at"),
        "finished_at": result.get("finished_at"),
        "slurm_job_id": (result.get("scheduler") or {}).get("job_id") or "",
        # From the accounting database (sacct), filled by add_accounting; empty without it.
        "slurm_state": "",
        "slurm_elapsed": "",
        "slurm_nodes": "",
        "scheduler": result.get("scheduler") or {},
        "hosts": result.get("hosts", {}),
        "env": result.get("env", {}),
        "nccl_provenance": nccl,
        "baseline": "one_process" in run.get("scopes", []) and not run.get("variant"),
    }


def add_accounting(rows, jobs):
    """Fill each Slurm row's ``slurm_state``, ``slurm_elapsed`` and ``slurm_nodes`` from sacct's record of its job.

    :param jobs: ``{job id: {state, elapsed, nodes, ...}}`` as module_utils/slurm/accounting.py parse_sacct reads
        ``sacct -X -n -P -o JobID,JobName,State,Elapsed,NodeList,ExitCode``; a job sacct does not list keeps empty
        fields (no accounting storage, or the record not written yet).
    :returns: ``rows`` (changed in place).
    """
    for row in rows:
        job = (jobs or {}).get(str(row.get("slurm_job_id") or ""))
        if job:
            row["slurm_state"], row["slurm_elapsed"], row["slurm_nodes"] = job["state"], job["elapsed"], job["nodes"]
    return rows


def _slurm_cell(row):
    """The table's Slurm column: the job id, with sacct's state and elapsed time where the accounting has them."""
    cell = str(row.get("slurm_job_id") or "")
    if cell and row.get("slurm_state"):
        cell += " %s %s" % (row["slurm_state"], row.get("slurm_elapsed") or "")
    return cell.strip()


def _with_efficiency(rows):
    """Fill speedup and efficiency against the first baseline row (1 process, no variant) of the row's launcher."""
    for row in rows:
        baseline = next((b for b in rows if b["baseline"] and b["launcher"] == row["launcher"]), None)
        if baseline is not None and all(row[k] == baseline[k] for k in ("model", "backend", "precision", "data")):
            row["speedup"] = row["global_images_per_s"] / baseline["global_images_per_s"]
            row["efficiency"] = scaling_efficiency(row["global_images_per_s"], row["processes"],
                                                   baseline["global_images_per_s"])
    return rows


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = "%.6g" % value if abs(value) < 1e-3 else ("%.4f" % value).rstrip("0").rstrip(".")
    else:
        text = str(value)
    if any(c in text for c in ',"\n\r'):
        text = '"%s"' % text.replace('"', '""')
    return text


def render_csv(rows):
    """Rows from :func:`matrix_rows` as CSV text (RFC 4180 quoting, ``\\n`` line ends, header first)."""
    lines = [",".join(CSV_COLUMNS)]
    for row in rows:
        lines.append(",".join(_csv_cell(row.get(c)) for c in CSV_COLUMNS))
    return "\n".join(lines) + "\n"


def _md_table(headers, right, cells):
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]

    def line(values):
        return "| " + " | ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, right)) + "|"
    return "\n".join([line(headers), rule] + [line(c) for c in cells]) + "\n"


def _pct(value):
    return "" if value is None else "%.1f%%" % (100.0 * value)


def same_run_notes(rows):
    """One line per run that fills more than one row of the table (the same ``run_id``).

    On nodes with one process each, "1 process" and "1 node" have the same shape: :func:`build_matrix` makes
    one run and :func:`matrix_rows` gives it a row per scope, so that the table keeps its usual rows.

    :returns: e.g. ``["1 process and 1 node are one run (Slurm job 12): the same figures, shown once per scope."]``.
    """
    runs = {}
    for row in rows:
        if row.get("run_id"):
            runs.setdefault(row["run_id"], []).append(row)
    out = []
    for run_id, same in runs.items():
        if len(same) < 2:
            continue
        names = [str(r["run"]) for r in same]
        job = same[0].get("slurm_job_id")
        out.append("%s and %s are one run (%s): the same figures, shown once per scope."
                   % (", ".join(names[:-1]), names[-1], "Slurm job %s" % job if job else "run id %s" % run_id))
    return out


def render_matrix_table(rows):
    """The scaling table of a matrix report as a Markdown pipe table (one line per run), then
    :func:`same_run_notes` (after a blank line) when rows share a run.

    A "Slurm job" column is added when any run was a Slurm job: the job id, and where Slurm's accounting has the job
    (sacct), its state and elapsed time ("Slurm job (sacct)").
    """
    jobs = any(row.get("slurm_job_id") for row in rows)
    title = "Slurm job (sacct)" if any(row.get("slurm_state") for row in rows) else "Slurm job"
    headers = ("run", "nodes", "processes", "model", "precision", "data", "global images/s",
               "images/s per GPU/process", "speed-up", "efficiency", "transport") + ((title,) if jobs else ())
    right = (False, True, True, False, False, False, True, True, True, True, False) + ((True,) if jobs else ())
    cells = []
    for row in rows:
        model = str(row["model"]).split(" (", maxsplit=1)[0]
        cells.append((
            str(row["run"]).replace("|", "\\|"), str(row["nodes"]), str(row["processes"]), model.replace("|", "\\|"),
            str(row["precision"]) + ("+cl" if row.get("memory_format") == "channels_last" else "")
            + ("+compile" if row.get("compile") not in (None, "off") else ""),
            str(row["data"]), "%.1f" % row["global_images_per_s"], "%.1f" % row["images_per_s_per_process"],
            "" if row["speedup"] is None else "%.2fx" % row["speedup"], _pct(row["efficiency"]),
            str(row["transport"] or ""),
        ) + ((_slurm_cell(row),) if jobs else ()))
    notes = same_run_notes(rows)
    return _md_table(headers, right, cells) + ("\n" + "\n".join(notes) + "\n" if notes else "")


def compare_rows(current, previous, threshold=0.10):
    """Compare a matrix report with a previous one, run by run (matched on the run name).

    :param current: rows of this report; :param previous: rows of the previous one
        (only ``run`` and ``global_images_per_s`` are read).
    :param threshold: a drop in global images/s larger than this fraction is a regression.
    :returns: ``{threshold, regressions: int, rows: [{run, previous, current, change,
        regression}], only_current: [names], only_previous: [names]}``; ``change``
        is (current - previous) / previous.
    :raises ValueError: threshold not in [0, 1).
    """
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise ValueError("the regression threshold must be a number, got %r" % (threshold,))
    if not 0 <= threshold < 1:
        raise ValueError("the regression threshold must be a fraction in [0, 1), got %r" % threshold)
    before = {}
    for index, row in enumerate(previous or []):
        _require(row, ("run", "global_images_per_s"), "previous row %d" % index)
        before[str(row["run"])] = _positive_number(row["global_images_per_s"], "previous %s global_images_per_s"
                                                   % row["run"])
    out = {"threshold": threshold, "regressions": 0, "rows": [], "only_current": [], "only_previous": []}
    names = set()
    for row in current:
        name = str(row["run"])
        names.add(name)
        if name not in before:
            out["only_current"].append(name)
            continue
        now = _positive_number(row["global_images_per_s"], "%s global_images_per_s" % name)
        change = (now - before[name]) / before[name]
        regression = change < -threshold
        out["regressions"] += int(regression)
        out["rows"].append({"run": name, "previous": before[name], "current": now, "change": change,
                            "regression": regression})
    out["only_previous"] = sorted(n for n in before if n not in names)
    return out


def render_comparison(comparison, previous_label="previous"):
    """A comparison from :func:`compare_rows` as Markdown: a table and a verdict line."""
    cells = [(r["run"], "%.1f" % r["previous"], "%.1f" % r["current"], "%+.1f%%" % (100.0 * r["change"]),
              "REGRESSION" if r["regression"] else "ok") for r in comparison["rows"]]
    text = "Compared with %s (regression: a drop of more than %.0f%% in global images/s).\n\n" % (
        previous_label, 100.0 * comparison["threshold"])
    text += _md_table(("run", "previous images/s", "images/s", "change", "verdict"),
                      (False, True, True, True, False), cells)
    for key, what in (("only_current", "new in this run"), ("only_previous", "only in the previous run")):
        if comparison[key]:
            text += "\n%s: %s\n" % (what.capitalize(), ", ".join(comparison[key]))
    text += "\n%d regression(s) above %.0f%%.\n" % (comparison["regressions"], 100.0 * comparison["threshold"])
    return text


def _provenance_lines(rows):
    lines = []
    seen = set()
    for row in rows:
        if row["run_id"] in seen:
            continue
        seen.add(row["run_id"])
        nccl = row["nccl_provenance"]
        hosts = ", ".join("%s: %s" % (h, ",".join(str(r) for r in ranks)) for h, ranks in sorted(row["hosts"].items()))
        lines.append("- **%s** (`%s`): ranks %s; torch %s, CUDA %s, cuDNN %s, NCCL %s; batch %s/process, global %s, "
                     "lr %s (%s); %s .. %s"
                     % (row["run"], row["run_id"], hosts, row["torch"], row["cuda"] or "-", row["cudnn"] or "-",
                        row["nccl"] or "-", row["batch_size_per_process"], row["global_batch_size"],
                        row["lr"], row["lr_scaling"], row["started_at"], row["finished_at"]))
        if row["scheduler"]:
            sched = row["scheduler"]
            lines.append("  - %s job %s on %s (%s node(s), partition %s)%s"
                         % (sched.get("name", "slurm").capitalize(), sched.get("job_id", "?"), sched.get("nodelist", "?"),
                            sched.get("nodes", "?"), sched.get("partition", "?"),
                            ("; sacct: %s after %s on %s" % (row["slurm_state"], row["slurm_elapsed"], row["slurm_nodes"]))
                            if row.get("slurm_state") else ""))
        if row["backend"] == "nccl":
            if nccl["captured"]:
                per_host = "; ".join("%s: %s%s" % (h, v["transport"] or "no network (P2P/SHM only)",
                                                   "" if v["gdr"] is None else ", GDR %s" % ("on" if v["gdr"] is True
                                                                                             else v["gdr"] or "off"))
                                     for h, v in sorted(nccl["per_host"].items()))
                lines.append("  - NCCL transport: %s (%s)%s" % (nccl["transport"] or "none", per_host,
                                                                "; link layers " + ", ".join(nccl["link_layers"])
                                                                if nccl["link_layers"] else ""))
                lines += ["  - NCCL WARN: %s" % w for w in nccl["warnings"][:5]]
            else:
                lines.append("  - NCCL transport: not captured (NCCL_DEBUG=INFO capture was off)")
        env = ", ".join("%s=%s" % (k, v) for k, v in sorted(row["env"].items()))
        lines.append("  - env: %s" % (env or "(none)"))
    return lines


# The variant that reproduces the reference training script (fp32, FakeData + CPU transforms in DataLoader
# workers, SGD lr 0.1 unscaled); the report sets the default settings against it.
REFERENCE_VARIANT = "reference_baseline"


def input_pipeline_lines(rows):
    """Markdown bullets, one per DataLoader row that timed its loader alone (ddp_bench.py --loader-probe)."""
    lines = []
    for row in rows:
        feed = row.get("loader_images_per_s_per_process")
        if feed is None:
            continue
        if row.get("input_bound"):
            verdict = ("input-bound: training took %.0f%% or more of what the loader feeds; add DataLoader workers, "
                       "pin_memory or CPU cores" % (100.0 * (row.get("input_bound_share") or 0.8)))
        else:
            verdict = "not input-bound: the loader has headroom"
        lines.append("- **%s**: the DataLoader alone fed %.1f images/s per process (%s workers, pin_memory %s, "
                     "slowest rank); training consumed %.1f: headroom %sx, %s."
                     % (row["run"], feed, row.get("workers", 0), "on" if row.get("pin_memory") else "off",
                        row["images_per_s_per_process"],
                        "?" if row.get("loader_headroom") is None else "%.2f" % row["loader_headroom"], verdict))
    return lines


def reference_ratios(rows):
    """Default settings / the reference baseline, from one matrix run.

    Each ``reference_baseline`` variant row is paired with the row without a variant that ran on the
    same number of nodes and processes (its scope). :returns: ``[{run, default_run, default, baseline,
    ratio, default_row, baseline_row}]`` with images/s (global), ratio = default / baseline and the two rows;
    [] when there is no pair.
    """
    out = []
    for row in rows:
        if row.get("variant") != REFERENCE_VARIANT:
            continue
        default = next((r for r in rows if not r.get("variant") and r["nodes"] == row["nodes"]
                        and r["processes"] == row["processes"]), None)
        if default is None or not row["global_images_per_s"]:
            continue
        out.append({"run": row["run"], "default_run": default["run"], "default": default["global_images_per_s"],
                    "baseline": row["global_images_per_s"],
                    "ratio": default["global_images_per_s"] / row["global_images_per_s"],
                    "default_row": default, "baseline_row": row})
    return out


def render_report(report):
    """The whole report.md from a report dict (see :func:`build_report`)."""
    rows = report["rows"]
    out = ["# DDP scaling report %s" % report["matrix_id"], ""]
    out.append("Collection ddp.cluster %s; launcher %s; %d run(s); %s .. %s." % (
        report["collection_version"], report["launcher"], len(rows), report["started_at"], report["finished_at"]))
    if rows:
        out.append("Model: %s." % rows[0]["model"])
    out += ["", "## Scaling", "", render_matrix_table(rows).rstrip("\n"), ""]
    out.append("Speed-up = global images/s / the 1-process run's; efficiency = throughput_N / (N x throughput_1), "
               "N = processes (GPUs).")
    for skip in report.get("skipped", []):
        out.append("Variant %s not run: %s." % (skip["name"], skip["reason"]))
    ratios = reference_ratios(rows)
    if ratios:
        out += ["", "## Default settings vs the reference script", ""]
        for item in ratios:
            base, default = item["baseline_row"], item["default_row"]
            out.append("- %s (%s, %s) %.1f images/s / %s (%s, %s) %.1f images/s = **%.2fx**"
                       % (item["default_run"], default["precision"], default["data"], item["default"],
                          item["run"], base["precision"], base["data"], item["baseline"], item["ratio"]))
    feeds = input_pipeline_lines(rows)
    if feeds:
        out += ["", "## Input pipeline", ""] + feeds
    if report.get("comparison"):
        comparison = render_comparison(report["comparison"], report.get("compare_to") or "previous")
        out += ["", "## Comparison", "", comparison.rstrip("\n")]
    out += ["", "## Provenance", ""] + _provenance_lines(rows)
    build = report.get("horovod_build")
    if build:
        def marks(section):
            return ", ".join(name for name, on in sorted(build.get(section, {}).items()) if on) or "none"
        line = "- Horovod build (`horovodrun --check-build` on the head): v%s; frameworks %s; controllers %s; "
        out.append(line % (build.get("version") or "?", marks("frameworks"), marks("controllers"))
                   + "tensor operations %s." % marks("tensor_operations"))
    return "\n".join(out) + "\n"


def build_report(runs, matrix_id, collection_version, launcher="torchrun", skipped=(), previous_rows=None,
                 compare_to=None, threshold=0.10, horovod_build=None, accounting=None):
    """The matrix report: rows, comparison (when ``previous_rows`` is given), and its texts.

    ``horovod_build``: the head's ``horovodrun --check-build`` as
    :func:`parse_horovod_check_build` reads it, for the provenance (None: no Horovod run).
    ``accounting``: Slurm's record of the runs' jobs (:func:`add_accounting`), or None.

    :returns: ``{schema_version, matrix_id, collection_version, launcher, started_at,
        finished_at, skipped, rows, comparison, compare_to, horovod_build, csv, markdown}``.
    """
    rows = add_accounting(matrix_rows(runs), accounting)
    report = {
        "schema_version": 1,
        "matrix_id": str(matrix_id),
        "collection_version": str(collection_version),
        "launcher": launcher,
        "started_at": min((r["started_at"] for r in rows if r["started_at"]), default=None),
        "finished_at": max((r["finished_at"] for r in rows if r["finished_at"]), default=None),
        "skipped": list(skipped),
        "rows": rows,
        "comparison": compare_rows(rows, previous_rows, threshold) if previous_rows is not None else None,
        "compare_to": compare_to,
        "horovod_build": horovod_build,
        "runs": [dict(item["run"], run_id=item.get("run_id")) for item in runs],
    }
    report["csv"] = render_csv(rows)
    report["markdown"] = render_report(report)
    report["table"] = render_matrix_table(rows)
    report["comparison_markdown"] = (render_comparison(report["comparison"], compare_to or "previous")
                                     if report["comparison"] else "")
    return report


# --- Horovod (C16, C17) --------------------------------------------------------

_CHECK_SECTIONS = {"available frameworks": "frameworks", "available controllers": "controllers",
                   "available tensor operations": "tensor_operations"}
_CHECK_ITEM_RE = re.compile(r"\[\s*([Xx]?)\s*\]\s*([A-Za-z][\w.+-]*)")


def parse_horovod_check_build(text):
    """Parse ``horovodrun --check-build`` output.

    Handles the multi-line form (``Available Frameworks:`` then ``[X] PyTorch``
    lines) and the one-line form of case C16 (``Controllers: [ ] MPI [X] Gloo;
    Tensor Operations: [ ] NCCL``).

    :returns: ``{version, frameworks, controllers, tensor_operations}``; the last
        three map names to True (``[X]``) / False (``[ ]``); a section the output
        does not show stays empty. ``version`` is None
        when no ``Horovod v0.28.1`` line was seen.
    """
    out = {"version": None, "frameworks": {}, "controllers": {}, "tensor_operations": {}}
    section = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        match = re.match(r"^Horovod v?(\d+\.\d+(?:\.\d+)?\S*)", line)
        if match:
            out["version"] = match.group(1).rstrip(":")
            continue
        for part in line.split(";"):
            part = part.strip()
            head = re.match(r"^(?:Available\s+)?(Frameworks|Controllers|Tensor Operations)\s*:\s*(.*)$", part, re.I)
            if head:
                section = _CHECK_SECTIONS["available " + head.group(1).lower()]
                part = head.group(2)
            if section:
                for mark, name in _CHECK_ITEM_RE.findall(part):
                    out[section][name] = bool(mark)
    return out


def _has(mapping, name):
    return any(k.lower() == name.lower() and v for k, v in mapping.items())


def horovod_build_problems(parsed, controller="gloo", need_nccl=False):
    """What a Horovod build lacks for our run (an empty list when nothing).

    :param parsed: from :func:`parse_horovod_check_build`.
    :param controller: ``gloo`` or ``mpi``: the controller horovodrun will use.
    :param need_nccl: True on GPU nodes (NCCL tensor operations are needed).
    :returns: ``[{code, message, fix}]`` with codes HOROVOD_NO_PYTORCH,
        HOROVOD_NO_CONTROLLER, HOROVOD_NO_NCCL, HOROVOD_CHECK_UNREADABLE.
    """
    if controller not in ("gloo", "mpi"):
        raise ValueError("controller must be gloo or mpi, got %r" % controller)
    rebuild = ("pip install --no-cache-dir --force-reinstall horovod with HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_%s=1%s "
               "(an old build is 'already satisfied' and never rebuilt without --force-reinstall --no-cache-dir)"
               % ("GLOO" if controller == "gloo" else "MPI", " HOROVOD_GPU_OPERATIONS=NCCL" if need_nccl else ""))
    if not (parsed["frameworks"] or parsed["controllers"] or parsed["tensor_operations"]):
        return [{"code": "HOROVOD_CHECK_UNREADABLE", "message": "horovodrun --check-build printed no build table",
                 "fix": "run horovodrun --check-build by hand in the environment; reinstall Horovod"}]
    problems = []
    if parsed["frameworks"] and not _has(parsed["frameworks"], "PyTorch"):
        problems.append({"code": "HOROVOD_NO_PYTORCH", "message": "Horovod was built without PyTorch", "fix": rebuild})
    name = "Gloo" if controller == "gloo" else "MPI"
    if not _has(parsed["controllers"], name):
        problems.append({"code": "HOROVOD_NO_CONTROLLER",
                         "message": "Horovod was built without the %s controller (controllers: %s)"
                         % (name, ", ".join(k for k, v in parsed["controllers"].items() if v) or "none"),
                         "fix": rebuild})
    if need_nccl and not _has(parsed["tensor_operations"], "NCCL"):
        problems.append({"code": "HOROVOD_NO_NCCL",
                         "message": "Horovod was built without NCCL tensor operations (GPU all-reduce would go "
                                    "through %s on the CPU)" % name,
                         "fix": "install the NCCL headers (libnccl-dev / libnccl-devel) first, then " + rebuild})
    return problems


FORWARD_EXACT = ("LD_LIBRARY_PATH", "PATH")
FORWARD_PREFIXES = ("NCCL_",)


def forwarded_names(environ):
    """Names to forward to remote ranks: every NCCL_*, plus LD_LIBRARY_PATH and PATH (always), sorted."""
    names = {k for k in environ if k.startswith(FORWARD_PREFIXES)}
    return sorted(names | set(FORWARD_EXACT))


def horovod_command(hosts, slots, program, environ, controller="gloo", ssh_port=None, network_interface=None):
    """argv that launches ``program`` on every rank with Horovod.

    ``controller`` ``gloo``: ``horovodrun --gloo -np N -H h1:s,h2:s ...``
    (horovodrun passes its own environment to the remote ranks; the returned
    ``forwarded`` names say which of ours matter). ``mpi``: a plain ``mpirun``
    line with ``-x NAME`` for every NCCL_* variable in ``environ``, and
    LD_LIBRARY_PATH and PATH (C17: mpirun forwards nothing without ``-x``).

    :param hosts: host names or addresses, head first; :param slots: ranks per host.
    :param program: argv of the rank program (python, script, options).
    :param environ: the launch environment (names are read; values are not put on the line).
    :returns: ``{argv, np, forwarded}``.
    """
    if not hosts:
        raise ValueError("horovod_command needs at least one host")
    slots = _positive_int(slots, "slots")
    np_ = slots * len(hosts)
    host_list = ",".join("%s:%d" % (h, slots) for h in hosts)
    forwarded = forwarded_names(environ)
    if controller == "gloo":
        argv = ["horovodrun", "--gloo", "-np", str(np_), "-H", host_list]
        if ssh_port:
            argv += ["-p", str(int(ssh_port))]
        if network_interface:
            argv += ["--network-interface", str(network_interface)]
    elif controller == "mpi":
        # --tag-output: every rank's line starts [jobid,rank]<stream>: (which rank, hence which node, said what).
        argv = ["mpirun", "-np", str(np_), "-H", host_list, "-bind-to", "none", "-map-by", "slot",
                "-mca", "pml", "ob1", "-mca", "btl", "^openib", "--tag-output"]
        if ssh_port:
            argv += ["-mca", "plm_rsh_args", "-p %d" % int(ssh_port)]
        if network_interface:
            argv += ["-mca", "btl_tcp_if_include", str(network_interface)]
        for name in forwarded:
            argv += ["-x", name]
    else:
        raise ValueError("controller must be gloo or mpi, got %r" % controller)
    return {"argv": argv + [str(p) for p in program], "np": np_, "forwarded": forwarded}


# What a failed horovodrun or mpirun says about the nodes it could not start (outputs in
# tests/unit/fixtures/horovod, from runs on the local cluster). Each pattern's group "host" is an address or
# name of the -H line; a rank's own line ("[rank]<stderr>:" from horovodrun, "[jobid,rank]<stderr>:" from
# mpirun --tag-output) is mapped to its node by the slot layout (ranks 0..s-1 on the first host, and so on).
_HOST_LINES = (
    # horovod/runner/launch.py, _check_all_hosts_ssh_successful: the next line is ssh's own message.
    re.compile(r"^ssh not successful for host (?P<host>\S+?):?$"),
    # OpenSSH: "ssh: connect to host H port 22: Connection refused", "user@H: Permission denied (publickey).",
    # "ssh: Could not resolve hostname H: ...".
    re.compile(r"ssh: connect to host (?P<host>\S+) port \d+: "),
    re.compile(r"^(?:\S+@)?(?P<host>[^@\s]+): Permission denied \("),
    re.compile(r"ssh: Could not resolve hostname (?P<host>[^:\s]+): "),
    # OpenMPI 4: "mpirun noticed that process rank 1 with PID 0 on node H exited on signal 9 (Killed)."
    re.compile(r"process rank \d+ with PID \d+ on node (?P<host>\S+) exited"),
    # OpenMPI 4 help text blocks: "Node: H" (the node an executable could not be started on), "Remote host: H" (a
    # daemon mpirun lost). Not "Local host:", which is usually mpirun's own node.
    re.compile(r"^\s*(?:Node|Remote host):\s+(?P<host>\S+)\s*$"),
)
_RANK_LINE = re.compile(r"^\[(?:\d+,)?(?P<rank>\d+)\]<std(?:err|out)>:\s?(?P<text>.*)$")
_RANK_ERROR = re.compile(r"(Error|Exception|error:|No such file|can't open|cannot |Permission denied|Killed)")
_RANK_NOT_ERROR = re.compile(r"Warning")


def horovod_unstarted_nodes(lines, hosts, names=None, slots=1):
    """Nodes of a failed Horovod launch that the launcher's own output names, with the line that names them.

    :param lines: stdout and stderr lines of ``horovodrun`` or ``mpirun`` on the head (strings).
    :param hosts: the addresses or names of the ``-H`` line, head first (as ``horovod_command`` got them).
    :param names: inventory names in the same order (default: ``hosts``); the result uses these.
    :param slots: ranks per host: rank r runs on ``hosts[r // slots]`` (``-map-by slot``, horovodrun's order).
    :returns: ``[{"host": name, "reason": text}]`` in ``hosts`` order, at most one entry per node, the first
        line that names it (for horovodrun's SSH check, that line and ssh's message after it). Lines that name a
        host (SSH, OpenMPI's) come first: rank lines count only when there are none, and only when some node's
        ranks printed no error (when every node's ranks fail alike, one collective failed everywhere: nobody is
        singled out). Empty when the output names no node.
    :raises ValueError: names and hosts of different lengths; slots not a positive integer.
    """
    hosts = [str(h) for h in hosts]
    names = [str(n) for n in (names if names is not None else hosts)]
    if len(names) != len(hosts):
        raise ValueError("names (%d) and hosts (%d) differ in length" % (len(names), len(hosts)))
    slots = _positive_int(slots, "slots")
    by_token = {}
    for host, name in zip(hosts, names):
        by_token.setdefault(host, name)
        by_token.setdefault(name, name)
    found = {}
    by_rank = {}
    lines = [str(line).rstrip() for line in lines]
    for i, line in enumerate(lines):
        rank_line = _RANK_LINE.match(line)
        if rank_line:
            rank, text = int(rank_line.group("rank")), rank_line.group("text").strip()
            if rank // slots < len(names) and _RANK_ERROR.search(text) and not _RANK_NOT_ERROR.search(text):
                by_rank.setdefault(names[rank // slots], "rank %d reported: %s" % (rank, text))
            continue
        for pattern in _HOST_LINES:
            match = pattern.search(line)
            if not match or match.group("host") not in by_token:
                continue
            reason = line.strip()
            if reason.startswith("ssh not successful"):
                following = [x.strip() for x in lines[i + 1:i + 4] if x.strip()]
                if following:
                    reason = "%s %s" % (reason, following[0])
            found.setdefault(by_token[match.group("host")], reason)
            break
    if not found and len(by_rank) < len(set(names)):
        found = by_rank
    return [{"host": name, "reason": found[name]} for name in dict.fromkeys(names) if name in found]


# What a failed launch printed, in the order that says most (roles/ddp_benchmark/tasks/run.yml names each failed
# node with one line): ddp_bench.py's own argparse-style error; an exception a rank raised, with its launcher's
# prefix (torchrun's "[rankN]: ", horovodrun's "[N]<stderr>:", mpirun --tag-output's "[J,N]<stderr>:"); any raised
# exception; any error-like line other than torchrun's pointer to its errors.html page.
_RANK_PREFIX = r"(\[rank\d+\]: |\[(\d+,)?\d+\]<stderr>:)"
_FAILURE_TIERS = (
    (re.compile(r"ddp_bench\.py: error: "), None),
    (re.compile(r"^%s[A-Za-z_.]*(Error|Exception): " % _RANK_PREFIX), None),
    (re.compile(r"^%s?[A-Za-z_.]*(Error|Exception): " % _RANK_PREFIX), None),
    (re.compile(r"Error|error|refused|timed out|Timeout|unable to"), re.compile(r"elastic/errors\.html")),
)
_RULE_LINE = re.compile(r"[-=\s]*$")


def failure_line(lines):
    """The one line of a failed launcher's output that says what went wrong.

    :param lines: the launcher's stderr lines on one node (strings; ``None`` or empty for none).
    :returns: the last line of the first tier that has one: ddp_bench.py's own ``ddp_bench.py: error: ...``; an
        exception a rank raised, with the launcher's rank prefix; any ``<Name>Error: ``/``<Name>Exception: `` line;
        any line with ``Error``, ``error``, ``refused``, ``timed out``, ``Timeout`` or ``unable to`` (not torchrun's
        pointer to ``elastic/errors.html``). Else the last line that is not blank or a rule of ``-``/``=``, else
        ``"no output"``. The last line of a tier is taken because a launcher prints the cause of its exit last
        (torchrun's ChildFailedError after the ranks' tracebacks).
    """
    lines = ["" if line is None else str(line) for line in lines or []]
    for wanted, unwanted in _FAILURE_TIERS:
        tier = [line for line in lines if wanted.search(line) and not (unwanted and unwanted.search(line))]
        if tier:
            return tier[-1]
    rest = [line for line in lines if not _RULE_LINE.match(line)]
    return rest[-1] if rest else "no output"
