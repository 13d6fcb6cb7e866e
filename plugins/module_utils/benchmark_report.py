# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers that turn ddp_bench.py results into a scaling table.

No I/O. Input is the JSON dict that ``roles/ddp_benchmark/files/ddp_bench.py``
writes (schema_version 1); throughputs are in samples per second (images/s
for the image models), and a "process" is one DDP rank (one GPU on GPU nodes).
"""
from __future__ import annotations

import math

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
