# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over ddp_bench.py results: one row, or the scaling table.

Documentation lives in the sidecar files benchmark_summary.yml and
benchmark_table.yml beside this one.
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.ddp.cluster.plugins.module_utils.benchmark_report import (
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


class FilterModule:
    """ddp.cluster benchmark filters."""

    def filters(self):
        return {
            "benchmark_summary": benchmark_summary,
            "benchmark_table": benchmark_table,
        }
