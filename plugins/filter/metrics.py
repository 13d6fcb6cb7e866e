# Copyright: ddp.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that render metrics for node exporter's textfile collector: thin wrappers over
plugins/module_utils/report/metrics.py (pure, unit-tested). Documentation: one YAML file per filter beside this one."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.ddp.cluster.plugins.module_utils.report import metrics


def benchmark_metrics(rows, finished_at):
    """The benchmark report's rows -> the text of ddp_benchmark.prom."""
    try:
        return metrics.render(metrics.benchmark_samples(rows or [], float(finished_at)))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("benchmark_metrics: %s" % exc)


class FilterModule(object):
    """ddp.cluster metrics filters."""

    def filters(self):
        return {"benchmark_metrics": benchmark_metrics}
