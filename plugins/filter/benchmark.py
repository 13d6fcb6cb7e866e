# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over ddp_bench.py results: one row, the scaling table, the matrix and its report,
and the Horovod launcher pieces.

Documentation lives in the sidecar files benchmark_*.yml beside this one.
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.report.benchmark import (
    build_matrix,
    build_report,
    failure_line,
    horovod_build_problems,
    horovod_command,
    horovod_unstarted_nodes,
    option_args,
    parse_horovod_check_build,
    render_table,
    summarize,
)


def _message(exc):
    """KeyError's str() wraps the message in quotes; use the bare text."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc)


def benchmark_summary(result):
    """One ddp_bench.py result dict -> a table row dict (samples/s)."""
    try:
        return summarize(result)
    except (KeyError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_summary: %s" % _message(exc))


def benchmark_table(results):
    """A list of ddp_bench.py result dicts -> a Markdown scaling table string."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("benchmark_table: expected a list of benchmark results, got %s" % type(results).__name__)
    try:
        return render_table([summarize(r) for r in results])
    except (KeyError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_table: %s" % _message(exc))


def benchmark_matrix(hosts, head, nproc_per_node, scopes=None, variants=None, on_gpu=False, launchers=None):
    """Hosts, head, processes per node -> the matrix runs (see module_utils build_matrix)."""
    try:
        return build_matrix(hosts, head, nproc_per_node, scopes if scopes is not None else ("one_process", "one_node",
                                                                                            "all_nodes"),
                            variants or [], bool(on_gpu), launchers if launchers is not None else ("torchrun",))
    except (KeyError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_matrix: %s" % _message(exc))


def benchmark_option_args(options):
    """A dict of ddp_bench.py options -> ['--name=value', ...]."""
    if not isinstance(options, dict):
        raise AnsibleFilterError("benchmark_option_args: expected a dict, got %s" % type(options).__name__)
    return option_args(options)


def benchmark_report(runs, matrix_id, collection_version, launcher="torchrun", skipped=None, previous=None,
                     compare_to=None, threshold=0.10, horovod_check=None, accounting=None):
    """Matrix runs with their results -> the report dict (rows, comparison, csv, markdown)."""
    previous_rows = None
    if previous is not None:
        if not isinstance(previous, dict) or not isinstance(previous.get("rows"), list):
            raise AnsibleFilterError("benchmark_report: the previous report has no 'rows' list (is %s a results.json "
                                     "written by this role?)" % (compare_to or "it"))
        previous_rows = previous["rows"]
    try:
        return build_report(runs, matrix_id, collection_version, launcher, skipped or [], previous_rows, compare_to,
                            threshold, parse_horovod_check_build(str(horovod_check)) if horovod_check else None,
                            accounting or None)
    except (KeyError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_report: %s" % _message(exc))


def benchmark_horovod_check(text, controller="gloo", need_nccl=False):
    """horovodrun --check-build output -> {build, problems}."""
    try:
        parsed = parse_horovod_check_build(str(text))
        return {"build": parsed, "problems": horovod_build_problems(parsed, controller, bool(need_nccl))}
    except (KeyError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_horovod_check: %s" % _message(exc))


def benchmark_horovod_command(hosts, slots, program, environ, controller="gloo", ssh_port=None,
                              network_interface=None):
    """Hosts, slots, rank program, environment -> {argv, np, forwarded} for horovodrun or mpirun."""
    try:
        return horovod_command(list(hosts), slots, list(program), dict(environ), controller, ssh_port,
                               network_interface)
    except (KeyError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_horovod_command: %s" % _message(exc))


def benchmark_horovod_unstarted(lines, hosts, names=None, slots=1):
    """Launcher output lines, -H hosts, inventory names, ranks per host -> [{host, reason}] of the nodes it names."""
    try:
        return horovod_unstarted_nodes(list(lines), list(hosts), None if names is None else list(names), slots)
    except (ValueError, TypeError) as exc:
        raise AnsibleFilterError("benchmark_horovod_unstarted: %s" % _message(exc))


def benchmark_failure_line(lines):
    """A failed launcher's stderr lines -> the one line that says what went wrong (see module_utils failure_line)."""
    if lines is not None and not isinstance(lines, (list, tuple)):
        raise AnsibleFilterError("benchmark_failure_line: expected a list of lines, got %s" % type(lines).__name__)
    return failure_line(lines)


class FilterModule:
    """ddp.cluster benchmark filters."""

    def filters(self):
        return {
            "benchmark_summary": benchmark_summary,
            "benchmark_table": benchmark_table,
            "benchmark_matrix": benchmark_matrix,
            "benchmark_option_args": benchmark_option_args,
            "benchmark_report": benchmark_report,
            "benchmark_horovod_check": benchmark_horovod_check,
            "benchmark_horovod_command": benchmark_horovod_command,
            "benchmark_horovod_unstarted": benchmark_horovod_unstarted,
            "benchmark_failure_line": benchmark_failure_line,
        }
